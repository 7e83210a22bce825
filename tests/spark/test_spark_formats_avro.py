"""``valueFormat=avro`` end to end: a real SparkSession, real Kafka and a real Schema Registry.

Rows with a struct ``value`` (ints, strings, a decimal, a timestamp, an array, a nullable field)
are written by ``format("pykafka")`` in batch and in streaming; an independent reader,
confluent-kafka's ``DeserializingConsumer`` with its ``AvroDeserializer`` (read_committed)
against the same registry, decodes every record and every field must equal the input row. The
driver's refusals (an incompatible schema, an explicit schema the column does not fit, a
registry that does not answer) must come before any record is written: the topic stays empty.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import time
from pathlib import Path
from typing import Any

import pytest
from sparkutil import KAFKA_OPTIONS, id_stream, write_available_now

from kafka_sink.formats.registry import Schema, SchemaRegistryClient
from kafka_sink.formats.wire_format import parse_header
from kafka_sink.testing import LocalSchemaRegistry
from kafka_sink.testing.oracle import read_all
from kafka_sink.testing.registry_oracle import read_deserialized

WAIT_S = 60
EPOCH_US = 1_709_208_000_000_000  # 2024-02-29T12:00:00Z
VALUE_SQL = (
    "named_struct("
    "'id', id, "
    "'name', IF(id % 3 = 0, NULL, concat('naïve café ', id, ' ✓')), "
    "'amount', CAST(id * 1234.57 - 99999 AS DECIMAL(12, 2)), "
    "'at', timestamp_micros(1709208000000000 + id * 1000001), "
    "'tags', slice(array('t0', 't1'), 1, CAST(id % 3 AS INT))"
    ") AS value"
)


def _expected(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": None if i % 3 == 0 else f"naïve café {i} ✓",
        "amount": decimal.Decimal(i) * decimal.Decimal("1234.57") - 99999,
        "at": dt.datetime(2024, 2, 29, 12, tzinfo=dt.UTC) + dt.timedelta(microseconds=i * 1000001),
        "tags": [f"t{k}" for k in range(i % 3)],
    }


def _read(bootstrap: str, topic: str, registry_url: str, expected: int) -> list[Any]:
    """Decoded values of ``expected`` records, by confluent-kafka's Avro deserializer."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentRegistry
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    deserializer = AvroDeserializer(ConfluentRegistry({"url": registry_url}))
    return read_deserialized(bootstrap, topic, deserializer, expected, timeout_s=WAIT_S)


def _options(bootstrap: str, topic: str, registry: LocalSchemaRegistry) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        **KAFKA_OPTIONS,
        "topic": topic,
        "valueFormat": "avro",
        "schema.registry.url": registry.url,
    }


def _write(df: Any, options: dict[str, str]) -> None:
    df.write.format("pykafka").mode("append").options(**options).save()


def _assert_empty(bootstrap: str, topic: str) -> None:
    # read_uncommitted: even an aborted record would show
    assert read_all(bootstrap, topic) == []


def test_batch_write_reads_back_field_for_field(
    spark: Any,
    kafka_bootstrap: str,
    topic_factory: Any,
    schema_registry: LocalSchemaRegistry,
) -> None:
    topic = topic_factory(partitions=2)
    df = spark.range(0, 300).selectExpr("CAST(id AS STRING) AS key", VALUE_SQL)
    _write(
        df,
        {**_options(kafka_bootstrap, topic, schema_registry), "deliveryGuarantee": "exactly-once"},
    )

    read = _read(kafka_bootstrap, topic, schema_registry.url, 300)
    assert sorted(read, key=lambda v: v["id"]) == [_expected(i) for i in range(300)]
    # The header carries the id the subject's (only) version got; the key stays bytes.
    latest = SchemaRegistryClient.from_options({"schema.registry.url": schema_registry.url})
    registered = latest.latest_version(f"{topic}-value")
    records = read_all(kafka_bootstrap, topic, expected=300, isolation_level="read_committed")
    assert {parse_header(r.value)[0] for r in records} == {registered.schema_id}
    assert {r.key for r in records} == {str(i).encode() for i in range(300)}


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
    read = _read(kafka_bootstrap, topic, schema_registry.url, 100)
    assert sorted(read, key=lambda v: v["id"]) == [_expected(i) for i in range(100)]


