"""deliveryGuarantee=exactly-once against a real SparkSession and a real 3-node Kafka cluster
(replication 3, min.insync.replicas 2).

Scenario (streaming, and a batch job): a task fails part-way on its first attempt, after some
of its rows reached Kafka (a Python UDF upstream raises on attempt 0), then succeeds on retry
(``local[2,2]`` retries once).
An independent read_committed consumer (kafka-python) must see every row exactly once with
exactly-once, and duplicates with at-least-once (so the test can fail); with exactly-once the
failed attempt's rows are in the log (a read_uncommitted consumer sees them), no transaction of
the query stays open, and the last stable offset reaches the log end on every partition.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from sparkutil import assert_nothing_left_open, commit_docs

from kafka_sink.testing.oracle import read_all

ROWS_PER_FILE = 2000
FAIL_FROM = 1500  # attempt 0 of the task holding ids 0..1999 raises on id 1500


def _write_inputs(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for n, start in enumerate((0, ROWS_PER_FILE)):
        tmp = directory / f".in{n}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for i in range(start, start + ROWS_PER_FILE):
                f.write(json.dumps({"id": i}) + "\n")
        tmp.rename(directory / f"in{n}.json")


@pytest.mark.parametrize(
    "case",
    ["stream/exactly-once", "stream/at-least-once", "batch/exactly-once"],
)
def test_a_task_retried_after_a_partial_write(
    spark, kafka_cluster, cluster_topic_factory, tmp_path, case
) -> None:
    mode, guarantee = case.split("/")
    from pyspark.sql import functions as sf
    from pyspark.sql.types import StringType

    kafka_bootstrap = kafka_cluster.bootstrap_servers
    topic = cluster_topic_factory(
        partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"}
    )
    prefix = f"eos-test-{uuid.uuid4().hex[:8]}"
    _write_inputs(tmp_path / "in")

    @sf.udf(returnType=StringType(), useArrow=False)
    def fail_first_attempt(i: int) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0 and i == FAIL_FROM:
            import time

            # Let the writer send (and Kafka acknowledge) the rows before this one first.
            time.sleep(5)
            raise RuntimeError("injected failure on the first attempt")
        # 1 KB values: the UDF's Python worker buffers its output in 64 KiB, and the rows before
        # the failure must flow on to the writer.
        return str(i).zfill(1000)

    reader = spark.readStream if mode == "stream" else spark.read
    df = (
        reader.schema("id BIGINT")
        .json(str(tmp_path / "in"))
        .select(fail_first_attempt(sf.col("id")).alias("value"))
    )
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        "topic": topic,
        "deliveryGuarantee": guarantee,
    }
    if guarantee == "exactly-once":
        options["transactionalIdPrefix"] = prefix
    log_dir = tmp_path / "checkpoint" / "pykafka-commits" if mode == "stream" else tmp_path / "log"
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        start = time.monotonic()
        if mode == "stream":
            query = (
                df.writeStream.format("pykafka")
                .options(**options)
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            assert query.awaitTermination(240), "the query did not finish in 240 s"
            assert query.exception() is None, query.exception()
        else:
            df.write.format("pykafka").mode("append").options(**options).option(
                "commitLog", str(log_dir)
            ).save()
        elapsed = time.monotonic() - start
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    total = 2 * ROWS_PER_FILE
    committed = read_all(kafka_bootstrap, topic, expected=total, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in committed)
    assert set(counts) == set(range(total))  # nothing lost either way
    duplicated = sum(1 for c in counts.values() if c > 1)
    everything = read_all(kafka_bootstrap, topic)
    # The failed attempt's rows reached Kafka before it failed (else the scenario proves nothing).
    assert len(everything) > total, (len(everything), elapsed)
    [doc] = commit_docs(log_dir)
    assert doc["delivery_guarantee"] == guarantee
    assert doc["batch_id"] == (0 if mode == "stream" else None)
    assert sorted(t["attempt_number"] for t in doc["tasks"]) == [0, 1]
    if guarantee == "at-least-once":
        assert duplicated > 0
        return
    assert duplicated == 0, f"{duplicated} rows read twice by a read_committed consumer"
    assert len(committed) == total
    assert {t["transactional_id"] for t in doc["tasks"]} <= {
        f"{prefix}-{p}-{a}" for p in range(2) for a in range(2)
    }
    assert_nothing_left_open(kafka_bootstrap, topic, prefix)
