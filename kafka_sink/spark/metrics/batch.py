"""A batch's metrics on the driver: the tasks' metrics summed into the commit document's section.

Role: ``writer.py``'s ``commit()`` hands :func:`batch_metrics` the :class:`TaskMetrics` its tasks
returned, the commit's own duration and the time it ended; the result is the commit document's
``metrics`` section (plain JSON, described in docs/monitoring.md), and :func:`metrics_summary`
the few numbers the batch's log line carries.

Invariants:
- Records and bytes are sums of what the broker acknowledged per topic-partition during the
  tasks' leases; the section's ``records`` equals the sum of its ``partitions``.
- Averages are ratios of sums (latency: summed request latency over requests answered), never
  averages of averages; maxima are maxima over the tasks.
- ``write_duration_ms`` runs from the first task's start to the end of the commit, and
  ``records_per_s`` / ``mb_per_s`` divide by it; MB are 10^6 bytes as sent (after compression).
- No task metrics (producers without snapshots, or nothing written): None, and no section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafka_sink.spark.metrics.deltas import PartitionMetrics, TaskMetrics

__all__ = ["batch_metrics", "metrics_summary"]

_MB = 1_000_000


def _ratio(numerator: float, denominator: float, digits: int = 3) -> float | None:
    return round(numerator / denominator, digits) if denominator else None


def batch_metrics(
    tasks: Sequence[tuple[int, TaskMetrics]],
    *,
    commit_duration_ms: int,
    committed_wall_ms: int,
) -> dict[str, Any] | None:
    """The ``metrics`` section of a batch whose tasks (Spark partition id, metrics) reported."""
    if not tasks:
        return None
    per_partition: dict[tuple[str, int], PartitionMetrics] = {}
    for _, task in tasks:
        for p in task.partitions:
            key = (p.topic, p.partition)
            prev = per_partition.get(key)
            per_partition[key] = p if prev is None else prev.plus(p)
    partitions = [per_partition[k] for k in sorted(per_partition)]
    records = sum(p.records for p in partitions)
    uncompressed = sum(p.uncompressed_bytes for p in partitions)
    compressed = sum(p.compressed_bytes for p in partitions)
    requests = sum(t.requests for _, t in tasks)
    latency_sum = sum(t.request_latency_ms_sum for _, t in tasks)
    started = min(t.started_wall_ms for _, t in tasks)
    write_ms = max(committed_wall_ms - started, 1)
    slowest_id, slowest = max(tasks, key=lambda pt: pt[1].duration_ms)
    section: dict[str, Any] = {
        "records": records,
        "uncompressed_bytes": uncompressed,
        "compressed_bytes": compressed,
        "compression_ratio": _ratio(uncompressed, compressed),
        "batches": sum(p.batches for p in partitions),
        "retries": sum(p.retries for p in partitions),
        "errors": sum(p.errors for p in partitions),
        "requests": requests,
        "produce_latency_ms_avg": _ratio(latency_sum, requests),
        "produce_latency_ms_max": max(t.request_latency_ms_max for _, t in tasks),
        "throttle_time_ms_sum": sum(t.throttle_time_ms_sum for _, t in tasks),
        "throttle_time_ms_max": max(t.throttle_time_ms_max for _, t in tasks),
        "tasks_measured": len(tasks),
        "slowest_task": {"partition_id": slowest_id, "duration_ms": slowest.duration_ms},
        "commit_duration_ms": commit_duration_ms,
        "write_duration_ms": write_ms,
        "records_per_s": round(records * 1000 / write_ms, 1),
        "mb_per_s": round(compressed / _MB * 1000 / write_ms, 3),
    }
    opened = [t.first_record_wall_ms for _, t in tasks if t.first_record_wall_ms is not None]
    if opened:
        open_ms = [committed_wall_ms - first for first in opened]
        section["transactions"] = {
            "count": len(open_ms),
            "first_record_to_commit_ms_max": max(open_ms),
            "first_record_to_commit_ms_avg": round(sum(open_ms) / len(open_ms), 1),
        }
    section["partitions"] = [p.to_json() for p in partitions]
    return section


def metrics_summary(section: dict[str, Any]) -> str:
    """What a person scans a batch's line for: records, MB, rows/s, latency, retries."""
    latency = section["produce_latency_ms_avg"]
    shown = "n/a" if latency is None else f"{latency:.1f}"
    return (
        f"{section['records']} records, {section['compressed_bytes'] / _MB:.2f} MB, "
        f"{section['records_per_s']:.0f} rows/s, latency avg {shown} ms "
        f"max {section['produce_latency_ms_max']:.1f} ms, {section['retries']} retries"
    )
