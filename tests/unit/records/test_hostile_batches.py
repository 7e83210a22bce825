"""Batches a hostile or broken writer can put in a topic: bombs, lies in the header, bad bytes.

Whatever the bytes, reading them either succeeds or raises CorruptRecordError (DecodeLimitError
when they would decode past the limit) naming the topic, partition and offset, and never holds
much more than the limit in memory (Python allocations are traced; the broker test measures the
whole process).
"""

from __future__ import annotations

import contextlib
import functools
import struct
import tracemalloc
import zlib
from collections.abc import Callable

import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_sink.errors import CorruptRecordError, DecodeLimitError
from kafka_sink.records.batch import (
    CONTROL_FLAG,
    HEADER_COST,
    RECORD_COST,
    RecordBatchBuilder,
    SealedBatch,
    decode_batch,
    encode_varint,
)
from kafka_sink.records.compression import CompressionType, compress, decompress
from kafka_sink.records.crc import crc32c
from kafka_sink.records.fetched import MAX_DECODED_BYTES, fetched_records
from kafka_sink.wire.messages import FetchResponse

TS = 1_700_000_000_000
PD = FetchResponse.PartitionData
MiB = 1024 * 1024
CODECS = [c for c in CompressionType if c is not CompressionType.NONE]


@functools.cache
def _zeros_stream(codec: CompressionType, size: int) -> bytes:
    """``size`` zero bytes compressed, built in 1 MiB steps (never all in memory)."""
    chunk = bytes(MiB)
    steps = size // MiB
    if codec is CompressionType.GZIP:
        gz = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join([gz.compress(chunk) for _ in range(steps)] + [gz.flush()])
    if codec is CompressionType.ZSTD:
        zs = zstandard.ZstdCompressor(level=1).compressobj()
        return b"".join([zs.compress(chunk) for _ in range(steps)] + [zs.flush()])
    if codec is CompressionType.LZ4:
        with lz4.frame.LZ4FrameCompressor() as lz:
            return b"".join(
                [lz.begin()] + [lz.compress(chunk) for _ in range(steps)] + [lz.flush()]
            )
    # snappy (xerial): the same compressed 32 KiB block of zeros, over and over.
    one = compress(CompressionType.SNAPPY, bytes(32 * 1024))
    block = one[16:]
    return one[:16] + block * (size // (32 * 1024))


def _sealed(
    codec: CompressionType, section: bytes, count: int = 1, last_delta: int | None = None
) -> SealedBatch:
    return SealedBatch(
        compression_type=codec,
        record_count=count,
        base_timestamp_ms=TS,
        max_timestamp_ms=TS,
        last_offset_delta=count - 1 if last_delta is None else last_delta,
        records=section,
        size_bytes=61 + len(section),
    )


def _plain(base_offset: int, values: list[bytes], **kwargs: object) -> bytes:
    builder = RecordBatchBuilder(batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(TS + i, b"k" + value, value)
    return builder.seal().encode(base_offset=base_offset, **kwargs)  # type: ignore[arg-type]


def _record(key: bytes, value: bytes, headers: list[tuple[bytes, bytes]], delta: int = 0) -> bytes:
    """One record's bytes with raw (possibly non-UTF-8) header keys."""
    body = b"\x00" + encode_varint(0) + encode_varint(delta)
    body += encode_varint(len(key)) + key + encode_varint(len(value)) + value
    body += encode_varint(len(headers))
    for hkey, hvalue in headers:
        body += encode_varint(len(hkey)) + hkey + encode_varint(len(hvalue)) + hvalue
    return encode_varint(len(body)) + body


def _peak(action: Callable[[], object]) -> int:
    """The peak of Python allocations while ``action`` runs (it may raise)."""
    tracemalloc.start()
    try:
        with contextlib.suppress(CorruptRecordError):
            action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- codecs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
def test_every_codec_stops_a_bomb_at_the_limit(codec: CompressionType) -> None:
    size = 512 * MiB if codec is CompressionType.ZSTD else 64 * MiB
    bomb = _zeros_stream(codec, size)
    assert len(bomb) < size // 20

    def inflate() -> None:
        with pytest.raises(DecodeLimitError, match=f"{codec.config_name}: .* more than 1048576"):
            decompress(codec, bomb, max_size=MiB)

    # The output stops near the limit: a bomb never inflates to its full size in memory (the
    # codec may keep a copy of the input it has not used yet).
    assert _peak(inflate) < 3 * MiB + 2 * len(bomb)


def test_snappy_refuses_a_declared_length_before_allocating_it() -> None:
    # A raw block declaring 2 GiB of output in 6 bytes: refused from its header.
    block = bytes([0x80, 0x80, 0x80, 0x80, 0x08]) + b"\x00"
    with pytest.raises(DecodeLimitError, match="snappy"):
        decompress(CompressionType.SNAPPY, block, max_size=MiB)


@settings(max_examples=60, deadline=None)
@given(
    codec=st.sampled_from(CODECS),
    data=st.binary(max_size=3000),
    slack=st.integers(-100, 100),
)
def test_the_limit_is_exact_for_every_codec(
    codec: CompressionType, data: bytes, slack: int
) -> None:
    packed = compress(codec, data)
    limit = max(len(data) + slack, 0)
    if len(data) <= limit:
        assert decompress(codec, packed, max_size=limit) == data
    else:
        with pytest.raises(DecodeLimitError):
            decompress(codec, packed, max_size=limit)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(CODECS),
    data=st.binary(max_size=400),
    junk=st.binary(max_size=64),
    cut=st.integers(0, 400),
)
def test_malformed_input_is_corrupt_or_decodes_within_the_limit(
    codec: CompressionType, data: bytes, junk: bytes, cut: int
) -> None:
    packed = compress(codec, data)
    for candidate in (junk, packed[:cut] + junk, packed + junk, packed[:cut]):
        try:
            out = decompress(codec, candidate, max_size=4096)
        except CorruptRecordError:
            continue
        assert len(out) <= 4096


# -- batches ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from(list(CompressionType)),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=4),
    fix_crc=st.booleans(),
)
def test_a_damaged_batch_is_corrupt_never_another_error(
    codec: CompressionType, flips: list[tuple[int, int]], fix_crc: bool
) -> None:
    builder = RecordBatchBuilder(compression_type=codec, batch_size=1 << 20)
    for i in range(3):
        builder.append(TS + i, b"key%d" % i, b"value" * i, [("h", b"v"), ("g", None)])
    batch = bytearray(builder.seal().encode(base_offset=40))
    for where, xor in flips:
        # Only the records section: a header with another length is a cut-off tail, not a batch.
        batch[61 + where % (len(batch) - 61)] ^= xor
    if fix_crc:
        batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
    try:
        decoded = decode_batch(bytes(batch), max_decoded_bytes=MiB)
    except CorruptRecordError as exc:
        assert (exc.offset, exc.last_offset, exc.checksum_ok) == (40, 42, fix_crc)
        assert "batch at offset 40" in str(exc)
    else:
        assert decoded.base_offset == 40
    # The same through a fetch: an error names the topic and partition, or the batch is skipped.
    partition = PD(3, 0, 43, 43, 0, records=bytes(batch))
    try:
        got = fetched_records(partition, 40, read_committed=False, topic="intents")
    except CorruptRecordError as exc:
        assert str(exc).startswith("cannot read intents-3: batch at offset 40")
        assert (exc.topic, exc.partition, exc.offset) == ("intents", 3, 40)
        skipped = fetched_records(
            partition, 40, read_committed=False, topic="intents", skip_corrupt=True
        )
        assert (skipped.records, skipped.next_offset) == ([], 43)
        assert [(e.topic, e.partition, e.offset) for e in skipped.skipped] == [("intents", 3, 40)]
    else:
        assert got.next_offset == 43


