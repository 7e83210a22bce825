"""``.option("preset", "event-hubs")`` through Spark against a broker configured with Event Hubs'
limits (``socket.request.max.bytes=1046528``, ``connections.max.idle.ms=240000``): an
exactly-once write asks the broker whether it offers transactions, writes, and every row is read
back once by kafka-python; a ``kafka.max.request.size`` above the service's limit is refused on
the driver naming the option and the limit, before any task runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, read_all
from tests.conftest import running

EVENT_HUBS_LIMITS = {"socket.request.max.bytes": "1046528", "connections.max.idle.ms": "240000"}


@pytest.fixture(scope="module")
def event_hubs_like() -> Iterator[LocalKafka]:
    yield from running(
        LocalKafka(nodes=1, broker_config=EVENT_HUBS_LIMITS), "Kafka with Event Hubs' limits"
    )


def _options(kafka: LocalKafka, topic: str) -> dict[str, str]:
    return {
        "preset": "event-hubs",
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        # This broker listens in PLAINTEXT; the preset keeps what the user sets.
        "kafka.security.protocol": "PLAINTEXT",
        "topic": topic,
    }


@pytest.mark.slow
def test_an_exactly_once_write_with_the_preset_is_read_back_once(
    spark: Any, event_hubs_like: LocalKafka
) -> None:
    topic = "eh-spark-eos"
    create_topic(event_hubs_like.bootstrap_servers, topic, 2, 1)
    df = spark.range(2000).selectExpr("CAST(id AS STRING) AS value")
    df.write.format("pykafka").mode("append").options(
        **_options(event_hubs_like, topic), deliveryGuarantee="exactly-once"
    ).save()
    records = read_all(
        event_hubs_like.bootstrap_servers, topic, expected=2000, isolation_level="read_committed"
    )
    counts = Counter(int(r.value) for r in records)
    assert set(counts) == set(range(2000)) and set(counts.values()) == {1}


def test_a_request_size_above_the_limit_is_refused_on_the_driver(
    spark: Any, event_hubs_like: LocalKafka
) -> None:
    topic = "eh-spark-refused"
    create_topic(event_hubs_like.bootstrap_servers, topic, 1, 1)
    df = spark.range(10).selectExpr("CAST(id AS STRING) AS value")
    with pytest.raises(Exception) as refused:
        df.write.format("pykafka").mode("append").options(
            **_options(event_hubs_like, topic), **{"kafka.max.request.size": "2097152"}
        ).save()
    message = str(refused.value)
    assert "'kafka.max.request.size' is 2097152, outside what Azure Event Hubs allows" in message
    assert "at most 1046528" in message
    assert read_all(event_hubs_like.bootstrap_servers, topic) == []
