"""RecordBatch v2 builder, sealed batch encoding and reader: golden bytes, invariants, errors."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_sink.errors import CorruptRecordError
from kafka_sink.records.batch import (
    BATCH_HEADER_SIZE,
    Header,
    RecordBatchBuilder,
    SealedBatch,
    encode_varint,
    estimate_record_size,
    read_batches,
)
from kafka_sink.records.compression import CompressionType

from .strategies import BASE_TS, record_lists

Rec = tuple[int, bytes | None, bytes | None, list[Header]]

# The worked example of one record: null key, value "v", idempotent pid 1000 epoch 0 seq 0.
GOLDEN_ONE = bytes.fromhex(
    "0000000000000000"  # baseOffset
    "00000039"  # batchLength 57
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic
    "839e0c01"  # crc
    "0000"  # attributes
    "00000000"  # lastOffsetDelta
    "0000018bcfe56800"  # baseTimestamp 1700000000000
    "0000018bcfe56800"  # maxTimestamp
    "00000000000003e8"  # producerId 1000
    "0000"  # producerEpoch
    "00000000"  # baseSequence
    "00000001"  # recordsCount
    "0e00000001027600"  # length 7, attrs, tsDelta 0, offsetDelta 0, key null, "v", 0 headers
)

# Three records: a key, a null key and value with headers (one null header value), an empty key
# and value with a negative timestamp delta. Checked against kafka-python's builder.
GOLDEN_THREE_RECORDS: list[Rec] = [
    (1_700_000_000_000, b"k1", b"hello", []),
    (1_700_000_000_005, None, None, [("h", b"v"), ("n", None)]),
    (1_699_999_999_990, b"", b"", []),
]
GOLDEN_THREE = bytes.fromhex(
    "0000000000000000"  # baseOffset
    "00000054"  # batchLength 84
    "ffffffff"  # partitionLeaderEpoch
    "02"  # magic
    "604e793e"  # crc
    "0000"  # attributes
    "00000002"  # lastOffsetDelta
    "0000018bcfe56800"  # baseTimestamp (first record)
    "0000018bcfe56805"  # maxTimestamp
    "ffffffffffffffff"
    "ffff"
    "ffffffff"  # no producer id, epoch, sequence
    "00000003"  # recordsCount
    "1a 00 00 00 04 6b31 0a 68656c6c6f 00"  # len 13, ts+0, off 0, key "k1", value "hello"
    "1a 00 0a 02 01 01 04 02 68 02 76 02 6e 01"  # ts+5, off 1, nulls, 2 headers (h=v, n=null)
    "0c 00 13 04 00 00 00"  # ts-10, off 2, empty key, empty value
)


def build(records: list[Rec], **kwargs: object) -> SealedBatch:
    builder = RecordBatchBuilder(**kwargs)  # type: ignore[arg-type]
    for ts, key, value, headers in records:
        assert builder.append(ts, key, value, headers) is not None
    return builder.seal()


def test_golden_single_record_matches_worked_example() -> None:
    sealed = build([(BASE_TS, None, b"v", [])])
    assert sealed.encode(producer_id=1000, producer_epoch=0, base_sequence=0) == GOLDEN_ONE
    assert sealed.size_bytes == len(GOLDEN_ONE) == 69


def test_golden_three_records() -> None:
    encoded = build(GOLDEN_THREE_RECORDS).encode()
    assert encoded == GOLDEN_THREE
    (batch,) = read_batches(encoded)
    assert batch.base_timestamp_ms == 1_700_000_000_000
    assert batch.max_timestamp_ms == 1_700_000_000_005
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == [
        (i, *rec) for i, rec in enumerate(GOLDEN_THREE_RECORDS)
    ]


def test_header_fields_and_crc_coverage() -> None:
    sealed = build(GOLDEN_THREE_RECORDS, compression_type=CompressionType.ZSTD)
    encoded = sealed.encode(
        producer_id=77,
        producer_epoch=3,
        base_sequence=1000,
        is_transactional=True,
        base_offset=5,
        partition_leader_epoch=9,
    )
    fields = struct.unpack_from(">qiibIhiqqqhii", encoded)
    assert fields[0] == 5
    assert fields[1] == len(encoded) - 12
    assert fields[2] == 9
    assert fields[3] == 2
    assert fields[5] == 0x10 | 4
    assert fields[6:] == (2, 1_700_000_000_000, 1_700_000_000_005, 77, 3, 1000, 3)
    # The CRC excludes baseOffset..magic, so rewriting the leader epoch keeps it valid.
    relabelled = encoded[:12] + struct.pack(">i", 1234) + encoded[16:]
    (batch,) = read_batches(relabelled)
    assert batch.partition_leader_epoch == 1234
    assert batch.is_transactional and not batch.is_control
    assert batch.producer_id == 77 and batch.base_sequence == 1000
    assert batch.compression_type is CompressionType.ZSTD


@pytest.mark.parametrize("position", [21, 30, 60, 61, -1])
def test_crc_mismatch_is_rejected(position: int) -> None:
    encoded = bytearray(build(GOLDEN_THREE_RECORDS).encode())
    encoded[position] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        read_batches(bytes(encoded))


def test_verify_crc_false_skips_the_check() -> None:
    encoded = bytearray(build(GOLDEN_THREE_RECORDS).encode())
    encoded[70] ^= 0x01  # the "e" of the value "hello"
    (batch,) = read_batches(bytes(encoded), verify_crc=False)
    assert batch.records[0].value == b"hdllo"


def test_reader_rejects_truncation_and_other_magic() -> None:
    encoded = build(GOLDEN_THREE_RECORDS).encode()
    with pytest.raises(CorruptRecordError):
        read_batches(encoded[:-1])
    with pytest.raises(CorruptRecordError):
        read_batches(encoded[:40])
    with pytest.raises(CorruptRecordError, match="magic"):
        read_batches(encoded[:16] + b"\x01" + encoded[17:])


def test_reader_reads_concatenated_batches() -> None:
    first = build(GOLDEN_THREE_RECORDS).encode(base_offset=0)
    second = build([(BASE_TS, b"x", b"y", [])]).encode(base_offset=3)
    batches = read_batches(first + second)
    assert [r.offset for b in batches for r in b.records] == [0, 1, 2, 3]


def test_batch_size_limit_and_first_record_always_fits() -> None:
    builder = RecordBatchBuilder(batch_size=200)
    big = b"x" * 500
    assert builder.append(BASE_TS, None, big) == 0  # oversized, but alone
    assert builder.append(BASE_TS, None, b"y") is None
    assert builder.record_count == 1

    builder = RecordBatchBuilder(batch_size=200)
    deltas = []
    while (delta := builder.append(BASE_TS, b"k", b"v" * 20)) is not None:
        deltas.append(delta)
    assert deltas == list(range(len(deltas)))
    assert builder.estimated_size_bytes <= 200
    sealed = builder.seal()
    assert sealed.size_bytes == builder.estimated_size_bytes == len(sealed.encode())
    assert sealed.size_bytes + 28 > 200  # each record takes 28 bytes: the next did not fit


def test_sealed_builder_refuses_appends_and_empty_seal() -> None:
    builder = RecordBatchBuilder()
    with pytest.raises(ValueError, match="empty"):
        builder.seal()
    builder.append(BASE_TS, None, b"v")
    builder.seal()
    with pytest.raises(ValueError, match="sealed"):
        builder.append(BASE_TS, None, b"v")
    with pytest.raises(ValueError, match="sealed"):
        builder.seal()


def test_fixed_base_timestamp() -> None:
    sealed = build(
        [(BASE_TS + 10, b"a", b"b", []), (BASE_TS - 3, None, b"c", [])], base_timestamp_ms=BASE_TS
    )
    (batch,) = read_batches(sealed.encode())
    assert batch.base_timestamp_ms == BASE_TS
    assert batch.max_timestamp_ms == BASE_TS + 10
    assert [r.timestamp_ms for r in batch.records] == [BASE_TS + 10, BASE_TS - 3]


def test_large_values_and_many_records_use_long_varints() -> None:
    value = bytes(range(256)) * 100  # 25,600 bytes: past the precomputed varint table
    records: list[Rec] = [
        (BASE_TS + i * 10**6, b"k", value if i == 0 else b"v", []) for i in range(20_000)
    ]
    sealed = build(records, batch_size=10**7, compression_type=CompressionType.LZ4)
    (batch,) = read_batches(sealed.encode())
    assert len(batch.records) == 20_000
    assert batch.records[0].value == value
    assert batch.records[-1].offset == 19_999
    assert batch.records[-1].timestamp_ms == BASE_TS + 19_999 * 10**6


@pytest.mark.parametrize(
    "value", [0, 1, -1, 63, -64, 64, 8191, 8192, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]
)
def test_varint_encoding(value: int) -> None:
    encoded = encode_varint(value)
    z = (value << 1) ^ (value >> 63)
    decoded = 0
    for i, b in enumerate(encoded):
        decoded |= (b & 0x7F) << (7 * i)
        assert (b & 0x80 != 0) == (i < len(encoded) - 1)
    assert decoded == z % 2**64


@settings(max_examples=60, deadline=None)
@given(
    records=record_lists(),
    ctype=st.sampled_from(list(CompressionType)),
)
def test_builder_reader_round_trip(records: list[Rec], ctype: CompressionType) -> None:
    sealed = build(records, compression_type=ctype, batch_size=10**6)
    encoded = sealed.encode()
    assert len(encoded) == sealed.size_bytes
    (batch,) = read_batches(encoded)
    assert batch.compression_type is ctype
    assert batch.last_offset_delta == len(records) - 1
    assert batch.base_timestamp_ms == records[0][0]
    assert batch.max_timestamp_ms == max(r[0] for r in records)
    assert [(r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == [
        (ts, k, v, list(h)) for ts, k, v, h in records
    ]
    assert [r.offset for r in batch.records] == list(range(len(records)))
    for ts, key, value, headers in records:
        uncompressed = RecordBatchBuilder()
        uncompressed.append(ts, key, value, headers)
        assert estimate_record_size(key, value, headers) >= (
            uncompressed.estimated_size_bytes - BATCH_HEADER_SIZE
        )
