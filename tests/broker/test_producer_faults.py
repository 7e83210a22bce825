"""Failures surface clearly and in bounded time: no broker, no topic, full buffer, lost broker.

One extra single-node Kafka for this module (``proxied``, ``tests/conftest.py``): automatic topic
creation off, and clients reach it only through a TCP proxy the tests can pause and cut.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid

import pytest

from kafka_sink import KafkaProducer
from kafka_sink.errors import BufferExhaustedError, KafkaTimeoutError
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, end_offsets


def _topic(kafka: LocalKafka, partitions: int = 2) -> str:
    name = f"faults-{uuid.uuid4().hex[:10]}"
    create_topic(kafka.bootstrap_servers, name, partitions=partitions)
    return name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_broker_fails_send_within_max_block_ms() -> None:
    port = _free_port()
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{port}", "max.block.ms": 1500})
    try:
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            producer.send("anything", b"x")
        elapsed = time.monotonic() - start
        assert 1.4 <= elapsed < 6
        message = str(info.value)
        assert "not present in metadata after 1500 ms" in message
        assert "no broker reachable" in message and str(port) in message
    finally:
        start = time.monotonic()
        producer.close(5)
        assert time.monotonic() - start < 6


def test_silent_broker_fails_send_within_max_block_ms_naming_the_servers() -> None:
    # Something listens but never answers (not Kafka, a TLS listener, a stuck broker), and
    # max.block.ms ends before socket.connection.setup.timeout.ms records a connection error.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{port}", "max.block.ms": 1500})
        try:
            with pytest.raises(KafkaTimeoutError) as info:
                producer.send("anything", b"x")
            message = str(info.value)
            assert "not present in metadata after 1500 ms" in message
            assert f"bootstrap.servers=127.0.0.1:{port}" in message
        finally:
            producer.close(5)


def test_missing_topic_with_auto_create_off_is_a_clear_error(proxied: LocalKafka) -> None:
    producer = KafkaProducer(
        {"bootstrap.servers": proxied.proxied_bootstrap_servers, "max.block.ms": 2000}
    )
    with producer:
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            producer.send("no-such-topic-" + uuid.uuid4().hex[:6], b"x")
        assert time.monotonic() - start < 6
        assert "UNKNOWN_TOPIC_OR_PARTITION" in str(info.value)
        assert "max.block.ms" in str(info.value)
        with pytest.raises(KafkaTimeoutError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            producer.partitions_for("no-such-topic-either")


def test_full_buffer_blocks_then_fails_and_recovers(proxied: LocalKafka) -> None:
    topic = _topic(proxied)
    producer = KafkaProducer(
        {
            "bootstrap.servers": proxied.proxied_bootstrap_servers,
            "buffer.memory": 65536,
            "batch.size": 16384,
            "linger.ms": 0,
            "max.block.ms": 1000,
        }
    )
    with producer:
        producer.partitions_for(topic)
        for node_id in proxied.node_ids:
            proxied.proxy(node_id).pause()
        accepted = []
        start = time.monotonic()
        with pytest.raises(BufferExhaustedError) as info:
            for i in range(10_000):
                future = producer.send(topic, b"%06d" % i + b"-" * 500, partition=i % 2)
                accepted.append(future)
        blocked = time.monotonic() - start
        assert blocked >= 0.9
        assert "buffer.memory=65536" in str(info.value)
        assert "max.block.ms=1000" in str(info.value)
        assert 0 < len(accepted) < 200
        for node_id in proxied.node_ids:
            proxied.proxy(node_id).resume()
        producer.flush(30)
        assert all(f.succeeded() for f in accepted)
        assert producer.send(topic, b"after").get(30).offset >= 0
    assert sum(end_offsets(proxied.bootstrap_servers, topic).values()) == len(accepted) + 1


def test_lost_broker_fails_records_within_delivery_timeout(proxied: LocalKafka) -> None:
    topic = _topic(proxied)
    producer = KafkaProducer(
        {
            "bootstrap.servers": proxied.proxied_bootstrap_servers,
            "linger.ms": 0,
            "request.timeout.ms": 1500,
            "delivery.timeout.ms": 3000,
            "reconnect.backoff.max.ms": 200,
        }
    )
    producer.partitions_for(topic)
    for node_id in proxied.node_ids:
        proxy = proxied.proxy(node_id)
        proxy.refuse_new = True
        proxy.cut()
    futures = [producer.send(topic, b"%d" % i) for i in range(20)]
    start = time.monotonic()
    producer.flush(20)
    assert time.monotonic() - start < 8
    errors = [f.exception(0) for f in futures]
    assert all(isinstance(e, KafkaTimeoutError) for e in errors)
    assert "delivery.timeout.ms=3000" in str(errors[0])
    start = time.monotonic()
    producer.close(5)
    assert time.monotonic() - start < 6


def test_close_timeout_fails_what_cannot_be_sent(proxied: LocalKafka) -> None:
    topic = _topic(proxied)
    producer = KafkaProducer({"bootstrap.servers": proxied.proxied_bootstrap_servers})
    producer.partitions_for(topic)
    for node_id in proxied.node_ids:
        proxied.proxy(node_id).pause()
    futures = [producer.send(topic, b"%d" % i) for i in range(50)]
    start = time.monotonic()
    producer.close(timeout=1)
    assert time.monotonic() - start < 5
    assert all(f.done() for f in futures)
    assert all("closed" in str(f.exception(0)) for f in futures)


def _connect_failures(caplog: pytest.LogCaptureFixture, at_least: int, within_s: float) -> None:
    """Wait until the client logged ``at_least`` failed connection attempts (any level)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        failures = [r for r in caplog.records if "could not be established" in r.getMessage()]
        if len(failures) >= at_least:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} failed connection attempts in {within_s} s")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("kafka_sink") and r.levelno >= logging.WARNING
    ]


