"""CRC-32C and the compression codecs: check values, wire framing, levels, error paths."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_sink.errors import ConfigError, CorruptRecordError
from kafka_sink.records.compression import CompressionType, compress, compressor, decompress
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


def _lz4_blocks(frame: bytes) -> list[tuple[bool, bytes]]:
    """The blocks of a Java-style LZ4 frame (7-byte header, no checksums): (raw?, payload)."""
    pos = 7
    blocks: list[tuple[bool, bytes]] = []
    while True:
        (size,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if size == 0:
            assert pos == len(frame)  # the end mark, and no content checksum after it
            return blocks
        raw = bool(size & 0x80000000)
        size &= 0x7FFFFFFF
        blocks.append((raw, frame[pos : pos + size]))
        pos += size


def test_lz4_cuts_64k_blocks_each_decodable_alone() -> None:
    # Every block decodes on its own (independent) to its 64 KiB of input, as Kafka's reader
    # and lz4-java's decompressor read them; the last block holds the remainder.
    data = (os.urandom(100) * 3000)[: 300 * 1024 + 17]
    blocks = _lz4_blocks(compress(CompressionType.LZ4, data))
    assert len(blocks) == 5
    out = b""
    for raw, payload in blocks:
        assert not raw
        out += lz4.block.decompress(payload, uncompressed_size=64 * 1024)
    assert out == data


@pytest.mark.parametrize("level", [9, 12])
def test_lz4_incompressible_blocks_are_stored_raw(level: int) -> None:
    # A block that does not shrink is stored as is with bit 31 of its size set (Java does the
    # same); the frame still decodes with a standard LZ4 frame reader.
    noise = os.urandom(100 * 1024)
    text = b"kafka " * 20000
    data = noise + text
    frame = compress(CompressionType.LZ4, data, level)
    blocks = _lz4_blocks(frame)
    assert [raw for raw, _ in blocks] == [True, False, False, False]  # 220,000 bytes
    assert blocks[0][1] == noise[: 64 * 1024]
    assert lz4.frame.decompress(frame) == data
    assert decompress(CompressionType.LZ4, frame) == data


def test_lz4_empty_input_is_an_empty_frame() -> None:
    frame = compress(CompressionType.LZ4, b"")
    assert frame == b"\x04\x22\x4d\x18\x60\x40\x82\x00\x00\x00\x00"
    assert lz4.frame.decompress(frame) == b""


def test_zstd_compressor_reused_across_calls_and_levels() -> None:
    # compressor() keeps one zstd context for all its calls; output must not depend on what the
    # context compressed before.
    a, b = os.urandom(50) * 400, b"zstd " * 5000
    first = compress(CompressionType.ZSTD, a)
    reused = compressor(CompressionType.ZSTD)
    reused(b)
    assert reused(a) == first
    assert first == zstandard.ZstdCompressor(level=3).compress(a)
    assert decompress(CompressionType.ZSTD, first) == a


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
