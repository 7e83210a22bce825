"""``transaction.timeout.ms`` for exactly-once writes: learned from the brokers on the driver.

Role: a transaction of a task stays open from its first record until the driver commits it, so
its timeout must cover the slowest task plus the commit, and may not exceed the brokers'
``transaction.max.timeout.ms`` (InitProducerId refuses a larger one with
INVALID_TRANSACTION_TIMEOUT, on every executor, after the rows were read). The driver asks one
broker (DescribeConfigs on its broker resource) while planning:

- no ``kafka.transaction.timeout.ms`` given: use the broker's maximum (the longest a commit may
  wait), else :data:`DEFAULT_TRANSACTION_TIMEOUT_MS`;
- a value above the broker's maximum fails before any task runs, naming both numbers.

Invariants: the lookup is bounded (``_LOOKUP_TIMEOUT_S`` or ``max.block.ms``, the smaller) and
never fails the write by itself: a broker that cannot be asked (unreachable, not authorized to
describe its configs) leaves the default and the user's value unchecked, with one warning. The
answer is cached per bootstrap list for ``_CACHE_S`` (Spark plans every micro-batch twice).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from kafka_sink.admin.client import AdminClient, Deadline
from kafka_sink.errors import KafkaError
from kafka_sink.sink_errors import SinkOptionError

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "broker_max_transaction_timeout_ms",
    "resolve_transaction_timeout_ms",
]

#: ``transaction.timeout.ms`` when the brokers' ``transaction.max.timeout.ms`` cannot be learned
#: (Kafka's default for that broker setting).
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000

log = logging.getLogger("kafka_sink.spark")

_KEY = "transaction.max.timeout.ms"
_LOOKUP_TIMEOUT_S = 15.0
_CACHE_S = 60.0
_cache: dict[str, tuple[float, int | None]] = {}
_cache_lock = threading.Lock()


def broker_max_transaction_timeout_ms(
    config: Mapping[str, object], timeout_s: float = _LOOKUP_TIMEOUT_S
) -> int | None:
    """A broker's ``transaction.max.timeout.ms``, or None when it cannot be learned."""
    bootstrap = str(config.get("bootstrap.servers", ""))
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(bootstrap)
        if hit is not None and now - hit[0] < _CACHE_S:
            return hit[1]
    try:
        value = _describe(config, timeout_s)
    except KafkaError as exc:
        log.warning(
            "pykafka: could not learn the brokers' %s (%s); exactly-once uses "
            "transaction.timeout.ms=%d unless kafka.transaction.timeout.ms is set, unchecked",
            _KEY,
            exc,
            DEFAULT_TRANSACTION_TIMEOUT_MS,
        )
        value = None
    with _cache_lock:
        _cache[bootstrap] = (now, value)
    return value


def _describe(config: Mapping[str, object], timeout_s: float) -> int | None:
    client, cfg = AdminClient.from_config(config)
    try:
        timeout_ms = min(int(timeout_s * 1000), cfg.max_block_ms)
        deadline = Deadline(client.clock, timeout_ms, f"DescribeConfigs({_KEY})")
        node = client.brokers(deadline)[0]
        value = client.broker_configs(node, [_KEY], deadline).get(_KEY)
        return None if value is None else int(value)
    finally:
        client.close()


def resolve_transaction_timeout_ms(
    producer_config: Mapping[str, str],
    lookup: Callable[[Mapping[str, object]], int | None] = broker_max_transaction_timeout_ms,
) -> int:
    """The ``transaction.timeout.ms`` an exactly-once write uses; refuses one above the max."""
    given = producer_config.get("transaction.timeout.ms")
    broker_max = lookup(producer_config)
    if given is None:
        return broker_max if broker_max is not None else DEFAULT_TRANSACTION_TIMEOUT_MS
    try:
        value = int(given.strip())
    except ValueError:
        raise SinkOptionError(
            f"option 'kafka.transaction.timeout.ms' must be a whole number of milliseconds, "
            f"got {given!r}"
        ) from None
    if value <= 0:
        raise SinkOptionError(
            f"option 'kafka.transaction.timeout.ms' must be > 0 milliseconds, got {value}"
        )
    if broker_max is not None and value > broker_max:
        raise SinkOptionError(
            f"option 'kafka.transaction.timeout.ms' is {value} ms, above the brokers' "
            f"transaction.max.timeout.ms ({broker_max} ms): every task's transaction would be "
            f"refused (INVALID_TRANSACTION_TIMEOUT). Fix: set it to at most {broker_max}, or "
            "leave it unset to use the brokers' maximum, or raise transaction.max.timeout.ms "
            "on the brokers"
        )
    return value
