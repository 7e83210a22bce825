"""The jobs on a Spark standalone cluster (a master, two workers), with the package shipped.

Executors get kafka_sink and its dependencies only from a packed virtualenv given to
``spark.archives`` (unpacked as ``./environment`` in each executor's directory): the workers run
with no path to the test's virtualenv, and the environment of every submission also carries a
competing ``PYSPARK_PYTHON`` (the test's interpreter), which the configured
``spark.pyspark.python`` must override. The driver runs in client mode from a directory holding the
same environment unpacked: the sink runs Python on the driver too, with the executors' interpreter
path. What lands in Kafka is read back with kafka-python, as in the local tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sparkutil import (
    assert_nothing_left_open,
    commit_docs,
    committed_ranges,
    observed_ranges,
)
from standalone import (
    ROOT,
    SPARK_HOME,
    ClusterStartError,
    ShippedEnvironment,
    StandaloneCluster,
    build_environment,
)

from kafka_sink.records.murmur2 import partition_for_key
from kafka_sink.testing.oracle import read_all

pytestmark = pytest.mark.slow

JOBS = ROOT / "jobs"
SUBMIT_TIMEOUT_S = 420
# Record timestamps an hour back: older than the broker's retention (7 days by default), records
# would be deleted by its first retention check, 30 s after it starts, before being read back.
BASE_TS_MS = (int(time.time()) - 3600) * 1000


@pytest.fixture(scope="session")
def shipped_env(tmp_path_factory: pytest.TempPathFactory) -> ShippedEnvironment:
    env = build_environment(tmp_path_factory.mktemp("shipped-env"))
    # PySpark refuses workers whose Python differs from the driver's in its minor version.
    assert env.python_version == f"{sys.version_info[0]}.{sys.version_info[1]}", env
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    standalone = StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2, cores=1)
    try:
        standalone.start()
    except ClusterStartError as exc:
        pytest.fail(f"no Spark standalone cluster for the tests: {exc}", pytrace=False)
    try:
        yield standalone
    finally:
        standalone.close()


@dataclass
class Client:
    """Runs drivers in client mode against ``cluster``, shipping ``env``, from ``directory``.

    ``directory`` holds the shipped archive unpacked as ``./environment``: the driver's own
    interpreter, and the one the sink runs on the driver, by the executors' relative path.
    """

    cluster: StandaloneCluster
    env: ShippedEnvironment
    directory: Path

    def conf(self) -> dict[str, str]:
        return {
            "spark.master": self.cluster.url,
            "spark.archives": f"{self.env.archive}#environment",
            "spark.pyspark.python": "./environment/bin/python",
            "spark.pyspark.driver.python": "./environment/bin/python",
            "spark.driver.memory": "512m",
            "spark.executor.memory": "512m",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            # Both executors take part: tasks start once both registered (a bounded wait).
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
            "spark.sql.shuffle.partitions": "2",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
        }

    def environ(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env.update(
            SPARK_HOME=str(SPARK_HOME),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_CONF_DIR=str(self.directory / "conf"),
            # What `make` exports: the configured spark.pyspark.python must win over it.
            PYSPARK_PYTHON=sys.executable,
            # The JVM registers the pyspark_* data sources it discovers with this interpreter
            # and runs them with it on the executors too: the shipped one, by the same path.
            PYSPARK_DRIVER_PYTHON="./environment/bin/python",
        )
        env.update(extra)
        return env

    def run(self, cmd: list[str], env: dict[str, str], name: str) -> str:
        """Run a driver to completion (bounded); its output and the cluster's logs on failure."""
        log = self.directory / f"{name}.log"
        started = time.monotonic()
        with open(log, "w", encoding="utf-8") as out:
            try:
                done = subprocess.run(
                    cmd,
                    cwd=str(self.directory),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=SUBMIT_TIMEOUT_S,
                    check=False,
                )
                code: int | None = done.returncode
            except subprocess.TimeoutExpired:
                code = None
        text = log.read_text(encoding="utf-8", errors="replace")
        if code != 0:
            kept = [line for line in text.splitlines() if not line.lstrip().startswith("at ")]
            what = "timed out" if code is None else f"exited {code}"
            pytest.fail(
                f"{name} {what} after {time.monotonic() - started:.0f} s: {' '.join(cmd)}\n"
                + "\n".join(kept[-60:])
                + f"\n=== cluster logs\n{self.cluster.logs()}",
                pytrace=False,
            )
        return text

    def submit(self, job: str, args: list[str]) -> str:
        """``spark-submit --master spark://... --archives env.tar.gz#environment jobs/<job>``."""
        conf = self.conf()
        cmd = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", conf.pop("spark.master")]
        cmd += ["--archives", conf.pop("spark.archives")]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += [str(JOBS / job), *args]
        return self.run(cmd, self.environ(), Path(job).stem)


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory,
    cluster: StandaloneCluster,
    shipped_env: ShippedEnvironment,
) -> Client:
    directory = tmp_path_factory.mktemp("submit")
    with tarfile.open(shipped_env.archive) as tar:
        tar.extractall(directory / "environment", filter="tar")
    (directory / "conf").mkdir()
    return Client(cluster, shipped_env, directory)


