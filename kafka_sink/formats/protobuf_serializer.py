"""Protobuf for the producer on its own: a ``key.serializer`` / ``value.serializer`` object.

Role: the producer stays bytes in, bytes out; this object turns values into serialized
messages before it sees them, framed in Confluent's wire format when given a schema id
(magic byte, id, then the message-index list ``[0]``: the schema's first message), plain
Protobuf payloads without one. It never calls a registry: the id comes from whoever registered
the schema (the Spark driver, or the user).

Two call forms, the same bytes:
- ``serializer(value)`` / ``serialize(value)``: one message, either an instance of the
  schema's generated class or a dict of field values (as the columnar encoder reads a row:
  ``Decimal`` for a decimal field, ``datetime`` / ``date`` or the integer for a timestamp /
  date field, a dict for a map, None for an absent field), serialized by the ``protobuf``
  library, per record. This is what ``KafkaProducer.send`` calls.
- ``serialize_column(array)``: a whole Arrow struct column, encoded in bulk by
  ``protobuf_columnar``; hand the result to ``send_columns`` as its values or keys.

The schema is a ``ProtoSchema`` (``derive_protobuf_schema``) or ``.proto`` text (compiled by
protoc, its first message written; see ``protobuf_descriptor.parse_protobuf_schema``).

Usage::

    from kafka_sink.formats.protobuf_schema import derive_protobuf_schema
    from kafka_sink.formats.protobuf_serializer import ProtobufSerializer
    producer = KafkaProducer({..., "value.serializer": ProtobufSerializer(schema, schema_id=7)})

Invariants: None is never serialized (a tombstone stays None); ``protobuf`` and
``grpcio-tools`` are imported only for the per-record form (the optional ``protobuf`` extra);
the object is picklable (the schema travels as its tree).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kafka_sink.formats.base import FramedSerializer
from kafka_sink.formats.protobuf_columnar import ProtobufColumnEncoder
from kafka_sink.formats.protobuf_schema import ProtoMessage, ProtoSchema

__all__ = ["ProtobufSerializer"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class ProtobufSerializer(FramedSerializer[ProtoSchema]):
    """Protobuf payloads of one schema's first message, framed with ``schema_id`` when given."""

    def __init__(self, schema: ProtoSchema | str, schema_id: int | None = None) -> None:
        super().__init__(schema, schema_id)
        self._class: Any = None

    def _parse(self, schema: Any) -> ProtoSchema:
        if isinstance(schema, str):
            from kafka_sink.formats.protobuf_descriptor import parse_protobuf_schema

            return parse_protobuf_schema(schema)
        if not isinstance(schema, ProtoSchema):
            raise TypeError(
                "ProtobufSerializer takes a ProtoSchema (derive_protobuf_schema) or .proto "
                f"text, not {type(schema).__name__}"
            )
        return schema

    def _indexes(self) -> tuple[int, ...]:
        return self.schema.message_indexes

    def _column_encoder(self, schema: ProtoSchema) -> ProtobufColumnEncoder:
        return ProtobufColumnEncoder(schema)

    def __repr__(self) -> str:
        return f"ProtobufSerializer({self.schema.full_name}, schema_id={self.schema_id})"

    def message_class(self) -> Any:
        """The generated class of the schema's message (built once, from its ``.proto``)."""
        if self._class is None:
            from kafka_sink.formats.protobuf_descriptor import message_class

            self._class = message_class(self.schema.text)
        return self._class

    def _payload(self, value: Any) -> bytes:
        cls = self.message_class()
        if not isinstance(value, cls):
            message = cls()
            _fill(message, self.schema.root, value)
            value = message
        data: bytes = value.SerializeToString()
        return data


def _fill(message: Any, shape: ProtoMessage, values: dict[str, Any]) -> None:
    for field in shape.fields:
        value = values.get(field.name)
        if value is None:
            continue
        target = getattr(message, field.name)
        if field.label == "map":
            for key, item in dict(value).items():
                if field.message is not None:
                    _fill(target[key], field.message, item)
                else:
                    target[key] = _scalar(item)
        elif field.label == "repeated":
            for item in value:
                if field.message is not None:
                    _fill(target.add(), field.message, item)
                else:
                    target.append(_scalar(item))
        elif field.message is not None:
            target.SetInParent()
            _fill(target, field.message, value)
        else:
            setattr(message, field.name, _scalar(value))


def _scalar(value: Any) -> Any:
    """A Python value as the derived schema's field holds it (see ``protobuf_schema``)."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        delta = aware - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return (value - _EPOCH.date()).days
    if isinstance(value, dt.timedelta):
        return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if type(value).__name__ == "Decimal":
        return str(value)
    return value
