"""The driver's registry client against a real Schema Registry (``LocalSchemaRegistry``).

Each test works in subjects of its own (the registry is shared by the session). What the client
registers is read back with confluent-kafka's own ``SchemaRegistryClient``, an independent
reader of the same REST API, and the other way round.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from confluent_kafka.schema_registry import Schema as ConfluentSchema
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient

from kafka_sink.formats.registry import Schema, SchemaRegistryClient
from kafka_sink.sink_errors import (
    IncompatibleSchemaError,
    SchemaNotFoundError,
    SchemaRegistryUnavailableError,
)
from kafka_sink.testing import LocalSchemaRegistry
from kafka_sink.testing.jvm import accepts

Subjects = Callable[[str], str]


def _record(*fields: dict[str, object]) -> Schema:
    return Schema(
        json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": list(fields)})
    )


ID = {"name": "id", "type": "long"}
NOTE = {"name": "note", "type": ["null", "string"], "default": None}


def _client(registry: LocalSchemaRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient.from_options({"schema.registry.url": registry.url})


def test_register_lookup_latest_and_by_id_for_avro(
    schema_registry: LocalSchemaRegistry, subject_factory: Subjects
) -> None:
    client = _client(schema_registry)
    subject = subject_factory("value")
    v1 = _record(ID)
    assert client.lookup(subject, v1) is None
    with pytest.raises(SchemaNotFoundError, match=subject):
        client.latest_version(subject)

    schema_id = client.register(subject, v1)
    assert client.register(subject, v1) == schema_id  # registering again is a no-op
    found = client.lookup(subject, v1)
    assert found is not None
    assert (found.schema_id, found.subject, found.version) == (schema_id, subject, 1)
    latest = client.latest_version(subject)
    assert (latest.schema_id, latest.version, latest.schema.schema_type) == (schema_id, 1, "AVRO")
    assert json.loads(latest.schema.schema_str) == json.loads(v1.schema_str)
    assert json.loads(client.schema_by_id(schema_id).schema_str) == json.loads(v1.schema_str)

    v2 = _record(ID, NOTE)
    v2_id = client.register(subject, v2)
    assert v2_id != schema_id
    assert client.latest_version(subject).version == 2


def test_backward_refuses_a_field_added_without_a_default_with_the_registrys_reason(
    schema_registry: LocalSchemaRegistry, subject_factory: Subjects
) -> None:
    client = _client(schema_registry)
    subject = subject_factory("value")
    client.register(subject, _record(ID))
    client.set_compatibility("BACKWARD", subject)
    assert client.get_compatibility(subject) == "BACKWARD"

    no_default = _record(ID, {"name": "qty", "type": "int"})
    assert not client.check_compatibility(subject, no_default).is_compatible
    with pytest.raises(IncompatibleSchemaError) as err:
        client.ensure_compatible(subject, no_default)
    assert err.value.subject == subject
    assert f"subject {subject!r} under BACKWARD compatibility" in str(err.value)
    assert schema_registry.url in str(err.value)

    # Registering it is refused too, with the registry's own words, and adds no version.
    with pytest.raises(IncompatibleSchemaError) as err:
        client.register(subject, no_default)
    [reason] = err.value.reasons
    assert reason.startswith(f"Incompatible artifact: {subject} [AVRO]"), reason
    assert client.latest_version(subject).version == 1

    # The same field with a default is compatible and becomes version 2.
    with_default = _record(ID, {"name": "qty", "type": "int", "default": 0})
    assert client.check_compatibility(subject, with_default).is_compatible
    client.ensure_compatible(subject, with_default)
    new_id = client.register(subject, with_default)
    latest = client.latest_version(subject)
    assert (latest.schema_id, latest.version) == (new_id, 2)


def test_confluent_kafkas_client_reads_what_ours_registered(
    schema_registry: LocalSchemaRegistry, subject_factory: Subjects
) -> None:
    ours = _client(schema_registry)
    theirs = ConfluentClient({"url": schema_registry.url})
    subject = subject_factory("value")
    v1 = _record(ID, NOTE)
    schema_id = ours.register(subject, v1)

    assert json.loads(theirs.get_schema(schema_id).schema_str) == json.loads(v1.schema_str)
    latest = theirs.get_latest_version(subject)
    assert (latest.schema_id, latest.subject, latest.version) == (schema_id, subject, 1)
    assert theirs.lookup_schema(subject, ConfluentSchema(v1.schema_str, "AVRO")).schema_id == (
        schema_id
    )
    assert subject in theirs.get_subjects()


@pytest.mark.parametrize(
    ("schema_type", "text"),
    [
        ("PROTOBUF", 'syntax = "proto3";\npackage shop;\n\nmessage Order {\n  int64 id = 1;\n}\n'),
        (
            "JSON",
            '{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", '
            '"properties": {"id": {"type": "integer"}}}',
        ),
    ],
)
def test_protobuf_and_json_schemas_registered_by_confluent_kafka_are_read_by_ours(
    schema_registry: LocalSchemaRegistry, subject_factory: Subjects, schema_type: str, text: str
) -> None:
    theirs = ConfluentClient({"url": schema_registry.url})
    subject = subject_factory("value")
    schema_id = theirs.register_schema(subject, ConfluentSchema(text, schema_type))
    latest = _client(schema_registry).latest_version(subject)
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    assert latest.schema.schema_type == schema_type
    assert _client(schema_registry).lookup(subject, latest.schema) is not None


def test_a_stopped_registry_fails_the_client_in_bounded_time_naming_the_url() -> None:
    registry = LocalSchemaRegistry().start()
    try:
        url, port = registry.url, registry.port
        assert repr(registry) == f"LocalSchemaRegistry(url={url!r})"
        assert _client(registry).get_compatibility() == "NONE"  # a fresh, empty registry
    finally:
        registry.close()
    assert not accepts(port)
    client = SchemaRegistryClient.from_options(
        {"schema.registry.url": url, "schema.registry.timeout.ms": "1000"}
    )
    began = time.monotonic()
    with pytest.raises(SchemaRegistryUnavailableError) as err:
        client.latest_version("orders-value")
    assert time.monotonic() - began < 15
    assert url in str(err.value)
    registry.close()  # idempotent
