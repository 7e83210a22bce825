"""The bulk path behind ``KafkaProducer.send_columns``: whole columns in, sealed batches queued.

Role: :func:`bulk_columns` checks and normalises the columns of one call (values, keys,
explicit partitions, timestamps, headers) into :class:`BulkColumns`, once: keys and values become
``records.arrow.BinaryArray`` through ``binary_column`` (a no-op for a column the Spark sink
already normalised), partitions an int32 array, timestamps an int or an int64 array; nothing
below normalises again. :class:`BulkAppender` then takes
the rows one window at a time: it partitions them (explicit > ``partitioner.class`` if
configured > murmur2(key) > sticky, as ``send()``), groups them by
partition, seals them into record batches (``records.columnar.iter_seal_columns``) and queues
each batch in the RecordAccumulator as soon as it is sealed. The result is one BulkSendFuture
with per-partition offsets instead of a future per record.

Invariants:
- What can be wrong with the input (types, lengths, partitions, negative timestamps, records
  larger than max.request.size or buffer.memory) is checked over the whole call before the first
  batch is queued: a bad call queues nothing.
- Memory beyond the caller's input is buffer.memory plus O(window), whatever the size of the
  call: a window holds at most ``_WINDOW_ROWS`` rows and ``_WINDOW_BYTES`` of keys and values;
  its per-row arrays, its partition-grouped copy and the chunk being encoded exist one window at
  a time, and every sealed batch is queued (so counted in buffer.memory) before the next one is
  compressed.
- ``max.block.ms`` bounds each batch's wait for buffer memory (Java bounds each record's), not
  the whole call: a large call against a slow broker goes on as long as memory frees up.
- A call that fails after queueing part of its rows (buffer.memory full for max.block.ms, the
  producer closed meanwhile, ...) raises with ``queued_future`` set on the exception: the
  BulkSendFuture of exactly the batches queued before the failure; they complete (acknowledged
  or failed) like any others. An exception without the attribute queued nothing.
- Rows keep input order within each partition.
- A ``partitioner.class`` is called once per row without an explicit partition, over the whole
  call before anything is queued: an exception or an answer out of range fails the call, naming
  the record, with nothing queued. Without one, partitioning stays vectorised.
- With interceptors configured (``acks``), every queued batch reports the call's row numbers it
  holds, so each record gets its ``on_acknowledgement`` when its batch completes. With
  ``track_rows`` the BulkSendFuture keeps the same row numbers per batch, so
  ``failed_rows()`` can name the rows whose record failed. Without either, no row numbers are
  computed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.errors import RecordTooLargeError
from kafka_sink.producer.framing import PARTITION_FRAMING, topic_framing
from kafka_sink.producer.futures import BulkSendFuture
from kafka_sink.producer.partitioner import BuiltInPartitioner, partitions_with_leader
from kafka_sink.records.arrow import (
    BinaryArray,
    arrow_ints,
    binary_column,
    binary_offsets,
    int_column,
    valid_mask,
)
from kafka_sink.records.batch import BATCH_HEADER_SIZE, MAX_RECORD_OVERHEAD, Header, encode_headers
from kafka_sink.records.columnar import CompressionRatioEstimator, iter_seal_binary_columns
from kafka_sink.records.murmur2_columns import partitions_for_key_column

if TYPE_CHECKING:
    from kafka_sink.clock import Clock
    from kafka_sink.net.metadata import PartitionInfo
    from kafka_sink.producer.accumulator import RecordAccumulator
    from kafka_sink.producer.interceptors import BulkAcknowledgements
    from kafka_sink.producer.plugins import CustomPartitioner

__all__ = [
    "QUEUED_FUTURE",
    "BulkAppender",
    "BulkColumns",
    "RecordTooLargeInColumnsError",
    "bulk_columns",
]

# The attribute a failed call's exception carries when part of the call was queued.
QUEUED_FUTURE = "queued_future"

# A window of rows is partitioned, grouped and sealed at once. The bounds keep its per-row numpy
# arrays (about 100 bytes a row) and its grouped copy to a few MiB, and are far above what the
# Spark sink hands over per call (10,000 rows), so that path is a single window.
_WINDOW_ROWS = 1 << 17
_WINDOW_BYTES = 8 << 20
# Wake the sender (and let it take the GIL) after this many sealed bytes were queued.
_WAKEUP_BYTES = 1 << 20
# Per-record bytes beyond key and value, as an upper bound (the builder's varint overhead).
_RECORD_OVERHEAD = MAX_RECORD_OVERHEAD + 10

_I32 = npt.NDArray[np.int32]
_I64 = npt.NDArray[np.int64]
_Offsets = npt.NDArray[np.int32] | npt.NDArray[np.int64]


def _yield_gil() -> None:
    # Every syscall the sender makes releases the GIL, but a busy caller would keep it for a
    # whole switch interval (5 ms) before the sender gets it back; sleep(0) hands it over now.
    time.sleep(0)


@dataclass(frozen=True, slots=True)
class BulkColumns:
    """The checked columns of one ``send_columns`` call, normalised: what the path below takes."""

    values: BinaryArray
    keys: BinaryArray | None  # None: every key null
    partitions: pa.Int32Array | None  # null or -1 = the partitioner decides
    timestamps_ms: int | pa.Int64Array  # one for every row, or per row (null = ``now_ms``)
    now_ms: int
    headers: Sequence[Sequence[Header] | None] | None
    length: int
    max_partition: int  # -1 when no row names a partition


def bulk_columns(
    values: object,
    keys: object,
    *,
    partitions: object,
    headers: Sequence[Sequence[Header] | None] | None,
    timestamps_ms: object,
    wall_ms: Callable[[], int],
) -> BulkColumns:
    """Check the shapes, types, partitions and timestamps of a call (see ``send_columns``) and
    normalise them: the one normalisation on the way from ``send_columns`` to the batches."""
    values_arr = binary_column(values, "values")
    n = len(values_arr)
    keys_arr = None if keys is None else binary_column(keys, "keys")
    if keys_arr is not None and len(keys_arr) != n:
        raise ValueError(f"keys has {len(keys_arr)} rows, values has {n}")
    if headers is not None and len(headers) != n:
        raise ValueError(f"headers has {len(headers)} rows, values has {n}")
    now_ms = wall_ms()
    ts: int | pa.Int64Array
    if timestamps_ms is None:
        ts = now_ms
    elif isinstance(timestamps_ms, int | np.integer) and not isinstance(timestamps_ms, bool):
        ts = int(timestamps_ms)
        if ts < 0:
            raise ValueError(
                f"timestamps_ms must be a non-negative int, got {ts} (Kafka reads -1 as 'no "
                "timestamp'); pass None for the current time"
            )
    else:
        ts = _timestamp_array(timestamps_ms, n)
    part_arr = None if partitions is None else _partition_array(partitions, n)
    max_partition = -1
    if part_arr is not None:
        highest = pc.max(part_arr).as_py()
        max_partition = -1 if highest is None else int(highest)
    return BulkColumns(
        values=values_arr,
        keys=keys_arr,
        partitions=part_arr,
        timestamps_ms=ts,
        now_ms=now_ms,
        headers=headers,
        length=n,
        max_partition=max_partition,
    )


def _timestamp_array(timestamps: object, n: int) -> pa.Int64Array:
    """An int64 array (nulls kept: they mean "now"); refuses negative timestamps by row."""
    if isinstance(timestamps, pa.ChunkedArray):
        timestamps = timestamps.combine_chunks()
    if isinstance(timestamps, pa.Array):
        if not (pa.types.is_integer(timestamps.type) or pa.types.is_null(timestamps.type)):
            raise TypeError(
                f"timestamps_ms must be an integer column of epoch milliseconds, got "
                f"{timestamps.type}"
            )
        arr = timestamps.cast(pa.int64())
    elif isinstance(timestamps, np.ndarray):
        arr = arrow_ints(np.asarray(timestamps, dtype=np.int64))
    else:
        try:
            arr = pa.array(list(cast("Iterable[object]", timestamps)), type=pa.int64())
        except (TypeError, ValueError, pa.ArrowException) as exc:
            raise TypeError(
                f"timestamps_ms must be None, an int or a column of int | None: {exc}"
            ) from None
    if len(arr) != n:
        raise ValueError(f"timestamps_ms has {len(arr)} rows, values has {n}")
    lowest = pc.min(arr).as_py()
    if lowest is not None and lowest < 0:
        row = pc.index(pc.less(arr, 0), True).as_py()
        raise ValueError(
            f"timestamps_ms[{row}] is {arr[row].as_py()}: record timestamps must be non-negative "
            "epoch milliseconds (Kafka reads -1 as 'no timestamp'); leave the row null for the "
            "current time"
        )
    return arr


def _partition_array(partitions: object, n: int) -> pa.Int32Array:
    if isinstance(partitions, pa.ChunkedArray):
        partitions = partitions.combine_chunks()
    if isinstance(partitions, pa.Array):
        arr = partitions.cast(pa.int32())
    else:
        arr = arrow_ints(np.asarray(partitions, dtype=np.int32))
    if len(arr) != n:
        raise ValueError(f"partitions has {len(arr)} rows, values has {n}")
    lowest = pc.min(arr).as_py()
    if lowest is not None and lowest < -1:
        raise ValueError("partitions must be >= 0 (or -1 / null for the partitioner)")
    return arr


def _offsets(column: BinaryArray | None) -> _Offsets | None:
    """Row i's bytes start at [i] and end at [i + 1] (a view, no copy); None: no column."""
    if column is None:
        return None
    return binary_offsets(column)


