"""The measurable statistics a sensor feeds, with the Java client's window semantics.

Role: Java's ``org.apache.kafka.common.metrics.stats`` in Python: the sampled stats (``Avg``,
``Max``, ``WindowedCount``, ``WindowedSum``) and ``Rate`` over ``MetricConfig.samples`` samples
of ``time_window_ms`` each; the cumulative ones (``CumulativeSum``, ``CumulativeCount``) and
``Value`` (the last recorded value).

Invariants (each is Java's ``SampledStat`` rule):
- ``record`` adds to the current sample; once that sample is ``time_window_ms`` old, the next
  sample slot (round robin over ``samples`` slots) is reset and becomes current.
- ``measure(now)`` first resets every sample whose window started ``samples * time_window_ms`` or
  more before ``now`` (obsolete), then combines what is left: ``Avg`` is the sum of the values
  over the number of events (NaN without any event), ``Max`` the largest value (NaN without any
  event), ``WindowedCount``/``WindowedSum`` the sum over the samples.
- ``Rate`` divides its windowed sum by the elapsed span from the oldest sample's start to
  ``now``, in seconds, never less than ``samples - 1`` full windows (so a first burst is not
  divided by a few milliseconds) and never less than 1 ms.
- Callers hold the registry's lock; nothing here is thread safe by itself.
- ``record_many`` of ``count`` events summing to ``total`` (the largest ``maximum``) at one
  ``now_ms`` leaves every stat exactly as recording each event would; a sampled stat updates
  its current sample inline and only calls out when the window moves.
- ``window_end_ms``: records before it (and after the stat's last record) may be summed into one
  ``record_many`` with the same result (``Value``, which keeps the last, never allows it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MetricConfig:
    """``metrics.num.samples`` and ``metrics.sample.window.ms``."""

    samples: int = 2
    time_window_ms: int = 30000

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError(f"metrics.num.samples must be at least 1, got {self.samples}")
        if self.time_window_ms < 1:
            raise ValueError(
                f"metrics.sample.window.ms must be at least 1, got {self.time_window_ms}"
            )


class MeasurableStat:
    """What a :class:`~kafka_sink.producer.metrics.registry.Sensor` records into."""

    __slots__ = ()

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self.record_many(config, value, 1, value, now_ms)

    def record_many(
        self, config: MetricConfig, total: float, count: int, maximum: float, now_ms: int
    ) -> None:
        """``count`` events at once, summing to ``total``, the largest ``maximum``: the same
        as recording each (they share ``now_ms``, hence one sample), for one lock and call."""
        raise NotImplementedError

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        raise NotImplementedError

    @property
    def recorded(self) -> MeasurableStat:
        """The stat a sensor records into for this one (itself, but a Rate's windowed stat)."""
        return self

    def window_end_ms(self, config: MetricConfig) -> float:
        """Until when (exclusive) a record leaves this stat's state the same whatever its
        ``now_ms`` (no window moves): records before then may be summed and recorded as one.
        Only ever too early, never too late: a window only moves forward. A time-independent
        stat says +inf; the default, -inf, never lets records be summed."""
        return -math.inf


class _Sample:
    __slots__ = ("event_count", "last_window_ms", "value")

    def __init__(self, initial: float, now_ms: int) -> None:
        self.value = initial
        self.event_count = 0
        self.last_window_ms = now_ms

    def reset(self, initial: float, now_ms: int) -> None:
        self.value = initial
        self.event_count = 0
        self.last_window_ms = now_ms


class SampledStat(MeasurableStat):
    """Java's SampledStat: a ring of samples, each one ``time_window_ms`` long.

    ``record_many`` is on the I/O thread's path: it updates the current sample inline and calls
    :meth:`_roll` only when the window moves (once per ``time_window_ms``)."""

    __slots__ = ("_current", "_samples")
    initial_value = 0.0
    keeps_max = False  # a sample keeps the largest value recorded, not their sum

    def __init__(self) -> None:
        self._samples: list[_Sample] = []
        self._current = 0

    def record_many(
        self, config: MetricConfig, total: float, count: int, maximum: float, now_ms: int
    ) -> None:
        samples = self._samples
        if samples:
            sample = samples[self._current]
            if now_ms - sample.last_window_ms >= config.time_window_ms:
                sample = self._roll(config, now_ms)
        else:
            sample = self._roll(config, now_ms)
        if self.keeps_max:
            if maximum > sample.value:  # noqa: PLR1730 - a branch is cheaper than max()
                sample.value = maximum
        else:
            sample.value += total
        sample.event_count += count

    def _roll(self, config: MetricConfig, now_ms: int) -> _Sample:
        """The sample ``now_ms`` records into when the current one is a window old (or none
        exists yet): the next slot, reset (or made) at ``now_ms``."""
        samples = self._samples
        if not samples:
            sample = _Sample(self.initial_value, now_ms)
            samples.append(sample)
            return sample
        sample = samples[self._current]
        if now_ms - sample.last_window_ms < config.time_window_ms:
            return sample
        self._current = (self._current + 1) % config.samples
        if self._current >= len(samples):
            sample = _Sample(self.initial_value, now_ms)
            samples.append(sample)
        else:
            sample = samples[self._current]
            sample.reset(self.initial_value, now_ms)
        return sample

    def window_end_ms(self, config: MetricConfig) -> float:
        samples = self._samples
        if not samples:
            return -math.inf
        return samples[self._current].last_window_ms + config.time_window_ms

    def purge_obsolete_samples(self, config: MetricConfig, now_ms: int) -> None:
        expire_age = config.samples * config.time_window_ms
        for sample in self._samples:
            if now_ms - sample.last_window_ms >= expire_age:
                sample.reset(self.initial_value, now_ms)

    def oldest_window_ms(self, now_ms: int) -> int:
        if not self._samples:
            self._samples.append(_Sample(self.initial_value, now_ms))
        return min(sample.last_window_ms for sample in self._samples)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge_obsolete_samples(config, now_ms)
        return self.combine()

    def combine(self) -> float:
        raise NotImplementedError


class Avg(SampledStat):
    """Sum of the values over the number of events in the live samples; NaN without events."""

    __slots__ = ()

    def combine(self) -> float:
        count = sum(s.event_count for s in self._samples)
        if count == 0:
            return math.nan
        return sum(s.value for s in self._samples) / count


class Max(SampledStat):
    """The largest value in the live samples; NaN without events."""

    __slots__ = ()
    initial_value = -math.inf
    keeps_max = True

    def combine(self) -> float:
        if not any(s.event_count for s in self._samples):
            return math.nan
        return max(s.value for s in self._samples)


class WindowedSum(SampledStat):
    __slots__ = ()

    def combine(self) -> float:
        return sum(s.value for s in self._samples)


class WindowedCount(WindowedSum):
    """Counts events, whatever their value."""

    __slots__ = ()

    def record_many(
        self, config: MetricConfig, total: float, count: int, maximum: float, now_ms: int
    ) -> None:
        super().record_many(config, count, count, maximum, now_ms)


class Rate(MeasurableStat):
    """Per second: the windowed stat's sum over the elapsed window span (Java's Rate)."""

    __slots__ = ("_stat",)

    def __init__(self, stat: SampledStat | None = None) -> None:
        self._stat = stat if stat is not None else WindowedSum()

    def record_many(
        self, config: MetricConfig, total: float, count: int, maximum: float, now_ms: int
    ) -> None:
        self._stat.record_many(config, total, count, maximum, now_ms)

    @property
    def recorded(self) -> MeasurableStat:
        return self._stat

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        value = self._stat.measure(config, now_ms)
        return value / (self.window_size_ms(config, now_ms) / 1000.0)

    def window_size_ms(self, config: MetricConfig, now_ms: int) -> int:
        stat = self._stat
        stat.purge_obsolete_samples(config, now_ms)
        elapsed = now_ms - stat.oldest_window_ms(now_ms)
        full_windows = elapsed // config.time_window_ms
        min_full_windows = config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * config.time_window_ms
        return max(elapsed, 1)


class CumulativeSum(MeasurableStat):
    __slots__ = ("_total",)

    def __init__(self) -> None:
        self._total = 0.0

    def record_many(
        self, config: MetricConfig, total: float, count: int, maximum: float, now_ms: int
    ) -> None:
        self._total += total

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self._total

    def window_end_ms(self, config: MetricConfig) -> float:
        return math.inf


class CumulativeCount(CumulativeSum):
    __slots__ = ()

    def record_many(
        self, config: MetricConfig, total: float, count: int, maximum: float, now_ms: int
    ) -> None:
        self._total += count


class Value(MeasurableStat):
    """The last recorded value (0 before any; of several at once, the largest)."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value = 0.0

    def record_many(
        self, config: MetricConfig, total: float, count: int, maximum: float, now_ms: int
    ) -> None:
        self._value = maximum

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self._value