def test_unreachable_broker_is_warned_once_not_at_every_reconnect(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="kafka_sink")
    port = _free_port()
    producer = KafkaProducer(
        {"bootstrap.servers": f"127.0.0.1:{port}", "reconnect.backoff.max.ms": 100}
    )
    try:
        _connect_failures(caplog, at_least=15, within_s=30)
    finally:
        producer.close(5)
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert f"node -1 (127.0.0.1:{port}) could not be established" in warnings[0]
    assert "ECONNREFUSED" in warnings[0]


def test_lost_cluster_is_warned_once_per_node_not_at_every_reconnect(
    proxied: LocalKafka, caplog: pytest.LogCaptureFixture
) -> None:
    topic = _topic(proxied)
    # Once the cluster is lost, metadata retries drive the reconnects: cap both backoffs so
    # that the attempts come every ~100 ms, not every second.
    producer = KafkaProducer(
        {
            "bootstrap.servers": proxied.proxied_bootstrap_servers,
            "reconnect.backoff.max.ms": 100,
            "retry.backoff.max.ms": 100,
        }
    )
    try:
        producer.partitions_for(topic)
        # A delivered record leaves a connection to the broker open for the cut to break: with
        # only metadata fetched, the bootstrap connection may already be closed (it serves the
        # first fetch only) and nothing would notice the loss until the next metadata refresh.
        producer.send(topic, b"before the cut").get(timeout=30)
        caplog.set_level(logging.DEBUG, logger="kafka_sink")
        for node_id in proxied.node_ids:
            proxy = proxied.proxy(node_id)
            proxy.refuse_new = True
            proxy.cut()
        _connect_failures(caplog, at_least=15, within_s=30)
        warnings = _warnings(caplog)
    finally:
        producer.close(5)
    # One per node the client dials (the broker, and the bootstrap address it falls back to).
    assert 1 <= len(warnings) <= 2 * len(proxied.node_ids), warnings
    assert all("could not be established" in w for w in warnings), warnings
