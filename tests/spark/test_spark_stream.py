"""Streaming writes through writeStream.format("pykafka"): append, complete, restart.

The input is a directory of JSON files (Spark's file source), so each micro-batch's content is
known exactly; ``availableNow`` runs every pending file and stops, which keeps the tests quick and
deterministic.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from sparkutil import KAFKA_OPTIONS, commit_docs, committed_ranges, observed_ranges

from kafka_sink.testing.oracle import read_all

INPUT_SCHEMA = "id BIGINT, k STRING, ts BIGINT"


def _write_inputs(directory: Path, start: int, count: int, name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for i in range(start, start + count):
            f.write(json.dumps({"id": i, "k": f"k{i % 5}", "ts": 1_650_000_000_000 + i}) + "\n")
    tmp.rename(directory / f"{name}.json")  # the file source must never see a partial file


def _stream(spark, input_dir: Path, **reader_options):
    reader = spark.readStream.schema(INPUT_SCHEMA)
    for k, v in reader_options.items():
        reader = reader.option(k, v)
    return reader.json(str(input_dir)).selectExpr(
        "k AS key",
        "CAST(id AS STRING) AS value",
        "ts AS timestamp",
        "array(named_struct('key', 'src', 'value', CAST(k AS BINARY))) AS headers",
    )


def _start(df, bootstrap: str, topic: str, checkpoint: Path, *, trigger: dict, mode="append"):
    writer = (
        df.writeStream.format("pykafka")
        .outputMode(mode)
        .option("kafka.bootstrap.servers", bootstrap)
        .options(**KAFKA_OPTIONS)
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
    )
    return writer.start()


def test_stream_append_lands_and_commit_log_matches(
    spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    topic = topic_factory(partitions=3)
    inputs, checkpoint = tmp_path / "in", tmp_path / "ck"
    _write_inputs(inputs, 0, 60, "a")
    _write_inputs(inputs, 60, 40, "b")
    query = _start(
        _stream(spark, inputs, maxFilesPerTrigger=1),
        kafka_bootstrap,
        topic,
        checkpoint,
        trigger={"availableNow": True},
    )
    query.awaitTermination(120)
    assert query.exception() is None
    records = read_all(kafka_bootstrap, topic, expected=100)
    assert sorted(int(r.value) for r in records) == list(range(100))
    for r in records:
        i = int(r.value)
        assert r.key == f"k{i % 5}".encode()
        assert r.timestamp_ms == 1_650_000_000_000 + i
        assert r.headers == [("src", f"k{i % 5}".encode())]
    docs = commit_docs(checkpoint / "pykafka-commits")
    assert [d["batch_id"] for d in docs] == [0, 1]
    assert [d["record_count"] for d in docs] == [60, 40]
    assert all(d["kind"] == "commit" and d["mode"] == "append" for d in docs)
    # Per partition, the two batches' ranges are adjacent and together cover what was read.
    observed = observed_ranges(records)
    first, second = committed_ranges(docs[0]), committed_ranges(docs[1])
    for tp, (lo, hi, n) in observed.items():
        parts = [r for r in (first.get(tp), second.get(tp)) if r is not None]
        assert min(p[0] for p in parts) == lo
        assert max(p[1] for p in parts) == hi
        assert sum(p[2] for p in parts) == n
        if tp in first and tp in second:
            assert first[tp][1] + 1 == second[tp][0]


def test_stream_stop_and_restart_from_checkpoint(
    spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    topic = topic_factory(partitions=2)
    inputs, checkpoint = tmp_path / "in", tmp_path / "ck"
    for n in range(3):
        _write_inputs(inputs, n * 20, 20, f"f{n}")
    query = _start(
        _stream(spark, inputs, maxFilesPerTrigger=1),
        kafka_bootstrap,
        topic,
        checkpoint,
        trigger={"processingTime": "2 seconds"},
    )
    # Stop once the first micro-batch is committed (more input is pending), between batches.
    deadline = time.monotonic() + 60
    while not (checkpoint / "commits" / "0").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    while query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()
    assert query.exception() is None
    _write_inputs(inputs, 60, 20, "f3")  # arrives while the query is down
    query = _start(
        _stream(spark, inputs, maxFilesPerTrigger=1),
        kafka_bootstrap,
        topic,
        checkpoint,
        trigger={"availableNow": True},
    )
    query.awaitTermination(120)
    assert query.exception() is None
    records = read_all(kafka_bootstrap, topic, expected=80)
    counts = Counter(int(r.value) for r in records)
    assert set(counts) == set(range(80))  # nothing lost
    docs = commit_docs(checkpoint / "pykafka-commits")
    # The restart continued from the checkpoint: batch 0 was not run again.
    assert [d["batch_id"] for d in docs] == list(range(len(docs)))
    assert not list((checkpoint / "pykafka-commits").glob("0.json.replaced-*"))
    # Every committed record is in Kafka; more may be (a batch cut short by stop() and re-run).
    replaced = commit_docs(checkpoint / "pykafka-commits", "*.json.replaced-*")
    assert sum(d["record_count"] for d in docs) >= 80
    assert sum(d["record_count"] for d in docs + replaced) <= len(records)


def test_stream_complete_mode_resends_the_table(
    spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    topic = topic_factory(partitions=1)
    inputs, checkpoint = tmp_path / "in", tmp_path / "ck"
    _write_inputs(inputs, 0, 10, "a")
    _write_inputs(inputs, 10, 15, "b")
    counts = (
        spark.readStream.schema(INPUT_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(inputs))
        .groupBy("k")
        .count()
        .selectExpr("k AS key", "CAST(count AS STRING) AS value")
    )
    query = _start(
        counts, kafka_bootstrap, topic, checkpoint, trigger={"availableNow": True}, mode="complete"
    )
    query.awaitTermination(120)
    assert query.exception() is None
    docs = commit_docs(checkpoint / "pykafka-commits")
    assert [d["mode"] for d in docs] == ["complete", "complete"]
    assert [d["record_count"] for d in docs] == [5, 5]
    records = read_all(kafka_bootstrap, topic, expected=10)
    last = {
        r.key: int(r.value) for r in records if r.offset >= docs[1]["offsets"][0]["first_offset"]
    }
    assert last == {f"k{j}".encode(): 5 for j in range(5)}


def test_stream_bad_schema_fails_the_query(spark, kafka_bootstrap, topic_factory, tmp_path) -> None:
    topic = topic_factory()
    inputs = tmp_path / "in"
    _write_inputs(inputs, 0, 3, "a")
    df = spark.readStream.schema(INPUT_SCHEMA).json(str(inputs)).selectExpr("id AS value")
    query = _start(df, kafka_bootstrap, topic, tmp_path / "ck", trigger={"availableNow": True})
    with pytest.raises(StreamingQueryException) as caught:
        query.awaitTermination(120)
    # The sink's message is one whole line of Spark's (README, "How errors look").
    assert (
        "kafka_sink.sink_errors.SinkSchemaError: column 'value' has unsupported type bigint: "
        "'value' must be string or binary. Fix: cast or serialize it, e.g. CAST(value AS "
        "STRING), to_json(struct(*)) or to_avro(...)."
    ) in str(caught.value).splitlines()
    assert read_all(kafka_bootstrap, topic) == []


def test_rate_source_timestamp_lands(spark, kafka_bootstrap, topic_factory, tmp_path) -> None:
    """The rate source's timestamp column becomes the record timestamp; the query stops cleanly."""
    topic = topic_factory(partitions=2)
    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 50)
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "timestamp")
    )
    query = _start(
        df, kafka_bootstrap, topic, tmp_path / "ck", trigger={"processingTime": "1 second"}
    )
    committed = 0
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and committed < 50:
            time.sleep(0.3)
            docs = commit_docs(tmp_path / "ck" / "pykafka-commits")
            committed = sum(d["record_count"] for d in docs)
    finally:
        query.stop()
    assert committed >= 50
    records = read_all(kafka_bootstrap, topic)
    assert records
    now_ms = time.time() * 1000
    assert all(now_ms - 120_000 < r.timestamp_ms <= now_ms for r in records)


