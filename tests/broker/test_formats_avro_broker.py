"""Avro in Confluent's wire format through a real broker, read back by confluent-kafka.

Rows are written by the producer both ways the formats offer: a whole Arrow column encoded in
bulk (``AvroSerializer.serialize_column`` into ``send_columns``) and one record at a time
(``AvroSerializer`` as ``value.serializer``). An independent reader, confluent-kafka's
``DeserializingConsumer`` with its ``AvroDeserializer`` (read_committed), decodes each record
against a registry holding the same schema under the id the payloads carry, and every field
must equal the input row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from registry_scenarios import ORDER_TYPE, WAIT_S, order_rows, read_values, write_both_ways

from kafka_sink import KafkaProducer
from kafka_sink.formats.avro_schema import derive_avro_schema
from kafka_sink.formats.avro_serializer import AvroSerializer
from kafka_sink.formats.sql_types import sql_type_from_arrow

pytestmark = pytest.mark.broker


def _read(bootstrap: str, topic: str, registry: Any, expected: int) -> list[Any]:
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    return read_values(bootstrap, topic, AvroDeserializer(registry), expected)


def test_columnar_and_per_record_avro_read_back_by_confluent_kafkas_deserializer(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )

    topic = topic_factory(partitions=1)
    schema = derive_avro_schema(sql_type_from_arrow(ORDER_TYPE))
    registry = MockSchemaRegistryClient({"url": "mock://broker-test"})
    schema_id = registry.register_schema(f"{topic}-value", Schema(schema.text, "AVRO"))
    serializer = AvroSerializer(schema, schema_id=schema_id)

    bulk_rows, single_rows = order_rows(0, 500), order_rows(500, 20)
    write_both_ways(kafka_bootstrap, topic, serializer, bulk_rows, single_rows)

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
    plain = AvroSerializer(derive_avro_schema(sql_type_from_arrow(ORDER_TYPE)))
    config = {"bootstrap.servers": kafka_bootstrap, "acks": "all", "value.serializer": plain}
    with KafkaProducer(config) as producer:
        producer.send(topic, order_rows(1, 1)[0])
        producer.flush(timeout=WAIT_S)
    registry = MockSchemaRegistryClient({"url": "mock://broker-test-plain"})
    with pytest.raises(ValueDeserializationError, match=r"(?i)magic byte"):
        _read(kafka_bootstrap, topic, registry, 1)
