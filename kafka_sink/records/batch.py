"""RecordBatch v2 (magic 2): the per-record builder, the sealed batch, and a reader.

Role: the producer's ``send()`` path appends records one at a time to a RecordBatchBuilder, seals
it into an immutable SealedBatch (records section compressed once), and stamps producer id,
epoch and base sequence only when the batch is drained into a Produce request. The encoded bytes
are then kept, so a retry resends exactly the same bytes. ``read_batches`` decodes batches back
(tests, verification) and checks their CRC; ``decode_batch`` decodes one, and is what a reader
of a topic other clients write uses (``fetched.py``), with ``max_decoded_bytes``. ``as_bytes``
is the one rule for what a key, value or header value given as bytes, bytearray, memoryview or
str becomes in a record (``send()`` and the columnar paths' Python sequences share it).

Batch layout (all integers big-endian; 61-byte header, then the records section)::

     0  baseOffset            int64   0 from a producer (the broker assigns offsets)
     8  batchLength           int32   total size - 12 (bytes after this field)
    12  partitionLeaderEpoch  int32   -1 from a producer (the broker overwrites it)
    16  magic                 int8    2
    17  crc                   uint32  CRC-32C of bytes 21..end (attributes to the last record)
    ----------------------------------------------- CRC coverage starts here
    21  attributes            int16   bits 0-2 codec, bit 4 transactional (nothing else set)
    23  lastOffsetDelta       int32   recordCount - 1
    27  baseTimestamp         int64   first record's timestamp (ms)
    35  maxTimestamp          int64   largest record timestamp (ms)
    43  producerId            int64   -1 unless idempotent/transactional
    51  producerEpoch         int16   -1 unless idempotent/transactional
    53  baseSequence          int32   -1 unless idempotent/transactional
    57  recordsCount          int32   number of records
    61  records               ...     the records, or one compressed blob of all of them

Record layout (every integer a zigzag varint; ``length`` counts the bytes after itself)::

    length | attributes int8 = 0 | timestampDelta (varlong) | offsetDelta | keyLength (-1 null)
    | key | valueLength (-1 null) | value | headersCount | per header: keyLength | key (UTF-8,
    never null) | valueLength (-1 null) | value

Invariants: offset deltas are 0..n-1 in append order; lastOffsetDelta = n - 1; timestamp deltas
are relative to baseTimestamp; batchLength = size - 12; the CRC covers attributes..end *after*
compression; only the records section is compressed; a non-empty builder never grows past
``batch_size`` (estimated on uncompressed bytes), but its first record always fits.

Reader invariants: whatever the bytes, decoding returns batches or raises
:class:`~kafka_sink.errors.CorruptRecordError` (never another exception: a header key that is
not UTF-8 is one too), naming the batch's offset and saying whether its CRC-32C matched. With
``max_decoded_bytes`` a batch never costs much more than that to decode: the count its header
claims, the decompressed section (every codec stops at the limit) and every record and header
are counted as they come (``RECORD_COST``, ``HEADER_COST``), and going past raises
:class:`~kafka_sink.errors.DecodeLimitError`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kafka_sink.errors import CorruptRecordError, DecodeLimitError
from kafka_sink.records.compression import CompressionType, compress, decompress, validate_level
from kafka_sink.records.crc import crc32c

__all__ = [
    "BATCH_HEADER_SIZE",
    "HEADER_COST",
    "RECORD_COST",
    "BatchHeader",
    "Header",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "SealedBatch",
    "as_bytes",
    "batch_header",
    "batch_spans",
    "decode_batch",
    "encode_headers",
    "encode_varint",
    "estimate_record_size",
    "read_batches",
]

Header = tuple[str, bytes | None]

BATCH_HEADER_SIZE = 61
MAGIC = 2
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
TIMESTAMP_TYPE_FLAG = 0x08
CODEC_MASK = 0x07
# Length varint (5) + attributes (1) + timestampDelta varlong (10) + offsetDelta varint (5).
MAX_RECORD_OVERHEAD = 21
# What a decoded record and a decoded header cost in memory besides their bytes (a Record with
# its ints and header list is about 200 bytes in CPython; a header's tuple and str about 110),
# counted against a reader's ``max_decoded_bytes``.
RECORD_COST = 256
HEADER_COST = 128

# The full header, for the reader.
_HEADER = struct.Struct(">qiibIhiqqqhii")
# The 21 bytes before the CRC coverage and the 40 bytes inside it, packed separately so the CRC
# can be computed over the covered header bytes and the records without joining them first.
_HEAD = struct.Struct(">qiibI")
_TAIL = struct.Struct(">hiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE == _HEAD.size + _TAIL.size


def encode_varint(value: int) -> bytes:
    """Zigzag varint (varlong) encoding of a signed 64-bit int, as records use."""
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# Zigzag varints of 0.._TABLE_SIZE-1, precomputed: lengths, offset deltas and timestamp deltas of
# an ordinary batch all land here, so append() does list lookups instead of encoding loops.
_TABLE_SIZE = 1 << 14
_VARINTS: list[bytes] = [encode_varint(i) for i in range(_TABLE_SIZE)]
# attributes byte (always 0) followed by a timestampDelta varint.
_ATTR_TS: list[bytes] = [b"\x00" + v for v in _VARINTS]
_NULL_LENGTH = encode_varint(-1)  # b"\x01"
_NO_HEADERS = b"\x00"


def _varint_size(value: int) -> int:
    z = (value << 1) ^ (value >> 63)
    size = 1
    while z > 0x7F:
        z >>= 7
        size += 1
    return size


def as_bytes(what: str, data: object) -> bytes:
    """A key, value or header value as the bytes a record holds (``what`` names it in errors).

    bytes pass through; bytearray and memoryview are copied; str becomes its UTF-8 bytes.
    """
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    raise TypeError(
        f"{what} must be bytes, bytearray, memoryview, str or None; got {type(data).__name__}"
    )


def encode_headers(headers: Sequence[Header]) -> bytes:
    """A record's headers section: count, then per header its UTF-8 key and nullable value."""
    out = bytearray(encode_varint(len(headers)))
    for hkey, hvalue in headers:
        kb = hkey.encode("utf-8")
        out += encode_varint(len(kb))
        out += kb
        if hvalue is None:
            out += _NULL_LENGTH
        else:
            out += encode_varint(len(hvalue))
            out += hvalue
    return bytes(out)