def test_stream_task_failure_aborts_the_batch(
    spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    """A row with a null topic fails its task; the query stops and the abort is recorded."""
    topic = topic_factory()
    inputs, checkpoint = tmp_path / "in", tmp_path / "ck"
    _write_inputs(inputs, 0, 5, "a")
    df = (
        spark.readStream.schema(INPUT_SCHEMA)
        .json(str(inputs))
        .selectExpr("IF(id = 3, NULL, '" + topic + "') AS topic", "CAST(id AS STRING) AS value")
        .coalesce(1)
    )
    query = (
        df.writeStream.format("pykafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="has a null 'topic'"):
        query.awaitTermination(120)
    [aborted] = commit_docs(checkpoint / "pykafka-commits", "*.aborted.json")
    assert aborted["batch_id"] == 0 and aborted["failed_tasks"] == [0]
    assert not (checkpoint / "pykafka-commits" / "0.json").exists()
    assert read_all(kafka_bootstrap, topic) == []


def test_continuous_trigger_fails_the_query_before_an_epoch_is_marked_done(
    spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    # PySpark never calls a Python sink's write() under a continuous trigger: committing its
    # epochs would let the rate source's offsets advance past rows nobody wrote.
    topic = topic_factory(partitions=1)
    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 20)
        .option("numPartitions", 1)
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
    )
    checkpoint = tmp_path / "ck"
    query = _start(df, kafka_bootstrap, topic, checkpoint, trigger={"continuous": "1 second"})
    try:
        with pytest.raises(StreamingQueryException) as caught:
            # Without the check the query runs on and this returns False.
            assert query.awaitTermination(240), "the continuous query is still running"
    finally:
        query.stop()
    text = str(caught.value)
    assert (
        "kafka_sink.sink_errors.SinkModeError: format('pykafka') refuses this streaming query: "
        in text
    )
    assert "trigger(continuous=...)" in text
    assert "trigger(processingTime='1 second')" in text
    # No epoch is recorded as processed, so a restart with a micro-batch trigger re-reads them.
    commits = checkpoint / "commits"
    assert not commits.exists() or [p.name for p in commits.iterdir()] == []
    assert read_all(kafka_bootstrap, topic) == []
