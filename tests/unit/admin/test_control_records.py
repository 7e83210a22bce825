"""A transaction's outcome read from its markers, against scripted Fetch answers.

Each answer is a partition's log as the broker returns it read_uncommitted: data batches and
control batches (built as in ``tests/unit/records/test_fetched.py``), with a high watermark. The
deadline runs on the manual clock, advanced by each backoff.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kafka_sink.admin.client import Deadline
from kafka_sink.admin.control_records import (
    ControlRecordReader,
    MarkerNotReachedError,
    TransactionOutcomeUnknownError,
    marker_after,
    scan_for_outcome,
)
from kafka_sink.clock import ManualClock
from kafka_sink.errors import (
    CorruptRecordError,
    DecodeLimitError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    TopicAuthorizationFailedError,
)
from kafka_sink.prepared import PreparedTransaction, TopicPartition
from kafka_sink.records.batch import CONTROL_FLAG, RecordBatchBuilder, read_batches
from kafka_sink.records.compression import CompressionType
from kafka_sink.records.fetched import CONTROL_TYPE_ABORT, CONTROL_TYPE_COMMIT, MAX_DECODED_BYTES
from kafka_sink.wire.messages import FetchResponse
from tests.unit.records.test_fetched import TS, data_batch, with_attributes
from tests.unit.records.test_hostile_batches import MiB, _peak, _sealed, _zeros_stream

PD = FetchResponse.PartitionData
OFFSET_OUT_OF_RANGE = 1
NOT_LEADER_OR_FOLLOWER = 6
TOPIC_AUTHORIZATION_FAILED = 29
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

    def __init__(
        self,
        log: list[tuple[int, bytes]],
        *answers: int | None,
        limit: int = 99,
        behind: int = 0,
        log_start: int = 0,
    ):
        self.log = log
        self.answers = list(answers)
        self.limit = limit
        #: How many answers come from a leader whose high watermark lags the last batch.
        self.behind = behind
        self.log_start = log_start
        self.asked: list[int] = []

    @property
    def high_watermark(self) -> int:
        shown = self.log[: len(self.log) - 1] if self.behind else self.log
        last = read_batches(shown[-1][1])[-1] if shown else None
        return 0 if last is None else last.base_offset + last.last_offset_delta + 1

    def __call__(self, offset: int) -> FetchResponse.PartitionData:
        self.asked.append(offset)
        code = self.answers.pop(0) if self.answers else None
        if code:
            return PD(0, code, -1, 0, self.log_start)
        high_watermark = self.high_watermark
        self.behind = max(self.behind - 1, 0)
        batches = [raw for base, raw in self.log if offset <= base < high_watermark][: self.limit]
        return PD(0, 0, high_watermark, 0, self.log_start, records=b"".join(batches))


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
    with pytest.raises(TransactionOutcomeUnknownError, match=r"'q-0-0'.*t-0") as info:
        scan(Scripted(log))
    # A leader behind the marker, as far as this partition tells: the caller asks again.
    assert isinstance(info.value, MarkerNotReachedError) and info.value.retriable
    assert info.value.resume_from == 3


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


# -- the reader: the transaction's partitions, within one deadline ----------------------------


class _Client:
    """What :class:`ControlRecordReader` uses of its admin client, on the manual clock."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.refreshes = 0
        self.metadata = self

    def request_update(self) -> int:
        self.refreshes += 1
        return self.refreshes

    def back_off(self, attempts: int, deadline: Deadline) -> None:
        self.clock.advance(100)
        deadline.check()


class _Reader(ControlRecordReader):
    """The reader with each partition's Fetch answered by a :class:`Scripted` log."""

    def __init__(self, logs: Mapping[TopicPartition, Scripted], timeout_ms: int = 5_000):
        super().__init__(_Client(), timeout_ms=timeout_ms)  # type: ignore[arg-type]
        self.logs = logs

    def _fetch_partition(
        self, topic: str, partition: int, offset: int, deadline: Deadline, isolation: int
    ) -> tuple[int, Any]:
        return 0, self.logs[(topic, partition)](offset)


TP1 = ("t", 1)
TWO = PreparedTransaction("q-0-0", PID, 4, (TP, TP1))


def _committed_in(pid: int = PID) -> list[tuple[int, bytes]]:
    return [(0, txn_data(0, pid)), (2, marker(2, pid, 5, CONTROL_TYPE_COMMIT))]


def test_a_leader_behind_the_marker_is_asked_again_until_it_has_caught_up() -> None:
    # A newly elected leader: its high watermark stays below the marker for two answers.
    fetch = Scripted(_committed_in(), behind=2)
    reader = _Reader({TP: fetch})
    assert reader.transaction_outcome(PREPARED, {TP: 0}) is True
    assert fetch.asked == [0, 2, 2]  # resumed where the short answers ended
    assert reader.client.refreshes >= 2  # the leadership is looked up again each round