def test_a_non_utf8_header_key_is_a_corrupt_record_naming_where() -> None:
    poisoned = _sealed(CompressionType.NONE, _record(b"k", b"v", [(b"\xff\xfe", b"x")]))
    data = poisoned.encode(base_offset=7) + _plain(8, [b"after"])
    partition = PD(0, 0, 9, 9, 0, records=data)
    with pytest.raises(CorruptRecordError) as caught:
        fetched_records(partition, 7, read_committed=True, topic="intents")
    message = str(caught.value)
    assert "intents-0" in message and "offset 7" in message and "not UTF-8" in message
    assert caught.value.checksum_ok
    got = fetched_records(partition, 7, read_committed=True, topic="intents", skip_corrupt=True)
    assert [(r.offset, r.value) for r in got.records] == [(8, b"after")]
    assert got.next_offset == 9
    assert [e.offset for e in got.skipped] == [7]


def test_a_zstd_bomb_in_a_fetch_is_refused_naming_topic_partition_and_offset() -> None:
    # 40 KB that inflate to 1 GiB, then an ordinary batch.
    bomb = _sealed(CompressionType.ZSTD, _zeros_stream(CompressionType.ZSTD, 1024 * MiB))
    data = bomb.encode(base_offset=5) + _plain(6, [b"after"])
    assert len(data) < 64 * 1024
    partition = PD(2, 0, 7, 7, 0, records=data)

    def read() -> None:
        fetched_records(partition, 5, read_committed=True, topic="intents")

    with pytest.raises(DecodeLimitError) as caught:
        read()
    assert str(caught.value).startswith("cannot read intents-2: batch at offset 5: zstd:")
    assert (caught.value.topic, caught.value.partition, caught.value.offset) == ("intents", 2, 5)
    assert f"more than {MAX_DECODED_BYTES - RECORD_COST} bytes" in str(caught.value)
    assert _peak(read) < 2 * MAX_DECODED_BYTES
    got = fetched_records(partition, 5, read_committed=True, topic="intents", skip_corrupt=True)
    assert [(r.offset, r.value) for r in got.records] == [(6, b"after")]
    assert [e.offset for e in got.skipped] == [5]


