"""Compression codecs for the records section of a RecordBatch v2.

Role: turn the uncompressed records section into exactly the byte stream a Kafka broker (and any
Java, librdkafka or kafka-python consumer) accepts for each codec, and back.

Wire formats (what Kafka's Java client writes; the reader side accepts these and a bit more):

* gzip (1): one gzip member (RFC 1952, starts ``1f 8b``), written with zlib. Not raw deflate and
  not a zlib stream. Decoding accepts several concatenated members.
* snappy (2): xerial/snappy-java framing: magic ``82 'SNAPPY' 00``, int32 version 1, int32
  compatible version 1, then for every 32 KiB chunk of input an int32 length and one raw snappy
  block. Decoding also accepts a single raw snappy block (librdkafka writes that) and magic
  headers repeated mid-stream. Never the Google "framing format". Needs the optional ``cramjam``.
* lz4 (3): LZ4 frame format with **independent** blocks (Kafka's reader rejects linked blocks),
  64 KiB blocks, no checksums, no content size: the same FLG/BD bytes as Java (``60 40``). Each
  block is one liblz4 block call, as lz4-java compresses it; a block that does not shrink is
  stored raw (size field bit 31), as Java does.
* zstd (4): one standard Zstandard frame. Decoding streams, so frames without a content size
  (what Java and librdkafka write) work, as do concatenated frames.

Levels follow Kafka's ``compression.<codec>.level`` producer configs (KIP-390):

* gzip: 1..9, or -1 for zlib's default (6); default -1.
* lz4: 1..17, default 9. Like Java, the default level uses the fast compressor; any other level
  uses LZ4 HC at that level (liblz4 caps HC at 12).
* zstd: -131072..22, default 3.

Invariants:

* ``decompress(t, compress(t, data, level)) == data`` for every codec and valid level.
* ``decompress(..., max_size=n)`` never holds much more than ``n`` bytes of output, whatever the
  input claims: gzip and lz4 stop at the limit (zlib's and lz4's ``max_length``), snappy checks
  each block's declared length before inflating it, and zstd is fed its input in steps small
  enough that one step cannot inflate far past what is left (a zstd block inflates at most
  32768-fold). Past the limit it raises :class:`~kafka_sink.errors.DecodeLimitError`; a
  decompression bomb (kilobytes that inflate to gigabytes) costs the reader about ``n``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from enum import IntEnum
from functools import partial
from typing import Any

import lz4.block
import lz4.frame
import zstandard

from kafka_sink.errors import ConfigError, CorruptRecordError, DecodeLimitError, KafkaError

__all__ = [
    "DEFAULT_LEVELS",
    "LEVEL_RANGES",
    "CompressionType",
    "Compressor",
    "compress",
    "compressor",
    "decompress",
    "validate_level",
]


class CompressionType(IntEnum):
    """The codec ids stored in bits 0-2 of a RecordBatch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Parse Kafka's ``compression.type`` value ("none", "gzip", "snappy", "lz4", "zstd")."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            valid = ", ".join(t.name.lower() for t in cls)
            raise ConfigError(
                f"compression.type: unknown codec {name!r} (expected one of {valid})"
            ) from None

    @property
    def config_name(self) -> str:
        """The name as written in Kafka configs ("lz4")."""
        return self.name.lower()


DEFAULT_LEVELS: dict[CompressionType, int] = {
    CompressionType.GZIP: -1,
    CompressionType.LZ4: 9,
    CompressionType.ZSTD: 3,
}

LEVEL_RANGES: dict[CompressionType, tuple[int, int]] = {
    CompressionType.GZIP: (1, 9),
    CompressionType.LZ4: (1, 17),
    CompressionType.ZSTD: (-131072, 22),
}

_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_HEADER = _SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
_SNAPPY_HEADER_LEN = len(_SNAPPY_HEADER)
_SNAPPY_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def validate_level(ctype: CompressionType, level: int | None) -> int | None:
    """Check a ``compression.<codec>.level`` value; return the effective level (None: default).

    Codecs without levels (none, snappy) accept only None. Raises ConfigError naming the key.
    """
    if level is None:
        return DEFAULT_LEVELS.get(ctype)
    if ctype not in LEVEL_RANGES:
        raise ConfigError(f"compression type {ctype.config_name} does not take a level")
    low, high = LEVEL_RANGES[ctype]
    if ctype is CompressionType.GZIP and level == -1:
        return level
    if not low <= level <= high:
        raise ConfigError(
            f"compression.{ctype.config_name}.level: {level} is outside [{low}, {high}]"
        )
    return level


def _cramjam() -> Any:
    try:
        import cramjam
    except ImportError:  # pragma: no cover - exercised only without the optional extra
        raise KafkaError(
            "snappy compression needs the optional 'cramjam' package (install pykafka-sink[snappy])"
        ) from None
    return cramjam


