"""Every error the pykafka sink raises on purpose: the Spark data source, its exactly-once
commit and stores, and the registry formats. docs/errors.md lists them: when each is raised,
what it means and what to do.

Role: one hierarchy under :class:`SinkError`, itself a :class:`~kafka_sink.errors.KafkaError`,
so ``except SinkError`` catches whatever the sink refuses or fails with, and ``except
KafkaError`` whatever the package raises on purpose. Option and schema errors are raised on the
driver, in ``writer()`` / ``streamWriter()``, before any task runs; data errors are raised inside
a task and fail it; a mode error when a continuous query asks for its writer; the exactly-once
errors by the driver's planning, commit or abort; registry errors by the driver's registry
calls; store errors by the commit log's store.

Invariants:
- Every class is defined here, whatever module raises it: the formats (a layer below the Spark
  side) import this leaf, and a test walks ``kafka_sink.spark`` and ``kafka_sink.formats`` to
  keep it so.
- An error keeps the builtin or client base that callers catch it by: options and schemas are
  :class:`~kafka_sink.errors.ConfigError` (so ``ValueError``), data and mode errors ``ValueError``,
  the commit log's store errors ``OSError``, the registry's ``RuntimeError``, a delivery timeout
  :class:`~kafka_sink.errors.KafkaTimeoutError`. The exactly-once errors have no builtin base.
- Every message names what is wrong (the option or column), what was found and how to fix it,
  on one line: it is the last line of the traceback Spark shows.
- Messages never quote option values that could be secrets; they name keys only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafka_sink.errors import ConfigError, KafkaError, KafkaTimeoutError

__all__ = [
    "BadRecord",
    "BadRecordError",
    "BadRecordsLimitError",
    "BadRowsError",
    "ColumnSerializationError",
    "CommitStoreError",
    "CommitStoreUnavailableError",
    "DoneRecordReplacedError",
    "IncompatibleSchemaError",
    "IntentStoreError",
    "SchemaNotFoundError",
    "SchemaRegistryAnswerError",
    "SchemaRegistryAuthError",
    "SchemaRegistryError",
    "SchemaRegistryUnavailableError",
    "SinkCommitIncompleteError",
    "SinkCommitOutcomeUnknownError",
    "SinkDataError",
    "SinkDeliveryTimeoutError",
    "SinkError",
    "SinkFencedError",
    "SinkIdempotencyError",
    "SinkIntentUnknownError",
    "SinkModeError",
    "SinkOptionError",
    "SinkPartlyCommittedError",
    "SinkSchemaError",
    "SinkTransactionLostError",
    "SinkWorkerError",
    "SlotsBusyError",
]


class SinkError(KafkaError):
    """Base class of the sink's own errors (the data source, its commit, the formats)."""


# -- the write's input: raised on the driver before any task runs, or by a task --------------


class SinkOptionError(SinkError, ConfigError):
    """An option given to ``format("pykafka")`` is unknown, refused or invalid."""


class SinkSchemaError(SinkError, ConfigError):
    """The DataFrame does not match the Kafka sink's input contract (column names and types),
    or an explicit or registered schema cannot serve the column."""


class SinkWorkerError(SinkError):
    """The Python Spark starts for its workers cannot import the sink (``workers.register``)."""


class SinkModeError(SinkError, ValueError):
    """The streaming query runs in a mode in which PySpark hands a Python sink no rows."""


class SinkDataError(SinkError, ValueError):
    """A row cannot be written (null topic, partition out of range, null header key)."""


@dataclass(frozen=True, slots=True)
class BadRecord:
    """One row a task cannot write."""

    #: The row's index in the task's input (0 is the task's first row).
    row: int
    #: The topic the row was bound for; None when the topic itself is what is wrong.
    topic: str | None
    #: Why, naming the row and the fix: the message of the task's failure.
    reason: str
    #: The reason code (``spark/bad_records.py``'s ``REASONS``).
    code: str = "invalid_record"
    #: Where it failed, in Kafka Connect's stage names: ``KEY_CONVERTER``, ``VALUE_CONVERTER``,
    #: ``HEADER_CONVERTER`` or ``KAFKA_PRODUCE``.
    stage: str = "KAFKA_PRODUCE"
    #: The qualified name of the exception class that says what was wrong.
    error_class: str = "kafka_sink.sink_errors.BadRecordError"


class BadRecordError(SinkDataError):
    """A bad row, as a task detects it: a SinkDataError (its message is ``record.reason``) that
    carries the :class:`BadRecord` for the write loop to hand to its record-error policy
    (``spark/executor/record_errors.py``). The default policy fails the task with a plain
    :class:`SinkDataError` of the same message."""

    def __init__(
        self,
        row: int,
        topic: str | None,
        reason: str,
        *,
        code: str = "invalid_record",
        stage: str = "KAFKA_PRODUCE",
        error_class: str = "kafka_sink.sink_errors.BadRecordError",
    ) -> None:
        super().__init__(reason)
        self.record = BadRecord(row, topic, reason, code, stage, error_class)


class BadRowsError(SinkDataError):
    """Several rows a task cannot write, found together (the rows a topic refuses before they
    are sent, the rows naming a topic that cannot be written); each is a :class:`BadRecord` for
    the write loop's record-error policy. Never raised out of a task."""

    def __init__(self, records: list[BadRecord]) -> None:
        super().__init__(f"{len(records)} bad row(s)")
        self.records = records


