"""The metrics registry: named metrics, the sensors that feed them, and the reporters told of them.

Role: Java's ``org.apache.kafka.common.metrics`` core in Python. A :class:`MetricName` is
(name, group, description, tags); a :class:`KafkaMetric` measures one stat (or reads a gauge) at
``now``; a :class:`Sensor` records a value into each of its stats at once; :class:`Metrics` holds
them all, keyed by name, and tells each :class:`MetricsReporter` of every metric added, changed or
removed (``init`` with what exists, ``metric_change``, ``metric_removal``, ``close``).

Invariants:
- A metric name is registered once: a second one raises ValueError (Java's rule).
- One reentrant lock per registry (``Metrics.lock``) guards every stat: a sensor records under
  it and a metric measures under it, so the producer's I/O thread and the user's thread can
  record and read concurrently. Java locks per sensor; one lock lets an owner that records many
  sensors at once take it once (``Sensor.record_locked`` inside ``with registry.lock``), and
  recording is never slow enough for the coarser lock to be contended.
- A reporter that raises is logged and never breaks the producer.
- Reading a metric first calls ``before_read`` (when set), so records an owner defers are in
  the sensors before anything is measured.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from kafka_sink.producer.metrics.stats import (
    CumulativeCount,
    CumulativeSum,
    MeasurableStat,
    MetricConfig,
    Rate,
    SampledStat,
    WindowedCount,
    WindowedSum,
)

if TYPE_CHECKING:
    from kafka_sink.clock import Clock

log = logging.getLogger(__name__)

Gauge = Callable[[MetricConfig, int], float]


@dataclass(frozen=True, slots=True)
class MetricName:
    """A metric's identity: Java's name, group and tags (in registration order)."""

    name: str
    group: str
    description: str = field(default="", compare=False, hash=False)
    tags: tuple[tuple[str, str], ...] = ()

    @property
    def group_key(self) -> str:
        """The group and its tag values joined with ".": kafka-python's ``metrics()`` key."""
        return ".".join((self.group, *(value for _, value in self.tags)))


class KafkaMetric:
    """One metric: a stat measured, or a gauge read, at the clock's now."""

    __slots__ = ("_clock", "_config", "_gauge", "_lock", "_registry", "_stat", "metric_name")

    def __init__(
        self,
        metric_name: MetricName,
        registry: Metrics,
        *,
        stat: MeasurableStat | None = None,
        gauge: Gauge | None = None,
    ) -> None:
        self.metric_name = metric_name
        self._registry = registry
        self._lock = registry.lock
        self._config = registry.config
        self._clock = registry.clock
        self._stat = stat
        self._gauge = gauge

    def value(self) -> float:
        before_read = self._registry.before_read
        if before_read is not None:
            before_read()
        now_ms = self._clock.now_ms()
        if self._gauge is not None:
            return float(self._gauge(self._config, now_ms))
        assert self._stat is not None
        with self._lock:
            return self._stat.measure(self._config, now_ms)

    def __repr__(self) -> str:
        return f"KafkaMetric({self.metric_name.group_key}/{self.metric_name.name})"


@runtime_checkable
class MetricsReporter(Protocol):
    """Java's MetricsReporter, in Python: told of every metric of a producer's registry."""

    def init(self, metrics: list[KafkaMetric]) -> None: ...
    def metric_change(self, metric: KafkaMetric) -> None: ...
    def metric_removal(self, metric: KafkaMetric) -> None: ...
    def close(self) -> None: ...


