"""The records a consumer sees in one partition of a Fetch response (sans-IO).

Role: turn a :class:`~kafka_sink.wire.messages.FetchResponse.PartitionData` into the data records
at or after the fetch offset, plus the offset to fetch next, the way Java's consumer does
(``CompletedFetch``). No sockets, no clocks: a reader feeds it the partition it received.

Invariants:
- Only whole batches count: a trailing batch cut short by ``partition_max_bytes``/``max_bytes``
  is dropped and fetched again from ``next_offset``. A broker always returns at least one whole
  batch to the first partition with data (KIP-74), so a reader of one partition always advances.
- Control batches (transaction markers) never yield records, and every whole batch, control or
  not, moves ``next_offset`` past its last offset, so markers and aborted data are not fetched
  twice.
- Records below the fetch offset (the head of a compressed batch the fetch starts inside) are
  skipped.
- ``read_committed``: a transactional batch is dropped when its producer has an aborted
  transaction (from ``aborted_transactions``) whose first offset is at or before the batch's last
  offset and whose abort marker has not been passed yet; the marker ends it. The broker stops
  read_committed data at the last stable offset, so open transactions are never returned.
- Under LogAppendTime (batch attribute bit 3) every record carries the batch's max timestamp.
- A partition error raises the matching :class:`~kafka_sink.errors.BrokerResponseError`;
  corrupt batches raise :class:`~kafka_sink.errors.CorruptRecordError` naming the topic,
  partition and batch offset (also as attributes). With ``skip_corrupt`` a data batch that
  cannot be decoded is passed over instead (its offsets too) and its error listed; a control
  batch never is, since skipping a marker would change which data counts as aborted.
- What the batches of one answer decode to is bounded: ``max_decoded_bytes`` (default
  :data:`MAX_DECODED_BYTES`, 64 MiB) counts their decompressed records sections plus
  ``RECORD_COST`` per record and ``HEADER_COST`` per header, and every codec stops
  decompressing once a batch passes what is left (``records/compression.py``). When a later
  batch does not fit, the answer ends before it and the next fetch starts there; a first batch
  that alone exceeds the limit (a decompression bomb: kilobytes that inflate to gigabytes) is
  corrupt, a :class:`~kafka_sink.errors.DecodeLimitError`. So a reader holds at most about twice
  the limit in decoded records (keys, values and headers are copies of the sections), plus the
  fetched bytes, whatever a writer of the topic put there.
- Transactional data batches that read_committed drops as aborted are not decoded at all.
"""

from __future__ import annotations

import heapq
import struct
from dataclasses import dataclass, field

from kafka_sink.errors import CorruptRecordError, DecodeLimitError, error_for_code
from kafka_sink.records.batch import (
    BATCH_HEADER_SIZE,
    CONTROL_FLAG,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    Record,
    RecordBatch,
    batch_header,
    batch_spans,
    decode_batch,
)
from kafka_sink.wire.messages.fetch import FetchResponse

__all__ = [
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "MAX_DECODED_BYTES",
    "FetchedRecords",
    "complete_batches_size",
    "control_type",
    "fetched_records",
]

CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
# What one fetched partition's batches may decode to in all (decompressed records sections, plus
# RECORD_COST per record and HEADER_COST per header): sixteen times a 4 MiB fetch.
MAX_DECODED_BYTES = 64 * 1024 * 1024

_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength
_CONTROL_KEY = struct.Struct(">hh")  # version, type


@dataclass(frozen=True, slots=True)
class FetchedRecords:
    """The data records of one fetched partition and where the next fetch starts."""

    records: list[Record] = field(default_factory=list)
    next_offset: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    # The data batches passed over as undecodable (``skip_corrupt``), in offset order.
    skipped: list[CorruptRecordError] = field(default_factory=list)


def complete_batches_size(data: bytes | bytearray | memoryview) -> int:
    """How many leading bytes of ``data`` are whole record batches (a cut-off tail excluded)."""
    view = memoryview(data).cast("B")
    pos = 0
    total = len(view)
    while total - pos >= _LENGTH.size:
        _base_offset, batch_length = _LENGTH.unpack_from(view, pos)
        if batch_length < BATCH_HEADER_SIZE - _LENGTH.size:
            raise CorruptRecordError(f"batch at byte {pos}: invalid length {batch_length}")
        end = pos + _LENGTH.size + batch_length
        if end > total:
            break
        pos = end
    return pos


