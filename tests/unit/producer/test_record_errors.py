"""Record-level failures in a batch: which rows of a ``send_columns`` call failed, and why.

A scripted broker answers each Produce request per partition: it refuses a batch holding a
"bad" value (INVALID_RECORD naming it, MESSAGE_TOO_LARGE, ...) and writes every other batch at
consecutive offsets. The sender splits refused batches; the BulkSendFuture must then report the
rows of the parts that were written as acknowledged (in ``offsets()``) and only the refused
records' rows in ``failed_rows()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink.errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaTimeoutError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    is_record_error,
)
from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets
from tests.fakes.producer import produce_response
from tests.unit.producer.test_bulk import TOPIC, Bulk, make_bulk

INVALID_RECORD = 87
MESSAGE_TOO_LARGE = 10
CORRUPT_MESSAGE = 2
TOPIC_AUTH = 29

# A judge looks at one partition's batch (its record values) and answers
# None (write it) or (error code, batch indexes named in record_errors).
Judge = Callable[[int, list[bytes]], tuple[int, list[int]] | None]


def play(b: Bulk, judge: Judge, rounds: int = 200) -> list[list[bytes]]:
    """Run the sender, answering every request through ``judge``, until nothing is left.

    Returns the values of every batch the broker wrote, in the order written.
    """
    written: list[list[bytes]] = []
    for _ in range(rounds):
        if not b.accumulator.has_incomplete():
            return written
        b.run()
        for sent in b.network.pending():
            errors: dict[tuple[str, int], int] = {}
            named: dict[tuple[str, int], list[int]] = {}
            base: dict[tuple[str, int], int] = {}
            for (topic, partition), batch in sent.batches().items():
                values = [r.value for r in batch.records]
                verdict = judge(partition, values)
                if verdict is None:
                    base[(topic, partition)] = b.next_offset.get(partition, 0)
                    b.next_offset[partition] = base[(topic, partition)] + len(values)
                    written.append(values)
                else:
                    errors[(topic, partition)], named[(topic, partition)] = verdict
            b.network.respond(
                sent,
                produce_response(sent, errors=errors, base_offsets=base, record_errors=named),
            )
        b.run()
        b.clock.advance(100)  # past any retry backoff
    raise AssertionError("batches still incomplete")


def send(b: Bulk, values: list[bytes], **kw: Any) -> BulkSendFuture:
    parts = b.metadata.cluster.partitions[TOPIC]
    columns = b.columns(pa.array(values, pa.binary()), **kw)
    return b.appender.append(TOPIC, parts, columns, track_rows=True)


def test_invalid_record_named_in_record_errors_fails_only_that_row() -> None:
    b = make_bulk()
    values = [b"v%d" % i for i in range(5)]
    future = send(b, values)

    def judge(_partition: int, batch: list[bytes]) -> tuple[int, list[int]] | None:
        if b"v2" in batch:
            return INVALID_RECORD, [batch.index(b"v2")]
        return None

    written = play(b, judge)
    assert future.done()
    # The good records went in batches of their own, in order; the bad one alone was refused.
    assert written == [[b"v0", b"v1"], [b"v3", b"v4"]]
    assert future.offsets() == {0: PartitionOffsets(0, 3, 4)}
    (failed,) = future.failed_rows()
    assert failed[0] == 2
    assert isinstance(failed[1], InvalidRecordError)
    assert is_record_error(failed[1])
    assert isinstance(future.exception(0), InvalidRecordError)
    assert future.unacknowledged() == {0: (1, 1)}
    assert b.accumulator.used_memory == 0


def test_invalid_record_naming_several_records_isolates_each() -> None:
    b = make_bulk()
    future = send(b, [b"v%d" % i for i in range(6)])
    bad = {b"v0", b"v3", b"v4"}

    def judge(_partition: int, batch: list[bytes]) -> tuple[int, list[int]] | None:
        named = [i for i, v in enumerate(batch) if v in bad]
        return (INVALID_RECORD, named) if named else None

    written = play(b, judge)
    assert written == [[b"v1", b"v2"], [b"v5"]]
    assert [row for row, _e in future.failed_rows()] == [0, 3, 4]
    assert future.offsets() == {0: PartitionOffsets(0, 2, 3)}


def test_invalid_record_without_record_errors_splits_in_halves() -> None:
    # An older broker names no record: halves, until the record is refused alone.
    b = make_bulk()
    future = send(b, [b"v%d" % i for i in range(4)])

    def judge(_partition: int, batch: list[bytes]) -> tuple[int, list[int]] | None:
        return (INVALID_RECORD, []) if b"v1" in batch else None

    written = play(b, judge)
    # Without idempotence the second half may go while the first is split again.
    assert sorted(written) == [[b"v0"], [b"v2", b"v3"]]
    assert [(row, type(e)) for row, e in future.failed_rows()] == [(1, InvalidRecordError)]
    assert future.offsets()[0].record_count == 3


def test_message_too_large_splits_down_to_the_oversize_row() -> None:
    b = make_bulk()
    values = [b"v0", b"big" + b"x" * 500, b"v2", b"v3"]
    future = send(b, values)

    def judge(_partition: int, batch: list[bytes]) -> tuple[int, list[int]] | None:
        return (MESSAGE_TOO_LARGE, []) if values[1] in batch else None

    written = play(b, judge)
    assert sorted(written) == [[b"v0"], [b"v2", b"v3"]]
    (failed,) = future.failed_rows()
    assert failed[0] == 1
    assert isinstance(failed[1], RecordTooLargeError)
    assert is_record_error(failed[1])
    assert future.offsets() == {0: PartitionOffsets(0, 2, 3)}
    assert future.unacknowledged() == {0: (1, 1)}
    assert future.record_count == 4


def test_failed_rows_span_partitions_in_call_order() -> None:
    b = make_bulk(partitions=2)
    n = 8
    future = send(b, [b"v%d" % i for i in range(n)], partitions=[i % 2 for i in range(n)])

    def judge(partition: int, batch: list[bytes]) -> tuple[int, list[int]] | None:
        if partition == 1:
            return TOPIC_AUTH, []  # the whole partition's batch fails: not a record error
        if b"v4" in batch:
            return INVALID_RECORD, [batch.index(b"v4")]
        return None

    play(b, judge)
    failed = future.failed_rows()
    assert [row for row, _e in failed] == [1, 3, 4, 5, 7]
    kinds = {row: type(e) for row, e in failed}
    assert kinds[4] is InvalidRecordError
    assert {kinds[r] for r in (1, 3, 5, 7)} == {TopicAuthorizationFailedError}
    assert not is_record_error(failed[0][1])
    assert future.offsets() == {0: PartitionOffsets(0, 2, 3)}
    assert future.unacknowledged() == {0: (1, 1), 1: (4, 1)}


def test_failed_rows_needs_track_rows() -> None:
    b = make_bulk()
    parts = b.metadata.cluster.partitions[TOPIC]
    future = b.appender.append(TOPIC, parts, b.columns(pa.array([b"a"], pa.binary())))
    b.deliver_everything()
    with pytest.raises(ValueError, match="track_rows=True"):
        future.failed_rows()


def test_corrupt_message_naming_a_lone_record_fails_it_without_retrying() -> None:
    b = make_bulk()
    future = send(b, [b"v0", b"v1", b"v2"])
    attempts: list[list[bytes]] = []

    def judge(_partition: int, batch: list[bytes]) -> tuple[int, list[int]] | None:
        attempts.append(batch)
        return (CORRUPT_MESSAGE, [batch.index(b"v1")]) if b"v1" in batch else None

    play(b, judge)
    assert attempts.count([b"v1"]) == 1  # refused alone once, then failed: no retry
    (failed,) = future.failed_rows()
    assert failed[0] == 1
    assert isinstance(failed[1], CorruptMessageError)
    assert future.offsets()[0].record_count == 2


def test_corrupt_message_naming_no_record_is_still_retried() -> None:
    # Damage in transit (a bad CRC): the same bytes may well pass next time, as in Java.
    b = make_bulk()
    future = send(b, [b"v0", b"v1"])
    answers = iter([(CORRUPT_MESSAGE, [])])

    def judge(_partition: int, _batch: list[bytes]) -> tuple[int, list[int]] | None:
        return next(answers, None)

    written = play(b, judge)
    assert written == [[b"v0", b"v1"]]
    assert future.failed_rows() == []
    assert future.get(0) == {0: PartitionOffsets(0, 1, 2)}


def test_is_record_error_leaves_out_write_level_errors() -> None:
    assert is_record_error(RecordTooLargeError("x"))
    assert is_record_error(InvalidRecordError("x"))
    assert is_record_error(CorruptMessageError("x"))
    assert not is_record_error(KafkaTimeoutError("x"))
    assert not is_record_error(TopicAuthorizationFailedError("x"))
    assert not is_record_error(ValueError("x"))


def test_invalid_timestamp_named_in_record_errors_fails_only_that_row() -> None:
    b = make_bulk()
    values = [b"v%d" % i for i in range(4)]
    future = send(b, values)

    def judge(_partition: int, batch: list[bytes]) -> tuple[int, list[int]] | None:
        if b"v1" in batch:
            return InvalidTimestampError.code, [batch.index(b"v1")]
        return None

    written = play(b, judge)
    assert written == [[b"v0"], [b"v2", b"v3"]]
    (failed,) = future.failed_rows()
    assert failed[0] == 1 and isinstance(failed[1], InvalidTimestampError)
    assert is_record_error(failed[1])
