"""JSON Schema in Confluent's wire format through a real broker and a real registry.

The schema derived from the rows' Spark type is registered in ``LocalSchemaRegistry`` by the
driver's client; rows are written by the producer both ways the formats offer: a whole Arrow
column encoded in bulk (``JsonSchemaSerializer.serialize_column`` into ``send_columns``) and
one record at a time (``JsonSchemaSerializer`` as ``value.serializer``). An independent reader,
confluent-kafka's ``DeserializingConsumer`` with its ``JSONDeserializer`` (read_committed), fetches
the schema by the id each payload carries from the same registry, validates the payload against
it, and every field must equal the input row.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink import KafkaProducer
from kafka_sink.spark.formats.json_schema import derive_json_schema
from kafka_sink.spark.formats.json_serializer import JsonSchemaSerializer
from kafka_sink.spark.formats.registry import Schema, SchemaRegistryClient
from kafka_sink.spark.formats.sql_types import sql_type_from_arrow
from kafka_sink.testing import LocalSchemaRegistry

pytestmark = pytest.mark.broker

WAIT_S = 60
ROW_TYPE = pa.struct(
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


def _rows(start: int, n: int) -> list[dict[str, Any]]:
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


def _as_read(row: dict[str, Any]) -> dict[str, Any]:
    """A row as a JSON reader gets it back: numbers as floats, dates and times as ISO text."""
    at = row["at"].astimezone(dt.UTC).replace(tzinfo=None)
    return {
        **row,
        "amount": float(row["amount"]),
        "at": at.isoformat(timespec="microseconds") + "Z",
        "day": row["day"].isoformat(),
    }


def _read(bootstrap: str, topic: str, registry_url: str, expected: int) -> list[Any]:
    from confluent_kafka import DeserializingConsumer
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    reader = JSONDeserializer(None, schema_registry_client=ConfluentClient({"url": registry_url}))
    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "value.deserializer": reader,
        }
    )
    try:
        consumer.subscribe([topic])
        out: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        while len(out) < expected:
            assert time.monotonic() < deadline, f"read {len(out)} of {expected} records"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg.value())
        return out
    finally:
        consumer.close()


def test_columnar_and_per_record_json_read_back_by_confluent_kafkas_deserializer(
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    schema_registry: LocalSchemaRegistry,
) -> None:
    topic = topic_factory(partitions=1)
    schema = derive_json_schema(sql_type_from_arrow(ROW_TYPE), title="Order")
    client = SchemaRegistryClient.from_options({"schema.registry.url": schema_registry.url})
    schema_id = client.register(f"{topic}-value", Schema(schema.text, "JSON"))
    serializer = JsonSchemaSerializer(schema, schema_id=schema_id)

    bulk_rows, single_rows = _rows(0, 500), _rows(500, 20)
    column = pa.array([{**r, "attrs": list(r["attrs"].items())} for r in bulk_rows], type=ROW_TYPE)
    config = {"bootstrap.servers": kafka_bootstrap, "acks": "all", "compression.type": "lz4"}
    with KafkaProducer(config) as bulk:
        bulk.send_columns(topic, serializer.serialize_column(column)).get(timeout=WAIT_S)
    with KafkaProducer({**config, "value.serializer": serializer}) as single:
        for row in single_rows:
            single.send(topic, row)
        single.flush(timeout=WAIT_S)

    read = _read(kafka_bootstrap, topic, schema_registry.url, len(bulk_rows) + len(single_rows))
    assert read == [_as_read(r) for r in bulk_rows + single_rows]


def test_the_reader_checks_the_framing_plain_json_is_refused(
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    schema_registry: LocalSchemaRegistry,
) -> None:
    # The same rows without a schema id are plain JSON: the registry-aware reader refuses them,
    # so the test above proves the framing, not just the JSON.
    from confluent_kafka.error import ValueDeserializationError

    topic = topic_factory(partitions=1)
    config = {
        "bootstrap.servers": kafka_bootstrap,
        "acks": "all",
        "value.serializer": JsonSchemaSerializer(),
    }
    with KafkaProducer(config) as producer:
        producer.send(topic, _rows(1, 1)[0])
        producer.flush(timeout=WAIT_S)
    with pytest.raises(ValueDeserializationError, match=r"(?i)magic byte"):
        _read(kafka_bootstrap, topic, schema_registry.url, 1)
