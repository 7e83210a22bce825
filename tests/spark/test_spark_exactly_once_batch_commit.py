"""A batch job's outcome is what readers see: real Spark, a real broker behind a TCP proxy, an
independent read_committed consumer (kafka-python).

The driver pauses once the job's intent is durable (the test-only hook in the committer); the
proxy then holds every answer of the broker for longer than the driver's ``max.block.ms``: the
EndTxns reach the coordinator, which commits, but the driver hears nothing and each admin call
times out. The committer keeps asking (within ``transaction.timeout.ms`` since the intent), hears
NONE once the answers flow again (a retried EndTxn of a completed commit), and the job succeeds
with every row read exactly once and nothing left open. Before the committer retried, the job
failed on the first timeout while the coordinator committed every row: "job FAILED" with all of
it visible.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sparkutil import assert_nothing_left_open, commit_docs

from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, read_all

# A fault proof: `-m "not slow"` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

ROWS = 3000
PARTITIONS = 3
HOLD_S = 15.0


def test_a_batch_job_whose_end_txn_answers_are_lost_for_a_while_succeeds_exactly_once(
    spark: Any, spark_env: Any, proxied_kafka: LocalKafka, tmp_path: Path
) -> None:
    bootstrap = proxied_kafka.proxied_bootstrap_servers
    topic = f"eos-batch-commit-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    [node_id] = proxied_kafka.node_ids
    proxy = proxied_kafka.proxy(node_id)
    prefix = f"eos-batch-{uuid.uuid4().hex[:8]}"
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    df = spark.range(0, ROWS, numPartitions=PARTITIONS).selectExpr("CAST(id AS STRING) AS value")
    writer = (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("deliveryGuarantee", "exactly-once")
        .option("transactionalIdPrefix", prefix)
        .option("kafka.transaction.timeout.ms", "60000")
        .option("kafka.request.timeout.ms", "2000")
        .option("kafka.max.block.ms", "4000")  # each admin call gives up long before the hold ends
        .option("commitLog", str(tmp_path / "log"))
    )
    staged: list[str] = []

    def hold_the_answers() -> None:
        # Spark's data source lookup wants the thread that owns the session: the job runs in
        # the test's thread, the fault is staged from this one.
        deadline = time.monotonic() + 180
        while not (pause_dir / "paused-0").exists():
            if time.monotonic() > deadline:
                staged.append("the commit never reached its pause")
                return
            time.sleep(0.2)
        proxy.hold_responses()
        (pause_dir / "resume-0").touch()
        time.sleep(HOLD_S)
        proxy.resume()
        staged.append("held")

    stager = threading.Thread(target=hold_the_answers, daemon=True)
    with spark_env({"PYKAFKA_TEST_COMMIT_PAUSE_DIR": str(pause_dir)}):
        stager.start()
        try:
            writer.save()  # raises if the job fails although its commit was recorded
        finally:
            stager.join(HOLD_S + 200)
            proxy.resume()
    assert staged == ["held"], staged

    direct = proxied_kafka.bootstrap_servers
    committed = read_all(direct, topic, expected=ROWS, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in committed)
    assert set(counts) == set(range(ROWS))
    assert all(c == 1 for c in counts.values()), "rows read twice by a read_committed consumer"
    [doc] = commit_docs(tmp_path / "log", "*.json")
    assert doc["delivery_guarantee"] == "exactly-once" and "failed_tasks" not in doc
    assert_nothing_left_open(direct, topic, prefix)
