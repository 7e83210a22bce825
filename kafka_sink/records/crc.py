"""CRC-32C (Castagnoli) as RecordBatch v2 uses it.

Role: the one checksum of the record layer. Kafka's v2 batches carry a CRC-32C (reflected
polynomial 0x82F63B78, check value 0xE3069283 for b"123456789") over the bytes from the
attributes field to the end of the batch. zlib's CRC-32 is a different function and must never be
used here.

Invariant: ``crc32c(b, crc32c(a)) == crc32c(a + b)``; the batch encoder relies on this to checksum
the 40 header bytes and the records section without concatenating them first.
"""

from __future__ import annotations

from crc32c import crc32c as _crc32c

__all__ = ["BytesLike", "crc32c"]

BytesLike = bytes | bytearray | memoryview


def crc32c(data: BytesLike, value: int = 0) -> int:
    """CRC-32C of ``data`` as an unsigned 32-bit int, continuing from ``value``."""
    result: int = _crc32c(data, value)
    return result
