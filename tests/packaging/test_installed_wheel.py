"""The package as users get it: a wheel in a fresh virtualenv, used outside the checkout.

The module builds the wheel from a copy of the project, creates a virtualenv without pip and
installs the wheel, pyspark and kafka-python into it with the versions of the test environment
(constraints from ``pip freeze``, so pip reuses what it has instead of resolving anew). Then,
from an empty directory and with nothing pointing at the checkout (no PYTHONPATH, no
KAFKA_JARS_DIR, a fresh per-user cache), it runs what README and docs/testing.md tell users to run:

1. ``python -m kafka_sink.testing fetch --offline``: Maven copies the broker jars from the local
   repository (``~/.m2``, filled by ``make setup``) into the per-user cache;
2. ``from kafka_sink.testing import LocalKafka``: a broker from those jars, found without
   settings; records sent with ``kafka_sink.KafkaProducer`` are read back with kafka-python;
3. a classic ``local[2]`` SparkSession writes a DataFrame with ``format("pykafka")`` and no
   ``register`` call (the installed ``pyspark_pykafka`` is discovered), Python workers running
   the virtualenv's interpreter; kafka-python reads every row back;
4. a Spark Connect client (``remote("local[2]")``, the server in the same process) writes a batch
   and a streaming query through the discovered source, again without ``register``.

Every module the script and the Spark workers import must come from the virtualenv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafka_sink.testing.oracle import create_topic, read_all

ROOT = Path(__file__).resolve().parents[2]
CONNECT_CLIENT = ROOT / "tests" / "spark" / "connect_client.py"

# About 90 s on the 2-core development machine (wheel ~10 s, virtualenv and install ~25 s, the
# user flow ~55 s), most of it JVM start-ups: slow, so it runs in CI but can be left out locally.
pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.slow]

_PROJECT_FILES = ("pyproject.toml", "README.md", "kafka_sink", "pyspark_pykafka")
_STEP_TIMEOUT_S = 600

SCRIPT = r"""
import json
import sys

from kafka_sink.testing import LocalKafka

import kafka_sink
import pyspark_pykafka
from kafka_sink import KafkaProducer
from kafka_sink.testing.oracle import create_topic, read_all
from kafka_sink.testing.prerequisites import find_conf_dir

out = {
    "kafka_sink": kafka_sink.__file__,
    "pyspark_pykafka": pyspark_pykafka.__file__,
    "conf": str(find_conf_dir()),
}
with LocalKafka(share_classes=False) as kafka:
    bootstrap = kafka.bootstrap_servers
    out["jars"] = kafka._classpath

    create_topic(bootstrap, "round-trip", partitions=1)
    with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
        futures = [producer.send("round-trip", f"value-{i}", f"key-{i}") for i in range(10)]
        out["acked"] = [f.get(timeout=60).offset for f in futures]
    out["round_trip"] = [
        [r.key.decode(), r.value.decode(), r.offset]
        for r in read_all(bootstrap, "round-trip", expected=10)
    ]

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.api.mode", "classic")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    out["session"] = type(spark).__module__
    out["worker"] = (
        spark.sparkContext.parallelize([0], 1)
        .map(lambda _: [__import__("kafka_sink").__file__, __import__("sys").executable])
        .collect()[0]
    )
    create_topic(bootstrap, "from-spark", partitions=3)
    (
        spark.range(0, 300, numPartitions=2)
        .selectExpr("CAST(id AS STRING) AS key", "concat('row-', CAST(id AS STRING)) AS value")
        .write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "from-spark")
        .save()
    )
    spark.stop()
    out["from_spark"] = [
        [r.key.decode(), r.value.decode(), r.partition]
        for r in read_all(bootstrap, "from-spark", expected=300)
    ]
