"""An exactly-once Spark job whose intent topic holds another writer's bomb and poisoned record.

Before the job, another client of the shared intent topic appends a 2 GiB zstd bomb (valid
records, under 128 KB on the wire) and a record whose header key is not UTF-8. The job (a
driver process of its own, ``idempotent_job_child.py``, with ``idempotencyKey``) plans and
commits through the Kafka intent store: it reads the topic, including both, and must succeed
with every row written once, read back by an independent read_committed consumer. Spark's
driver-side Python workers, which run the intent store, get an address-space limit of
PLANNER_MEMORY (``spark.sql.planner.pythonExecution.memory``): the bomb decoded would not fit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
from sparkutil import assert_nothing_left_open

from kafka_sink.admin.topic_log import TopicLog
from kafka_sink.spark.driver.eos import kafka_intents
from kafka_sink.spark.driver.eos.idempotency import job_identity
from kafka_sink.spark.driver.eos.kafka_intents import PARTITION, KafkaIntentStore
from kafka_sink.testing.oracle import create_topic, end_offsets, read_all
from tests.fakes.hostile import poisoned, zstd_bomb

CHILD = str(Path(__file__).with_name("idempotent_job_child.py"))
ROWS = 300
# What each driver-side Python worker may map (RLIMIT_AS): the interpreter with pyspark, pyarrow
# and the client map far more than they touch, but not a 2 GiB bomb on top.
PLANNER_MEMORY = "1536m"


def _append(log: TopicLog, topic: str, encoded: bytes) -> None:
    deadline = log._deadline(f"appending to {topic}-{PARTITION}")
    log._retrying(deadline, lambda: log._produce(topic, PARTITION, encoded, deadline))


@pytest.mark.slow
def test_a_job_succeeds_over_a_bomb_and_a_poisoned_record_in_its_intent_topic(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, intent_topic, key = f"garbage-{tag}", f"garbage-intents-{tag}", f"job-{tag}"
    create_topic(kafka_bootstrap, topic, partitions=3)
    store = KafkaIntentStore.open({"bootstrap.servers": kafka_bootstrap}, intent_topic)
    try:
        _append(store.log, intent_topic, zstd_bomb(2048).encode())
        _append(store.log, intent_topic, poisoned().encode())
        # Under the job's own key too: a batch no store wrote, so passed over like the others.
        query_key = job_identity(key, topic=topic, prefix=None).query_key
        _append(store.log, intent_topic, poisoned(query_key.encode()).encode())
    finally:
        store.close()
        kafka_intents.close_idle()
    assert end_offsets(kafka_bootstrap, intent_topic) == {0: 2048 + 2}

    env = dict(os.environ)
    env["PYSPARK_SUBMIT_ARGS"] = (
        f"--conf spark.sql.planner.pythonExecution.memory={PLANNER_MEMORY} pyspark-shell"
    )
    log = tmp_path / "job.log"
    args = [kafka_bootstrap, topic, str(ROWS), key, "-", intent_topic, str(tmp_path / "commits")]
    with open(log, "w", encoding="utf-8") as out:
        child = subprocess.Popen(
            [sys.executable, CHILD, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        try:
            child.wait(timeout=300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
    text = log.read_text(encoding="utf-8", errors="replace")
    assert "DONE" in text, text[-3000:]

    records = read_all(kafka_bootstrap, topic, expected=ROWS, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in records)
    assert set(counts) == set(range(ROWS))
    assert all(c == 1 for c in counts.values()), "rows read twice by read_committed"
    assert_nothing_left_open(
        kafka_bootstrap, topic, job_identity(key, topic=topic, prefix=None).prefix
    )