def estimate_record_size(
    key: bytes | None, value: bytes | None, headers: Sequence[Header] = ()
) -> int:
    """An upper bound of one record's encoded size in a batch, excluding the 61-byte header.

    Add BATCH_HEADER_SIZE for the size of a batch holding only this record (what Java checks
    against ``max.request.size``).
    """
    size = MAX_RECORD_OVERHEAD
    size += 1 if key is None else _varint_size(len(key)) + len(key)
    size += 1 if value is None else _varint_size(len(value)) + len(value)
    if headers:
        size += len(encode_headers(headers))
    else:
        size += 1
    return size


@dataclass(frozen=True, slots=True)
class SealedBatch:
    """A closed batch: its (possibly compressed) records section and the header fields it fixes.

    Producer id, epoch, base sequence and the transactional flag are not part of it: the sender
    chooses them at drain time and calls ``encode``; keep those bytes for retries.
    """

    compression_type: CompressionType
    record_count: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    last_offset_delta: int
    records: bytes
    size_bytes: int
    # The batch's size were it uncompressed, and its largest record's size (length prefix
    # included): what the producer's compression-rate and record-size metrics report.
    uncompressed_size_bytes: int = 0
    max_record_size: int = 0

    def encode(
        self,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        base_offset: int = 0,
        partition_leader_epoch: int = -1,
    ) -> bytes:
        """The complete RecordBatch v2 bytes, CRC included."""
        attributes = int(self.compression_type)
        if is_transactional:
            attributes |= TRANSACTIONAL_FLAG
        tail = _TAIL.pack(
            attributes,
            self.last_offset_delta,
            self.base_timestamp_ms,
            self.max_timestamp_ms,
            producer_id,
            producer_epoch,
            base_sequence,
            self.record_count,
        )
        records = self.records
        crc = crc32c(records, crc32c(tail))
        head = _HEAD.pack(
            base_offset,
            BATCH_HEADER_SIZE - 12 + len(records),
            partition_leader_epoch,
            MAGIC,
            crc,
        )
        return b"".join((head, tail, records))


# Base timestamp of a builder whose first record has not arrived: farther from any int64
# timestamp than the varint table reaches, so the first append takes its slow branch and adopts
# its own timestamp.
_NO_BASE_TS = 1 << 64


def _append_after_seal(_parts: Iterable[bytes]) -> None:
    raise ValueError("append() on a sealed batch")


