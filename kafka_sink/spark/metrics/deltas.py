"""One task's share of its producer's metrics: the difference of two snapshots.

Role: a Spark task leases a cached producer exclusively, and the producer's
``metrics_snapshot()`` is cumulative since the producer started (it serves many tasks), so
:class:`TaskMeter` takes a snapshot when the lease starts (resetting the producer's maxima) and
another once every record is acknowledged; their difference, with the task's duration and, for a
transaction, the wall-clock time of its first record, is the task's :class:`TaskMetrics`.

Invariants:
- A producer without ``metrics_snapshot`` (a test's fake) gives no metrics (None), never an
  error: metrics never fail a write.
- Per-partition figures cover only the partitions whose counters moved during the lease.
- Times: ``*_wall_ms`` are epoch milliseconds (the driver compares them with its own commit
  time), durations are milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kafka_sink.clock import SYSTEM_CLOCK, Clock

__all__ = ["PartitionMetrics", "Snapshot", "TaskMeter", "TaskMetrics"]


class _Totals(Protocol):
    @property
    def records(self) -> int: ...
    @property
    def uncompressed_bytes(self) -> int: ...
    @property
    def compressed_bytes(self) -> int: ...
    @property
    def batches(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def retries(self) -> int: ...


class Snapshot(Protocol):
    """The part of ``kafka_sink.producer.metrics.ProducerMetricsSnapshot`` read here."""

    @property
    def partitions(self) -> Mapping[tuple[str, int], _Totals]: ...
    @property
    def requests(self) -> int: ...
    @property
    def request_latency_ms_sum(self) -> float: ...
    @property
    def request_latency_ms_max(self) -> float: ...
    @property
    def throttle_time_ms_sum(self) -> float: ...
    @property
    def throttle_time_ms_max(self) -> float: ...
    def minus(self, earlier: Any) -> Snapshot: ...


@dataclass(frozen=True, slots=True)
class PartitionMetrics:
    """What one topic-partition's acknowledged batches carried during a task (or a batch)."""

    topic: str
    partition: int
    records: int
    uncompressed_bytes: int
    compressed_bytes: int
    batches: int
    errors: int
    retries: int

    def plus(self, other: PartitionMetrics) -> PartitionMetrics:
        return PartitionMetrics(
            self.topic,
            self.partition,
            self.records + other.records,
            self.uncompressed_bytes + other.uncompressed_bytes,
            self.compressed_bytes + other.compressed_bytes,
            self.batches + other.batches,
            self.errors + other.errors,
            self.retries + other.retries,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "records": self.records,
            "uncompressed_bytes": self.uncompressed_bytes,
            "compressed_bytes": self.compressed_bytes,
            "batches": self.batches,
            "errors": self.errors,
            "retries": self.retries,
        }


@dataclass(frozen=True, slots=True)
class TaskMetrics:
    """One task's write as its producer saw it (the delta of its lease), and its timing."""

    partitions: tuple[PartitionMetrics, ...]
    requests: int
    request_latency_ms_sum: float
    request_latency_ms_max: float
    throttle_time_ms_sum: float
    throttle_time_ms_max: float
    #: When the task started (epoch ms) and how long its write took, acks included.
    started_wall_ms: int
    duration_ms: int
    #: Exactly-once: when its transaction's first record was handed to the producer (epoch ms).
    first_record_wall_ms: int | None = None

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)


class TaskMeter:
    """Measures one task: :meth:`lease` when it gets its producer, :meth:`result` at the end."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._started_wall_ms = clock.wall_ms()
        self._started_ms = clock.now_ms()
        self._before: Snapshot | None = None
        self._first_record_wall_ms: int | None = None

    def lease(self, producer: object) -> None:
        """The task's producer is leased and about to take its first record."""
        take = getattr(producer, "metrics_snapshot", None)
        if take is None:
            return
        # The maxima since this reset are the task's own: no other task uses the producer.
        self._before = take(reset_maxima=True)
        self._first_record_wall_ms = self._clock.wall_ms()

    def result(self, producer: object, *, transactional: bool) -> TaskMetrics | None:
        """The task's metrics once every record it sent is acknowledged; None without a lease
        or with a producer that keeps no snapshots."""
        if self._before is None:
            return None
        delta: Snapshot = producer.metrics_snapshot().minus(self._before)  # type: ignore[attr-defined]
        partitions = tuple(
            PartitionMetrics(
                topic,
                partition,
                t.records,
                t.uncompressed_bytes,
                t.compressed_bytes,
                t.batches,
                t.errors,
                t.retries,
            )
            for (topic, partition), t in sorted(delta.partitions.items())
        )
        return TaskMetrics(
            partitions=partitions,
            requests=delta.requests,
            request_latency_ms_sum=delta.request_latency_ms_sum,
            request_latency_ms_max=delta.request_latency_ms_max,
            throttle_time_ms_sum=delta.throttle_time_ms_sum,
            throttle_time_ms_max=delta.throttle_time_ms_max,
            started_wall_ms=self._started_wall_ms,
            duration_ms=self._clock.now_ms() - self._started_ms,
            first_record_wall_ms=self._first_record_wall_ms if transactional else None,
        )
