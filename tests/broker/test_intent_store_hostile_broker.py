"""Garbage in the shared intent topic of a real broker: a zstd bomb and a poisoned record.

Every exactly-once principal may write to the intent topic. Here another writer appends, through
a plain Produce the broker accepts, a 2 GiB zstd bomb (under 128 KB on the wire, valid records the
broker itself iterates) and a record whose header key is not UTF-8. A driver process of its own
then reads its query's intent back, as every exactly-once batch does: it gets the latest record,
and its peak RSS stays under READER_RSS_BOUND (before the decoding limit it grew by the bomb's
2 GiB, and the poisoned record made every read raise UnicodeDecodeError).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator

import pytest
import zstandard

from kafka_sink.admin.topic_log import TopicLog
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.records.batch import SealedBatch, encode_varint
from kafka_sink.records.compression import CompressionType
from kafka_sink.spark.eos import kafka_intents
from kafka_sink.spark.eos.intents import INTENT, BatchRecord
from kafka_sink.spark.eos.kafka_intents import PARTITION, KafkaIntentStore
from kafka_sink.testing.oracle import end_offsets

MiB = 1024 * 1024
# The reading process's peak RSS: the interpreter and the client (about 60 MiB here), plus at
# most about twice the 64 MiB decoding limit; the bomb alone would be 2 GiB.
READER_RSS_BOUND = 320 * MiB
BOMB_RECORDS = 2048  # of 1 MiB each: 2 GiB decoded

_READER = textwrap.dedent(
    """
    import json, resource, sys
    from kafka_sink.spark.eos.kafka_intents import IntentStoreError, KafkaIntentStore

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


def _raw(key: bytes, value_length: int, delta: int, header: bytes = b"") -> tuple[bytes, bytes]:
    """The bytes of one record before and after its value (``value_length`` zero bytes, which
    the caller puts between), with one header keyed ``header`` when given."""
    body = b"\x00" + encode_varint(0) + encode_varint(delta)
    body += encode_varint(len(key)) + key + encode_varint(value_length)
    headers = encode_varint(1) + encode_varint(len(header)) + header + encode_varint(0)
    tail = headers if header else encode_varint(0)
    length = len(body) + value_length + len(tail)
    return encode_varint(length) + body, tail


def _bomb() -> SealedBatch:
    """BOMB_RECORDS records keyed b"bomb" with 1 MiB zero values, as one zstd frame."""
    packer = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = bytes(MiB)
    parts = []
    for i in range(BOMB_RECORDS):
        head, tail = _raw(b"bomb", MiB, i)
        parts += [packer.compress(head), packer.compress(zeros), packer.compress(tail)]
    frame = b"".join([*parts, packer.flush()])
    return SealedBatch(
        CompressionType.ZSTD, BOMB_RECORDS, 0, 0, BOMB_RECORDS - 1, frame, 61 + len(frame)
    )


def _poisoned() -> SealedBatch:
    """One record keyed b"poison", value b"", whose one header key is b"\\xc3\\x28"."""
    head, tail = _raw(b"poison", 0, 0, b"\xc3\x28")
    records = head + tail
    return SealedBatch(CompressionType.NONE, 1, 0, 0, 0, records, 61 + len(records))


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


def test_a_bomb_and_a_poisoned_record_cost_the_reading_driver_neither_its_intent_nor_memory(
    kafka_bootstrap: str,
) -> None:
    topic = f"intents-{uuid.uuid4().hex[:10]}"
    store = KafkaIntentStore.open({"bootstrap.servers": kafka_bootstrap}, topic)
    try:
        store.write(_record(1))
        bomb = _bomb()
        assert bomb.size_bytes < 128 * 1024
        bomb_at = _produce(store.log, topic, bomb)
        poison_at = _produce(store.log, topic, _poisoned())
        store.write(_record(2))
        _produce(store.log, topic, bomb)  # and after the latest intent too
    finally:
        store.close()
    # The broker took all of it: 1 + 2048 + 1 + 1 + 2048 offsets.
    assert end_offsets(kafka_bootstrap, topic) == {0: 2 * BOMB_RECORDS + 3}
    assert (bomb_at, poison_at) == (1, 1 + BOMB_RECORDS)

    outcome = _read_in_a_process_of_its_own(kafka_bootstrap, topic)
    assert outcome.get("error") is None, outcome
    assert (outcome["batch_id"], outcome["state"]) == (2, INTENT)
    assert isinstance(outcome["maxrss"], int)
    assert outcome["maxrss"] < READER_RSS_BOUND, f"peak RSS {outcome['maxrss'] / MiB:.0f} MiB"


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
