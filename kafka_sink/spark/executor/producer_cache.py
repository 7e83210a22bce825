"""One producer per Spark Python worker process and producer config, reused across tasks.

Role: Spark reuses Python worker processes across tasks (``spark.python.worker.reuse``), and a
module-level dict in an importable module survives between them, so a task acquires the producer
an earlier task on the same worker built: its connections, metadata and producer id are warm.
Spark's JVM sink does the same per executor JVM; ours is per Python worker process, because each
concurrently running task has its own worker. A producer no task has used for its idle timeout
(the sink's ``producerIdleTimeoutMs``, 9 minutes by default, like ``connections.max.idle.ms``) is
closed by a background closer thread, so a worker left idle after a job keeps neither a producer,
its sender thread, nor connections to a cluster that may be gone.

Invariants:
- The cache key is the whole producer config (sorted key/value pairs): two configs that differ in
  any key never share a producer. The key holds secrets; it is never logged or put in a repr.
- A producer is only created inside a task (``task.py``), never on the driver or at pickling.
- A task leases the producer: ``acquire`` counts a use, ``release`` (at the task's end, whatever
  its outcome) ends it and starts the idle time. A leased producer is never closed for being idle
  or for the size limit; only ``evict`` and ``close_all`` close it.
- ``evict`` removes a producer and closes it: after a delivery failure the next attempt on this
  worker starts from a fresh producer, never one left in a fatal state.
- At most ``MAX_PRODUCERS`` at-least-once and ``MAX_TRANSACTIONAL_PRODUCERS`` transactional
  producers are kept; beyond that the least recently used idle one of the same kind is closed.
- Transactional producers (exactly-once, ``acquire_transactional``) are keyed by their whole
  config too, which includes their ``transactional.id``: a task attempt of the next micro-batch
  with the same id gets the producer warm (connections, metadata, API versions); it still calls
  ``init_transactions()`` before its transaction. The caller evicts a transactional producer on
  any failure, so one in a failed, fenced or aborting state is never handed out again.
- The idle timeout of an entry is the one its latest ``acquire`` gave; -1 keeps it until the
  process exits, 0 closes it as soon as it is released. An idle close waits at most
  ``IDLE_CLOSE_TIMEOUT_S`` (nothing is queued: every task flushed before releasing).
- One closer thread per process at most, and none while the cache is empty: it is started by
  ``acquire`` and ends when the last producer is gone. Its step, ``close_idle(now_ms)``, takes the
  time as a parameter (tests step it with a manual clock). Producers are closed outside the lock,
  after being removed from the cache, so a task never gets a producer that is being closed.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from kafka_sink.clock import SYSTEM_CLOCK, Clock
from kafka_sink.producer.futures import BulkSendFuture
from kafka_sink.spark.options import DEFAULT_IDLE_TIMEOUT_MS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

    from kafka_sink.records.arrow import BinaryArray

__all__ = [
    "CLOSER_THREAD_NAME",
    "IDLE_CLOSE_TIMEOUT_S",
    "MAX_PRODUCERS",
    "MAX_TRANSACTIONAL_PRODUCERS",
    "BulkProducer",
    "acquire",
    "acquire_transactional",
    "cached_count",
    "close_all",
    "close_idle",
    "evict",
    "next_close_in_ms",
    "release",
]

MAX_PRODUCERS = 4
#: Exactly-once tasks keep one per transactional id (Spark partition and attempt slot) they ran.
MAX_TRANSACTIONAL_PRODUCERS = 8
CLOSE_TIMEOUT_S = 30.0
#: Bound on closing an idle producer (it holds no records, so this is only for a stuck sender).
IDLE_CLOSE_TIMEOUT_S = 10.0
CLOSER_THREAD_NAME = "pykafka-idle-producer-closer"

_log = logging.getLogger("kafka_sink.spark")

ConfigKey = tuple[tuple[str, str], ...]
P = TypeVar("P", bound="BulkProducer")


class BulkProducer(Protocol):
    """The part of ``KafkaProducer`` the sink uses."""

    def send_columns(
        self,
        topic: str,
        values: BinaryArray,
        keys: BinaryArray | None = None,
        *,
        partitions: pa.Int32Array | None = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
        timestamps_ms: npt.NDArray[np.int64] | pa.Int64Array | None = None,
        track_rows: bool = False,
    ) -> BulkSendFuture: ...

    def flush(self, timeout: float | None = None) -> None: ...

    def close(self, timeout: float | None = None) -> None: ...

    def partitions_for(self, topic: str) -> list[int]: ...


@dataclass
class _Entry:
    producer: BulkProducer
    idle_timeout_ms: int
    leases: int = 0
    transactional: bool = False
    #: When the last lease ended (the cache's clock); meaningless while leased.
    idle_since_ms: int = 0

    def close_due_ms(self) -> int | None:
        """When this entry is to be closed for idleness (None: leased, or never)."""
        if self.leases > 0 or self.idle_timeout_ms < 0:
            return None
        return self.idle_since_ms + self.idle_timeout_ms


_clock: Clock = SYSTEM_CLOCK
_lock = threading.Lock()
# Wakes the closer when a lease ends (a new deadline) or the cache is emptied.
_changed = threading.Condition(_lock)
_producers: OrderedDict[ConfigKey, _Entry] = OrderedDict()


class _CloserSlot:
    """The closer thread, if one runs (read and written under the lock)."""

    thread: threading.Thread | None = None


_closer = _CloserSlot()


def _create(config: Mapping[str, str]) -> BulkProducer:
    from kafka_sink.producer.producer import KafkaProducer

    producer: BulkProducer = KafkaProducer(dict(config))
    return producer


def acquire(
    config_items: ConfigKey, *, idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
) -> BulkProducer:
    """Lease the cached producer for this config, created on first use in this process.

    Every ``acquire`` must be followed by one :func:`release` of the returned producer.
    ``idle_timeout_ms``: how long it may stay unused after that before it is closed (-1: never).
    """
    producer: BulkProducer
    producer, _reused = _acquire(config_items, idle_timeout_ms, _create, transactional=False)
    return producer


def acquire_transactional(
    config_items: ConfigKey,
    create: Callable[[dict[str, str]], P],
    *,
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS,
) -> tuple[P, bool]:
    """Lease the transactional producer for this config (its ``transactional.id`` included).

    Returns the producer and whether an earlier task used it (then it is warm, and its last
    transaction was prepared: the caller runs ``init_transactions()`` again before the next).
    ``create(config)`` builds one when none is cached. Release it as :func:`acquire`'s; on any
    failure :func:`evict` it instead, so a producer in a failed state is never reused.
    """
    producer, reused = _acquire(config_items, idle_timeout_ms, create, transactional=True)
    return producer, reused


def _acquire(
    config_items: ConfigKey,
    idle_timeout_ms: int,
    create: Callable[[dict[str, str]], Any],
    *,
    transactional: bool,
) -> tuple[Any, bool]:
    if idle_timeout_ms < -1:
        raise ValueError(f"idle_timeout_ms must be -1 (never) or at least 0, not {idle_timeout_ms}")
    with _lock:
        entry = _producers.get(config_items)
        if entry is not None:
            entry.leases += 1
            entry.idle_timeout_ms = idle_timeout_ms
            _producers.move_to_end(config_items)
            return entry.producer, True
    created = create(dict(config_items))
    stale: list[BulkProducer] = []
    reused = False
    with _lock:
        entry = _producers.get(config_items)
        if entry is not None:  # another thread built one meanwhile: use it, drop ours
            stale.append(created)
            entry.leases += 1
            entry.idle_timeout_ms = idle_timeout_ms
            reused = True
        else:
            entry = _Entry(created, idle_timeout_ms, leases=1, transactional=transactional)
            _producers[config_items] = entry
        limit = MAX_TRANSACTIONAL_PRODUCERS if transactional else MAX_PRODUCERS
        kind = [k for k, e in _producers.items() if e.transactional == transactional]
        for key in [k for k in kind if _producers[k].leases == 0]:
            if len(kind) <= limit:
                break
            kind.remove(key)
            stale.append(_producers.pop(key).producer)
        _start_closer()
    for old in stale:
        _close_quietly(old)
    return entry.producer, reused


def release(producer: BulkProducer) -> None:
    """End a task's lease on ``producer`` (no-op if it was evicted); its idle time starts now."""
    with _lock:
        for entry in _producers.values():
            if entry.producer is producer:
                entry.leases = max(entry.leases - 1, 0)
                if entry.leases == 0:
                    entry.idle_since_ms = _clock.now_ms()
                    _changed.notify_all()
                return