def test_an_incompatible_schema_is_refused_before_any_record(
    spark: Any,
    kafka_bootstrap: str,
    topic_factory: Any,
    schema_registry: LocalSchemaRegistry,
) -> None:
    topic = topic_factory(partitions=1)
    subject = f"{topic}-value"
    client = SchemaRegistryClient.from_options({"schema.registry.url": schema_registry.url})
    first = {
        "type": "record",
        "name": "topLevelRecord",
        "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string"}],
    }
    client.register(subject, Schema(json.dumps(first)))
    client.set_compatibility("BACKWARD", subject)
    # A new field without a default: a reader of the new schema cannot read the old records.
    df = spark.range(0, 10).selectExpr(
        "named_struct('id', id, 'note', 'n', 'extra', CAST(id AS STRING)) AS value"
    )
    with pytest.raises(Exception, match=rf"(?s)incompatible.*{subject}.*Fix:") as caught:
        _write(df, _options(kafka_bootstrap, topic, schema_registry))
    assert "Incompatible" in str(caught.value) or "incompatible" in str(caught.value)
    _assert_empty(kafka_bootstrap, topic)
    assert client.latest_version(subject).version == 1

    # The weaker setting: the registry's NONE level (Apicurio's global default) takes the same
    # change, so the refusal above is the subject's BACKWARD level at work.
    loose = topic_factory(partitions=1)
    client.register(f"{loose}-value", Schema(json.dumps(first)))
    assert client.get_compatibility(f"{loose}-value") == "NONE"
    _write(df, _options(kafka_bootstrap, loose, schema_registry))
    assert len(_read(kafka_bootstrap, loose, schema_registry.url, 10)) == 10

    # Removing a field is compatible under BACKWARD: a new version, and the write uses its id.
    compatible = spark.range(0, 10).selectExpr("named_struct('id', id) AS value")
    _write(compatible, _options(kafka_bootstrap, topic, schema_registry))
    second = client.latest_version(subject)
    assert second.version == 2
    read = _read(kafka_bootstrap, topic, schema_registry.url, 10)
    assert sorted(read, key=lambda v: v["id"]) == [{"id": i} for i in range(10)]
    assert {parse_header(r.value)[0] for r in read_all(kafka_bootstrap, topic)} == {
        second.schema_id
    }


def test_a_mismatched_explicit_schema_is_refused_naming_the_field_path(
    spark: Any,
    kafka_bootstrap: str,
    topic_factory: Any,
    schema_registry: LocalSchemaRegistry,
) -> None:
    topic = topic_factory(partitions=1)
    schema = {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "address", "type": {"type": "record", "name": "A", "fields": [
                {"name": "zip", "type": "int"}]}},
        ],
    }  # fmt: skip
    df = spark.range(0, 5).selectExpr(
        "named_struct('id', id, 'address', named_struct('zip', CAST(id AS STRING))) AS value"
    )
    options = {
        **_options(kafka_bootstrap, topic, schema_registry),
        "value.schema": json.dumps(schema),
    }
    with pytest.raises(Exception, match=r"value\.address\.zip: Spark type string"):
        _write(df, options)
    _assert_empty(kafka_bootstrap, topic)


def test_a_registry_that_does_not_answer_fails_fast_naming_the_url(
    spark: Any, kafka_bootstrap: str, topic_factory: Any
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    topic = topic_factory(partitions=1)
    df = spark.range(0, 5).selectExpr("named_struct('id', id) AS value")
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        "topic": topic,
        "valueFormat": "avro",
        "schema.registry.url": f"http://user:s3cr3t@127.0.0.1:{port}",
        "schema.registry.timeout.ms": "1000",
        "schema.registry.max.retries": "1",
        "schema.registry.retries.wait.ms": "100",
    }
    began = time.monotonic()
    with pytest.raises(Exception, match="Schema Registry unreachable") as caught:
        _write(df, options)
    assert time.monotonic() - began < 30
    assert url in str(caught.value) and "s3cr3t" not in str(caught.value)
    _assert_empty(kafka_bootstrap, topic)