class RecordBatchBuilder:
    """Appends records to one RecordBatch v2 (Java: MemoryRecordsBuilder) until sealed.

    ``append`` returns the record's offset delta, or None when the batch is not empty and the
    record would take its estimated size past ``batch_size`` (the caller starts a new batch).
    The estimate is the exact uncompressed size, so a compressed batch is usually much smaller.
    """

    __slots__ = (
        "_base_ts",
        "_base_ts_fixed",
        "_batch_size",
        "_compression_level",
        "_compression_type",
        "_count",
        "_extend",
        "_limit",
        "_max_record",
        "_max_ts",
        "_parts",
        "_sealed",
        "_size",
    )

    def __init__(
        self,
        *,
        compression_type: CompressionType = CompressionType.NONE,
        compression_level: int | None = None,
        batch_size: int = 16384,
        base_timestamp_ms: int | None = None,
    ) -> None:
        self._compression_type = CompressionType(compression_type)
        validate_level(self._compression_type, compression_level)
        self._compression_level = compression_level
        self._batch_size = batch_size
        # Room for records: a record is accepted while the records section stays <= _limit.
        self._limit = batch_size - BATCH_HEADER_SIZE
        self._base_ts_fixed = base_timestamp_ms is not None
        # Unfixed: a sentinel no timestamp is within _TABLE_SIZE of, so the first append takes
        # the branch that adopts its timestamp as the base.
        self._base_ts = base_timestamp_ms if base_timestamp_ms is not None else _NO_BASE_TS
        self._max_ts = -(1 << 63)
        self._count = 0
        self._size = 0
        self._max_record = 0
        # Records are kept as a list of byte pieces joined once at seal(): one list.extend per
        # record is cheaper than growing a bytearray piece by piece.
        self._parts: list[bytes] = []
        self._extend: Callable[[Iterable[bytes]], None] = self._parts.extend
        self._sealed = False

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def estimated_size_bytes(self) -> int:
        """Size of the batch if it were sealed uncompressed now."""
        return BATCH_HEADER_SIZE + self._size

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def compression_type(self) -> CompressionType:
        return self._compression_type

    @property
    def is_sealed(self) -> bool:
        return self._sealed

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> int | None:
        """Append one record; its offset delta, or None if it does not fit (nothing written)."""
        count = self._count
        offset_delta = _VARINTS[count] if count < _TABLE_SIZE else encode_varint(count)
        ts_delta = timestamp_ms - self._base_ts
        if 0 <= ts_delta < _TABLE_SIZE:
            attr_ts = _ATTR_TS[ts_delta]
        elif count == 0:
            # First record: it sets the base timestamp unless the caller fixed one.
            if self._base_ts_fixed:
                attr_ts = b"\x00" + encode_varint(ts_delta)
            else:
                self._base_ts = timestamp_ms
                attr_ts = _ATTR_TS[0]
        else:
            attr_ts = b"\x00" + encode_varint(ts_delta)
        # body: the record's bytes after its length varint.
        if key is None:
            key = b""
            key_length = _NULL_LENGTH
            body = 1
        else:
            body = len(key)
            key_length = _VARINTS[body] if body < _TABLE_SIZE else encode_varint(body)
            body += len(key_length)
        if value is None:
            value = b""
            value_length = _NULL_LENGTH
            body += 1
        else:
            vlen = len(value)
            value_length = _VARINTS[vlen] if vlen < _TABLE_SIZE else encode_varint(vlen)
            body += vlen + len(value_length)
        if headers:
            header_bytes = encode_headers(headers)
            body += len(header_bytes)
        else:
            header_bytes = _NO_HEADERS
            body += 1
        body += len(attr_ts) + len(offset_delta)
        length = _VARINTS[body] if body < _TABLE_SIZE else encode_varint(body)
        record_size = len(length) + body
        size = self._size + record_size
        if size > self._limit and count:
            return None
        if record_size > self._max_record:  # noqa: PLR1730 - a branch is cheaper than max()
            self._max_record = record_size
        self._extend(
            (length, attr_ts, offset_delta, key_length, key, value_length, value, header_bytes)
        )
        self._size = size
        if timestamp_ms > self._max_ts:  # noqa: PLR1730 - a branch is cheaper than max() here
            self._max_ts = timestamp_ms
        self._count = count + 1
        return count

    def seal(self) -> SealedBatch:
        """Close the batch: compress the records section once and return the sealed batch."""
        if self._sealed:
            raise ValueError("batch already sealed")
        if self._count == 0:
            raise ValueError("cannot seal an empty batch")
        self._sealed = True
        self._extend = _append_after_seal
        raw = b"".join(self._parts)
        self._parts = []
        if self._compression_type is CompressionType.NONE:
            records = raw
        else:
            records = compress(self._compression_type, raw, self._compression_level)
        return SealedBatch(
            compression_type=self._compression_type,
            record_count=self._count,
            base_timestamp_ms=self._base_ts,
            max_timestamp_ms=self._max_ts,
            last_offset_delta=self._count - 1,
            records=records,
            size_bytes=BATCH_HEADER_SIZE + len(records),
            uncompressed_size_bytes=BATCH_HEADER_SIZE + len(raw),
            max_record_size=self._max_record,
        )