class Sensor:
    """Records a value into every stat added to it, under the registry's lock."""

    __slots__ = (
        "_clock",
        "_config",
        "_lock",
        "_pending",
        "_pending_max",
        "_pending_ms",
        "_pending_total",
        "_stats",
        "_window_end_ms",
        "name",
        "registry",
    )

    def __init__(self, registry: Metrics, name: str) -> None:
        self.registry = registry
        self.name = name
        self._config = registry.config
        self._clock = registry.clock
        self._lock = registry.lock
        # What recording updates: a Rate's windowed stat directly (one call less per record).
        self._stats: list[MeasurableStat] = []
        # What ``accumulate`` summed and ``flush`` has not recorded yet (count, total, maximum,
        # the first one's time), and until when summing is exact (see window_end_ms).
        self._pending = 0
        self._pending_total = 0.0
        self._pending_max = -math.inf
        self._pending_ms = 0
        self._window_end_ms = -math.inf

    def add(self, metric_name: MetricName, stat: MeasurableStat) -> Sensor:
        self.registry.register(KafkaMetric(metric_name, self.registry, stat=stat))
        self._stats.append(stat.recorded)
        self._window_end_ms = -math.inf
        return self

    def add_meter(
        self, rate_name: MetricName, total_name: MetricName, *, count: bool = False
    ) -> Sensor:
        """Java's Meter: a per-second rate and a cumulative total of what is recorded (or of
        how many times, with ``count``)."""
        windowed: SampledStat = WindowedCount() if count else WindowedSum()
        total: MeasurableStat = CumulativeCount() if count else CumulativeSum()
        return self.add(rate_name, Rate(windowed)).add(total_name, total)

    def record(self, value: float = 1.0, now_ms: int | None = None) -> None:
        self.record_many(value, 1, value, now_ms)

    def record_many(
        self, total: float, count: int, maximum: float, now_ms: int | None = None
    ) -> None:
        """``count`` values summing to ``total``, the largest ``maximum``, all at ``now_ms``:
        what recording each would give (one sample holds them all), for one lock."""
        if count <= 0:
            return
        if now_ms is None:
            now_ms = self._clock.now_ms()
        with self._lock:
            self.record_locked(total, count, maximum, now_ms)

    def record_locked(self, total: float, count: int, maximum: float, now_ms: int) -> None:
        """``record_many`` for a caller already holding ``registry.lock`` (``count`` > 0)."""
        config = self._config
        for stat in self._stats:
            stat.record_many(config, total, count, maximum, now_ms)

    def accumulate(self, total: float, count: int, maximum: float, now_ms: int) -> None:
        """``record_locked``, summed with the sensor's other pending records while no window of
        its stats can move, so a run of records costs a few additions each and one record.
        The caller holds ``registry.lock`` and calls ``registry.flush_pending()`` before
        releasing it (and before anything reads the stats)."""
        if now_ms < self._window_end_ms:
            if not self._pending:
                self._pending_ms = now_ms
                self.registry.pending.append(self)
            self._pending += count
            self._pending_total += total
            if maximum > self._pending_max:  # noqa: PLR1730 - a branch is cheaper than max()
                self._pending_max = maximum
            return
        self.flush()
        self.record_locked(total, count, maximum, now_ms)
        config = self._config
        self._window_end_ms = min(
            (stat.window_end_ms(config) for stat in self._stats), default=math.inf
        )

    def flush(self) -> None:
        """Record what ``accumulate`` summed (under ``registry.lock``)."""
        if self._pending:
            self.record_locked(
                self._pending_total, self._pending, self._pending_max, self._pending_ms
            )
            self._pending = 0
            self._pending_total = 0.0
            self._pending_max = -math.inf


class Metrics:
    """A producer's registry of metrics and sensors, and its reporters."""

    def __init__(
        self,
        config: MetricConfig,
        clock: Clock,
        reporters: list[MetricsReporter] | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        # Guards every stat of every sensor, and the registry's own maps (reentrant: a reporter
        # told of a new metric may read it from inside ``register``).
        self.lock = threading.RLock()
        self._metrics: dict[MetricName, KafkaMetric] = {}
        self._sensors: dict[str, Sensor] = {}
        self._reporters = list(reporters or ())
        # Sensors holding sums ``Sensor.accumulate`` has yet to record (under ``lock``).
        self.pending: list[Sensor] = []
        # Called before any metric is measured: brings deferred records into the sensors.
        self.before_read: Callable[[], None] | None = None
        for reporter in self._reporters:
            self._tell(reporter.init, [])

    def sensor(self, name: str) -> Sensor:
        """The sensor called ``name``, created on first use."""
        with self.lock:
            sensor = self._sensors.get(name)
            if sensor is None:
                sensor = self._sensors[name] = Sensor(self, name)
            return sensor

    def flush_pending(self) -> None:
        """Record every sensor's accumulated sums (under ``lock``)."""
        pending = self.pending
        while pending:
            pending.pop().flush()

    def get_sensor(self, name: str) -> Sensor | None:
        return self._sensors.get(name)

    def add_gauge(self, metric_name: MetricName, gauge: Gauge) -> None:
        self.register(KafkaMetric(metric_name, self, gauge=gauge))

    def register(self, metric: KafkaMetric) -> None:
        with self.lock:
            if metric.metric_name in self._metrics:
                raise ValueError(f"a metric named {metric.metric_name} is already registered")
            self._metrics[metric.metric_name] = metric
        for reporter in self._reporters:
            self._tell(reporter.metric_change, metric)

    def metrics(self) -> Mapping[MetricName, KafkaMetric]:
        """Every metric registered, after ``before_read`` (which may register more)."""
        if self.before_read is not None:
            self.before_read()
        with self.lock:
            return dict(self._metrics)

    def close(self) -> None:
        reporters, self._reporters = self._reporters, []
        for reporter in reporters:
            self._tell(reporter.close)

    @staticmethod
    def _tell(method: Callable[..., object], *args: object) -> None:
        try:
            method(*args)
        except Exception:  # a reporter's failure is its own, never the producer's
            log.warning("metrics reporter %r failed", method, exc_info=True)