def _windows(columns: BulkColumns) -> list[tuple[int, int]]:
    """Row ranges of at most _WINDOW_ROWS rows and _WINDOW_BYTES of keys and values (one row
    at least)."""
    n = columns.length
    voff = _offsets(columns.values)
    koff = _offsets(columns.keys)
    out: list[tuple[int, int]] = []
    start = 0
    while start < n:
        stop = min(n, start + _WINDOW_ROWS)
        size = np.zeros(stop - start + 1, dtype=np.int64)
        for off in (voff, koff):
            if off is not None:
                size += off[start : stop + 1]
                size -= int(off[start])
        if int(size[-1]) > _WINDOW_BYTES:
            fits = int(np.searchsorted(size, _WINDOW_BYTES, side="right")) - 1
            stop = start + max(fits, 1)
        out.append((start, stop))
        start = stop
    return out


def _varint_sizes(lengths: _I64) -> _I64:
    # Zigzag varint widths of non-negative ints below 2**31 (a null's -1 takes one byte).
    widths: _I64 = 1 + (lengths >= 64).astype(np.int64)
    for bound in (1 << 13, 1 << 20, 1 << 27):
        widths += lengths >= bound
    return widths


def check_record_sizes(
    topic: str,
    columns: BulkColumns,
    windows: Sequence[tuple[int, int]],
    *,
    max_request_size: int,
    buffer_memory: int,
    request_framing: int = 0,
) -> None:
    """Refuse the call if one record is larger than max.request.size or buffer.memory.

    The bound is the record's uncompressed size in a batch of its own, as ``send()`` checks
    it: for max.request.size in a request of its own, ``request_framing`` (what every request
    carries, ``framing.py``) and this topic's and one partition's framing included; computed
    window by window so no whole-call per-row array is built.
    """
    framing = request_framing + topic_framing(topic) + PARTITION_FRAMING
    limit = min(max_request_size - framing, buffer_memory)
    header_sizes: _I64 | None = None
    if columns.headers is not None and any(columns.headers):
        header_sizes = np.fromiter(
            (len(encode_headers(h)) if h else 1 for h in columns.headers),
            dtype=np.int64,
            count=columns.length,
        )
    voff = _offsets(columns.values)
    koff = _offsets(columns.keys)
    for start, stop in windows:
        sizes = np.full(stop - start, BATCH_HEADER_SIZE + MAX_RECORD_OVERHEAD, dtype=np.int64)
        for off in (voff, koff):
            if off is None:
                sizes += 1
            else:
                lengths = np.diff(off[start : stop + 1]).astype(np.int64)
                sizes += lengths + _varint_sizes(lengths)
        if header_sizes is None:
            sizes += 1
        else:
            sizes += header_sizes[start:stop]
        if int(sizes.max()) <= limit:
            continue
        row = int(np.argmax(sizes > limit))
        size = int(sizes[row])
        name, bound = (
            ("max.request.size", max_request_size)
            if size + framing > max_request_size
            else ("buffer.memory", buffer_memory)
        )
        in_request = size + framing if name == "max.request.size" else None
        raise RecordTooLargeInColumnsError(
            topic, start + row, size, name, bound, request_size=in_request
        )


