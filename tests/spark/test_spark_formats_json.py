"""``valueFormat=jsonschema`` and the ``topics`` option end to end: real Spark, Kafka, registry.

Rows with a struct ``value`` (ints, strings, a decimal, a timestamp, an array, a nullable field)
are written by ``format("pykafka")`` in batch and in streaming; an independent reader,
confluent-kafka's ``DeserializingConsumer`` with its ``JSONDeserializer`` (read_committed)
against the same registry, takes each record's schema by the id in its header, validates the
payload with it and decodes it; every field must equal the input row as JSON has it (the
decimal a number, the timestamp ISO-8601 text in UTC). A topic column with ``topics`` writes
each topic under its own subject. The refusals come before any record is written.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pytest
from sparkutil import KAFKA_OPTIONS, id_stream, write_available_now

from kafka_sink.formats.json_schema import DRAFT_07
from kafka_sink.formats.registry import Schema, SchemaRegistryClient
from kafka_sink.formats.wire_format import parse_header
from kafka_sink.testing import LocalSchemaRegistry
from kafka_sink.testing.oracle import read_all
from kafka_sink.testing.registry_oracle import read_deserialized

WAIT_S = 60
VALUE_SQL = (
    "named_struct("
    "'id', id, "
    "'name', IF(id % 3 = 0, NULL, concat('naïve \"café\" ', id, ' ✓')), "
    "'amount', CAST(id * 1234.57 - 99999 AS DECIMAL(12, 2)), "
    "'at', timestamp_micros(1709208000000000 + id * 1000001), "
    "'tags', slice(array('t0', 't1'), 1, CAST(id % 3 AS INT))"
    ") AS value"
)


def _expected(i: int) -> dict[str, Any]:
    at = dt.datetime(2024, 2, 29, 12) + dt.timedelta(microseconds=i * 1000001)
    return {
        "id": i,
        "name": None if i % 3 == 0 else f'naïve "café" {i} ✓',
        "amount": float(decimal.Decimal(i) * decimal.Decimal("1234.57") - 99999),
        "at": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "tags": [f"t{k}" for k in range(i % 3)],
    }


def _read(bootstrap: str, topic: str, registry_url: str, expected: int) -> list[Any]:
    """Decoded values of ``expected`` records, by confluent-kafka's JSON deserializer."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentRegistry
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer

    # No schema of its own: each record's is fetched by the id in its header.
    deserializer = JSONDeserializer(
        None, schema_registry_client=ConfluentRegistry({"url": registry_url})
    )
    return read_deserialized(bootstrap, topic, deserializer, expected, timeout_s=WAIT_S)


def _options(bootstrap: str, registry: LocalSchemaRegistry, **extra: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        **KAFKA_OPTIONS,
        "valueFormat": "jsonschema",
        "schema.registry.url": registry.url,
        **extra,
    }


def _write(df: Any, options: dict[str, str]) -> None:
    df.write.format("pykafka").mode("append").options(**options).save()


def _client(registry: LocalSchemaRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient.from_options({"schema.registry.url": registry.url})


def _ids(bootstrap: str, topic: str, expected: int) -> set[int]:
    records = read_all(bootstrap, topic, expected=expected, isolation_level="read_committed")
    return {parse_header(r.value)[0] for r in records}


@pytest.mark.slow
def test_batch_write_reads_back_field_for_field(
    spark: Any, kafka_bootstrap: str, topic_factory: Any, schema_registry: LocalSchemaRegistry
) -> None:
    topic = topic_factory(partitions=2)
    df = spark.range(0, 300).selectExpr("CAST(id AS STRING) AS key", VALUE_SQL)
    options = _options(kafka_bootstrap, schema_registry, topic=topic)
    _write(df, {**options, "deliveryGuarantee": "exactly-once"})

    read = _read(kafka_bootstrap, topic, schema_registry.url, 300)
    assert sorted(read, key=lambda v: v["id"]) == [_expected(i) for i in range(300)]
    registered = _client(schema_registry).latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"
    amount = json.loads(registered.schema.schema_str)["properties"]["amount"]
    assert amount == {"oneOf": [{"type": "null"}, {"type": "number"}]}  # the cast may give null
    assert _ids(kafka_bootstrap, topic, 300) == {registered.schema_id}


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
        _options(kafka_bootstrap, schema_registry, topic=topic),
        tmp_path / "ck",
    )
    read = _read(kafka_bootstrap, topic, schema_registry.url, 100)
    assert sorted(read, key=lambda v: v["id"]) == [_expected(i) for i in range(100)]


