"""Where the fate of a record the task cannot write is decided: fail, dead-letter or skip.

Role: a row that can never be written is detected where its failure shows: ``columns.py`` (a
null or empty topic, a partition outside the topic's, a timestamp before 1970, a null header
key), ``topic_rules.py`` (larger than the topic's ``max.message.bytes``, a null key for a
compacted topic), ``task.py`` (a topic from the ``topic`` column that is missing or not
writable, a record larger than ``max.request.size``), the format's encoder (a row that does not
bind to its schema) and the producer (a record the broker refused: ``MESSAGE_TOO_LARGE`` once
split down to it, ``INVALID_RECORD``, ``CORRUPT_MESSAGE``). Each is a :class:`BadRecord` (its
row in the task's input, its topic, the reason code, Kafka Connect's stage, the message) that the
task's write loop hands to the write's :class:`RecordErrorPolicy` (option ``onRecordError``),
beside its delivery guarantee:

- :class:`FailTask` (``fail``, the default): the task fails with the row's
  :class:`SinkDataError`, as the sink always did;
- :class:`SkipRecords` (``skip``): the row is left out and counted; the driver logs the batch's
  count and first row once per batch;
- :class:`DeadLetters` (``deadLetter``): the row is counted and becomes a record for
  ``deadLetterTopic``: the key and value the sink would have written (the raw column values
  where the format could not encode them: bytes as they are, text as UTF-8, anything else as
  JSON), its headers and timestamp, and Kafka Connect's ``__connect.errors.*`` headers plus the
  Spark batch, task and row under ``pykafka.`` (a row refused for its timestamp is stamped now,
  its own timestamp in ``pykafka.timestamp``). The loop sends them through the task's own
  producer, so exactly-once writes them in the task's transaction and at-least-once waits for
  them before the task succeeds; a dead letter that cannot be written fails the task.

Invariants:
- Every bad row passes through :meth:`RecordErrorPolicy.reject` exactly once; a policy that
  returns has taken the row out of the write (nothing of it was, or will be, sent to its topic).
- A task whose bad rows outnumber ``deadLetterMaxRecords`` fails at once (the batch could only
  fail at its commit); the ratio is the batch's, checked by the driver.
- Dead letters carry nothing from the producer's configuration: their headers hold the row's
  position, its topic and the message the sink built from the data's shape and its options.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from kafka_sink.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    MessageTooLargeError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)
from kafka_sink.sink_errors import BadRecord, BadRecordError, BadRecordsLimitError, SinkDataError
from kafka_sink.spark.bad_records import (
    MAX_MESSAGE_CHARS,
    MAX_SAMPLES,
    BadRecordCounts,
    BadRecordSample,
)
from kafka_sink.spark.option_table import ON_RECORD_ERROR_DEAD_LETTER, ON_RECORD_ERROR_SKIP
from kafka_sink.spark.options import SinkOptions

__all__ = [
    "FAIL_TASK",
    "BadRecord",
    "BadRecordError",
    "DeadLetter",
    "DeadLetters",
    "FailTask",
    "RecordErrorPolicy",
    "RowContents",
    "SkipRecords",
    "policy_for",
    "reason_of",
    "row_contents",
]

Header = tuple[str, bytes | None]

# Kafka Connect's dead-letter header names (its DeadLetterQueueReporter), so tooling built for
# Connect's dead-letter topics reads ours.
ERROR_HEADER_TOPIC = "__connect.errors.topic"
ERROR_HEADER_PARTITION = "__connect.errors.partition"
ERROR_HEADER_EXCEPTION = "__connect.errors.exception.class.name"
ERROR_HEADER_MESSAGE = "__connect.errors.exception.message"
ERROR_HEADER_STAGE = "__connect.errors.stage"
# Where the row came from, which Connect's headers have no names for.
HEADER_REASON = "pykafka.errors.reason"
HEADER_BATCH_ID = "pykafka.batch.id"
HEADER_TASK_PARTITION = "pykafka.task.partition"
HEADER_TASK_ATTEMPT = "pykafka.task.attempt"
HEADER_ROW = "pykafka.row"
# The row's own timestamp, when it is the reason (the letter itself is stamped now).
HEADER_TIMESTAMP = "pykafka.timestamp"


@dataclass(frozen=True, slots=True)
class RowContents:
    """One bad row as it would have been written (or, where encoding failed, as it was given)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    #: The partition the row named (None: the partitioner's choice).
    partition: int | None = None
    #: The row's timestamp (epoch ms) when it has a valid one.
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record for the dead-letter topic."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp_ms: int | None