def _gzip_compress(data: bytes | bytearray | memoryview, level: int) -> bytes:
    # wbits=31 makes zlib write a gzip member (header + deflate + crc32/isize trailer).
    return zlib.compress(data, level, wbits=31)


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    snappy = _cramjam().snappy
    view = memoryview(data)
    parts: list[bytes] = [_SNAPPY_HEADER]
    pack = _INT32.pack
    for start in range(0, len(view), _SNAPPY_BLOCK):
        block = bytes(snappy.compress_raw(view[start : start + _SNAPPY_BLOCK]))
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


# LZ4 frame header as Java writes it: magic, FLG 0x60 (version 01, independent blocks, no
# checksums, no content size), BD 0x40 (64 KiB blocks), header checksum (xxh32(FLG BD) >> 8).
_LZ4_FRAME_HEADER = b"\x04\x22\x4d\x18\x60\x40\x82"
_LZ4_BLOCK = 64 * 1024
_LZ4_END_MARK = b"\x00\x00\x00\x00"
# Bit 31 of a block's size field: the block is stored uncompressed.
_LZ4_UNCOMPRESSED = 0x80000000
_UINT32_LE = struct.Struct("<I")


def _lz4_compress(data: bytes | bytearray | memoryview, level: int) -> bytes:
    # Java (KafkaLZ4BlockOutputStream) compresses every 64 KiB block on its own with lz4-java's
    # fast compressor at the default level and with the HC one at any other level, and stores a
    # block raw when compressing does not shrink it. The same here, one liblz4 block call per
    # 64 KiB (it releases the GIL): about a fifth faster than lz4.frame, which sets up a frame
    # context per call, and the blocks are those Java's default level writes.
    if level == DEFAULT_LEVELS[CompressionType.LZ4]:
        block = partial(lz4.block.compress, mode="default", store_size=False)
    else:
        block = partial(
            lz4.block.compress, mode="high_compression", compression=level, store_size=False
        )
    view = memoryview(data).cast("B")
    pack = _UINT32_LE.pack
    parts = [_LZ4_FRAME_HEADER]
    for start in range(0, len(view), _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        compressed: bytes = block(chunk)
        if len(compressed) < len(chunk):
            parts.append(pack(len(compressed)))
            parts.append(compressed)
        else:
            parts.append(pack(len(chunk) | _LZ4_UNCOMPRESSED))
            parts.append(bytes(chunk))
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _zstd_compress(data: bytes | bytearray | memoryview, level: int) -> bytes:
    result: bytes = zstandard.ZstdCompressor(level=level).compress(data)
    return result


Compressor = Callable[[bytes | bytearray | memoryview], bytes]


def compressor(ctype: CompressionType, level: int | None = None) -> Compressor:
    """A one-argument compress function for ``ctype`` at ``level`` (checked once, here).

    Hot loops (one call per batch) use this to skip the per-call codec and level dispatch.
    For zstd the function keeps one compression context for all its calls (a new context per
    batch costs about as much again as compressing 256 KiB), so it must not be shared between
    threads; take one per thread or per encoding call.
    """
    ctype = CompressionType(ctype)
    effective = validate_level(ctype, level)
    if ctype is CompressionType.NONE:
        return bytes
    if ctype is CompressionType.SNAPPY:
        return _snappy_compress
    assert effective is not None
    if ctype is CompressionType.ZSTD:
        context: Compressor = zstandard.ZstdCompressor(level=effective).compress
        return context
    if ctype is CompressionType.GZIP:
        return partial(_gzip_compress, level=effective)
    if ctype is CompressionType.LZ4:
        return partial(_lz4_compress, level=effective)
    return partial(_zstd_compress, level=effective)


def compress(
    ctype: CompressionType, data: bytes | bytearray | memoryview, level: int | None = None
) -> bytes:
    """Compress a records section for ``ctype`` (NONE returns the bytes unchanged)."""
    return compressor(ctype, level)(data)


class _Output:
    """Decompressed pieces of one records section, refused once they pass ``limit`` bytes."""

    __slots__ = ("codec", "limit", "pieces", "total")

    def __init__(self, codec: str, limit: int | None) -> None:
        self.codec = codec
        self.limit = limit
        self.pieces: list[bytes] = []
        self.total = 0

    def room(self) -> int:
        """Bytes still allowed (plus one, so that going past the limit is seen); -1: no limit."""
        return -1 if self.limit is None else self.limit - self.total + 1

    def check(self, more: int) -> None:
        """Raise unless ``more`` bytes of output still fit under the limit."""
        if self.limit is not None and self.total + more > self.limit:
            raise DecodeLimitError(
                f"{self.codec}: the records section decompresses to more than {self.limit} "
                "bytes, the limit of what one batch may decode to"
            )

    def add(self, piece: bytes) -> None:
        self.check(len(piece))
        self.total += len(piece)
        if piece:
            self.pieces.append(piece)

    def result(self) -> bytes:
        return self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)


