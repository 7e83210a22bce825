"""KafkaIntentStore past the last stable offset of its shared partition, on the coordinator model.

A transaction left open on partition 0 holds its last stable offset: what follows is read with
read_uncommitted and settled by its transaction's outcome. Another key's open record costs
nothing; the store's own key committed after it is the latest; the store's own key inside an
open transaction is waited for (bounded), then named, never answered with the older record.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_sink.sink_errors import IntentStoreError
from kafka_sink.spark.driver.eos import fence, kafka_intents
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, BatchRecord
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from tests.fakes.coordinator import FakeCoordinator
from tests.fakes.topic_log import CoordinatedTopicLog

TOPIC = "intents"
KEY = "query-1"


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    kafka_intents._POSITIONS.clear()
    fence._HELD.clear()
    yield
    kafka_intents._POSITIONS.clear()
    fence._HELD.clear()


def _store(coordinator: FakeCoordinator, name: str) -> tuple[KafkaIntentStore, CoordinatedTopicLog]:
    kafka_intents._POSITIONS.clear()  # a process of its own
    log = CoordinatedTopicLog(coordinator)
    return KafkaIntentStore(log, TOPIC, cluster=name), log


def _open_write(coordinator: FakeCoordinator, tid: str, key: str, timeout_ms: int) -> None:
    """A writer killed between its Produce and its EndTxn: its record stays in an open
    transaction for up to ``timeout_ms``."""
    coordinator.begin(tid, {(TOPIC, 0): [(key.encode(), b"{}")]}, timeout_ms)


def test_this_keys_record_in_an_open_transaction_is_waited_for_then_named() -> None:
    coordinator = FakeCoordinator()
    writer, _ = _store(coordinator, "writer")
    writer.write(BatchRecord(KEY, 4, DONE, ()))
    _open_write(coordinator, "other.fence", "other-query", 600_000)
    # A record of this very key, in a transaction that neither committed nor aborted yet.
    _open_write(coordinator, "zombie.fence", KEY, 600_000)
    reader, log = _store(coordinator, "reader")
    start = coordinator.clock.now_ms()
    with pytest.raises(IntentStoreError) as refused:
        reader.last(KEY)
    # It waited the store's bound, not forever and not at all.
    assert coordinator.clock.now_ms() - start >= log.timeout_ms
    message = str(refused.value)
    for part in (f"{TOPIC}-0", "[1, 3)", "offsets 2", repr(KEY), "transaction.timeout.ms"):
        assert part in message, (part, message)


def test_an_open_transaction_ending_within_the_bound_gives_the_answer() -> None:
    coordinator = FakeCoordinator()
    writer, _ = _store(coordinator, "writer")
    writer.write(BatchRecord(KEY, 4, DONE, ()))
    # This key's record in a transaction the coordinator aborts after 20 s.
    _open_write(coordinator, "zombie.fence", KEY, 20_000)
    writer.write(BatchRecord("query-2", 0, INTENT, ()))
    reader, _ = _store(coordinator, "reader")
    latest = reader.last(KEY)
    assert latest is not None and (latest.batch_id, latest.state) == (4, DONE)
    assert reader.last("query-2") is not None


def test_another_keys_open_record_neither_hides_nor_delays_this_keys_later_records() -> None:
    coordinator = FakeCoordinator()
    writer, _ = _store(coordinator, "writer")
    writer.write(BatchRecord(KEY, 4, DONE, ()))
    _open_write(coordinator, "other.fence", "other-query", 600_000)
    writer.write(BatchRecord(KEY, 5, INTENT, ()))
    start = coordinator.clock.now_ms()
    for name in ("writer", "reader"):  # the process that wrote it, and a new one
        store = writer if name == "writer" else _store(coordinator, name)[0]
        latest = store.last(KEY)
        assert latest is not None and (latest.batch_id, latest.state) == (5, INTENT), name
    assert coordinator.clock.now_ms() == start  # nothing waited
