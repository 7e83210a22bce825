"""A task's serialization of its Arrow batches: the planned columns encoded and framed in bulk.

Role: the executor half of :mod:`kafka_sink.spark.formats.plan`. A task builds one
:class:`BatchEncoder` from the write's :class:`~kafka_sink.spark.formats.plan.FormatPlan` and
hands it every Arrow batch before the batch is split by topic: the ``value`` (and ``key``)
column is replaced by its Avro or Protobuf payloads (``AvroColumnEncoder``,
``ProtobufColumnEncoder``, a whole column at a time), framed in Confluent's wire format (with
Protobuf's message-index list) when the plan has a schema id. Everything after it (columns,
the producer's ``send_columns``) sees binary columns, as for a write without a format.

Invariants: no registry call and no per-row Python; a null row stays null (a tombstone); the
encoders are built once per task and bind once per Arrow type; a value the schema cannot take
(a null where the schema has none, an enum value that is not a symbol) fails the task naming
the field path and the row.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from kafka_sink.spark.formats.avro_columnar import AvroColumnEncoder
from kafka_sink.spark.formats.base import ColumnEncoder
from kafka_sink.spark.formats.plan import ColumnFormat, FormatPlan
from kafka_sink.spark.formats.protobuf_columnar import ProtobufColumnEncoder
from kafka_sink.spark.formats.protobuf_schema import ProtoSchema
from kafka_sink.spark.formats.wire_format import frame_column

__all__ = ["BatchEncoder"]


class _ColumnEncoder:
    def __init__(self, column: ColumnFormat) -> None:
        self.name = column.side
        self.schema_id = column.schema_id
        self._encoder: ColumnEncoder[Any, Any]
        self._indexes: tuple[int, ...] | None = None
        if isinstance(column.schema, ProtoSchema):
            self._encoder = ProtobufColumnEncoder(column.schema, column.side)
            self._indexes = column.schema.message_indexes
        else:
            self._encoder = AvroColumnEncoder(column.schema, column.side)

    def encode(self, array: pa.Array | pa.ChunkedArray) -> pa.Array:
        payloads = self._encoder.encode(array)
        if self.schema_id is None:
            return payloads
        return frame_column(payloads, self.schema_id, self._indexes)


class BatchEncoder:
    """Replaces a batch's planned columns by their serialized form."""

    def __init__(self, plan: FormatPlan) -> None:
        self._columns = [_ColumnEncoder(c) for c in plan.columns]

    def encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        for column in self._columns:
            index = batch.schema.get_field_index(column.name)
            encoded = column.encode(batch.column(index))
            batch = batch.set_column(index, pa.field(column.name, encoded.type), encoded)
        return batch
