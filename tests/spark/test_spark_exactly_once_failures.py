"""deliveryGuarantee=exactly-once when a write fails as a whole: real Spark, a real 3-node Kafka
(replication 3, min.insync.replicas 2) and an independent read_committed consumer (kafka-python).

- A batch job that fails after some of its tasks succeeded (their transactions prepared, their
  rows in the log): nothing of it is visible to read_committed, nothing stays open. With
  at-least-once the succeeded tasks' rows are visible (a partial job), so the test can fail.
- A micro-batch whose first task's transaction the broker aborts on ``transaction.timeout.ms``
  while a slow task of the same batch still runs: the batch fails with a message naming the
  batch, the partitions and the fix; the query, restarted from its checkpoint, runs the batch
  again and a read_committed consumer reads every row exactly once. With at-least-once (which
  has no transaction to time out) the same batch fails at the same point on an injected error,
  and its re-run shows the first task's rows twice.
- The broker coordinating a micro-batch's transactions is killed once the driver recorded the
  batch's intent, before its EndTxns: the commit finishes through the new coordinators.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sparkutil import assert_nothing_left_open, commit_docs

from kafka_sink.admin.transactions import list_transactions
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import read_all

TopicFactory = Callable[..., str]

ROWS = 3000
PARTITIONS = 3


def _topic(cluster_topic_factory: TopicFactory) -> str:
    return cluster_topic_factory(
        partitions=PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"}
    )


def _options(bootstrap: str, topic: str, guarantee: str, prefix: str) -> dict[str, str]:
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": topic,
        "deliveryGuarantee": guarantee,
        "kafka.request.timeout.ms": "10000",
    }
    if guarantee == "exactly-once":
        options["transactionalIdPrefix"] = prefix
    return options


@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_a_batch_job_that_fails_after_some_tasks_succeeded(
    spark: Any,
    kafka_cluster: LocalKafka,
    cluster_topic_factory: TopicFactory,
    tmp_path: Path,
    guarantee: str,
) -> None:
    from pyspark.sql import functions as sf
    from pyspark.sql.types import StringType

    bootstrap = kafka_cluster.bootstrap_servers
    topic = _topic(cluster_topic_factory)
    prefix = f"eos-fail-{uuid.uuid4().hex[:8]}"
    per_partition = ROWS // PARTITIONS

    @sf.udf(returnType=StringType(), useArrow=False)
    def fail_last_partition(i: int) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == PARTITIONS - 1:
            import time

            # Every attempt fails, once the other tasks have had time to finish: the job fails
            # after they succeeded.
            time.sleep(3)
            raise RuntimeError("injected failure of the last partition")
        return f"row-{i}"

    df = spark.range(0, ROWS, numPartitions=PARTITIONS).select(
        fail_last_partition(sf.col("id")).alias("value")
    )
    log_dir = tmp_path / "log"
    with pytest.raises(Exception, match="injected failure of the last partition"):
        df.write.format("pykafka").mode("append").options(
            **_options(bootstrap, topic, guarantee, prefix)
        ).option("commitLog", str(log_dir)).save()

    # The succeeded tasks' rows reached the log (else the scenario proves nothing).
    everything = read_all(bootstrap, topic, expected=(PARTITIONS - 1) * per_partition)
    assert len(everything) >= (PARTITIONS - 1) * per_partition
    names = sorted(path.name for path in log_dir.glob("*.json"))
    assert len(names) == 1 and names[0].endswith(".aborted.json"), names  # no commit document
    [aborted] = commit_docs(log_dir)
    assert aborted["delivery_guarantee"] == guarantee
    if guarantee == "at-least-once":
        visible = read_all(bootstrap, topic, expected=(PARTITIONS - 1) * per_partition)
        assert len(visible) >= (PARTITIONS - 1) * per_partition  # a partial job is visible
        return
    assert_nothing_left_open(bootstrap, topic, prefix)
    assert read_all(bootstrap, topic, isolation_level="read_committed") == []


@pytest.mark.slow
@pytest.mark.parametrize("guarantee", ["exactly-once", "at-least-once"])
def test_a_transaction_that_times_out_before_the_commit(
    spark: Any,
    kafka_cluster: LocalKafka,
    cluster_topic_factory: TopicFactory,
    tmp_path: Path,
    guarantee: str,
) -> None:
    from pyspark.errors import StreamingQueryException
    from pyspark.sql import functions as sf
    from pyspark.sql.types import StringType

    bootstrap = kafka_cluster.bootstrap_servers
    topic = _topic(cluster_topic_factory)
    prefix = f"eos-timeout-{uuid.uuid4().hex[:8]}"
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "rows.txt").write_text("".join(f"{i}\n" for i in range(ROWS)), encoding="utf-8")
    second_run = tmp_path / "second-run"
    first_id = f"{prefix}-0-0"
    exactly_once = guarantee == "exactly-once"

    @sf.udf(returnType=StringType(), useArrow=False)
    def slow_second_partition(line: str) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 1 and not os.path.exists(second_run):
            import time

            if not exactly_once:
                time.sleep(3)  # partition 0 has written its rows meanwhile
                raise RuntimeError("injected failure of a slow task")  # every attempt
            # Hold the batch open until the broker aborted partition 0's prepared transaction
            # (transaction.timeout.ms; the test cluster's coordinators check every 2 s).
            from kafka_sink.admin.transactions import list_transactions

            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                states = {
                    t.transactional_id: t.state
                    for t in list_transactions({"bootstrap.servers": bootstrap}, first_id)
                }
                if states.get(first_id) in ("PrepareAbort", "CompleteAbort"):
                    break
                time.sleep(0.5)
        return line

    spark.conf.set("spark.sql.files.maxPartitionBytes", str(ROWS * 5 // PARTITIONS))
    try:
        df = spark.readStream.text(str(inputs)).select(
            slow_second_partition(sf.col("value")).alias("value")
        )

        def run() -> Any:
            query = (
                df.writeStream.format("pykafka")
                .options(**_options(bootstrap, topic, guarantee, prefix))
                .option("kafka.transaction.timeout.ms", "5000")
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            try:
                assert query.awaitTermination(240), "the query did not finish in 240 s"
            except StreamingQueryException as exc:
                return exc
            return query.exception()

        failure = run()
        assert failure is not None, "the first run should have failed"
        if exactly_once:
            text = str(failure)
            assert "exactly-once commit of batch 0 failed" in text, text
            assert f"{topic}-" in text  # the partitions
            assert "Fix: raise kafka.transaction.timeout.ms" in text
            # Nothing of the failed batch is visible, and nothing of it holds readers back.
            assert_nothing_left_open(bootstrap, topic, prefix)
            assert read_all(bootstrap, topic, isolation_level="read_committed") == []
        second_run.touch()
        assert run() is None  # the restart runs the batch again and delivers
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")

    committed = read_all(bootstrap, topic, expected=ROWS, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in committed)
    assert set(counts) == set(range(ROWS))  # nothing lost either way
    duplicated = sum(1 for c in counts.values() if c > 1)
    docs = commit_docs(tmp_path / "checkpoint" / "pykafka-commits", "[0-9]*.json")
    assert [d["batch_id"] for d in docs if "failed_tasks" not in d] == [0]
    if not exactly_once:
        assert duplicated > 0
        return
    assert duplicated == 0, f"{duplicated} rows read twice by a read_committed consumer"
    assert_nothing_left_open(bootstrap, topic, prefix)


def test_the_coordinator_is_killed_during_the_commit(
    spark: Any,
    spark_env: Any,
    kafka_cluster: LocalKafka,
    cluster_topic_factory: TopicFactory,
    tmp_path: Path,
) -> None:
    """The driver pauses once the batch's intent is durable (the test-only hook in the committer);
    the broker coordinating the batch's transactions is killed; the commit then finishes through
    the new coordinators. (At-least-once has no commit to interrupt: no contrast run here.)"""
    bootstrap = kafka_cluster.bootstrap_servers
    topic = _topic(cluster_topic_factory)
    prefix = f"eos-coord-{uuid.uuid4().hex[:8]}"
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "rows.txt").write_text("".join(f"{i}\n" for i in range(ROWS)), encoding="utf-8")
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(ROWS * 5 // PARTITIONS))
    try:
        with spark_env({"PYKAFKA_TEST_COMMIT_PAUSE_DIR": str(pause_dir)}):
            query = (
                spark.readStream.text(str(inputs))
                .writeStream.format("pykafka")
                .options(**_options(bootstrap, topic, "exactly-once", prefix))
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            try:
                deadline = time.monotonic() + 180
                while not (pause_dir / "paused-0").exists():
                    assert query.isActive or (pause_dir / "paused-0").exists(), query.exception()
                    assert time.monotonic() < deadline, "the commit never reached its pause"
                    time.sleep(0.2)
                listed = list_transactions({"bootstrap.servers": bootstrap}, prefix + "-")
                coordinators = {t.coordinator_id for t in listed if t.state == "Ongoing"}
                assert coordinators, listed  # the prepared transactions, awaiting the commit
                for node in coordinators:
                    kafka_cluster.kill_node(node)
            finally:
                (pause_dir / "resume-0").touch()
            assert query.awaitTermination(240), "the query did not finish in 240 s"
            assert query.exception() is None, query.exception()
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    committed = read_all(bootstrap, topic, expected=ROWS, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in committed)
    assert set(counts) == set(range(ROWS))
    assert all(c == 1 for c in counts.values()), "rows read twice by a read_committed consumer"
    [doc] = commit_docs(tmp_path / "checkpoint" / "pykafka-commits", "[0-9]*.json")
    assert doc["batch_id"] == 0 and doc["delivery_guarantee"] == "exactly-once"
    assert_nothing_left_open(bootstrap, topic, prefix)
