"""Where the fate of a record the task cannot write is decided.

Role: a row that can never be written (a null or empty topic, a partition outside the topic's, a
timestamp before 1970, a null header key, a record larger than max.request.size or
buffer.memory) is detected in ``columns.py`` or when ``task.py`` hands the rows to the producer,
and raised there as :class:`BadRecordError`: the row's index in the task's input, its topic when
known, and the reason (the message, naming the row and the fix). The task's write loop catches
it and hands it to the write's :class:`RecordErrorPolicy`, beside its delivery guarantee.
:class:`FailTask`, the only policy, fails the task with the :class:`SinkDataError` the sink has
always raised for such a row.

Invariants:
- Every bad row the task detects passes through :meth:`RecordErrorPolicy.reject` once, before
  the task fails for it; nothing of the row was queued.
- What is written does not depend on the policy: if ``reject`` returns instead of raising, the
  task still fails with the same error (taking a row out of the write is not supported yet).
- A format's serialization failure (``formats``) fails the task before this point and does not
  pass through it: it carries no row index to hand over.
"""

from __future__ import annotations

from typing import Protocol

from kafka_sink.sink_errors import BadRecord, BadRecordError, SinkDataError

__all__ = ["FAIL_TASK", "BadRecord", "BadRecordError", "FailTask", "RecordErrorPolicy"]


class RecordErrorPolicy(Protocol):
    """What becomes of a row the task cannot write."""

    def reject(self, record: BadRecord) -> None:
        """Called once for each bad row the task meets; raising fails the task."""
        ...


class FailTask:
    """The default: the task fails with the row's :class:`SinkDataError` (Spark retries it)."""

    def reject(self, record: BadRecord) -> None:
        raise SinkDataError(record.reason) from None


FAIL_TASK = FailTask()
