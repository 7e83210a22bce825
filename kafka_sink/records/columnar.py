"""Columnar (bulk) encoding: a whole column of records into sealed RecordBatch v2 batches.

Role: the Spark sink hands Arrow columns (values, optional keys, timestamps, optional headers) for
one partition; ``iter_seal_columns`` turns them into SealedBatch objects, lazily (``seal_columns``
returns them all as a list), without a Python loop per record when there are no headers. Every
per-record integer is computed with numpy, and pyarrow's ``binary_join_element_wise`` lays the
records out back to back in one buffer::

    row i = prefix_i | key_i | value_length_i | value_i | headers_i
    prefix_i = varint(length) 00 varint(timestampDelta) varint(offsetDelta) varint(keyLength)

The data buffer of that joined column is exactly the concatenated records sections of its
batches; its offsets give the record boundaries. Batches are cut greedily by ``batch_size`` with
the same rule as RecordBatchBuilder (a record joins the batch if the uncompressed batch stays
within batch_size; the first record always does) before any bytes are written (with a
CompressionRatioEstimator, within batch_size over the estimated ratio instead, so that
batch_size bounds the compressed batch as in Java's producer), then rows are
encoded a few MiB of whole batches at a time, and each batch costs one compress call (and, at
encode time, one CRC). Each batch is compressed only when the consumer of ``iter_seal_columns``
asks for it, so a consumer that queues each batch before asking for the next holds at most one
chunk of encoded rows outside its queue.

Invariants: records keep input order; offset deltas restart at 0 in every batch; timestamp deltas
are relative to the batch's first record, which is its base timestamp; max timestamp is the
batch maximum; when uncompressed, the output equals, byte for byte, what appending the same
records one by one to RecordBatchBuilder produces (tests hold the two paths to that).
Headers force a per-record Python step for encoding the header bytes only.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.records.arrow import (
    BinaryArray,
    ByteColumn,
    binary_column,
    binary_scalar,
    byte_column,
)
from kafka_sink.records.batch import (
    BATCH_HEADER_SIZE,
    Header,
    SealedBatch,
    encode_headers,
    encode_varint,
)
from kafka_sink.records.compression import CompressionType, compressor

__all__ = [
    "CompressionRatioEstimator",
    "iter_seal_binary_columns",
    "iter_seal_columns",
    "seal_columns",
]

_I64 = npt.NDArray[np.int64]
_INT32_MAX = (1 << 31) - 1
_NO_HEADERS = b"\x00"
_CHUNK_BYTES = 4 << 20
# Java's COMPRESSION_RATE_ESTIMATION_FACTOR: head room over the estimated ratio.
_RATIO_MARGIN = 1.05


class CompressionRatioEstimator:
    """The compressed/uncompressed ratio last seen for one stream of batches (topic and codec).

    Java's producer sizes compressed batches by an estimated compression ratio, so batch.size
    bounds what goes on the wire; ``seal_columns`` does the same when handed one of these and
    updates it with the exact ratio of the batches it sealed. It starts at 1.0 (no stretch).
    """

    __slots__ = ("ratio",)

    def __init__(self, ratio: float = 1.0) -> None:
        self.ratio = ratio

    def __repr__(self) -> str:
        return f"CompressionRatioEstimator(ratio={self.ratio:.3f})"


def _zigzag(values: _I64) -> npt.NDArray[np.uint64]:
    return ((values << 1) ^ (values >> 63)).view(np.uint64)


def _varint_widths(values: _I64) -> _I64:
    """Bytes of each value's zigzag varint (1..10)."""
    z = _zigzag(values)
    widths = np.ones(len(values), dtype=np.int64)
    if len(values) == 0:
        return widths
    zmax = int(z.max())
    shift = 7
    while shift < 64 and zmax >> shift:
        widths += z >= np.uint64(1 << shift)
        shift += 7
    return widths


