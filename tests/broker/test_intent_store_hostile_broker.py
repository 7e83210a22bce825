"""Garbage in the shared intent topic of a real broker: a zstd bomb and a poisoned record.

Every exactly-once principal may write to the intent topic. Here another writer appends, through
a plain Produce the broker accepts, a 2 GiB zstd bomb (under 128 KB on the wire, valid records the
broker itself iterates) or a record whose header key is not UTF-8, before and after the query's
latest intent. A driver process of its own then reads that intent back, as every exactly-once
batch does: it gets it, and its peak RSS stays under READER_RSS_BOUND (before the decoding limit
it grew by gigabytes, and the poisoned record made every read raise UnicodeDecodeError). A
query whose own latest record is garbage fails, naming the key, topic, partition and offset.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator

import pytest

from kafka_sink.admin.topic_log import TopicLog
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.records.batch import SealedBatch
from kafka_sink.spark.driver.eos import kafka_intents
from kafka_sink.spark.driver.eos.intents import INTENT, BatchRecord
from kafka_sink.spark.driver.eos.kafka_intents import PARTITION, KafkaIntentStore
from kafka_sink.testing.oracle import end_offsets
from tests.fakes.hostile import poisoned, zstd_bomb

MiB = 1024 * 1024
# The reading process's peak RSS: the interpreter and the client (about 35 MiB here) and the
# decoding limit (64 MiB per Fetch answer), with the allocator's slack. Alone the reader peaks
# near 100 MiB; inside the whole suite it has peaked at 320-370 MiB. Either is far below the
# bomb's 2 GiB, and below the 6 GiB the reader reached before the limit.
READER_RSS_BOUND = 512 * MiB
BOMB_RECORDS = 2048  # of 1 MiB each: 2 GiB decoded

_READER = textwrap.dedent(
    """
    import json, resource, sys
    from kafka_sink.sink_errors import IntentStoreError
    from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore

    bootstrap, topic = sys.argv[1:3]
    store = KafkaIntentStore.open({"bootstrap.servers": bootstrap}, topic, timeout_s=60)
    try:
        record = store.last("q")
        outcome = {"batch_id": record.batch_id, "state": record.state}
    except IntentStoreError as exc:
        outcome = {"error": str(exc)}
    finally:
        store.close()
    outcome["maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(outcome))
    """
)


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    kafka_intents._POSITIONS.clear()
    kafka_intents._CHECKED.clear()
    kafka_intents.close_idle()
    yield
    kafka_intents._POSITIONS.clear()
    kafka_intents._CHECKED.clear()
    kafka_intents.close_idle()


def _record(batch_id: int) -> BatchRecord:
    txn = PreparedTransaction(f"pykafka-q-0-{batch_id}", 1000, batch_id, (("orders", 0),))
    return BatchRecord("q", batch_id, INTENT, (txn,))


def _produce(log: TopicLog, topic: str, batch: SealedBatch) -> int:
    """A plain Produce of ``batch`` as another client of the topic would send it."""
    deadline = log._deadline(f"appending to {topic}-{PARTITION}")
    encoded = batch.encode()
    return log._retrying(deadline, lambda: log._produce(topic, PARTITION, encoded, deadline))


def _read_in_a_process_of_its_own(bootstrap: str, topic: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _READER, bootstrap, topic],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


def _topic_with(bootstrap: str, garbage: SealedBatch) -> str:
    """A new intent topic: the query's intent 1, ``garbage``, its intent 2, ``garbage`` again
    (before and after the latest intent), each written as its writer would."""
    topic = f"intents-{uuid.uuid4().hex[:10]}"
    store = KafkaIntentStore.open({"bootstrap.servers": bootstrap}, topic)
    try:
        store.write(_record(1))
        first = _produce(store.log, topic, garbage)
        store.write(_record(2))
        _produce(store.log, topic, garbage)
    finally:
        store.close()
    # The broker took all of it.
    assert first == 1
    ends = end_offsets(bootstrap, topic)
    assert ends == {0: 2 * (garbage.last_offset_delta + 1) + 2}
    _wait_until_stable(bootstrap, topic, ends[0])
    return topic


def _wait_until_stable(bootstrap: str, topic: str, end: int) -> None:
    """Until the intents' transaction markers are written (the last stable offset is the end):
    what is shown here is the read of committed garbage. A reader that comes before them reads
    past the last stable offset too, each poll within the same decoding limit."""
    from kafka_sink.testing.oracle import _consumer, _topic_partitions

    consumer = _consumer(bootstrap, isolation_level="read_committed")
    try:
        deadline = time.monotonic() + 60
        [tp] = _topic_partitions(consumer, topic, deadline)
        while int(consumer.end_offsets([tp])[tp]) < end:
            assert time.monotonic() < deadline, "the intents' markers were never written"
            time.sleep(0.1)
    finally:
        consumer.close()


def test_a_zstd_bomb_costs_the_reading_driver_neither_its_intent_nor_its_memory(
    kafka_bootstrap: str,
) -> None:
    bomb = zstd_bomb(BOMB_RECORDS)
    assert bomb.size_bytes < 128 * 1024
    topic = _topic_with(kafka_bootstrap, bomb)
    outcome = _read_in_a_process_of_its_own(kafka_bootstrap, topic)
    assert outcome.get("error") is None, outcome
    assert (outcome["batch_id"], outcome["state"]) == (2, INTENT)
    assert isinstance(outcome["maxrss"], int)
    assert outcome["maxrss"] < READER_RSS_BOUND, f"peak RSS {outcome['maxrss'] / MiB:.0f} MiB"


def test_a_record_with_a_non_utf8_header_key_stops_no_query(kafka_bootstrap: str) -> None:
    topic = _topic_with(kafka_bootstrap, poisoned())
    outcome = _read_in_a_process_of_its_own(kafka_bootstrap, topic)
    assert outcome.get("error") is None, outcome
    assert (outcome["batch_id"], outcome["state"]) == (2, INTENT)


def test_a_query_whose_own_latest_record_is_garbage_fails_naming_the_topic(
    kafka_bootstrap: str,
) -> None:
    topic = f"intents-{uuid.uuid4().hex[:10]}"
    config = {"bootstrap.servers": kafka_bootstrap}
    store = KafkaIntentStore.open(config, topic)
    try:
        store.write(_record(1))
        at = store.log.append(topic, PARTITION, b"q", b"\xff\xfe not an intent")
    finally:
        store.close()
    outcome = _read_in_a_process_of_its_own(kafka_bootstrap, topic)
    error = str(outcome.get("error"))
    assert f"of key 'q' in {topic}-0 at offset {at} is not JSON" in error
