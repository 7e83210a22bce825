"""What a task tells the driver: its commit message and the ranges the broker acknowledged.

Role: a task's ``write()`` (``executor/task.py``) returns a :class:`PyKafkaCommitMessage`
saying what the broker acknowledged for it, per topic-partition (:class:`PartitionRange`), which
task attempt wrote it and, exactly-once, the transaction it prepared and the fingerprint of its
rows. Both rooms load this module: the executor builds messages, the driver gathers them
(``driver/commit_log/document.py``).

Invariants:
- Messages are plain frozen dataclasses of ints and strings: picklable by reference (this module
  is importable wherever the package is installed) and small.
- Every counted record lies in its range except the ``unknown_offset_count`` ones, which Kafka
  acknowledged without an offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark.bad_records import BadRecordCounts
from kafka_sink.spark.fingerprint import Fingerprint
from kafka_sink.spark.metrics import TaskMetrics

__all__ = ["PartitionRange", "PyKafkaCommitMessage", "UnfinishedWrites", "merge_range"]


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
class UnfinishedWrites:
    """What the tasks of an aborted batch that did not finish had written, as far as the driver
    could learn it (exactly-once: from their open transactions, ``eos/aborted.py``).

    ``ranges`` are per topic-partition, ``last_offset`` being the partition's last offset when
    the driver looked (the transaction's records lie in ``[first_offset, last_offset]``, other
    writers' may lie between them); ``counted`` is True only when every unfinished task's
    transaction was found and counted; ``note`` says how the count was learned, or why not.
    """

    ranges: tuple[PartitionRange, ...]
    counted: bool
    note: str


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
    #: Exactly-once: the fingerprint of the task's rows (written, or given and not written).
    fingerprint: Fingerprint | None = None
    #: Exactly-once: the task wrote nothing, as Kafka already committed its partition of the
    #: batch in an earlier run; ``fingerprint`` is that of the rows it was given.
    skipped: bool = False
    #: The level Spark's conf ``spark.pykafka.logLevel`` gave the task: the driver's
    #: ``commit()`` cannot read Spark's conf, so it logs at the level its tasks saw.
    conf_log_level: int | None = None
    #: What the task's producer did for it (``spark/metrics``); None when not measured.
    metrics: TaskMetrics | None = None
    #: ``onRecordError`` deadLetter / skip: the rows the task read and the bad ones among them
    #: (``bad_records.py``); None under ``fail`` and when the task wrote nothing.
    bad_records: BadRecordCounts | None = None

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
        if self.fingerprint is not None:
            out["fingerprint"] = self.fingerprint.to_text()
        if self.skipped:
            out["skipped"] = True
        if self.metrics is not None:
            out["duration_ms"] = self.metrics.duration_ms
        if self.bad_records is not None and self.bad_records.total:
            out["bad_records"] = self.bad_records.total
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
