"""A session whose workers' Python lacks the sink: register(spark) says which Python and why.

The usual notebook slip: the session is built in an interpreter that has the package, but Spark
starts its Python workers with PYSPARK_PYTHON (here a bare virtualenv made for the test, the same
Python version, no packages). The child (worker_python_child.py) records what Spark says on its
own (DATA_SOURCE_NOT_FOUND without register, ModuleNotFoundError after
``spark.dataSource.register``) and what ``kafka_sink.spark.register`` says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

import kafka_sink.spark

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parent / "worker_python_child.py"


@pytest.fixture(scope="module")
def bare_worker_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    bare = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False).create(bare)
    python = bare / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # workers inherit it
    env["PYSPARK_PYTHON"] = str(python)
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    done = subprocess.run(
        [sys.executable, str(CHILD), str(ROOT)],
        env=env,
        cwd=str(tmp_path_factory.mktemp("cwd")),  # not the source tree: discovery must miss it
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    result["python"] = str(python)
    return result


def test_register_names_the_workers_python_and_the_setting(bare_worker_run) -> None:
    message = bare_worker_run["errors"]["register"]
    assert message is not None, "register() accepted workers that cannot import the sink"
    assert "\n" not in message
    assert message.startswith(
        "SinkWorkerError: format('pykafka') cannot run in this session's workers: Spark starts "
        f"them with {bare_worker_run['python']} (Python "
    )
    assert "cannot import kafka_sink" in message
    assert "Fix: set PYSPARK_PYTHON to an interpreter that has pykafka-sink installed" in message
    assert sys.executable in message  # the session's own interpreter, for contrast
    # One tiny job: seconds, not a task timeout.
    assert bare_worker_run["register_s"] < 120


def test_what_spark_says_without_it(bare_worker_run) -> None:
    # The errors README's troubleshooting section quotes.
    errors = bare_worker_run["errors"]
    assert (
        "[DATA_SOURCE_NOT_FOUND] Failed to find the data source: pykafka." in errors["discovered"]
    )
    assert "[PYTHON_DATA_SOURCE_ERROR]" in errors["registered"]
    assert "ModuleNotFoundError: No module named 'kafka_sink'" in errors["registered"]


def test_register_passes_when_the_workers_have_the_sink(spark) -> None:
    kafka_sink.spark.register(spark)  # the shared session's workers run this interpreter
