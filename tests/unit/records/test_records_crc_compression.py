"""CRC-32C and the compression codecs: check values, wire framing, levels, error paths."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_sink.errors import ConfigError, CorruptRecordError
from kafka_sink.records.compression import CompressionType, compress, decompress
from kafka_sink.records.crc import crc32c

CODECS = list(CompressionType)
SNAPPY_MAGIC = b"\x82SNAPPY\x00"


def test_crc32c_check_value_and_incremental() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"56789", crc32c(b"1234")) == 0xE3069283
    assert crc32c(memoryview(b"xx123456789")[2:]) == 0xE3069283
    assert crc32c(b"") == 0


@pytest.mark.parametrize("name", ["none", "gzip", "snappy", "lz4", "zstd", " LZ4 "])
def test_from_name(name: str) -> None:
    assert CompressionType.from_name(name).config_name == name.strip().lower()


def test_from_name_unknown() -> None:
    with pytest.raises(ConfigError, match="brotli"):
        CompressionType.from_name("brotli")


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=3000), ctype=st.sampled_from(CODECS))
def test_round_trip(data: bytes, ctype: CompressionType) -> None:
    assert decompress(ctype, compress(ctype, data)) == data


@pytest.mark.parametrize(
    ("ctype", "levels"),
    [
        (CompressionType.GZIP, [-1, 1, 9]),
        (CompressionType.LZ4, [1, 9, 12, 17]),
        (CompressionType.ZSTD, [-5, 1, 3, 22]),
    ],
)
def test_levels_round_trip(ctype: CompressionType, levels: list[int]) -> None:
    data = b"kafka record batch " * 500
    for level in levels:
        assert decompress(ctype, compress(ctype, data, level)) == data


@pytest.mark.parametrize(
    ("ctype", "level"),
    [
        (CompressionType.GZIP, 0),
        (CompressionType.GZIP, 10),
        (CompressionType.LZ4, 0),
        (CompressionType.LZ4, 18),
        (CompressionType.ZSTD, 23),
        (CompressionType.SNAPPY, 1),
        (CompressionType.NONE, 1),
    ],
)
def test_invalid_levels(ctype: CompressionType, level: int) -> None:
    with pytest.raises(ConfigError):
        compress(ctype, b"x", level)


def test_gzip_is_a_gzip_member_and_concatenated_members_decode() -> None:
    data = os.urandom(1000) + b"a" * 5000
    out = compress(CompressionType.GZIP, data)
    assert out[:2] == b"\x1f\x8b"
    assert gzip.decompress(out) == data
    assert decompress(CompressionType.GZIP, out + gzip.compress(b"tail")) == data + b"tail"


def test_lz4_frame_matches_java_header_and_blocks_are_independent() -> None:
    # 300 KiB spans several 64 KiB blocks: linked blocks would show up here, not on tiny input.
    data = (os.urandom(100) * 3000)[: 300 * 1024]
    out = compress(CompressionType.LZ4, data)
    assert out[:4] == b"\x04\x22\x4d\x18"
    flg, bd = out[4], out[5]
    assert flg == 0x60  # version 01, independent blocks, no checksums, no content size
    assert bd == 0x40  # 64 KiB max block size
    info = lz4.frame.get_frame_info(out)
    assert info["block_linked"] is False
    assert lz4.frame.decompress(out) == data


def test_snappy_xerial_framing_with_32k_blocks() -> None:
    data = os.urandom(40_000) + b"z" * 35_000
    out = compress(CompressionType.SNAPPY, data)
    assert out[:16] == SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
    pos = 16
    chunks = []
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        pos += 4
        chunks.append(bytes(cramjam.snappy.decompress_raw(out[pos : pos + length])))
        pos += length
    assert [len(c) for c in chunks] == [32768, 32768, 75_000 - 65536]
    assert b"".join(chunks) == data


def test_snappy_decodes_raw_blocks_and_repeated_headers() -> None:
    data = b"abcdefgh" * 1000
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(CompressionType.SNAPPY, raw) == data
    framed = compress(CompressionType.SNAPPY, data)
    assert decompress(CompressionType.SNAPPY, framed + framed) == data + data


def test_zstd_frames_without_content_size_decode() -> None:
    data = b"streamed zstd frame " * 1000
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    out = cctx.compress(data)
    assert zstandard.get_frame_parameters(out).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(CompressionType.ZSTD, out) == data
    assert decompress(CompressionType.ZSTD, out + out) == data + data


@pytest.mark.parametrize("ctype", [c for c in CODECS if c is not CompressionType.NONE])
def test_garbage_raises_corrupt_record(ctype: CompressionType) -> None:
    good = compress(ctype, b"payload " * 200)
    with pytest.raises(CorruptRecordError):
        decompress(ctype, good[: len(good) // 2])
