"""A transaction's outcome read from its markers, against scripted Fetch answers.

Each answer is a partition's log as the broker returns it read_uncommitted: data batches and
control batches (built as in ``tests/unit/records/test_fetched.py``), with a high watermark. The
deadline runs on the manual clock, advanced by each backoff.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest

from kafka_sink.admin.client import Deadline
from kafka_sink.admin.control_records import TransactionOutcomeUnknownError, scan_for_outcome
from kafka_sink.clock import ManualClock
from kafka_sink.errors import KafkaTimeoutError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.records.batch import CONTROL_FLAG, RecordBatchBuilder, read_batches
from kafka_sink.records.fetched import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT
from kafka_sink.wire.messages import FetchResponse
from tests.unit.records.test_fetched import TS, data_batch, with_attributes

PD = FetchResponse.PartitionData
NOT_LEADER_OR_FOLLOWER = 6
TP = ("t", 0)
PID = 7
# Prepared at epoch 4; the coordinator wrote its marker at epoch 5 (EndTxn v5 bumps first).
PREPARED = PreparedTransaction("q-0-0", PID, 4, (TP,))


def marker(base_offset: int, pid: int, epoch: int, kind: int) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(TS, struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 0))
    raw = builder.seal().encode(
        base_offset=base_offset, producer_id=pid, producer_epoch=epoch, is_transactional=True
    )
    return with_attributes(raw, CONTROL_FLAG)


def txn_data(base_offset: int, pid: int, count: int = 2) -> bytes:
    return data_batch(base_offset, [b"v%d" % i for i in range(count)], pid=pid, transactional=True)


class Scripted:
    """Answers each Fetch with the next scripted answer (an error code, or the log from the
    fetch offset up to ``limit`` batches), recording the offsets asked."""

    def __init__(self, log: list[tuple[int, bytes]], *answers: int | None, limit: int = 99):
        self.log = log
        self.answers = list(answers)
        self.limit = limit
        self.asked: list[int] = []

    @property
    def high_watermark(self) -> int:
        last = read_batches(self.log[-1][1])[-1] if self.log else None
        return 0 if last is None else last.base_offset + last.last_offset_delta + 1

    def __call__(self, offset: int) -> FetchResponse.PartitionData:
        self.asked.append(offset)
        code = self.answers.pop(0) if self.answers else None
        if code:
            return PD(0, code, -1)
        batches = [raw for base, raw in self.log if base >= offset][: self.limit]
        return PD(0, 0, self.high_watermark, 0, 0, records=b"".join(batches))


def scan(
    fetch: Callable[[int], FetchResponse.PartitionData], first: int = 0, timeout_ms: int = 5_000
) -> bool:
    clock = ManualClock()

    def back_off(attempts: int, deadline: Deadline) -> None:
        clock.advance(100)
        deadline.check()

    return scan_for_outcome(
        fetch,
        PREPARED,
        TP,
        first,
        deadline=Deadline(clock, timeout_ms, "reading the marker"),
        back_off=back_off,
    )


@pytest.mark.parametrize(
    ("kind", "committed"), [(CONTROL_TYPE_COMMIT, True), (CONTROL_TYPE_ABORT, False)]
)
def test_the_marker_after_the_data_is_the_outcome(kind: int, committed: bool) -> None:
    log = [(0, txn_data(0, PID)), (2, marker(2, PID, 5, kind))]
    assert scan(Scripted(log)) is committed


def test_other_producers_markers_and_older_epochs_are_passed_over() -> None:
    log = [
        (0, marker(0, PID, 3, CONTROL_TYPE_COMMIT)),  # the id's previous transaction
        (2, txn_data(2, PID)),
        (4, txn_data(4, 99)),
        (6, marker(6, 99, 5, CONTROL_TYPE_COMMIT)),  # another producer, same epoch number
        (8, marker(8, PID, 5, CONTROL_TYPE_ABORT)),
        (10, marker(10, PID, 6, CONTROL_TYPE_COMMIT)),  # a later transaction of the id
    ]
    assert scan(Scripted(log), first=2) is False


def test_a_long_log_is_read_fetch_by_fetch_up_to_the_marker() -> None:
    log = [(2 * i, txn_data(2 * i, 50 + i)) for i in range(5)]
    log.append((10, marker(10, PID, 5, CONTROL_TYPE_COMMIT)))
    fetch = Scripted(log, limit=2)
    assert scan(fetch) is True
    assert fetch.asked == [0, 4, 8]


def test_no_marker_up_to_the_high_watermark_is_an_error_naming_the_id_and_partition() -> None:
    log = [(0, txn_data(0, PID)), (2, marker(2, 99, 5, CONTROL_TYPE_COMMIT))]
    with pytest.raises(TransactionOutcomeUnknownError, match=r"'q-0-0'.*t-0"):
        scan(Scripted(log))


def test_a_moved_leader_is_retried_within_the_deadline() -> None:
    log = [(0, txn_data(0, PID)), (2, marker(2, PID, 5, CONTROL_TYPE_COMMIT))]
    fetch = Scripted(log, NOT_LEADER_OR_FOLLOWER, NOT_LEADER_OR_FOLLOWER)
    assert scan(fetch) is True
    assert fetch.asked == [0, 0, 0]


def test_a_leader_that_never_answers_ends_at_the_deadline() -> None:
    log = [(0, txn_data(0, PID)), (2, marker(2, PID, 5, CONTROL_TYPE_COMMIT))]
    fetch = Scripted(log, *[NOT_LEADER_OR_FOLLOWER] * 1000)
    with pytest.raises(KafkaTimeoutError, match="reading the marker"):
        scan(fetch, timeout_ms=1_000)
    assert len(fetch.asked) <= 11
