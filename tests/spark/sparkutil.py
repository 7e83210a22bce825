"""Helpers for the Spark tests: commit-log files and Kafka read-back, compared; what
exactly-once leaves open; a file stream of ids."""

from __future__ import annotations

import glob
import json
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from kafka_sink.admin.transactions import list_transactions
from kafka_sink.testing.oracle import ConsumedRecord, end_offsets, import_kafka_python

KAFKA_OPTIONS = {"kafka.linger.ms": "5"}
OPEN_OR_ENDING = ("Ongoing", "PrepareCommit", "PrepareAbort")


def commit_docs(directory: str | Path, pattern: str = "*.json") -> list[dict[str, Any]]:
    """The JSON documents in ``directory`` matching ``pattern``, in name order."""
    docs = []
    for path in sorted(glob.glob(os.path.join(str(directory), pattern))):
        with open(path, encoding="utf-8") as f:
            docs.append(json.load(f))
    return docs


def observed_ranges(records: list[ConsumedRecord]) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (first offset, last offset, count) of what a consumer read."""
    by_tp: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in records:
        by_tp[(r.topic, r.partition)].append(r.offset)
    return {tp: (min(o), max(o), len(o)) for tp, o in by_tp.items()}


def committed_ranges(doc: dict[str, Any]) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (first offset, last offset, count) from one commit document."""
    return {
        (o["topic"], o["partition"]): (o["first_offset"], o["last_offset"], o["record_count"])
        for o in doc["offsets"]
    }


def stable_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> last stable offset (what a read_committed consumer can reach)."""
    kafka = import_kafka_python()
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, isolation_level="read_committed"
    )
    try:
        tps = [kafka.TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        return {tp.partition: int(o) for tp, o in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def assert_nothing_left_open(
    bootstrap: str, topic: str, prefix: str, timeout_s: float = 60
) -> None:
    """No transaction of the ids ``<prefix>-*`` open (one being ended is waited for) and, within
    ``timeout_s``, the last stable offset at the log end on every partition of ``topic``."""
    config = {"bootstrap.servers": bootstrap}
    deadline = time.monotonic() + timeout_s
    while True:
        states = {t.transactional_id: t.state for t in list_transactions(config, prefix + "-")}
        still = {tid: s for tid, s in states.items() if s in OPEN_OR_ENDING}
        if not still:
            break
        assert time.monotonic() < deadline, f"transactions left open: {still}"
        time.sleep(0.5)
    while stable_offsets(bootstrap, topic) != end_offsets(bootstrap, topic):
        assert time.monotonic() < deadline, "the last stable offset never reached the log end"
        time.sleep(0.5)


def child_session(app_name: str, master: str = "local[2]") -> Any:
    """The SparkSession of a driver process a test runs, kills and restarts, with the sink
    registered (``eos_restart_child.py``, ``idempotent_job_child.py``); ``master`` may be a
    ``local-cluster[...]`` (executors of 512 MiB)."""
    from pyspark.sql import SparkSession

    from kafka_sink.spark.workers import register_source

    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "512m")
        .config("spark.executor.memory", "512m")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_source(spark)
    return spark


def id_stream(spark: Any, directory: Path, files: dict[str, range]) -> Any:
    """A streaming DataFrame of one ``id BIGINT`` column, one micro-batch per file of ``files``.

    Each file is written aside and renamed in, so the file source never reads a partial one.
    """
    directory.mkdir()
    for name, ids in files.items():
        lines = "".join(json.dumps({"id": i}) + "\n" for i in ids)
        (directory / f".{name}.tmp").write_text(lines, encoding="utf-8")
        (directory / f".{name}.tmp").rename(directory / f"{name}.json")
    reader = spark.readStream.schema("id BIGINT").option("maxFilesPerTrigger", 1)
    return reader.json(str(directory))


def write_available_now(df: Any, options: dict[str, str], checkpoint: Path) -> None:
    """Run ``df`` to the pykafka sink once over all its input (``availableNow``), bounded."""
    query = (
        df.writeStream.format("pykafka")
        .options(**options)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the availableNow query did not end within 120 s"
    assert query.exception() is None
