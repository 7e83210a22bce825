"""The producer's metrics against a real broker: retries forced through the TCP proxy show in
``record-retry-total``, and the compression ratio matches the bytes on the broker's log.

One single-node Kafka for this module (``proxied``, ``tests/conftest.py``), reached through a TCP
proxy the tests can hold and cut; the broker's side is read back independently (kafka-python:
a consumer for the records, DescribeLogDirs for the log's size in bytes).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink import KafkaProducer
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, end_offsets, import_kafka_python, read_all

# Fault and log-size proofs of several seconds each: CI runs them, -m 'not slow' leaves them out.
pytestmark = pytest.mark.slow


def _topic(kafka: LocalKafka, configs: dict[str, str] | None = None) -> str:
    name = f"metrics-{uuid.uuid4().hex[:10]}"
    create_topic(kafka.bootstrap_servers, name, partitions=1, configs=configs)
    return name


def _log_size_bytes(bootstrap: str, topic: str) -> int:
    """The partition's log size on the broker (DescribeLogDirs), read by kafka-python."""
    kafka = import_kafka_python()
    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        found: list[int] = []
        for broker in admin.describe_log_dirs(topic_partitions={topic: [0]}):
            found.extend(_partition_sizes(broker, topic))
        assert found, f"no log dir reports {topic}-0"
        return sum(found)
    finally:
        admin.close()


def _partition_sizes(result: Any, topic: str) -> list[int]:
    """Partition sizes of ``topic`` in a DescribeLogDirs result, whatever its container shape."""
    if isinstance(result, dict):
        name = result.get("name") or result.get("topic")
        if name == topic and "partitions" in result:
            return [int(p.get("partition_size", p.get("size", 0))) for p in result["partitions"]]
        return [s for value in result.values() for s in _partition_sizes(value, topic)]
    if isinstance(result, list | tuple):
        return [s for value in result for s in _partition_sizes(value, topic)]
    return []


def _wait_until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s}s waiting for {what}"
        time.sleep(0.05)


def test_retries_forced_through_the_proxy_show_in_record_retry_total(proxied: LocalKafka) -> None:
    topic = _topic(proxied)
    (node_id,) = proxied.node_ids
    proxy = proxied.proxy(node_id)
    producer = KafkaProducer(
        {
            "bootstrap.servers": proxied.proxied_bootstrap_servers,
            "linger.ms": 0,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 200,
        }
    )
    try:
        producer.send(topic, b"warm-up").get(30)
        before = producer.metrics_snapshot(reset_maxima=True)
        # The broker writes the records but its answers never arrive; then the connection
        # drops: every batch in flight is retried (idempotence: the broker keeps one copy).
        proxy.hold_responses()
        futures = [producer.send(topic, b"held-%d" % i) for i in range(10)]
        _wait_until(
            lambda: end_offsets(proxied.bootstrap_servers, topic)[0] == 11, 30, "the held writes"
        )
        proxy.cut()
        proxy.resume()
        offsets = sorted(f.get(30).offset for f in futures)
        metrics = producer.metrics()
        delta = producer.metrics_snapshot().minus(before)
    finally:
        proxy.resume()
        producer.close(10)
    assert offsets == list(range(1, 11))
    assert metrics["producer-metrics"]["record-retry-total"] == 10
    assert metrics[f"producer-topic-metrics.{topic}"]["record-retry-total"] == 10
    assert metrics["producer-metrics"]["record-error-total"] == 0
    assert delta.partitions[(topic, 0)].retries == 10
    assert delta.partitions[(topic, 0)].records == 10
    # An independent consumer reads every record once.
    values = [r.value for r in read_all(proxied.bootstrap_servers, topic, expected=11)]
    assert values == [b"warm-up"] + [b"held-%d" % i for i in range(10)]


def _send_one_batch(kafka: LocalKafka, topic: str, compression: str) -> tuple[dict[str, Any], Any]:
    values = pa.array([(b"metric %06d " % i) * 8 for i in range(3000)], type=pa.binary())
    producer = KafkaProducer(
        {
            "bootstrap.servers": kafka.proxied_bootstrap_servers,
            "compression.type": compression,
            "batch.size": 1_000_000,
            "linger.ms": 60_000,
        }
    )
    try:
        producer.send_columns(topic, values).get(60)
        return producer.metrics(), producer.metrics_snapshot()
    finally:
        producer.close(10)


def test_compression_rate_matches_the_bytes_on_the_brokers_log(proxied: LocalKafka) -> None:
    plain = _topic(proxied)
    zipped = _topic(proxied)
    _, plain_snapshot = _send_one_batch(proxied, plain, "none")
    metrics, zipped_snapshot = _send_one_batch(proxied, zipped, "gzip")
    plain_log = _log_size_bytes(proxied.bootstrap_servers, plain)
    zipped_log = _log_size_bytes(proxied.bootstrap_servers, zipped)
    # One batch each: the broker stores the batch as sent, so its log is the batch's bytes; the
    # uncompressed topic's log is the same batch before compression.
    assert zipped_snapshot.partitions[(zipped, 0)].batches == 1
    assert zipped_snapshot.partitions[(zipped, 0)].compressed_bytes == zipped_log
    assert zipped_snapshot.partitions[(zipped, 0)].uncompressed_bytes == plain_log
    assert plain_snapshot.partitions[(plain, 0)].compressed_bytes == plain_log
    ratio = zipped_log / plain_log
    assert ratio < 0.2
    assert metrics["producer-metrics"]["compression-rate-avg"] == ratio
    assert metrics[f"producer-topic-metrics.{zipped}"]["compression-rate"] == ratio
    assert len(read_all(proxied.bootstrap_servers, zipped, expected=3000)) == 3000
