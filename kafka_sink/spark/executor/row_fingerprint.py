"""The fingerprint of an Arrow batch's rows, computed on whole columns (executor side).

Role: an exactly-once task (``task.py``) folds the :class:`~kafka_sink.spark.fingerprint.
Fingerprint` of every input batch it writes, or, when the driver told it its partition of the
batch is already committed, of every batch it is given instead of writing them. A row's hash
covers its topic (the ``topic`` option when set, else the column), explicit partition, key,
value and timestamp as the input gives them; headers are left out (they are converted row by
row, which the hash must not cost), so a re-run that changes only headers is not told apart.
A null timestamp hashes as null, not as the time the producer stamps on it, so a re-run of the
same rows has the same fingerprint.

A byte field (topic, key, value) shorter than ``LONG_VALUE_BYTES`` (512) hashes to the sum
modulo 2**64 of its 8-byte words (zero padded), each with its high half folded down (a bijection
of the word taking 0 to 0, so a change within one word always changes the sum and zero padding
adds nothing) and multiplied by an odd constant of its position, plus its mixed length. The
words are read in place (a strided view of the column's buffer) when every row has one length,
else from rows padded (``pyarrow.compute``'s ``ascii_rpad``) to a few widths at most a quarter
longer; either way one fused multiply-sum per matrix. So a row hashes the same whatever the rows
of its batch. From 512 bytes on, a field hashes to its CRC-32C (one native call per row, about
four times faster than the word sums at 1 KiB; 32 bits of the row's 64) times an odd constant,
plus its mixed length (``benchmarks/bench_row_fingerprint.py``). The fields of a row are then
chained through a 64-bit mixer (SplitMix64's finaliser), and the rows' hashes summed modulo
2**64: two different row sets collide with probability about 2**-64 (2**-32 where only a long
field differs) for changes not crafted to collide (it is not a cryptographic hash).

Invariants: no per-row Python below 512 bytes (numpy and pyarrow only; one CRC call per longer
field); the fingerprint of a batch does not depend on the order of its rows; the fingerprints of
two batches add up to that of both (``Fingerprint.plus``).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import crc32c
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.records.arrow import (
    arrow_ints,
    as_binary_array,
    as_byte_column,
    int_column,
    valid_mask,
)
from kafka_sink.spark.fingerprint import Fingerprint
from kafka_sink.spark.schema import InputLayout

__all__ = ["batch_fingerprint"]

U64 = npt.NDArray[np.uint64]

# Distinct stand-ins for a null field and for a column the input does not have.
_NULL = np.uint64(0x9E3779B97F4A7C15)
_ABSENT = np.uint64(0xD1B54A32D192ED03)
# The chaining multiplier (odd, so it permutes 2**64) and SplitMix64's finaliser constants.
_CHAIN = np.uint64(0xFF51AFD7ED558CCD)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
# Values from this long on hash by CRC-32C (faster there), spread over 64 bits by an odd constant.
LONG_VALUE_BYTES = 512
_CHECKSUM = np.uint64(0xA0761D6478BD642F)


def batch_fingerprint(
    batch: pa.RecordBatch, layout: InputLayout, topic_option: str | None
) -> Fingerprint:
    """The fingerprint of ``batch``'s rows (see the module docstring)."""
    n = batch.num_rows
    if n == 0:
        return Fingerprint(0, 0)
    if topic_option is not None:
        topic = _bytes_hash(pa.array([topic_option.encode("utf-8")], pa.binary()), 1)
        fields: list[U64] = [np.full(n, topic[0], dtype=np.uint64)]
    else:
        fields = [_column_hash(batch, "topic", layout.topic_column, n, _bytes_hash)]
    fields += [
        _column_hash(batch, "partition", layout.partition_column, n, _int_hash),
        _column_hash(batch, "key", layout.key_column, n, _bytes_hash),
        _bytes_hash(batch.column("value"), n),
        _column_hash(batch, "timestamp", layout.timestamp is not None, n, _int_hash),
    ]
    row = np.zeros(n, dtype=np.uint64)
    for field in fields:
        row *= _CHAIN
        row += field
        _mix(row)
    return Fingerprint(n, int(row.sum(dtype=np.uint64)))


def _column_hash(batch: pa.RecordBatch, name: str, present: bool, n: int, hash_of: Any) -> U64:
    if not present:
        return np.full(n, _ABSENT, dtype=np.uint64)
    hashed: U64 = hash_of(batch.column(name), n)
    return hashed


def _mix(z: U64) -> None:
    """SplitMix64's finaliser, in place (uint64 arithmetic wraps modulo 2**64)."""
    z ^= z >> np.uint64(30)
    z *= _MIX_1
    z ^= z >> np.uint64(27)
    z *= _MIX_2
    z ^= z >> np.uint64(31)


