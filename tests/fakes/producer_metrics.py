"""The producer's metrics snapshot as the sink reads it, and a fake producer that keeps one.

``Totals`` and ``Snapshot`` have the shape and the ``minus`` rule of
``kafka_sink.producer.metrics.ProducerMetricsSnapshot`` (counters and sums subtracted, partitions
without change dropped, maxima from the later one). ``MeteredFakeProducer`` is ``FakeProducer``
whose every call is acknowledged at once, counted per partition with a chosen latency.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from tests.fakes.spark import FakeProducer


@dataclass(frozen=True)
class Totals:
    records: int = 0
    uncompressed_bytes: int = 0
    compressed_bytes: int = 0
    batches: int = 0
    errors: int = 0
    retries: int = 0


@dataclass(frozen=True)
class Snapshot:
    partitions: Mapping[tuple[str, int], Totals]
    requests: int = 0
    request_latency_ms_sum: float = 0.0
    request_latency_ms_max: float = 0.0
    throttle_time_ms_sum: float = 0.0
    throttle_time_ms_max: float = 0.0

    def minus(self, earlier: Snapshot) -> Snapshot:
        parts = {}
        for key, now in self.partitions.items():
            then = earlier.partitions.get(key, Totals())
            delta = Totals(
                *(getattr(now, f) - getattr(then, f) for f in Totals.__dataclass_fields__)
            )
            if delta != Totals():
                parts[key] = delta
        return replace(
            self,
            partitions=parts,
            requests=self.requests - earlier.requests,
            request_latency_ms_sum=self.request_latency_ms_sum - earlier.request_latency_ms_sum,
            throttle_time_ms_sum=self.throttle_time_ms_sum - earlier.throttle_time_ms_sum,
        )


class MeteredFakeProducer(FakeProducer):
    """Each call: one acknowledged batch, one request of ``latency_ms``; bytes = 10 per record
    before compression, 4 after."""

    latency_ms: ClassVar[float] = 5.0

    def __init__(self, config: dict[str, str]) -> None:
        super().__init__(config)
        self.totals: dict[tuple[str, int], Totals] = {}
        self.requests = 0
        self.latency_sum = 0.0
        self.latency_max = 0.0
        self.resets = 0

    def send_columns(self, topic, values, keys=None, *, partitions=None, headers=None,
                     timestamps_ms=None):  # fmt: skip
        future = super().send_columns(topic, values, keys, partitions=partitions)
        n = len(values)
        key = (topic, n % 2)
        t = self.totals.get(key, Totals())
        self.totals[key] = Totals(t.records + n, t.uncompressed_bytes + 10 * n,
                                  t.compressed_bytes + 4 * n, t.batches + 1)  # fmt: skip
        self.requests += 1
        self.latency_sum += self.latency_ms
        self.latency_max = max(self.latency_max, self.latency_ms)
        return future

    def metrics_snapshot(self, reset_maxima: bool = False) -> Snapshot:
        snapshot = Snapshot(dict(self.totals), self.requests, self.latency_sum, self.latency_max)
        if reset_maxima:
            self.latency_max = 0.0
            self.resets += 1
        return snapshot
