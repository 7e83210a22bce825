"""Murmur2 key hashing exactly as Java's default partitioner does it.

Role: map a serialized key to a partition the same way every Java client does, so keyed records
land where Kafka Streams, Connect and other producers put the same key.

Algorithm: 32-bit Murmur2, seed 0x9747b28c, m = 0x5bd1e995, r = 24; little-endian 4-byte words;
the 1-3 tail bytes fall through (3 implies 2 implies 1); every product is taken modulo 2**32 and
every shift is logical. ``murmur2`` returns Java's signed int; the partition is
``(murmur2(key) & 0x7fffffff) % num_partitions`` (Java's toPositive, never abs()), and
``partition_for_key`` is the one definition of it: the producer's built-in partitioning uses it
(``send()``'s fast path inlines it, a test holding the two equal) and
``murmur2_columns.partitions_for_keys`` computes it over a column.

``murmur2`` hashes ``bytes`` with the ``murmurhash2`` package's native MurmurHash2 (the same
function: Kafka's murmur2 is MurmurHash2 with the seed below), 0.3-0.4 µs for a 16-byte key
against about 2 µs in Python, measured in one session; ``murmur2_python`` is the pure-Python
reference, used for other buffer types and when the package is not importable, and the tests
hold the two to each other.

``murmur2_columns.partitions_for_keys`` computes the same over a whole column with numpy. This
module imports neither numpy nor pyarrow: the driver's exactly-once paths use it and stay light.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

_native_murmur2: Callable[[bytes, int], int] | None
try:
    from murmurhash2 import murmurhash2 as _native_murmur2
except ImportError:  # pragma: no cover - a platform without the package's wheel
    _native_murmur2 = None

__all__ = [
    "MASK",
    "SEED",
    "M",
    "murmur2",
    "murmur2_python",
    "murmur2_unsigned",
    "partition_for_key",
    "to_positive",
]

# Kafka's murmur2 constants (Utils.murmur2): the seed, the multiplier, and the 32-bit mask.
SEED = 0x9747B28C
M = 0x5BD1E995
MASK = 0xFFFFFFFF
# Precompiled little-endian word readers for keys up to 255 bytes (send() hashes every key);
# the bound unpack_from methods save an attribute lookup per call.
_WORDS = tuple(struct.Struct(f"<{words}I").unpack_from for words in range(64))


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Java's ``Utils.murmur2``: the signed 32-bit hash of ``data``."""
    h = murmur2_unsigned(data)
    return h - 0x100000000 if h & 0x80000000 else h


def _murmur2_unsigned_python(data: bytes | bytearray | memoryview) -> int:
    return murmur2_python(data) & MASK


def _murmur2_unsigned_native(
    data: bytes | bytearray | memoryview, *, _native: Any = _native_murmur2, _seed: int = SEED
) -> int:
    if type(data) is bytes:
        h: int = _native(data, _seed)
        return h
    return murmur2_python(data) & MASK  # the native function takes bytes only


# The unsigned 32 bits of murmur2(data): what partitioning needs (``& 0x7fffffff`` gives the same
# partition as from the signed value). send()'s keyed path calls this once per record.
murmur2_unsigned = _murmur2_unsigned_python if _native_murmur2 is None else _murmur2_unsigned_native


def murmur2_python(
    data: bytes | bytearray | memoryview,
    *,
    _seed: int = SEED,
    _m: int = M,
    _mask: int = MASK,
    _words: tuple[Any, ...] = _WORDS,
) -> int:
    """Java's ``Utils.murmur2`` in Python: the signed 32-bit hash of ``data`` (the reference)."""
    # The constants arrive as keyword defaults (locals, not globals): without the native package
    # this runs once per keyed record on send()'s path.
    length = len(data)
    h = _seed ^ length
    words = length >> 2
    m = _m
    mask = _mask
    if words:
        unpack = _words[words] if words < 64 else struct.Struct(f"<{words}I").unpack_from
        for word in unpack(data):
            k = (word * m) & mask
            # One mask for both products: masking distributes over XOR.
            h = ((h * m) ^ ((k ^ (k >> 24)) * m)) & mask
    tail = length & 3
    if tail:
        t = words << 2
        if tail == 3:
            h ^= data[t + 2] << 16
        if tail >= 2:
            h ^= data[t + 1] << 8
        h = ((h ^ data[t]) * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not abs())."""
    return value & 0x7FFFFFFF


def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Java's default partitioner picks for a non-null serialized key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return (murmur2_unsigned(key) & 0x7FFFFFFF) % num_partitions
