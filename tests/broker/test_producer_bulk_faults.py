"""send_columns against a slow or stalled broker: per-batch max.block.ms, and what a failed call
queued.

One extra single-node Kafka for this module (``proxied``, ``tests/conftest.py``), reached only
through a TCP proxy the tests slow down (``delay_ms``) or pause.
"""

from __future__ import annotations

import time
import uuid

import pyarrow as pa
import pytest

from kafka_sink import KafkaProducer
from kafka_sink.errors import BufferExhaustedError
from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, end_offsets, read_all


@pytest.fixture
def topic(proxied: LocalKafka) -> str:
    name = f"bulk-faults-{uuid.uuid4().hex[:10]}"
    create_topic(proxied.bootstrap_servers, name, partitions=1)
    return name


def _values(n: int) -> pa.Array:
    return pa.array([b"%06d" % i + b"x" * 994 for i in range(n)], pa.binary())  # ~1 kB each


def test_a_slow_broker_does_not_fail_a_call_longer_than_max_block_ms(
    proxied: LocalKafka, topic: str
) -> None:
    # Every 64 kB the proxy forwards waits 100 ms: each batch waits well under max.block.ms for
    # memory, the whole call several times max.block.ms. One deadline for the whole call would
    # fail it; one per batch (as Java has per record) does not.
    n = 1500
    producer = KafkaProducer(
        {
            "bootstrap.servers": proxied.proxied_bootstrap_servers,
            "buffer.memory": 128 * 1024,
            "max.block.ms": 1500,
        }
    )
    with producer:
        producer.partitions_for(topic)
        proxied.proxy(proxied.node_ids[0]).delay_ms = 100
        start = time.monotonic()
        future = producer.send_columns(topic, _values(n))
        took = time.monotonic() - start
        assert future.get(60) == {0: PartitionOffsets(0, n - 1, n)}
    assert took > 1.5, f"the broker was not slow enough to show anything ({took:.1f} s)"
    assert end_offsets(proxied.bootstrap_servers, topic) == {0: n}


def test_a_call_that_fails_part_way_hands_over_the_future_of_what_was_queued(
    proxied: LocalKafka, topic: str
) -> None:
    # The broker stalls mid-call: buffer.memory stays full, the waiting batch gives up after
    # max.block.ms, and the error carries the future of the records queued before it. Once the
    # broker is back those records land, and only those.
    n = 4000
    values = _values(n)
    producer = KafkaProducer(
        {
            "bootstrap.servers": proxied.proxied_bootstrap_servers,
            "buffer.memory": 256 * 1024,
            "max.block.ms": 1500,
        }
    )
    with producer:
        producer.partitions_for(topic)
        proxied.proxy(proxied.node_ids[0]).pause()
        start = time.monotonic()
        with pytest.raises(BufferExhaustedError, match=r"max\.block\.ms=1500") as info:
            producer.send_columns(topic, values)
        assert 1.4 <= time.monotonic() - start < 30
        queued = info.value.queued_future  # type: ignore[attr-defined]
        assert isinstance(queued, BulkSendFuture)
        k = queued.record_count
        assert 0 < k < n
        assert not queued.done()
        proxied.proxy(proxied.node_ids[0]).resume()
        assert queued.get(60) == {0: PartitionOffsets(0, k - 1, k)}
    records = read_all(proxied.bootstrap_servers, topic, expected=k)
    assert [r.value for r in records] == values.slice(0, k).to_pylist()
    assert end_offsets(proxied.bootstrap_servers, topic) == {0: k}