class RecordTooLargeInColumnsError(RecordTooLargeError):
    """One row of a ``send_columns`` call can never be sent; none of the call's rows was queued.

    Carries the row's index among the rows given, its serialized size, the size of a request
    carrying it alone (for max.request.size, which counts the request's framing too) and the
    setting it exceeds, so a caller that numbers rows its own way (a Spark task) can name it.
    """

    def __init__(
        self,
        topic: str,
        row: int,
        size: int,
        setting: str,
        limit: int,
        *,
        request_size: int | None = None,
    ) -> None:
        self.topic, self.row, self.size, self.setting, self.limit = (
            topic,
            row,
            size,
            setting,
            limit,
        )
        self.request_size = request_size
        super().__init__(
            f"record {row} of the rows given for topic {topic!r} {self.too_large()}; none of "
            f"them was queued. Fix: {self.fix()}"
        )

    def too_large(self) -> str:
        """What is too large: "is N bytes when serialized[, and a request carrying it M bytes],
        larger than <setting>=<limit>"."""
        request = (
            ""
            if self.request_size is None
            else f", and a request carrying it {self.request_size} bytes"
        )
        return (
            f"is {self.size} bytes when serialized{request}, larger than "
            f"{self.setting}={self.limit}"
        )

    def fix(self, prefix: str = "") -> str:
        """What to raise; ``prefix`` names the settings as the caller's options do."""
        if self.setting == "max.request.size":
            return (
                f"raise {prefix}max.request.size and the topic's max.message.bytes with it "
                "(the broker refuses a larger batch), or write smaller records"
            )
        return f"raise {prefix}buffer.memory above the record's size"


