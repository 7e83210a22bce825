"""ProducerRecord and ProducerInterceptors: what ``interceptor.classes`` see, and their calls.

Role: Java's ``ProducerInterceptors``. Holds the configured interceptors in order and calls
``on_send(record) -> record`` before a record is serialized and partitioned,
``on_acknowledgement(metadata, exception)`` once per record when its fate is known, and
``close()`` when the producer closes. :class:`BulkAcknowledgements` does the per-record
``on_acknowledgement`` calls for one ``send_columns()`` call.

Invariants:
- Interceptors run in configured order; each ``on_send`` gets the previous one's result. An
  interceptor may define any of the three methods and is skipped for the others.
- An exception from an interceptor is logged (warning, the interceptor's name, topic and
  partition, never the record's key, value or headers) and swallowed, as in Java: the record goes
  on as the previous interceptor left it. An ``on_send`` that returns something other than a
  ProducerRecord is treated the same way.
- Every record that went through ``on_send`` gets exactly one ``on_acknowledgement``: with its
  RecordMetadata when acknowledged, or with the exception and a RecordMetadata holding only the
  topic and the partition (-1 if none was chosen yet) when it failed, whether the failure came
  from ``send()`` itself (serializer, partitioner, buffer, ...) or from delivery.
- ``on_acknowledgement`` for delivered and delivery-failed records runs on the producer's I/O
  thread, as in Java: it must be quick, or it delays every other response.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kafka_sink.producer.futures import FutureRecordMetadata, ProduceRequestResult, RecordMetadata

__all__ = ["BulkAcknowledgements", "ProducerInterceptors", "ProducerRecord"]

log = logging.getLogger(__name__)

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """A record as ``send()`` / ``send_columns()`` got it, before serialization and partitioning.

    ``key``/``value`` are what the caller passed (bytes, str, or any object a serializer takes);
    ``partition`` None means "the partitioner decides"; ``timestamp`` is epoch milliseconds, None
    for "now". An interceptor returns a new record, e.g. ``dataclasses.replace(record, ...)``.
    """

    topic: str
    partition: int | None = None
    key: Any = None
    value: Any = None
    headers: Headers = ()
    timestamp: int | None = None


def failure_metadata(topic: str, partition: int | None) -> RecordMetadata:
    """What ``on_acknowledgement`` gets with an exception: topic and partition only (Java's)."""
    return RecordMetadata(topic, -1 if partition is None else partition, -1, -1, -1, -1)


class ProducerInterceptors:
    """The configured interceptors, called in order with their exceptions swallowed."""

    def __init__(self, interceptors: Sequence[tuple[str, object]]) -> None:
        def methods(attr: str) -> list[tuple[str, Callable[..., Any]]]:
            out = []
            for name, obj in interceptors:
                fn = getattr(obj, attr, None)
                if callable(fn):
                    out.append((name, fn))
            return out

        self.names = tuple(name for name, _obj in interceptors)
        self._on_send = methods("on_send")
        self._on_acknowledgement = methods("on_acknowledgement")
        self._close = methods("close")

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        for name, fn in self._on_send:
            try:
                out = fn(record)
            except Exception:
                log.warning(
                    "interceptor %s: on_send raised for a record to topic %r partition %s; "
                    "ignored (the record goes on unchanged by it)",
                    name,
                    record.topic,
                    record.partition,
                    exc_info=True,
                )
                continue
            if not isinstance(out, ProducerRecord):
                log.warning(
                    "interceptor %s: on_send returned %s instead of a ProducerRecord for a "
                    "record to topic %r; ignored (the record goes on unchanged by it)",
                    name,
                    type(out).__name__,
                    record.topic,
                )
                continue
            record = out
        return record

    def on_acknowledgement(self, metadata: RecordMetadata, exception: BaseException | None) -> None:
        for name, fn in self._on_acknowledgement:
            try:
                fn(metadata, exception)
            except Exception:
                log.warning(
                    "interceptor %s: on_acknowledgement raised for topic %r partition %s; ignored",
                    name,
                    metadata.topic,
                    metadata.partition,
                    exc_info=True,
                )

    def on_send_error(self, topic: str, partition: int | None, exception: BaseException) -> None:
        """A record failed inside ``send()``/``send_columns()``, after ``on_send``."""
        self.on_acknowledgement(failure_metadata(topic, partition), exception)

    def close(self) -> None:
        for name, fn in self._close:
            try:
                fn()
            except Exception:
                log.warning("interceptor %s: close() raised; ignored", name, exc_info=True)


class BulkAcknowledgements:
    """``on_acknowledgement`` for each row of one ``send_columns()`` call.

    The bulk path reports each sealed batch with the call's row numbers it holds; when the batch
    completes every one of its records is acknowledged (on the I/O thread). Rows never queued
    (the call failed first) are acknowledged with the call's exception by :meth:`fail_unqueued`.
    """

    def __init__(
        self, interceptors: ProducerInterceptors, topic: str, partitions: Sequence[int | None]
    ) -> None:
        self._interceptors = interceptors
        self._topic = topic
        self._partitions = partitions
        self._queued = np.zeros(len(partitions), dtype=bool)

    def add_batch(
        self,
        result: ProduceRequestResult,
        rows: np.ndarray[Any, Any],
        timestamps_ms: int | np.ndarray[Any, Any],
        key_sizes: np.ndarray[Any, Any],
        value_sizes: np.ndarray[Any, Any],
    ) -> None:
        """``rows``: the call's row numbers of the batch's records, in offset order; the other
        arrays are per record in the same order."""
        self._queued[rows] = True
        ts = (
            [timestamps_ms] * len(rows)
            if isinstance(timestamps_ms, int)
            else [int(t) for t in timestamps_ms]
        )
        per_record = list(zip(ts, key_sizes.tolist(), value_sizes.tolist(), strict=True))
        result.add_done_callback(lambda r: self._acknowledge(r, per_record))

    def _acknowledge(
        self, result: ProduceRequestResult, per_record: list[tuple[int, int, int]]
    ) -> None:
        on_acknowledgement = self._interceptors.on_acknowledgement
        if result.error is None and not result.is_split:
            # The common case, without a FutureRecordMetadata per record.
            topic, partition = result.topic, result.partition
            base, append_time = result.base_offset, result.log_append_time_ms
            for delta, (ts, key_size, value_size) in enumerate(per_record):
                on_acknowledgement(
                    RecordMetadata(
                        topic,
                        partition,
                        base + delta if base >= 0 else -1,
                        ts if append_time == -1 else append_time,
                        key_size,
                        value_size,
                    ),
                    None,
                )
            return
        for delta, (ts, key_size, value_size) in enumerate(per_record):
            future = FutureRecordMetadata(result, delta, ts, key_size, value_size)
            error = future._error()
            if error is None:
                on_acknowledgement(future._metadata(), None)
            else:
                on_acknowledgement(failure_metadata(result.topic, result.partition), error)

    def fail_unqueued(self, exception: BaseException) -> None:
        for row in np.flatnonzero(~self._queued).tolist():
            self._interceptors.on_send_error(self._topic, self._partitions[row], exception)
