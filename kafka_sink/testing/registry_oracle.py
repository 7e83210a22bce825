"""The registry formats' test oracle: records read back by confluent-kafka's own deserializers.

Tests judge the sink's Avro (and later Protobuf, JSON Schema) payloads by what confluent-kafka's
``DeserializingConsumer`` decodes with the deserializer it is given (``AvroDeserializer`` over
a registry client), a reader that shares no code with ``kafka_sink``. confluent-kafka is a test
dependency, imported inside the function.

Invariants: ``read_deserialized`` reads as a fresh consumer group from the earliest offsets with
``isolation.level=read_committed``; every wait is bounded by ``timeout_s``, and a record the
deserializer refuses (for example one without the wire format's magic byte) raises.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["read_deserialized"]


def read_deserialized(
    bootstrap: str,
    topic: str,
    value_deserializer: Any,
    expected: int,
    *,
    timeout_s: float = 60.0,
) -> list[Any]:
    """The decoded values of the first ``expected`` records of ``topic``, in arrival order."""
    from confluent_kafka import DeserializingConsumer

    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "value.deserializer": value_deserializer,
        }
    )
    try:
        consumer.subscribe([topic])
        out: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < expected:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"read {len(out)} of {expected} records of {topic!r}")
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                raise RuntimeError(f"reading {topic!r}: {msg.error()}")
            out.append(msg.value())
        return out
    finally:
        consumer.close()
