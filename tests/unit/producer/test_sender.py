"""The Sender stepped with a ManualClock against a scripted network client."""

from __future__ import annotations

import itertools

import pytest

from kafka_sink.errors import (
    BufferExhaustedError,
    KafkaTimeoutError,
    RecordTooLargeError,
    SaslAuthenticationError,
    TopicAuthorizationFailedError,
)
from kafka_sink.wire.messages import InitProducerIdRequest, ProduceRequest
from tests.fakes.producer import make_harness, produce_response

NOT_LEADER = 6
UNKNOWN_TOPIC = 3
NOT_ENOUGH_REPLICAS = 19
MESSAGE_TOO_LARGE = 10
TOPIC_AUTH = 29
OUT_OF_ORDER = 45


def test_linger_holds_a_batch_until_linger_ms() -> None:
    h = make_harness(idempotent=False, linger_ms=5)
    h.send()
    h.run()
    assert h.network.produce_requests() == []
    assert h.network.poll_timeouts[-1] == 5
    h.run(4)
    assert h.network.produce_requests() == []
    h.run(1)
    assert len(h.network.produce_requests()) == 1


def test_full_batch_is_sent_without_waiting_for_linger() -> None:
    h = make_harness(idempotent=False, linger_ms=10_000, batch_size=200)
    futures = [h.send(value=b"x" * 60) for _ in range(4)]
    h.run()
    sent = h.network.produce_requests()
    assert len(sent) == 1
    batch = sent[0].batches()[("t", 0)]
    assert len(batch.records) < 4  # the first, full batch only
    h.network.respond(sent[0], produce_response(sent[0], base_offsets={("t", 0): 100}))
    h.run()
    assert futures[0].get(0).offset == 100
    assert not futures[-1].done()


def test_success_completes_futures_and_callbacks_with_offsets() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    seen = []
    futures = [h.send(value=b"%d" % i, callback=lambda m, e: seen.append((m, e))) for i in range(3)]
    h.run()
    (sent,) = h.network.produce_requests()
    h.network.respond(sent, produce_response(sent, base_offsets={("t", 0): 42}))
    h.run()
    assert [f.get(0).offset for f in futures] == [42, 43, 44]
    assert [m.offset for m, e in seen] == [42, 43, 44]
    assert all(e is None for _, e in seen)
    assert h.accumulator.used_memory == 0
    assert not h.accumulator.has_incomplete()


def test_one_request_per_node_one_batch_per_partition() -> None:
    h = make_harness(idempotent=False, linger_ms=0, partitions={"t": [0, 1, 0]})
    for p in (0, 1, 2):
        h.send(partition=p)
    h.run()
    sent = h.network.produce_requests()
    assert sorted(s.request.node_id for s in sent) == [0, 1]
    by_node = {s.request.node_id: sorted(s.partitions()) for s in sent}
    assert by_node == {0: [("t", 0), ("t", 2)], 1: [("t", 1)]}


def test_retriable_error_retries_same_bytes_after_backoff() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    f = h.send()
    h.run()
    (first,) = h.network.produce_requests()
    h.network.respond(first, produce_response(first, errors={("t", 0): NOT_ENOUGH_REPLICAS}))
    h.run()
    assert not f.done()
    h.run(79)  # 100 ms -20 % jitter at most
    assert len(h.network.produce_requests()) == 1
    h.run(41)  # 120 ms: past +20 %
    sent = h.network.produce_requests()
    assert len(sent) == 2
    assert sent[1].partitions() == first.partitions()
    h.network.respond(sent[1], produce_response(sent[1], base_offsets={("t", 0): 7}))
    h.run()
    assert f.get(0).offset == 7


def test_backoff_grows_exponentially_up_to_the_max() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    h.send()
    h.run()
    times = []
    for _ in range(6):
        sent = h.network.produce_requests()[-1]
        times.append(h.clock.now_ms())
        h.network.respond(sent, produce_response(sent, errors={("t", 0): NOT_ENOUGH_REPLICAS}))
        h.run()
        n = len(h.network.produce_requests())
        while len(h.network.produce_requests()) == n:
            h.run(10)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert 80 <= gaps[0] <= 130
    assert 160 <= gaps[1] <= 250
    assert 320 <= gaps[2] <= 490
    assert all(g <= 1010 for g in gaps)
    assert gaps[-1] >= 800


