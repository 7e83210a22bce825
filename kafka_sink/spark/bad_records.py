"""What a task tells the driver about the rows it could not write: counts by reason, first rows.

Role: under ``onRecordError=deadLetter`` or ``skip`` a task writes its good rows and hands each
bad one to its policy (``executor/record_errors.py``); its commit message then carries a
:class:`BadRecordCounts`: how many rows it read, how many were bad, per reason code (the
docs' table of record-level failures), and the first few bad rows (position, topic, reason,
message). The driver adds the tasks' counts up (:func:`merge_counts`) for the batch's bounds
(``deadLetterMaxRecords``, ``deadLetterMaxRatio``), its log line, commit document, report and
Prometheus push. Both rooms load this module.

Invariants:
- Plain frozen dataclasses of ints and strings: picklable by reference and small (at most
  :data:`MAX_SAMPLES` samples per task, each message cut to :data:`MAX_MESSAGE_CHARS`).
- A reason code is one of :data:`REASONS`; messages name the row and the fix, never a secret
  (they are built from the data's shape and the sink's options, never from the producer config).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_MESSAGE_CHARS",
    "MAX_SAMPLES",
    "REASONS",
    "BadRecordCounts",
    "BadRecordSample",
    "merge_counts",
]

#: The record-level failures, by reason code: what a dead letter's ``pykafka.errors.reason``
#: header and the metrics' ``reason`` label say.
REASONS: dict[str, str] = {
    "record_too_large": "larger than max.request.size, buffer.memory or the topic's "
    "max.message.bytes",
    "serialization": "the row's key or value does not bind to its format's schema or cannot be "
    "encoded",
    "null_topic": "null or empty topic in the 'topic' column",
    "unlisted_topic": "the 'topic' column names a topic not in option 'topics' (no schema was "
    "planned for it)",
    "unknown_topic": "the 'topic' column names a topic that does not exist",
    "topic_authorization": "the 'topic' column names a topic the principal may not write",
    "partition_out_of_range": "the 'partition' column names a partition the topic does not have",
    "invalid_timestamp": "a 'timestamp' before 1970-01-01",
    "invalid_header": "a null header or header key",
    "invalid_record": "the broker refused the record (INVALID_RECORD), e.g. a null key for a "
    "compacted topic",
    "corrupt_message": "the broker found the record corrupt (CORRUPT_MESSAGE)",
}

#: Bad rows a task describes in full (the rest are counted).
MAX_SAMPLES = 3
#: A sample's message is cut to this length.
MAX_MESSAGE_CHARS = 500


@dataclass(frozen=True, slots=True)
class BadRecordSample:
    """One bad row: its position in its task's input, its topic (None when that is what is
    wrong), the reason code and the message."""

    partition_id: int
    row: int
    topic: str | None
    reason: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {
            "spark_partition": self.partition_id,
            "row": self.row,
            "topic": self.topic,
            "reason": self.reason,
            "message": self.message,
        }

    def describe(self) -> str:
        return (
            f"{self.reason} (Spark partition {self.partition_id}, row {self.row}): {self.message}"
        )


@dataclass(frozen=True)
class BadRecordCounts:
    """The bad rows of one task (or, merged, of one batch) under one policy."""

    #: ``deadLetter`` or ``skip``.
    action: str
    #: Rows read (good and bad): the ratio's denominator.
    rows_read: int
    #: Bad rows per reason code, sorted by code.
    by_reason: tuple[tuple[str, int], ...] = field(default=())
    #: The first bad rows, in (Spark partition, row) order, at most :data:`MAX_SAMPLES`.
    samples: tuple[BadRecordSample, ...] = field(default=())

    @property
    def total(self) -> int:
        return sum(count for _reason, count in self.by_reason)

    @property
    def ratio(self) -> float:
        return self.total / self.rows_read if self.rows_read else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "rows_read": self.rows_read,
            "bad_records": self.total,
            "by_reason": dict(self.by_reason),
            "first": [s.to_json() for s in self.samples],
        }


def merge_counts(counts: Iterable[BadRecordCounts | None]) -> BadRecordCounts | None:
    """The batch's counts from its tasks' (None when no task carried any)."""
    present = [c for c in counts if c is not None]
    if not present:
        return None
    by_reason: dict[str, int] = {}
    for c in present:
        for reason, n in c.by_reason:
            by_reason[reason] = by_reason.get(reason, 0) + n
    samples = sorted((s for c in present for s in c.samples), key=lambda s: (s.partition_id, s.row))
    return BadRecordCounts(
        action=present[0].action,
        rows_read=sum(c.rows_read for c in present),
        by_reason=tuple(sorted(by_reason.items())),
        samples=tuple(samples[:MAX_SAMPLES]),
    )
