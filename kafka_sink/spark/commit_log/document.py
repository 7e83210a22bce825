"""Commit messages (executor -> driver) and the driver's commit record.

Role: a task's ``write()`` returns a :class:`PyKafkaCommitMessage` saying what the broker
acknowledged for it, per topic-partition (first offset, last offset, record count), plus which task
attempt wrote it. On the driver, ``commit()`` / ``abort()`` gather those messages into per
topic-partition ranges (:func:`gather`), write one JSON document per commit (or abort) into the
commit-log directory, and log a one-line summary.

Invariants:
- Messages are plain frozen dataclasses of ints and strings: picklable by reference (this module
  is importable wherever the package is installed) and small.
- A gathered range is [min first offset, max last offset] over every message for that partition,
  and its ``record_count`` is the sum of acknowledged records. ``last - first + 1`` exceeds the
  count when other writers (or a retried attempt) wrote into the same partition meanwhile.
- Every counted record lies in its range except the ``unknown_offset_count`` ones (summed like
  the counts), which Kafka acknowledged without an offset: all of them with ``acks=0`` (first/last
  are then null in the file), and the records of a batch answered DUPLICATE_SEQUENCE_NUMBER.
- Files are written whole (locally a temporary file, then rename; in an object store one
  object; see ``commit_store``); a file for a re-run streaming batch keeps the earlier one beside
  it as ``<batchId>.json.replaced-<ms>`` instead of overwriting it.
- Only this module writes commit files; it never touches Kafka.
- ``warn_once`` logs a given warning once per driver: Spark plans and commits a streaming query
  in two long-lived Python workers, so a flag in one process would not do; the first worker
  creates a marker file in the driver's Spark local directory (``SPARK_LOCAL_DIRS``, removed
  with the SparkContext), and the others see it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark.commit_log.store import open_store

__all__ = [
    "COMMIT_FORMAT_VERSION",
    "PartitionRange",
    "PyKafkaCommitMessage",
    "abort_document",
    "commit_document",
    "ensure_logging",
    "gather",
    "log_line",
    "logger",
    "merge_range",
    "warn_once",
    "write_document",
]

COMMIT_FORMAT_VERSION = 1

logger = logging.getLogger("kafka_sink.spark")

# Summaries list at most this many partitions; the file always has all of them.
_SUMMARY_PARTITIONS = 12


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """What the broker acknowledged in one topic-partition (offsets inclusive; -1 = unknown).

    ``unknown_offset_count`` of the ``record_count`` records were acknowledged without an offset
    and may lie outside ``[first_offset, last_offset]``; every other one lies inside.
    """

    topic: str
    partition: int
    first_offset: int
    last_offset: int
    record_count: int
    unknown_offset_count: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "first_offset": self.first_offset if self.first_offset >= 0 else None,
            "last_offset": self.last_offset if self.last_offset >= 0 else None,
            "record_count": self.record_count,
            "unknown_offset_count": self.unknown_offset_count,
        }


@dataclass(frozen=True)
class PyKafkaCommitMessage(WriterCommitMessage):
    """One successful task's acknowledged writes, sent from ``write()`` to the driver."""

    partition_id: int
    attempt_number: int
    task_attempt_id: int
    batch_id: int | None
    ranges: tuple[PartitionRange, ...] = field(default=())
    #: Exactly-once: the task's prepared (open, not committed) transaction; None when the task
    #: wrote nothing, and always at-least-once.
    transaction: PreparedTransaction | None = None

    @property
    def record_count(self) -> int:
        return sum(r.record_count for r in self.ranges)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partition_id": self.partition_id,
            "attempt_number": self.attempt_number,
            "task_attempt_id": self.task_attempt_id,
            "record_count": self.record_count,
        }
        if self.transaction is not None:
            out["transactional_id"] = self.transaction.transactional_id
        return out


def merge_range(a: PartitionRange, b: PartitionRange) -> PartitionRange:
    """The smallest range covering both, counts added (same topic-partition)."""
    firsts = [x for x in (a.first_offset, b.first_offset) if x >= 0]
    return PartitionRange(
        a.topic,
        a.partition,
        min(firsts) if firsts else -1,
        max(a.last_offset, b.last_offset),
        a.record_count + b.record_count,
        a.unknown_offset_count + b.unknown_offset_count,
    )


def gather(ranges: Iterable[PartitionRange]) -> list[PartitionRange]:
    """Merge ranges per topic-partition, sorted by (topic, partition)."""
    merged: dict[tuple[str, int], PartitionRange] = {}
    for r in ranges:
        key = (r.topic, r.partition)
        prev = merged.get(key)
        merged[key] = r if prev is None else merge_range(prev, r)
    return [merged[k] for k in sorted(merged)]


def _messages(messages: Sequence[WriterCommitMessage | None]) -> list[PyKafkaCommitMessage]:
    return [m for m in messages if isinstance(m, PyKafkaCommitMessage)]


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _header(
    kind: str,
    *,
    mode: str,
    batch_id: int | None,
    write_id: str | None,
    query_name: str | None,
    now_ms: int,
    guarantee: str,
) -> dict[str, Any]:
    return {
        "format": "pykafka-commit",
        "version": COMMIT_FORMAT_VERSION,
        "kind": kind,
        "mode": mode,
        "delivery_guarantee": guarantee,
        "batch_id": batch_id,
        "write_id": write_id,
        "query_name": query_name,
        "committed_at": _utc(now_ms),
        "committed_at_ms": now_ms,
    }


