"""A commit whose answer was lost, then its id moved on: real Spark, a real broker, an
independent read_committed consumer (kafka-python).

The driver pauses once the batch job's intent is durable (the test-only hook in the committer).
Meanwhile one of the job's transactions is committed by an EndTxn from the test (the driver's
first EndTxn, applied, whose answer the driver never hears), then another producer calls
InitProducerId on its transactional id (a stale task attempt would), which moves the id on: the
driver's EndTxn for it is refused (PRODUCER_FENCED), and the coordinator shows the id Empty as it
would after a fence. The driver reads that transaction's COMMIT marker from its partition and the
job succeeds, every row read exactly once. Before, the job failed reporting the partition lost
(its rows were visible), and its re-run wrote them again.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sparkutil import assert_nothing_left_open, commit_docs

from kafka_sink.admin.transactions import (
    complete_transaction,
    describe_transactions,
    list_transactions,
)
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, read_all
from tests.txn_children import INIT_TRANSACTIONS

# A fault proof: `-m "not slow"` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

ROWS = 3000
PARTITIONS = 3


def _wait_for(what: str, check: Any, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def test_a_commit_whose_answer_was_lost_before_its_id_moved_on_is_written_once(
    spark: Any, spark_env: Any, proxied_kafka: LocalKafka, tmp_path: Path
) -> None:
    bootstrap = proxied_kafka.proxied_bootstrap_servers
    direct = proxied_kafka.bootstrap_servers
    config = {"bootstrap.servers": direct}
    topic = f"eos-lost-answer-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    prefix = f"eos-lost-{uuid.uuid4().hex[:8]}"
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
        .option("kafka.max.block.ms", "4000")
        .option("commitLog", str(tmp_path / "log"))
    )
    staged: list[str] = []

    def move_one_id_on() -> None:
        try:
            _wait_for("the commit's pause", (pause_dir / "paused-0").exists, 180)
            # The driver's first EndTxn for one transaction, applied with its answer never
            # heard: sent from here, while the driver waits between its intent and its EndTxns.
            listing = sorted(list_transactions(config, prefix), key=lambda t: t.transactional_id)
            victim = listing[0].prepared()
            complete_transaction(config, victim, commit=True, timeout=30)
            subprocess.run(
                [sys.executable, "-c", INIT_TRANSACTIONS, direct, victim.transactional_id],
                check=True,
                timeout=60,
                capture_output=True,
            )
            staged.append(victim.transactional_id)
        except Exception as exc:
            staged.append(f"staging failed: {exc}")
        finally:
            (pause_dir / "resume-0").touch()

    stager = threading.Thread(target=move_one_id_on, daemon=True)
    with spark_env({"PYKAFKA_TEST_COMMIT_PAUSE_DIR": str(pause_dir)}):
        stager.start()
        try:
            writer.save()
        finally:
            stager.join(300)
    assert len(staged) == 1 and staged[0].startswith(prefix), staged
    now = describe_transactions(config, staged, timeout=30)[staged[0]]
    assert now is not None and now.state == "Empty"  # the id moved on, as after a fence

    committed_rows = read_all(direct, topic, expected=ROWS, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in committed_rows)
    assert set(counts) == set(range(ROWS))
    assert all(c == 1 for c in counts.values()), "rows read twice by a read_committed consumer"
    [doc] = commit_docs(tmp_path / "log", "*.json")
    assert doc["delivery_guarantee"] == "exactly-once" and "failed_tasks" not in doc
    assert_nothing_left_open(direct, topic, prefix)