def test_retries_exhausted_fail_the_batch() -> None:
    h = make_harness(idempotent=False, linger_ms=0, retries=1)
    f = h.send()
    h.run()
    for _ in range(2):
        sent = h.network.produce_requests()[-1]
        h.network.respond(sent, produce_response(sent, errors={("t", 0): NOT_ENOUGH_REPLICAS}))
        h.run()
        h.run(200)
    assert len(h.network.produce_requests()) == 2
    assert f.failed()
    assert "NOT_ENOUGH_REPLICAS" in repr(f.exception(0)) or f.exception(0).code == 19


def test_delivery_timeout_expires_queued_batches() -> None:
    h = make_harness(idempotent=False, linger_ms=0, delivery_timeout_ms=1000)
    h.network.not_ready.add(0)
    f = h.send()
    h.run()
    h.run(999)
    assert not f.done()
    h.run(1)
    exc = f.exception(0)
    assert isinstance(exc, KafkaTimeoutError)
    assert "delivery.timeout.ms=1000" in str(exc)
    assert h.accumulator.used_memory == 0


def test_an_expired_batch_says_why_its_leader_could_not_be_reached() -> None:
    h = make_harness(idempotent=False, linger_ms=0, delivery_timeout_ms=1000)
    h.network.not_ready.add(0)
    h.network.connect_errors[0] = SaslAuthenticationError(
        "https://idp.example/oauth2/token is unreachable: connection refused"
    )
    f = h.send()
    h.run()
    h.run(1000)
    exc = f.exception(0)
    assert isinstance(exc, KafkaTimeoutError)
    assert str(exc).endswith(
        "the leader could not be reached: "
        "https://idp.example/oauth2/token is unreachable: connection refused"
    )


def test_retriable_errors_stop_at_delivery_timeout() -> None:
    h = make_harness(idempotent=False, linger_ms=0, delivery_timeout_ms=500)
    f = h.send()
    h.run()
    while not f.done():
        pending = h.network.pending()
        for sent in pending:
            h.network.respond(sent, produce_response(sent, errors={("t", 0): NOT_ENOUGH_REPLICAS}))
        h.run(50)
    exc = f.exception(0)
    assert isinstance(exc, KafkaTimeoutError)
    assert "NOT_ENOUGH_REPLICAS" in str(exc)
    assert h.clock.now_ms() <= 600


def test_non_retriable_error_fails_only_that_batch() -> None:
    h = make_harness(idempotent=False, linger_ms=0, partitions={"t": [0, 0]})
    f0 = h.send(partition=0)
    f1 = h.send(partition=1)
    h.run()
    (sent,) = h.network.produce_requests()
    h.network.respond(sent, produce_response(sent, errors={("t", 0): TOPIC_AUTH}))
    h.run()
    assert isinstance(f0.exception(0), TopicAuthorizationFailedError)
    assert f1.get(0).offset == 0


def test_disconnect_retries_and_requests_metadata() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    f = h.send()
    h.run()
    before = h.metadata.update_requests
    h.network.disconnect(h.network.produce_requests()[0])
    h.run()
    assert h.metadata.update_requests > before
    h.run(150)
    sent = h.network.produce_requests()
    assert len(sent) == 2
    h.network.respond(sent[1], produce_response(sent[1]))
    h.run()
    assert f.get(0).offset == 0


def test_request_timeout_is_retried() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    f = h.send()
    h.run()
    h.network.time_out(h.network.produce_requests()[0])
    h.run(150)
    h.run()
    sent = h.network.produce_requests()
    assert len(sent) == 2
    h.network.respond(sent[1], produce_response(sent[1], base_offsets={("t", 0): 3}))
    h.run()
    assert f.get(0).offset == 3


def test_not_leader_with_leader_hint_moves_the_batch() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    f = h.send(partition=0)
    h.run()
    (sent,) = h.network.produce_requests()
    h.network.respond(
        sent, produce_response(sent, errors={("t", 0): NOT_LEADER}, current_leader=(1, 5))
    )
    h.run()
    assert h.metadata.leader_hints == [("t", 0, 1, 5)]
    h.run(150)
    retry = h.network.produce_requests()[-1]
    assert retry.request.node_id == 1
    h.network.respond(retry, produce_response(retry, base_offsets={("t", 0): 9}))
    h.run()
    assert f.get(0).offset == 9


