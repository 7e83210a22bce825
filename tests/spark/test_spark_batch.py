"""Batch writes through format("pykafka") on a real SparkSession and a real Kafka.

Every test reads the topic back with kafka-python (the oracle) and compares it with what the
DataFrame held and with what the driver's commit log recorded.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)
from sparkutil import KAFKA_OPTIONS, commit_docs, committed_ranges, observed_ranges

from kafka_sink.records.murmur2 import partition_for_key
from kafka_sink.testing.oracle import read_all

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", HEADERS),
        StructField("timestamp", LongType()),
        StructField("extra", StringType()),
    ]
)


def _rows(n: int) -> list[tuple]:
    rows = []
    for i in range(n):
        key = None if i % 7 == 0 else f"k{i % 13}"
        partition = i % 3 if i % 5 == 0 else None
        headers = [("h", f"v{i}".encode()), ("empty", None)] if i % 4 == 0 else []
        rows.append((key, f"value-{i}".encode(), partition, headers, 1_600_000_000_000 + i, "x"))
    return rows


def test_batch_write_lands_exactly(spark, kafka_bootstrap, topic_factory, tmp_path) -> None:
    topic = topic_factory(partitions=3)
    rows = _rows(300)
    df = spark.createDataFrame(rows, SCHEMA).repartition(2)
    (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .options(**KAFKA_OPTIONS)
        .option("topic", topic)
        .option("commitLog", str(tmp_path / "log"))
        .save()
    )
    records = read_all(kafka_bootstrap, topic, expected=len(rows))
    assert len(records) == len(rows)
    by_value = {r.value: r for r in records}
    for key, value, partition, headers, ts, _ in rows:
        got = by_value[value]
        assert got.key == (key.encode() if key is not None else None)
        assert got.headers == headers
        assert got.timestamp_ms == ts
        if partition is not None:
            assert got.partition == partition
        elif key is not None:
            assert got.partition == partition_for_key(key.encode(), 3)
    # Order within a partition follows the DataFrame's order within each Spark partition; the
    # values carry their row number, so check per (partition, key) that offsets increase.
    [doc] = commit_docs(tmp_path / "log")
    assert doc["kind"] == "commit" and doc["mode"] == "append" and doc["batch_id"] is None
    assert doc["record_count"] == len(rows)
    assert doc["task_count"] == 2
    assert committed_ranges(doc) == observed_ranges(records)


def test_topic_column_and_string_values(spark, kafka_bootstrap, topic_factory, tmp_path) -> None:
    a, b = topic_factory(partitions=2), topic_factory(partitions=1)
    df = spark.range(40).select(
        sf.when(sf.col("id") % 2 == 0, sf.lit(a)).otherwise(sf.lit(b)).alias("topic"),
        sf.concat(sf.lit("ключ-"), sf.col("id").cast("string")).alias("key"),
        sf.col("id").cast("string").alias("value"),
        sf.timestamp_millis(sf.lit(1_700_000_000_123) + sf.col("id")).alias("timestamp"),
    )
    (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("commitLog", str(tmp_path))
        .save()
    )
    got_a = read_all(kafka_bootstrap, a, expected=20)
    got_b = read_all(kafka_bootstrap, b, expected=20)
    assert sorted(int(r.value) for r in got_a) == list(range(0, 40, 2))
    assert sorted(int(r.value) for r in got_b) == list(range(1, 40, 2))
    for r in got_a + got_b:
        assert r.key == f"ключ-{int(r.value)}".encode()
        assert r.timestamp_ms == 1_700_000_000_123 + int(r.value)
    [doc] = commit_docs(tmp_path)
    assert doc["topics"] == sorted([a, b])
    assert committed_ranges(doc) == {**observed_ranges(got_a), **observed_ranges(got_b)}


def test_retried_task_loses_nothing(spark, kafka_bootstrap, topic_factory, tmp_path) -> None:
    """The first attempt of task 0 fails after part of its rows went out; the retry wins."""
    topic = topic_factory(partitions=2)

    @sf.udf(returnType=StringType(), useArrow=False)
    def fail_first_attempt(i: int) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i > 150:
            raise RuntimeError("injected failure on the first attempt")
        return str(i)

    df = spark.range(0, 400, 1, 2).select(fail_first_attempt(sf.col("id")).alias("value"))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        (
            df.write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("topic", topic)
            .option("commitLog", str(tmp_path))
            .save()
        )
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    records = read_all(kafka_bootstrap, topic, expected=400)
    counts = Counter(int(r.value) for r in records)
    assert set(counts) == set(range(400))  # nothing lost; duplicates allowed (at-least-once)
    [doc] = commit_docs(tmp_path)
    attempts = {t["partition_id"]: t["attempt_number"] for t in doc["tasks"]}
    assert attempts == {0: 1, 1: 0}
    assert doc["record_count"] == 400
    # The committed ranges cover what the successful attempts wrote; anything outside them is a
    # duplicate from the failed attempt.
    for (t, p), (first, last, count) in committed_ranges(doc).items():
        inside = [r for r in records if r.partition == p and first <= r.offset <= last]
        assert t == topic and len(inside) >= count


@pytest.mark.parametrize(
    "case",
    [
        (lambda s: s.range(3).selectExpr("id AS value"), {}, "'value' has unsupported type bigint"),
        (
            lambda s: s.range(3).selectExpr("CAST(id AS STRING) AS v"),
            {},
            "column 'value' not found",
        ),
        (
            lambda s: s.range(3).selectExpr("'x' AS value", "id AS partition"),
            {},
            "'partition' has unsupported type bigint",
        ),
        (
            lambda s: s.range(3).selectExpr("'x' AS value", "map('a', 'b') AS headers"),
            {},
            "'headers' has unsupported type map<string,string>",
        ),
        (
            lambda s: s.range(3).selectExpr("'x' AS value", "'2020' AS timestamp"),
            {},
            "'timestamp' has unsupported type string",
        ),
        (lambda s: s.range(3).selectExpr("'x' AS value"), {"topic": None}, "no topic"),
        (
            lambda s: s.range(3).selectExpr("'x' AS value"),
            {"kafka.value.serializer": "x"},
            "'kafka.value.serializer' is not supported",
        ),
        (
            lambda s: s.range(3).selectExpr("'x' AS value"),
            {"acks": "all"},
            "unknown option 'acks'",
        ),
        (
            lambda s: s.range(3).selectExpr("'x' AS value"),
            {"kafka.acks": "some"},
            "option 'kafka.acks' is invalid: expected one of all, -1, 0, 1; got 'some'",
        ),
        (
            lambda s: s.range(3).selectExpr("'x' AS value"),
            {"kafka.bootstrap.servers": None, "kafka.bootstrap.server": "localhost:9092"},
            "unknown option 'kafka.bootstrap.server' for format[(]'pykafka'[)]: did you mean "
            "'kafka.bootstrap.servers'[?]",
        ),
    ],
    ids=[
        "value-type",
        "no-value",
        "partition-type",
        "headers-map",
        "timestamp-type",
        "no-topic",
        "serializer",
        "unprefixed",
        "bad-kafka-key",
        "misspelled-bootstrap",
    ],
)
def test_bad_input_fails_on_the_driver(spark, kafka_bootstrap, topic_factory, case) -> None:
    build, options, message = case
    topic = topic_factory(partitions=1)
    opts = {"kafka.bootstrap.servers": kafka_bootstrap, "topic": topic, **options}
    writer = build(spark).write.format("pykafka").mode("append")
    for k, v in opts.items():
        if v is not None:
            writer = writer.option(k, v)
    with pytest.raises(Exception, match=message) as info:
        writer.save()
    assert "PYTHON_DATA_SOURCE_ERROR" in str(info.value)  # raised while planning, not in a task
    assert read_all(kafka_bootstrap, topic) == []


def test_overwrite_mode_refused(spark, kafka_bootstrap, topic_factory) -> None:
    topic = topic_factory()
    with pytest.raises(Exception, match="save mode 'overwrite' is not supported"):
        (
            spark.range(2)
            .selectExpr("'x' AS value")
            .write.format("pykafka")
            .mode("overwrite")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("topic", topic)
            .save()
        )
    assert read_all(kafka_bootstrap, topic) == []


def test_unwritable_commit_log_fails_before_any_record(
    spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    """A commitLog the driver cannot write fails the job while planning: nothing is sent."""
    topic = topic_factory(partitions=1)
    (tmp_path / "afile").write_text("x")  # tests run as root: a path under a file, not chmod
    target = tmp_path / "afile" / "commits"
    with pytest.raises(Exception, match="option 'commitLog'") as info:
        (
            spark.range(0, 20, 1, 2)
            .selectExpr("CAST(id AS STRING) AS value")
            .write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("topic", topic)
            .option("commitLog", str(target))
            .save()
        )
    message = str(info.value)
    assert str(target) in message and "Not a directory" in message
    assert "PYTHON_DATA_SOURCE_ERROR" in message  # raised while planning, not in a task
    assert read_all(kafka_bootstrap, topic) == []


@pytest.mark.parametrize(
    "case",
    [
        (["CAST(NULL AS STRING) AS topic", "'x' AS value"], "has a null 'topic'"),
        (["'{topic}' AS topic", "'x' AS value", "7 AS partition"], "has partition 7"),
    ],
    ids=["null-topic", "partition-out-of-range"],
)
def test_bad_rows_fail_the_task(spark, kafka_bootstrap, topic_factory, tmp_path, case) -> None:
    select, message = case
    topic = topic_factory(partitions=2)
    df = spark.range(0, 5, 1, 1).selectExpr(*[s.format(topic=topic) for s in select])
    with pytest.raises(Exception, match=message):
        df.write.format("pykafka").mode("append").option(
            "kafka.bootstrap.servers", kafka_bootstrap
        ).option("commitLog", str(tmp_path)).save()
    assert read_all(kafka_bootstrap, topic) == []
    # The driver's abort names the failed task and what had been acknowledged (nothing).
    [aborted] = commit_docs(tmp_path, "*.aborted.json")
    assert aborted["kind"] == "abort" and aborted["failed_tasks"] == [0]
    assert aborted["acknowledged_record_count"] == 0
    assert commit_docs(tmp_path) == [aborted]  # no commit file


def test_broker_rejection_fails_the_task(spark, kafka_bootstrap, topic_factory) -> None:
    """A record the broker refuses (above the topic's max.message.bytes) fails the write."""
    topic = topic_factory(configs={"max.message.bytes": "1024"})
    df = spark.range(0, 1, 1, 1).selectExpr("repeat('x', 4000) AS value")
    with pytest.raises(Exception, match=r"(?i)MESSAGE_TOO_LARGE|too large"):
        (
            df.write.format("pykafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("topic", topic)
            .save()
        )
    assert read_all(kafka_bootstrap, topic) == []


def test_null_values_are_tombstones(spark, kafka_bootstrap, topic_factory) -> None:
    topic = topic_factory(partitions=1)
    df = spark.createDataFrame(
        [("a", "1"), ("a", None), (None, "3")], "key STRING, value STRING"
    ).coalesce(1)
    (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", topic)
        .save()
    )
    records = read_all(kafka_bootstrap, topic, expected=3)
    assert [(r.key, r.value) for r in records] == [(b"a", b"1"), (b"a", None), (None, b"3")]


def test_small_buffer_memory_that_spark_accepts_writes_every_row(
    spark, kafka_bootstrap, topic_factory, tmp_path
) -> None:
    # Spark's own Kafka sink writes these (its batch.size is Java's 16384); the sink's larger
    # default batch.size must fit within the buffer.memory the user set.
    topic = topic_factory(partitions=2)
    n = 60
    rows = [(f"k{i}", b"%06d" % i + b"v" * (15 * 1024)) for i in range(n)]
    df = spark.createDataFrame(rows, "key string, value binary").repartition(2)
    options = {
        **KAFKA_OPTIONS,
        "kafka.bootstrap.servers": kafka_bootstrap,
        "kafka.buffer.memory": "16384",
        "topic": topic,
        "commitLog": str(tmp_path / "log"),
    }
    df.write.format("pykafka").mode("append").options(**options).save()
    records = read_all(kafka_bootstrap, topic, expected=n)
    assert sorted(r.value for r in records) == sorted(v for _k, v in rows)
    [doc] = commit_docs(tmp_path / "log")
    assert doc["record_count"] == n


def test_a_setup_error_is_one_self_contained_line_of_sparks_message(
    spark, kafka_bootstrap, topic_factory
) -> None:
    # What README's "How errors look" shows: Spark wraps the sink's error in its own message and
    # a traceback; the sink's message is one whole line of it: what, which option, the fix.
    topic = topic_factory(partitions=1)
    writer = (
        spark.range(3)
        .selectExpr("CAST(id AS STRING) AS value")
        .write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", topic)
        .option("linger.ms", "5")
    )
    with pytest.raises(Exception) as info:
        writer.save()
    text = str(info.value)
    assert type(info.value).__name__ == "AnalysisException"
    assert text.startswith("[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source")
    assert (
        "kafka_sink.sink_errors.SinkOptionError: unknown option 'linger.ms' for "
        "format('pykafka'): did you mean 'kafka.linger.ms'? Fix: .option('kafka.linger.ms', ...)"
    ) in text.splitlines()


def test_a_record_over_max_request_size_names_its_row_and_the_fix(
    spark, kafka_bootstrap, topic_factory
) -> None:
    topic = topic_factory(partitions=1)
    writer = (
        spark.range(3)
        .selectExpr("IF(id = 2, repeat('x', 1100000), 'small') AS value")
        .coalesce(1)
        .write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", topic)
    )
    with pytest.raises(Exception) as info:
        writer.save()
    # The request that would carry it counts its framing (a few hundred bytes at most).
    line = re.compile(
        f"kafka_sink.sink_errors.SinkDataError: row 2 \\(topic '{re.escape(topic)}'\\) is "
        "1100088 bytes when serialized, and a request carrying it ([0-9]+) bytes, larger than "
        "max.request.size=1048576. Fix: raise option kafka.max.request.size and the topic's "
        "max.message.bytes with it \\(the broker refuses a larger batch\\), or write smaller "
        "records$"
    )
    found = [m for m in map(line.match, str(info.value).splitlines()) if m]
    assert found, str(info.value)
    assert 1100088 < int(found[0].group(1)) < 1100088 + 500
    # The whole call was refused before anything was queued.
    assert read_all(kafka_bootstrap, topic) == []