def _gzip_decompress(data: bytes | memoryview, out: _Output) -> None:
    view = memoryview(data)
    while len(view) > 0:
        dec = zlib.decompressobj(wbits=31)
        pending: bytes | memoryview = view
        while not dec.eof:
            # max_length stops zlib at the limit; what it did not read waits in unconsumed_tail.
            piece = dec.decompress(pending, max(out.room(), 0))
            out.add(piece)
            pending = dec.unconsumed_tail
            if not piece and not pending and not dec.eof:
                raise CorruptRecordError("gzip: truncated stream")
        view = memoryview(dec.unused_data)
        # Trailing zero padding after the last member is tolerated, as GZIPInputStream does.
        if len(view) > 0 and bytes(view[:2]) != b"\x1f\x8b":
            break


def _snappy_declared_length(block: bytes | memoryview) -> int:
    """The uncompressed length a raw snappy block declares (its leading unsigned varint)."""
    length = 0
    for i in range(min(len(block), 5)):
        byte = block[i]
        length |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            return length
    raise CorruptRecordError("snappy: invalid uncompressed length")


def _snappy_block(snappy: Any, block: bytes | memoryview, out: _Output) -> None:
    # Checked before decompressing: cramjam allocates the declared length up front.
    out.check(_snappy_declared_length(block))
    out.add(bytes(snappy.decompress_raw(block)))


def _snappy_decompress(data: bytes | memoryview, out: _Output) -> None:
    snappy = _cramjam().snappy
    raw = bytes(data)
    if not raw.startswith(_SNAPPY_MAGIC):
        _snappy_block(snappy, raw, out)
        return
    pos = 0
    end = len(raw)
    while pos < end:
        if raw.startswith(_SNAPPY_MAGIC, pos):
            # Header (again): concatenated xerial streams repeat it.
            pos += _SNAPPY_HEADER_LEN
            continue
        if pos + 4 > end:
            raise CorruptRecordError("snappy: truncated xerial block length")
        (length,) = _INT32.unpack_from(raw, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError("snappy: xerial block runs past the end of the data")
        _snappy_block(snappy, memoryview(raw)[pos : pos + length], out)
        pos += length


def _lz4_decompress(data: bytes | memoryview, out: _Output) -> None:
    view = memoryview(data)
    while len(view) > 0:  # one frame per turn
        dec = lz4.frame.LZ4FrameDecompressor()
        pending: bytes | memoryview = view
        while not dec.eof:
            room = out.room()
            # With max_length the decompressor keeps the input it has not used yet.
            piece = dec.decompress(pending, max_length=room)
            pending = b""
            out.add(piece)
            if not piece and dec.needs_input and not dec.eof:
                raise CorruptRecordError("lz4: truncated frame")
        view = memoryview(dec.unused_data or b"")
        # Bytes after a frame that do not start another one are ignored, as they always were.
        if len(view) > 0 and bytes(view[:4]) != _LZ4_FRAME_HEADER[:4]:
            break


# The most a zstd frame can inflate per input byte: a 4-byte RLE block (3-byte header and the
# byte) stands for up to 128 KiB. Input is fed in steps of at most a quarter of the room left
# over this ratio, so one step never produces much more than the limit allows.
_ZSTD_MAX_RATIO = 128 * 1024 // 4
_ZSTD_MIN_STEP = 64


def _zstd_decompress(data: bytes | memoryview, out: _Output) -> None:
    view = memoryview(data)
    end = len(view)
    decompressor = zstandard.ZstdDecompressor()
    pos = 0
    while True:  # one frame per turn
        dobj = decompressor.decompressobj()
        while not dobj.eof:
            if pos >= end:
                raise CorruptRecordError("zstd: truncated frame")
            room = out.room()
            step = end if room < 0 else max(_ZSTD_MIN_STEP, room // (4 * _ZSTD_MAX_RATIO))
            stop = min(end, pos + step)
            out.add(dobj.decompress(view[pos:stop]))
            pos = stop
        pos -= len(dobj.unused_data)  # input after the end of this frame
        if pos >= end:
            return


def decompress(
    ctype: CompressionType,
    data: bytes | bytearray | memoryview,
    *,
    max_size: int | None = None,
) -> bytes:
    """Decompress a records section written with ``ctype``.

    Every codec decompresses incrementally: past ``max_size`` bytes of output (None: no limit)
    it stops and raises DecodeLimitError (a CorruptRecordError), so a small hostile batch cannot
    make the reader allocate much more than ``max_size``. Malformed input raises
    CorruptRecordError too; a missing optional codec library raises KafkaError.
    """
    ctype = CompressionType(ctype)
    out = _Output(ctype.config_name, max_size)
    if ctype is CompressionType.NONE:
        out.check(len(data))
        return bytes(data)
    buf: bytes | memoryview = data if isinstance(data, bytes) else memoryview(data)
    try:
        if ctype is CompressionType.GZIP:
            _gzip_decompress(buf, out)
        elif ctype is CompressionType.SNAPPY:
            _snappy_decompress(buf, out)
        elif ctype is CompressionType.LZ4:
            _lz4_decompress(buf, out)
        else:
            _zstd_decompress(buf, out)
    except KafkaError:
        raise
    except Exception as exc:  # every codec library has its own exception types
        raise CorruptRecordError(f"{ctype.config_name}: cannot decompress: {exc}") from exc
    return out.result()