def test_unknown_leader_requests_metadata_and_waits() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    h.metadata.set_leader("t", 0, -1)
    f = h.send()
    h.run()
    assert h.metadata.added == ["t"]
    assert h.metadata.update_requests >= 1
    assert h.network.produce_requests() == []
    h.metadata.set_leader("t", 0, 1)
    h.run(1)
    (sent,) = h.network.produce_requests()
    assert sent.request.node_id == 1
    assert not f.done()


def test_in_flight_cap_per_node() -> None:
    h = make_harness(idempotent=False, linger_ms=0, max_in_flight=2)
    futures = []
    for _ in range(3):
        futures.append(h.send())
        h.run()
    assert len(h.network.produce_requests()) == 2
    first = h.network.produce_requests()[0]
    h.network.respond(first, produce_response(first))
    h.run()
    h.run()
    assert len(h.network.produce_requests()) == 3


def test_max_in_flight_one_keeps_order_by_muting() -> None:
    h = make_harness(idempotent=False, linger_ms=0, max_in_flight=1, partitions={"t": [0]})
    h.network.in_flight_count = lambda node_id: 0  # type: ignore[method-assign]
    h.send()
    h.run()
    h.send()
    h.run()
    assert len(h.network.produce_requests()) == 1  # the partition is muted while in flight
    first = h.network.produce_requests()[0]
    h.network.respond(first, produce_response(first))
    h.run()
    h.run()
    assert len(h.network.produce_requests()) == 2


def test_acks_zero_completes_without_offsets() -> None:
    h = make_harness(idempotent=False, linger_ms=0, acks=0)
    f = h.send()
    h.run()
    (sent,) = h.network.produce_requests()
    assert sent.request.expect_response is False
    assert sent.body.acks == 0
    h.run()
    assert f.get(0).offset == -1


def test_message_too_large_single_record_fails_clearly() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    f = h.send(value=b"x" * 1000)
    h.run()
    (sent,) = h.network.produce_requests()
    h.network.respond(sent, produce_response(sent, errors={("t", 0): MESSAGE_TOO_LARGE}))
    h.run()
    exc = f.exception(0)
    assert isinstance(exc, RecordTooLargeError)
    assert "max.message.bytes" in str(exc)


def test_message_too_large_batch_is_split_and_offsets_kept() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    futures = [h.send(value=b"%d" % i) for i in range(4)]
    h.run()
    (sent,) = h.network.produce_requests()
    h.network.respond(sent, produce_response(sent, errors={("t", 0): MESSAGE_TOO_LARGE}))
    h.run()
    h.run()
    halves = h.network.produce_requests()[1:]
    assert len(halves) == 1
    assert len(halves[0].batches()[("t", 0)].records) == 2
    h.network.respond(halves[0], produce_response(halves[0], base_offsets={("t", 0): 10}))
    h.run()
    h.run()
    second = h.network.produce_requests()[-1]
    h.network.respond(second, produce_response(second, base_offsets={("t", 0): 12}))
    h.run()
    assert [f.get(0).offset for f in futures] == [10, 11, 12, 13]
    assert h.accumulator.used_memory == 0


def _split_in_two(h, futures_count: int = 4):
    futures = [h.send(value=b"%d" % i) for i in range(futures_count)]
    h.run()
    (sent,) = h.network.produce_requests()
    h.network.respond(sent, produce_response(sent, errors={("t", 0): MESSAGE_TOO_LARGE}))
    h.run()
    h.run()
    first = h.network.produce_requests()[-1]
    return futures, first


def test_split_batch_reports_each_record_from_its_own_half() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    seen: list[tuple[object, object]] = []
    futures, first = _split_in_two(h)
    for f in futures:
        f.add_callback(lambda m, e: seen.append((m, e)))
    h.network.respond(first, produce_response(first, base_offsets={("t", 0): 10}))
    h.run()
    h.run()
    second = h.network.produce_requests()[-1]
    assert second is not first
    h.network.respond(second, produce_response(second, errors={("t", 0): TOPIC_AUTH}))
    h.run()
    # The first half was written: its records succeed; only the second half's records fail.
    assert [f.get(0).offset for f in futures[:2]] == [10, 11]
    assert all(isinstance(f.exception(0), TopicAuthorizationFailedError) for f in futures[2:])
    assert [f.succeeded() for f in futures] == [True, True, False, False]
    assert [m.offset if m else None for m, _e in seen] == [10, 11, None, None]
    assert h.accumulator.used_memory == 0


