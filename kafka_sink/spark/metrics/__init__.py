"""The sink's per-batch metrics: what each task's producer did for it, summed on the driver.

Role: a room of ``kafka_sink.spark`` with no pyspark and no producer in it.
``deltas.py`` turns the producer's cumulative ``metrics_snapshot()`` into one task's
:class:`TaskMetrics` (its own share, carried in its commit message); ``batch.py`` sums a batch's
task metrics into the commit document's ``metrics`` section and the few numbers of its log line;
``prometheus.py`` pushes a batch's section to a Prometheus Pushgateway (options
``metricsPushGateway`` and ``metricsJob``). See docs/monitoring.md.

Invariants:
- Everything a task sends is a small frozen dataclass of ints, floats and strings (picklable,
  JSON-able); the section is plain JSON.
- Nothing here fails a write: a producer without snapshots gives no task metrics, a failed push is
  a warning.
"""

from kafka_sink.spark.metrics.batch import batch_metrics, metrics_summary
from kafka_sink.spark.metrics.deltas import PartitionMetrics, TaskMeter, TaskMetrics

__all__ = ["PartitionMetrics", "TaskMeter", "TaskMetrics", "batch_metrics", "metrics_summary"]
