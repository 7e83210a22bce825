"""What a topic refuses, found before its rows are sent: too large, keyless, out of its time.

Role: under ``onRecordError=deadLetter`` or ``skip`` a task takes bad rows out before it sends
(``task.py``). Most bad rows show in the columns; three kinds only the topic's configuration
tells: a record larger than the topic's ``max.message.bytes`` (the broker refuses its batch with
MESSAGE_TOO_LARGE), a record without a key for a compacted topic (INVALID_RECORD) and, for a
CreateTime topic, a timestamp further ahead of or behind now than
``message.timestamp.after.max.ms`` / ``.before.max.ms`` allow (INVALID_TIMESTAMP; Kafka 4.0
refuses records more than an hour ahead by default). A broker
refusal fails a transaction's batch and with it the whole transaction, so an exactly-once task
must not send such a row at all. :func:`topic_rules` reads the two settings of a topic
(DescribeConfigs through the light admin client, once per worker process, topic and producer
configuration, for :data:`RULES_MAX_AGE_MS`); :func:`refused_rows` names a group's rows the
topic would refuse, and the rows larger than ``max.request.size`` or ``buffer.memory`` that the
producer would refuse (the same bound as its own check).

Invariants:
- The size the topic's limit is held to is the record's batch as it would be sent alone: the
  uncompressed bound first (vectorised), then, for the few rows over it with compression on, the
  batch actually compressed; a row that compresses below the limit is not refused.
- Rules that cannot be read (no DESCRIBE_CONFIGS right, no answer in time) are None: the task
  relies on the broker's answer (at-least-once isolates the refused record; exactly-once fails
  the task as a refused batch fails its transaction). Such a miss is logged once per topic and
  process and asked again after :data:`RULES_RETRY_AFTER_MS`; a failure is never cached longer.
- A broker refusal of a kind the rules should have caught drops them (:func:`forget`): the
  topic's settings changed, and the next task reads them again.
- The admin connection is closed before returning; every wait is bounded by
  :data:`RULES_TIMEOUT_MS`.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kafka_sink.clock import SYSTEM_CLOCK
from kafka_sink.errors import KafkaError
from kafka_sink.producer.config import ProducerConfig
from kafka_sink.records.arrow import BinaryArray, binary_offsets, valid_mask
from kafka_sink.records.batch import (
    BATCH_HEADER_SIZE,
    MAX_RECORD_OVERHEAD,
    RecordBatchBuilder,
    encode_headers,
)
from kafka_sink.records.compression import CompressionType
from kafka_sink.sink_errors import BadRecord
from kafka_sink.spark.executor.columns import TopicColumns
from kafka_sink.spark.logs import ensure_logging, logger

__all__ = [
    "RULES_MAX_AGE_MS",
    "RULES_RETRY_AFTER_MS",
    "RULES_TIMEOUT_MS",
    "TopicRules",
    "forget",
    "refused_rows",
    "topic_rules",
]

#: How long a topic's rules read by this process stand.
RULES_MAX_AGE_MS = 300_000
#: After rules could not be read, how long before asking again.
RULES_RETRY_AFTER_MS = 60_000
#: The bound of one read of a topic's rules.
RULES_TIMEOUT_MS = 10_000

_KEYS = (
    "max.message.bytes",
    "cleanup.policy",
    "message.timestamp.type",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    # Before Kafka 3.6 one setting bounded both sides.
    "message.timestamp.difference.max.ms",
)

_I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class TopicRules:
    """The settings of a topic that refuse single records."""

    topic: str
    #: The topic's ``max.message.bytes`` (a batch's size on the wire); None when not reported.
    max_message_bytes: int | None
    #: ``cleanup.policy`` includes ``compact``: a record without a key is refused.
    compacted: bool
    #: How far ahead of / behind the broker's clock a record's timestamp may be (CreateTime
    #: topics; None: no bound, or LogAppendTime, which replaces the timestamp).
    timestamp_after_max_ms: int | None = None
    timestamp_before_max_ms: int | None = None


Fetch = Callable[[tuple[tuple[str, str], ...], str], TopicRules]

_lock = threading.Lock()
# (config hash, topic) -> (rules or None, monotonic ms read).
_CACHE: dict[tuple[str, str], tuple[TopicRules | None, float]] = {}


def _read(items: tuple[tuple[str, str], ...], topic: str) -> TopicRules:
    # Only a write with a record error policy reads rules: the others never load the admin
    # client (a task's first write imports what it needs alone).
    from kafka_sink.admin.client import AdminClient, Deadline

    client, _cfg = AdminClient.from_config(dict(items))
    try:
        deadline = Deadline(SYSTEM_CLOCK, RULES_TIMEOUT_MS, f"reading topic {topic!r}'s rules")
        node = client.brokers(deadline)[0]
        found = client.topic_configs(node, topic, _KEYS, deadline)
    finally:
        client.close()
    policy = found.get("cleanup.policy") or ""
    create_time = (found.get("message.timestamp.type") or "CreateTime") == "CreateTime"
    either = _number(found.get("message.timestamp.difference.max.ms"))
    after = _number(found.get("message.timestamp.after.max.ms"), either)
    before = _number(found.get("message.timestamp.before.max.ms"), either)
    return TopicRules(
        topic,
        _number(found.get("max.message.bytes")),
        "compact" in {p.strip() for p in policy.split(",")},
        after if create_time else None,
        before if create_time else None,
    )


def _number(text: str | None, default: int | None = None) -> int | None:
    """A setting's whole number; ``default`` when absent; None for Long.MAX_VALUE (no bound)."""
    if text is None or not text.strip().isdigit():
        return default
    value = int(text)
    return None if value >= (1 << 63) - 1 else value