def test_split_batch_offsets_come_from_each_half() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    futures, first = _split_in_two(h)
    h.network.respond(first, produce_response(first, base_offsets={("t", 0): 10}))
    h.run()
    h.run()
    second = h.network.produce_requests()[-1]
    # Another producer wrote offsets 12..19 in between.
    h.network.respond(second, produce_response(second, base_offsets={("t", 0): 20}))
    h.run()
    assert [f.get(0).offset for f in futures] == [10, 11, 20, 21]


def test_buffer_full_raises_after_max_block() -> None:
    h = make_harness(idempotent=False, linger_ms=10_000, batch_size=1024, buffer_memory=2048)
    h.accumulator.append("t", 0, 0, None, b"x" * 900, (), None, 0, 0)
    h.accumulator.append("t", 0, 0, None, b"x" * 900, (), None, 0, 0)
    with pytest.raises(BufferExhaustedError, match=r"buffer\.memory=2048"):
        h.accumulator.append("t", 0, 0, None, b"x" * 900, (), None, 0, 0)


def test_abort_incomplete_fails_everything() -> None:
    h = make_harness(idempotent=False, linger_ms=0)
    f1 = h.send()
    h.run()
    f2 = h.send()
    h.sender.abort_incomplete(KafkaTimeoutError("closed"))
    assert f1.failed() and f2.failed()
    # A late response for an aborted batch changes nothing.
    (sent,) = h.network.produce_requests()
    h.network.respond(sent, produce_response(sent))
    h.run()
    assert f1.failed()
    assert h.accumulator.used_memory == 0


# -- idempotence ---------------------------------------------------------------------------


def test_no_produce_before_producer_id() -> None:
    h = make_harness(linger_ms=0)
    h.send()
    h.run()
    assert [type(s.body) for s in h.network.sent] == [InitProducerIdRequest]
    h.run(10)
    assert h.network.produce_requests() == []
    h.network.respond(h.network.sent[0], _init_response(77, 0))
    h.run()
    h.run()
    (sent,) = h.network.produce_requests()
    batch = sent.batches()[("t", 0)]
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 0, 0)


def test_sequences_per_partition_and_retries_keep_them() -> None:
    h = make_harness(linger_ms=0)
    h.init_producer_id()
    _establish(h, 0)
    _establish(h, 1)
    for n in (3, 2):
        for _ in range(n):
            h.send(partition=0)
        h.send(partition=1)
        h.run()
    sent = h.network.produce_requests()[2:]
    seqs = sorted((tp, b.base_sequence) for s in sent for tp, b in s.batches().items())
    assert seqs == [(("t", 0), 1), (("t", 0), 4), (("t", 1), 1), (("t", 1), 2)]
    # The first request fails retriably: it is resent identically, before the second.
    h.network.respond(sent[0], produce_response(sent[0], errors={("t", 0): NOT_ENOUGH_REPLICAS}))
    h.run()
    h.run(150)
    retry = h.network.produce_requests()[-1]
    assert retry.partitions() == sent[0].partitions()


def test_first_batch_travels_alone() -> None:
    h = make_harness(linger_ms=0, partitions={"t": [0]})
    h.init_producer_id()
    h.send()
    h.run()
    h.send()
    h.run()
    h.run(10)
    assert len(h.network.produce_requests()) == 1  # no state on the broker yet: no pipelining
    first = h.network.produce_requests()[0]
    h.network.respond(first, produce_response(first))
    h.run()
    h.run()
    assert len(h.network.produce_requests()) == 2


def test_retries_wait_for_earlier_sequences() -> None:
    h = make_harness(linger_ms=0, partitions={"t": [0]})
    h.init_producer_id()
    _establish(h)
    f1 = h.send()
    h.run()
    f2 = h.send()
    h.run()
    r1, r2 = h.network.produce_requests()[1:]
    # Batch 1 fails retriably; batch 2 (in flight) then fails out of order.
    h.network.respond(r1, produce_response(r1, errors={("t", 0): NOT_ENOUGH_REPLICAS}))
    h.network.respond(r2, produce_response(r2, errors={("t", 0): OUT_OF_ORDER}))
    h.run()
    assert h.tm is not None and not h.tm.has_pending_sequence_rewrite(("t", 0))  # not a real gap
    h.run(150)
    h.run(150)
    retries = h.network.produce_requests()[3:]
    assert len(retries) == 1  # only the first unresolved batch goes
    assert retries[0].partitions() == r1.partitions()
    h.network.respond(retries[0], produce_response(retries[0], base_offsets={("t", 0): 1}))
    h.run()
    h.run(150)
    last = h.network.produce_requests()[-1]
    assert last.partitions() == r2.partitions()
    h.network.respond(last, produce_response(last, base_offsets={("t", 0): 2}))
    h.run()
    assert (f1.get(0).offset, f2.get(0).offset) == (1, 2)


