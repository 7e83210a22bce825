"""Cumulative producer totals and their snapshots: what one Spark task's write did, as a delta.

Role: :class:`SnapshotCounters` is fed by the sender (once per response for the batches it
acknowledged, before they complete; once per failed batch and per answered Produce request);
``take`` copies it into an immutable :class:`ProducerMetricsSnapshot`, and
``later.minus(earlier)`` is what happened in between.

Invariants:
- Counters only grow; maxima are the largest value since the last snapshot taken with
  ``reset_maxima=True`` (or since the producer started).
- One small lock guards the counters: the sender takes it once per response or failed batch,
  ``take`` once per snapshot; a snapshot is consistent (never half of an update).
- ``minus``: counters and sums subtracted; a partition absent from ``earlier`` is kept whole; a
  partition with no change is dropped; maxima are ``self``'s.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafka_sink.producer.batch import ProducerBatch


@dataclass(frozen=True, slots=True)
class PartitionTotals:
    """One topic-partition's totals."""

    records: int  # records acknowledged by the broker
    uncompressed_bytes: int  # the acknowledged batches' bytes before compression
    compressed_bytes: int  # the acknowledged batches' bytes as sent (after compression)
    batches: int  # acknowledged batches
    errors: int  # records that failed for good
    retries: int  # records re-sent (a retried batch counts its records)

    def minus(self, earlier: PartitionTotals) -> PartitionTotals:
        return PartitionTotals(
            *(getattr(self, f.name) - getattr(earlier, f.name) for f in fields(PartitionTotals))
        )


_ZERO = PartitionTotals(0, 0, 0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class ProducerMetricsSnapshot:
    """A producer's totals since it started (or, after ``minus``, between two snapshots)."""

    partitions: Mapping[tuple[str, int], PartitionTotals]
    requests: int  # produce requests answered
    request_latency_ms_sum: float
    request_latency_ms_max: float
    throttle_time_ms_sum: float
    throttle_time_ms_max: float

    def minus(self, earlier: ProducerMetricsSnapshot) -> ProducerMetricsSnapshot:
        partitions = {}
        for tp, totals in self.partitions.items():
            delta = totals.minus(earlier.partitions.get(tp, _ZERO))
            if delta != _ZERO:
                partitions[tp] = delta
        return ProducerMetricsSnapshot(
            partitions=partitions,
            requests=self.requests - earlier.requests,
            request_latency_ms_sum=self.request_latency_ms_sum - earlier.request_latency_ms_sum,
            request_latency_ms_max=self.request_latency_ms_max,
            throttle_time_ms_sum=self.throttle_time_ms_sum - earlier.throttle_time_ms_sum,
            throttle_time_ms_max=self.throttle_time_ms_max,
        )


# Indexes into a partition's counter list (a list: updated in place, without allocation).
RECORDS, UNCOMPRESSED, COMPRESSED, BATCHES, ERRORS, RETRIES = range(6)


class SnapshotCounters:
    """The mutable totals behind :meth:`KafkaProducer.metrics_snapshot`."""

    __slots__ = (
        "_latency_max",
        "_latency_sum",
        "_lock",
        "_partitions",
        "_requests",
        "_throttle_max",
        "_throttle_sum",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[tuple[str, int], list[int]] = {}
        self._requests = 0
        self._latency_sum = 0.0
        self._latency_max = 0.0
        self._throttle_sum = 0.0
        self._throttle_max = 0.0

    def _counters(self, tp: tuple[str, int]) -> list[int]:
        counters = self._partitions.get(tp)
        if counters is None:
            counters = self._partitions[tp] = [0, 0, 0, 0, 0, 0]
        return counters

    def acked_batches(self, batches: Iterable[ProducerBatch]) -> None:
        """``acked`` for each batch (its sealed sizes), under one lock."""
        with self._lock:
            for batch in batches:
                sealed = batch.sealed
                if sealed is None:
                    continue
                c = self._counters(batch.tp)
                size = sealed.size_bytes
                c[RECORDS] += batch.record_count
                c[UNCOMPRESSED] += sealed.uncompressed_size_bytes or size
                c[COMPRESSED] += size
                c[BATCHES] += 1

    def add(self, tp: tuple[str, int], index: int, records: int) -> None:
        """Count ``records`` under ``index`` (ERRORS or RETRIES)."""
        with self._lock:
            self._counters(tp)[index] += records

    def answered(self, latency_ms: float, throttle_time_ms: float) -> None:
        with self._lock:
            self._requests += 1
            self._latency_sum += latency_ms
            self._latency_max = max(self._latency_max, latency_ms)
            self._throttle_sum += throttle_time_ms
            self._throttle_max = max(self._throttle_max, throttle_time_ms)

    def take(self, reset_maxima: bool = False) -> ProducerMetricsSnapshot:
        with self._lock:
            snapshot = ProducerMetricsSnapshot(
                partitions={tp: PartitionTotals(*c) for tp, c in self._partitions.items()},
                requests=self._requests,
                request_latency_ms_sum=self._latency_sum,
                request_latency_ms_max=self._latency_max,
                throttle_time_ms_sum=self._throttle_sum,
                throttle_time_ms_max=self._throttle_max,
            )
            if reset_maxima:
                self._latency_max = 0.0
                self._throttle_max = 0.0
        return snapshot