def _positive_varint_widths(values: _I64) -> _I64:
    """Zigzag varint widths for values known to be in [0, 2**31)."""
    widths = 1 + (values >= 64).astype(np.int64)
    widths += values >= 1 << 13
    widths += values >= 1 << 20
    widths += values >= 1 << 27
    return widths


def _width_of(z: int) -> int:
    width = 1
    while z > 0x7F:
        z >>= 7
        width += 1
    return width


def _pack_varints(columns: Sequence[_I64 | int], n: int) -> tuple[_I64, npt.NDArray[np.uint8]]:
    """Per row, the zigzag varints of ``columns`` back to back: (row offsets, bytes).

    Rows are laid out in an (n x sum of max widths) matrix. A column with one value on every
    row is filled with its encoded bytes; a column whose varints all have one width is written
    without per-row widths; only columns whose width varies get a per-row width, and the matrix
    is compacted with a mask only then.
    """
    # (zigzag values or None, per-row widths or None, width, constant bytes or None)
    plan: list[tuple[_I64 | None, _I64 | None, int, bytes | None]] = []
    for values in columns:
        if isinstance(values, int):
            constant = encode_varint(values)
            plan.append((None, None, len(constant), constant))
            continue
        z = (values << 1) ^ (values >> 63)  # zigzag; every value here is far below 2**62
        low = int(z.min())
        high = int(z.max())
        if low == high:
            constant = encode_varint(int(values[0]))
            plan.append((None, None, len(constant), constant))
            continue
        low_width = _width_of(low)
        high_width = _width_of(high)
        if low_width == high_width:
            plan.append((z, None, high_width, None))
            continue
        widths = np.full(n, low_width, dtype=np.int64)
        for w in range(low_width, high_width):
            widths += z >= 1 << (7 * w)
        plan.append((z, widths, high_width, None))
    total_width = sum(width for _z, _w, width, _c in plan)
    matrix = np.empty((n, total_width), dtype=np.uint8)
    mask: npt.NDArray[np.bool_] | None = None
    row_lengths: _I64 | int = 0
    col = 0
    for column_z, column_widths, width, fill in plan:
        if fill is not None:
            matrix[:, col : col + width] = np.frombuffer(fill, dtype=np.uint8)
        else:
            assert column_z is not None
            for j in range(width):
                byte = column_z >> (7 * j) if j else column_z
                if j < width - 1:
                    byte = byte & 0x7F
                    if column_widths is None:
                        byte |= 0x80
                    else:
                        byte |= (column_widths > j + 1) << 7
                matrix[:, col + j] = byte
        if column_widths is None:
            row_lengths = row_lengths + width
        else:
            if mask is None:
                mask = np.ones((n, total_width), dtype=np.bool_)
            for j in range(1, width):
                mask[:, col + j] = column_widths > j
            row_lengths = row_lengths + column_widths
        col += width
    offsets = np.zeros(n + 1, dtype=np.int64)
    if mask is None:
        offsets[1:] = np.arange(1, n + 1, dtype=np.int64) * total_width
        return offsets, matrix.reshape(-1)
    # Row-major boolean selection keeps each row's varints in column order, rows in order.
    np.cumsum(row_lengths, out=offsets[1:])
    return offsets, matrix[mask]


def _binary_array(offsets: _I64, data: npt.NDArray[np.uint8], large: bool) -> Any:
    n = len(offsets) - 1
    if large:
        return pa.Array.from_buffers(
            pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    )


# Offset delta varint widths by position in the batch: [start, end) -> width.
_OFFSET_WIDTH_SEGMENTS = (
    (0, 64, 1),
    (64, 1 << 13, 2),
    (1 << 13, 1 << 20, 3),
    (1 << 20, 1 << 27, 4),
)
_OFFSET_WIDTH_MAX = 5


def _abs_varint_widths(deltas: _I64) -> _I64:
    """Zigzag varint widths of signed deltas of magnitude below 2**31."""
    # zigzag(d) < 2**(7k) exactly when (d ^ (d >> 63)) < 2**(7k - 1).
    return _positive_varint_widths(deltas ^ (deltas >> 63))


