"""send()'s fast path (bytes key and value into an open batch) against the general path.

The fast path must be invisible: same partitions, same batch bytes, same offsets and callback
order, same errors. Producers here have no broker: metadata is set by hand and the batches are
read back from the accumulator and completed by hand.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import KafkaError, ProducerClosedError
from kafka_sink.producer.batch import ProducerBatch
from kafka_sink.producer.futures import RecordMetadata
from kafka_sink.producer.producer import KafkaProducer
from kafka_sink.records.batch import read_batches
from kafka_sink.records.murmur2 import partition_for_key
from tests.fakes.metadata import metadata_response


@pytest.fixture
def make_producer() -> Iterator[Any]:
    made: list[KafkaProducer] = []

    def make(partitions: int = 3, **config: object) -> KafkaProducer:
        clock = ManualClock()
        producer = KafkaProducer(
            {"bootstrap.servers": "127.0.0.1:1", "batch.size": 1024, **config}, clock=clock
        )
        producer._metadata.update(metadata_response(partitions=partitions), clock.now_ms())
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.close(0)


def _batches(producer: KafkaProducer) -> list[ProducerBatch]:
    acc = producer._accumulator
    with acc._lock:
        return [b for dq in acc._batches.values() for b in dq]


def _keys(n: int) -> list[bytes]:
    return [b"key-%d" % i for i in range(n)]


def test_fast_path_matches_the_general_path_byte_for_byte(make_producer) -> None:
    fast = make_producer()
    general = make_producer()
    assert fast._keyed_fast_path
    values = [bytes([i % 251]) * (i % 97) for i in range(400)]
    for key, value in zip(_keys(400), values, strict=True):
        fast.send("t", value, key)
        # Empty headers take the general path: the record is the same.
        general.send("t", value, key, headers=[])
    fast_batches = _batches(fast)
    general_batches = _batches(general)
    assert len(fast_batches) > 3  # several batches per partition: batch.size was crossed
    assert [(b.tp, b.record_count) for b in fast_batches] == [
        (b.tp, b.record_count) for b in general_batches
    ]
    assert [b.encode() for b in fast_batches] == [b.encode() for b in general_batches]


def test_keyed_records_keep_murmur2_partitions_order_offsets_and_callback_order(
    make_producer,
) -> None:
    producer = make_producer(partitions=5)
    keys = _keys(600)
    seen: list[tuple[bytes, int, int]] = []

    def callback_for(key: bytes) -> Any:
        def callback(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
            assert exc is None and metadata is not None
            seen.append((key, metadata.partition, metadata.offset))

        return callback

    futures = [producer.send("t", b"v" + key, key, callback=callback_for(key)) for key in keys]
    batches = _batches(producer)
    base = {p: 1000 * p for p in range(5)}
    for batch in batches:  # in queue order within each partition
        batch.done(base[batch.partition], -1, None)
        base[batch.partition] += batch.record_count
    by_partition: dict[int, list[bytes]] = {}
    for key, future in zip(keys, futures, strict=True):
        metadata = future.get(0)
        assert metadata.partition == partition_for_key(key, 5)
        assert metadata.serialized_key_size == len(key)
        assert metadata.serialized_value_size == len(key) + 1
        by_partition.setdefault(metadata.partition, []).append(key)
        assert metadata.offset == 1000 * metadata.partition + (
            len(by_partition[metadata.partition]) - 1
        )
    # The bytes hold the same records, in send order per partition.
    decoded: dict[int, list[bytes | None]] = {}
    for batch in batches:
        for records in read_batches(batch.encode()):
            decoded.setdefault(batch.partition, []).extend(r.key for r in records.records)
    assert decoded == by_partition
    # Callbacks ran per batch in completion order, each record's in append order.
    assert [k for k, _p, _o in seen] == [k for b in batches for k in _keys_of(b)]


def _keys_of(batch: ProducerBatch) -> list[bytes | None]:
    return [r.key for decoded in read_batches(batch.encode()) for r in decoded.records]


def test_a_new_batch_rereads_the_partition_count(make_producer) -> None:
    """The fast path appends to open batches with the snapshot it has; opening a batch takes
    a fresh one, so added partitions are used within one batch of records."""
    producer = make_producer(partitions=2)
    for key in _keys(10):
        producer.send("t", b"x", key)
    producer._metadata.update(metadata_response(partitions=6), producer._clock.now_ms())
    keys = _keys(200)
    futures = [producer.send("t", b"x" * 50, key) for key in keys]
    for batch in _batches(producer):
        batch.done(0, -1, None)
    # batch.size=1024 holds about 15 such records: well before the last 50 sends, a batch
    # of each of the two old partitions was opened and the six partitions apply.
    tail = [(f.get(0).partition, key) for key, f in zip(keys, futures, strict=True)][-50:]
    assert all(p == partition_for_key(key, 6) for p, key in tail)
    assert {p for p, _key in tail} - {0, 1}


def test_closed_or_failed_producer_refuses_through_the_fast_path(make_producer) -> None:
    producer = make_producer()
    producer.send("t", b"v", b"k")  # an open batch exists for the fast path
    producer._sender.fatal_error = KafkaError("fenced")
    with pytest.raises(KafkaError, match="fenced"):
        producer.send("t", b"v", b"k")
    producer._sender.fatal_error = None
    # The accumulator closes before the producer's flag is read again (close() racing a send).
    producer._accumulator.close()
    with pytest.raises(ProducerClosedError):
        producer.send("t", b"v", b"k")
    assert sum(b.record_count for b in _batches(producer)) == 1


@pytest.mark.parametrize(
    "config",
    [
        {"partitioner.ignore.keys": "true"},
        {"partitioner.class": "kafka_sink.testing.plugins.last_partition"},
        {"value.serializer": "kafka_sink.testing.plugins.TaggingJsonSerializer"},
        {"transactional.id": "fast-path"},
    ],
)
def test_plugins_and_ignored_keys_never_take_the_fast_path(make_producer, config) -> None:
    producer = make_producer(**config)
    assert not producer._keyed_fast_path


@pytest.mark.parametrize("partitions", [1, 7, 1000])
def test_the_fast_paths_inlined_formula_is_partition_for_key(make_producer, partitions) -> None:
    """send()'s fast path inlines records.murmur2.partition_for_key; the general path calls it."""
    producer = make_producer(
        partitions=partitions, **{"batch.size": 1 << 18, "buffer.memory": 1 << 30}
    )
    rng = random.Random(partitions)
    keys = [rng.randbytes(rng.randrange(0, 24)) for _ in range(2000)]
    general = [producer.send("t", b"v", key, headers=[]) for key in keys]  # opens every batch
    general_calls = 0
    send_general = producer._send

    def counting_send(*args: Any) -> Any:
        nonlocal general_calls
        general_calls += 1
        return send_general(*args)

    producer._send = counting_send
    fast = [producer.send("t", b"v", key) for key in keys]
    assert general_calls == 0  # every record took the fast path
    for batch in _batches(producer):
        batch.done(0, -1, None)
    expected = [partition_for_key(key, partitions) for key in keys]
    assert [f.get(0).partition for f in general] == expected
    assert [f.get(0).partition for f in fast] == expected
