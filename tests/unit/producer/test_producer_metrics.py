"""Every producer metric under its Java name, against the scripted network client and the
manual clock (each test names the Java rule it checks), plus the reporter and the facade's sums."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

from kafka_sink.errors import ConfigError
from kafka_sink.producer.metrics import KafkaMetric, MetricConfig
from kafka_sink.producer.producer import KafkaProducer
from kafka_sink.records.compression import CompressionType
from tests.fakes.producer import Harness, make_harness, produce_response

NOT_ENOUGH_REPLICAS = 19
MESSAGE_TOO_LARGE = 10
TOPIC_AUTH = 29
WINDOW = MetricConfig(samples=2, time_window_ms=1000)


def _values(h: Harness) -> dict[str, dict[str, float]]:
    grouped: dict[str, dict[str, float]] = {}
    for name, metric in h.metrics.registry.metrics().items():
        grouped.setdefault(name.group_key, {})[name.name] = metric.value()
    return grouped


def _send_and_ack(h: Harness, count: int, value: bytes = b"v", partition: int = 0) -> Any:
    for _ in range(count):
        h.send(partition=partition, value=value)
    h.run()
    sent = h.network.produce_requests()[-1]
    return sent


def test_send_side_metrics_are_recorded_per_request_as_java_does() -> None:
    # Java's SenderMetrics.updateProduceRequestMetrics: per drained batch, at send time.
    h = make_harness(idempotent=False, linger_ms=10, metric_config=WINDOW, partitions={"t": [0, 0]})
    for _ in range(3):
        h.send(partition=0, value=b"a" * 10)
    h.send(partition=1, value=b"b" * 30)
    h.run(10)  # lingered 10 ms: the queue time of both batches
    (sent,) = h.network.produce_requests()
    sizes = sorted(len(b) for b in sent.partitions().values())
    m = _values(h)["producer-metrics"]
    assert m["record-send-total"] == 4
    assert m["records-per-request-avg"] == 4  # one request of 4 records
    assert m["batch-size-avg"] == sum(sizes) / 2
    assert m["batch-size-max"] == max(sizes)
    assert m["compression-rate-avg"] == 1.0  # uncompressed: compressed size == size
    assert (m["record-queue-time-avg"], m["record-queue-time-max"]) == (10, 10)
    # record-size: the largest record of each batch (Java's maxRecordSize), averaged.
    assert m["record-size-max"] > m["record-size-avg"] > 10
    # Rate over one window plus the 10 ms elapsed (Java's Rate rule for the first window).
    assert m["record-send-rate"] == pytest.approx(4 / 1.0)
    topic = _values(h)["producer-topic-metrics.t"]
    assert topic["record-send-total"] == 4
    assert topic["byte-total"] == sum(sizes)
    assert topic["compression-rate"] == 1.0
    node = _values(h)["producer-node-metrics.node-0"]
    assert node["request-total"] == 1
    assert node["outgoing-byte-total"] == sum(sizes)


def test_compression_rate_is_compressed_over_uncompressed_size() -> None:
    h = make_harness(idempotent=False, linger_ms=0, metric_config=WINDOW)
    h.accumulator.compression_type = CompressionType.GZIP
    sent = _send_and_ack(h, 100, value=b"z" * 100)
    compressed = len(sent.partitions()[("t", 0)])
    m = _values(h)
    ratio = m["producer-metrics"]["compression-rate-avg"]
    assert 0 < ratio < 0.1
    assert m["producer-topic-metrics.t"]["compression-rate"] == ratio
    # The batch bytes before compression: 100 records of 100 bytes and their framing.
    assert compressed / ratio > 100 * 100


def test_latency_and_throttle_time_avg_max_over_windows() -> None:
    # Java: request-time and produce-throttle-time sensors, Avg and Max over the live samples.
    h = make_harness(idempotent=False, linger_ms=0, metric_config=WINDOW)
    for latency, throttle in ((30, 0), (10, 50)):
        sent = _send_and_ack(h, 1)
        h.clock.advance(latency)
        response = produce_response(sent)
        response.throttle_time_ms = throttle
        h.network.respond(sent, response)
        h.run()
    m = _values(h)["producer-metrics"]
    assert (m["request-latency-avg"], m["request-latency-max"]) == (20, 30)
    assert (m["produce-throttle-time-avg"], m["produce-throttle-time-max"]) == (25, 50)
    node = _values(h)["producer-node-metrics.node-0"]
    assert (node["request-latency-avg"], node["request-latency-max"]) == (20, 30)
    assert node["response-total"] == 2
    # Two windows later both samples are obsolete (Java's purge): no events, NaN.
    h.clock.advance(2000)
    m = _values(h)["producer-metrics"]
    assert math.isnan(m["request-latency-avg"])
    assert math.isnan(m["request-latency-max"])


def test_retries_errors_and_splits_count_records_and_batches() -> None:
    # Java: recordRetries(topic, batch.recordCount) on each re-enqueue, recordErrors on failBatch,
    # batch-split-rate per split.
    h = make_harness(idempotent=False, linger_ms=0, retries=1, metric_config=WINDOW)
    sent = _send_and_ack(h, 3)
    h.network.respond(sent, produce_response(sent, errors={("t", 0): NOT_ENOUGH_REPLICAS}))
    h.run()
    h.run(200)
    sent = h.network.produce_requests()[-1]
    h.network.respond(sent, produce_response(sent, errors={("t", 0): TOPIC_AUTH}))
    h.run()
    values = _values(h)
    m, topic = values["producer-metrics"], values["producer-topic-metrics.t"]
    assert (m["record-retry-total"], topic["record-retry-total"]) == (3, 3)
    assert (m["record-error-total"], topic["record-error-total"]) == (3, 3)
    assert m["record-send-total"] == 6  # the retried batch is sent, and counted, twice
    # The error sensor's first sample starts with its first event: 0 ms elapsed, plus the one
    # full window Java's Rate adds while fewer than samples - 1 windows have passed.
    assert m["record-error-rate"] == pytest.approx(3.0)
    h.clock.advance(500)
    assert _values(h)["producer-metrics"]["record-error-rate"] == pytest.approx(3 / 1.5)

    h2 = make_harness(idempotent=False, linger_ms=0, metric_config=WINDOW)
    sent = _send_and_ack(h2, 4)
    h2.network.respond(sent, produce_response(sent, errors={("t", 0): MESSAGE_TOO_LARGE}))
    h2.run()
    assert _values(h2)["producer-metrics"]["batch-split-total"] == 1


def test_the_facade_registers_gauges_and_time_sums() -> None:
    producer = KafkaProducer(
        {"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 200, "buffer.memory": 100_000}
    )
    try:
        producer.flush(1.0)
        m = producer.metrics()["producer-metrics"]
        assert m["buffer-total-bytes"] == 100_000
        assert m["buffer-available-bytes"] == 100_000
        assert m["requests-in-flight"] >= 0
        assert math.isnan(m["metadata-age"])  # no metadata yet
        assert m["flush-time-ns-total"] > 0
        for name in ("txn-init", "txn-begin", "txn-send-offsets", "txn-commit", "txn-abort"):
            assert m[f"{name}-time-ns-total"] == 0
        assert m["metadata-wait-time-ns-total"] == 0
        assert m["bufferpool-wait-time-ns-total"] == 0
        with pytest.raises(Exception, match="not present in metadata"):
            producer.send("missing", b"v")
        assert producer.metrics()["producer-metrics"]["metadata-wait-time-ns-total"] > 0
    finally:
        producer.close(0)


class Recorder:
    """A Java-shaped MetricsReporter."""

    instances: list[Recorder] = []  # noqa: RUF012 - the test reads what the producer made

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        Recorder.instances.append(self)

    def init(self, metrics: list[KafkaMetric]) -> None:
        self.events.append(("init", len(metrics)))

    def metric_change(self, metric: KafkaMetric) -> None:
        self.events.append(("change", metric.metric_name.name))

    def close(self) -> None:
        self.events.append(("close", None))


def test_a_reporter_by_import_path_is_told_of_every_metric_and_closed() -> None:
    Recorder.instances.clear()
    producer = KafkaProducer(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "metrics.reporter": f"{__name__}:Recorder",
            "metrics.sample.window.ms": "5000",
            "metrics.num.samples": "3",
        }
    )
    producer.close(0)
    (reporter,) = Recorder.instances
    kinds = [kind for kind, _ in reporter.events]
    assert kinds[0] == "init" and kinds[-1] == "close"
    changed = {name for kind, name in reporter.events if kind == "change"}
    assert {"record-send-rate", "record-retry-total", "buffer-available-bytes"} <= changed
    assert producer.config.metrics_sample_window_ms == 5000
    assert producer.config.metrics_num_samples == 3


def test_a_callable_reporter_gets_each_metric() -> None:
    seen: list[str] = []
    producer = KafkaProducer(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "metrics.reporter": lambda m: seen.append(m.metric_name.name),
        }
    )
    producer.close(0)
    assert "request-latency-avg" in seen


def test_a_bad_reporter_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"metrics\.reporter"):
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "metrics.reporter": "no.such.module:X"})
    with pytest.raises(ConfigError, match=r"metrics\.reporter"):
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "metrics.reporter": 42})
    with pytest.raises(ConfigError, match=r"metrics\.num\.samples"):
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "metrics.num.samples": 0})


def test_bufferpool_wait_time_is_the_time_an_append_blocked_for_memory() -> None:
    # Java's bufferpool-wait-time-ns-total: the time appenders waited for buffer.memory.
    h = make_harness(idempotent=False, linger_ms=0, batch_size=1000, buffer_memory=1000)
    sent = _send_and_ack(h, 1, value=b"x" * 900)
    appended = threading.Event()

    def append() -> None:
        h.accumulator.append("t", 0, 0, None, b"y" * 900, (), None, 10_000, h.clock.now_ms())
        appended.set()

    waiter = threading.Thread(target=append, daemon=True)
    waiter.start()
    assert not appended.wait(0.2)  # blocked: the first batch holds the memory
    h.clock.advance(7)
    h.network.respond(sent, produce_response(sent))
    h.run()
    assert appended.wait(5.0)
    waiter.join(5.0)
    assert _values(h)["producer-metrics"]["bufferpool-wait-time-ns-total"] == 7_000_000


def test_deferred_request_records_keep_their_own_times_and_are_bounded() -> None:
    # The I/O thread queues each request's sums; read later, they land in the samples of the
    # times they were recorded at (a request two windows old is purged, as if recorded at once).
    h = make_harness(idempotent=False, linger_ms=0, metric_config=WINDOW)
    _send_and_ack(h, 2)
    h.clock.advance(2500)
    _send_and_ack(h, 3)
    assert len(h.metrics._deferred) == 2
    m = _values(h)["producer-metrics"]
    assert not h.metrics._deferred
    assert m["record-send-total"] == 5
    assert m["records-per-request-avg"] == 3  # the first request's sample is obsolete
    for _ in range(5000):
        h.metrics.record_answered(0, 1, 0, h.clock.now_ms())
    assert len(h.metrics._deferred) < 256


def test_a_reporter_reading_values_as_metrics_appear_does_not_deadlock() -> None:
    h = make_harness(idempotent=False, linger_ms=0, metric_config=WINDOW)
    seen: dict[str, float] = {}

    class Reading:
        def metric_change(self, metric: KafkaMetric) -> None:
            seen[metric.metric_name.name] = metric.value()

    h.metrics.registry._reporters.append(Reading())  # type: ignore[arg-type]
    sent = _send_and_ack(h, 2)
    h.network.respond(sent, produce_response(sent))
    h.run()
    assert _values(h)["producer-topic-metrics.t"]["record-send-total"] == 2
    assert "byte-total" in seen