print("RESULT " + json.dumps(out))
"""


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    python: Path
    base: Path
    build_s: float
    install_s: float


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=_STEP_TIMEOUT_S,
        check=False,
        **kwargs,
    )
    assert done.returncode == 0, (
        f"$ {' '.join(cmd)}\nexit {done.returncode}\n"
        f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-5000:]}"
    )
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in _PROJECT_FILES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    began = time.monotonic()
    # The path must contain a slash, or pip takes it for a project name on the index.
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(base / "dist"),
            f"{src}/",
        ]
    )
    [wheel] = (base / "dist").glob("pykafka_sink-*.whl")
    build_s = time.monotonic() - began

    began = time.monotonic()
    freeze = _run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"]).stdout
    constraints = base / "constraints.txt"
    constraints.write_text(freeze)
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q"]
    _run([*install, str(wheel), "pyspark[connect]", "kafka-python", "-c", str(constraints)])
    install_s = time.monotonic() - began
    try:
        yield Installed(wheel, venv, python, base, build_s, install_s)
    finally:
        # About 800 MB (pyspark): do not leave it to pytest's retention of old temp directories.
        shutil.rmtree(venv, ignore_errors=True)


def _user_env(installed: Installed, home: Path) -> dict[str, str]:
    """A user's shell with the virtualenv activated, and nothing that leads to the checkout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYSPARK_", "SPARK_", "KAFKA_", "PYTHON", "VIRTUAL_ENV"))
    }
    env["PATH"] = os.pathsep.join([str(installed.venv / "bin"), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = str(installed.venv)
    env["XDG_CACHE_HOME"] = str(home / ".cache")
    env["PYSPARK_PYTHON"] = str(installed.python)
    env["PYSPARK_DRIVER_PYTHON"] = str(installed.python)
    return env


def test_the_wheel_ships_the_broker_templates_and_poms(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
    for name in (
        "broker-single.properties",
        "broker-cluster.properties",
        "log4j2-broker.properties",
        "kafka-broker.pom.xml",
        "schema-registry.pom.xml",
    ):
        assert f"kafka_sink/testing/conf/{name}" in names
    assert "pyspark_pykafka/__init__.py" in names
    assert "kafka_sink/py.typed" in names


def test_fetch_local_kafka_and_spark_from_the_installed_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    workdir = tmp_path / "elsewhere"
    workdir.mkdir(parents=True)
    env = _user_env(installed, home)
    python = str(installed.python)

    began = time.monotonic()
    fetched = _run([python, "-m", "kafka_sink.testing", "fetch", "--offline"], cwd=workdir, env=env)
    fetch_s = time.monotonic() - began
    jars = home / ".cache" / "pykafka" / "kafka" / "4.3.1" / "lib"
    assert fetched.stdout.strip() == str(jars)
    assert (jars / "kafka_2.13-4.3.1.jar").is_file()
    assert (jars / ".fetched").is_file()

    script = workdir / "use_it.py"
    script.write_text(SCRIPT)
    began = time.monotonic()
    done = _run([python, str(script)], cwd=workdir, env=env)
    run_s = time.monotonic() - began
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    out = json.loads(line.removeprefix("RESULT "))

    site = str(installed.venv)
    for key in ("kafka_sink", "pyspark_pykafka", "conf"):
        assert out[key].startswith(site), (key, out[key])
        assert not out[key].startswith(str(ROOT)), (key, out[key])
    assert out["conf"].endswith("/site-packages/kafka_sink/testing/conf")
    assert out["jars"] == f"{jars}/*"
    worker_module, worker_python = out["worker"]
    assert worker_module.startswith(site), worker_module
    assert worker_python == python
    assert "connect" not in out["session"]

    assert out["acked"] == list(range(10))
    assert out["round_trip"] == [[f"key-{i}", f"value-{i}", i] for i in range(10)]

    rows = out["from_spark"]
    assert len(rows) == 300
    assert sorted((k, v) for k, v, _ in rows) == sorted((str(i), f"row-{i}") for i in range(300))
    # Keyed records are spread over the three partitions by the key's hash.
    assert {p for _, _, p in rows} == {0, 1, 2}

    print(
        f"wheel build {installed.build_s:.1f}s, venv+install {installed.install_s:.1f}s, "
        f"fetch --offline {fetch_s:.1f}s, LocalKafka+Spark {run_s:.1f}s"
    )


def test_spark_connect_discovers_the_installed_wheel(
    installed: Installed, tmp_path: Path, kafka_bootstrap: str
) -> None:
    workdir = tmp_path / "elsewhere"
    inputs = workdir / "in"
    inputs.mkdir(parents=True)
    for n, ids in enumerate((range(0, 30), range(30, 50))):
        tmp = inputs / f".f{n}.tmp"
        tmp.write_text("".join(json.dumps({"id": i, "k": f"k{i % 3}"}) + "\n" for i in ids))
        tmp.rename(inputs / f"f{n}.json")
    client = workdir / "connect_client.py"
    shutil.copy2(CONNECT_CLIENT, client)
    suffix = f"{os.getpid()}-{int(time.time() * 1000)}"
    batch_topic, stream_topic = f"wheel-connect-batch-{suffix}", f"wheel-connect-stream-{suffix}"
    create_topic(kafka_bootstrap, batch_topic, partitions=2)
    create_topic(kafka_bootstrap, stream_topic, partitions=3)
    rows = [[f"k{i % 4}", f"v{i}"] for i in range(20)]
    plan = [
        (
            "batch",
            {"kind": "write", "bootstrap": kafka_bootstrap, "topic": batch_topic, "rows": rows},
        ),
        (
            "stream",
            {
                "kind": "stream",
                "bootstrap": kafka_bootstrap,
                "topic": stream_topic,
                "input_dir": str(inputs),
                "checkpoint": str(workdir / "ck"),
                "timeout_s": 240,
            },
        ),
    ]
    env = _user_env(installed, tmp_path / "home")
    env["PYSPARK_SUBMIT_ARGS"] = (
        "--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
        "--driver-memory 1g pyspark-shell"
    )
    done = _run([str(installed.python), str(client), json.dumps(plan)], cwd=workdir, env=env)
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    out = json.loads(line.removeprefix("RESULT "))
    assert out["session_type"] == "pyspark.sql.connect.session.SparkSession"
    assert out["batch"] == {"ok": True}, out["batch"]
    assert out["stream"] == {"ok": True}, out["stream"]

    batch = read_all(kafka_bootstrap, batch_topic, expected=len(rows))
    assert sorted((r.key.decode(), r.value.decode()) for r in batch) == sorted(map(tuple, rows))
    stream = read_all(kafka_bootstrap, stream_topic, expected=50)
    assert sorted(int(r.value) for r in stream) == list(range(50))
    assert sorted((workdir / "ck" / "pykafka-commits").iterdir())  # the commit log, server side