# ---------------------------------------------------------------------------------------------
# Reader


@dataclass(slots=True)
class Record:
    """One decoded record; ``offset`` is absolute (base offset + offset delta)."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)


class BatchHeader(NamedTuple):
    """The 61-byte header of a RecordBatch v2, as stored (unchecked)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int


@dataclass(slots=True)
class RecordBatch:
    """One decoded RecordBatch v2 with its records (decompressed)."""

    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    compression_type: CompressionType
    is_transactional: bool
    is_control: bool
    last_offset_delta: int
    base_timestamp_ms: int
    max_timestamp_ms: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[Record]
    # What decoding it cost, as ``max_decoded_bytes`` counts it (0 when not decoded here).
    decoded_bytes: int = 0


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    z = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise CorruptRecordError("record: truncated varint") from None
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("record: varint longer than 10 bytes")


def _read_bytes(buf: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"record: invalid length {length}")
        return None, pos
    if pos + length > end:
        raise CorruptRecordError("record: field runs past the end of the record")
    return buf[pos : pos + length], pos + length


def _over_limit(what: str, limit: int) -> DecodeLimitError:
    return DecodeLimitError(
        f"{what} would take the batch past {limit} bytes decoded, the limit of what one batch "
        f"may decode to (each record counts {RECORD_COST} bytes and each header "
        f"{HEADER_COST} besides its bytes)"
    )


def _read_records(
    buf: bytes,
    count: int,
    base_offset: int,
    base_ts: int,
    *,
    room: int | None = None,
    limit: int = 0,
) -> list[Record]:
    """The ``count`` records of a decompressed records section. ``room``: what they may cost
    besides ``buf`` (RECORD_COST per record, HEADER_COST per header; None: no limit), what is
    left of the batch's ``limit``."""
    records: list[Record] = []
    pos = 0
    total = len(buf)
    for _ in range(count):
        length, pos = _read_varint(buf, pos)
        end = pos + length
        if length < 0 or end > total:
            raise CorruptRecordError("record: length runs past the end of the batch")
        if room is not None:
            room -= RECORD_COST
            if room < 0:
                raise _over_limit(f"record {len(records)}", limit)
        pos += 1  # attributes: no record attributes are defined
        ts_delta, pos = _read_varint(buf, pos)
        offset_delta, pos = _read_varint(buf, pos)
        key, pos = _read_bytes(buf, pos, end)
        value, pos = _read_bytes(buf, pos, end)
        header_count, pos = _read_varint(buf, pos)
        if header_count < 0:
            raise CorruptRecordError(f"record: invalid header count {header_count}")
        # Every header takes at least two bytes (key length and value length).
        if header_count > (end - pos) // 2:
            raise CorruptRecordError(
                f"record: {header_count} headers cannot fit in the {end - pos} bytes left of it"
            )
        if room is not None:
            room -= HEADER_COST * header_count
            if room < 0:
                raise _over_limit(f"the {header_count} headers of record {len(records)}", limit)
        headers: list[Header] = []
        for _h in range(header_count):
            hkey, pos = _read_bytes(buf, pos, end)
            if hkey is None:
                raise CorruptRecordError("record: null header key")
            hvalue, pos = _read_bytes(buf, pos, end)
            try:
                name = hkey.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptRecordError(
                    f"record at offset {base_offset + offset_delta}: header key {hkey[:32]!r} "
                    f"is not UTF-8 ({exc.reason} at byte {exc.start})"
                ) from None
            headers.append((name, hvalue))
        if pos != end:
            raise CorruptRecordError("record: length does not match its fields")
        records.append(Record(base_offset + offset_delta, base_ts + ts_delta, key, value, headers))
    if pos != total:
        raise CorruptRecordError("batch: bytes left after the last record")
    return records


