"""metadata.max.idle.ms against a real broker: an unused topic leaves the producer's metadata.

The producer sends once to one topic and keeps sending to another; with the minimum idle time
(5 s) and frequent refreshes, the first is dropped from what it asks the brokers about while the
second stays, and sending to the first again still works.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kafka_sink import KafkaProducer
from kafka_sink.testing.oracle import end_offsets

TopicFactory = Callable[..., str]


def test_unused_topic_is_dropped_after_metadata_max_idle_ms(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    idle, busy = topic_factory(), topic_factory()
    config = {
        "bootstrap.servers": kafka_bootstrap,
        "metadata.max.idle.ms": "5000",
        "metadata.max.age.ms": "500",
    }
    with KafkaProducer(config) as producer:
        producer.send(idle, b"once").get(30)
        metadata = producer._metadata
        assert idle in metadata.topics()
        start = time.monotonic()
        while idle in metadata.topics() and time.monotonic() - start < 60:
            producer.send(busy, b"again").get(30)
            time.sleep(0.1)
        elapsed = time.monotonic() - start
        assert idle not in metadata.topics(), "the unused topic was never dropped"
        assert busy in metadata.topics()
        assert elapsed >= 4.5, elapsed  # not before metadata.max.idle.ms
        assert metadata.partitions_for(idle) is None
        producer.send(idle, b"back").get(30)  # used again: fetched again
        assert idle in metadata.topics()
    assert end_offsets(kafka_bootstrap, idle) == {0: 2}
