"""The two shapes every registry format shares: a column encoder and a producer serializer.

Role: one place for what does not depend on the format. ``ColumnEncoder`` binds its schema to
each Arrow type it meets, once (the check a format's ``bind`` makes, kept per type), and encodes
batch after batch with that plan; a format supplies ``_bind`` and ``_encode_bound``.
``FramedSerializer`` is the producer's ``key.serializer`` / ``value.serializer`` over a format:
one value per call (``_payload``, the format's per-record path) or a whole column
(``serialize_column``, the format's ``ColumnEncoder``), either framed in Confluent's wire
format when given a schema id; a format supplies ``_parse`` and ``_column_encoder``.

Invariants: both are picklable, as their schema and settings only (a task rebuilds its cache of
bindings); None is never serialized (a tombstone stays None); no registry is called here.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import pyarrow as pa

from kafka_sink.formats.sql_types import SqlType, sql_type_from_arrow
from kafka_sink.formats.wire_format import frame_column, header

__all__ = ["ColumnEncoder", "FramedSerializer"]

SchemaT = TypeVar("SchemaT")
BindingT = TypeVar("BindingT")


class ColumnEncoder(Generic[SchemaT, BindingT]):
    """Encodes columns with one schema; binds it once per Arrow type it is given."""

    def __init__(self, schema: SchemaT, path: str = "value") -> None:
        self.schema = schema
        self.path = path
        self._bindings: dict[Any, BindingT] = {}

    def binding(self, arrow_type: Any) -> BindingT:
        found = self._bindings.get(arrow_type)
        if found is None:
            found = self._bind(sql_type_from_arrow(arrow_type, self.path))
            self._bindings[arrow_type] = found
        return found

    def encode(self, array: Any) -> Any:
        """Payloads of ``array`` (an Arrow array or chunked array), nulls kept null."""
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        return self._encode_bound(array, self.binding(array.type))

    def _bind(self, sql_type: SqlType) -> BindingT:
        raise NotImplementedError

    def _encode_bound(self, array: Any, binding: BindingT) -> Any:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        return {"schema": self.schema, "path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["schema"], state["path"])  # type: ignore[misc]


class FramedSerializer(Generic[SchemaT]):
    """Payloads of one schema, framed with ``schema_id`` when given (plain without one)."""

    def __init__(self, schema: Any, schema_id: int | None = None) -> None:
        self.schema: SchemaT = self._parse(schema)
        self.schema_id = schema_id
        self._header = b"" if schema_id is None else header(schema_id, self._indexes())
        self._columns = self._column_encoder(self.schema)

    def __call__(self, value: Any) -> bytes | None:
        return self.serialize(value)

    def serialize(self, value: Any) -> bytes | None:
        """One value's payload (with the wire-format header when there is a schema id)."""
        if value is None:
            return None
        return self._header + self._payload(value)

    def serialize_column(self, array: Any) -> Any:
        """Every row of an Arrow column as a payload (``large_binary``); null rows stay null."""
        payloads = self._columns.encode(array)
        if self.schema_id is None:
            return payloads
        return frame_column(payloads, self.schema_id, self._indexes())

    def _indexes(self) -> tuple[int, ...] | None:
        """Protobuf's message-index list in the header; None for the other formats."""
        return None

    def _parse(self, schema: Any) -> SchemaT:
        raise NotImplementedError

    def _column_encoder(self, schema: SchemaT) -> ColumnEncoder[Any, Any]:
        raise NotImplementedError

    def _payload(self, value: Any) -> bytes:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        return {"schema": self.schema, "schema_id": self.schema_id}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["schema"], state["schema_id"])  # type: ignore[misc]
