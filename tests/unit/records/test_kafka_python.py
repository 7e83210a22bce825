"""Cross-checks with kafka-python, an independent implementation of RecordBatch v2.

Both directions, every codec: kafka-python's reader decodes (and CRC-checks) our batches, and our
reader decodes kafka-python's builder output. kafka-python finds no snappy library here, so its
snappy codec is pointed at cramjam's raw snappy block functions (what python-snappy >= 0.7 is
built on); the xerial framing on both sides stays each library's own code.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import cramjam
import kafka.codec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafka_sink.records.batch import Header, RecordBatchBuilder, read_batches
from kafka_sink.records.columnar import seal_columns
from kafka_sink.records.compression import CompressionType

from .strategies import BASE_TS, record_lists

Rec = tuple[int, bytes | None, bytes | None, list[Header]]
CODECS = list(CompressionType)


@pytest.fixture(autouse=True)
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    shim = SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)
    yield


def kafka_python_read(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None, list]]:
    out = []
    records = MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        out.extend(
            (record.offset, record.timestamp, record.key, record.value, list(record.headers))
            for record in batch
        )
    return out


def compressible_records(n: int) -> list[Rec]:
    return [
        (
            BASE_TS + (i * 37) % 1000 - 500,
            None if i % 7 == 0 else f"key-{i % 13}".encode(),
            None if i % 11 == 0 else (f"value {i} " * (1 + i % 5)).encode(),
            [("trace", f"t{i}".encode()), ("empty", None)] if i % 4 == 0 else [],
        )
        for i in range(300)
    ]


@pytest.mark.parametrize("ctype", CODECS)
def test_kafka_python_reads_our_batches(ctype: CompressionType) -> None:
    records = compressible_records(300)
    builder = RecordBatchBuilder(compression_type=ctype, batch_size=1 << 20)
    for rec in records:
        builder.append(*rec)
    encoded = builder.seal().encode(producer_id=12, producer_epoch=1, base_sequence=40)
    batch = DefaultRecordBatch(bytearray(encoded))
    assert batch.compression_type == int(ctype)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (12, 1, 40)
    assert batch.first_timestamp == records[0][0]
    assert batch.max_timestamp == max(r[0] for r in records)
    assert kafka_python_read(encoded) == [
        (i, ts, k, v, [tuple(h) for h in hs]) for i, (ts, k, v, hs) in enumerate(records)
    ]


@pytest.mark.parametrize("ctype", CODECS)
def test_kafka_python_reads_our_columnar_batches(ctype: CompressionType) -> None:
    records = compressible_records(300)
    sealed = seal_columns(
        [r[2] for r in records],
        [r[1] for r in records],
        timestamps_ms=BASE_TS,
        compression_type=ctype,
        batch_size=2000,
    )
    assert len(sealed) > 3
    data = b""
    offset = 0
    for batch in sealed:
        data += batch.encode(base_offset=offset)
        offset += batch.record_count
    assert kafka_python_read(data) == [
        (i, BASE_TS, k, v, []) for i, (_ts, k, v, _h) in enumerate(records)
    ]


@pytest.mark.parametrize("ctype", CODECS)
def test_we_read_kafka_python_batches(ctype: CompressionType) -> None:
    records = compressible_records(300)
    builder = DefaultRecordBatchBuilder(2, int(ctype), False, 5, 2, 100, 1 << 20)
    for i, (ts, key, value, headers) in enumerate(records):
        assert builder.append(i, ts, key, value, headers) is not None
    (batch,) = read_batches(bytes(builder.build()))
    assert batch.compression_type is ctype  # the data compresses, so it was kept compressed
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 2, 100)
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == [
        (i, *rec) for i, rec in enumerate(records)
    ]


@settings(max_examples=40, deadline=None)
@given(records=record_lists(max_size=25), ctype=st.sampled_from(CODECS))
def test_round_trips_with_kafka_python(records: list[Rec], ctype: CompressionType) -> None:
    ours = RecordBatchBuilder(compression_type=ctype, batch_size=1 << 20)
    theirs = DefaultRecordBatchBuilder(2, int(ctype), False, -1, -1, -1, 1 << 20)
    for i, (ts, key, value, headers) in enumerate(records):
        ours.append(ts, key, value, headers)
        theirs.append(i, ts, key, value, headers)
    expected = [(i, *rec) for i, rec in enumerate(records)]
    our_bytes = ours.seal().encode()
    assert kafka_python_read(our_bytes) == [
        (i, ts, k, v, [tuple(h) for h in hs]) for i, ts, k, v, hs in expected
    ]
    their_bytes = bytes(theirs.build())
    (batch,) = read_batches(their_bytes)
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == (
        expected
    )
    if ctype is CompressionType.NONE:
        # Identical but for partitionLeaderEpoch (kafka-python writes 0, Java and we -1).
        assert our_bytes[:12] == their_bytes[:12]
        assert our_bytes[16:] == their_bytes[16:]