def test_executors_import_the_shipped_package(client: Client) -> None:
    """A plain ``python job.py`` launch, settings from spark-defaults.conf: executors use them."""
    conf_dir = client.directory / "probe-conf"
    conf_dir.mkdir()
    lines = [f"{k} {v}" for k, v in client.conf().items()]
    (conf_dir / "spark-defaults.conf").write_text("\n".join(lines) + "\n")
    zips = sorted(str(p) for p in (SPARK_HOME / "python" / "lib").glob("*.zip"))
    env = client.environ(SPARK_CONF_DIR=str(conf_dir), PYTHONPATH=os.pathsep.join(zips))
    cmd = ["./environment/bin/python", str(Path(__file__).with_name("standalone_probe.py"))]
    output = client.run([*cmd, str(JOBS)], env, "probe")

    reports = [json.loads(line[6:]) for line in output.splitlines() if line.startswith("PROBE ")]
    assert len(reports) == 4, output[-3000:]
    workers = client.cluster.workdir.resolve()
    for report in reports:
        cwd = Path(report["cwd"]).resolve()
        # Each executor runs in its worker's directory and imports from its unpacked copy.
        assert workers in cwd.parents, report
        assert report["executable"] == str(cwd / "environment" / "bin" / "python"), report
        assert Path(report["kafka_sink"]).resolve().is_relative_to(cwd / "environment"), report
        assert Path(report["pyarrow"]).resolve().is_relative_to(cwd / "environment"), report
        assert report["version"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
        assert not any(str(ROOT / ".venv") in p and "pyspark" not in p for p in report["path"])
    assert {r["cwd"] for r in reports} <= {str(p) for p in workers.glob("worker-*/app-*/*")}


def _batch_row(i: int) -> dict:
    headers = [{"key": "h", "value": f"v{i}".encode()}, {"key": "e", "value": None}]
    return {
        "key": None if i % 7 == 0 else f"k{i % 13}",
        "value": f"value-{i}".encode(),
        "partition": i % 3 if i % 5 == 0 else None,
        "headers": headers if i % 4 == 0 else [],
        "timestamp": BASE_TS_MS + i,
        "extra": "x",
    }


BATCH_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("value", pa.binary()),
        ("partition", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ("timestamp", pa.int64()),
        ("extra", pa.string()),
    ]
)


def test_batch_job_on_standalone_cluster(
    client: Client, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    topic = topic_factory(partitions=3)
    rows = [_batch_row(i) for i in range(300)]
    source = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=BATCH_SCHEMA), source)
    log_dir = tmp_path / "commits"
    client.submit(
        "batch_write.py",
        [
            "--bootstrap-servers",
            kafka_bootstrap,
            "--topic",
            topic,
            "--input",
            str(source),
            "--partitions",
            "2",
            "--commit-log",
            str(log_dir),
            "--option",
            "kafka.linger.ms=5",
            "--spark-log-level",
            "WARN",
        ],
    )
    records = read_all(kafka_bootstrap, topic, expected=len(rows))
    assert len(records) == len(rows)
    by_value = {r.value: r for r in records}
    assert len(by_value) == len(rows)
    for row in rows:
        got = by_value[row["value"]]
        key = row["key"]
        assert got.key == (key.encode() if key is not None else None)
        assert got.headers == [(h["key"], h["value"]) for h in row["headers"]]
        assert got.timestamp_ms == row["timestamp"]
        if row["partition"] is not None:
            assert got.partition == row["partition"]
        elif key is not None:
            assert got.partition == partition_for_key(key.encode(), 3)
    [doc] = commit_docs(log_dir)
    assert doc["kind"] == "commit" and doc["mode"] == "append"
    assert doc["record_count"] == len(rows)
    assert doc["task_count"] == 2
    assert committed_ranges(doc) == observed_ranges(records)