def test_out_of_order_gap_bumps_epoch_and_resequences_without_loss() -> None:
    h = make_harness(linger_ms=0, partitions={"t": [0]})
    h.init_producer_id(producer_id=5, epoch=0)
    _establish(h)
    f1 = h.send()
    h.run()
    f2 = h.send()
    h.run()
    r1, r2 = h.network.produce_requests()[1:]
    assert [r.batches()[("t", 0)].base_sequence for r in (r1, r2)] == [1, 2]
    # The broker lost its state: the next expected batch is out of order -> a real gap.
    h.network.respond(r1, produce_response(r1, errors={("t", 0): OUT_OF_ORDER}))
    h.network.respond(r2, produce_response(r2, errors={("t", 0): OUT_OF_ORDER}))
    h.run()
    h.run()
    assert h.tm is not None and h.tm.producer_epoch == 1
    for _ in range(5):
        h.run(100)
    resent = h.network.produce_requests()[3:]
    assert resent
    first = resent[0].batches()[("t", 0)]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (5, 1, 0)
    h.network.respond(resent[0], produce_response(resent[0], base_offsets={("t", 0): 1}))
    for _ in range(5):
        h.run(100)
    last = h.network.produce_requests()[-1]
    b = last.batches()[("t", 0)]
    assert (b.producer_epoch, b.base_sequence) == (1, 1)
    h.network.respond(last, produce_response(last, base_offsets={("t", 0): 2}))
    h.run()
    assert (f1.get(0).offset, f2.get(0).offset) == (1, 2)
    assert h.tm.next_sequence(("t", 0)) == 2


def test_failed_sequenced_batch_bumps_epoch_for_later_batches() -> None:
    h = make_harness(linger_ms=0, partitions={"t": [0]})
    h.init_producer_id(producer_id=5, epoch=3)
    f1 = h.send()
    h.run()
    (r1,) = h.network.produce_requests()
    h.network.respond(r1, produce_response(r1, errors={("t", 0): TOPIC_AUTH}))
    h.run()
    assert f1.failed()
    f2 = h.send()
    h.run()
    h.run()
    r2 = h.network.produce_requests()[-1]
    b = r2.batches()[("t", 0)]
    assert (b.producer_epoch, b.base_sequence) == (4, 0)
    h.network.respond(r2, produce_response(r2, base_offsets={("t", 0): 8}))
    h.run()
    assert f2.get(0).offset == 8


def test_producer_id_fatal_error_fails_records() -> None:
    h = make_harness(linger_ms=0)
    f = h.send()
    h.run()
    h.network.respond(h.network.sent[0], _init_response(-1, -1, error=31))
    h.run()
    assert f.failed()
    assert h.sender.fatal_error is not None


def test_produce_request_shape() -> None:
    h = make_harness(idempotent=False, linger_ms=0, request_timeout_ms=1234)
    h.send(value=b"hello", key=b"k")
    h.run()
    (sent,) = h.network.produce_requests()
    body = sent.body
    assert isinstance(body, ProduceRequest)
    assert (body.acks, body.timeout_ms, body.transactional_id) == (-1, 1234, None)
    rec = sent.batches()[("t", 0)].records[0]
    assert (rec.key, rec.value) == (b"k", b"hello")


def _establish(h: object, partition: int = 0, base_offset: int = 0) -> None:
    """Send and acknowledge a first batch, so the broker has producer state for the partition."""
    from tests.fakes.producer import Harness

    assert isinstance(h, Harness)
    f = h.send(partition=partition)
    h.run()
    sent = h.network.produce_requests()[-1]
    h.network.respond(sent, produce_response(sent, base_offsets={("t", partition): base_offset}))
    h.run()
    assert f.get(0).offset == base_offset


