"""What the registry-format broker tests share: the order rows, writing them both ways the
formats offer, and the independent reader (confluent-kafka's ``DeserializingConsumer``,
read_committed, with the value deserializer a test gives)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa

from kafka_sink import KafkaProducer
from kafka_sink.testing.registry_oracle import read_deserialized

WAIT_S = 60
ORDER_TYPE = pa.struct(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("at", pa.timestamp("us", tz="UTC")),
        pa.field("day", pa.date32()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.int32())),
        pa.field("address", pa.struct([("street", pa.string()), ("zip", pa.int32())])),
    ]
)


def order_rows(start: int, n: int) -> list[dict[str, Any]]:
    """Rows of ``ORDER_TYPE`` (maps as dicts): unicode, quotes, control characters, nulls."""
    at = dt.datetime(2024, 2, 29, 12, 0, tzinfo=dt.UTC)
    return [
        {
            "id": i,
            "name": None if i % 3 == 0 else f'naïve "café" {i} ✓\n\t\\',
            "amount": decimal.Decimal(f"{(-1) ** i * i * 1234567}e-2"),
            "at": at + dt.timedelta(microseconds=i * 1_000_001),
            "day": dt.date(2024, 2, 29) + dt.timedelta(days=i),
            "tags": [f"t{k}" for k in range(i % 3)],
            "attrs": {f"k{k}": k * i for k in range(i % 2 + 1)},
            "address": None if i % 4 == 1 else {"street": "Main St", "zip": 10000 + i},
        }
        for i in range(start, start + n)
    ]


def write_both_ways(
    bootstrap: str, topic: str, serializer: Any, bulk: list[Any], single: list[Any]
) -> None:
    """``bulk`` as one encoded column through ``send_columns``, then ``single`` one record at a
    time with ``serializer`` as the producer's ``value.serializer``; acks=all, lz4."""
    column = pa.array([{**r, "attrs": list(r["attrs"].items())} for r in bulk], type=ORDER_TYPE)
    config = {"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4"}
    # send_columns takes the encoded column as bytes: no value.serializer on its producer
    with KafkaProducer(config) as producer:
        producer.send_columns(topic, serializer.serialize_column(column)).get(timeout=WAIT_S)
    with KafkaProducer({**config, "value.serializer": serializer}) as producer:
        for row in single:
            producer.send(topic, row)
        producer.flush(timeout=WAIT_S)


def read_values(bootstrap: str, topic: str, deserializer: Any, expected: int) -> list[Any]:
    """The first ``expected`` values of ``topic``, deserialized; fails after ``WAIT_S``."""
    return read_deserialized(bootstrap, topic, deserializer, expected, timeout_s=WAIT_S)
