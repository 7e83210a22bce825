"""One producer per Spark Python worker process and producer config, reused across tasks.

Role: Spark reuses Python worker processes across tasks (``spark.python.worker.reuse``), and a
module-level dict in an importable module survives between them, so a task acquires the producer
an earlier task on the same worker built: its connections, metadata and producer id are warm.
Spark's JVM sink does the same per executor JVM; ours is per Python worker process, because each
concurrently running task has its own worker.

Invariants:
- The cache key is the whole producer config (sorted key/value pairs): two configs that differ in
  any key never share a producer. The key holds secrets; it is never logged or put in a repr.
- A producer is only created inside a task (``write()``), never on the driver or at pickling.
- At most one task uses a worker process at a time, so no reference counting is needed; the lock
  only guards the dict against the producer's own threads and interpreter shutdown.
- ``evict`` removes a producer and closes it: after a delivery failure the next attempt on this
  worker starts from a fresh producer, never one left in a fatal state.
- At most ``MAX_PRODUCERS`` are kept; the least recently used is closed beyond that.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kafka_sink.producer.futures import BulkSendFuture

__all__ = ["MAX_PRODUCERS", "BulkProducer", "acquire", "cached_count", "close_all", "evict"]

MAX_PRODUCERS = 4
CLOSE_TIMEOUT_S = 30.0

_log = logging.getLogger("kafka_sink.spark")

ConfigKey = tuple[tuple[str, str], ...]


class BulkProducer(Protocol):
    """The part of ``KafkaProducer`` the sink uses."""

    def send_columns(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        *,
        partitions: Any = None,
        headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
        timestamps_ms: Any = None,
    ) -> BulkSendFuture: ...

    def flush(self, timeout: float | None = None) -> None: ...

    def close(self, timeout: float | None = None) -> None: ...

    def partitions_for(self, topic: str) -> list[int]: ...


_lock = threading.Lock()
_producers: OrderedDict[ConfigKey, BulkProducer] = OrderedDict()


def _create(config: Mapping[str, str]) -> BulkProducer:
    from kafka_sink.producer.producer import KafkaProducer

    producer: BulkProducer = KafkaProducer(dict(config))
    return producer


def acquire(config_items: ConfigKey) -> BulkProducer:
    """The cached producer for this config, created on first use in this process."""
    stale: list[BulkProducer] = []
    with _lock:
        producer = _producers.get(config_items)
        if producer is not None:
            _producers.move_to_end(config_items)
            return producer
    created = _create(dict(config_items))
    with _lock:
        existing = _producers.get(config_items)
        if existing is not None:
            stale.append(created)
            created = existing
        else:
            _producers[config_items] = created
        while len(_producers) > MAX_PRODUCERS:
            _key, old = _producers.popitem(last=False)
            stale.append(old)
    for old in stale:
        _close_quietly(old)
    return created


def evict(producer: BulkProducer, *, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Forget ``producer`` and close it (used after it failed a task)."""
    with _lock:
        for key, cached in list(_producers.items()):
            if cached is producer:
                del _producers[key]
    _close_quietly(producer, timeout_s)


def cached_count() -> int:
    with _lock:
        return len(_producers)


def close_all(timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    """Close every cached producer (at interpreter exit, and in tests)."""
    with _lock:
        producers = list(_producers.values())
        _producers.clear()
    for producer in producers:
        _close_quietly(producer, timeout_s)


def _close_quietly(producer: BulkProducer, timeout_s: float = CLOSE_TIMEOUT_S) -> None:
    try:
        producer.close(timeout_s)
    except Exception as exc:  # closing is best effort; the task's outcome is already decided
        _log.warning("closing a cached producer failed: %s", type(exc).__name__)


atexit.register(close_all, 5.0)
