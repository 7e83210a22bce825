"""``valueFormat=protobuf`` end to end: a real SparkSession, real Kafka and a real Schema Registry.

Rows with a struct ``value`` (ints, strings, a decimal, a timestamp, an array, a nested struct,
a nullable field) are written by ``format("pykafka")`` in batch and in streaming; an
independent reader, confluent-kafka's ``DeserializingConsumer`` with its
``ProtobufDeserializer`` (read_committed) against the same registry, decodes every record and
every field must equal the input row. The reader's message class is generated from the
``.proto`` the registry holds under the subject (protoc and protobuf's descriptor pool); the
header's schema id must be the subject's registered id. An explicit ``.proto`` the column does
not fit is refused on the driver, naming the field path, before any record is written.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pytest
from sparkutil import KAFKA_OPTIONS, id_stream, write_available_now

from kafka_sink.formats.protobuf_descriptor import message_class
from kafka_sink.formats.registry import SchemaRegistryClient
from kafka_sink.formats.wire_format import parse_header
from kafka_sink.testing import LocalSchemaRegistry
from kafka_sink.testing.oracle import read_all
from kafka_sink.testing.registry_oracle import read_deserialized

WAIT_S = 60
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
VALUE_SQL = (
    "named_struct("
    "'id', id, "
    "'name', IF(id % 3 = 0, NULL, concat('naïve café ', id, ' ✓')), "
    "'amount', CAST(id * 1234.57 - 99999 AS DECIMAL(12, 2)), "
    "'at', timestamp_micros(1709208000000000 + id * 1000001), "
    "'tags', slice(array('t0', 't1'), 1, CAST(id % 3 AS INT)), "
    "'where', named_struct('zip', CAST(id % 7 AS INT), 'ok', id % 2 = 0)"
    ") AS value"
)


def _expected(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": None if i % 3 == 0 else f"naïve café {i} ✓",
        "amount": decimal.Decimal(i) * decimal.Decimal("1234.57") - 99999,
        "at": dt.datetime(2024, 2, 29, 12, tzinfo=dt.UTC) + dt.timedelta(microseconds=i * 1000001),
        "tags": [f"t{k}" for k in range(i % 3)],
        "where": {"zip": i % 7, "ok": i % 2 == 0},
    }


def _as_row(message: Any) -> dict[str, Any]:
    """A decoded message as the input row it came from (the documented mapping, reversed)."""
    return {
        "id": message.id,
        "name": message.name if message.HasField("name") else None,
        "amount": decimal.Decimal(message.amount),
        "at": EPOCH + dt.timedelta(microseconds=message.at),
        "tags": list(message.tags),
        "where": {"zip": message.where.zip, "ok": message.where.ok},
    }


def _read(bootstrap: str, topic: str, registry_url: str, expected: int) -> list[dict[str, Any]]:
    """Rows of ``expected`` records, by confluent-kafka's Protobuf deserializer."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    ours = SchemaRegistryClient.from_options({"schema.registry.url": registry_url})
    registered = ours.latest_version(f"{topic}-value").schema
    assert registered.schema_type == "PROTOBUF"
    cls = message_class(registered.schema_str)
    # Given no registry client, the deserializer reads with the class (built from the registry's
    # .proto): Apicurio's ccompat API does not serve the ?format=serialized descriptor
    # confluent-kafka asks a registry for. It still parses the header and message indexes.
    deserializer = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    messages = read_deserialized(bootstrap, topic, deserializer, expected, timeout_s=WAIT_S)
    return sorted((_as_row(m) for m in messages), key=lambda row: row["id"])


def _options(bootstrap: str, topic: str, registry: LocalSchemaRegistry) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        **KAFKA_OPTIONS,
        "topic": topic,
        "valueFormat": "protobuf",
        "schema.registry.url": registry.url,
        "recordName": "Order",
        "recordNamespace": "shop.orders",
    }


@pytest.mark.slow
def test_batch_write_reads_back_field_for_field(
    spark: Any,
    kafka_bootstrap: str,
    topic_factory: Any,
    schema_registry: LocalSchemaRegistry,
) -> None:
    topic = topic_factory(partitions=2)
    df = spark.range(0, 300).selectExpr("CAST(id AS STRING) AS key", VALUE_SQL)
    options = {
        **_options(kafka_bootstrap, topic, schema_registry),
        "deliveryGuarantee": "exactly-once",
    }
    df.write.format("pykafka").mode("append").options(**options).save()

    assert _read(kafka_bootstrap, topic, schema_registry.url, 300) == [
        _expected(i) for i in range(300)
    ]
    client = SchemaRegistryClient.from_options({"schema.registry.url": schema_registry.url})
    registered = client.latest_version(f"{topic}-value")
    assert "message Order" in registered.schema.schema_str
    records = read_all(kafka_bootstrap, topic, expected=300, isolation_level="read_committed")
    for record in records:
        schema_id, offset = parse_header(record.value)
        assert schema_id == registered.schema_id
        assert record.value[offset] == 0  # the message-index list [0]: the first message
    assert {r.key for r in records} == {str(i).encode() for i in range(300)}


@pytest.mark.slow
def test_streaming_write_reads_back_field_for_field(
    spark: Any,
    kafka_bootstrap: str,
    topic_factory: Any,
    schema_registry: LocalSchemaRegistry,
    tmp_path: Path,
) -> None:
    topic = topic_factory(partitions=2)
    stream = id_stream(spark, tmp_path / "in", {"a": range(0, 60), "b": range(60, 100)})
    write_available_now(
        stream.selectExpr(VALUE_SQL),
        _options(kafka_bootstrap, topic, schema_registry),
        tmp_path / "ck",
    )
    assert _read(kafka_bootstrap, topic, schema_registry.url, 100) == [
        _expected(i) for i in range(100)
    ]


def test_a_proto_the_column_does_not_fit_is_refused_before_any_record(
    spark: Any,
    kafka_bootstrap: str,
    topic_factory: Any,
    schema_registry: LocalSchemaRegistry,
) -> None:
    topic = topic_factory(partitions=1)
    proto = (
        'syntax = "proto3";\n'
        "message Order {\n"
        "  int64 id = 1;\n"
        "  Where where = 2;\n"
        "  message Where { string zip = 1; }\n"
        "}\n"
    )
    df = spark.range(0, 5).selectExpr(
        "named_struct('id', id, 'where', named_struct('zip', CAST(id AS INT))) AS value"
    )
    options = {**_options(kafka_bootstrap, topic, schema_registry), "value.schema": proto}
    with pytest.raises(Exception, match=r"value\.where\.zip: Spark type int cannot be written"):
        df.write.format("pykafka").mode("append").options(**options).save()
    assert read_all(kafka_bootstrap, topic) == []  # read_uncommitted: nothing at all
