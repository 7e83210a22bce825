"""KafkaProducer against a real broker; kafka-python reads back what landed."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

import pyarrow as pa
import pytest

from kafka_sink import KafkaProducer
from kafka_sink.producer.futures import PartitionOffsets, RecordMetadata
from kafka_sink.testing.oracle import end_offsets, read_all

TopicFactory = Callable[..., str]


def java_partition(key: bytes, n: int) -> int:
    from kafka.partitioner.default import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % n


def test_keyed_records_land_where_java_puts_them_intact_and_in_order(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=6)
    sent = []
    seen: list[tuple[RecordMetadata | None, BaseException | None]] = []
    with KafkaProducer({"bootstrap.servers": kafka_bootstrap, "linger.ms": "2"}) as producer:
        for i in range(600):
            key = b"user-%d" % (i % 37)
            value = b"%d:%s" % (i, b"x" * (i % 50))
            headers = [("i", b"%d" % i), ("null", None)] if i % 3 == 0 else None
            ts = 1_700_000_000_000 + i
            future = producer.send(
                topic,
                value,
                key=key,
                headers=headers,
                timestamp_ms=ts,
                callback=lambda m, e: seen.append((m, e)),
            )
            sent.append((key, value, headers or [], ts, future))
        producer.flush(30)
    records = read_all(kafka_bootstrap, topic, expected=600)
    assert len(records) == 600
    assert len(seen) == 600 and all(e is None for _, e in seen)
    by_pos = {(r.partition, r.offset): r for r in records}
    last_index: dict[int, int] = {}
    for key, value, headers, ts, future in sent:
        md = future.get(0)
        assert md.partition == java_partition(key, 6)
        r = by_pos[(md.partition, md.offset)]
        assert (r.key, r.value, r.headers, r.timestamp_ms) == (key, value, headers, ts)
        assert (md.timestamp, md.serialized_key_size) == (ts, len(key))
        # Order within each partition is send order.
        index = int(value.split(b":")[0])
        assert index > last_index.get(md.partition, -1)
        last_index[md.partition] = index


def test_plain_keyed_sends_take_the_fast_path_and_land_like_the_rest(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """Keyed bytes with nothing else set go straight to the open batch; every third record
    carries a header and takes the general path, which opens the batches. Both kinds must land
    where Java puts them, at the offsets their futures report, in send order, with callbacks in
    send order per partition."""
    topic = topic_factory(partitions=4)
    sent = []
    seen: dict[int, list[int]] = {}

    def callback_for(i: int) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        def callback(md: RecordMetadata | None, exc: BaseException | None) -> None:
            assert exc is None and md is not None
            seen.setdefault(md.partition, []).append(i)

        return callback

    with KafkaProducer({"bootstrap.servers": kafka_bootstrap, "batch.size": 4096}) as producer:
        assert producer._keyed_fast_path
        for i in range(3000):
            key = b"k%d" % (i % 101)
            value = b"%d:%s" % (i, b"v" * (i % 70))
            headers = [("i", b"%d" % i)] if i % 3 == 0 else None
            future = producer.send(topic, value, key, headers=headers, callback=callback_for(i))
            sent.append((key, value, headers or [], future))
        producer.flush(60)
    records = read_all(kafka_bootstrap, topic, expected=3000)
    assert len(records) == 3000
    by_pos = {(r.partition, r.offset): r for r in records}
    in_order: dict[int, list[int]] = {}
    for i, (key, value, headers, future) in enumerate(sent):
        md = future.get(0)
        assert md.partition == java_partition(key, 4)
        r = by_pos[(md.partition, md.offset)]
        assert (r.key, r.value, r.headers) == (key, value, headers)
        in_order.setdefault(md.partition, []).append(i)
    # Offsets follow send order in every partition, and so do the callbacks.
    for partition, indices in in_order.items():
        offsets = [sent[i][3].get(0).offset for i in indices]
        assert offsets == sorted(offsets)
        assert seen[partition] == indices


def test_keyless_records_spread_sticky_and_all_arrive(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=3)
    with KafkaProducer({"bootstrap.servers": kafka_bootstrap, "batch.size": 1024}) as producer:
        futures = [producer.send(topic, b"%05d" % i + b"." * 90) for i in range(3000)]
        producer.flush(30)
    parts = [f.get(0).partition for f in futures]
    assert set(parts) == {0, 1, 2}
    # Sticky: consecutive records mostly share a partition (a switch per ~batch.size bytes).
    switches = sum(1 for a, b in itertools.pairwise(parts) if a != b)
    assert switches < 3000 // 5
    assert len(read_all(kafka_bootstrap, topic, expected=3000)) == 3000


def test_bulk_send_offsets_match_what_is_read_back(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=4)
    n = 5000
    keys = pa.array([None if i % 10 == 0 else b"k%d" % (i % 97) for i in range(n)], pa.binary())
    values = pa.array([b"v%d" % i for i in range(n)], pa.binary())
    explicit = pa.array([3 if i % 7 == 0 else None for i in range(n)], pa.int32())
    with KafkaProducer({"bootstrap.servers": kafka_bootstrap}) as producer:
        bulk = producer.send_columns(
            topic, values, keys, partitions=explicit, timestamps_ms=1_700_000_000_000
        )
        tail = producer.send_columns(topic, [b"last"], [b"k1"])
        offsets = bulk.get(30)
        tail.get(30)
    records = read_all(kafka_bootstrap, topic, expected=n + 1)
    assert len(records) == n + 1
    by_partition: dict[int, list[int]] = {}
    for r in records:
        if r.value != b"last":
            by_partition.setdefault(r.partition, []).append(r.offset)
    assert sum(o.record_count for o in offsets.values()) == n
    for partition, got in by_partition.items():
        assert offsets[partition] == PartitionOffsets(got[0], got[-1], len(got))
    for r in records:
        if r.value == b"last":
            continue
        i = int(r.value[1:])
        assert r.timestamp_ms == 1_700_000_000_000
        if i % 7 == 0:
            assert r.partition == 3
        elif i % 10 != 0:
            assert r.key == b"k%d" % (i % 97)
            assert r.partition == java_partition(r.key, 4)
    # Input order is kept within each partition.
    for partition in by_partition:
        indexes = [
            int(r.value[1:]) for r in records if r.partition == partition and r.value != b"last"
        ]
        assert indexes == sorted(indexes)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks_levels(kafka_bootstrap: str, topic_factory: TopicFactory, acks: str) -> None:
    topic = topic_factory(partitions=2)
    config = {"bootstrap.servers": kafka_bootstrap, "acks": acks}
    if acks != "all":
        config["enable.idempotence"] = "false"
    with KafkaProducer(config) as producer:
        futures = [producer.send(topic, b"%d" % i, key=b"%d" % i) for i in range(200)]
        producer.flush(30)
    offsets = [f.get(0).offset for f in futures]
    if acks == "0":
        assert set(offsets) == {-1}
    else:
        assert min(offsets) == 0
    assert len(read_all(kafka_bootstrap, topic, expected=200)) == 200


def test_partitions_for_and_explicit_partition(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=5)
    with KafkaProducer({"bootstrap.servers": kafka_bootstrap}) as producer:
        assert producer.partitions_for(topic) == [0, 1, 2, 3, 4]
        md = producer.send(topic, b"x", key=b"ignored-key", partition=4).get(30)
        assert md.partition == 4
        with pytest.raises(ValueError, match="partition"):
            producer.send(topic, b"x", partition=-1)
    assert end_offsets(kafka_bootstrap, topic)[4] == 1


def test_close_with_timeout_completes_every_future(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2)
    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 50})
    futures = [producer.send(topic, b"%d" % i) for i in range(2000)]
    start = time.monotonic()
    producer.close(timeout=30)
    assert time.monotonic() - start < 30
    assert all(f.done() for f in futures)
    delivered = [f for f in futures if f.succeeded()]
    assert sum(end_offsets(kafka_bootstrap, topic).values()) == len(delivered) == 2000
    with pytest.raises(Exception, match="closed"):
        producer.send(topic, b"late")


def test_invalid_topic_name_fails_at_once_naming_the_topic(kafka_bootstrap: str) -> None:
    from kafka_sink.errors import InvalidTopicError

    producer = KafkaProducer({"bootstrap.servers": kafka_bootstrap, "max.block.ms": 30_000})
    try:
        start = time.monotonic()
        with pytest.raises(InvalidTopicError, match="'bad topic'"):
            producer.send("bad topic", b"x")
        with pytest.raises(InvalidTopicError, match="'bad/topic'"):
            producer.send_columns("bad/topic", [b"x"])
        # Well within max.block.ms: the brokers' answer is final, waiting cannot fix a name.
        assert time.monotonic() - start < 20
    finally:
        producer.close(5)
