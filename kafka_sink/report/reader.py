"""The commit documents of a commit log, oldest first, and the files that could not be read.

Role: :func:`load_commits` opens the location given to ``report`` through the commit log's own
stores (``spark/commit_log/store.py``: local, S3, GCS, Azure, HDFS) and returns a
:class:`CommitLog`: its commit documents sorted by commit time, and one :class:`Skipped` per
file it left out because it could not use it.

Invariants:
- A location holding a ``pykafka-commits`` directory (a streaming checkpoint) is read there;
  any other location is read as the commit log itself.
- Aborts (``*.aborted.json``, or a document of kind ``abort``), the earlier files a re-run
  batch replaced (``*.replaced-<ms>``) and files not named ``*.json`` are left out silently: they
  are the log's own and not commits.
- Every other ``*.json`` file is either a returned document or a :class:`Skipped` with its
  reason: it cannot be read (the store's error), is not JSON, is not a pykafka commit document,
  is of a version this reader does not know (:data:`READ_VERSIONS`; the writer's
  ``COMMIT_FORMAT_VERSION``), or has a field the table reads with the wrong type or out of
  range (a ``committed_at_ms`` beyond what a date can hold, a count that is not a
  non-negative integer, a ``bad_records`` section whose counts are not). One bad file never
  stops the others.
- A returned document has every field the table reads, of the right type: ``table.py`` needs
  no checks of its own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, TypeGuard

from kafka_sink.sink_errors import CommitStoreError
from kafka_sink.spark.commit_log.store import join, open_store
from kafka_sink.spark.options import COMMIT_LOG_DIRNAME

__all__ = ["MAX_COMMITTED_AT_MS", "READ_VERSIONS", "CommitLog", "Skipped", "load_commits"]

#: The commit document versions this reader understands (the ``version`` field, which the sink
#: writes as ``commit_log.document.COMMIT_FORMAT_VERSION``; not imported: it loads pyspark).
READ_VERSIONS: tuple[int, ...] = (1,)
#: 9999-12-31T23:59:59.999Z: the last instant a date (and ``time.gmtime``) can show.
MAX_COMMITTED_AT_MS = 253_402_300_799_999
# Counts and durations are Kafka's and the JVM's longs at most.
_MAX_COUNT = 2**63 - 1
_METRIC_COUNTS = (
    "records",
    "compressed_bytes",
    "uncompressed_bytes",
    "requests",
    "retries",
    "errors",
    "write_duration_ms",
    "commit_duration_ms",
)


@dataclass(frozen=True)
class Skipped:
    """A ``*.json`` file of the log that the report left out, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class CommitLog:
    """The commit log read: where, its commit documents by commit time, the files skipped."""

    location: str
    documents: list[dict[str, Any]]
    skipped: list[Skipped]


def _commit_names(names: list[str]) -> list[str]:
    return [n for n in names if n.endswith(".json") and not n.endswith(".aborted.json")]


def load_commits(location: str) -> CommitLog:
    """The commit log at ``location`` (see the module docstring); a store that cannot be listed
    raises :class:`~kafka_sink.spark.commit_log.store.CommitStoreError`."""
    nested = join(location, COMMIT_LOG_DIRNAME)
    store = open_store(nested)
    names = _commit_names(store.names())
    if not names:
        store = open_store(location)
        names = _commit_names(store.names())
    documents = []
    skipped = []
    for name in names:
        try:
            data = store.read(name)
        except OSError as exc:
            # The stores' own errors are one line, credentials masked; any other says its kind.
            why = str(exc) if isinstance(exc, CommitStoreError) else type(exc).__name__
            skipped.append(Skipped(name, f"cannot be read: {why}"))
            continue
        if data is None:
            continue  # removed since the listing
        document, reason = _parse(data)
        if reason is not None:
            skipped.append(Skipped(name, reason))
        elif document is not None:
            documents.append(document)
    documents.sort(key=lambda d: (d["committed_at_ms"], d.get("batch_id") or 0))
    return CommitLog(store.location, documents, skipped)


def _parse(data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(the commit document, None), (None, None) for an abort, or (None, why it is skipped)."""
    try:
        document = json.loads(data)
    except RecursionError:
        return None, "not JSON: nested too deeply"
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(document, dict) or document.get("format") != "pykafka-commit":
        return None, 'not a pykafka commit document (no "format": "pykafka-commit")'
    version = document.get("version")
    if not _is_int(version) or version not in READ_VERSIONS:
        return None, (
            f"commit document version {_show(version)}; this report reads version "
            + ", ".join(map(str, READ_VERSIONS))
            + ". Fix: run the report of the pykafka-sink release that wrote it"
        )
    kind = document.get("kind")
    if kind == "abort":
        return None, None
    if kind != "commit":
        return None, f"unknown document kind {_show(kind)}"
    reason = _check(document)
    return (None, reason) if reason is not None else (document, None)


def _check(d: dict[str, Any]) -> str | None:
    """Why the table cannot use ``d``, or None."""
    at = d.get("committed_at_ms")
    if not _is_int(at) or not 0 <= at <= MAX_COMMITTED_AT_MS:
        return (
            f"committed_at_ms {_show(at)} is not a time in milliseconds since 1970 up to the "
            "year 9999"
        )
    batch_id = d.get("batch_id")
    if batch_id is not None and not _count(batch_id):
        return f"batch_id {_show(batch_id)} is not a non-negative integer"
    write_id = d.get("write_id")
    if write_id is not None and not isinstance(write_id, str):
        return f"write_id {_show(write_id)} is not a string"
    if not _count(d.get("record_count", 0)):
        return f"record_count {_show(d.get('record_count'))} is not a non-negative integer"
    bad = _check_bad_records(d.get("bad_records"))
    if bad is not None:
        return bad
    metrics = d.get("metrics")
    if not metrics:
        return None
    if not isinstance(metrics, dict):
        return "metrics is not an object"
    for key in _METRIC_COUNTS:
        if not _number(metrics.get(key)):
            return f"metrics.{key} {_show(metrics.get(key))} is not a non-negative number"
    average = metrics.get("produce_latency_ms_avg")
    if average is not None and not _number(average):
        return f"metrics.produce_latency_ms_avg {_show(average)} is not a non-negative number"
    if not _number(metrics.get("produce_latency_ms_max")):
        return (
            f"metrics.produce_latency_ms_max {_show(metrics.get('produce_latency_ms_max'))} is "
            "not a non-negative number"
        )
    return None


def _check_bad_records(bad: Any) -> str | None:
    """Why the ``bad_records`` section (``onRecordError`` deadLetter / skip) cannot be used."""
    if bad is None:
        return None
    if not isinstance(bad, dict):
        return "bad_records is not an object"
    if not isinstance(bad.get("action"), str):
        return f"bad_records.action {_show(bad.get('action'))} is not a string"
    for key in ("bad_records", "rows_read"):
        if not _count(bad.get(key)):
            return f"bad_records.{key} {_show(bad.get(key))} is not a non-negative integer"
    by_reason = bad.get("by_reason")
    if not isinstance(by_reason, dict) or not all(_count(n) for n in by_reason.values()):
        return "bad_records.by_reason is not an object of non-negative integer counts"
    return None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any) -> bool:
    return _is_int(value) and 0 <= value <= _MAX_COUNT


def _number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value) and 0 <= value <= _MAX_COUNT
    return _count(value)


def _show(value: Any) -> str:
    """A value as the skip line quotes it: short (a document may hold anything)."""
    text = json.dumps(value) if not isinstance(value, dict | list) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."
