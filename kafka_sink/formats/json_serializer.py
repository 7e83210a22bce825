"""JSON Schema for the producer on its own: a ``key.serializer`` / ``value.serializer`` object.

Role: the producer stays bytes in, bytes out; this object turns values into UTF-8 JSON payloads
before it sees them, framed in Confluent's wire format when given a schema id (``schema_id``),
plain JSON without one. It never calls a registry, and does not validate against the schema
(the Spark sink checks the column's type against it once, on the driver; ``bind_json``).

Two call forms, the same JSON values:
- ``serializer(value)`` / ``serialize(value)``: one Python value (dicts, lists, str, int,
  float, bool, None; ``Decimal`` written as a number, ``datetime`` as ISO-8601 (``Z`` when in
  UTC), ``date`` as ``YYYY-MM-DD``, ``bytes`` as base64), per record with the stdlib ``json``.
  This is what ``KafkaProducer.send`` calls.
- ``serialize_column(array)``: a whole Arrow column, encoded in bulk by ``json_columnar``; hand
  the result to ``send_columns`` as its values or keys.

Invariants: None is never serialized (a tombstone stays None); NaN and infinities are refused
(JSON has no such numbers); the object is picklable (the schema travels as its text).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from typing import Any

from kafka_sink.formats.base import FramedSerializer
from kafka_sink.formats.json_columnar import JsonColumnEncoder
from kafka_sink.formats.json_schema import JsonSchema, parse_json_schema

__all__ = ["JsonSchemaSerializer"]


class JsonSchemaSerializer(FramedSerializer[JsonSchema | None]):
    """JSON payloads of one schema (None: derived per column), framed with ``schema_id``."""

    def __init__(
        self, schema: JsonSchema | str | dict[str, Any] | None = None, schema_id: int | None = None
    ):
        super().__init__(schema, schema_id)

    def _parse(self, schema: Any) -> JsonSchema | None:
        if schema is None or isinstance(schema, JsonSchema):
            return schema
        return parse_json_schema(schema)

    def _column_encoder(self, schema: JsonSchema | None) -> JsonColumnEncoder:
        return JsonColumnEncoder(schema)

    def _payload(self, value: Any) -> bytes:
        return _to_json(value).encode()

    def __repr__(self) -> str:
        title = self.schema.title if self.schema is not None else "derived"
        return f"JsonSchemaSerializer({title}, schema_id={self.schema_id})"


def _to_json(value: Any) -> str:
    """JSON text of a Python value; Decimal as its exact digits, which ``json`` cannot write."""
    if isinstance(value, dict):
        inner = ",".join(
            f"{json.dumps(str(k), ensure_ascii=False)}:{_to_json(v)}" for k, v in value.items()
        )
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_to_json(v) for v in value) + "]"
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError(f"JSON has no number for {value}")
        return str(value)
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            utc = value.astimezone(dt.UTC).replace(tzinfo=None)
            return f'"{utc.isoformat(timespec="microseconds")}Z"'
        return f'"{value.isoformat(timespec="microseconds")}"'
    if isinstance(value, dt.date):
        return f'"{value.isoformat()}"'
    if isinstance(value, bytes | bytearray):
        return f'"{base64.b64encode(value).decode()}"'
    return json.dumps(value, ensure_ascii=False, allow_nan=False)