def evict(producer: BulkProducer, *, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Forget ``producer`` and close it (used after it failed a task)."""
    with _lock:
        for key, entry in list(_producers.items()):
            if entry.producer is producer:
                del _producers[key]
        _changed.notify_all()
    _close_quietly(producer, timeout_s)


def cached_count() -> int:
    with _lock:
        return len(_producers)


def close_all(timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Close every cached producer (at interpreter exit, and in tests)."""
    with _lock:
        producers = [entry.producer for entry in _producers.values()]
        _producers.clear()
        _changed.notify_all()
    for producer in producers:
        _close_quietly(producer, timeout_s)


def next_close_in_ms(now_ms: int) -> int | None:
    """Ms until the next idle producer is due to be closed (None: none is)."""
    with _lock:
        return _next_close_in_ms(now_ms)


def close_idle(now_ms: int) -> int:
    """Close every producer unused for its idle timeout at ``now_ms``; returns how many."""
    with _lock:
        idle = _take_idle(now_ms)
    _close_idle(idle, now_ms)
    return len(idle)


def _next_close_in_ms(now_ms: int) -> int | None:
    due = [d for d in (e.close_due_ms() for e in _producers.values()) if d is not None]
    return max(min(due) - now_ms, 0) if due else None


def _take_idle(now_ms: int) -> list[_Entry]:
    """Remove and return the entries due for an idle close (lock held)."""
    idle: list[_Entry] = []
    for key, entry in list(_producers.items()):
        due = entry.close_due_ms()
        if due is not None and due <= now_ms:
            idle.append(_producers.pop(key))
    return idle


def _close_idle(entries: list[_Entry], now_ms: int) -> None:
    for entry in entries:
        _log.info(
            "closing producer %s: unused for %d ms (producerIdleTimeoutMs=%d)",
            getattr(entry.producer, "client_id", "?"),
            now_ms - entry.idle_since_ms,
            entry.idle_timeout_ms,
        )
        _close_quietly(entry.producer, IDLE_CLOSE_TIMEOUT_S)


def _start_closer() -> None:
    """Start the closer thread unless it runs (lock held)."""
    if _closer.thread is not None and _closer.thread.is_alive():
        return
    _closer.thread = threading.Thread(target=_run_closer, name=CLOSER_THREAD_NAME, daemon=True)
    _closer.thread.start()


def _run_closer() -> None:
    """Close idle producers when they are due; end once the cache is empty."""
    with _changed:
        while True:
            now_ms = _clock.now_ms()
            idle = _take_idle(now_ms)
            if idle:
                _changed.release()
                try:
                    _close_idle(idle, now_ms)
                finally:
                    _changed.acquire()
                continue
            if not _producers:
                if _closer.thread is threading.current_thread():
                    _closer.thread = None
                return
            wait_ms = _next_close_in_ms(now_ms)
            _changed.wait(None if wait_ms is None else wait_ms / 1000)


def _close_quietly(producer: BulkProducer, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    try:
        producer.close(timeout_s)
    except Exception as exc:  # closing is best effort; the task's outcome is already decided
        _log.warning("closing a cached producer failed: %s", type(exc).__name__)


atexit.register(close_all, 5.0)