class ColumnSerializationError(SinkDataError):
    """A format could not serialize a row of the ``key`` or ``value`` column (it does not bind to
    the schema), or a row's topic has no planned schema (``code`` ``unlisted_topic``).

    ``column`` is ``key`` or ``value``. A task whose record error policy takes bad rows out
    narrows such a failure down to its rows (``spark/executor/task.py``).
    """

    def __init__(self, message: str, *, column: str, code: str = "serialization") -> None:
        super().__init__(message)
        self.column = column
        self.code = code


class BadRecordsLimitError(SinkDataError):
    """A batch had more bad rows than ``deadLetterMaxRecords`` or ``deadLetterMaxRatio`` allow
    (``onRecordError`` deadLetter or skip): the driver's commit fails it before anything of it is
    committed."""


class SinkDeliveryTimeoutError(SinkError, KafkaTimeoutError):
    """A task's records were not all acknowledged in time; the message lists what was pending.

    The data is fine, Kafka (or the producer) is not, so the task's producer is closed and
    replaced; a :class:`~kafka_sink.errors.KafkaTimeoutError` (retriable) as well.
    """


# -- the commit log's store (spark/commit_log/store.py) ------------------------------------------


class CommitStoreError(SinkError, OSError):
    """The location cannot be written: the message says why (credentials masked)."""


class CommitStoreUnavailableError(CommitStoreError):
    """No client for this location here: unsupported scheme, or its library is missing."""


# -- exactly-once on the driver (spark/driver/eos/) ----------------------------------------------


class SinkTransactionLostError(SinkError):
    """A batch's transaction was aborted by Kafka before the driver could commit it."""


class SinkPartlyCommittedError(SinkError):
    """A partly committed batch's re-run did not hand its committed partitions the same rows,
    so it cannot be completed exactly once; the message names the batch and the fix."""


class SinkCommitIncompleteError(SinkError):
    """A batch's intent is recorded but Kafka could not be told to commit all of it in time.

    Nothing is lost: the intent stays, and the next commit, abort or planning finishes it."""


class SinkCommitOutcomeUnknownError(SinkCommitIncompleteError):
    """A batch's intent is recorded, the commit of some of its transactions was refused (their
    ids moved on), and whether each had been applied cannot be read from its partitions.

    Nothing is recorded lost and nothing of the batch is written again: the intent stays, and
    the next planning (or commit, or abort) commits and reads their markers again."""


class SinkIntentUnknownError(SinkCommitIncompleteError):
    """A batch's intent write failed and the store could not be re-read: it may be recorded.

    Nothing of the batch was aborted (the intent, if it landed, names its transactions): the next
    commit, abort or planning that reads the store finishes it, or, when it is absent, the next
    sweep ends its transactions."""


class SinkFencedError(SinkError):
    """A newer run of the query (or another query with the same prefix) holds the fence."""


class SinkIdempotencyError(SinkError):
    """A key's earlier run left a commit Kafka lost part of: writing it again would duplicate."""


class DoneRecordReplacedError(SinkError):
    """A write would turn a batch recorded done back into an intent or a partial record."""


class IntentStoreError(SinkError):
    """The intent topic cannot be created, read or written: the message says why and the fix."""


# -- exactly-once in a task (spark/executor/slots.py) --------------------------------------------


class SlotsBusyError(SinkError):
    """Every transactional id of a task's Spark partition is held open by another attempt."""


# -- the Schema Registry client (formats/registry.py) --------------------------------------------


class SchemaRegistryError(SinkError, RuntimeError):
    """The registry answered with an error (``status``, the registry's ``error_code`` and
    ``reason``: its own ``message``, kept whole for errors built on this one)."""

    def __init__(
        self,
        message: str,
        *,
        url: str = "",
        status: int = 0,
        error_code: int = 0,
        reason: str = "",
    ):
        super().__init__(message)
        self.url = url
        self.status = status
        self.error_code = error_code
        self.reason = reason


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """No URL gave an answer within the bounded tries."""


class SchemaRegistryAnswerError(SchemaRegistryError):
    """The registry's answer is not one its REST API gives: too large, not JSON, or a field
    missing, of the wrong type or out of range."""


class SchemaRegistryAuthError(SchemaRegistryError):
    """The registry refused the credentials (401) or the permission (403)."""


class SchemaNotFoundError(SchemaRegistryError):
    """The subject, version or schema id is not in the registry."""


class IncompatibleSchemaError(SchemaRegistryError):
    """The schema breaks the subject's compatibility level; ``reasons`` are the registry's."""

    def __init__(self, subject: str, reasons: Sequence[str], *, url: str, level: str | None):
        under = f" under {level} compatibility" if level else ""
        said = "; ".join(reasons) if reasons else "no reason given"
        super().__init__(
            f"the schema is incompatible with the latest version of subject {subject!r}{under} "
            f"(registry {url}: {said}). Fix: make the change compatible (for example give a new "
            "field a default, keep required fields), or change the subject's compatibility level "
            "in the registry, or write under a new subject",
            url=url,
            status=409,
        )
        self.subject = subject
        self.reasons = tuple(reasons)
