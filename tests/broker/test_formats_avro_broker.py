"""Avro in Confluent's wire format through a real broker, read back by confluent-kafka.

Rows are written by the producer both ways the formats offer: a whole Arrow column encoded in
bulk (``AvroSerializer.serialize_column`` into ``send_columns``) and one record at a time
(``AvroSerializer`` as ``value.serializer``). An independent reader, confluent-kafka's
``DeserializingConsumer`` with its ``AvroDeserializer`` (read_committed), decodes each record
against a registry holding the same schema under the id the payloads carry, and every field
must equal the input row.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink import KafkaProducer
from kafka_sink.spark.formats.avro_schema import derive_avro_schema
from kafka_sink.spark.formats.avro_serializer import AvroSerializer
from kafka_sink.spark.formats.sql_types import sql_type_from_arrow
from kafka_sink.testing.registry_oracle import read_deserialized

pytestmark = pytest.mark.broker

WAIT_S = 60
ROW_TYPE = pa.struct(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("at", pa.timestamp("us", tz="UTC")),
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
            "name": None if i % 3 == 0 else f"naïve café {i} ✓",
            "amount": decimal.Decimal(f"{(-1) ** i * i * 1234567}e-2"),
            "at": at + dt.timedelta(microseconds=i * 1_000_001),
            "tags": [f"t{k}" for k in range(i % 3)],
            "attrs": {f"k{k}": k * i for k in range(i % 2 + 1)},
            "address": None if i % 4 == 1 else {"street": "Main St", "zip": 10000 + i},
        }
        for i in range(start, start + n)
    ]


def _read(bootstrap: str, topic: str, registry: Any, expected: int) -> list[Any]:
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    return read_deserialized(
        bootstrap, topic, AvroDeserializer(registry), expected, timeout_s=WAIT_S
    )


def test_columnar_and_per_record_avro_read_back_by_confluent_kafkas_deserializer(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )

    topic = topic_factory(partitions=1)
    schema = derive_avro_schema(sql_type_from_arrow(ROW_TYPE))
    registry = MockSchemaRegistryClient({"url": "mock://broker-test"})
    schema_id = registry.register_schema(f"{topic}-value", Schema(schema.text, "AVRO"))
    serializer = AvroSerializer(schema, schema_id=schema_id)

    bulk_rows, single_rows = _rows(0, 500), _rows(500, 20)
    column = pa.array([{**r, "attrs": list(r["attrs"].items())} for r in bulk_rows], type=ROW_TYPE)
    config = {"bootstrap.servers": kafka_bootstrap, "acks": "all", "compression.type": "lz4"}
    # send_columns takes the encoded column as bytes: no value.serializer on its producer
    with KafkaProducer(config) as bulk:
        bulk.send_columns(topic, serializer.serialize_column(column)).get(timeout=WAIT_S)
    with KafkaProducer({**config, "value.serializer": serializer}) as single:
        for row in single_rows:
            single.send(topic, row)
        single.flush(timeout=WAIT_S)

    read = _read(kafka_bootstrap, topic, registry, len(bulk_rows) + len(single_rows))
    assert read == bulk_rows + single_rows


def test_the_reader_checks_the_framing_plain_avro_is_refused(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    # The same rows without a schema id are plain Avro (as Spark's to_avro writes): the
    # registry-aware reader refuses them, so the test above proves the framing, not just Avro.
    from confluent_kafka.error import ValueDeserializationError
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )

    topic = topic_factory(partitions=1)
    plain = AvroSerializer(derive_avro_schema(sql_type_from_arrow(ROW_TYPE)))
    config = {"bootstrap.servers": kafka_bootstrap, "acks": "all", "value.serializer": plain}
    with KafkaProducer(config) as producer:
        producer.send(topic, _rows(1, 1)[0])
        producer.flush(timeout=WAIT_S)
    registry = MockSchemaRegistryClient({"url": "mock://broker-test-plain"})
    with pytest.raises(ValueDeserializationError, match=r"(?i)magic byte"):
        _read(kafka_bootstrap, topic, registry, 1)
