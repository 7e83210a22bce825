"""RecordAccumulator and futures on their own: batching, readiness, memory, flush, bulk futures."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import BufferExhaustedError, KafkaTimeoutError, ProducerClosedError
from kafka_sink.producer.accumulator import RecordAccumulator
from kafka_sink.producer.framing import PARTITION_FRAMING, request_framing, topic_framing
from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets
from kafka_sink.records.batch import RecordBatchBuilder
from tests.fakes.producer import FakeMetadata


def make(**kw: int) -> tuple[ManualClock, RecordAccumulator, FakeMetadata]:
    clock = ManualClock()
    acc = RecordAccumulator(clock=clock, **kw)
    return clock, acc, FakeMetadata({"t": [0, 1]})


def append(acc: RecordAccumulator, clock: ManualClock, value: bytes = b"v", p: int = 0) -> Any:
    return acc.append("t", p, clock.wall_ms(), None, value, (), None, 0, clock.now_ms())


def test_appends_share_a_batch_until_full() -> None:
    clock, acc, md = make(batch_size=300, linger_ms=100)
    results = [append(acc, clock, b"x" * 50) for _ in range(6)]
    assert [r[2] for r in results] == [True, False, False, False, True, False]
    assert results[4][1]  # the deque now holds a full batch
    ready = acc.ready(md.cluster, clock.now_ms())
    assert ready.ready_nodes == {0}


def test_linger_and_next_ready_check_delay() -> None:
    clock, acc, md = make(linger_ms=30)
    append(acc, clock)
    r = acc.ready(md.cluster, clock.now_ms())
    assert (r.ready_nodes, r.next_ready_check_delay_ms) == (set(), 30)
    clock.advance(30)
    assert acc.ready(md.cluster, clock.now_ms()).ready_nodes == {0}


def test_flush_makes_everything_ready() -> None:
    clock, acc, md = make(linger_ms=10_000)
    append(acc, clock)
    acc.begin_flush()
    assert acc.ready(md.cluster, clock.now_ms()).ready_nodes == {0}
    acc.end_flush()


def test_unknown_leader_reported() -> None:
    clock, acc, md = make(linger_ms=0)
    md.set_leader("t", 1, -1)
    append(acc, clock, p=1)
    r = acc.ready(md.cluster, clock.now_ms())
    assert r.ready_nodes == set() and r.unknown_leader_topics == {"t"}


def test_drain_respects_max_request_size_but_sends_one_oversized_batch() -> None:
    clock, acc, md = make(linger_ms=0, batch_size=1000)
    md = FakeMetadata({"t": [0, 0]})
    append(acc, clock, b"x" * 900, p=0)
    append(acc, clock, b"x" * 900, p=1)
    drained = acc.drain(md.cluster, [0], 500, clock.now_ms())
    assert len(drained[0]) == 1  # alone, although above max.request.size
    drained = acc.drain(md.cluster, [0], 500, clock.now_ms())
    assert len(drained[0]) == 1


def test_drain_counts_the_request_framing_against_max_request_size() -> None:
    clock, acc, md = make(linger_ms=0, batch_size=1000)
    md = FakeMetadata({"t": [0, 0]})
    append(acc, clock, b"x" * 400, p=0)
    append(acc, clock, b"x" * 400, p=1)
    batches = sum(b[0].estimated_size_bytes() for b in acc._batches.values())
    # Both batches together are exactly max.request.size: the request around them is not.
    framing = request_framing("client", None)
    drained = acc.drain(md.cluster, [0], batches, clock.now_ms(), request_framing=framing)
    assert len(drained[0]) == 1
    (_second,) = acc.drain(md.cluster, [0], batches, clock.now_ms(), request_framing=framing)[0]
    # With room for the framing of both (one topic, two partition entries), both go together.
    room = batches + framing + topic_framing("t") + 2 * PARTITION_FRAMING
    append(acc, clock, b"x" * 400, p=0)
    append(acc, clock, b"x" * 400, p=1)
    drained = acc.drain(md.cluster, [0], room, clock.now_ms(), request_framing=framing)
    assert len(drained[0]) == 2


def test_expiry_fails_from_the_head_only() -> None:
    clock, acc, _md = make(linger_ms=0, delivery_timeout_ms=1000)
    append(acc, clock)
    clock.advance(500)
    append(acc, clock, b"y" * 20000)
    clock.advance(500)
    expired = acc.expired_batches(clock.now_ms())
    assert len(expired) == 1
    assert acc.has_undrained()


def test_a_batch_never_reserves_more_than_buffer_memory() -> None:
    # Java's RecordAccumulator reserves max(batch.size, record) per batch; with batch.size above
    # buffer.memory that reservation could never be granted, so batches are capped at it.
    clock, acc, md = make(batch_size=262144, buffer_memory=16384, linger_ms=0)
    future, _full, new_batch = append(acc, clock, b"x" * (15 * 1024))
    assert new_batch
    assert acc.used_memory <= 16384
    # The batch is full at buffer.memory: the next record opens a batch of its own (and waits).
    with pytest.raises(BufferExhaustedError, match=r"max\.block\.ms=0"):
        append(acc, clock, b"y" * (15 * 1024))
    (batch,) = acc.drain(md.cluster, [0], 1 << 20, clock.now_ms())[0]
    assert batch.record_count == 1
    batch.done(0, -1, None)
    acc.deallocate(batch)
    assert future.get(0).offset == 0
    append(acc, clock, b"y" * (15 * 1024))
    assert acc.used_memory <= 16384


def test_memory_is_returned_on_deallocate_and_wakes_blocked_senders() -> None:
    clock, acc, md = make(batch_size=1000, buffer_memory=2000, linger_ms=0)
    append(acc, clock, b"x" * 900, p=0)
    append(acc, clock, b"x" * 900, p=1)
    with pytest.raises(BufferExhaustedError, match=r"max\.block\.ms=0"):
        append(acc, clock, b"x" * 900, p=0)
    batches = acc.drain(md.cluster, [0, 1], 1 << 20, clock.now_ms())
    done = threading.Event()

    def blocked() -> None:
        acc.append("t", 0, 0, None, b"z", (), None, 60_000, clock.now_ms())
        done.set()

    t = threading.Thread(target=blocked)
    t.start()
    assert not done.wait(0.1)
    batch = batches[0][0]
    batch.done(0, -1, None)
    acc.deallocate(batch)
    assert done.wait(5)
    t.join()


def test_closed_accumulator_refuses_appends() -> None:
    clock, acc, _md = make()
    acc.close()
    with pytest.raises(ProducerClosedError):
        append(acc, clock)


def test_flush_timeout_raises_with_counts() -> None:
    clock, acc, _md = make()
    append(acc, clock)
    with pytest.raises(KafkaTimeoutError, match=r"1 record\(s\) in 1 batch"):
        acc.await_flush_completion(0)


def test_flush_deadline_does_not_fail_batches_already_acknowledged() -> None:
    clock, acc, _md = make()
    append(acc, clock, p=0)
    append(acc, clock, p=1)
    # Both completed by the sender, which has not yet forgotten them (deallocate comes next).
    for batch in acc.incomplete_batches():
        batch.done(0, -1, None)
    acc.await_flush_completion(0)


def test_reenqueue_keeps_sequence_order() -> None:
    clock, acc, md = make(linger_ms=0)
    # Three stamped (drained) batches, reenqueued out of order.
    made = []
    for seq in (0, 1, 2):
        append(acc, clock)
        (b,) = acc.drain(md.cluster, [0], 1 << 20, 0)[0]
        b.set_producer_state(1, 0, seq * 10, False)
        made.append(b)
    append(acc, clock)  # an unsequenced new batch stays behind the retries
    acc.reenqueue(made[2], 0, 0)
    acc.reenqueue(made[0], 0, 0)
    acc.reenqueue(made[1], 0, 0)
    order = [b.base_sequence for b in acc._batches[("t", 0)]]
    assert order == [0, 10, 20, -1]


def test_bulk_future_offsets_and_errors() -> None:
    from kafka_sink.producer.batch import ProducerBatch

    fut = BulkSendFuture("t")
    batches = []
    for p, n in ((0, 3), (1, 2), (0, 4)):
        builder = RecordBatchBuilder()
        for i in range(n):
            builder.append(0, None, b"%d" % i)
        b = ProducerBatch("t", p, 0, sealed=builder.seal())
        fut._add(p, n, n - 1, b.result)
        batches.append(b)
    fut._seal()
    seen = []
    fut.add_callback(seen.append)
    assert not fut.done()
    batches[0].done(10, -1, None)
    batches[1].done(5, -1, None)
    batches[2].done(13, -1, None)
    assert fut.done() and seen == [fut]
    assert fut.get(0) == {0: PartitionOffsets(10, 16, 7), 1: PartitionOffsets(5, 6, 2)}

    bad = BulkSendFuture("t")
    b = ProducerBatch("t", 0, 0, sealed=batches[0].sealed)
    bad._add(0, 3, 2, b.result)
    bad._seal()
    b.done(-1, -1, KafkaTimeoutError("boom"))
    with pytest.raises(KafkaTimeoutError, match=r"boom"):
        bad.get(0)


def test_empty_bulk_future_is_done() -> None:
    fut = BulkSendFuture("t")
    fut._seal()
    assert fut.get(0) == {}


def test_future_callbacks_after_completion_run_immediately() -> None:
    clock, acc, _md = make()
    r = append(acc, clock)
    fut = r[0]
    (batch,) = acc._batches[("t", 0)]
    batch.done(41, -1, None)
    seen = []
    fut.add_callback(lambda m, e: seen.append((m.offset, e)))
    assert seen == [(41, None)]
    with pytest.raises(KafkaTimeoutError):
        r2 = append(acc, clock, p=1)
        r2[0].get(0.01)
