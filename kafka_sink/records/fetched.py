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
  corrupt batches raise :class:`~kafka_sink.errors.CorruptRecordError`.
"""

from __future__ import annotations

import heapq
import struct
from dataclasses import dataclass, field

from kafka_sink.errors import CorruptRecordError, error_for_code
from kafka_sink.records.batch import (
    BATCH_HEADER_SIZE,
    TIMESTAMP_TYPE_FLAG,
    Record,
    RecordBatch,
    read_batches,
)
from kafka_sink.wire.messages.fetch import FetchResponse

__all__ = [
    "CONTROL_TYPE_ABORT",
    "CONTROL_TYPE_COMMIT",
    "FetchedRecords",
    "complete_batches_size",
    "control_type",
    "fetched_records",
]

CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1

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
) -> FetchedRecords:
    """The records of ``partition`` (fetched from ``fetch_offset``) a consumer would see.

    ``read_committed`` must match the isolation level the Fetch was sent with; ``topic`` only
    names the partition in errors.
    """
    if partition.error_code:
        where = f"Fetch {topic}-{partition.partition_index} at offset {fetch_offset}"
        error = error_for_code(partition.error_code, where)
        assert error is not None
        raise error
    data = partition.records or b""
    whole = complete_batches_size(data)
    batches = read_batches(memoryview(data)[:whole]) if whole else []
    # Aborted transactions in first-offset order; a producer enters the aborted set once the
    # batches reach its first offset and leaves it at its abort marker.
    pending = [(a.first_offset, a.producer_id) for a in (partition.aborted_transactions or [])]
    heapq.heapify(pending)
    aborted: set[int] = set()
    records: list[Record] = []
    next_offset = fetch_offset
    for batch in batches:
        last_offset = batch.base_offset + batch.last_offset_delta
        next_offset = max(next_offset, last_offset + 1)
        marker = control_type(batch)
        if read_committed and batch.producer_id >= 0:
            while pending and pending[0][0] <= last_offset:
                aborted.add(heapq.heappop(pending)[1])
            if marker == CONTROL_TYPE_ABORT:
                aborted.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted:
                continue
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
    )
