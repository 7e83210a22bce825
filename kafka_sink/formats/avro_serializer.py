"""Avro for the producer on its own: a ``key.serializer`` / ``value.serializer`` object.

Role: the producer stays bytes in, bytes out; this object turns values into Avro payloads before
it sees them, framed in Confluent's wire format when given a schema id (``schema_id``), plain
Avro binary (as Spark's ``to_avro`` writes) without one. It never calls a registry: the id
comes from whoever registered the schema (the Spark driver, or the user).

Two call forms, the same bytes:
- ``serializer(value)`` / ``serialize(value)``: one Python value (a dict for a record, as
  fastavro takes it: ``datetime`` or epoch micros for timestamps, ``Decimal`` for decimals, a
  dict for a map), encoded by fastavro, per record. This is what ``KafkaProducer.send`` calls.
- ``serialize_column(array)``: a whole Arrow column (a struct array for a record), encoded in
  bulk by ``avro_columnar``; hand the result to ``send_columns`` as its values or keys.

Usage::

    from kafka_sink.formats.avro_serializer import AvroSerializer
    producer = KafkaProducer({..., "value.serializer": AvroSerializer(schema_text, schema_id=7)})

Invariants: None is never serialized (a tombstone stays None, as the producer's serializer
contract says); the schema is parsed and checked when the serializer is built; fastavro is
imported only for the per-record form (it is the optional ``avro`` extra); the object is
picklable (the parsed schema travels as its JSON).
"""

from __future__ import annotations

import io
from typing import Any

from kafka_sink.formats.avro_columnar import AvroColumnEncoder
from kafka_sink.formats.avro_schema import AvroSchema, parse_avro_schema
from kafka_sink.formats.base import FramedSerializer

__all__ = ["AvroSerializer"]


class AvroSerializer(FramedSerializer[AvroSchema]):
    """Avro payloads of one schema, framed with ``schema_id`` when given."""

    def __init__(self, schema: AvroSchema | str | dict[str, Any], schema_id: int | None = None):
        super().__init__(schema, schema_id)
        self._fastavro_schema: Any = None

    def _parse(self, schema: Any) -> AvroSchema:
        return schema if isinstance(schema, AvroSchema) else parse_avro_schema(schema)

    def _column_encoder(self, schema: AvroSchema) -> AvroColumnEncoder:
        return AvroColumnEncoder(schema)

    def _payload(self, value: Any) -> bytes:
        writer, parsed = self._writer()
        out = io.BytesIO()
        writer(out, parsed, value)
        return out.getvalue()

    def _writer(self) -> tuple[Any, Any]:
        try:
            import fastavro
        except ImportError:
            raise ImportError(
                "AvroSerializer.serialize needs fastavro: pip install 'pykafka-sink[avro]' "
                "(serialize_column does not)"
            ) from None
        if self._fastavro_schema is None:
            self._fastavro_schema = fastavro.parse_schema(self.schema.json)
        return fastavro.schemaless_writer, self._fastavro_schema

    def __repr__(self) -> str:
        name = getattr(self.schema.root, "name", None) or self.schema.root.describe()
        return f"AvroSerializer({name}, schema_id={self.schema_id})"
