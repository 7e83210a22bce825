"""Record-level failures against a real broker: the refused records are named, the rest is
written once.

- ``send_columns(..., track_rows=True)`` to a topic with ``max.message.bytes=2000`` and some rows
  of 5 KB: the sender splits the refused batches down to the oversize records, which fail with
  RecordTooLargeError in ``failed_rows()``; an independent consumer reads every other row once.
- A compacted topic refuses a record without a key (INVALID_RECORD, naming it): only those rows
  fail, with InvalidRecordError.
- The dead-letter recipe of docs/producer.md (``send()`` with a callback, record-level errors to
  a dead-letter topic with Connect's ``__connect.errors.*`` headers).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

import pyarrow as pa
import pytest

from kafka_sink import KafkaProducer
from kafka_sink.errors import (
    InvalidRecordError,
    KafkaTimeoutError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    is_record_error,
)
from kafka_sink.producer.futures import RecordMetadata
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import read_all

TopicFactory = Callable[..., str]

BIG = 5000


def _row(i: int, big: set[int]) -> bytes:
    body = b"%06d" % i
    return body + b"x" * (BIG if i in big else 40)


def test_oversize_rows_fail_alone_and_the_others_are_written_once(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2, configs={"max.message.bytes": "2000"})
    n = 60
    big = {3, 17, 18, 41}
    values = [_row(i, big) for i in range(n)]
    partitions = [i % 2 for i in range(n)]
    # The client's own checks pass 5 KB records (max.request.size 1 MiB): only the topic refuses.
    with KafkaProducer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 50}) as producer:
        future = producer.send_columns(
            topic, pa.array(values, pa.binary()), partitions=partitions, track_rows=True
        )
        assert isinstance(future.exception(60), RecordTooLargeError)
        failed = future.failed_rows()
        offsets = future.offsets()
    assert [row for row, _e in failed] == sorted(big)
    assert all(isinstance(e, RecordTooLargeError) and is_record_error(e) for _r, e in failed)
    assert sum(o.record_count for o in offsets.values()) == n - len(big)
    records = read_all(kafka_bootstrap, topic, expected=n - len(big))
    got = [r.value for r in records]
    assert sorted(got) == sorted(v for i, v in enumerate(values) if i not in big)
    for p in (0, 1):  # each partition's rows in call order
        mine = [r.value for r in records if r.partition == p]
        assert mine == [v for i, v in enumerate(values) if i % 2 == p and i not in big]
        assert offsets[p].record_count == len(mine)


def test_compacted_topic_refuses_rows_without_a_key_alone(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=1, configs={"cleanup.policy": "compact"})
    n = 12
    keyless = {2, 7}
    keys = [None if i in keyless else b"k%d" % i for i in range(n)]
    values = [b"v%d" % i for i in range(n)]
    with KafkaProducer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 50}) as producer:
        future = producer.send_columns(
            topic, pa.array(values, pa.binary()), pa.array(keys, pa.binary()), track_rows=True
        )
        assert isinstance(future.exception(60), InvalidRecordError)
        failed = future.failed_rows()
    assert [row for row, _e in failed] == sorted(keyless)
    assert all(isinstance(e, InvalidRecordError) for _r, e in failed)
    assert "without key" in str(failed[0][1])
    records = read_all(kafka_bootstrap, topic, expected=n - len(keyless))
    assert [r.value for r in records] == [v for i, v in enumerate(values) if i not in keyless]


# -- the dead-letter recipe of docs/producer.md -------------------------------------------------


def test_dead_letter_recipe_routes_record_errors_with_connect_headers(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=1, configs={"max.message.bytes": "2000"})
    dlq = topic_factory(partitions=1)
    rows = [(b"k%d" % i, _row(i, {2})) for i in range(5)]

    # As in the docs: the callback (on the producer's I/O thread) only collects; the records go
    # to the dead-letter topic from the caller's thread, after flush().
    failed: list[tuple[bytes | None, bytes | None, BaseException]] = []
    lock = threading.Lock()

    def on_delivery(key: bytes | None, value: bytes | None) -> Callable[..., None]:
        def callback(_metadata: RecordMetadata | None, exc: BaseException | None) -> None:
            if exc is not None and is_record_error(exc):
                with lock:
                    failed.append((key, value, exc))

        return callback

    with KafkaProducer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 50}) as producer:
        futures = [producer.send(topic, v, key=k) for k, v in rows]
        for (k, v), f in zip(rows, futures, strict=True):
            f.add_callback(on_delivery(k, v))
        producer.flush(60)
        for key, value, exc in failed:
            headers = [
                ("__connect.errors.topic", topic.encode()),
                ("__connect.errors.exception.class.name", type(exc).__name__.encode()),
                ("__connect.errors.exception.message", str(exc).encode()),
            ]
            producer.send(dlq, value, key=key, headers=headers).get(30)

    main = read_all(kafka_bootstrap, topic, expected=4)
    assert [r.key for r in main] == [b"k0", b"k1", b"k3", b"k4"]
    (dead,) = read_all(kafka_bootstrap, dlq, expected=1)
    assert (dead.key, dead.value) == rows[2]
    headers = dict(dead.headers)
    assert headers["__connect.errors.topic"] == topic.encode()
    assert headers["__connect.errors.exception.class.name"] == b"RecordTooLargeError"
    assert b"max.message.bytes" in (headers["__connect.errors.exception.message"] or b"")


def test_a_metadata_wait_for_a_missing_topic_says_the_brokers_do_not_know_it(
    proxied_kafka: LocalKafka,
) -> None:
    # This broker creates no topic on a metadata request.
    settings = {
        "bootstrap.servers": proxied_kafka.bootstrap_servers,
        "max.block.ms": "1500",
    }
    with KafkaProducer(settings) as producer, pytest.raises(KafkaTimeoutError) as info:
        producer.partitions_for("never-created-topic")
    assert isinstance(info.value.topic_error, UnknownTopicOrPartitionError)
    # Against nothing that answers, a timeout has no topic error: it is not the topic's fault.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{closed.getsockname()[1]}"
    elsewhere = {**settings, "bootstrap.servers": nowhere}
    with KafkaProducer(elsewhere) as producer, pytest.raises(KafkaTimeoutError) as info:
        producer.partitions_for("never-created-topic")
    assert info.value.topic_error is None
