"""The windowed stats against Java's SampledStat, Rate, Avg and Max rules, on explicit times."""

from __future__ import annotations

import math

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.producer.metrics import (
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    MetricName,
    Metrics,
    Rate,
    Value,
    WindowedCount,
)

CONFIG = MetricConfig(samples=2, time_window_ms=1000)


def test_avg_and_max_are_nan_without_events() -> None:
    # Java: Avg and Max combine to NaN when no sample holds an event.
    assert math.isnan(Avg().measure(CONFIG, 0))
    assert math.isnan(Max().measure(CONFIG, 0))


def test_avg_is_the_sum_over_the_event_count_of_the_live_samples() -> None:
    avg = Avg()
    avg.record(CONFIG, 10, 0)
    avg.record(CONFIG, 20, 500)
    avg.record(CONFIG, 60, 1200)  # a new sample: the first is 1000 ms old
    assert avg.measure(CONFIG, 1200) == 30


def test_samples_are_used_round_robin_and_the_oldest_is_overwritten() -> None:
    # Java's advance(): with 2 samples, a third window resets the first sample.
    maximum = Max()
    maximum.record(CONFIG, 100, 0)
    maximum.record(CONFIG, 5, 1000)
    assert maximum.measure(CONFIG, 1000) == 100
    maximum.record(CONFIG, 7, 2000)  # reuses the first slot: 100 is gone
    assert maximum.measure(CONFIG, 2000) == 7


def test_obsolete_samples_are_purged_at_measure_time() -> None:
    # Java's purgeObsoleteSamples: a sample whose window started samples * window ago is reset.
    avg = Avg()
    avg.record(CONFIG, 10, 0)
    assert avg.measure(CONFIG, 1999) == 10
    assert math.isnan(avg.measure(CONFIG, 2000))


def test_rate_divides_by_at_least_samples_minus_one_full_windows() -> None:
    # Java's Rate.windowSize: 100 events at t=0 measured at t=10 ms are not 10000/s; with 2
    # samples of 1 s, the elapsed 10 ms get the missing full window added: 100 / 1.010 s.
    rate = Rate(WindowedCount())
    for _ in range(100):
        rate.record(CONFIG, 1, 0)
    assert rate.measure(CONFIG, 10) == pytest.approx(100 / 1.010)
    # Past one full window the span is the elapsed time since the oldest sample started.
    assert rate.measure(CONFIG, 1500) == pytest.approx(100 / 1.5)


def test_rate_forgets_purged_samples() -> None:
    rate = Rate()
    rate.record(CONFIG, 300, 0)
    rate.record(CONFIG, 100, 1500)
    # At 2500 the first sample (window 0..1000) is 2 windows old: purged, only 100 is left,
    # over max(2500 - 1500, 1 full window) = 1 s.
    assert rate.measure(CONFIG, 2500) == pytest.approx(100.0)


def test_rate_of_nothing_is_zero() -> None:
    assert Rate().measure(CONFIG, 0) == 0.0


def test_cumulative_stats_and_value_never_forget() -> None:
    total, count, value = CumulativeSum(), CumulativeCount(), Value()
    for t, v in ((0, 3.0), (10_000, 4.0)):
        for stat in (total, count, value):
            stat.record(CONFIG, v, t)
    assert total.measure(CONFIG, 100_000) == 7.0
    assert count.measure(CONFIG, 100_000) == 2.0
    assert value.measure(CONFIG, 100_000) == 4.0


def test_record_many_equals_recording_each() -> None:
    one_by_one, at_once = Avg(), Avg()
    for v in (1.0, 2.0, 6.0):
        one_by_one.record(CONFIG, v, 0)
    at_once.record_many(CONFIG, 9.0, 3, 6.0, 0)
    assert one_by_one.measure(CONFIG, 0) == at_once.measure(CONFIG, 0) == 3.0


def test_a_sensor_feeds_all_its_stats_and_a_name_registers_once() -> None:
    clock = ManualClock()
    metrics = Metrics(CONFIG, clock)
    sensor = metrics.sensor("s")
    sensor.add(MetricName("x-avg", "g"), Avg()).add(MetricName("x-max", "g"), Max())
    sensor.add_meter(MetricName("x-rate", "g"), MetricName("x-total", "g"))
    sensor.record(4.0)
    sensor.record(8.0)
    values = {n.name: m.value() for n, m in metrics.metrics().items()}
    assert values == {"x-avg": 6.0, "x-max": 8.0, "x-rate": 12.0, "x-total": 12.0}
    assert metrics.sensor("s") is sensor
    with pytest.raises(ValueError, match="already registered"):
        metrics.sensor("other").add(MetricName("x-avg", "g"), Avg())


def test_metric_config_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match=r"metrics\.num\.samples"):
        MetricConfig(samples=0)
    with pytest.raises(ValueError, match=r"metrics\.sample\.window\.ms"):
        MetricConfig(time_window_ms=0)
