"""DUPLICATE_SEQUENCE_NUMBER: a success without an offset, stepped through the Sender.

A broker answers it for a batch an earlier attempt already wrote when it no longer has that
batch's offset (1.0-era brokers). The records are in the log at an unknown offset: the bulk
future must count them as acknowledged and say that their offsets are unknown, never report a
range that silently leaves them out, and the Spark commit message must carry the same.
"""

from __future__ import annotations

from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets
from kafka_sink.records.batch import RecordBatchBuilder
from kafka_sink.spark.commit_log.document import (
    PartitionRange,
    PyKafkaCommitMessage,
    build_document,
)
from kafka_sink.spark.executor.task import _Offsets
from tests.fakes.producer import Harness, make_harness, produce_response

DUPLICATE_SEQUENCE_NUMBER = 46


def _bulk(h: Harness, future: BulkSendFuture, partition: int, n: int) -> None:
    builder = RecordBatchBuilder()
    for i in range(n):
        builder.append(0, None, b"%d" % i)
    batch = h.accumulator.append_sealed("t", partition, builder.seal(), 0, h.clock.now_ms())
    future._add(partition, n, n - 1, batch.result)


def _answer_all(h: Harness, answers: list[tuple[int, int]]) -> None:
    """Answer produce requests in order: (error_code, base_offset) per request."""
    for code, base in answers:
        h.run(10)
        [sent] = h.network.pending()
        h.network.respond(
            sent,
            produce_response(
                sent, errors={("t", 0): code} if code else None, base_offsets={("t", 0): base}
            ),
        )
        h.run()


def test_duplicate_sequence_counts_the_records_and_marks_their_offsets_unknown() -> None:
    h = make_harness(max_in_flight=1)
    h.init_producer_id()
    future = BulkSendFuture("t")
    _bulk(h, future, 0, 3)  # answered DUPLICATE_SEQUENCE_NUMBER
    _bulk(h, future, 0, 2)  # lands at 10..11
    future._seal()
    _answer_all(h, [(DUPLICATE_SEQUENCE_NUMBER, -1), (0, 10)])
    assert future.done()
    offsets = future.get(0)
    assert offsets == {0: PartitionOffsets(10, 11, 5, 3)}

    folded = _Offsets()
    folded.add("t", offsets)
    [r] = folded.ranges()
    assert r == PartitionRange("t", 0, 10, 11, 5, 3)
    doc = build_document(
        "commit", [PyKafkaCommitMessage(0, 0, 1, None, folded.ranges())], mode="append", now_ms=0
    )
    [entry] = doc["offsets"]
    assert (entry["record_count"], entry["unknown_offset_count"]) == (5, 3)
    # The README's invariant: every record with an offset lies in the range.
    span = entry["last_offset"] - entry["first_offset"] + 1
    assert span >= entry["record_count"] - entry["unknown_offset_count"]


def test_only_duplicates_leave_the_range_unknown_but_the_count_exact() -> None:
    h = make_harness(max_in_flight=1)
    h.init_producer_id()
    future = BulkSendFuture("t")
    _bulk(h, future, 0, 4)
    future._seal()
    _answer_all(h, [(DUPLICATE_SEQUENCE_NUMBER, -1)])
    assert future.get(0) == {0: PartitionOffsets(-1, -1, 4, 4)}