class RecordErrorPolicy(Protocol):
    """What becomes of a row the task cannot write."""

    #: ``deadLetter`` or ``skip`` for a policy that takes rows out; None for :class:`FailTask`.
    action: str | None

    def reject(self, record: BadRecord, contents: Callable[[], RowContents]) -> None:
        """Called once for each bad row; raising fails the task. ``contents`` is called only by
        a policy that needs the row's data."""
        ...

    def take_dead_letters(self) -> list[DeadLetter]:
        """The dead letters made since the last call, for the loop to send."""
        ...

    def counts(self, rows_read: int) -> BadRecordCounts | None:
        """The task's bad rows for its commit message (None for :class:`FailTask`)."""
        ...


class FailTask:
    """The default: the task fails with the row's :class:`SinkDataError` (Spark retries it)."""

    action: str | None = None

    def reject(self, record: BadRecord, contents: Callable[[], RowContents]) -> None:
        raise SinkDataError(record.reason) from None

    def take_dead_letters(self) -> list[DeadLetter]:
        return []

    def counts(self, rows_read: int) -> BadRecordCounts | None:
        return None


FAIL_TASK = FailTask()


class _Tally:
    """Counts of a task's bad rows by reason, its first rows, and the task's own bound."""

    def __init__(self, action: str, partition_id: int, max_records: int | None) -> None:
        self.action: str | None = action
        self._partition_id = partition_id
        self._max_records = max_records
        self._by_reason: Counter[str] = Counter()
        self._samples: list[BadRecordSample] = []

    def count(self, record: BadRecord) -> None:
        self._by_reason[record.code] += 1
        if len(self._samples) < MAX_SAMPLES:
            message = record.reason[:MAX_MESSAGE_CHARS]
            self._samples.append(
                BadRecordSample(self._partition_id, record.row, record.topic, record.code, message)
            )
        total = self._by_reason.total()
        if self._max_records is not None and total > self._max_records:
            first = "; ".join(s.describe() for s in self._samples)
            raise BadRecordsLimitError(
                f"Spark partition {self._partition_id} alone has {total} bad rows, more than "
                f"option 'deadLetterMaxRecords' ({self._max_records}) allows for a whole batch: "
                f"so many bad rows are an incident, not a policy. First: {first}. Fix the data, "
                "or raise deadLetterMaxRecords"
            )

    def counts(self, rows_read: int) -> BadRecordCounts | None:
        assert self.action is not None
        return BadRecordCounts(
            action=self.action,
            rows_read=rows_read,
            by_reason=tuple(sorted(self._by_reason.items())),
            samples=tuple(sorted(self._samples, key=lambda s: s.row)),
        )


class SkipRecords(_Tally):
    """``skip``: the row is left out, counted (and logged by the driver, once per batch)."""

    def __init__(self, partition_id: int, max_records: int | None) -> None:
        super().__init__(ON_RECORD_ERROR_SKIP, partition_id, max_records)

    def reject(self, record: BadRecord, contents: Callable[[], RowContents]) -> None:
        self.count(record)

    def take_dead_letters(self) -> list[DeadLetter]:
        return []


