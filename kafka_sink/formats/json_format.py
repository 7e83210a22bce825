"""JSON Schema as a registry format: ``valueFormat=jsonschema``, registered as ``JSON``.

Role: JSON Schema's :class:`~kafka_sink.formats.format.Format` description, tying its
driver-side schema functions (``json_schema``) to its columnar encoder (``json_columnar``) and
its per-record serializer (``json_serializer``), which are named, not imported.

Invariants: imports nothing heavier than ``json_schema`` (the driver reads this module); a
derived schema's ``title`` is ``recordName`` and it has no namespace; without a registry the
schema must be given (plain JSON leaves a reader nothing to derive it from).
"""

from __future__ import annotations

from kafka_sink.formats.format import Format, Lazy
from kafka_sink.formats.json_schema import (
    JsonSchema,
    bind_json,
    derive_json_schema,
    parse_json_schema,
)
from kafka_sink.formats.sql_types import SqlType

__all__ = ["JSON"]


def _derive(sql_type: SqlType, record_name: str, namespace: str, path: str) -> JsonSchema:
    # JSON Schema has no namespace; the options refuse recordNamespace without Avro or Protobuf.
    return derive_json_schema(sql_type, record_name, path=path)


def _record_name(schema: JsonSchema) -> str | None:
    return schema.title


JSON = Format(
    name="jsonschema",
    schema_type="JSON",
    schema_kind="a JSON Schema",
    parse=parse_json_schema,
    derive=_derive,
    bind=bind_json,
    record_name=_record_name,
    column_encoder=Lazy("kafka_sink.formats.json_columnar:JsonColumnEncoder"),
    serializer=Lazy("kafka_sink.formats.json_serializer:JsonSchemaSerializer"),
    plain_needs_schema="plain JSON",
)
