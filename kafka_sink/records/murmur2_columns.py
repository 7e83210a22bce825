"""Murmur2 over a whole key column with numpy: ``murmur2.partition_for_key``, vectorised.

Role: the bulk path (``producer.bulk``) partitions a whole Arrow key column at once. Keys are
grouped by length, each group read as an (n x words) uint32 matrix, and the rounds run on whole
columns (numpy's uint32 multiply wraps modulo 2**32 by itself). The constants and the algorithm
are ``records.murmur2``'s; this module only changes the shape of the work.

Invariant: ``partitions_for_keys(keys, n)`` is exactly ``[partition_for_key(k, n) for k in keys]``
(the tests hold the two to each other); a null key raises, as it has no hash partition.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kafka_sink.records.arrow import BinaryArray, ByteColumn, as_byte_column, byte_column
from kafka_sink.records.murmur2 import MASK, SEED, M

__all__ = ["murmur2_array", "partitions_for_key_column", "partitions_for_keys"]


def _hash_group(matrix: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]:
    """Unsigned murmur2 of each row of an (n x length) uint8 matrix (one key per row)."""
    count, length = matrix.shape
    m = np.uint32(M)
    h = np.full(count, (SEED ^ length) & MASK, dtype=np.uint32)
    words = length >> 2
    if words:
        word_matrix = np.ascontiguousarray(matrix[:, : words * 4]).view("<u4")
        k = np.empty(count, dtype=np.uint32)
        shifted = np.empty(count, dtype=np.uint32)
        for j in range(words):
            np.multiply(word_matrix[:, j], m, out=k)
            np.right_shift(k, 24, out=shifted)
            k ^= shifted
            k *= m
            h *= m
            h ^= k
    tail = length & 3
    if tail:
        t = words * 4
        if tail == 3:
            h ^= matrix[:, t + 2].astype(np.uint32) << np.uint32(16)
        if tail >= 2:
            h ^= matrix[:, t + 1].astype(np.uint32) << np.uint32(8)
        h ^= matrix[:, t]
        h *= m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h


def _gather(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], length: int
) -> npt.NDArray[np.uint8]:
    if length == 0:
        return np.zeros((len(starts), 0), dtype=np.uint8)
    matrix: npt.NDArray[np.uint8] = data[starts[:, None] + np.arange(length, dtype=np.int64)]
    return matrix


def murmur2_array(keys: object) -> npt.NDArray[np.uint32]:
    """Unsigned 32-bit murmur2 of every key of a non-null key column (pyarrow or sequence)."""
    return _murmur2(as_byte_column(keys))


def _murmur2(column: ByteColumn) -> npt.NDArray[np.uint32]:
    if column.null_count:
        raise ValueError("partitions_for_keys: null keys have no hash partition")
    n = len(column)
    out = np.empty(n, dtype=np.uint32)
    if n == 0:
        return out
    lengths = column.lengths
    starts = column.offsets[:-1]
    first = int(lengths[0])
    if (lengths == first).all():
        # One length (the usual case, e.g. fixed-size ids): the keys are one contiguous
        # n x length block of the data buffer, no gather needed.
        begin = int(starts[0])
        return _hash_group(column.data[begin : begin + n * first].reshape(n, first))
    order = np.argsort(lengths, kind="stable")
    bounds = np.flatnonzero(np.diff(lengths[order])) + 1
    for group in np.split(order, bounds):
        length = int(lengths[group[0]])
        out[group] = _hash_group(_gather(column.data, starts[group], length))
    return out


def partitions_for_keys(keys: object, num_partitions: int) -> npt.NDArray[np.int32]:
    """Vectorised ``partition_for_key`` over a key column (pyarrow or a sequence of bytes);
    keys must not be null."""
    return _partitions(as_byte_column(keys), num_partitions)


def partitions_for_key_column(keys: BinaryArray, num_partitions: int) -> npt.NDArray[np.int32]:
    """``partitions_for_keys`` of a column already normalised (``records.arrow.binary_column``)."""
    return _partitions(byte_column(keys), num_partitions)


def _partitions(keys: ByteColumn, num_partitions: int) -> npt.NDArray[np.int32]:
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    hashes = _murmur2(keys)
    positive = hashes & np.uint32(0x7FFFFFFF)
    return (positive % np.uint32(num_partitions)).astype(np.int32)