class DeadLetters(_Tally):
    """``deadLetter``: the row becomes a record for the dead-letter topic (module docstring)."""

    def __init__(
        self,
        topic: str,
        *,
        partition_id: int,
        attempt_number: int,
        batch_id: int | None,
        max_records: int | None,
    ) -> None:
        super().__init__(ON_RECORD_ERROR_DEAD_LETTER, partition_id, max_records)
        self.topic = topic
        self._task_headers: tuple[Header, ...] = (
            *(((HEADER_BATCH_ID, _text(batch_id)),) if batch_id is not None else ()),
            (HEADER_TASK_PARTITION, _text(partition_id)),
            (HEADER_TASK_ATTEMPT, _text(attempt_number)),
        )
        self._pending: list[DeadLetter] = []

    def reject(self, record: BadRecord, contents: Callable[[], RowContents]) -> None:
        self.count(record)
        row = contents()
        partition = row.partition if row.partition is not None else -1
        errors: tuple[Header, ...] = (
            (ERROR_HEADER_TOPIC, (record.topic or "").encode()),
            (ERROR_HEADER_PARTITION, _text(partition)),
            (ERROR_HEADER_EXCEPTION, record.error_class.encode()),
            (ERROR_HEADER_MESSAGE, record.reason.encode()),
            (ERROR_HEADER_STAGE, record.stage.encode()),
            (HEADER_REASON, record.code.encode()),
            *self._task_headers,
            (HEADER_ROW, _text(record.row)),
        )
        stamp = row.timestamp_ms
        if record.code == "invalid_timestamp" and stamp is not None:
            # The timestamp is what is wrong: the dead-letter topic would refuse it as well, so
            # the letter is stamped now and the row's own timestamp rides in a header.
            errors = (*errors, (HEADER_TIMESTAMP, _text(stamp)))
            stamp = None
        self._pending.append(DeadLetter(row.key, row.value, (*row.headers, *errors), stamp))

    def take_dead_letters(self) -> list[DeadLetter]:
        pending, self._pending = self._pending, []
        return pending


# The producer's and broker's errors that are one record's, by reason code (docs/errors.md's
# table); every other error fails the task whatever the policy.
_RECORD_ERRORS: tuple[tuple[type[BaseException], str], ...] = (
    (RecordTooLargeError, "record_too_large"),
    (MessageTooLargeError, "record_too_large"),
    (InvalidRecordError, "invalid_record"),
    (InvalidTimestampError, "invalid_timestamp"),
    (CorruptMessageError, "corrupt_message"),
    (TopicAuthorizationFailedError, "topic_authorization"),
    (InvalidTopicError, "unknown_topic"),
)


def reason_of(error: BaseException) -> str | None:
    """The reason code of a record-level error, None for an error that fails the task.

    ``topic_authorization`` and ``unknown_topic`` are a record's only for a topic its row named
    (the ``topic`` column); the ``topic`` option's topic is checked before any task runs.
    """
    for kind, code in _RECORD_ERRORS:
        if isinstance(error, kind):
            return code
    return None


def error_class_name(error: BaseException) -> str:
    """The qualified name a dead letter's ``__connect.errors.exception.class.name`` carries."""
    kind = type(error)
    return f"{kind.__module__}.{kind.__qualname__}"


def policy_for(
    options: SinkOptions, *, partition_id: int, attempt_number: int, batch_id: int | None
) -> RecordErrorPolicy:
    """The write's policy (option ``onRecordError``) for one task."""
    if options.on_record_error == ON_RECORD_ERROR_SKIP:
        return SkipRecords(partition_id, options.dead_letter_max_records)
    if options.on_record_error == ON_RECORD_ERROR_DEAD_LETTER:
        assert options.dead_letter_topic is not None  # the options refuse deadLetter without it
        return DeadLetters(
            options.dead_letter_topic,
            partition_id=partition_id,
            attempt_number=attempt_number,
            batch_id=batch_id,
            max_records=options.dead_letter_max_records,
        )
    return FAIL_TASK


def row_contents(
    batch: pa.RecordBatch, index: int, *, timestamp_ms: Callable[[pa.Array], int | None]
) -> RowContents:
    """Row ``index`` of ``batch`` (its key, value, headers, partition and timestamp), per-row
    Python: only bad rows come here. ``timestamp_ms`` reads a one-row ``timestamp`` column."""
    row = batch.slice(index, 1)
    names = row.schema.names

    def cell(name: str) -> Any:
        return row.column(name)[0].as_py() if name in names else None

    headers = [
        (str(item["key"]), _as_bytes(item.get("value")))
        for item in cell("headers") or ()
        if item is not None and item.get("key") is not None
    ]
    partition = cell("partition")
    stamp = timestamp_ms(row.column("timestamp")) if "timestamp" in names else None
    return RowContents(
        key=_as_bytes(cell("key")),
        value=_as_bytes(cell("value")),
        headers=tuple(headers),
        partition=int(partition) if partition is not None else None,
        timestamp_ms=stamp if stamp is not None and stamp >= 0 else None,
    )


def _text(number: int) -> bytes:
    return str(number).encode()


def _as_bytes(value: object) -> bytes | None:
    """A cell as a dead letter carries it: bytes as they are, text as UTF-8, the rest as JSON."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, default=_json_default, ensure_ascii=False).encode()


def _json_default(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return str(value)