def _write_json(directory: Path, start: int, count: int, name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for i in range(start, start + count):
            row = {"key": f"k{i % 5}", "value": str(i), "timestamp": BASE_TS_MS + i}
            f.write(json.dumps(row) + "\n")
    tmp.rename(directory / f"{name}.json")  # the file source must never see a partial file


def test_stream_job_on_standalone_cluster(
    client: Client, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    topic = topic_factory(partitions=3)
    inputs, checkpoint = tmp_path / "in", tmp_path / "ck"
    _write_json(inputs, 0, 60, "a")
    _write_json(inputs, 60, 40, "b")
    client.submit(
        "stream_write.py",
        [
            "--bootstrap-servers",
            kafka_bootstrap,
            "--topic",
            topic,
            "--source",
            "json",
            "--input",
            str(inputs),
            "--schema",
            "key STRING, value STRING, timestamp BIGINT",
            "--max-files-per-trigger",
            "1",
            "--available-now",
            "--checkpoint",
            str(checkpoint),
            "--option",
            "kafka.linger.ms=5",
            "--spark-log-level",
            "WARN",
        ],
    )
    records = read_all(kafka_bootstrap, topic, expected=100)
    assert sorted(int(r.value) for r in records) == list(range(100))
    for r in records:
        i = int(r.value)
        assert r.key == f"k{i % 5}".encode()
        assert r.timestamp_ms == BASE_TS_MS + i
        assert r.headers == []
    docs = commit_docs(checkpoint / "pykafka-commits")
    assert [d["batch_id"] for d in docs] == [0, 1]
    assert [d["record_count"] for d in docs] == [60, 40]
    observed = observed_ranges(records)
    first, second = committed_ranges(docs[0]), committed_ranges(docs[1])
    for tp, (lo, hi, n) in observed.items():
        parts = [r for r in (first.get(tp), second.get(tp)) if r is not None]
        assert min(p[0] for p in parts) == lo
        assert max(p[1] for p in parts) == hi
        assert sum(p[2] for p in parts) == n


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_speculative_copy_of_a_slow_task(
    client: Client, kafka_cluster, cluster_topic_factory, tmp_path, guarantee
) -> None:
    """Two attempts of one partition write (the slow first one, then Spark's speculative copy):
    with exactly-once a read_committed consumer reads every row once and nothing stays open; with
    at-least-once the first attempt's rows are read twice (so the test can fail)."""
    bootstrap = kafka_cluster.bootstrap_servers
    topic = cluster_topic_factory(
        partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"}
    )
    prefix = f"eos-spec-{uuid.uuid4().hex[:8]}"
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    conf = {
        **client.conf(),
        "spark.speculation": "true",
        "spark.speculation.interval": "200ms",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "1.5",
        "spark.speculation.minTaskRuntime": "1s",
    }
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in conf.items()))
    zips = sorted(str(p) for p in (SPARK_HOME / "python" / "lib").glob("*.zip"))
    env = client.environ(SPARK_CONF_DIR=str(conf_dir), PYTHONPATH=os.pathsep.join(zips))
    script = str(Path(__file__).with_name("standalone_speculation.py"))
    log_dir = tmp_path / "log"
    args = [str(JOBS), bootstrap, topic, guarantee, prefix, str(log_dir)]
    client.run(["./environment/bin/python", script, *args], env, f"speculation-{guarantee}")

    rows = 2000
    everything = read_all(bootstrap, topic, expected=rows)
    written_by = {
        (int(v.split(b":")[0]), int(v.split(b":")[1])) for v in (r.value for r in everything)
    }
    # Both attempts of partition 1 (ids 1000..1999) wrote rows.
    assert {a for i, a in written_by if i >= 1000} >= {0, 1}, sorted(written_by)[-3:]
    committed = read_all(bootstrap, topic, expected=rows, isolation_level="read_committed")
    counts = Counter(int(r.value.split(b":")[0]) for r in committed)
    assert set(counts) == set(range(rows))  # nothing lost either way
    duplicated = sum(1 for c in counts.values() if c > 1)
    [doc] = commit_docs(log_dir)
    assert doc["delivery_guarantee"] == guarantee
    if guarantee == "at-least-once":
        assert duplicated > 0
        return
    assert duplicated == 0, f"{duplicated} rows read twice by a read_committed consumer"
    # The winning copy's transaction was committed; the killed attempt's never was.
    assert {
        a
        for i, a in ((int(r.value.split(b":")[0]), int(r.value.split(b":")[1])) for r in committed)
        if i >= 1000
    } == {1}
    assert_nothing_left_open(bootstrap, topic, prefix)
