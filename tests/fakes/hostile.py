"""Record batches a hostile writer of a shared topic can append, as exact bytes.

``zstd_bomb``: valid records (a broker accepts them, iterating every record) whose values are
zero bytes, in one zstd frame that is a few KB per GiB. ``poisoned``: one record whose header key
is not UTF-8 (Java's reader replaces the bad bytes; a strict reader fails). Both are SealedBatch,
so ``encode()`` gives the bytes a Produce carries, CRC-32C included.
"""

from __future__ import annotations

import zstandard

from kafka_sink.records.batch import SealedBatch, encode_varint
from kafka_sink.records.compression import CompressionType

MiB = 1024 * 1024
BAD_HEADER_KEY = b"\xc3\x28"  # a UTF-8 lead byte followed by a byte that cannot continue it


def record_parts(
    key: bytes, value_length: int, delta: int, header: bytes | None = None
) -> tuple[bytes, bytes]:
    """The bytes of one record before and after its value (``value_length`` bytes that the
    caller puts between), with one header keyed ``header`` (value empty) when given."""
    body = b"\x00" + encode_varint(0) + encode_varint(delta)
    body += encode_varint(len(key)) + key + encode_varint(value_length)
    if header is None:
        tail = encode_varint(0)
    else:
        tail = encode_varint(1) + encode_varint(len(header)) + header + encode_varint(0)
    return encode_varint(len(body) + value_length + len(tail)) + body, tail


def zstd_bomb(records: int, value_mib: int = 1, key: bytes = b"bomb") -> SealedBatch:
    """``records`` records keyed ``key`` with ``value_mib`` MiB zero values, one zstd frame."""
    packer = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = bytes(MiB)
    parts = []
    for i in range(records):
        head, tail = record_parts(key, value_mib * MiB, i)
        parts.append(packer.compress(head))
        parts += [packer.compress(zeros) for _ in range(value_mib)]
        parts.append(packer.compress(tail))
    frame = b"".join([*parts, packer.flush()])
    return SealedBatch(CompressionType.ZSTD, records, 0, 0, records - 1, frame, 61 + len(frame))


def poisoned(key: bytes = b"poison", value: bytes = b"v") -> SealedBatch:
    """One uncompressed record keyed ``key`` whose one header key is BAD_HEADER_KEY."""
    head, tail = record_parts(key, len(value), 0, BAD_HEADER_KEY)
    records = head + value + tail
    return SealedBatch(CompressionType.NONE, 1, 0, 0, 0, records, 61 + len(records))
