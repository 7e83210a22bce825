"""The producer's sensors under the Java client's names: what the sender, accumulator and facade
record, and the snapshot counters beside them.

Role: Java's ``SenderMetricsRegistry`` and ``Sender.SenderMetrics`` (group ``producer-metrics``),
the per-topic sensors (group ``producer-topic-metrics``, tag ``topic``), the per-node request
sensors (group ``producer-node-metrics``, tag ``node-id`` = ``node-<id>``), and the facade's
``*-time-ns-total`` sums (``KafkaProducerMetrics``). ``docs/metrics.md`` lists every metric.

Invariants:
- Recording is per Produce request and per batch outcome, never per record: the batches of one
  request are folded into one ``record_many`` per sensor (same ``now``, so the same sample as
  recording each batch: Java records each).
- The I/O thread only sums a request's batches and appends the sums to a queue; they reach the
  sensors, in the order recorded and with their own times (so with the same windows as if
  recorded at once), when any metric is read or once ``_FOLD_AT`` wait. A fold sums each
  sensor's records while none of its windows can move (``Sensor.accumulate``) and records the
  sums once at its end: the same samples, a few additions per request. Retries, errors and
  splits (rare) and the snapshot counters are recorded at once.
- The acknowledged batches of one response are counted in the snapshot counters together, under
  one lock, before any of them completes (a caller woken by its batch sees it counted).
- As in Java, what a request sends is recorded when it is sent (``record-send-*``, ``batch-size``,
  ``compression-rate``, ``record-queue-time``, ``record-size``, ``records-per-request``, a retried
  batch again), latency and throttle time when it is answered, retries and errors per batch
  outcome. The snapshot counters (:mod:`.snapshot`) count acknowledged batches only.
- ``record-size-avg``/``-max`` are over each batch's largest record (Java's ``maxRecordSize``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from kafka_sink.producer.metrics.registry import MetricName, Metrics, MetricsReporter, Sensor
from kafka_sink.producer.metrics.snapshot import ERRORS, RETRIES, SnapshotCounters
from kafka_sink.producer.metrics.stats import Avg, CumulativeSum, Max, MetricConfig

if TYPE_CHECKING:
    from kafka_sink.clock import Clock
    from kafka_sink.producer.batch import ProducerBatch
    from kafka_sink.producer.metrics.registry import Gauge

# Deferred request records applied by the I/O thread itself once this many are waiting, so
# memory stays bounded when nobody reads the metrics, and one catch-up (about 3 us a request)
# never holds the I/O thread for more than about a millisecond.
_FOLD_AT = 256

PRODUCER_GROUP = "producer-metrics"
TOPIC_GROUP = "producer-topic-metrics"
NODE_GROUP = "producer-node-metrics"

# The facade's time sums (Java's KafkaProducerMetrics), each a CumulativeSum of nanoseconds.
TIME_NS_TOTALS = {
    "flush": "Total time producer has spent in flush in nanoseconds.",
    "metadata-wait": "Total time producer has spent waiting on topic metadata in nanoseconds.",
    "bufferpool-wait": "The total time in nanoseconds an appender waits for space allocation.",
    "txn-init": "Total time producer has spent in init_transactions in nanoseconds.",
    "txn-begin": "Total time producer has spent in begin_transaction in nanoseconds.",
    "txn-send-offsets": (
        "Total time producer has spent in send_offsets_to_transaction in nanoseconds."
    ),
    "txn-commit": "Total time producer has spent in commit_transaction in nanoseconds.",
    "txn-abort": "Total time producer has spent in abort_transaction in nanoseconds.",
}


def _name(name: str, description: str, group: str = PRODUCER_GROUP, **tags: str) -> MetricName:
    return MetricName(
        name, group, description, tuple((k.replace("_", "-"), v) for k, v in tags.items())
    )


def _avg_max(
    sensor: Sensor, prefix: str, what: str, group: str = PRODUCER_GROUP, **tags: str
) -> Sensor:
    sensor.add(_name(f"{prefix}-avg", f"The average {what}", group, **tags), Avg())
    return sensor.add(_name(f"{prefix}-max", f"The maximum {what}", group, **tags), Max())


def _meter(
    sensor: Sensor,
    prefix: str,
    what: str,
    group: str = PRODUCER_GROUP,
    *,
    count: bool = False,
    **tags: str,
) -> Sensor:
    """``<prefix>-rate`` and ``<prefix>-total`` of what is recorded (of events, with count)."""
    return sensor.add_meter(
        _name(f"{prefix}-rate", f"The average per-second number of {what}", group, **tags),
        _name(f"{prefix}-total", f"The total number of {what}", group, **tags),
        count=count,
    )


class _TopicSensors:
    __slots__ = ("bytes", "compression", "errors", "records", "retries")

    def __init__(self, metrics: Metrics, topic: str) -> None:
        def sensor(what: str) -> Sensor:
            return metrics.sensor(f"topic.{topic}.{what}")

        self.records = _meter(
            sensor("records-per-batch"),
            "record-send",
            f"records sent for topic {topic}",
            TOPIC_GROUP,
            topic=topic,
        )
        self.bytes = _meter(
            sensor("bytes"), "byte", f"bytes sent for topic {topic}", TOPIC_GROUP, topic=topic
        )
        self.compression = sensor("compression-rate").add(
            _name(
                "compression-rate",
                "The average compression rate of record batches for a topic (compressed over "
                "uncompressed size)",
                TOPIC_GROUP,
                topic=topic,
            ),
            Avg(),
        )
        self.retries = _meter(
            sensor("record-retries"),
            "record-retry",
            f"retried record sends for topic {topic}",
            TOPIC_GROUP,
            topic=topic,
        )
        self.errors = _meter(
            sensor("record-errors"),
            "record-error",
            f"record sends that failed for topic {topic}",
            TOPIC_GROUP,
            topic=topic,
        )


class _NodeSensors:
    __slots__ = ("latency", "requests", "responses", "sent_bytes")

    def __init__(self, metrics: Metrics, node_id: int) -> None:
        node = f"node-{node_id}"

        def meter(prefix: str, what: str, *, count: bool = False) -> Sensor:
            sensor = metrics.sensor(f"{node}.{prefix}")
            return _meter(sensor, prefix, what, NODE_GROUP, count=count, node_id=node)

        self.requests = meter("request", "Produce requests sent", count=True)
        self.sent_bytes = meter("outgoing-byte", "record batch bytes sent")
        self.responses = meter("response", "Produce responses received", count=True)
        self.latency = _avg_max(
            metrics.sensor(f"{node}.latency"),
            "request-latency",
            "request latency in ms",
            NODE_GROUP,
            node_id=node,
        )


class ProducerMetrics:
    """One producer's metrics: the registry, its sensors, and the snapshot counters."""

    def __init__(
        self,
        config: MetricConfig,
        clock: Clock,
        *,
        reporters: Sequence[MetricsReporter] = (),
        nanos: Callable[[], int] | None = None,
    ) -> None:
        self.registry = Metrics(config, clock, list(reporters))
        self.counters = SnapshotCounters()
        self.clock = clock
        self.nanos = nanos if nanos is not None else (lambda: clock.now_ms() * 1_000_000)
        m = self.registry
        self._batch_size = _avg_max(
            m.sensor("batch-size"), "batch-size", "number of bytes sent per partition per-request."
        )
        self._compression = m.sensor("compression-rate").add(
            _name(
                "compression-rate-avg",
                "The average compression rate of record batches, defined as the average ratio "
                "of the compressed batch size over the uncompressed size.",
            ),
            Avg(),
        )
        self._queue_time = _avg_max(
            m.sensor("queue-time"),
            "record-queue-time",
            "time in ms record batches spent in the send buffer.",
        )
        self._request_time = _avg_max(
            m.sensor("request-time"), "request-latency", "request latency in ms"
        )
        self._throttle = _avg_max(
            m.sensor("produce-throttle-time"),
            "produce-throttle-time",
            "time in ms a request was throttled by a broker",
        )
        self._records_per_request = _meter(
            m.sensor("records-per-request"), "record-send", "records sent."
        )
        self._records_per_request.add(
            _name("records-per-request-avg", "The average number of records per request."), Avg()
        )
        self._retries = _meter(m.sensor("record-retries"), "record-retry", "retried record sends")
        self._errors = _meter(
            m.sensor("errors"), "record-error", "record sends that resulted in errors"
        )
        self._record_size = _avg_max(m.sensor("record-size"), "record-size", "record size")
        self._splits = _meter(m.sensor("batch-split-rate"), "batch-split", "batch splits")
        self._time_ns = {
            what: m.sensor(f"{what}-time-ns").add(
                _name(f"{what}-time-ns-total", description), CumulativeSum()
            )
            for what, description in TIME_NS_TOTALS.items()
        }
        self._topics: dict[str, _TopicSensors] = {}
        self._nodes: dict[int, _NodeSensors] = {}
        # What each request recorded, applied to the sensors when a metric is read (or every
        # _FOLD_AT entries): the I/O thread only appends (deque appends are thread safe).
        self._deferred: deque[tuple[Callable[..., None], tuple[object, ...]]] = deque()
        # The registry's (reentrant) lock, for folding and for creating a topic's or node's
        # sensors: a reporter told of a new metric may read it (and so fold) from inside either,
        # and a fold takes it once for all the sensors it records.
        self._fold_lock = self.registry.lock
        self.registry.before_read = self.fold
        # Produce requests sent and not yet completed: written by the I/O thread only (one int,
        # so a reader on another thread never sees a map change under it).
        self.requests_in_flight = 0
        self.add_gauge(
            "requests-in-flight",
            "The current number of in-flight requests awaiting a response.",
            lambda _config, _now_ms: float(self.requests_in_flight),
        )

    # -- gauges (registered by the facade, which knows the accumulator, network and metadata) --

    def add_gauge(self, name: str, description: str, gauge: Gauge) -> None:
        self.registry.add_gauge(_name(name, description), gauge)

    # -- the sender --------------------------------------------------------------------------

    def _topic(self, topic: str) -> _TopicSensors:
        sensors = self._topics.get(topic)
        if sensors is None:
            with self._fold_lock:  # the I/O thread and a reader's fold may both get here
                sensors = self._topics.get(topic)
                if sensors is None:
                    sensors = self._topics[topic] = _TopicSensors(self.registry, topic)
        return sensors

    def _node(self, node_id: int) -> _NodeSensors:
        sensors = self._nodes.get(node_id)
        if sensors is None:
            with self._fold_lock:
                sensors = self._nodes.get(node_id)
                if sensors is None:
                    sensors = self._nodes[node_id] = _NodeSensors(self.registry, node_id)
        return sensors

    def fold(self) -> None:
        """Apply the deferred per-request records to their sensors, in the order recorded."""
        deferred = self._deferred
        with self._fold_lock:
            while deferred:
                apply, args = deferred.popleft()
                apply(*args)
            # Pending sums reach the stats before anything reads them (a reporter reading from
            # inside a fold flushes what the outer fold summed so far, too).
            self.registry.flush_pending()

    def _defer(self, apply: Callable[..., None], args: tuple[object, ...]) -> None:
        self._deferred.append((apply, args))
        if len(self._deferred) >= _FOLD_AT:
            self.fold()

    def record_sent(self, node_id: int, batches: Iterable[ProducerBatch], now_ms: int) -> None:
        """A Produce request with ``batches`` (encoded, stamped) goes to ``node_id``."""
        self.requests_in_flight += 1
        n = 0
        records = 0
        size_sum = size_max = 0
        ratio_sum = 0.0
        queue_sum = queue_max = 0
        record_size_sum = record_size_max = 0
        per_topic: dict[str, list[float]] = {}
        for batch in batches:
            sealed = batch.sealed
            if sealed is None or batch.encoded is None:
                continue  # failed to encode: not sent
            count = batch.record_count
            size = sealed.size_bytes
            ratio = size / (sealed.uncompressed_size_bytes or size)
            queue = batch.drained_ms - batch.created_ms
            largest = sealed.max_record_size
            n += 1
            records += count
            size_sum += size
            ratio_sum += ratio
            queue_sum += queue
            record_size_sum += largest
            if size > size_max:  # noqa: PLR1730 - a branch is cheaper than max()
                size_max = size
            if queue > queue_max:  # noqa: PLR1730 - a branch is cheaper than max()
                queue_max = queue
            if largest > record_size_max:  # noqa: PLR1730 - a branch is cheaper than max()
                record_size_max = largest
            t = per_topic.get(batch.topic)
            if t is None:
                per_topic[batch.topic] = [count, size, ratio, 1]
            else:
                t[0] += count
                t[1] += size
                t[2] += ratio
                t[3] += 1
        if n:
            self._defer(
                self._apply_sent,
                (
                    node_id,
                    now_ms,
                    n,
                    records,
                    size_sum,
                    size_max,
                    ratio_sum,
                    queue_sum,
                    queue_max,
                    record_size_sum,
                    record_size_max,
                    per_topic,
                ),
            )

    def _apply_sent(  # noqa: PLR0917 - one deferred request's folded numbers
        self,
        node_id: int,
        now_ms: int,
        n: int,
        records: int,
        size_sum: int,
        size_max: int,
        ratio_sum: float,
        queue_sum: int,
        queue_max: int,
        record_size_sum: int,
        record_size_max: int,
        per_topic: dict[str, list[float]],
    ) -> None:
        # Under registry.lock (fold): summed per sensor while no window moves, recorded at
        # the end of the fold.
        for topic, (t_records, t_bytes, t_ratio, t_batches) in per_topic.items():
            sensors = self._topic(topic)
            batches = int(t_batches)
            sensors.records.accumulate(t_records, batches, t_records, now_ms)
            sensors.bytes.accumulate(t_bytes, batches, t_bytes, now_ms)
            sensors.compression.accumulate(t_ratio, batches, t_ratio, now_ms)
        self._batch_size.accumulate(size_sum, n, size_max, now_ms)
        self._queue_time.accumulate(queue_sum, n, queue_max, now_ms)
        self._compression.accumulate(ratio_sum, n, ratio_sum, now_ms)
        self._record_size.accumulate(record_size_sum, n, record_size_max, now_ms)
        self._records_per_request.accumulate(records, 1, records, now_ms)
        node = self._node(node_id)
        node.requests.accumulate(1.0, 1, 1.0, now_ms)
        node.sent_bytes.accumulate(size_sum, 1, size_sum, now_ms)

    def record_completed(self) -> None:
        """A Produce request left flight: answered, failed, timed out, or written (acks=0)."""
        self.requests_in_flight -= 1

    def record_answered(
        self, node_id: int, latency_ms: int, throttle_time_ms: int, now_ms: int
    ) -> None:
        """A Produce request to ``node_id`` was answered (with a body)."""
        self.counters.answered(latency_ms, throttle_time_ms)
        self._defer(self._apply_answered, (node_id, latency_ms, throttle_time_ms, now_ms))

    def _apply_answered(
        self, node_id: int, latency_ms: int, throttle_time_ms: int, now_ms: int
    ) -> None:
        self._request_time.accumulate(latency_ms, 1, latency_ms, now_ms)
        self._throttle.accumulate(throttle_time_ms, 1, throttle_time_ms, now_ms)
        node = self._node(node_id)
        node.responses.accumulate(1.0, 1, 1.0, now_ms)
        node.latency.accumulate(latency_ms, 1, latency_ms, now_ms)

    def record_acked_many(self, batches: Iterable[ProducerBatch]) -> None:
        """The broker acknowledged ``batches`` (one response's): one lock for all of them."""
        self.counters.acked_batches(batches)

    def record_retry(self, batch: ProducerBatch, now_ms: int) -> None:
        count = batch.record_count
        self._retries.record(count, now_ms)
        self._topic(batch.topic).retries.record(count, now_ms)
        self.counters.add(batch.tp, RETRIES, count)

    def record_error(self, batch: ProducerBatch, now_ms: int) -> None:
        count = batch.record_count
        self._errors.record(count, now_ms)
        self._topic(batch.topic).errors.record(count, now_ms)
        self.counters.add(batch.tp, ERRORS, count)

    def record_split(self, now_ms: int) -> None:
        self._splits.record(1.0, now_ms)

    # -- the facade --------------------------------------------------------------------------

    def record_time_ns(self, what: str, nanoseconds: int) -> None:
        """Add to ``<what>-time-ns-total`` (a key of TIME_NS_TOTALS)."""
        self._time_ns[what].record(nanoseconds)