def _document(
    kind: str,
    messages: Sequence[WriterCommitMessage | None],
    *,
    mode: str,
    batch_id: int | None,
    write_id: str | None,
    query_name: str | None,
    now_ms: int,
    guarantee: str,
) -> tuple[list[PyKafkaCommitMessage], list[PartitionRange], dict[str, Any]]:
    """What commit and abort documents share: the tasks' messages, merged ranges, a header."""
    ours = _messages(messages)
    ranges = gather(r for m in ours for r in m.ranges)
    doc = _header(
        kind,
        mode=mode,
        batch_id=batch_id,
        write_id=write_id,
        query_name=query_name,
        now_ms=now_ms,
        guarantee=guarantee,
    )
    return ours, ranges, doc


def commit_document(
    messages: Sequence[WriterCommitMessage | None],
    *,
    mode: str,
    batch_id: int | None = None,
    write_id: str | None = None,
    query_name: str | None = None,
    now_ms: int,
    guarantee: str = "at-least-once",
) -> dict[str, Any]:
    """The JSON document for a successful commit."""
    ours, ranges, doc = _document(
        "commit",
        messages,
        mode=mode,
        batch_id=batch_id,
        write_id=write_id,
        query_name=query_name,
        now_ms=now_ms,
        guarantee=guarantee,
    )
    doc.update(
        {
            "record_count": sum(r.record_count for r in ranges),
            "task_count": len(messages),
            "topics": sorted({r.topic for r in ranges}),
            "offsets": [r.to_json() for r in ranges],
            "tasks": [m.to_json() for m in ours],
        }
    )
    return doc


def abort_document(
    messages: Sequence[WriterCommitMessage | None],
    *,
    mode: str,
    batch_id: int | None = None,
    write_id: str | None = None,
    query_name: str | None = None,
    now_ms: int,
    guarantee: str = "at-least-once",
) -> dict[str, Any]:
    """The JSON document for an abort: the failed tasks and what the others had acknowledged."""
    ours, ranges, doc = _document(
        "abort",
        messages,
        mode=mode,
        batch_id=batch_id,
        write_id=write_id,
        query_name=query_name,
        now_ms=now_ms,
        guarantee=guarantee,
    )
    doc.update(
        {
            "failed_tasks": [i for i, m in enumerate(messages) if m is None],
            "task_count": len(messages),
            "acknowledged_record_count": sum(r.record_count for r in ranges),
            "acknowledged_offsets": [r.to_json() for r in ranges],
            "tasks": [m.to_json() for m in ours],
        }
    )
    return doc


def write_document(directory: str, name: str, document: dict[str, Any]) -> str:
    """Write ``document`` as ``<directory>/<name>`` whole; returns where it went.

    ``directory`` is a local path or a store URI (``commit_store.open_store``). An existing
    file of that name (a streaming batch run again after a restart) is kept beside the new one
    as ``<name>.replaced-<ms>``: its records are in Kafka too.
    """
    data = (json.dumps(document, indent=2, sort_keys=False) + "\n").encode("utf-8")
    return open_store(directory).write(name, data)


def _ranges_text(ranges: Sequence[dict[str, Any]]) -> str:
    parts = []
    for r in ranges[:_SUMMARY_PARTITIONS]:
        first, last = r["first_offset"], r["last_offset"]
        span = f"{first}..{last}" if first is not None else "?"
        unknown = r.get("unknown_offset_count", 0)
        # Records without an offset are flagged where some have one (with acks=0 none do).
        extra = f", {unknown} without offset" if unknown and first is not None else ""
        parts.append(f"{r['topic']}-{r['partition']}:{span}({r['record_count']}{extra})")
    if len(ranges) > _SUMMARY_PARTITIONS:
        parts.append(f"+{len(ranges) - _SUMMARY_PARTITIONS} more")
    return " ".join(parts) or "none"


def log_line(document: dict[str, Any], path: str | None) -> str:
    """The one-line summary of a commit or abort document."""
    what = "batch" if document["batch_id"] is None else f"micro-batch {document['batch_id']}"
    where = f"; log {path}" if path else ""
    how = f"{document['mode']}, {document.get('delivery_guarantee', 'at-least-once')}"
    if document["kind"] == "commit":
        offsets = document["offsets"]
        return (
            f"pykafka commit ({what}, {how}): {document['record_count']} records "
            f"to {len(offsets)} partitions from {document['task_count']} tasks; offsets "
            f"{_ranges_text(offsets)}{where}"
        )
    acked = document["acknowledged_offsets"]
    return (
        f"pykafka abort ({what}, {how}): tasks {document['failed_tasks']} of "
        f"{document['task_count']} failed; the others had {document['acknowledged_record_count']}"
        f" records acknowledged (they stay in Kafka): {_ranges_text(acked)}{where}"
    )


def ensure_logging() -> None:
    """Send our INFO lines to stderr when nothing else is configured.

    Driver-side commit runs in a Python worker that Spark starts with no logging setup, where
    ``logging``'s last-resort handler would drop INFO. Its stderr ends up in the driver's log.
    """
    if logger.hasHandlers():
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


_WARNED: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Log ``message`` at WARNING unless a warning with ``key`` was logged on this driver."""
    if key in _WARNED:
        return
    _WARNED.add(key)
    local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    if local_dirs and os.path.isdir(local_dirs):
        marker = os.path.join(
            local_dirs, "pykafka-warned-" + hashlib.sha256(key.encode()).hexdigest()[:16]
        )
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return  # another Python worker of this driver has logged it
        except OSError:
            pass  # cannot mark it: warning more than once beats not warning
    ensure_logging()
    logger.warning(message)