def test_a_leader_that_stays_behind_is_unknown_at_the_deadline_never_aborted() -> None:
    fetch = Scripted(_committed_in(), behind=10_000)
    reader = _Reader({TP: fetch}, timeout_ms=1_000)
    with pytest.raises(TransactionOutcomeUnknownError) as info:
        reader.transaction_outcome(PREPARED, {TP: 0})
    text = str(info.value)
    assert "'q-0-0'" in text and "did not finish within 1000 ms" in text
    assert "t-0: no COMMIT or ABORT marker" in text and "high watermark 2" in text
    assert isinstance(info.value.causes[TP], MarkerNotReachedError)
    assert len(fetch.asked) <= 12


def test_another_partition_tells_while_one_leader_is_behind() -> None:
    behind = Scripted(_committed_in(), behind=10_000)
    caught_up = Scripted(_committed_in())
    reader = _Reader({TP: behind, TP1: caught_up})
    assert reader.transaction_outcome(TWO, {TP: 0, TP1: 0}) is True
    assert behind.asked == [0] and caught_up.asked == [0]


def test_a_fetch_refused_for_authorization_is_unknown_naming_the_cause() -> None:
    # The principal lacks READ on the topic: every partition refuses, at once.
    fetch = {tp: Scripted(_committed_in(), TOPIC_AUTHORIZATION_FAILED) for tp in (TP, TP1)}
    reader = _Reader(fetch)
    with pytest.raises(TransactionOutcomeUnknownError, match="TOPIC_AUTHORIZATION_FAILED") as info:
        reader.transaction_outcome(TWO, {TP: 0, TP1: 0})
    assert sorted(info.value.causes) == [TP, TP1]
    assert all(isinstance(e, TopicAuthorizationFailedError) for e in info.value.causes.values())
    assert reader.client.clock.now_ms() == 0  # nothing waited for
    assert "t-0: " in str(info.value) and "t-1: " in str(info.value)


def test_an_offset_below_the_log_start_is_unknown_naming_retention() -> None:
    fetch = Scripted(_committed_in(), OFFSET_OUT_OF_RANGE, log_start=10)
    with pytest.raises(
        TransactionOutcomeUnknownError, match="below the log start offset 10"
    ) as info:
        _Reader({TP: fetch}).transaction_outcome(PREPARED, {TP: 0})
    assert isinstance(info.value.causes[TP], OffsetOutOfRangeError)
    assert "retention or compaction" in str(info.value)


def test_an_offset_beyond_a_short_log_is_a_leader_behind() -> None:
    fetch = Scripted(_committed_in(), OFFSET_OUT_OF_RANGE, OFFSET_OUT_OF_RANGE)
    assert _Reader({TP: fetch}).transaction_outcome(PREPARED, {TP: 0}) is True
    assert fetch.asked == [0, 0, 0]


def test_without_first_offsets_nothing_is_read_and_the_outcome_is_unknown() -> None:
    fetch = Scripted(_committed_in())
    with pytest.raises(TransactionOutcomeUnknownError, match=r"first offsets .* not known"):
        _Reader({TP: fetch}).transaction_outcome(PREPARED, {})
    assert fetch.asked == []


# -- what a data partition's batches may decode to ----------------------------------------------


def _bomb(base_offset: int, pid: int, size: int) -> bytes:
    """A transactional data batch of ``pid`` whose records section is ``size`` zero bytes
    compressed with zstd (a few KB on the wire)."""
    sealed = _sealed(CompressionType.ZSTD, _zeros_stream(CompressionType.ZSTD, size))
    return sealed.encode(
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def test_a_decompression_bomb_before_the_marker_is_an_error_naming_where_not_inflated() -> None:
    # Another producer's batch in the data partition inflating to 512 MiB.
    log = [
        (0, txn_data(0, PID)),
        (2, _bomb(2, 99, 512 * MiB)),
        (3, marker(3, PID, 5, CONTROL_TYPE_ABORT)),
    ]
    raised: list[BaseException] = []

    def read() -> None:
        try:
            scan(Scripted(log))
        except CorruptRecordError as exc:
            raised.append(exc)
            raise

    assert _peak(read) < MAX_DECODED_BYTES + 16 * MiB  # stopped at the bound, not at 512 MiB
    [error] = raised
    assert isinstance(error, DecodeLimitError) and not error.retriable
    assert error.topic == "t" and error.partition == 0 and error.offset == 2
    assert "t-0" in str(error) and "offset 2" in str(error)


def test_batches_past_the_bound_together_are_read_in_the_next_fetch() -> None:
    # Each data batch decodes within the bound, but not two of them in one answer: the first
    # answer stops after the first, and the next fetch starts at the second.
    values = [bytes(200_000)]  # about 600 KB decoded (key, value, header), little compressed
    log = [
        (0, data_batch(0, values, pid=99, transactional=True, codec=CompressionType.ZSTD)),
        (1, data_batch(1, values, pid=98, transactional=True, codec=CompressionType.ZSTD)),
        (2, marker(2, PID, 5, CONTROL_TYPE_COMMIT)),
    ]
    answer = Scripted(log)(0)
    outcome, following = marker_after(answer, 0, PREPARED, "t", max_decoded_bytes=800_000)
    assert (outcome, following) == (None, 1)
    outcome, following = marker_after(Scripted(log)(1), 1, PREPARED, "t", max_decoded_bytes=800_000)
    assert (outcome, following) == (True, 3)