def topic_rules(
    items: tuple[tuple[str, str], ...], topic: str, *, fetch: Fetch = _read
) -> TopicRules | None:
    """``topic``'s rules as this process last read them (module docstring), or None."""
    key = (hashlib.sha256(repr(items).encode()).hexdigest(), topic)
    now = time.monotonic() * 1000
    with _lock:
        cached = _CACHE.get(key)
    if cached is not None:
        rules, read_ms = cached
        if now - read_ms < (RULES_MAX_AGE_MS if rules is not None else RULES_RETRY_AFTER_MS):
            return rules
    try:
        rules = fetch(items, topic)
    except KafkaError as exc:
        ensure_logging()
        logger.warning(
            "could not read topic %r's max.message.bytes and cleanup.policy (%s: %s); rows "
            "it refuses are found by the broker's answer instead (DESCRIBE_CONFIGS on the "
            "topic lets the sink find them before sending)",
            topic,
            type(exc).__name__,
            exc,
        )
        rules = None
    with _lock:
        _CACHE[key] = (rules, time.monotonic() * 1000)
    return rules


def forget(items: tuple[tuple[str, str], ...], topic: str) -> None:
    """Drop ``topic``'s rules: the broker refused a row they let through (they changed since)."""
    key = (hashlib.sha256(repr(items).encode()).hexdigest(), topic)
    with _lock:
        _CACHE.pop(key, None)


def refused_rows(
    group: TopicColumns, rules: TopicRules | None, config: ProducerConfig
) -> list[BadRecord]:
    """The group's rows the producer or the topic would refuse, as bad records (row order)."""
    sizes = _uncompressed_sizes(group)
    client_limit = min(config.max_request_size, config.buffer_memory)
    topic_limit = rules.max_message_bytes if rules is not None else None
    bound = client_limit if topic_limit is None else min(client_limit, topic_limit)
    bad: dict[int, BadRecord] = {}
    for index in np.flatnonzero(sizes > bound).tolist():
        size = int(sizes[index])
        row = group.row_number(index)
        if size > client_limit:
            setting, limit = (
                ("max.request.size", config.max_request_size)
                if size > config.max_request_size
                else ("buffer.memory", config.buffer_memory)
            )
            bad[index] = _too_large(group, row, size, f"option kafka.{setting}", limit)
            continue
        assert topic_limit is not None
        sent = _sent_size(group, index, config)
        if sent > topic_limit:
            where = f"topic {group.topic!r}'s max.message.bytes"
            bad[index] = _too_large(group, row, sent, where, topic_limit)
    if rules is not None and group.timestamps_ms is not None:
        _check_timestamps(group, rules, bad)
    if rules is not None and rules.compacted:
        keys = group.keys
        missing = np.arange(group.num_rows) if keys is None else _null_rows(keys)
        for index in missing.tolist():
            if index in bad:
                continue
            row = group.row_number(index)
            bad[index] = BadRecord(
                row,
                group.topic,
                f"row {row} (topic {group.topic!r}) has no key, and the topic is compacted "
                "(cleanup.policy=compact), which refuses records without a key "
                "(INVALID_RECORD). Fix: give the row a key, or write to a topic that is not "
                "compacted",
                code="invalid_record",
                error_class="kafka_sink.errors.InvalidRecordError",
            )
    return [bad[i] for i in sorted(bad)]