def batch_header(data: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header fields of the batch at byte ``pos`` of ``data`` (nothing checked but that the
    61 bytes are there)."""
    view = memoryview(data).cast("B")
    if len(view) - pos < BATCH_HEADER_SIZE:
        raise CorruptRecordError("batch: truncated header")
    return BatchHeader(*_HEADER.unpack_from(view, pos))


def decode_batch(
    data: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_decoded_bytes: int | None = None,
) -> RecordBatch:
    """Decode the one RecordBatch v2 that ``data`` holds, exactly (all of it, nothing after).

    ``max_decoded_bytes`` bounds what the batch may cost once decoded: its decompressed records
    section, plus RECORD_COST per record and HEADER_COST per header (about what their Python
    objects take). A batch past it raises DecodeLimitError before much more than that is
    allocated, whatever its codec or header claims; the decoded records then hold at most about
    twice it (keys, values and headers are copies of the section). None: no limit.

    Errors are CorruptRecordError with ``offset`` and ``last_offset`` set, and ``checksum_ok``
    when the CRC-32C was verified before the fault was found.
    """
    view = memoryview(data).cast("B")
    header = batch_header(view)
    checksum_ok = False
    try:
        if header.magic != MAGIC:
            raise CorruptRecordError(f"magic {header.magic} is not supported (only 2)")
        if header.batch_length != len(view) - 12:
            raise CorruptRecordError(
                f"length {header.batch_length} does not match the {len(view) - 12} bytes given"
            )
        if verify_crc:
            actual = crc32c(view[21:])
            if actual != header.crc:
                raise CorruptRecordError(
                    f"CRC-32C mismatch (stored {header.crc:#010x}, computed {actual:#010x})"
                )
            checksum_ok = True
        try:
            ctype = CompressionType(header.attributes & CODEC_MASK)
        except ValueError:
            raise CorruptRecordError(
                f"unknown compression codec {header.attributes & CODEC_MASK}"
            ) from None
        count = header.records_count
        if count < 0 or count > header.last_offset_delta + 1:
            # Compaction may leave fewer records than offsets, never more.
            raise CorruptRecordError(
                f"invalid record count {count} (last offset delta {header.last_offset_delta})"
            )
        room = None
        if max_decoded_bytes is not None:
            room = max_decoded_bytes - RECORD_COST * count
            if room < 0:
                raise _over_limit(f"its {count} records", max_decoded_bytes)
        section = view[BATCH_HEADER_SIZE:]
        # An empty batch (what compaction leaves of a batch whose producer state it keeps) has no
        # records section, whatever codec its attributes name: nothing to decompress, as Java.
        raw = decompress(ctype, section, max_size=room) if count else b""
        if room is not None:
            room -= len(raw)
            # The per-record costs were taken out already; _read_records takes them again.
            room += RECORD_COST * count
        records = _read_records(
            raw,
            count,
            header.base_offset,
            header.base_timestamp_ms,
            room=room,
            limit=max_decoded_bytes or 0,
        )
        headers = sum(len(r.headers) for r in records)
        decoded = len(raw) + RECORD_COST * count + HEADER_COST * headers
    except CorruptRecordError as exc:
        kind = DecodeLimitError if isinstance(exc, DecodeLimitError) else CorruptRecordError
        last = header.base_offset + max(header.last_offset_delta, 0)
        raise kind(
            f"batch at offset {header.base_offset}: {exc}",
            offset=header.base_offset,
            last_offset=last,
            checksum_ok=checksum_ok,
        ) from None
    return RecordBatch(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        magic=header.magic,
        crc=header.crc,
        attributes=header.attributes,
        compression_type=ctype,
        is_transactional=bool(header.attributes & TRANSACTIONAL_FLAG),
        is_control=bool(header.attributes & CONTROL_FLAG),
        last_offset_delta=header.last_offset_delta,
        base_timestamp_ms=header.base_timestamp_ms,
        max_timestamp_ms=header.max_timestamp_ms,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records=records,
        decoded_bytes=decoded,
    )


def batch_spans(data: bytes | bytearray | memoryview) -> list[tuple[int, int]]:
    """The (start, end) byte ranges of the batches in ``data``, a concatenation of whole batches,
    from their length fields."""
    view = memoryview(data).cast("B")
    spans: list[tuple[int, int]] = []
    pos = 0
    total = len(view)
    while pos < total:
        header = batch_header(view, pos)
        end = pos + 12 + header.batch_length
        if header.batch_length < BATCH_HEADER_SIZE - 12 or end > total:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset}: length runs past the end of the data"
            )
        spans.append((pos, end))
        pos = end
    return spans


def read_batches(
    data: bytes | bytearray | memoryview,
    *,
    verify_crc: bool = True,
    max_decoded_bytes: int | None = None,
) -> list[RecordBatch]:
    """Decode every RecordBatch v2 in ``data`` (a concatenation of batches).

    Raises CorruptRecordError on a CRC mismatch, a truncated batch, another magic, or records
    that do not parse; DecodeLimitError when one batch would decode to more than
    ``max_decoded_bytes`` (see :func:`decode_batch`; None: no limit).
    """
    view = memoryview(data).cast("B")
    return [
        decode_batch(view[start:end], verify_crc=verify_crc, max_decoded_bytes=max_decoded_bytes)
        for start, end in batch_spans(view)
    ]
