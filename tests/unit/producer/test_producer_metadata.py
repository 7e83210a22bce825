"""KafkaProducer's metadata wiring, stepped with a ManualClock and no broker.

The producer points at a closed port, so nothing ever answers; the test plays the broker's part by
applying Metadata responses itself and watches which topics the producer still asks about.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.net.metadata import Metadata
from kafka_sink.producer.producer import KafkaProducer
from tests.fakes.metadata import metadata_response


@pytest.fixture
def make_producer() -> Iterator[object]:
    made: list[KafkaProducer] = []

    def make(clock: ManualClock, **config: str) -> KafkaProducer:
        producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", **config}, clock=clock)
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.close(0)


def _metadata(producer: KafkaProducer) -> Metadata:
    return producer._metadata


def test_topic_unused_for_metadata_max_idle_ms_is_dropped(make_producer) -> None:
    clock = ManualClock()
    producer = make_producer(clock, **{"metadata.max.idle.ms": "5000"})
    metadata = _metadata(producer)
    metadata.update(metadata_response(partitions=2), clock.now_ms())
    producer.send("t", b"v", partition=0)  # used at 0
    clock.advance(3_000)
    producer.send("t", b"v", partition=1)  # a new batch: used again at 3000
    clock.advance(3_000)
    # 6000: past 0 + 5000, not 3000 + 5000
    metadata.update(metadata_response(partitions=2), clock.now_ms())
    assert "t" in metadata.topics()
    clock.advance(2_000)
    metadata.update(metadata_response(partitions=2), clock.now_ms())  # 8000: idle for 5000 ms
    assert "t" not in metadata.topics()
    assert metadata.partitions_for("t") is None
    # Its records are still queued (the leader never answers): the sender finds no leader for
    # them and tracks the topic again, asking for an update.
    deadline = time.monotonic() + 10
    while "t" not in metadata.topics() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "t" in metadata.topics()
    assert metadata.update_requested()


def test_default_metadata_max_idle_ms_keeps_topics_five_minutes(make_producer) -> None:
    clock = ManualClock()
    producer = make_producer(clock)
    metadata = _metadata(producer)
    metadata.update(metadata_response(partitions=2), clock.now_ms())
    producer.send("t", b"v", partition=0)
    clock.advance(8_000)
    metadata.update(metadata_response(partitions=2), clock.now_ms())
    assert "t" in metadata.topics()
    clock.advance(300_000 - 8_000 - 1)
    metadata.update(metadata_response(partitions=2), clock.now_ms())
    assert "t" in metadata.topics()
    clock.advance(1)
    metadata.update(metadata_response(partitions=2), clock.now_ms())
    assert "t" not in metadata.topics()


def test_bulk_sends_mark_the_topic_used(make_producer) -> None:
    import pyarrow as pa

    clock = ManualClock()
    producer = make_producer(clock, **{"metadata.max.idle.ms": "5000"})
    metadata = _metadata(producer)
    metadata.update(metadata_response(partitions=2), clock.now_ms())
    values = pa.array([b"a", b"b"], pa.binary())
    for _ in range(3):  # a bulk send every 4 s keeps the topic for 12 s
        producer.send_columns("t", values)
        clock.advance(4_000)
        metadata.update(metadata_response(partitions=2), clock.now_ms())
        assert "t" in metadata.topics()
    clock.advance(1_000)
    metadata.update(metadata_response(partitions=2), clock.now_ms())
    assert "t" not in metadata.topics()
