"""Delivery results: ProduceRequestResult (one per batch), FutureRecordMetadata (one per send()).

Role: the hand-off between the sender thread, which learns a batch's fate, and user threads
waiting in ``get()``/``flush()`` or registered callbacks.

Invariants:
- A ProduceRequestResult is completed exactly once (base offset or error); later calls are
  ignored, so a late response for a batch already failed by ``close()`` cannot resurrect it.
- Callbacks run exactly once, on the thread that completes the result (the sender thread),
  after ``done()`` is already true; a callback added after completion runs immediately on the
  caller's thread. A callback that raises is logged and never breaks the sender.
- FutureRecordMetadata holds no per-record lock or event: ``send()`` stays cheap, waiting is
  done on the batch's single event.
- A batch split by the sender (MESSAGE_TOO_LARGE; INVALID_RECORD naming some of its records)
  keeps its result, which completes once every part has; each record's future, and the bulk
  future's offsets and failed rows, then report the outcome and offset of the part that carried
  the record, so a record written by one part never takes the error of another.
- Offsets the broker did not return (acks=0, DUPLICATE_SEQUENCE_NUMBER) are never invented:
  ranges span only returned offsets, and the records without one are counted apart
  (``PartitionOffsets.unknown_offset_count``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kafka_sink.errors import KafkaTimeoutError

log = logging.getLogger(__name__)

# The call's row numbers of a batch's records, in offset order (send_columns' track_rows).
RowIds = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


Callback = Callable[[RecordMetadata | None, BaseException | None], Any]


def _run_callback(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("producer callback %r raised; ignored", fn)


class ProduceRequestResult:
    """The outcome of one ProducerBatch: base offset and log-append time, or an error."""

    __slots__ = (
        "_callbacks",
        "_event",
        "_failed",
        "_lock",
        "_parts",
        "base_offset",
        "error",
        "log_append_time_ms",
        "partition",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[ProduceRequestResult], Any]] | None = None
        # Set when the batch was split: (first offset delta, result) of each part, in order.
        self._parts: list[tuple[int, ProduceRequestResult]] | None = None

    def done(self) -> bool:
        return self._event.is_set()

    @property
    def is_split(self) -> bool:
        """True when the batch was split (its records' outcomes live in the parts)."""
        return self._parts is not None

    def set_parts(self, parts: list[tuple[int, ProduceRequestResult]]) -> None:
        """The batch was split: record ``delta`` now lives in the part starting at or below it."""
        self._parts = parts

    def record_result(self, relative_offset: int) -> tuple[ProduceRequestResult, int]:
        """The result that decided the record at ``relative_offset``, and its delta there.

        Descends into split parts that are done; a part still pending (the batch was failed as
        a whole, e.g. by close) leaves the record with this result's outcome.
        """
        result, delta = self, relative_offset
        while result._parts is not None:
            start, part = next((p for p in reversed(result._parts) if delta >= p[0]), (0, result))
            if part is result or not part.done():
                break
            result, delta = part, delta - start
        return result, delta

    def leaves(self, last_delta: int) -> list[tuple[int, int, ProduceRequestResult]]:
        """``(first delta, last delta, result)`` of the results that decided records
        0..``last_delta``, in record order: this result alone unless the batch was split.

        Follows ``record_result``: a part still pending leaves its records with this result.
        """
        parts = self._parts
        if parts is None or not all(part.done() for _start, part in parts):
            return [(0, last_delta, self)]
        out: list[tuple[int, int, ProduceRequestResult]] = []
        for i, (start, part) in enumerate(parts):
            end = parts[i + 1][0] - 1 if i + 1 < len(parts) else last_delta
            out.extend((start + a, start + b, r) for a, b, r in part.leaves(end - start))
        return out

    def wait(self, timeout_s: float | None = None) -> bool:
        return self._event.wait(timeout_s)

    def complete(
        self, base_offset: int, log_append_time_ms: int, error: BaseException | None
    ) -> bool:
        """Record the outcome and wake waiters; False if it was already completed."""
        with self._lock:
            if self._event.is_set():
                return False
            self.base_offset = base_offset
            self.log_append_time_ms = log_append_time_ms
            self.error = error
            self._event.set()
            callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            for fn in callbacks:
                _run_callback(fn, self)
        return True

    def offset_range(self, last_delta: int) -> tuple[int, int, int]:
        """(first, last, unknown) for the records at deltas 0..last_delta.

        ``first``/``last`` span the records whose offsets the broker returned ((-1, -1) if
        none); ``unknown`` counts the records acknowledged without an offset (acks=0, or a
        DUPLICATE_SEQUENCE_NUMBER answer: written by an earlier attempt whose offset the broker
        no longer has), which may lie outside that span. A split batch's parts may have landed
        apart (another writer in between), so the range spans every part's own offsets.
        """
        parts = self._parts
        if parts is None or not all(part.done() for _start, part in parts):
            if self.base_offset < 0:
                return -1, -1, last_delta + 1
            return self.base_offset, self.base_offset + last_delta, 0
        firsts: list[int] = []
        lasts: list[int] = []
        unknown = 0
        for i, (start, part) in enumerate(parts):
            end = parts[i + 1][0] - 1 if i + 1 < len(parts) else last_delta
            first, last, part_unknown = part.offset_range(end - start)
            unknown += part_unknown
            if first >= 0:
                firsts.append(first)
                lasts.append(last)
        return (min(firsts), max(lasts), unknown) if firsts else (-1, -1, unknown)

    def add_done_callback(self, fn: Callable[[ProduceRequestResult], Any]) -> None:
        with self._lock:
            if not self._event.is_set():
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        _run_callback(fn, self)


class FutureRecordMetadata:
    """What ``send()`` returns: resolves to RecordMetadata or raises the delivery error."""

    __slots__ = (
        "_key_size",
        "_relative_offset",
        "_result",
        "_timestamp_ms",
        "_value_size",
    )

    def __init__(
        self,
        result: ProduceRequestResult,
        relative_offset: int,
        timestamp_ms: int,
        key_size: int,
        value_size: int,
    ) -> None:
        self._result = result
        self._relative_offset = relative_offset
        self._timestamp_ms = timestamp_ms
        self._key_size = key_size
        self._value_size = value_size

    def done(self) -> bool:
        return self._result.done()

    def _error(self) -> BaseException | None:
        return self._result.record_result(self._relative_offset)[0].error

    def succeeded(self) -> bool:
        return self._result.done() and self._error() is None

    def failed(self) -> bool:
        return self._result.done() and self._error() is not None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._error()

    def _wait(self, timeout: float | None) -> None:
        if not self._result.wait(timeout):
            raise KafkaTimeoutError(
                f"record to {self._result.topic}-{self._result.partition} not acknowledged "
                f"within {timeout} s (it may still be delivered later)"
            )

    def get(self, timeout: float | None = None) -> RecordMetadata:
        self._wait(timeout)
        error = self._error()
        if error is not None:
            raise error
        return self._metadata()

    def _metadata(self) -> RecordMetadata:
        r, delta = self._result.record_result(self._relative_offset)
        offset = r.base_offset + delta if r.base_offset >= 0 else -1
        ts = r.log_append_time_ms if r.log_append_time_ms != -1 else self._timestamp_ms
        return RecordMetadata(r.topic, r.partition, offset, ts, self._key_size, self._value_size)

    def add_callback(self, fn: Callback) -> None:
        """Call ``fn(metadata, None)`` on success or ``fn(None, exc)`` on failure."""
        self._result.add_done_callback(lambda _r: self._fire(fn))

    def _fire(self, fn: Callback) -> None:
        error = self._error()
        if error is None:
            fn(self._metadata(), None)
        else:
            fn(None, error)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return (
            f"FutureRecordMetadata({self._result.topic}-{self._result.partition}"
            f"+{self._relative_offset}, {state})"
        )


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """The offsets one bulk send wrote to one partition (inclusive range).

    ``record_count`` counts every acknowledged record. All of them lie in
    ``[first_offset, last_offset]`` except the ``unknown_offset_count`` ones the broker
    acknowledged without an offset (acks=0; DUPLICATE_SEQUENCE_NUMBER), which may lie outside.
    """

    first_offset: int
    last_offset: int
    record_count: int
    unknown_offset_count: int = 0


class BulkSendFuture:
    """The result of ``send_columns``: per partition offsets, without a future per record.

    Built from the batches the call appended; completes when every batch has, and raises the
    first delivery error (in append order) if any failed. A batch's outcome is folded into the
    per-partition ranges as it completes and its result is let go, so a call of any size keeps
    only its batches still pending (which buffer.memory bounds) plus one range per partition.

    A batch split by the sender (MESSAGE_TOO_LARGE, or INVALID_RECORD naming some of its
    records) is folded part by part: the records of a part that was written count in
    ``offsets()``, those of a part that failed count as failed, whatever its sibling parts did.

    With ``track_rows`` (``send_columns(..., track_rows=True)``) every batch also keeps the
    call's row numbers it holds until it completes, and ``failed_rows()`` names the rows whose
    record failed, each with its error.
    """

    __slots__ = (
        "_batches",
        "_callbacks",
        "_error",
        "_event",
        "_failed",
        "_failed_rows",
        "_lock",
        "_next_index",
        "_offsets",
        "_pending",
        "_record_count",
        "_rows",
        "topic",
        "track_rows",
    )

    def __init__(self, topic: str, *, track_rows: bool = False) -> None:
        self.topic = topic
        self.track_rows = track_rows
        # Batches not completed yet, by append index: (partition, record_count, last delta, result).
        self._batches: dict[int, tuple[int, int, int, ProduceRequestResult]] = {}
        # With track_rows: the call's row numbers of each pending batch, in offset order.
        self._rows: dict[int, RowIds] = {}
        # With track_rows: (row numbers, error) of the failed records, per failed part.
        self._failed_rows: list[tuple[RowIds, BaseException]] = []
        self._next_index = 0
        self._record_count = 0
        self._offsets: dict[int, PartitionOffsets] = {}
        # Per partition, (records, batches) of the batches with failed records.
        self._failed: dict[int, tuple[int, int]] = {}
        # (append index, error) of the earliest failed batch.
        self._error: tuple[int, BaseException] | None = None
        # One token held by the caller still appending batches; released by _seal().
        self._pending = 1
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._callbacks: list[Callable[[BulkSendFuture], Any]] = []

    def _add(
        self,
        partition: int,
        record_count: int,
        last_offset_delta: int,
        result: ProduceRequestResult,
        rows: RowIds | None = None,
    ) -> None:
        """``rows`` (with track_rows): the call's row numbers of the batch's records, in offset
        order."""
        with self._lock:
            index = self._next_index
            self._next_index += 1
            self._batches[index] = (partition, record_count, last_offset_delta, result)
            if rows is not None:
                self._rows[index] = rows
            self._record_count += record_count
            self._pending += 1
        result.add_done_callback(lambda _result: self._on_batch_done(index))

    def _seal(self) -> None:
        """No more batches will be added; completes at once if all are already done."""
        with self._lock:
            self._pending -= 1
            fire = self._pending == 0
        if fire:
            self._finish()

    def _on_batch_done(self, index: int) -> None:
        with self._lock:
            partition, _count, last_delta, result = self._batches.pop(index)
            rows = self._rows.pop(index, None)
            failed_records = 0
            first_error: BaseException | None = None
            for start, end, part in result.leaves(last_delta):
                count = end - start + 1
                if part.error is None:
                    self._fold(partition, count, *part.offset_range(end - start))
                    continue
                failed_records += count
                if first_error is None:
                    first_error = part.error
                if rows is not None:
                    self._failed_rows.append((rows[start : end + 1], part.error))
            if first_error is not None:
                if self._error is None or index < self._error[0]:
                    self._error = (index, first_error)
                records, batches = self._failed.get(partition, (0, 0))
                self._failed[partition] = (records + failed_records, batches + 1)
            self._pending -= 1
            fire = self._pending == 0
        if fire:
            self._finish()

    def _fold(self, partition: int, count: int, first: int, last: int, unknown: int) -> None:
        # Records acknowledged without an offset (acks=0, DUPLICATE_SEQUENCE_NUMBER) keep the
        # range as it is and are counted apart, so the count stays right and the range never
        # claims to cover them.
        prev = self._offsets.get(partition)
        if prev is None:
            self._offsets[partition] = PartitionOffsets(first, last, count, unknown)
        elif first < 0:
            self._offsets[partition] = PartitionOffsets(
                prev.first_offset,
                prev.last_offset,
                prev.record_count + count,
                prev.unknown_offset_count + unknown,
            )
        else:
            lo = first if prev.first_offset < 0 else min(prev.first_offset, first)
            self._offsets[partition] = PartitionOffsets(
                lo,
                max(prev.last_offset, last),
                prev.record_count + count,
                prev.unknown_offset_count + unknown,
            )

    def _finish(self) -> None:
        self._event.set()
        with self._lock:
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            _run_callback(fn, self)

    def done(self) -> bool:
        return self._event.is_set()

    def _wait(self, timeout: float | None) -> None:
        if not self._event.wait(timeout):
            raise KafkaTimeoutError(
                f"bulk send to {self.topic} not fully acknowledged within {timeout} s "
                "(records may still be delivered later)"
            )

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        with self._lock:
            return None if self._error is None else self._error[1]

    def get(self, timeout: float | None = None) -> dict[int, PartitionOffsets]:
        error = self.exception(timeout)
        if error is not None:
            raise error
        return self.offsets()

    def offsets(self) -> dict[int, PartitionOffsets]:
        """Offsets of the batches acknowledged so far (all of them once done without error)."""
        with self._lock:
            return dict(self._offsets)

    def failed_rows(self) -> list[tuple[int, BaseException]]:
        """The call's row numbers (ascending) whose record failed, each with its error.

        Only for a call made with ``track_rows=True`` (otherwise ValueError: the rows were not
        kept). Rows of a batch split after MESSAGE_TOO_LARGE or INVALID_RECORD are reported per
        part, so a row written by one part never takes another part's error. Before ``done()``
        it names the rows known to have failed so far.
        """
        if not self.track_rows:
            raise ValueError(
                "failed_rows() needs the row numbers of each batch: call "
                "send_columns(..., track_rows=True)"
            )
        with self._lock:
            failed = list(self._failed_rows)
        if not failed:
            return []
        rows = np.concatenate([r for r, _e in failed])
        errors = [e for r, e in failed for _ in range(len(r))]
        order = np.argsort(rows, kind="stable")
        return [(int(rows[i]), errors[i]) for i in order.tolist()]

    def unacknowledged(self) -> dict[int, tuple[int, int]]:
        """Per partition, (records, batches) not acknowledged yet: pending or failed (a split
        batch counts only its failed records, as one batch)."""
        with self._lock:
            out = dict(self._failed)
            for partition, count, _delta, _result in self._batches.values():
                records, batches = out.get(partition, (0, 0))
                out[partition] = (records + count, batches + 1)
        return out

    @property
    def record_count(self) -> int:
        """Records in every batch of this future (acknowledged, failed or pending)."""
        return self._record_count

    def add_callback(self, fn: Callable[[BulkSendFuture], Any]) -> None:
        """Call ``fn(self)`` once every batch is done (immediately if it already is)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        _run_callback(fn, self)
