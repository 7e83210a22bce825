"""format("pykafka") from a Spark Connect client: discovery, register(), streaming, errors, formats.

Each run is one Python process (``connect_client.py``) whose ``SparkSession.builder
.remote("local[2]")`` starts a local Connect server in-process, so the Connect session never
meets the classic SparkSession the other Spark tests share. Three runs, one server each:

- ``discovered``: the source tree on PYTHONPATH, which is what a normal install amounts to for
  PySpark's ``pyspark_*`` discovery (see test_spark_discovery.py); no register() call. Batch and
  streaming writes, and bad options on both.
- ``registered``: no PYTHONPATH, run from a scratch directory, so (with the editable install the
  suite runs from) discovery cannot see ``pyspark_pykafka``: the write fails until the client
  calls ``spark.dataSource.register(PyKafkaDataSource)``, then succeeds.
- ``test_connect_writes_registry_formats``: ``valueFormat=avro`` and ``jsonschema`` with a real
  Schema Registry, read back by confluent-kafka's deserializers against it.

The last two runs are marked slow (a server start each); ``-m "not slow"`` keeps one run.

A local Connect server always listens on port 15002; the client takes a machine-wide lock file
for it (see connect_client.py).
"""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from sparkutil import commit_docs, committed_ranges, observed_ranges

from kafka_sink.testing.oracle import create_topic, end_offsets, read_all

ROOT = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).resolve().parent / "connect_client.py"
RUN_TIMEOUT_S = 600.0

BATCH_ROWS = [[f"k{i % 4}", f"v{i}"] for i in range(20)]
# Two input files, one micro-batch each (maxFilesPerTrigger=1).
STREAM_FILES = [range(0, 30), range(30, 50)]
BAD_OPTION = {"linger.ms": "5"}
BAD_OPTION_TEXT = (
    "unknown option 'linger.ms' for format('pykafka'): did you mean 'kafka.linger.ms'? "
    "Fix: .option('kafka.linger.ms', ...)"
)


