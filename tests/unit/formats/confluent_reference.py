"""confluent-kafka's own serializers over its mock registry: the reference the formats' framed
payloads are compared with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def confluent_serializer(kind: str, schema_text: str) -> tuple[int, Callable[[Any], Any]]:
    """(the schema's id, a function serializing one value) for ``kind`` AVRO or JSON."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = MockSchemaRegistryClient({"url": "mock://formats"})
    schema_id = registry.register_schema("orders-value", Schema(schema_text, kind))
    serializer: Any
    if kind == "AVRO":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        serializer = AvroSerializer(registry, schema_text)
    else:
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        serializer = JSONSerializer(schema_text, registry)  # validates each value (jsonschema)
    context = SerializationContext("orders", MessageField.VALUE)
    return schema_id, lambda value: serializer(value, context)