def _bytes_hash(column: Any, n: int) -> U64:
    """Per row: the hash of its bytes (module docstring); null -> _NULL."""
    array = as_binary_array(column, "fingerprint")
    if pa.types.is_null(array.type) or array.null_count == n:
        return np.full(n, _NULL, dtype=np.uint64)
    column_bytes = as_byte_column(array)
    lengths = np.maximum(column_bytes.lengths, 0)  # null (-1): empty, then _NULL
    out: U64 = _mixed(lengths.astype(np.uint64))
    long_rows = lengths >= LONG_VALUE_BYTES
    any_long = bool(long_rows.any())
    if any_long and long_rows.all():
        # JSON documents of a kilobyte and more: every row checksummed, no index arrays.
        out += _checksums(column_bytes.offsets, column_bytes.data, None) * _CHECKSUM
    elif any_long:
        rows = np.flatnonzero(long_rows)
        out[rows] += _checksums(column_bytes.offsets, column_bytes.data, rows) * _CHECKSUM
    short_rows = ~long_rows
    first = int(lengths[0])
    if not any_long and (lengths == first).all():
        out += _fixed_width_hash(column_bytes.offsets, column_bytes.data, n, first)
    elif short_rows.any():
        # Rows of similar lengths are padded with zero bytes to one width (at most a quarter
        # more bytes) and hashed as one matrix: a zero word adds nothing, so a row hashes the
        # same however wide it is padded, and its true length is hashed beside.
        widths = np.where(short_rows, _width(lengths), -1)
        string = pa.large_string() if pa.types.is_large_binary(array.type) else pa.string()
        for width in np.unique(widths[short_rows]):
            if not width:
                continue
            rows = np.flatnonzero(widths == width)
            group = array.take(arrow_ints(rows))
            padded = pc.ascii_rpad(group.view(string), int(width), padding="\x00")
            out[rows] += _words_hash(_matrix(padded, int(width)).view("<u8"))
    if array.null_count:
        out[~valid_mask(array)] = _NULL
    return out


def _fixed_width_hash(
    offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8], n: int, width: int
) -> U64:
    """The word sums of ``n`` rows of ``width`` bytes each, read where they lie: the same as
    the padded matrix's, without copying the column (unaligned views of its buffer)."""
    begin = int(offsets[0])
    words, rest = divmod(width, 8)
    out = np.zeros(n, dtype=np.uint64)
    if words:
        out += _words_hash(_words(data, begin, (n, words), (width, 8)))
    if rest:
        # The last ``rest`` bytes as a word zero-padded at position ``words``: read 8 bytes
        # there (the next row's first bytes too) and keep the low ``rest`` of them; the last
        # rows, whose 8 bytes would run past the buffer (at most 8), are copied.
        first_tail = begin + words * 8
        tails = np.zeros(n, dtype=np.uint64)
        viewed = min(n, max(0, (len(data) - 8 - first_tail) // width + 1))
        if viewed:
            tails[:viewed] = _words(data, first_tail, (viewed,), (width,))
        for row in range(viewed, n):
            at = first_tail + row * width
            tails[row] = int.from_bytes(data[at : at + rest].tobytes(), "little")
        tails &= np.uint64((1 << (8 * rest)) - 1)
        out += _folded(tails) * _positions(words + 1)[words]
    return out


def _checksums(
    offsets: npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    rows: npt.NDArray[np.intp] | None,
) -> U64:
    """CRC-32C of each of ``rows``' bytes (None: of every row): one native call per row beats
    numpy's word sums from about 512 bytes on (``benchmarks/bench_row_fingerprint.py``). The
    call itself is a small part (CRC-32C runs at tens of GB/s); the loop around it is kept to
    a slice and a call per row."""
    view = memoryview(data.data)
    bounds = offsets.tolist()
    crc = crc32c.crc32c
    if rows is None:
        sums = [crc(view[begin:end]) for begin, end in pairwise(bounds)]
    else:
        sums = [crc(view[bounds[r] : bounds[r + 1]]) for r in rows.tolist()]
    return np.array(sums, dtype=np.uint64)


def _width(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The padded width of each length: a multiple of max(8, a quarter of its power of two)."""
    exponent = np.frexp(lengths.astype(np.float64))[1].astype(np.int64)
    step = np.left_shift(1, np.maximum(exponent - 3, 3))
    widths: npt.NDArray[np.int64] = -(-lengths // step) * step
    return widths


def _matrix(array: Any, width: int) -> npt.NDArray[np.uint8]:
    """The bytes of a column whose values are all ``width`` long, as a (rows x width) matrix."""
    column = as_byte_column(array)
    begin = int(column.offsets[0])
    matrix: npt.NDArray[np.uint8] = column.data[begin : begin + len(column) * width]
    return matrix.reshape(len(column), width)


def _words(
    data: npt.NDArray[np.uint8], offset: int, shape: tuple[int, ...], strides: tuple[int, ...]
) -> U64:
    """Little-endian 8-byte words of ``data`` at any byte offsets: a view (unaligned reads)."""
    view: U64 = np.ndarray(shape, dtype="<u8", buffer=data, offset=offset, strides=strides)
    return view


def _words_hash(words: U64) -> U64:
    """Per row of a (rows x words) matrix: each word folded, times its position's constant,
    summed (one fused multiply-sum)."""
    summed: U64 = _folded(words) @ _positions(words.shape[1])
    return summed


def _folded(words: U64) -> U64:
    """Each word with its high half folded into its low half: a bijection taking 0 to 0, so a
    change in a high byte still reaches the low bits of the sums its product goes into."""
    folded: U64 = words >> np.uint64(32)
    folded ^= words
    return folded


def _positions(words: int) -> U64:
    """One odd constant per word position, so that moving a word changes the hash."""
    return _mixed(np.arange(1, words + 1, dtype=np.uint64) * _CHAIN) | np.uint64(1)


def _mixed(z: U64) -> U64:
    _mix(z)
    return z


def _int_hash(column: Any, n: int) -> U64:
    """Per row: the integer (a timestamp in its own unit) as 64 bits; null -> _NULL."""
    array = column.cast(pa.int64()) if pa.types.is_timestamp(column.type) else column
    out: U64 = int_column(array, 0, np.int64).view(np.uint64)
    if array.null_count:
        out[~valid_mask(array)] = _NULL
    return out