def _split_constant_ts(
    fixed_sizes: _I64, limit: int, segment_ends: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Greedy boundaries when every timestamp delta encodes in one byte.

    A record's size then depends only on its position in the batch through the offset delta
    width (1 byte below 64, 2 below 8192, ...), so one prefix-sum array per width answers "how
    many records fit" with a binary search per width segment: no per-record work per batch.
    """
    n = len(fixed_sizes)
    # Searched through memoryviews: bisect on a memoryview is much cheaper per call than numpy's
    # scalar searchsorted, and unlike a list it costs no conversion of the whole array.
    prefix_sums: dict[int, memoryview] = {}

    def cumulative(width: int) -> memoryview:
        if width not in prefix_sums:
            body = fixed_sizes + (1 + width)
            sums = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(body + _positive_varint_widths(body), out=sums[1:])
            prefix_sums[width] = sums.data
        return prefix_sums[width]

    widths = [*_OFFSET_WIDTH_SEGMENTS, (1 << 27, n + 1, _OFFSET_WIDTH_MAX)]
    first = cumulative(1)
    starts: list[int] = []
    ends: list[int] = []
    start = 0
    for last_row in segment_ends:
        while start < last_row:
            remaining = limit
            pos = start
            end = last_row
            for seg_start, seg_end, width in widths:
                if seg_start >= last_row - start:
                    break
                sums = first if width == 1 else cumulative(width)
                stop = min(last_row, start + seg_end)
                base = sums[pos]
                # Last index whose prefix sum stays within the room left, searched in the segment.
                last = bisect.bisect_right(sums, base + remaining, pos, stop + 1) - 1
                if last < stop:
                    end = last
                    break
                remaining -= sums[stop] - base
                pos = stop
            end = max(end, start + 1)
            starts.append(start)
            ends.append(end)
            start = end
    return starts, ends


def _split_varying_ts(
    fixed_sizes: _I64, ts: _I64, limit: int, segment_ends: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Greedy boundaries when timestamp delta widths depend on the batch's first timestamp.

    Each batch's candidate window is bounded with a start-independent lower bound of the record
    sizes (each delta at least one byte), then sized exactly over that window.
    """
    n = len(fixed_sizes)
    lower_body = fixed_sizes + 2
    lower = lower_body + _positive_varint_widths(lower_body)
    cum_lower = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lower, out=cum_lower[1:])
    offset_widths = _positive_varint_widths(np.arange(n, dtype=np.int64))
    base_body = fixed_sizes + offset_widths  # only valid as a window starting at 0, see below
    starts: list[int] = []
    ends: list[int] = []
    start = 0
    segment = iter(segment_ends)
    last_row = next(segment)
    while start < n:
        while start >= last_row:
            last_row = next(segment)
        # Records start..upper-1 are the most that could fit: exact sizes are >= lower.
        upper = int(np.searchsorted(cum_lower, cum_lower[start] + limit, side="right")) - 1
        upper = min(upper, last_row)
        if upper <= start + 1:
            end = start + 1
        else:
            count = upper - start
            if start == 0:
                body = base_body[:count].copy()
            else:
                body = fixed_sizes[start:upper] + offset_widths[:count]
            body += _abs_varint_widths(ts[start:upper] - ts[start])
            body += _positive_varint_widths(body)
            fits = int(np.searchsorted(np.cumsum(body), limit, side="right"))
            end = start + max(fits, 1)
        starts.append(start)
        ends.append(end)
        start = end
    return starts, ends


