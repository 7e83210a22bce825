"""No store ever replaces a batch's done record with an earlier step (intent or partial).

A writer that read the store before another finished the batch (a second run of a keyed job, a
driver fenced since) must not turn the batch back into an intent (whose roll-forward would find
its transactions aborted) or a partial record (whose re-run writes the batch again). Each store
refuses that write itself, so the guard holds whatever path the caller took: the memory and file
stores under a lock, the Kafka store by reading the key before it appends (atomic through a
fence: a write after another driver's InitProducerId is refused).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.sink_errors import DoneRecordReplacedError, SinkError
from kafka_sink.spark.driver.eos import kafka_intents
from kafka_sink.spark.driver.eos.intents import (
    DONE,
    INTENT,
    PARTIAL,
    BatchRecord,
    FileIntentStore,
    IntentStore,
    MemoryIntentStore,
)
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from tests.fakes.coordinator import FakeCoordinator
from tests.fakes.topic_log import CoordinatedTopicLog

KEY = "job-0123"


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    kafka_intents._POSITIONS.clear()
    yield
    kafka_intents._POSITIONS.clear()


def _memory(_: str) -> IntentStore:
    return MemoryIntentStore()


def _file(directory: str) -> IntentStore:
    return FileIntentStore(directory)


def _kafka(_: str) -> IntentStore:
    return KafkaIntentStore(CoordinatedTopicLog(FakeCoordinator()), "intents", cluster="c:9092")


STORES = pytest.mark.parametrize("make", [_memory, _file, _kafka], ids=["memory", "file", "kafka"])


def _record(batch_id: int, state: str, run: int = 1) -> BatchRecord:
    txn = PreparedTransaction(f"pykafka-job-{run}-0-0", 7, run, (("orders", 0),))
    return BatchRecord(KEY, batch_id, state, (txn,) if state != PARTIAL else ())


@STORES
@pytest.mark.parametrize("state", [INTENT, PARTIAL])
def test_a_done_record_is_never_replaced_by_an_intent_or_a_partial_record(
    make: Callable[[str], IntentStore], state: str, tmp_path: object
) -> None:
    store = make(str(tmp_path))
    done = _record(0, DONE)
    store.write(_record(0, INTENT))
    store.write(done)
    with pytest.raises(DoneRecordReplacedError) as refused:
        store.write(_record(0, state, run=2))
    message = str(refused.value)
    assert f"{state} record of batch 0" in message and repr(KEY) in message
    assert "already done" in message
    assert isinstance(refused.value, SinkError)
    assert store.last(KEY) == done


@STORES
def test_a_done_record_of_a_later_batch_refuses_an_older_batchs_intent(
    make: Callable[[str], IntentStore], tmp_path: object
) -> None:
    store = make(str(tmp_path))
    store.write(_record(5, DONE))
    with pytest.raises(DoneRecordReplacedError):
        store.write(_record(4, INTENT))
    last = store.last(KEY)
    assert last is not None and (last.batch_id, last.state) == (5, DONE)


@STORES
def test_the_store_still_moves_forward_and_stamps_done_records(
    make: Callable[[str], IntentStore], tmp_path: object
) -> None:
    store = make(str(tmp_path))
    store.write(_record(0, INTENT))
    store.write(_record(0, PARTIAL))  # Kafka lost part of it
    store.write(_record(0, INTENT, run=2))  # the re-run of the lost partitions
    store.write(_record(0, DONE, run=2))
    stamped = BatchRecord(KEY, 0, DONE, _record(0, DONE, run=2).transactions, {"write_id": "w"})
    store.write(stamped)  # done over done: the completion's stamp
    store.write(_record(1, INTENT))  # the next batch of a streaming query
    store.write(_record(1, DONE))
    store.delete(KEY)  # a batch job without a key forgets its record
    store.write(_record(0, INTENT))
    last = store.last(KEY)
    assert last is not None and (last.batch_id, last.state) == (0, INTENT)
