"""The cheap recording paths give exactly what the plain definitions give: a sensor's summed
records (``Sensor.accumulate``) against recording each, the acknowledged batches counted once
per response before any of them completes, ``requests-in-flight`` as a counter; and Java's
``metric.reporters`` and ``metrics.recording.level`` applied or refused, never ignored."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import ConfigError
from kafka_sink.producer.metrics import (
    Avg,
    KafkaMetric,
    Max,
    MetricConfig,
    MetricName,
    Metrics,
    Value,
)
from kafka_sink.producer.producer import KafkaProducer
from tests.fakes.producer import make_harness, produce_response

CONFIG = MetricConfig(samples=3, time_window_ms=100)


def _registry(clock: ManualClock) -> tuple[Metrics, list[Any]]:
    metrics = Metrics(CONFIG, clock)
    sensors = []
    for i in range(3):
        sensor = metrics.sensor(f"s{i}")
        sensor.add_meter(
            MetricName(f"s{i}-rate", "g"), MetricName(f"s{i}-total", "g"), count=bool(i % 2)
        )
        sensor.add(MetricName(f"s{i}-avg", "g"), Avg()).add(MetricName(f"s{i}-max", "g"), Max())
        sensors.append(sensor)
    return metrics, sensors


def _values(metrics: Metrics) -> dict[str, float]:
    return {name.name: metric.value() for name, metric in metrics.metrics().items()}


def _same(a: dict[str, float], b: dict[str, float]) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        other = b[key]
        assert (math.isnan(value) and math.isnan(other)) or value == pytest.approx(other), key


@pytest.mark.parametrize("seed", range(20))
def test_accumulated_records_equal_recording_each(seed: int) -> None:
    # Times that cross windows, idle gaps longer than all samples (purged at read), and reads
    # at random points: the summed path must land every record in the same sample.
    rng = random.Random(seed)
    clock = ManualClock()
    plain, plain_sensors = _registry(clock)
    fast, fast_sensors = _registry(clock)
    for _ in range(400):
        clock.advance(rng.choice((0, 1, 7, 40, 99, 100, 150, 420)))
        now = clock.now_ms()
        i = rng.randrange(3)
        count = rng.randint(1, 4)
        total = rng.uniform(0, 50) * count
        maximum = total / count + rng.uniform(0, 10)
        plain_sensors[i].record_many(total, count, maximum, now)
        with fast.lock:
            fast_sensors[i].accumulate(total, count, maximum, now)
        if rng.random() < 0.1:
            with fast.lock:
                fast.flush_pending()
            clock.advance(rng.choice((0, 5, 300)))
            _same(_values(plain), _values(fast))
    with fast.lock:
        fast.flush_pending()
    _same(_values(plain), _values(fast))


def test_a_value_stat_is_never_summed() -> None:
    clock = ManualClock()
    metrics = Metrics(CONFIG, clock)
    sensor = metrics.sensor("v").add(MetricName("v", "g"), Value())
    with metrics.lock:
        sensor.accumulate(5.0, 1, 5.0, 0)
        sensor.accumulate(3.0, 1, 3.0, 0)  # recorded at once: the last value wins
        assert not metrics.pending
    assert _values(metrics)["v"] == 3.0


def test_a_batch_is_in_the_snapshot_when_its_callback_runs() -> None:
    # flush() returns when the last batch completes: the snapshot the caller takes next must
    # already count it (the Spark task's per-write metrics are that delta).
    h = make_harness(idempotent=False, linger_ms=0, partitions={"t": [0, 0]})
    seen: list[int] = []

    def on_done(*_args: Any) -> None:
        seen.append(sum(t.records for t in h.metrics.counters.take().partitions.values()))

    h.send(partition=0, value=b"a")
    h.send(partition=1, value=b"b", callback=on_done)
    h.run()
    (sent,) = h.network.produce_requests()
    h.network.respond(sent, produce_response(sent))
    h.run()
    assert seen == [2]


def _in_flight(h: Any) -> float:
    (metric,) = (
        m for n, m in h.metrics.registry.metrics().items() if n.name == "requests-in-flight"
    )
    return float(metric.value())


def test_requests_in_flight_counts_produce_requests_until_they_complete() -> None:
    # A counter the I/O thread keeps, not a count of the network client's maps (which that
    # thread changes while a reader would iterate them).
    h = make_harness(idempotent=False, linger_ms=0)
    assert _in_flight(h) == 0
    h.send(partition=0)
    h.send(partition=1)
    h.run()
    first, second = h.network.produce_requests()
    assert _in_flight(h) == 2
    h.network.respond(first, produce_response(first))
    h.run()
    assert _in_flight(h) == 1
    h.network.disconnect(second)
    h.run()
    assert _in_flight(h) == 0


def test_metric_reporters_is_java_s_list_of_reporters() -> None:
    Recorder.instances.clear()
    path = f"{__name__}:Recorder"
    producer = KafkaProducer(
        {"bootstrap.servers": "127.0.0.1:1", "metric.reporters": f"{path}, {path}"}
    )
    try:
        assert len(Recorder.instances) == 2
        assert all("requests-in-flight" in r.names for r in Recorder.instances)
    finally:
        producer.close(0)
    assert all(r.closed for r in Recorder.instances)
    # A Java class name cannot be loaded here: refused up front, naming the key.
    with pytest.raises(ConfigError, match=r"metric\.reporters"):
        KafkaProducer(
            {
                "bootstrap.servers": "127.0.0.1:1",
                "metric.reporters": "org.apache.kafka.common.metrics.JmxReporter",
            }
        )


def test_metrics_recording_level_takes_java_s_levels_only() -> None:
    for level in ("INFO", "debug", "TRACE"):
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "metrics.recording.level": level}).close(
            0
        )
    with pytest.raises(ConfigError, match=r"metrics\.recording\.level.*INFO, DEBUG, TRACE"):
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "metrics.recording.level": "ALL"})


class Recorder:
    instances: list[Recorder] = []  # noqa: RUF012 - the test reads what the producer made

    def __init__(self) -> None:
        self.names: list[str] = []
        self.closed = False
        Recorder.instances.append(self)

    def metric_change(self, metric: KafkaMetric) -> None:
        self.names.append(metric.metric_name.name)

    def close(self) -> None:
        self.closed = True
