"""A crashed sender thread leaves nothing pending: blocked senders fail, flush() returns."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import KafkaError, ProducerClosedError
from kafka_sink.producer.accumulator import RecordAccumulator
from tests.fakes.producer import make_harness


def _wait_for(condition: Any, what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def _blocked_append(acc: RecordAccumulator, partition: int) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(acc.append("t", partition, 0, None, b"v", (), None, 600_000, 0)[0])
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    _wait_for(lambda: acc._waiters == 1, "append() to block on buffer.memory")
    return thread, outcome


def test_append_rechecks_closed_after_waiting_for_memory() -> None:
    """Memory freed by the crash handler must not let a blocked send() into a closed
    accumulator, where its future would never complete."""
    acc = RecordAccumulator(clock=ManualClock(), batch_size=1024, buffer_memory=1024)
    first = acc.append("t", 0, 0, None, b"v", (), None, 0, 0)[0]
    (batch,) = acc.incomplete_batches()
    thread, outcome = _blocked_append(acc, 1)
    # The waiter wakes up only after both happened (close, then the batch is failed and its
    # memory returned), as when the crash handler runs before it is scheduled again.
    with acc._lock:
        acc._closed = True
        batch.done(-1, -1, KafkaError("the sender crashed"))
        del acc._incomplete[batch]
        acc._used_memory -= batch.memory
        acc._memory_available.notify_all()
    thread.join(10)
    assert not thread.is_alive()
    assert first.failed()
    assert len(outcome) == 1 and isinstance(outcome[0], ProducerClosedError), outcome
    assert "closed while allocating memory" in str(outcome[0])
    assert acc.incomplete_batches() == []


def test_crash_fails_queued_blocked_and_in_flight_records_and_flush_returns() -> None:
    h = make_harness(idempotent=False, linger_ms=0, batch_size=1024, buffer_memory=2048)
    in_flight = h.send(partition=0)
    h.run()
    assert h.network.produce_requests()
    queued = h.send(partition=1)  # the second (last) batch's worth of memory
    thread, outcome = _blocked_append(h.accumulator, 0)

    def crash(timeout_ms: int, now_ms: int) -> list[Any]:
        raise RuntimeError("boom")

    h.network.poll = crash  # type: ignore[method-assign]
    sender = threading.Thread(target=h.sender.run, daemon=True)
    sender.start()
    sender.join(10)
    assert not sender.is_alive()
    thread.join(10)
    assert not thread.is_alive()
    assert in_flight.failed() and queued.failed()
    assert "sender thread stopped" in str(in_flight.exception(0))
    # The blocked send() either failed or got a future that is already failed.
    (result,) = outcome
    assert isinstance(result, ProducerClosedError) or result.failed(), result
    assert h.accumulator.incomplete_batches() == []
    assert isinstance(h.sender.fatal_error, KafkaError)
    flushed = threading.Event()
    threading.Thread(
        target=lambda: (h.accumulator.await_flush_completion(None), flushed.set()), daemon=True
    ).start()
    assert flushed.wait(10), "flush() hung after the sender thread crashed"
    with pytest.raises(ProducerClosedError):
        h.send(partition=2)