@pytest.mark.slow
def test_an_incompatible_json_schema_is_refused_before_any_record(
    spark: Any, kafka_bootstrap: str, topic_factory: Any, schema_registry: LocalSchemaRegistry
) -> None:
    topic = topic_factory(partitions=1)
    subject = f"{topic}-value"
    client = _client(schema_registry)
    first = spark.range(0, 5).selectExpr("named_struct('id', id, 'note', 'n') AS value")
    _write(first, _options(kafka_bootstrap, schema_registry, topic=topic))
    client.set_compatibility("BACKWARD", subject)
    # A new required property: a reader of the new schema cannot take the old records.
    changed = spark.range(0, 5).selectExpr(
        "named_struct('id', id, 'note', 'n', 'extra', 'e') AS value"
    )
    with pytest.raises(Exception, match=rf"(?s)incompatible.*{subject}.*Fix:"):
        _write(changed, _options(kafka_bootstrap, schema_registry, topic=topic))
    assert client.latest_version(subject).version == 1
    assert len(read_all(kafka_bootstrap, topic)) == 5  # the first write's only

    # Dropping a property is compatible under BACKWARD (the derived schemas leave
    # additionalProperties open, so the old records' 'note' is still valid): a second version.
    fewer = spark.range(0, 5).selectExpr("named_struct('id', id) AS value")
    _write(fewer, _options(kafka_bootstrap, schema_registry, topic=topic))
    second = client.latest_version(subject)
    assert second.version == 2
    assert [parse_header(r.value)[0] for r in read_all(kafka_bootstrap, topic)][5:] == [
        second.schema_id
    ] * 5

    # Under FORWARD the same removal is refused: an old reader requires 'note'.
    forward = topic_factory(partitions=1)
    _write(first, _options(kafka_bootstrap, schema_registry, topic=forward))
    client.set_compatibility("FORWARD", f"{forward}-value")
    with pytest.raises(Exception, match=rf"(?s)incompatible.*{forward}-value.*FORWARD"):
        _write(fewer, _options(kafka_bootstrap, schema_registry, topic=forward))
    assert len(read_all(kafka_bootstrap, forward)) == 5


def test_a_mismatched_explicit_json_schema_is_refused_naming_the_field_path(
    spark: Any, kafka_bootstrap: str, topic_factory: Any, schema_registry: LocalSchemaRegistry
) -> None:
    topic = topic_factory(partitions=1)
    schema = {
        "type": "object",
        "properties": {"address": {"type": "object", "properties": {"zip": {"type": "integer"}}}},
    }
    df = spark.range(0, 5).selectExpr(
        "named_struct('id', id, 'address', named_struct('zip', CAST(id AS STRING))) AS value"
    )
    options = _options(kafka_bootstrap, schema_registry, topic=topic)
    with pytest.raises(Exception, match=r"value\.address\.zip: Spark type string"):
        _write(df, {**options, "value.schema": json.dumps(schema)})
    assert read_all(kafka_bootstrap, topic) == []


@pytest.mark.slow
def test_a_topic_column_writes_each_topic_under_its_own_subject(
    spark: Any, kafka_bootstrap: str, topic_factory: Any, schema_registry: LocalSchemaRegistry
) -> None:
    one, two = topic_factory(partitions=2), topic_factory(partitions=1)
    client = _client(schema_registry)
    # The second topic's subject already holds another schema: its records get their own id.
    other = {"$schema": DRAFT_07, "title": "Other", "type": "object", "properties": {}}
    client.register(f"{two}-value", Schema(json.dumps(other), "JSON"))
    df = spark.range(0, 90).selectExpr(f"IF(id % 3 = 0, '{two}', '{one}') AS topic", VALUE_SQL)
    _write(df, _options(kafka_bootstrap, schema_registry, topics=f"{one},{two}"))

    for topic, ids in ((one, [i for i in range(90) if i % 3]), (two, list(range(0, 90, 3)))):
        registered = client.latest_version(f"{topic}-value")
        assert _ids(kafka_bootstrap, topic, len(ids)) == {registered.schema_id}
        read = _read(kafka_bootstrap, topic, schema_registry.url, len(ids))
        assert sorted(read, key=lambda v: v["id"]) == [_expected(i) for i in ids]
    assert client.latest_version(f"{two}-value").version == 2

    # A row whose topic is not listed fails the write, naming it and the option.
    stray = spark.range(0, 3).selectExpr(f"'{one}-x' AS topic", VALUE_SQL)
    with pytest.raises(Exception, match=rf"topic '{one}-x' is not in option 'topics'"):
        _write(stray, _options(kafka_bootstrap, schema_registry, topics=f"{one},{two}"))
