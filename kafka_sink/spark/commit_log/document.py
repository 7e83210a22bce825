"""The driver's commit record: commit messages gathered into one document per batch.

Role: on the driver, ``commit()`` / ``abort()`` (``spark/writer.py``) gather the tasks'
:class:`~kafka_sink.spark.commit_message.PyKafkaCommitMessage` s into per topic-partition ranges
(:func:`gather`), build one JSON document per commit or abort (:func:`build_document`), store it
in the commit log (:func:`write_document`, through ``commit_log/store.py``) and log its short
one-line summary (:func:`log_line`: counts and the file, at INFO) and its offset ranges
(:func:`offsets_line`, at DEBUG; the file has them all). The messages themselves, which the
executor builds, live in ``spark/commit_message.py``.

Invariants:
- Messages are plain frozen dataclasses of ints and strings: picklable by reference (this module
  is importable wherever the package is installed) and small.
- A gathered range is [min first offset, max last offset] over every message for that partition,
  and its ``record_count`` is the sum of acknowledged records. ``last - first + 1`` exceeds the
  count when other writers (or a retried attempt) wrote into the same partition meanwhile.
- Every counted record lies in its range except the ``unknown_offset_count`` ones (summed like
  the counts), which Kafka acknowledged without an offset: all of them with ``acks=0`` (first/last
  are then null in the file), and the records of a batch answered DUPLICATE_SEQUENCE_NUMBER.
- Commit and abort documents share their header (format, version, kind, mode, guarantee, ids,
  time) and their task list; they differ only in how they name the ranges (``offsets`` of a
  commit, ``acknowledged_offsets`` of an abort, which also lists its ``failed_tasks``).
- An abort's ``acknowledged_record_count`` counts the tasks that reported plus what the driver
  learned the unfinished ones had written (``unfinished_tasks_record_count``, per partition in
  ``aborted_offsets``; how it was learned, or why it could not be, in
  ``unfinished_tasks_records``). A task killed by a stop or failed returns no message, whatever
  the broker appended for it, so with any task in ``failed_tasks`` the count is a lower bound
  (``acknowledged_record_count_is_lower_bound``) unless every unfinished task's writes were
  counted (exactly-once: from their open transactions, ``eos/aborted.py``); at-least-once it
  always is.
- An abort is logged at INFO like a commit: the driver cannot tell a stopped query's killed
  tasks from failed ones (Spark passes ``abort()`` only the messages), and a failure is raised
  by Spark itself; the line says what was rolled back.
- Files are written whole (locally a temporary file, then rename; in an object store one
  object; see ``store``); a file for a re-run streaming batch keeps the earlier one beside it as
  ``<batchId>.json.replaced-<ms>`` instead of overwriting it.
- A commit document of a batch job whose ``idempotencyKey`` an earlier run completed carries
  ``already_completed`` (who completed it and when) and its line says this run wrote nothing.
- A commit document whose tasks measured their producers (``spark/metrics``) carries the batch's
  ``metrics`` section, and its line the few numbers of :func:`metrics_summary`.
- A document whose tasks carried bad-row counts (``onRecordError`` deadLetter or skip) has the
  batch's ``bad_records`` (``bad_records.BadRecordCounts.to_json``: action, rows read, total, per
  reason, the first rows), and a commit's line, when there were any, says how many, per reason,
  and the first one (:func:`bad_records_summary`).
- Only this module writes commit files; it never touches Kafka.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pyspark.sql.datasource import WriterCommitMessage

from kafka_sink.spark.bad_records import merge_counts
from kafka_sink.spark.commit_log.store import open_store
from kafka_sink.spark.commit_message import (
    PartitionRange,
    PyKafkaCommitMessage,
    UnfinishedWrites,
    merge_range,
)
from kafka_sink.spark.metrics import metrics_summary

__all__ = [
    "COMMIT_FORMAT_VERSION",
    "PartitionRange",
    "PyKafkaCommitMessage",
    "UnfinishedWrites",
    "bad_records_summary",
    "build_document",
    "gather",
    "log_line",
    "merge_range",
    "offsets_line",
    "write_document",
]

COMMIT_FORMAT_VERSION = 1

# Summaries list at most this many partitions; the file always has all of them.
_SUMMARY_PARTITIONS = 12


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


def build_document(
    kind: Literal["commit", "abort"],
    messages: Sequence[WriterCommitMessage | None],
    *,
    mode: str,
    batch_id: int | None = None,
    write_id: str | None = None,
    query_name: str | None = None,
    now_ms: int,
    guarantee: str = "at-least-once",
    unfinished: UnfinishedWrites | None = None,
) -> dict[str, Any]:
    """The JSON document of a commit, or of an abort (the failed tasks, what the others had
    acknowledged and, where the driver learned it, what the ``unfinished`` ones had written);
    ``messages`` holds None for each task that failed."""
    ours = _messages(messages)
    ranges = gather(r for m in ours for r in m.ranges)
    doc: dict[str, Any] = {
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
    records = sum(r.record_count for r in ranges)
    offsets = [r.to_json() for r in ranges]
    if kind == "commit":
        doc["record_count"] = records
        doc["task_count"] = len(messages)
        doc["topics"] = sorted({r.topic for r in ranges})
        doc["offsets"] = offsets
    else:
        failed = [i for i, m in enumerate(messages) if m is None]
        aborted = gather(unfinished.ranges) if unfinished is not None else []
        written = sum(r.record_count for r in aborted)
        doc["failed_tasks"] = failed
        doc["task_count"] = len(messages)
        doc["acknowledged_record_count"] = records + written
        # A task that did not finish (killed by a stop, or failed) reports nothing to the driver,
        # though the broker may have appended some of its records: the count is a floor unless
        # the driver counted them itself.
        doc["acknowledged_record_count_is_lower_bound"] = bool(failed) and not (
            unfinished is not None and unfinished.counted
        )
        doc["acknowledged_offsets"] = offsets
        if failed and unfinished is None:
            doc["unfinished_tasks_records"] = _unknown_note(guarantee)
        elif failed and unfinished is not None:
            # What was found, even when not all of it: then the count above is still a floor.
            doc["unfinished_tasks_records"] = unfinished.note
            doc["unfinished_tasks_record_count"] = written
            doc["aborted_offsets"] = [r.to_json() for r in aborted]
    bad = merge_counts(m.bad_records for m in ours)
    if bad is not None:
        doc["bad_records"] = bad.to_json()
    doc["tasks"] = [m.to_json() for m in ours]
    return doc


# Why the records of the tasks that did not finish are not counted, where nothing was learned.
_UNKNOWN_NOTES = {
    "at-least-once": (
        "not known: a task that did not finish sends nothing to the driver, and at-least-once "
        "its records are written as they go; those it wrote stay in Kafka and are visible"
    ),
    "exactly-once": (
        "not known: the driver could not learn what their transactions wrote; their "
        "transactions are aborted, so read_committed readers see none of it"
    ),
}


def _unknown_note(guarantee: str) -> str:
    return _UNKNOWN_NOTES.get(guarantee, _UNKNOWN_NOTES["at-least-once"])


def write_document(directory: str, name: str, document: dict[str, Any]) -> str:
    """Write ``document`` as ``<directory>/<name>`` whole; returns where it went.

    ``directory`` is a local path or a store URI (``store.open_store``). An existing
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


