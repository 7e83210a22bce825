"""The producer's metrics: Java's metrics core (registry, sensors, windowed stats, reporters),
the producer's sensors under Java's names, and the cumulative snapshot a Spark task diffs.

See ``docs/metrics.md`` for every metric, its group, tags and meaning.
"""

from kafka_sink.producer.metrics.producer_metrics import (
    NODE_GROUP,
    PRODUCER_GROUP,
    TOPIC_GROUP,
    ProducerMetrics,
)
from kafka_sink.producer.metrics.registry import (
    KafkaMetric,
    MetricName,
    Metrics,
    MetricsReporter,
    Sensor,
)
from kafka_sink.producer.metrics.snapshot import PartitionTotals, ProducerMetricsSnapshot
from kafka_sink.producer.metrics.stats import (
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    Rate,
    Value,
    WindowedCount,
    WindowedSum,
)

__all__ = [
    "NODE_GROUP",
    "PRODUCER_GROUP",
    "TOPIC_GROUP",
    "Avg",
    "CumulativeCount",
    "CumulativeSum",
    "KafkaMetric",
    "Max",
    "MetricConfig",
    "MetricName",
    "Metrics",
    "MetricsReporter",
    "PartitionTotals",
    "ProducerMetrics",
    "ProducerMetricsSnapshot",
    "Rate",
    "Sensor",
    "Value",
    "WindowedCount",
    "WindowedSum",
]
