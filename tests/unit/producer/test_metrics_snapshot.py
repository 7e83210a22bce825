"""metrics_snapshot(): cumulative per-partition totals and request sums, and their deltas.

Against the sender stepped with a ManualClock and the scripted network client: what the broker
acknowledged is counted (records, bytes before and after compression, batches), a retried batch
counts its records as retries (Java's record-retry-total rule), a batch failed for good counts its
records as errors, and each answered Produce request adds its latency and throttle time.
"""

from __future__ import annotations

import pytest

from kafka_sink.producer.metrics import (
    KafkaMetric,
    MetricName,
    PartitionTotals,
    ProducerMetricsSnapshot,
)
from kafka_sink.producer.producer import KafkaProducer
from kafka_sink.records.batch import BATCH_HEADER_SIZE
from kafka_sink.records.compression import CompressionType
from kafka_sink.wire.messages import ProduceResponse
from tests.fakes.producer import make_harness, produce_response

NOT_ENOUGH_REPLICAS = 19
TOPIC_AUTH = 29


def _throttled(response: ProduceResponse, throttle_ms: int) -> ProduceResponse:
    response.throttle_time_ms = throttle_ms
    return response


def test_acknowledged_batches_are_counted_per_partition_with_their_bytes() -> None:
    h = make_harness(idempotent=False, linger_ms=0, partitions={"t": [0, 0]})
    for i in range(3):
        h.send(partition=0, value=b"value-%d" % i)
    h.send(partition=1, value=b"x" * 100)
    h.run()
    (sent,) = h.network.produce_requests()
    sizes = {tp: len(data) for tp, data in sent.partitions().items()}
    h.clock.advance(12)
    h.network.respond(sent, _throttled(produce_response(sent), 3))
    h.run()
    snap = h.metrics.counters.take()
    # Uncompressed: the batch bytes equal the bytes sent.
    assert snap.partitions == {
        ("t", 0): PartitionTotals(3, sizes[("t", 0)], sizes[("t", 0)], 1, 0, 0),
        ("t", 1): PartitionTotals(1, sizes[("t", 1)], sizes[("t", 1)], 1, 0, 0),
    }
    assert (snap.requests, snap.request_latency_ms_sum, snap.request_latency_ms_max) == (1, 12, 12)
    assert (snap.throttle_time_ms_sum, snap.throttle_time_ms_max) == (3, 3)


def test_compressed_batches_report_both_sizes() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    h.accumulator.compression_type = CompressionType.GZIP
    for _ in range(50):
        h.send(value=b"a" * 200)
    h.run()
    (sent,) = h.network.produce_requests()
    on_wire = len(sent.partitions()[("t", 0)])
    h.network.respond(sent, produce_response(sent))
    h.run()
    totals = h.metrics.counters.take().partitions[("t", 0)]
    assert totals.compressed_bytes == on_wire
    # 50 records of 200 bytes, each with its few bytes of framing, before gzip.
    assert totals.uncompressed_bytes > BATCH_HEADER_SIZE + 50 * 200 > 10 * on_wire


def test_retries_count_the_retried_batch_records_and_errors_the_failed_ones() -> None:
    h = make_harness(idempotent=False, linger_ms=0, retries=1, partitions={"t": [0, 0]})
    h.send(partition=0)
    h.send(partition=0)
    h.send(partition=1)
    h.run()
    (first,) = h.network.produce_requests()
    h.network.respond(
        first,
        produce_response(first, errors={("t", 0): NOT_ENOUGH_REPLICAS, ("t", 1): TOPIC_AUTH}),
    )
    h.run()
    h.run(200)
    second = h.network.produce_requests()[-1]
    assert second is not first
    h.network.respond(second, produce_response(second))
    h.run()
    snap = h.metrics.counters.take()
    assert snap.partitions[("t", 0)].retries == 2
    assert snap.partitions[("t", 0)].records == 2
    assert snap.partitions[("t", 1)] == PartitionTotals(0, 0, 0, 0, 1, 0)
    assert snap.requests == 2


def test_minus_gives_the_delta_and_reset_maxima_restarts_the_maxima() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    h.send(partition=0)
    h.run()
    (sent,) = h.network.produce_requests()
    h.clock.advance(40)
    h.network.respond(sent, _throttled(produce_response(sent), 9))
    h.run()
    before = h.metrics.counters.take(reset_maxima=True)
    assert before.request_latency_ms_max == 40

    h.send(partition=1)
    h.run()
    sent = h.network.produce_requests()[-1]
    h.clock.advance(5)
    h.network.respond(sent, produce_response(sent))
    h.run()
    delta = h.metrics.counters.take().minus(before)
    assert set(delta.partitions) == {("t", 1)}  # t-0 did not change: dropped
    assert delta.partitions[("t", 1)].records == 1
    assert delta.requests == 1
    assert delta.request_latency_ms_sum == 5
    assert delta.request_latency_ms_max == 5  # the 40 ms before the reset is gone
    assert (delta.throttle_time_ms_sum, delta.throttle_time_ms_max) == (0, 0)


def test_minus_keeps_partitions_the_earlier_snapshot_lacks_whole() -> None:
    totals = PartitionTotals(5, 500, 100, 2, 1, 3)
    later = ProducerMetricsSnapshot({("a", 0): totals, ("b", 0): totals}, 4, 40.0, 20.0, 2.0, 1.0)
    earlier = ProducerMetricsSnapshot(
        {("a", 0): PartitionTotals(1, 100, 20, 1, 0, 0)}, 1, 10.0, 30.0, 0.0, 0.0
    )
    delta = later.minus(earlier)
    assert delta.partitions == {("a", 0): PartitionTotals(4, 400, 80, 1, 1, 3), ("b", 0): totals}
    assert (delta.requests, delta.request_latency_ms_sum, delta.request_latency_ms_max) == (
        3,
        30.0,
        20.0,
    )
    assert (delta.throttle_time_ms_sum, delta.throttle_time_ms_max) == (2.0, 1.0)


def test_snapshot_is_frozen() -> None:
    snap = make_harness(idempotent=False).metrics.counters.take()
    with pytest.raises(AttributeError):
        snap.requests = 3  # type: ignore[misc]


def test_the_facade_offers_metrics_and_snapshots_before_any_send() -> None:
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 200})
    try:
        snap = producer.metrics_snapshot(reset_maxima=True)
        assert snap == ProducerMetricsSnapshot({}, 0, 0.0, 0.0, 0.0, 0.0)
        grouped = producer.metrics()
        assert grouped["producer-metrics"]["record-send-total"] == 0
        assert grouped["producer-metrics"]["buffer-total-bytes"] == 33554432
        raw = producer.metrics(raw=True)
        name = MetricName("record-send-total", "producer-metrics")
        assert isinstance(raw[name], KafkaMetric)
        assert raw[name].metric_name == name
    finally:
        producer.close(0)
