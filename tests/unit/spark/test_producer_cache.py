"""The per-process producer cache: leases, idle close, the background closer, and its limits.

Most tests step a manual clock and call ``close_idle(now_ms)`` themselves, with the background
thread kept from starting; one test lets the real thread close a real producer (no broker: its
bootstrap address refuses connections) and checks that its sender thread ends.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.producer.producer import KafkaProducer
from kafka_sink.spark.executor import producer_cache

KEY_A = (("bootstrap.servers", "a:1"),)
KEY_B = (("bootstrap.servers", "b:1"),)


class FakeProducer:
    def __init__(self, config: dict[str, str]) -> None:
        self.config = config
        self.closed = False
        self.close_timeouts: list[float | None] = []

    def close(self, timeout: float | None = None) -> None:
        self.closed = True
        self.close_timeouts.append(timeout)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[ManualClock]:
    """A manual clock for the cache, fake producers, and no background thread."""
    producer_cache.close_all()
    manual = ManualClock(1_000)
    monkeypatch.setattr(producer_cache, "_clock", manual)
    monkeypatch.setattr(producer_cache, "_create", FakeProducer)
    monkeypatch.setattr(producer_cache, "_start_closer", lambda: None)
    yield manual
    producer_cache.close_all()


def _fake(producer: object) -> FakeProducer:
    assert isinstance(producer, FakeProducer)
    return producer


def test_a_released_producer_is_closed_after_the_idle_timeout(clock: ManualClock) -> None:
    producer = _fake(producer_cache.acquire(KEY_A, idle_timeout_ms=5_000))
    producer_cache.release(producer)
    clock.advance(4_999)
    assert producer_cache.close_idle(clock.now_ms()) == 0
    assert not producer.closed and producer_cache.cached_count() == 1
    clock.advance(1)
    assert producer_cache.close_idle(clock.now_ms()) == 1
    assert producer.closed and producer_cache.cached_count() == 0
    # Bounded: an idle producer has nothing queued, so its close never waits long.
    assert producer.close_timeouts == [producer_cache.IDLE_CLOSE_TIMEOUT_S]
    # The next task builds a new one.
    assert producer_cache.acquire(KEY_A) is not producer


def test_a_producer_in_use_is_never_closed_for_being_idle(clock: ManualClock) -> None:
    producer = _fake(producer_cache.acquire(KEY_A, idle_timeout_ms=1_000))
    clock.advance(60_000)  # a long task: acquired once, still sending
    assert producer_cache.close_idle(clock.now_ms()) == 0
    assert not producer.closed
    producer_cache.release(producer)
    clock.advance(999)
    assert producer_cache.close_idle(clock.now_ms()) == 0  # idle time counts from the release
    clock.advance(1)
    assert producer_cache.close_idle(clock.now_ms()) == 1 and producer.closed


def test_each_use_restarts_the_idle_time_and_the_latest_timeout_applies(
    clock: ManualClock,
) -> None:
    producer = _fake(producer_cache.acquire(KEY_A, idle_timeout_ms=1_000))
    producer_cache.release(producer)
    clock.advance(900)
    assert producer_cache.acquire(KEY_A, idle_timeout_ms=10_000) is producer
    producer_cache.release(producer)
    clock.advance(9_999)
    assert producer_cache.close_idle(clock.now_ms()) == 0
    clock.advance(1)
    assert producer_cache.close_idle(clock.now_ms()) == 1


def test_only_idle_producers_are_closed_and_each_on_its_own_time(clock: ManualClock) -> None:
    a = _fake(producer_cache.acquire(KEY_A, idle_timeout_ms=1_000))
    b = _fake(producer_cache.acquire(KEY_B, idle_timeout_ms=3_000))
    producer_cache.release(a)
    producer_cache.release(b)
    assert producer_cache.next_close_in_ms(clock.now_ms()) == 1_000
    clock.advance(1_000)
    assert producer_cache.close_idle(clock.now_ms()) == 1
    assert a.closed and not b.closed
    assert producer_cache.next_close_in_ms(clock.now_ms()) == 2_000
    clock.advance(2_000)
    assert producer_cache.close_idle(clock.now_ms()) == 1 and b.closed
    assert producer_cache.next_close_in_ms(clock.now_ms()) is None


def test_minus_one_keeps_an_idle_producer_until_the_process_exits(clock: ManualClock) -> None:
    producer = _fake(producer_cache.acquire(KEY_A, idle_timeout_ms=-1))
    producer_cache.release(producer)
    clock.advance(10**9)
    assert producer_cache.close_idle(clock.now_ms()) == 0
    assert producer_cache.next_close_in_ms(clock.now_ms()) is None
    assert not producer.closed


def test_zero_closes_a_producer_as_soon_as_it_is_released(clock: ManualClock) -> None:
    producer = _fake(producer_cache.acquire(KEY_A, idle_timeout_ms=0))
    assert producer_cache.close_idle(clock.now_ms()) == 0
    producer_cache.release(producer)
    assert producer_cache.close_idle(clock.now_ms()) == 1 and producer.closed


def test_release_after_evict_is_harmless(clock: ManualClock) -> None:
    producer = _fake(producer_cache.acquire(KEY_A))
    producer_cache.evict(producer, timeout_s=0.0)
    producer_cache.release(producer)
    assert producer.closed and producer_cache.cached_count() == 0


def test_the_size_limit_never_closes_a_producer_in_use(clock: ManualClock) -> None:
    held = _fake(producer_cache.acquire(KEY_A))
    others = []
    for i in range(producer_cache.MAX_PRODUCERS + 1):
        p = _fake(producer_cache.acquire((("bootstrap.servers", f"h{i}:1"),)))
        producer_cache.release(p)
        others.append(p)
    assert not held.closed
    assert producer_cache.cached_count() == producer_cache.MAX_PRODUCERS
    assert others[0].closed and others[1].closed and not others[-1].closed


def test_bad_idle_timeouts_are_refused(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="idle_timeout_ms"):
        producer_cache.acquire(KEY_A, idle_timeout_ms=-2)


def _closer_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == producer_cache.CLOSER_THREAD_NAME]


def _wait_for(condition, what: str, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {within_s} s for {what}")
        time.sleep(0.02)


def test_the_background_closer_ends_an_idle_producer_and_its_sender_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    producer_cache.close_all()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = (("bootstrap.servers", f"127.0.0.1:{port}"),)
    caplog.set_level("INFO", logger="kafka_sink.spark")
    try:
        producer = producer_cache.acquire(key, idle_timeout_ms=200)
        assert isinstance(producer, KafkaProducer)
        sender = producer._thread
        assert sender.is_alive()
        time.sleep(0.5)  # in use for longer than the idle timeout: must stay open
        assert sender.is_alive() and producer_cache.cached_count() == 1
        producer_cache.release(producer)
        _wait_for(lambda: not sender.is_alive(), "the idle producer's sender thread to end")
        assert producer_cache.cached_count() == 0
        # With nothing left to watch, the closer thread ends too: an idle worker keeps no thread.
        _wait_for(lambda: not _closer_threads(), "the closer thread to end")
        closed = [r.getMessage() for r in caplog.records if "unused for" in r.getMessage()]
        assert closed and producer.client_id in closed[0] and "producerIdleTimeoutMs" in closed[0]
        # A later task gets a new, working producer (and a new closer thread).
        again = producer_cache.acquire(key, idle_timeout_ms=200)
        assert again is not producer and isinstance(again, KafkaProducer)
        assert again._thread.is_alive() and len(_closer_threads()) == 1
        producer_cache.release(again)
        _wait_for(lambda: not again._thread.is_alive(), "the second producer to be closed")
    finally:
        producer_cache.close_all(timeout_s=5.0)


def test_transactional_producers_are_reused_by_id_and_counted_apart(clock: ManualClock) -> None:
    def key(i: int) -> tuple[tuple[str, str], ...]:
        return (("bootstrap.servers", "a:1"), ("transactional.id", f"p-{i}-0"))

    plain = _fake(producer_cache.acquire(KEY_A))
    producer_cache.release(plain)
    first, reused = producer_cache.acquire_transactional(key(0), FakeProducer)
    assert not reused and first.config["transactional.id"] == "p-0-0"
    producer_cache.release(first)
    again, reused = producer_cache.acquire_transactional(key(0), FakeProducer)
    assert again is first and reused
    producer_cache.release(again)
    made = [first]
    for i in range(1, producer_cache.MAX_TRANSACTIONAL_PRODUCERS + 1):
        p, reused = producer_cache.acquire_transactional(key(i), FakeProducer)
        assert not reused
        producer_cache.release(p)
        made.append(p)
    # The oldest transactional one went; the at-least-once producer is not in their count.
    assert first.closed and not any(p.closed for p in made[1:]) and not plain.closed
    assert producer_cache.cached_count() == producer_cache.MAX_TRANSACTIONAL_PRODUCERS + 1
    producer_cache.evict(made[-1], timeout_s=0.0)
    fresh, reused = producer_cache.acquire_transactional(
        key(producer_cache.MAX_TRANSACTIONAL_PRODUCERS), FakeProducer
    )
    assert fresh is not made[-1] and not reused