def test_an_answer_ends_before_a_batch_that_does_not_fit_what_is_left() -> None:
    batches = [_plain(i, [bytes([65 + i]) * 2000]) for i in range(3)]
    partition = PD(0, 0, 3, 3, 0, records=b"".join(batches))
    # Room for two of them: the third is fetched again (first, with the whole limit).
    got = fetched_records(partition, 0, read_committed=False, max_decoded_bytes=9000)
    assert [r.offset for r in got.records] == [0, 1]
    assert (got.next_offset, got.skipped) == (2, [])
    again = PD(0, 0, 3, 3, 0, records=batches[2])
    got = fetched_records(again, 2, read_committed=False, max_decoded_bytes=9000)
    assert [r.offset for r in got.records] == [2]
    # One batch alone past the limit is refused, not returned empty.
    with pytest.raises(DecodeLimitError, match="t-0: batch at offset 0"):
        fetched_records(partition, 0, read_committed=False, topic="t", max_decoded_bytes=3000)


def test_a_header_claiming_more_records_than_fit_is_refused_before_decompressing() -> None:
    # A tiny section whose header claims a billion records (and offsets for them).
    lie = _sealed(CompressionType.ZSTD, compress(CompressionType.ZSTD, b"x"), count=10**9)
    with pytest.raises(DecodeLimitError, match="its 1000000000 records"):
        decode_batch(lie.encode(), max_decoded_bytes=MAX_DECODED_BYTES)
    # More records than offsets cannot be (compaction only removes records).
    more = _sealed(CompressionType.NONE, _record(b"k", b"v", []) * 2, count=2, last_delta=0)
    with pytest.raises(CorruptRecordError, match="invalid record count 2"):
        decode_batch(more.encode())


def test_headers_count_against_the_limit() -> None:
    many = _sealed(CompressionType.NONE, _record(b"k", b"v", [(b"", b"")] * 5000))
    limit = 5000 * HEADER_COST
    with pytest.raises(DecodeLimitError, match="the 5000 headers of record 0"):
        decode_batch(many.encode(), max_decoded_bytes=limit)
    assert len(decode_batch(many.encode(), max_decoded_bytes=2 * limit).records[0].headers) == 5000
    lying = _sealed(CompressionType.NONE, _record(b"k", b"v", [])[:-1] + encode_varint(10**6))
    with pytest.raises(CorruptRecordError):
        decode_batch(lying.encode())


def test_a_damaged_marker_is_never_skipped() -> None:
    raw = bytearray(_plain(0, [b"m"]))
    raw[21:23] = struct.pack(">h", CONTROL_FLAG)
    raw[-1] ^= 0xFF  # and the CRC no longer matches
    partition = PD(0, 0, 1, 1, 0, records=bytes(raw))
    with pytest.raises(CorruptRecordError, match="CRC"):
        fetched_records(partition, 0, read_committed=True, topic="t", skip_corrupt=True)


def test_aborted_data_is_dropped_without_being_decoded() -> None:
    bomb = _sealed(CompressionType.ZSTD, _zeros_stream(CompressionType.ZSTD, 1024 * MiB))
    aborted = bomb.encode(
        base_offset=0, producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    partition = PD(
        0,
        0,
        2,
        2,
        0,
        aborted_transactions=[FetchResponse.AbortedTransaction(9, 0)],
        records=aborted + _plain(1, [b"kept"]),
    )
    got = fetched_records(partition, 0, read_committed=True)
    assert [(r.offset, r.value) for r in got.records] == [(1, b"kept")]
    assert got.next_offset == 2


def test_a_marker_with_a_bad_key_names_where() -> None:
    builder = RecordBatchBuilder()
    builder.append(TS, b"\x00", b"")  # a control record's key is two int16s
    raw = bytearray(builder.seal().encode(base_offset=4, producer_id=3, is_transactional=True))
    raw[21:23] = struct.pack(">h", 0x10 | CONTROL_FLAG)
    raw[17:21] = struct.pack(">I", crc32c(bytes(raw[21:])))
    partition = PD(0, 0, 5, 5, 0, records=bytes(raw))
    with pytest.raises(CorruptRecordError, match="cannot read t-0: control batch at offset 4"):
        fetched_records(partition, 4, read_committed=True, topic="t", skip_corrupt=True)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
def test_an_empty_batch_compaction_left_has_no_section_to_decompress(
    codec: CompressionType,
) -> None:
    # The cleaner keeps a header with the original attributes (codec included) and no records.
    empty = _sealed(codec, b"", count=0, last_delta=2)
    data = empty.encode(base_offset=10, producer_id=5, producer_epoch=0, is_transactional=True)
    partition = PD(0, 0, 14, 14, 0, records=data + _plain(13, [b"after"]))
    got = fetched_records(partition, 10, read_committed=True, topic="t")
    assert [(r.offset, r.value) for r in got.records] == [(13, b"after")]
    assert (got.next_offset, got.skipped) == (14, [])
