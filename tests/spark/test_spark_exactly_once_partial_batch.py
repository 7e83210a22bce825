"""A micro-batch Kafka committed only in part, then the query restarted: real Spark, a real
3-node Kafka (replication 3, min.insync.replicas 2), an independent read_committed consumer
(kafka-python).

The driver's commit is held once the batch's intent is durable (the test-only pause of
``eos/committer.py``); the test then ends Spark partition 0's transaction with EndTxn(commit),
as the driver's first EndTxn would, and aborts the others, as the coordinator does once
``transaction.timeout.ms`` passed: the driver was down that long between two EndTxns. (Aborting
them here rather than waiting for a short timeout keeps the tasks of a loaded machine from racing
that timeout before the commit.) Resumed, the
commit fails naming the partitions committed and lost, and the batch is recorded partial. The
query restarted on the same checkpoint re-runs the batch: its task of partition 0 writes nothing
(the rows it is given have the recorded fingerprint) and the others are written and committed,
so every row is read exactly once. With the partial record removed before the restart (what the
error offers to accept duplicates, and what the sink did before it kept the record), the re-run
writes the whole batch and partition 0's rows are read twice.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sparkutil import assert_nothing_left_open, commit_docs

from kafka_sink.admin.transactions import complete_transaction, list_transactions
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import read_all

pytestmark = pytest.mark.slow

TopicFactory = Callable[..., str]

ROWS = 3000
PARTITIONS = 3
TIMEOUT_MS = 120_000


def _end_partition_0_then_lose_the_others(bootstrap: str, prefix: str) -> None:
    """Commit Spark partition 0's transaction; abort the others as a timeout would."""
    config = {"bootstrap.servers": bootstrap}
    listed = [t for t in list_transactions(config, prefix + "-") if t.state == "Ongoing"]
    assert len(listed) == PARTITIONS, listed
    for listing in listed:
        first = listing.transactional_id.startswith(f"{prefix}-0-")
        complete_transaction(config, listing.prepared(), commit=first, timeout=30)
    # EndTxn returns once the outcome is decided (Prepare*); the markers follow within moments.
    deadline = time.monotonic() + 30
    while True:
        states = {t.transactional_id: t.state for t in list_transactions(config, prefix + "-")}
        if sorted(states.values()) == ["CompleteAbort", "CompleteAbort", "CompleteCommit"]:
            return
        assert time.monotonic() < deadline, states
        time.sleep(0.2)


@pytest.mark.parametrize("keep_record", [True, False], ids=["partial-record", "record-removed"])
def test_a_partly_committed_batch_is_completed_by_its_rerun(
    spark: Any,
    spark_env: Any,
    kafka_cluster: LocalKafka,
    cluster_topic_factory: TopicFactory,
    *,
    tmp_path: Path,
    keep_record: bool,
) -> None:
    from pyspark.errors import StreamingQueryException

    bootstrap = kafka_cluster.bootstrap_servers
    topic = cluster_topic_factory(
        partitions=PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"}
    )
    prefix = f"eos-partial-{uuid.uuid4().hex[:8]}"
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "rows.txt").write_text("".join(f"{i}\n" for i in range(ROWS)), encoding="utf-8")
    checkpoint = tmp_path / "checkpoint"
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()

    def run() -> Any:
        query = (
            spark.readStream.text(str(inputs))
            .writeStream.format("pykafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("deliveryGuarantee", "exactly-once")
            .option("transactionalIdPrefix", prefix)
            .option("intentStore", "checkpoint")
            .option("kafka.transaction.timeout.ms", str(TIMEOUT_MS))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        return query

    # One file split in three: the same rows reach the same Spark partition on every run.
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(ROWS * 5 // PARTITIONS))
    try:
        with spark_env({"PYKAFKA_TEST_COMMIT_PAUSE_DIR": str(pause_dir)}):
            query = run()
            try:
                deadline = time.monotonic() + 180
                while not (pause_dir / "paused-0").exists():
                    assert query.isActive, query.exception()
                    assert time.monotonic() < deadline, "the commit never reached its pause"
                    time.sleep(0.2)
                _end_partition_0_then_lose_the_others(bootstrap, prefix)
            finally:
                (pause_dir / "resume-0").touch()
            with pytest.raises(StreamingQueryException) as failed:
                query.awaitTermination(240)
        text = str(failed.value)
        assert "exactly-once commit of batch 0 failed" in text, text
        assert "Spark partitions [0]; lost: Spark partitions [1, 2]" in text, text
        # Partition 0's rows are visible; nothing else of the batch, and nothing is open.
        assert_nothing_left_open(bootstrap, topic, prefix)
        first = read_all(bootstrap, topic, isolation_level="read_committed")
        assert 0 < len(first) < ROWS

        if not keep_record:
            shutil.rmtree(checkpoint / "pykafka-intents")
        query = run()
        assert query.awaitTermination(240), "the restarted query did not finish in 240 s"
        assert query.exception() is None, query.exception()
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")

    expected = ROWS + (0 if keep_record else len(first))
    committed = read_all(bootstrap, topic, expected=expected, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in committed)
    assert set(counts) == set(range(ROWS))  # nothing lost either way
    twice = {row for row, n in counts.items() if n > 1}
    docs = commit_docs(checkpoint / "pykafka-commits", "[0-9]*.json")
    assert [d["batch_id"] for d in docs if "failed_tasks" not in d] == [0]
    assert_nothing_left_open(bootstrap, topic, prefix)
    if keep_record:
        assert twice == set(), f"{len(twice)} rows read twice by a read_committed consumer"
    else:
        assert twice == {int(r.value) for r in first}  # partition 0's rows, written again
