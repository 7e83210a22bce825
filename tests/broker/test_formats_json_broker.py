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
from collections.abc import Callable
from typing import Any

import pytest
from registry_scenarios import ORDER_TYPE, WAIT_S, order_rows, read_values, write_both_ways

from kafka_sink import KafkaProducer
from kafka_sink.formats.json_schema import derive_json_schema
from kafka_sink.formats.json_serializer import JsonSchemaSerializer
from kafka_sink.formats.registry import Schema, SchemaRegistryClient
from kafka_sink.formats.sql_types import sql_type_from_arrow
from kafka_sink.testing import LocalSchemaRegistry

pytestmark = pytest.mark.broker


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
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    reader = JSONDeserializer(None, schema_registry_client=ConfluentClient({"url": registry_url}))
    return read_values(bootstrap, topic, reader, expected)


def test_columnar_and_per_record_json_read_back_by_confluent_kafkas_deserializer(
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    schema_registry: LocalSchemaRegistry,
) -> None:
    topic = topic_factory(partitions=1)
    schema = derive_json_schema(sql_type_from_arrow(ORDER_TYPE), title="Order")
    client = SchemaRegistryClient.from_options({"schema.registry.url": schema_registry.url})
    schema_id = client.register(f"{topic}-value", Schema(schema.text, "JSON"))
    serializer = JsonSchemaSerializer(schema, schema_id=schema_id)

    bulk_rows, single_rows = order_rows(0, 500), order_rows(500, 20)
    write_both_ways(kafka_bootstrap, topic, serializer, bulk_rows, single_rows)

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
        producer.send(topic, order_rows(1, 1)[0])
        producer.flush(timeout=WAIT_S)
    with pytest.raises(ValueDeserializationError, match=r"(?i)magic byte"):
        _read(kafka_bootstrap, topic, schema_registry.url, 1)
