"""Records out of a Fetch response partition: offsets, truncated tails, markers, aborted data.

The batches are built with the record builder; control batches and LogAppendTime batches are the
same bytes with the attribute bit set and the CRC recomputed (the builder never produces them).
The broker tests read the same things back from a real log.
"""

from __future__ import annotations

import struct

import pytest

from kafka_sink.errors import CorruptRecordError, NotLeaderOrFollowerError
from kafka_sink.records.batch import (
    CONTROL_FLAG,
    TIMESTAMP_TYPE_FLAG,
    Record,
    RecordBatchBuilder,
    read_batches,
)
from kafka_sink.records.compression import CompressionType
from kafka_sink.records.crc import crc32c
from kafka_sink.records.fetched import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    complete_batches_size,
    control_type,
    fetched_records,
)
from kafka_sink.wire.messages import FetchResponse

TS = 1_700_000_000_000
PD = FetchResponse.PartitionData
AT = FetchResponse.AbortedTransaction


def data_batch(
    base_offset: int,
    values: list[bytes],
    *,
    pid: int = -1,
    transactional: bool = False,
    codec: CompressionType = CompressionType.NONE,
) -> bytes:
    builder = RecordBatchBuilder(compression_type=codec, batch_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(TS + i, b"k" + value, value, [("h", value)])
    return builder.seal().encode(
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=transactional,
    )


def with_attributes(batch: bytes, extra: int) -> bytes:
    """``batch`` with attribute bits ``extra`` added and its CRC-32C recomputed."""
    (attributes,) = struct.unpack_from(">h", batch, 21)
    body = struct.pack(">h", attributes | extra) + batch[23:]
    return batch[:17] + struct.pack(">I", crc32c(body)) + body


def marker(base_offset: int, pid: int, kind: int) -> bytes:
    """A transaction marker as the coordinator writes it: key (version 0, type), value (version
    0, coordinator epoch 0)."""
    builder = RecordBatchBuilder()
    builder.append(TS, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 0))
    raw = builder.seal().encode(
        base_offset=base_offset, producer_id=pid, producer_epoch=0, is_transactional=True
    )
    return with_attributes(raw, CONTROL_FLAG)


def values(records: list[Record]) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for r in records]


def test_plain_batches_from_inside_a_compressed_batch() -> None:
    data = data_batch(0, [b"a", b"b", b"c"], codec=CompressionType.ZSTD) + data_batch(
        3, [b"d", b"e"]
    )
    got = fetched_records(PD(0, 0, 5, 5, 0, records=data), 1, read_committed=False)
    assert values(got.records) == [(1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    first = got.records[0]
    assert (first.key, first.headers, first.timestamp_ms) == (
        b"kb",
        [("h", b"b")],
        TS + 1,
    )
    assert (got.next_offset, got.high_watermark, got.last_stable_offset) == (5, 5, 5)
    assert got.log_start_offset == 0


def test_a_truncated_last_batch_is_dropped_and_fetched_again() -> None:
    first = data_batch(0, [b"a", b"b"])
    second = data_batch(2, [b"c"])
    for cut in (1, 12, len(second) - 1):
        data = first + second[:cut]
        assert complete_batches_size(data) == len(first)
        got = fetched_records(PD(0, 0, 3, records=data), 0, read_committed=False)
        assert values(got.records) == [(0, b"a"), (1, b"b")]
        assert got.next_offset == 2
    # Only a partial batch: nothing yet, and the next fetch starts where this one did.
    got = fetched_records(PD(0, 0, 3, records=second[:-1]), 2, read_committed=False)
    assert (got.records, got.next_offset) == ([], 2)


def test_no_records_leaves_the_offset_unchanged() -> None:
    for records in (None, b""):
        got = fetched_records(PD(0, 0, 7, 7, 0, records=records), 7, read_committed=True)
        assert (got.records, got.next_offset) == ([], 7)


# offsets: 0-1 pid 7 (aborted), 2 abort marker, 3 non-transactional, 4 pid 8 (committed),
# 5 commit marker for 8, 6 pid 7 again (a later, committed transaction), 7 commit marker for 7.
LOG = (
    data_batch(0, [b"x0", b"x1"], pid=7, transactional=True)
    + marker(2, 7, CONTROL_TYPE_ABORT)
    + data_batch(3, [b"plain"])
    + data_batch(4, [b"y"], pid=8, transactional=True)
    + marker(5, 8, CONTROL_TYPE_COMMIT)
    + data_batch(6, [b"z"], pid=7, transactional=True)
    + marker(7, 7, CONTROL_TYPE_COMMIT)
)


def test_read_committed_drops_aborted_transactions_and_every_marker() -> None:
    partition = PD(0, 0, 8, 8, 0, aborted_transactions=[AT(7, 0)], records=LOG)
    got = fetched_records(partition, 0, read_committed=True)
    assert values(got.records) == [(3, b"plain"), (4, b"y"), (6, b"z")]
    assert got.next_offset == 8


def test_read_uncommitted_keeps_aborted_data_but_not_markers() -> None:
    got = fetched_records(PD(0, 0, 8, 8, 0, records=LOG), 0, read_committed=False)
    assert values(got.records) == [(0, b"x0"), (1, b"x1"), (3, b"plain"), (4, b"y"), (6, b"z")]
    assert got.next_offset == 8


def test_an_aborted_transaction_starting_after_a_batch_does_not_drop_it() -> None:
    # pid 7 commits at 0-1 (marker 2), then opens a transaction at 3 that is aborted (marker 4):
    # only the second one is in the aborted list, so the first stays.
    log = (
        data_batch(0, [b"kept0", b"kept1"], pid=7, transactional=True)
        + marker(2, 7, CONTROL_TYPE_COMMIT)
        + data_batch(3, [b"gone"], pid=7, transactional=True)
        + marker(4, 7, CONTROL_TYPE_ABORT)
    )
    got = fetched_records(
        PD(0, 0, 5, 5, 0, aborted_transactions=[AT(7, 3)], records=log), 0, read_committed=True
    )
    assert values(got.records) == [(0, b"kept0"), (1, b"kept1")]
    assert got.next_offset == 5


def test_control_type_reads_the_marker_key() -> None:
    abort, commit, plain = read_batches(
        marker(0, 1, CONTROL_TYPE_ABORT) + marker(1, 1, CONTROL_TYPE_COMMIT) + data_batch(2, [b"v"])
    )
    assert (control_type(abort), control_type(commit), control_type(plain)) == (0, 1, None)


def test_log_append_time_batches_carry_the_batch_timestamp() -> None:
    batch = with_attributes(data_batch(0, [b"a", b"b"]), TIMESTAMP_TYPE_FLAG)
    got = fetched_records(PD(0, 0, 2, records=batch), 0, read_committed=False)
    assert [r.timestamp_ms for r in got.records] == [TS + 1, TS + 1]


def test_a_partition_error_raises_the_broker_error() -> None:
    with pytest.raises(NotLeaderOrFollowerError, match="Fetch t-3 at offset 9"):
        fetched_records(PD(3, 6, -1), 9, read_committed=False, topic="t")


def test_a_corrupt_batch_is_an_error_not_an_empty_result() -> None:
    batch = bytearray(data_batch(0, [b"a"]))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        fetched_records(PD(0, 0, 1, records=bytes(batch)), 0, read_committed=False)
    bad_length = bytes(8) + struct.pack(">i", 3) + bytes(60)
    with pytest.raises(CorruptRecordError, match="invalid length"):
        fetched_records(PD(0, 0, 1, records=bad_length), 0, read_committed=False)
