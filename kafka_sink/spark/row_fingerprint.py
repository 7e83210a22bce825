"""The fingerprint of an Arrow batch's rows, computed on whole columns (executor side).

Role: an exactly-once task (``task.py``) folds the :class:`~kafka_sink.spark.fingerprint.
Fingerprint` of every input batch it writes, or, when the driver told it its partition of the
batch is already committed, of every batch it is given instead of writing them. A row's hash
covers its topic (the ``topic`` option when set, else the column), explicit partition, key,
value and timestamp as the input gives them; headers are left out (they are converted row by
row, which the hash must not cost), so a re-run that changes only headers is not told apart.
A null timestamp hashes as null, not as the time the producer stamps on it, so a re-run of the
same rows has the same fingerprint.

A byte field (topic, key, value) hashes to the sum modulo 2**64 of its 8-byte words (zero
padded), each multiplied by an odd constant of its position and its high half folded down (a
bijection of the word taking 0 to 0, so a change within one word always changes the sum and
zero padding adds nothing), plus its mixed length. That is two numpy operations over a whole
(rows x words) matrix, reading the bytes in order: values of different lengths are first
padded (``pyarrow.compute``'s ``ascii_rpad``, which treats each byte as a character) to a few
widths, at most a quarter longer. So a row hashes the same whatever the other rows of its batch.
Murmur2 (``records.murmur2_columns``, 32 bits), which walks the bytes word by word down the
rows, measured twice as slow on 1 KiB values (``benchmarks/bench_row_fingerprint.py``). The
fields of a row are then chained through a 64-bit mixer (SplitMix64's finaliser), and the
rows' hashes summed modulo 2**64: two different row sets collide with probability about 2**-64
for changes not crafted to collide (it is not a cryptographic hash).

Invariants: no per-row Python (numpy and pyarrow only); the fingerprint of a batch does not
depend on the order of its rows; the fingerprints of two batches add up to that of both
(``Fingerprint.plus``).
"""

from __future__ import annotations

from typing import Any

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
    lengths = np.maximum(as_byte_column(array).lengths, 0)  # null (-1): empty, then _NULL
    out = np.empty(n, dtype=np.uint64)
    first = int(lengths[0])
    if (lengths == first).all():
        out[:] = _hash_rows(_matrix(array, first), first)
    else:
        # Rows of similar lengths are padded with zero bytes to one width (at most a quarter
        # more bytes) and hashed as one matrix: a zero word adds nothing, so a row hashes the
        # same however wide it is padded, and its true length is hashed beside.
        widths = _width(lengths)
        for width in np.unique(widths):
            rows = np.flatnonzero(widths == width)
            group = array.take(arrow_ints(rows))
            string = pa.large_string() if pa.types.is_large_binary(array.type) else pa.string()
            padded = pc.ascii_rpad(group.view(string), int(width), padding="\x00")
            out[rows] = _hash_rows(_matrix(padded, int(width)), lengths[rows])
    if array.null_count:
        out[~valid_mask(array)] = _NULL
    return out


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


def _hash_rows(matrix: npt.NDArray[np.uint8], lengths: int | npt.NDArray[np.int64]) -> U64:
    """The hash of each row of a (rows x width) byte matrix whose true lengths are given."""
    count, width = matrix.shape
    out: U64 = _mixed(np.broadcast_to(np.asarray(lengths, dtype=np.uint64), (count,)).copy())
    words = (width + 7) // 8
    if not words:
        return out
    if width % 8 or not matrix.flags.c_contiguous:
        padded = np.zeros((count, words * 8), dtype=np.uint8)
        padded[:, :width] = matrix
        matrix = padded
    # Per word: multiply by its position's odd constant, fold the high half down: a bijection
    # of the word, different per position, taking 0 to 0, in two passes over the matrix.
    mixed = matrix.view("<u8") * _positions(words)
    mixed ^= mixed >> np.uint64(32)
    out += mixed.sum(axis=1, dtype=np.uint64)
    return out


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
