"""A refused commit whose marker the brokers no longer keep is unknown, not lost: a real broker.

The setup of ``test_eos_marker_unknown_broker.py`` without the authorizer: a child process
(confluent-kafka) writes a transaction to two partitions and dies with it open; the driver
records its intent and commits it; its first EndTxn is applied but the answer dropped, and
before the retry another producer's InitProducerId moves the id on, so the retry is refused
(PRODUCER_FENCED) and only the marker can tell. Here the records up to the log end, the
transaction's records and its COMMIT marker with them, are removed first (DeleteRecords, as
retention would in time), so the marker read gets OFFSET_OUT_OF_RANGE below the log start.

No later read can tell what happened: the batch fails as incomplete naming the transaction,
its partitions and that retention or compaction removed what was to be read; its intent stays
unfinished (never recorded lost, so no re-run writes the partitions again), and the next
planning stops the same way, writing nothing. An independent read_committed consumer
(kafka-python) reads nothing of the batch twice.
"""

from __future__ import annotations

import uuid

import pytest

from kafka_sink.sink_errors import SinkCommitOutcomeUnknownError
from kafka_sink.spark.driver.eos.committer import EosCommitter, listing_ops
from kafka_sink.spark.driver.eos.intents import INTENT, MemoryIntentStore
from kafka_sink.testing.oracle import create_topic, import_kafka_python
from tests.broker.marker_scenarios import (
    INIT_TRANSACTIONS,
    commit_answer_lost,
    open_and_die,
    run_child,
    visible,
)


def _delete_up_to_the_end(bootstrap: str, topic: str) -> None:
    """DeleteRecords up to each partition's high watermark: the marker goes too."""
    kafka = import_kafka_python()
    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        partitions = [kafka.TopicPartition(topic, p) for p in (0, 1)]
        consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            ends = consumer.end_offsets(partitions)
        finally:
            consumer.close()
        assert all(end >= 3 for end in ends.values()), ends  # "before", 2 rows, the marker
        admin.delete_records(ends, timeout_ms=30_000)
    finally:
        admin.close()


def test_a_refused_commit_whose_marker_retention_removed_is_unknown_never_lost(
    kafka_bootstrap: str,
) -> None:
    topic = f"retained-{uuid.uuid4().hex[:8]}"
    prefix = f"ret-{uuid.uuid4().hex[:8]}"
    tid = f"{prefix}-0-0"
    create_topic(kafka_bootstrap, topic, 2)
    config = {"bootstrap.servers": kafka_bootstrap, "max.block.ms": "10000"}
    open_and_die(kafka_bootstrap, tid, topic)
    store = MemoryIntentStore()

    def id_moves_on_and_retention_runs() -> None:
        run_child(INIT_TRANSACTIONS, kafka_bootstrap, tid)
        _delete_up_to_the_end(kafka_bootstrap, topic)

    error = commit_answer_lost(config, store, prefix, (tid, topic), id_moves_on_and_retention_runs)
    text = str(error)
    assert repr(tid) in text and f"{topic}-0" in text, text
    assert "OFFSET_OUT_OF_RANGE" in text or "below the log start offset" in text, text
    assert "retention or compaction removed it" in text, text
    assert "Nothing is recorded lost and nothing of the batch is written again" in text
    last = store.last("q")
    assert last is not None and last.state == INTENT and "lost" not in last.extra

    # The next planning reads again: the marker is still gone, so it stops, writing nothing.
    restarted = EosCommitter(store, listing_ops(config, 10), query_key="q", prefix=prefix)
    try:
        with pytest.raises(SinkCommitOutcomeUnknownError) as again:
            restarted.recover()
    finally:
        restarted.close()
    assert "retention or compaction removed it" in str(again.value)
    last = store.last("q")
    assert last is not None and last.state == INTENT and "lost" not in last.extra
    # Nothing of the batch was written again: only what was appended after the removal.
    assert visible(kafka_bootstrap, topic) == [b"after"] * 2