def _run(plan: list[tuple[str, dict[str, Any]]], cwd: Path, *, on_path: bool) -> dict[str, Any]:
    env = dict(os.environ)
    others = [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT
    ]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] * on_path + others)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Static settings go to the server's launch; set through the builder, a Connect client
    # warns that it cannot change them at runtime.
    env["PYSPARK_SUBMIT_ARGS"] = (
        "--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
        "--driver-memory 1g pyspark-shell"
    )
    done = subprocess.run(
        [sys.executable, str(CLIENT), json.dumps(plan)],
        env=env,
        cwd=str(cwd),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    assert result["session_type"] == "pyspark.sql.connect.session.SparkSession"
    return result


def _topic(bootstrap: str, name: str, partitions: int) -> str:
    topic = f"connect-{name}-{uuid.uuid4().hex[:10]}"
    create_topic(bootstrap, topic, partitions, 1, None)
    return topic


def _write_inputs(directory: Path) -> None:
    directory.mkdir(parents=True)
    for n, ids in enumerate(STREAM_FILES):
        tmp = directory / f".f{n}.tmp"
        tmp.write_text("".join(json.dumps({"id": i, "k": f"k{i % 3}"}) + "\n" for i in ids))
        tmp.rename(directory / f"f{n}.json")  # the file source must never see a partial file


def _discoverable_without_source_tree() -> bool:
    # A non-editable install puts pyspark_pykafka where pkgutil (and so PySpark) lists it.
    path = [p for p in sys.path if p and Path(p).resolve() != ROOT]
    return any(m.name == "pyspark_pykafka" for m in pkgutil.iter_modules(path))


@pytest.fixture(scope="module")
def discovered(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("connect-discovered")
    _write_inputs(base / "in")
    topics = {
        "batch": _topic(kafka_bootstrap, "batch", 2),
        "stream": _topic(kafka_bootstrap, "stream", 3),
        "bad": _topic(kafka_bootstrap, "bad", 1),
    }
    common = {"bootstrap": kafka_bootstrap}
    stream = {**common, "kind": "stream", "input_dir": str(base / "in"), "timeout_s": 180}
    plan = [
        ("batch", {**common, "kind": "write", "topic": topics["batch"], "rows": BATCH_ROWS}),
        ("stream", {**stream, "topic": topics["stream"], "checkpoint": str(base / "ck")}),
        (
            "bad_batch",
            {**common, "kind": "write", "topic": topics["bad"], "rows": BATCH_ROWS}
            | {"options": BAD_OPTION},
        ),
        (
            "bad_stream",
            {**stream, "topic": topics["bad"], "checkpoint": str(base / "ck-bad")}
            | {"options": BAD_OPTION},
        ),
        ("check_workers", {"kind": "check_workers"}),
    ]
    result = _run(plan, base, on_path=True)
    return {"result": result, "topics": topics, "checkpoint": base / "ck"}


@pytest.fixture(scope="module")
def registered(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("connect-registered")
    topic = _topic(kafka_bootstrap, "registered", 2)
    write = {"bootstrap": kafka_bootstrap, "kind": "write", "topic": topic, "rows": BATCH_ROWS}
    plan = [("before", write), ("register", {"kind": "register"}), ("after", write)]
    result = _run(plan, base, on_path=False)
    return {"result": result, "topic": topic}


def _assert_batch_landed(bootstrap: str, topic: str) -> None:
    records = read_all(bootstrap, topic, expected=len(BATCH_ROWS))
    got = sorted((r.key.decode(), r.value.decode()) for r in records)
    assert got == sorted((k, v) for k, v in BATCH_ROWS)


def test_connect_batch_write_finds_pykafka_without_register(discovered, kafka_bootstrap) -> None:
    assert discovered["result"]["batch"] == {"ok": True}, discovered["result"]
    _assert_batch_landed(kafka_bootstrap, discovered["topics"]["batch"])


# Its own server start (about 35 s on a loaded 2-core machine), on top of the discovered run's.
@pytest.mark.slow
def test_connect_register_from_client(registered, kafka_bootstrap) -> None:
    result = registered["result"]
    if _discoverable_without_source_tree():
        assert result["before"] == {"ok": True}
        writes = 2
    else:
        # Nothing found it before register(): the write after it is register()'s doing.
        assert "DATA_SOURCE_NOT_FOUND" in result["before"]["error"], result["before"]
        assert "pykafka" in result["before"]["error"]
        writes = 1
    assert result["register"] == {"ok": True}, result
    assert result["after"] == {"ok": True}, result
    records = read_all(kafka_bootstrap, registered["topic"], expected=writes * len(BATCH_ROWS))
    got = sorted((r.key.decode(), r.value.decode()) for r in records)
    assert got == sorted((k, v) for k, v in BATCH_ROWS * writes)


def test_connect_stream_write_lands_every_row_and_commits(discovered, kafka_bootstrap) -> None:
    assert discovered["result"]["stream"] == {"ok": True}, discovered["result"]
    total = sum(len(ids) for ids in STREAM_FILES)
    records = read_all(kafka_bootstrap, discovered["topics"]["stream"], expected=total)
    assert sorted(int(r.value) for r in records) == list(range(total))
    assert all(r.key == f"k{int(r.value) % 3}".encode() for r in records)
    checkpoint: Path = discovered["checkpoint"]
    assert (checkpoint / "commits" / "0").exists()
    assert (checkpoint / "commits" / "1").exists()
    docs = commit_docs(checkpoint / "pykafka-commits")
    assert [d["batch_id"] for d in docs] == [0, 1]
    assert [d["record_count"] for d in docs] == [len(ids) for ids in STREAM_FILES]
    assert all(d["kind"] == "commit" and d["mode"] == "append" for d in docs)
    # The commit files account for exactly the offsets a consumer read, per partition.
    committed: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for doc in docs:
        for tp, rng in committed_ranges(doc).items():
            committed.setdefault(tp, []).append(rng)
    for tp, (lo, hi, n) in observed_ranges(records).items():
        assert min(r[0] for r in committed[tp]) == lo
        assert max(r[1] for r in committed[tp]) == hi
        assert sum(r[2] for r in committed[tp]) == n
    assert set(committed) == set(observed_ranges(records))


def test_connect_register_checks_the_servers_workers(discovered) -> None:
    # The one-row job runs in the server's workers, shipped from the client.
    assert discovered["result"]["check_workers"] == {"ok": True}, discovered["result"]


def test_connect_bad_option_error_reaches_client(discovered, kafka_bootstrap) -> None:
    result = discovered["result"]
    batch, stream = result["bad_batch"], result["bad_stream"]
    assert batch["error_type"] == "AnalysisException", batch
    assert BAD_OPTION_TEXT in batch["error"]
    assert "SinkOptionError" in batch["error"]
    # Streaming: start() returned; the failure came from awaitTermination() on the client.
    assert stream.get("error_type") == "StreamingQueryException", stream
    assert BAD_OPTION_TEXT in stream["error"]
    assert "SinkOptionError" in stream["error"]
    # Refused on the server's driver before any task ran: nothing reached the topic.
    assert set(end_offsets(kafka_bootstrap, discovered["topics"]["bad"]).values()) == {0}


# Its own server start, as test_connect_register_from_client.
@pytest.mark.slow
def test_connect_writes_registry_formats(
    kafka_bootstrap: str, schema_registry: Any, tmp_path: Path
) -> None:
    """valueFormat=avro and =jsonschema through a Connect session, read back by confluent-kafka."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentRegistry
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    from kafka_sink.testing.registry_oracle import read_deserialized

    rows = 40
    value = "named_struct('id', id, 'name', IF(id % 2 = 0, NULL, concat('é', id))) AS value"
    registry = ConfluentRegistry({"url": schema_registry.url})
    readers = {
        "avro": AvroDeserializer(registry),
        "jsonschema": JSONDeserializer(None, None, registry),
    }
    topics = {fmt: _topic(kafka_bootstrap, fmt, 2) for fmt in readers}
    plan = [
        (
            fmt,
            {
                "kind": "write_sql",
                "rows": rows,
                "exprs": [value],
                "options": {
                    "kafka.bootstrap.servers": kafka_bootstrap,
                    "topic": topic,
                    "valueFormat": fmt,
                    "schema.registry.url": schema_registry.url,
                },
            },
        )
        for fmt, topic in topics.items()
    ]
    result = _run(plan, tmp_path, on_path=True)
    expected = [{"id": i, "name": None if i % 2 == 0 else f"é{i}"} for i in range(rows)]
    for fmt, topic in topics.items():
        assert result[fmt] == {"ok": True}, result
        read = read_deserialized(kafka_bootstrap, topic, readers[fmt], rows, timeout_s=60)
        assert sorted(read, key=lambda v: v["id"]) == expected
