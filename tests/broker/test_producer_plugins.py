"""Serializers, interceptors and ``partitioner.class`` against a real broker, read back with
kafka-python: bytes, headers and partitions as the plugins made them, and one
``on_acknowledgement`` per record for deliveries and failures alike."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from kafka_sink import KafkaProducer
from kafka_sink.errors import KafkaError, SerializationError
from kafka_sink.testing import plugins as examples
from kafka_sink.testing.oracle import read_all

TopicFactory = Callable[..., str]

PARTITIONS = 4
# The topic refuses records above this; the producer's own limit stays higher, so an oversized
# record is accepted by send() and fails in delivery.
TOPIC_MAX_MESSAGE_BYTES = 4000
WAIT_S = 60


def _config(bootstrap: str, counter: examples.CountingInterceptor) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "key.serializer": "kafka_sink.testing.plugins.json_serializer",  # (data)
        "value.serializer": "kafka_sink.testing.plugins:TaggingJsonSerializer",  # (t, d, h)
        "partitioner.class": "kafka_sink.testing.plugins.KeyDigitPartitioner",
        # An object and a path, in this order: the stamp is added after the count.
        "interceptor.classes": [counter, "kafka_sink.testing.plugins.StampInterceptor"],
    }


def _topic(topic_factory: TopicFactory) -> str:
    return topic_factory(
        partitions=PARTITIONS, configs={"max.message.bytes": str(TOPIC_MAX_MESSAGE_BYTES)}
    )


def _check_read_back(records: list, expected_keys: list[int | None]) -> None:
    assert len(records) == len(expected_keys)
    for record in records:
        value = json.loads(record.value)
        key = None if record.key is None else json.loads(record.key)
        assert value["k"] == key
        # KeyDigitPartitioner: the decimal key modulo the partition count; keyless -> the last.
        assert record.partition == (PARTITIONS - 1 if key is None else key % PARTITIONS)
        headers = dict(record.headers)
        assert headers[examples.SERIALIZED_HEADER] == record.topic.encode()
        assert int(headers[examples.STAMP_HEADER]) >= 1
    assert sorted((json.loads(r.value)["k"] for r in records), key=str) == sorted(
        expected_keys, key=str
    )


def test_send_through_interceptors_serializers_and_partitioner(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = _topic(topic_factory)
    counter = examples.CountingInterceptor()
    keys: list[int | None] = [*range(10), None]
    with KafkaProducer(_config(kafka_bootstrap, counter)) as producer:
        futures = [producer.send(topic, {"k": k}, key=k) for k in keys]
        for future in futures:
            future.get(WAIT_S)
        # Fails inside send(): nothing queued, acknowledged with the error.
        with pytest.raises(SerializationError) as serialization:
            producer.send(topic, {"k": {1, 2}}, key=1)  # a set is not JSON
        # Fails in delivery: the topic refuses it.
        big = producer.send(topic, {"k": 7, "pad": "x" * (2 * TOPIC_MAX_MESSAGE_BYTES)}, key=7)
        delivery_error = big.exception(WAIT_S)
        assert isinstance(delivery_error, KafkaError)
        counter.expect(len(keys) + 2)
        assert counter.all_acknowledged.wait(WAIT_S)
    assert counter.sent == len(keys) + 2
    assert len(counter.acknowledged) == len(keys)
    assert all(m.topic == topic and m.offset >= 0 for m in counter.acknowledged)
    failed = sorted(((m.partition, m.offset), id(e)) for m, e in counter.failed)
    assert failed == sorted(
        [((-1, -1), id(serialization.value)), ((7 % PARTITIONS, -1), id(delivery_error))]
    )
    assert counter.closed == 1
    _check_read_back(read_all(kafka_bootstrap, topic, expected=len(keys)), keys)


def test_send_columns_through_interceptors_serializers_and_partitioner(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = _topic(topic_factory)
    counter = examples.CountingInterceptor()
    keys: list[int | None] = [*range(40), None, None]
    with KafkaProducer(_config(kafka_bootstrap, counter)) as producer:
        offsets = producer.send_columns(topic, [{"k": k} for k in keys], keys).get(WAIT_S)
        assert sum(o.record_count for o in offsets.values()) == len(keys)
        assert set(offsets) == set(range(PARTITIONS))
        # One oversized record in a call of its own: its batch fails in delivery.
        failing = producer.send_columns(topic, [{"k": 5, "pad": "x" * 10_000}], [5])
        assert isinstance(failing.exception(WAIT_S), KafkaError)
        counter.expect(len(keys) + 1)
        assert counter.all_acknowledged.wait(WAIT_S)
    assert counter.sent == len(keys) + 1
    acknowledged = sorted((m.partition, m.offset) for m in counter.acknowledged)
    assert len(acknowledged) == len(keys)
    assert all(offsets[p].first_offset <= o <= offsets[p].last_offset for p, o in acknowledged)
    assert [(m.partition, m.offset) for m, _e in counter.failed] == [(5 % PARTITIONS, -1)]
    _check_read_back(read_all(kafka_bootstrap, topic, expected=len(keys)), keys)