def _init_response(pid: int, epoch: int, error: int = 0) -> object:
    from kafka_sink.wire.messages import InitProducerIdResponse

    return InitProducerIdResponse(error_code=error, producer_id=pid, producer_epoch=epoch)


def test_stuck_first_unresolved_batch_bumps_the_epoch() -> None:
    """A batch that nothing precedes but the broker still calls out of order can never succeed
    in this epoch (e.g. a later batch landed first): it is re-sequenced under a new epoch."""
    h = make_harness(linger_ms=0, partitions={"t": [0]})
    h.init_producer_id(producer_id=5, epoch=0)
    _establish(h)
    f = h.send()
    h.run()
    sent = h.network.produce_requests()[-1]
    assert h.tm is not None
    entry = h.tm._sequences.get(("t", 0))
    assert entry is not None
    entry.last_acked_sequence = 40  # the broker moved on without it
    h.network.respond(sent, produce_response(sent, errors={("t", 0): OUT_OF_ORDER}))
    h.run()
    h.run(150)
    h.run()
    retry = h.network.produce_requests()[-1]
    b = retry.batches()[("t", 0)]
    assert (b.producer_epoch, b.base_sequence) == (1, 0)
    h.network.respond(retry, produce_response(retry, base_offsets={("t", 0): 50}))
    h.run()
    assert f.get(0).offset == 50


def test_idempotent_split_keeps_the_sequence_range() -> None:
    h = make_harness(linger_ms=0, partitions={"t": [0]})
    h.init_producer_id(producer_id=9, epoch=2)
    _establish(h)
    big = [h.send(value=b"%d" % i) for i in range(4)]
    h.run()
    later = h.send(value=b"later")
    h.run()
    r_big, r_later = h.network.produce_requests()[1:]
    assert r_big.batches()[("t", 0)].base_sequence == 1
    assert r_later.batches()[("t", 0)].base_sequence == 5
    h.network.respond(r_big, produce_response(r_big, errors={("t", 0): MESSAGE_TOO_LARGE}))
    h.network.respond(r_later, produce_response(r_later, errors={("t", 0): OUT_OF_ORDER}))
    h.run()
    offsets = {1: 10, 3: 12, 5: 14}
    for _ in range(20):
        h.run(50)
        for sent in h.network.pending():
            b = sent.batches()[("t", 0)]
            assert (b.producer_id, b.producer_epoch) == (9, 2)  # no epoch bump was needed
            h.network.respond(
                sent, produce_response(sent, base_offsets={("t", 0): offsets[b.base_sequence]})
            )
    seqs = [s.batches()[("t", 0)].base_sequence for s in h.network.produce_requests()[3:]]
    assert seqs == [1, 3, 5]
    assert [f.get(0).offset for f in big] == [10, 11, 12, 13]
    assert later.get(0).offset == 14


def test_bulk_future_offsets_span_every_part_of_a_split_batch() -> None:
    from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets, ProduceRequestResult

    parent = ProduceRequestResult("t", 0)
    halves = [ProduceRequestResult("t", 0), ProduceRequestResult("t", 0)]
    parent.set_parts([(0, halves[0]), (2, halves[1])])
    future = BulkSendFuture("t")
    future._add(0, 4, 3, parent)
    future._seal()
    halves[0].complete(10, -1, None)
    halves[1].complete(20, -1, None)  # another writer took 12..19
    parent.complete(10, -1, None)
    assert future.get(0) == {0: PartitionOffsets(10, 21, 4)}


def test_bulk_future_counts_a_split_part_written_when_its_sibling_failed() -> None:
    from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets, ProduceRequestResult

    parent = ProduceRequestResult("t", 0)
    halves = [ProduceRequestResult("t", 0), ProduceRequestResult("t", 0)]
    parent.set_parts([(0, halves[0]), (2, halves[1])])
    future = BulkSendFuture("t")
    future._add(0, 4, 3, parent)
    future._seal()
    error = TopicAuthorizationFailedError("denied")
    halves[0].complete(10, -1, None)
    halves[1].complete(-1, -1, error)
    parent.complete(10, -1, error)
    assert future.exception(0) is error
    assert future.offsets() == {0: PartitionOffsets(10, 11, 2)}
    assert future.unacknowledged() == {0: (2, 1)}
    assert future.record_count == 4
