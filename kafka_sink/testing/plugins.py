"""Example send-path plugins, importable wherever ``kafka_sink`` is (Spark executors included).

For ``key.serializer`` / ``value.serializer`` / ``partitioner.class`` / ``interceptor.classes``
by import path, e.g. ``kafka_sink.testing.plugins.KeyDigitPartitioner``. Each leaves a trace that
a consumer reading the topic back can check independently: a header, or a partition no built-in
partitioner would pick.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from typing import Any

from kafka_sink.producer.futures import RecordMetadata
from kafka_sink.producer.interceptors import ProducerRecord

STAMP_HEADER = "x-intercepted"
SERIALIZED_HEADER = "x-serialized-by"


def json_serializer(data: Any) -> bytes:
    """One-argument form: ``data`` -> JSON bytes (keys sorted)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8")


class TaggingJsonSerializer:
    """Three-argument form (``serialize(topic, data, headers)``): JSON, plus a header naming it."""

    def serialize(self, topic: str, data: Any, headers: list[tuple[str, bytes | None]]) -> bytes:
        headers.append((SERIALIZED_HEADER, topic.encode("utf-8")))
        return json_serializer(data)


class KeyDigitPartitioner:
    """Partition = the key read as a decimal number, modulo the partition count; keyless -> the
    last partition. Easy to predict in a test, and unlike murmur2."""

    def partition(self, topic: str, key_bytes: bytes | None, partition_count: int) -> int:
        if key_bytes is None:
            return partition_count - 1
        return int(key_bytes) % partition_count


def last_partition(topic: str, key_bytes: bytes | None, partition_count: int) -> int:
    """A partitioner function: every record to the topic's last partition."""
    return partition_count - 1


class StampInterceptor:
    """Adds the header ``x-intercepted: <n>`` where n counts this instance's ``on_send`` calls."""

    def __init__(self) -> None:
        self.sent = 0

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.sent += 1
        return dataclasses.replace(
            record, headers=(*record.headers, (STAMP_HEADER, str(self.sent).encode()))
        )


class CountingInterceptor:
    """Counts ``on_send``, acknowledged and failed ``on_acknowledgement`` calls (thread-safe),
    keeping each acknowledgement's metadata and exception."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = 0
        self.acknowledged: list[RecordMetadata] = []
        self.failed: list[tuple[RecordMetadata, BaseException]] = []
        self.closed = 0
        self.all_acknowledged = threading.Event()
        self.expected: int | None = None

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        with self._lock:
            self.sent += 1
        return record

    def on_acknowledgement(self, metadata: RecordMetadata, exception: BaseException | None) -> None:
        with self._lock:
            if exception is None:
                self.acknowledged.append(metadata)
            else:
                self.failed.append((metadata, exception))
            done = len(self.acknowledged) + len(self.failed)
            if self.expected is not None and done >= self.expected:
                self.all_acknowledged.set()

    def expect(self, count: int) -> None:
        """Set ``all_acknowledged`` once ``count`` acknowledgements (either kind) arrived."""
        with self._lock:
            self.expected = count
            if len(self.acknowledged) + len(self.failed) >= count:
                self.all_acknowledged.set()

    def close(self) -> None:
        with self._lock:
            self.closed += 1