def control_type(batch: RecordBatch) -> int | None:
    """The marker type of a control batch (``CONTROL_TYPE_*``), None for a data batch."""
    if not batch.is_control:
        return None
    if not batch.records:
        raise CorruptRecordError(f"control batch at offset {batch.base_offset} has no record")
    key = batch.records[0].key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control batch at offset {batch.base_offset}: bad record key")
    return int(_CONTROL_KEY.unpack_from(key)[1])


def fetched_records(
    partition: FetchResponse.PartitionData,
    fetch_offset: int,
    *,
    read_committed: bool,
    topic: str = "",
    max_decoded_bytes: int = MAX_DECODED_BYTES,
    skip_corrupt: bool = False,
) -> FetchedRecords:
    """The records of ``partition`` (fetched from ``fetch_offset``) a consumer would see.

    ``read_committed`` must match the isolation level the Fetch was sent with; ``topic`` names
    the partition in errors. ``max_decoded_bytes``: what the partition's batches may decode to
    in all (see the module invariants). With ``skip_corrupt`` a data batch that cannot be
    decoded is passed over and its error listed in ``skipped`` instead of raised.
    """
    if partition.error_code:
        where = f"Fetch {topic}-{partition.partition_index} at offset {fetch_offset}"
        error = error_for_code(partition.error_code, where)
        assert error is not None
        raise error
    data = partition.records or b""
    try:
        whole = complete_batches_size(data)
    except CorruptRecordError as exc:
        raise _located(exc, topic, partition.partition_index) from None
    view = memoryview(data).cast("B")[:whole]
    # Aborted transactions in first-offset order; a producer enters the aborted set once the
    # batches reach its first offset and leaves it at its abort marker.
    pending = [(a.first_offset, a.producer_id) for a in (partition.aborted_transactions or [])]
    heapq.heapify(pending)
    aborted: set[int] = set()
    records: list[Record] = []
    skipped: list[CorruptRecordError] = []
    next_offset = fetch_offset
    room = max_decoded_bytes
    for start, end in batch_spans(view) if whole else []:
        header = batch_header(view, start)
        last_offset = header.base_offset + header.last_offset_delta
        is_control = bool(header.attributes & CONTROL_FLAG)
        producer_id = header.producer_id
        if (
            read_committed
            and not is_control
            and producer_id >= 0
            and header.attributes & TRANSACTIONAL_FLAG
        ):
            while pending and pending[0][0] <= last_offset:
                aborted.add(heapq.heappop(pending)[1])
            if producer_id in aborted:
                # Aborted data: dropped without being decoded.
                next_offset = max(next_offset, last_offset + 1)
                continue
        try:
            batch = decode_batch(view[start:end], max_decoded_bytes=room)
        except CorruptRecordError as exc:
            if next_offset > fetch_offset and isinstance(exc, DecodeLimitError):
                break  # no room left in this answer: the next fetch starts at this batch
            bad = _located(exc, topic, partition.partition_index)
            # A marker is never skipped: passing over one would change which data is aborted.
            if not skip_corrupt or is_control:
                raise bad from None
            skipped.append(bad)
            next_offset = max(next_offset, last_offset + 1)
            continue
        room -= batch.decoded_bytes
        next_offset = max(next_offset, last_offset + 1)
        try:
            marker = control_type(batch)
        except CorruptRecordError as exc:
            raise CorruptRecordError(
                f"cannot read {topic}-{partition.partition_index}: {exc}",
                topic=topic,
                partition=partition.partition_index,
                offset=header.base_offset,
                last_offset=last_offset,
                checksum_ok=True,
            ) from None
        if read_committed and producer_id >= 0:
            while pending and pending[0][0] <= last_offset:
                aborted.add(heapq.heappop(pending)[1])
            if marker == CONTROL_TYPE_ABORT:
                aborted.discard(producer_id)
        if marker is not None:
            continue
        log_append_time = bool(batch.attributes & TIMESTAMP_TYPE_FLAG)
        for record in batch.records:
            if record.offset < fetch_offset:
                continue
            if log_append_time:
                record.timestamp_ms = batch.max_timestamp_ms  # decoded here, owned by nobody else
            records.append(record)
    return FetchedRecords(
        records,
        next_offset,
        partition.high_watermark,
        partition.last_stable_offset,
        partition.log_start_offset,
        skipped,
    )


def _located(exc: CorruptRecordError, topic: str, partition: int) -> CorruptRecordError:
    """``exc`` again, its message and attributes naming the topic and partition too."""
    kind = DecodeLimitError if isinstance(exc, DecodeLimitError) else CorruptRecordError
    return kind(
        f"cannot read {topic}-{partition}: {exc}",
        topic=topic,
        partition=partition,
        offset=exc.offset,
        last_offset=exc.last_offset,
        checksum_ok=exc.checksum_ok,
    )
