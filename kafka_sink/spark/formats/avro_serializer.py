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

    from kafka_sink.spark.formats.avro_serializer import AvroSerializer
    producer = KafkaProducer({..., "value.serializer": AvroSerializer(schema_text, schema_id=7)})

Invariants: None is never serialized (a tombstone stays None, as the producer's serializer
contract says); the schema is parsed and checked when the serializer is built; fastavro is
imported only for the per-record form (it is the optional ``avro`` extra); the object is
picklable (the parsed schema travels as its JSON).
"""

from __future__ import annotations

import io
from typing import Any

from kafka_sink.spark.formats.avro_columnar import AvroColumnEncoder
from kafka_sink.spark.formats.avro_schema import AvroSchema, parse_avro_schema
from kafka_sink.spark.formats.wire_format import frame_column, header

__all__ = ["AvroSerializer"]


class AvroSerializer:
    """Avro payloads of one schema, framed with ``schema_id`` when given."""

    def __init__(self, schema: AvroSchema | str | dict[str, Any], schema_id: int | None = None):
        self.schema = schema if isinstance(schema, AvroSchema) else parse_avro_schema(schema)
        self.schema_id = schema_id
        self._header = b"" if schema_id is None else header(schema_id)
        self._columns = AvroColumnEncoder(self.schema)
        self._fastavro_schema: Any = None

    def __call__(self, value: Any) -> bytes | None:
        return self.serialize(value)

    def serialize(self, value: Any) -> bytes | None:
        """One value's payload (with the wire-format header when there is a schema id)."""
        if value is None:
            return None
        writer, parsed = self._writer()
        out = io.BytesIO()
        out.write(self._header)
        writer(out, parsed, value)
        return out.getvalue()

    def serialize_column(self, array: Any) -> Any:
        """Every row of an Arrow column as a payload (``large_binary``); null rows stay null."""
        payloads = self._columns.encode(array)
        return payloads if self.schema_id is None else frame_column(payloads, self.schema_id)

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

    def __getstate__(self) -> dict[str, Any]:
        return {"schema": self.schema, "schema_id": self.schema_id}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["schema"], state["schema_id"])  # type: ignore[misc]

    def __repr__(self) -> str:
        name = getattr(self.schema.root, "name", None) or self.schema.root.describe()
        return f"AvroSerializer({name}, schema_id={self.schema_id})"
