"""The jobs' command lines and option files, without starting Spark."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
JOBS = ROOT / "jobs"


def _common():
    spec = importlib.util.spec_from_file_location("jobs_common", JOBS / "_common.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(job: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(JOBS / job), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("job", ["stream_write.py", "batch_write.py", "demo.py"])
def test_help(job: str) -> None:
    done = _run(job, "--help")
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_example_properties_are_valid_sink_options() -> None:
    from kafka_sink.spark.options import SinkOptions

    options = _common().read_properties(ROOT / "conf" / "sink.example.properties")
    assert options["kafka.bootstrap.servers"] == "127.0.0.1:9092"
    SinkOptions.from_options({k.lower(): v for k, v in options.items()}).validate_producer_config()


def test_flags_override_the_options_file(tmp_path) -> None:
    common = _common()
    props = tmp_path / "sink.properties"
    props.write_text("# comment\nkafka.bootstrap.servers=a:1\ntopic=t1\nkafka.acks=1\n")
    parser = __import__("argparse").ArgumentParser()
    common.add_sink_arguments(parser)
    args = parser.parse_args(
        ["--options-file", str(props), "--topic", "t2", "--option", "kafka.acks=all"]
    )
    assert common.sink_options(args) == {
        "kafka.bootstrap.servers": "a:1",
        "topic": "t2",
        "kafka.acks": "all",
    }
    assert "hunter2" not in common.describe({"kafka.sasl.jaas.config": "password=hunter2"})


def test_describe_masks_every_secret_producer_key() -> None:
    from kafka_sink.net.config import SECRET_KEYS

    common = _common()
    shown = common.describe({f"kafka.{key}": f"s3cret-{i}" for i, key in enumerate(SECRET_KEYS)})
    assert "s3cret" not in shown
    assert "kafka.ssl.keystore.key=***" in shown
    assert "kafka.acks=all" in common.describe({"kafka.acks": "all"})


def test_malformed_properties_line_is_not_echoed(tmp_path) -> None:
    props = tmp_path / "sink.properties"
    props.write_text("kafka.bootstrap.servers=a:1\nkafka.sasl.password: hunter2\n")
    with pytest.raises(SystemExit) as info:
        _common().read_properties(props)
    message = str(info.value)
    assert "hunter2" not in message
    assert f"{props}:2" in message


def test_commit_log_flag_keeps_store_uris(tmp_path) -> None:
    common = _common()
    parser = __import__("argparse").ArgumentParser()
    common.add_sink_arguments(parser)
    base = ["--bootstrap-servers", "a:1", "--commit-log"]
    args = parser.parse_args([*base, "s3a://bucket/commits"])
    assert common.sink_options(args)["commitLog"] == "s3a://bucket/commits"
    args = parser.parse_args([*base, "rel/commits"])
    assert common.sink_options(args)["commitLog"] == str(Path("rel/commits").resolve())


def test_configured_worker_python_wins_over_the_environment() -> None:
    common = _common()
    env = {"PYSPARK_PYTHON": "/opt/venv/bin/python"}
    assert common.worker_python("./environment/bin/python", env) == "./environment/bin/python"
    assert common.worker_python(None, env) == "/opt/venv/bin/python"
    assert common.worker_python(None, {}) == sys.executable


def test_relative_worker_python_must_exist_on_the_driver(tmp_path) -> None:
    common = _common()
    assert common.driver_cannot_run(sys.executable, str(tmp_path)) is None
    assert common.driver_cannot_run("python3", str(tmp_path)) is None
    problem = common.driver_cannot_run("./environment/bin/python", str(tmp_path))
    assert problem is not None
    assert "'./environment/bin/python'" in problem and str(tmp_path) in problem
    assert "unpack the archive" in problem
    (tmp_path / "environment" / "bin").mkdir(parents=True)
    (tmp_path / "environment" / "bin" / "python").write_text("")
    assert common.driver_cannot_run("./environment/bin/python", str(tmp_path)) is None


def test_discovered_source_bound_to_another_python_is_refused(tmp_path) -> None:
    common = _common()
    assert common.source_mismatch(sys.executable, sys.executable) is None
    link = tmp_path / "python"
    link.symlink_to(sys.executable)
    assert common.source_mismatch(str(link), sys.executable) is None
    problem = common.source_mismatch("/usr/bin/python3", "./environment/bin/python")
    assert problem is not None
    assert "PYSPARK_DRIVER_PYTHON=./environment/bin/python" in problem


def test_available_now_excludes_run_seconds() -> None:
    done = _run("stream_write.py", "--available-now", "--run-seconds", "5")
    assert done.returncode == 2
    assert "--available-now stops by itself" in done.stderr


def test_the_demo_refuses_a_kill_with_nothing_left_to_restart() -> None:
    done = _run("demo.py", "--files", "3", "--kill-after", "2")
    assert done.returncode == 2
    assert "--kill-after must leave at least two files" in done.stderr