def _split(
    fixed_sizes: _I64, ts: _I64 | None, limit: int, segment_ends: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Greedy batch boundaries (starts, ends) with RecordBatchBuilder's exact fit rule.

    ``fixed_sizes[i]`` is record i's body size without its offset and timestamp deltas, which
    (with the length varint) depend on where its batch starts. No batch spans a segment end.
    """
    if ts is None or int(ts.max()) - int(ts.min()) <= 63:
        return _split_constant_ts(fixed_sizes, limit, segment_ends)
    return _split_varying_ts(fixed_sizes, ts, limit, segment_ends)


def _cast(array: BinaryArray, large: bool) -> BinaryArray:
    target = pa.large_binary() if large else pa.binary()
    return array if array.type == target else array.cast(target)


def seal_columns(
    values: object,
    keys: object = None,
    *,
    timestamps_ms: int | npt.NDArray[np.int64],
    headers: Sequence[Sequence[Header] | None] | None = None,
    compression_type: CompressionType,
    compression_level: int | None = None,
    batch_size: int,
    ratio_estimator: CompressionRatioEstimator | None = None,
    segment_ends: Sequence[int] | None = None,
) -> list[SealedBatch]:
    """Every batch of :func:`iter_seal_columns` (same arguments), as a list."""
    return list(
        iter_seal_columns(
            values,
            keys,
            timestamps_ms=timestamps_ms,
            headers=headers,
            compression_type=compression_type,
            compression_level=compression_level,
            batch_size=batch_size,
            ratio_estimator=ratio_estimator,
            segment_ends=segment_ends,
        )
    )


def iter_seal_columns(
    values: object,
    keys: object = None,
    *,
    timestamps_ms: int | npt.NDArray[np.int64],
    headers: Sequence[Sequence[Header] | None] | None = None,
    compression_type: CompressionType,
    compression_level: int | None = None,
    batch_size: int,
    ratio_estimator: CompressionRatioEstimator | None = None,
    segment_ends: Sequence[int] | None = None,
) -> Iterator[SealedBatch]:
    """Encode whole columns into sealed batches of at most ``batch_size`` bytes each, lazily.

    Input is checked and batch boundaries are computed on the first ``next()``; after that the
    records are encoded a chunk (a few MiB of whole batches) at a time and each batch is
    compressed only when it is asked for, so a consumer that queues every batch before taking the
    next one holds at most one chunk of encoded records besides what it queued.

    ``values``/``keys``: pyarrow Binary, LargeBinary, String (UTF-8 bytes as-is) arrays, chunked
    or sliced, or sequences of ``bytes | None``; nulls are null keys / tombstones. ``keys=None``
    means every key is null. ``timestamps_ms``: one int for every record, or an int64 array.
    ``headers``: None, or one header list (or None) per row. A record larger than the batch
    size goes alone in its batch; the caller decides whether it is too large to send.

    ``ratio_estimator`` (compressed codecs only): batches are cut at ``batch_size`` divided by
    the estimated compression ratio (with Java's 5% margin; never below ``batch_size``), so
    ``batch_size`` bounds the compressed batch. A stretched batch that still compresses above
    ``batch_size`` is cut again by the uncompressed rule (within its rows); the estimator takes the
    ratio observed here. Without one, ``batch_size`` bounds the uncompressed size.

    ``segment_ends``: increasing row indexes ending with ``len(values)``; no batch spans a
    segment end, so one call seals several partitions' rows (sorted by partition) exactly as
    one call per segment would, without paying the per-call numpy overhead once per segment.
    """
    yield from iter_seal_binary_columns(
        binary_column(values, "values"),
        None if keys is None else binary_column(keys, "keys"),
        timestamps_ms=timestamps_ms,
        headers=headers,
        compression_type=compression_type,
        compression_level=compression_level,
        batch_size=batch_size,
        ratio_estimator=ratio_estimator,
        segment_ends=segment_ends,
    )


def iter_seal_binary_columns(
    values: BinaryArray,
    keys: BinaryArray | None,
    *,
    timestamps_ms: int | npt.NDArray[np.int64],
    headers: Sequence[Sequence[Header] | None] | None = None,
    compression_type: CompressionType,
    compression_level: int | None = None,
    batch_size: int,
    ratio_estimator: CompressionRatioEstimator | None = None,
    segment_ends: Sequence[int] | None = None,
) -> Iterator[SealedBatch]:
    """:func:`iter_seal_columns` of columns already normalised (``records.arrow.binary_column``),
    as the bulk path hands them: they are read as they are, not normalised again."""
    compression_type = CompressionType(compression_type)
    compress = compressor(compression_type, compression_level)
    vcol = byte_column(values)
    n = len(vcol)
    if n == 0:
        return
    kcol: ByteColumn | None = None
    if keys is not None:
        kcol = byte_column(keys)
        if len(kcol) != n:
            raise ValueError(f"keys has {len(kcol)} rows, values has {n}")
    ts: _I64 | None
    if isinstance(timestamps_ms, int | np.integer):
        scalar_ts: int | None = int(timestamps_ms)
        ts = None
    else:
        scalar_ts = None
        ts = np.ascontiguousarray(np.asarray(timestamps_ms, dtype=np.int64))
        if ts.shape != (n,):
            raise ValueError(f"timestamps_ms has shape {ts.shape}, values has {n} rows")

    header_column: BinaryArray | None = None
    header_sizes: _I64 | int = 1
    if headers is not None:
        if len(headers) != n:
            raise ValueError(f"headers has {len(headers)} rows, values has {n}")
        encoded = [encode_headers(h) if h else _NO_HEADERS for h in headers]
        if any(e is not _NO_HEADERS for e in encoded):
            header_column = pa.array(encoded, type=pa.binary())
            header_sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=n)

    value_lengths = vcol.lengths
    key_lengths = kcol.lengths if kcol is not None else np.full(n, -1, dtype=np.int64)
    # Everything in a record's body except the two deltas: attributes, key, value, headers.
    fixed = (
        1
        + _varint_widths(key_lengths)
        + np.maximum(key_lengths, 0)
        + _varint_widths(value_lengths)
        + np.maximum(value_lengths, 0)
        + header_sizes
    )
    room = batch_size - BATCH_HEADER_SIZE
    stretched = room
    if ratio_estimator is not None and compression_type is not CompressionType.NONE:
        estimate = ratio_estimator.ratio * _RATIO_MARGIN
        if 0.0 < estimate < 1.0:
            stretched = int(room / estimate)
    if segment_ends is None:
        segment_ends = (n,)
    elif (
        not segment_ends
        or segment_ends[-1] != n
        or any(a >= b for a, b in itertools.pairwise([0, *segment_ends]))
    ):
        raise ValueError(f"segment_ends must increase and end with {n}")
    starts, ends = _split(fixed, ts, stretched, segment_ends)
    starts_arr = np.asarray(starts, dtype=np.int64)
    counts = np.asarray(ends, dtype=np.int64) - starts_arr
    offset_deltas = np.arange(n, dtype=np.int64) - np.repeat(starts_arr, counts)
    if ts is None:
        ts_deltas = np.zeros(n, dtype=np.int64)
    else:
        ts_deltas = ts - np.repeat(ts[starts_arr], counts)
    bodies = fixed + _varint_widths(ts_deltas) + _varint_widths(offset_deltas)
    sizes = bodies + _positive_varint_widths(bodies)
    cumulative = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=cumulative[1:])

    if ts is None:
        assert scalar_ts is not None
        base_timestamps: list[int] = [scalar_ts] * len(starts)
        max_timestamps: list[int] = base_timestamps
    else:
        base_timestamps = ts[starts_arr].tolist()
        max_timestamps = np.maximum.reduceat(ts, starts_arr).tolist()
    counts_list = counts.tolist()
    max_record_sizes = np.maximum.reduceat(sizes, starts_arr).tolist()

    # Encode a few MiB of whole batches at a time: the buffers stay cache-sized and get reused
    # instead of faulting in one buffer as large as the whole input.
    chunk_ids = cumulative[starts_arr] // _CHUNK_BYTES
    chunk_bounds = [0, *(np.flatnonzero(np.diff(chunk_ids)) + 1).tolist(), len(starts)]
    uncompressed_total = 0
    compressed_total = 0
    for first_batch, end_batch in itertools.pairwise(chunk_bounds):
        row_start = starts[first_batch]
        row_end = ends[end_batch - 1]
        section, record_offsets = _encode_rows(
            row_start,
            row_end,
            bodies=bodies,
            ts_deltas=0 if ts is None else ts_deltas,
            offset_deltas=offset_deltas,
            key_lengths=key_lengths,
            value_lengths=value_lengths,
            kcol=kcol,
            vcol=vcol,
            header_column=header_column,
            expected_size=int(cumulative[row_end] - cumulative[row_start]),
        )
        for b in range(first_batch, end_batch):
            count = counts_list[b]
            lo = starts[b] - row_start
            section_start = record_offsets[lo]
            section_end = record_offsets[lo + count]
            records = compress(section[section_start:section_end])
            uncompressed_total += section_end - section_start
            compressed_total += len(records)
            if len(records) > room and stretched > room and count > 1:
                # The estimate was too optimistic for these rows: cut them again by the
                # uncompressed rule, in place, so the output keeps input order.
                lo, hi = starts[b], ends[b]
                yield from iter_seal_columns(
                    vcol.array.slice(lo, hi - lo),
                    None if kcol is None else kcol.array.slice(lo, hi - lo),
                    timestamps_ms=ts[lo:hi] if ts is not None else base_timestamps[b],
                    headers=None if headers is None else headers[lo:hi],
                    compression_type=compression_type,
                    compression_level=compression_level,
                    batch_size=batch_size,
                )
                continue
            yield SealedBatch(
                compression_type=compression_type,
                record_count=count,
                base_timestamp_ms=base_timestamps[b],
                max_timestamp_ms=max_timestamps[b],
                last_offset_delta=count - 1,
                records=records,
                size_bytes=BATCH_HEADER_SIZE + len(records),
                uncompressed_size_bytes=BATCH_HEADER_SIZE + section_end - section_start,
                max_record_size=max_record_sizes[b],
            )
        del section, record_offsets
    if ratio_estimator is not None and uncompressed_total:
        ratio_estimator.ratio = compressed_total / uncompressed_total


def _encode_rows(
    row_start: int,
    row_end: int,
    *,
    bodies: _I64,
    ts_deltas: _I64 | int,
    offset_deltas: _I64,
    key_lengths: _I64,
    value_lengths: _I64,
    kcol: ByteColumn | None,
    vcol: ByteColumn,
    header_column: BinaryArray | None,
    expected_size: int,
) -> tuple[memoryview, memoryview]:
    """The records of rows [row_start, row_end) back to back, and each row's start in them."""
    rows = slice(row_start, row_end)
    m = row_end - row_start
    large = expected_size > _INT32_MAX
    prefix = _binary_array(
        *_pack_varints(
            [
                bodies[rows],
                0,  # record attributes
                ts_deltas if isinstance(ts_deltas, int) else ts_deltas[rows],
                offset_deltas[rows],
                key_lengths[rows],
            ],
            m,
        ),
        large,
    )
    lengths = value_lengths[rows]
    if int(lengths.min()) == int(lengths.max()):
        value_length: Any = binary_scalar(encode_varint(int(lengths[0])), large)
    else:
        value_length = _binary_array(*_pack_varints([lengths], m), large)
    pieces: list[Any] = [prefix]
    if kcol is not None:
        pieces.append(_cast(kcol.array.slice(row_start, m), large))
    pieces.append(value_length)
    pieces.append(_cast(vcol.array.slice(row_start, m), large))
    if header_column is not None:
        pieces.append(_cast(header_column.slice(row_start, m), large))
    else:
        pieces.append(binary_scalar(_NO_HEADERS, large))
    pieces.append(binary_scalar(b"", large))  # the separator
    joined = pc.binary_join_element_wise(*pieces, null_handling="replace", null_replacement="")
    buffers = joined.buffers()
    offsets = np.frombuffer(
        buffers[1], dtype=np.int64 if large else np.int32, count=joined.offset + m + 1
    )[joined.offset :]
    if int(offsets[-1] - offsets[0]) != expected_size:
        raise AssertionError("columnar encoding: records section size mismatch")
    return memoryview(buffers[2]), offsets.data