def _what(document: dict[str, Any]) -> str:
    return "batch" if document["batch_id"] is None else f"micro-batch {document['batch_id']}"


def offsets_line(document: dict[str, Any]) -> str:
    """The offset ranges of a commit or abort document, for DEBUG (the file has them all)."""
    ranges = document["offsets" if document["kind"] == "commit" else "acknowledged_offsets"]
    return f"pykafka {document['kind']} ({_what(document)}): offsets {_ranges_text(ranges)}"


_ACTIONS = {"deadLetter": "dead-lettered", "skip": "skipped"}


def bad_records_summary(section: dict[str, Any] | None) -> str:
    """The bad rows of a document's ``bad_records`` section in a few words ("" when none):
    ``3 bad record(s) dead-lettered (record_too_large 2, serialization 1); first: ...``."""
    if not section or not section.get("bad_records"):
        return ""
    action = _ACTIONS.get(section.get("action", ""), str(section.get("action")))
    reasons = ", ".join(f"{r} {n}" for r, n in section.get("by_reason", {}).items())
    text = f"{section['bad_records']} bad record(s) {action} ({reasons})"
    first = section.get("first") or []
    if first:
        s = first[0]
        text += (
            f"; first: {s['reason']} (Spark partition {s['spark_partition']}, row {s['row']}): "
            f"{s['message']}"
        )
    return text


def log_line(document: dict[str, Any], path: str | None) -> str:
    """The short one-line summary of a commit or abort document (no offset ranges)."""
    what = _what(document)
    where = f"; log {path}" if path else ""
    how = f"{document['mode']}, {document.get('delivery_guarantee', 'at-least-once')}"
    if document["kind"] == "commit" and "already_completed" in document:
        return (
            f"pykafka commit ({what}, {how}): {document['already_completed']}; this run wrote "
            f"nothing{where}"
        )
    if document["kind"] == "commit":
        offsets = document["offsets"]
        metrics = document.get("metrics")
        measured = f"; {metrics_summary(metrics)}" if metrics else ""
        bad = bad_records_summary(document.get("bad_records"))
        bad = f"; {bad}" if bad else ""
        return (
            f"pykafka commit ({what}, {how}): {document['record_count']} records "
            f"to {len(offsets)} partitions from {document['task_count']} tasks{measured}{bad}"
            f"{where}"
        )
    acked = document["acknowledged_offsets"]
    fate = (
        "its open transactions are aborted"
        if document.get("delivery_guarantee") == "exactly-once"
        else "the records written stay in Kafka"
    )
    unfinished = document.get("aborted_offsets")
    wrote = (
        f", the unfinished ones {document['unfinished_tasks_record_count']} records in "
        f"{len(unfinished)} partitions"
        if unfinished and not document["acknowledged_record_count_is_lower_bound"]
        else ""
    )
    others = document["acknowledged_record_count"] - document.get(
        "unfinished_tasks_record_count", 0
    )
    return (
        f"pykafka abort ({what}, {how}): rolled back; tasks {document['failed_tasks']} of "
        f"{document['task_count']} did not finish (the query was stopped, or a task failed and "
        f"Spark reports why); the others had {others} records acknowledged in {len(acked)} "
        f"partitions{wrote}; {fate}{where}"
    )
