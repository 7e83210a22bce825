"""Avro as a registry format: ``valueFormat=avro``, registered as schemaType ``AVRO``.

Role: Avro's :class:`~kafka_sink.formats.format.Format` description, tying its driver-side
schema functions (``avro_schema``) to its columnar encoder (``avro_columnar``) and its
per-record serializer (``avro_serializer``), which are named, not imported.

Invariants: imports nothing heavier than ``avro_schema`` (the driver reads this module);
a derived schema may be written without a registry (plain Avro binary, as ``to_avro`` writes).
"""

from __future__ import annotations

from kafka_sink.formats.avro_schema import (
    AvroRecord,
    AvroSchema,
    bind,
    derive_avro_schema,
    parse_avro_schema,
)
from kafka_sink.formats.format import Format, Lazy
from kafka_sink.formats.sql_types import SqlType

__all__ = ["AVRO"]


def _derive(sql_type: SqlType, record_name: str, namespace: str, path: str) -> AvroSchema:
    return derive_avro_schema(sql_type, record_name, namespace, path=path)


def _record_name(schema: AvroSchema) -> str | None:
    return schema.root.name if isinstance(schema.root, AvroRecord) else None


AVRO = Format(
    name="avro",
    schema_type="AVRO",
    schema_kind="Avro JSON",
    parse=parse_avro_schema,
    derive=_derive,
    bind=bind,
    record_name=_record_name,
    column_encoder=Lazy("kafka_sink.formats.avro_columnar:AvroColumnEncoder"),
    serializer=Lazy("kafka_sink.formats.avro_serializer:AvroSerializer"),
    takes_namespace=True,
)
