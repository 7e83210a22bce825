"""The driver's check before a batch's first commit, against a real broker.

A child process writes a transaction with our KafkaProducer, prepares it and exits, as a task
whose transaction the driver commits. The committer, over the real admin client
(``committer.listing_ops``), commits a transaction with most of its ``transaction.timeout.ms``
left, and refuses one too close to it before writing the intent: the broker's
``transaction_start_time_ms`` is wall-clock ms, compared with the driver's wall clock. An
independent read_committed consumer (kafka-python) checks what became visible, and a plain record
written after each transaction proves its markers are written (nothing is left open).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest

from kafka_sink.admin.transactions import describe_transactions
from kafka_sink.sink_errors import SinkTransactionLostError
from kafka_sink.spark.driver.eos.committer import (
    COMMITTED,
    EosCommitter,
    TaskTransaction,
    listing_ops,
)
from kafka_sink.spark.driver.eos.intents import MemoryIntentStore
from tests.broker.txn_scenarios import prepare_in_another_process, read_records, write_after

TopicFactory = Callable[..., str]

pytestmark = pytest.mark.broker

TIMEOUT_MS = 8_000  # the check's margin is then a quarter of it: 2 s


def _prepared(
    bootstrap: str, transactional_id: str, topic: str
) -> tuple[TaskTransaction, int, list[tuple[str, int, bytes]]]:
    """A task's prepared transaction, its start time on the broker's clock, and its records."""
    prepared, written = prepare_in_another_process(
        bootstrap, transactional_id, topic, topic, count=2, timeout_ms=TIMEOUT_MS
    )
    config = {"bootstrap.servers": bootstrap}
    listing = describe_transactions(config, [transactional_id], timeout=30)[transactional_id]
    assert listing is not None and listing.state == "Ongoing"
    return TaskTransaction(0, prepared), listing.transaction_start_time_ms, written


def _committer(config: dict[str, str], prefix: str, store: MemoryIntentStore) -> EosCommitter:
    return EosCommitter(
        store,
        listing_ops(config, 30),
        query_key=prefix,
        prefix=prefix,
        transaction_timeout_ms=TIMEOUT_MS,
    )


def test_a_transaction_with_time_left_is_committed_and_one_about_to_time_out_is_refused(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    topic = topic_factory(partitions=3)
    prefix = f"eos-check-{uuid.uuid4().hex[:8]}"
    store = MemoryIntentStore()
    committer = _committer(config, prefix, store)
    try:
        task, _, fresh = _prepared(kafka_bootstrap, f"{prefix}-0-0", topic)
        assert committer.commit(1, [task]) == COMMITTED
        after = write_after(kafka_bootstrap, topic, 3)
        expected = sorted(fresh + after)
        assert read_records(kafka_bootstrap, [topic], "read_committed", expected) == expected

        task, started_ms, _ = _prepared(kafka_bootstrap, f"{prefix}-1-0", topic)
        # 6.5 s of its 8: still Ongoing (the broker aborts it after 8 s), 1.5 s left.
        time.sleep(max(0.0, (started_ms + 6_500) / 1000 - time.time()))
        with pytest.raises(SinkTransactionLostError, match="about to be aborted"):
            committer.commit(2, [task])
        last = store.last(prefix)
        assert last is not None and last.batch_id == 1  # no intent for batch 2
        # The refused batch's transaction was aborted: readers pass it, none of its rows shown.
        expected = sorted(expected + write_after(kafka_bootstrap, topic, 3))
        assert read_records(kafka_bootstrap, [topic], "read_committed", expected) == expected
    finally:
        committer.close()