class BulkAppender:
    """Seals and queues the rows of ``send_columns`` calls for one producer (thread-safe).

    Batches are sealed with the accumulator's ``batch.size`` and compression, and records are
    checked against its ``buffer.memory``: the settings of the queue they go into.
    """

    def __init__(
        self,
        *,
        accumulator: RecordAccumulator,
        partitioner: BuiltInPartitioner,
        clock: Clock,
        max_block_ms: int,
        max_request_size: int,
        ignore_keys: bool,
        request_framing: int = 0,
        wakeup: Callable[[], None],
        custom_partitioner: CustomPartitioner | None = None,
    ) -> None:
        self._accumulator = accumulator
        self._custom_partitioner = custom_partitioner
        self._partitioner = partitioner
        self._clock = clock
        self._batch_size = accumulator.batch_size
        self._compression_type = accumulator.compression_type
        self._compression_level = accumulator.compression_level
        self._max_block_ms = max_block_ms
        self._max_request_size = max_request_size
        self._request_framing = request_framing
        self._buffer_memory = accumulator.buffer_memory
        self._ignore_keys = ignore_keys
        self._wakeup = wakeup
        # Per topic, as Java's CompressionRatioEstimator: lets batch.size bound the compressed
        # size of bulk batches (a racy float update between callers only shifts a cut point).
        self._ratio_estimators: dict[str, CompressionRatioEstimator] = {}

    def append(
        self,
        topic: str,
        parts: Sequence[PartitionInfo],
        columns: BulkColumns,
        *,
        acks: BulkAcknowledgements | None = None,
        track_rows: bool = False,
    ) -> BulkSendFuture:
        """Queue every row of ``columns`` (non-empty) to ``topic``; see the module invariants.

        ``acks`` (interceptors configured) learns which rows each queued batch holds; so does the
        returned future with ``track_rows`` (for ``BulkSendFuture.failed_rows``).
        """
        num_partitions = len(parts)
        if columns.max_partition >= num_partitions:
            raise ValueError(
                f"partition {columns.max_partition} is out of range for topic {topic!r} "
                f"with {num_partitions} partitions"
            )
        if self._custom_partitioner is not None:
            columns = self._custom_partitions(topic, num_partitions, columns)
        windows = _windows(columns)
        check_record_sizes(
            topic,
            columns,
            windows,
            max_request_size=self._max_request_size,
            buffer_memory=self._buffer_memory,
            request_framing=self._request_framing,
        )
        estimator = self._ratio_estimators.get(topic)
        if estimator is None:
            estimator = self._ratio_estimators.setdefault(topic, CompressionRatioEstimator())
        future = BulkSendFuture(topic, track_rows=track_rows)
        try:
            unwoken = 0
            for start, stop in windows:
                unwoken = self._append_window(
                    topic, parts, columns, start, stop, estimator, future, unwoken, acks
                )
        except BaseException as exc:
            if future.record_count:
                setattr(exc, QUEUED_FUTURE, future)
            raise
        finally:
            future._seal()
            # Even on failure: what was queued should leave now, not after the next linger.
            self._wakeup()
            _yield_gil()
        return future

    def _append_window(  # noqa: PLR0917 - one window's slice of the call's state
        self,
        topic: str,
        parts: Sequence[PartitionInfo],
        columns: BulkColumns,
        start: int,
        stop: int,
        estimator: CompressionRatioEstimator,
        future: BulkSendFuture,
        unwoken: int,
        acks: BulkAcknowledgements | None = None,
    ) -> int:
        """Seal and queue rows [start, stop); returns the queued bytes not yet woken for."""
        m = stop - start
        whole = start == 0 and m == columns.length
        values = columns.values if whole else columns.values.slice(start, m)
        keys = columns.keys
        if keys is not None and not whole:
            keys = keys.slice(start, m)
        explicit: _I32 | None = None
        if columns.partitions is not None:
            window = columns.partitions if whole else columns.partitions.slice(start, m)
            # A copy: the partitioner fills in the -1 rows.
            explicit = int_column(window, -1, np.int32)
        ts: int | _I64
        if isinstance(columns.timestamps_ms, int):
            ts = columns.timestamps_ms
        else:
            ts_window = columns.timestamps_ms if whole else columns.timestamps_ms.slice(start, m)
            ts = int_column(ts_window, columns.now_ms, np.int64)
        headers = columns.headers
        if headers is not None and not whole:
            headers = headers[start:stop]
        assigned = self._assign_partitions(topic, parts, values, keys, explicit, m)

        # Group rows by partition (stable: order within a partition is input order), then seal
        # every partition's rows in one call: batches never span a partition's segment.
        first = int(assigned[0])
        row_ids: _I64 | None = None
        need_rows = acks is not None or future.track_rows
        if bool((assigned == first).all()):
            group_partitions = [first]
            group_ends = [m]
            if need_rows:
                row_ids = np.arange(start, stop, dtype=np.int64)
        else:
            order = np.argsort(assigned, kind="stable")
            sorted_parts = assigned[order]
            bounds = (np.flatnonzero(np.diff(sorted_parts)) + 1).tolist()
            group_partitions = sorted_parts[[0, *bounds]].tolist()
            group_ends = [*bounds, m]
            take = arrow_ints(order)
            values = values.take(take)
            keys = None if keys is None else keys.take(take)
            headers = None if headers is None else [headers[i] for i in order.tolist()]
            ts = ts if isinstance(ts, int) else ts[order]
            if need_rows:
                row_ids = order.astype(np.int64) + start
            del order, sorted_parts, take
        del assigned, explicit
        key_sizes = value_sizes = None
        if acks is not None:
            # Serialized sizes for each record's RecordMetadata, in grouped order (-1: null).
            value_sizes = _sizes_or_minus_one(values)
            key_sizes = (
                np.full(m, -1, dtype=np.int64) if keys is None else _sizes_or_minus_one(keys)
            )

        acc = self._accumulator
        now_ms = self._clock.now_ms
        max_block_ms = self._max_block_ms
        group = 0
        rows = 0
        for sealed in iter_seal_binary_columns(
            values,
            keys,
            timestamps_ms=ts,
            headers=headers,
            compression_type=self._compression_type,
            compression_level=self._compression_level,
            batch_size=self._batch_size,
            ratio_estimator=estimator,
            segment_ends=group_ends,
        ):
            partition = group_partitions[group]
            # A fresh deadline per batch: max.block.ms bounds one batch's wait for memory.
            batch = acc.append_sealed(topic, partition, sealed, max_block_ms, now_ms())
            end = rows + sealed.record_count
            future._add(
                partition,
                sealed.record_count,
                sealed.last_offset_delta,
                batch.result,
                None if row_ids is None or not future.track_rows else row_ids[rows:end],
            )
            if acks is not None:
                assert row_ids is not None and key_sizes is not None and value_sizes is not None
                acks.add_batch(
                    batch.result,
                    row_ids[rows:end],
                    ts if isinstance(ts, int) else ts[rows:end],
                    key_sizes[rows:end],
                    value_sizes[rows:end],
                )
            rows = end
            if rows == group_ends[group]:
                group += 1
            unwoken += sealed.size_bytes
            if unwoken >= _WAKEUP_BYTES:
                self._wakeup()
                _yield_gil()
                unwoken = 0
        return unwoken

    def _custom_partitions(
        self, topic: str, num_partitions: int, columns: BulkColumns
    ) -> BulkColumns:
        """Every row's partition: explicit, else ``partitioner.class`` (called per row).

        Runs over the whole call before anything is queued, so a bad answer for one record
        fails the call with nothing queued, naming the record.
        """
        partitioner = self._custom_partitioner
        assert partitioner is not None
        n = columns.length
        if columns.partitions is None:
            chosen = np.full(n, -1, dtype=np.int32)
        else:
            chosen = int_column(columns.partitions, -1, np.int32)
        undecided = np.flatnonzero(chosen < 0).tolist()
        if not undecided:
            return columns
        keys = columns.keys
        key_list: list[bytes | None] = [None] * n if keys is None else keys.to_pylist()
        partition = partitioner.partition
        for row in undecided:
            try:
                chosen[row] = partition(topic, key_list[row], num_partitions)
            except ValueError as exc:
                raise ValueError(
                    f"record {row} of this call: {exc}; nothing from this call was queued"
                ) from exc
            except Exception as exc:
                exc.add_note(f"record {row} of this call; nothing from this call was queued")
                raise
        return replace(columns, partitions=arrow_ints(chosen), max_partition=int(chosen.max()))

    def _assign_partitions(  # noqa: PLR0917
        self,
        topic: str,
        parts: Sequence[PartitionInfo],
        values: BinaryArray,
        keys: BinaryArray | None,
        explicit: _I32 | None,
        n: int,
    ) -> _I32:
        num_partitions = len(parts)
        if explicit is not None:
            assigned = explicit
            undecided = assigned < 0
        else:
            assigned = np.full(n, -1, dtype=np.int32)
            undecided = np.ones(n, dtype=bool)
        if not undecided.any():
            return assigned
        if keys is not None and not self._ignore_keys:
            key_valid = valid_mask(keys)
            keyed = undecided & key_valid
            if keyed.any():
                rows = np.flatnonzero(keyed)
                if len(rows) == n:
                    assigned = partitions_for_key_column(keys, num_partitions).astype(np.int32)
                else:
                    assigned[rows] = partitions_for_key_column(
                        keys.take(arrow_ints(rows)), num_partitions
                    )
                undecided = undecided & ~key_valid
        if undecided.any():
            rows = np.flatnonzero(undecided)
            sizes = _lengths(values, rows) + _RECORD_OVERHEAD
            if keys is not None:
                sizes += _lengths(keys, rows)
            chunk = np.cumsum(sizes) // max(self._batch_size, 1)
            chunk -= chunk[0]
            chosen = self._partitioner.sticky_chunks(
                topic, num_partitions, int(chunk[-1]) + 1, lambda: partitions_with_leader(parts)
            )
            assigned[rows] = np.asarray(chosen, dtype=np.int32)[chunk]
        return assigned


def _sizes_or_minus_one(column: BinaryArray) -> _I64:
    out: _I64 = int_column(pc.binary_length(column), -1, np.int64)
    return out


def _lengths(column: BinaryArray, rows: _I64) -> _I64:
    out: _I64 = int_column(pc.binary_length(column), 0, np.int64)[rows]
    return out