def _check_timestamps(group: TopicColumns, rules: TopicRules, bad: dict[int, BadRecord]) -> None:
    """Rows whose timestamp the topic refuses (INVALID_TIMESTAMP), against this host's clock."""
    stamps = group.timestamps_ms
    assert stamps is not None
    now_ms = SYSTEM_CLOCK.wall_ms()
    late = np.zeros(len(stamps), dtype=np.bool_)
    if rules.timestamp_after_max_ms is not None:
        late |= stamps > now_ms + rules.timestamp_after_max_ms
    if rules.timestamp_before_max_ms is not None:
        late |= stamps < now_ms - rules.timestamp_before_max_ms
    for index in np.flatnonzero(late).tolist():
        if index in bad:
            continue
        row = group.row_number(index)
        bad[index] = BadRecord(
            row,
            group.topic,
            f"row {row} (topic {group.topic!r}) has timestamp {int(stamps[index])} ms, outside "
            f"what the topic takes (message.timestamp.after.max.ms="
            f"{rules.timestamp_after_max_ms}, message.timestamp.before.max.ms="
            f"{rules.timestamp_before_max_ms}, from now): the broker refuses it "
            "(INVALID_TIMESTAMP). Fix: correct the row's timestamp, set it to null (now), or "
            "widen the topic's bounds",
            code="invalid_timestamp",
            error_class="kafka_sink.errors.InvalidTimestampError",
        )


def _too_large(group: TopicColumns, row: int, size: int, what: str, limit: int) -> BadRecord:
    return BadRecord(
        row,
        group.topic,
        f"row {row} (topic {group.topic!r}) is {size} bytes as a batch of its own, larger "
        f"than {what} ({limit}). Fix: write smaller records, or raise {what}",
        code="record_too_large",
        error_class="kafka_sink.errors.RecordTooLargeError",
    )


def _null_rows(column: BinaryArray) -> _I64:
    return np.flatnonzero(~valid_mask(column)).astype(np.int64)


def _lengths(column: BinaryArray | None, n: int) -> _I64:
    """Per-row byte lengths of a binary column; -1 for null."""
    if column is None:
        return np.full(n, -1, dtype=np.int64)
    offsets: _I64 = np.asarray(binary_offsets(column), dtype=np.int64)
    lengths: _I64 = offsets[1:] - offsets[:-1]
    lengths[~valid_mask(column)] = -1
    return lengths


def _varint_sizes(lengths: _I64) -> _I64:
    zigzag = np.where(lengths < 0, 1, lengths << 1).astype(np.uint64)
    sizes: _I64 = np.ones(len(lengths), dtype=np.int64)
    for bits in range(7, 64, 7):
        sizes = sizes + (zigzag >= np.uint64(1 << bits)).astype(np.int64)
    return sizes


def _uncompressed_sizes(group: TopicColumns) -> _I64:
    """Each row's size as an uncompressed batch of its own: the producer's own bound."""
    n = group.num_rows
    sizes = np.full(n, BATCH_HEADER_SIZE + MAX_RECORD_OVERHEAD, dtype=np.int64)
    for column in (group.values, group.keys):
        lengths = _lengths(column, n)
        sizes += np.where(lengths < 0, 1, lengths + _varint_sizes(lengths))
    if group.headers is None:
        sizes += 1
    else:
        sizes += np.fromiter(
            (len(encode_headers(h)) if h else 1 for h in group.headers), dtype=np.int64, count=n
        )
    return sizes


def _sent_size(group: TopicColumns, index: int, config: ProducerConfig) -> int:
    """Row ``index`` sealed alone with the producer's compression: its size on the wire."""
    compression = CompressionType.from_name(config.compression_type)
    if compression == CompressionType.NONE:
        return int(_uncompressed_sizes(_one_row(group, index))[0])
    builder = RecordBatchBuilder(
        compression_type=compression,
        compression_level=config.compression_level,
        batch_size=1 << 62,
    )
    headers: Sequence[tuple[str, bytes | None]] = group.headers[index] if group.headers else ()
    key = group.keys[index].as_py() if group.keys is not None else None
    builder.append(0, key, group.values[index].as_py(), headers)
    return builder.seal().size_bytes


def _one_row(group: TopicColumns, index: int) -> TopicColumns:
    return TopicColumns(
        group.topic,
        group.values.slice(index, 1),
        group.keys.slice(index, 1) if group.keys is not None else None,
        None,
        None,
        [group.headers[index]] if group.headers is not None else None,
    )
