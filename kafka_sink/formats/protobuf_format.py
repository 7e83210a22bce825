"""Protobuf as a registry format: ``valueFormat=protobuf``, registered as ``PROTOBUF``.

Role: Protobuf's :class:`~kafka_sink.formats.format.Format` description, tying its driver-side
schema functions (``protobuf_schema``; ``protobuf_descriptor`` for ``.proto`` text) to its
columnar encoder (``protobuf_columnar``) and its per-record serializer
(``protobuf_serializer``), which are named, not imported.

Invariants: imports nothing heavier than ``protobuf_schema`` (the driver reads this module):
protoc (``grpcio-tools``) is loaded only when a ``.proto`` text is parsed; the frame names the
schema's message by its index list; without a registry the schema must be given.
"""

from __future__ import annotations

from kafka_sink.formats.format import Format, Lazy
from kafka_sink.formats.protobuf_schema import (
    ProtoSchema,
    bind_protobuf,
    derive_protobuf_schema,
)
from kafka_sink.formats.sql_types import SqlType

__all__ = ["PROTOBUF"]


def _parse(text: str, path: str) -> ProtoSchema:
    # Imported here: protoc (grpcio-tools) is needed only to read a .proto text.
    from kafka_sink.formats.protobuf_descriptor import parse_protobuf_schema

    return parse_protobuf_schema(text, path)


def _derive(sql_type: SqlType, record_name: str, namespace: str, path: str) -> ProtoSchema:
    return derive_protobuf_schema(sql_type, record_name, namespace, path=path)


def _record_name(schema: ProtoSchema) -> str | None:
    return schema.full_name


def _message_indexes(schema: ProtoSchema) -> tuple[int, ...]:
    return schema.message_indexes


PROTOBUF = Format(
    name="protobuf",
    schema_type="PROTOBUF",
    schema_kind=".proto text",
    parse=_parse,
    derive=_derive,
    bind=bind_protobuf,
    record_name=_record_name,
    column_encoder=Lazy("kafka_sink.formats.protobuf_columnar:ProtobufColumnEncoder"),
    serializer=Lazy("kafka_sink.formats.protobuf_serializer:ProtobufSerializer"),
    message_indexes=_message_indexes,
    takes_namespace=True,
    plain_needs_schema="plain Protobuf",
)
