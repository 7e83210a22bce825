"""A task's serialization of its Arrow batches: the planned columns encoded and framed in bulk.

Role: the executor half of :mod:`kafka_sink.formats.plan`. A task builds one
:class:`BatchEncoder` from the write's :class:`~kafka_sink.formats.plan.FormatPlan` and
hands it every Arrow batch before the batch is split by topic: the ``value`` (and ``key``)
column is replaced by its payloads, a whole column at a time (the column encoder its format's
:class:`~kafka_sink.formats.format.Format` names: ``AvroColumnEncoder`` for ``avro``, and so
on), framed in Confluent's wire format (with the format's message-index list, Protobuf's) when
the plan has a schema id. Everything after it (columns, the producer's ``send_columns``) sees binary
columns, as for a write without a format.

With a ``topics`` option the column's plan has one format per listed topic. The rows are
grouped by the (schema, id) their topic resolved to; one group (the usual case: the same
schema, or the ``record`` strategy) is encoded as a whole column; several are each encoded on
their rows (``take``) and put back in row order by one inverse permutation.

Invariants: no registry call and no per-row Python; a null row stays null (a tombstone); the
encoders are built once per task and bind once per Arrow type; a value the schema cannot take
(a null where the schema has none, an enum value that is not a symbol) fails the task naming
the field path and the row; a row whose topic is not in ``topics`` fails the task naming the
topic and the option (a null topic is left to the topic split, which names it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.formats import catalog
from kafka_sink.formats.base import ColumnEncoder
from kafka_sink.formats.plan import ColumnFormat, FormatPlan
from kafka_sink.formats.wire_format import frame_column
from kafka_sink.sink_errors import ColumnSerializationError, SinkDataError

__all__ = ["BatchEncoder"]


class _Framed:
    """One schema and id: a column's payloads, framed when there is an id."""

    def __init__(self, column: ColumnFormat) -> None:
        described = catalog.get(column.format)
        self.schema_id = column.schema_id
        self._payloads: ColumnEncoder[Any, Any] = described.new_column_encoder(
            column.schema, column.side
        )
        # Protobuf's frame names the message within its schema; the other formats' do not.
        self._indexes = described.message_indexes(column.schema)

    def encode(self, array: pa.Array | pa.ChunkedArray) -> pa.Array:
        payloads = self._payloads.encode(array)
        if self.schema_id is None:
            return payloads
        return frame_column(payloads, self.schema_id, self._indexes)


class _ColumnEncoder:
    def __init__(self, column: ColumnFormat) -> None:
        self.name = column.side
        self._whole = _Framed(column) if not column.by_topic else None
        # Topics whose (schema, id) is the same share an encoder, hence one group of rows.
        groups: dict[tuple[str, int | None], tuple[_Framed, list[str]]] = {}
        for topic, planned in column.by_topic:
            key = (planned.schema.text, planned.schema_id)
            groups.setdefault(key, (_Framed(planned), []))[1].append(topic)
        self._groups = list(groups.values())
        self._topics = [t for t, _ in column.by_topic]

    def encode(self, array: pa.Array | pa.ChunkedArray, topics: Any) -> pa.Array:
        if self._whole is not None:
            return self._whole.encode(array)
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        listed = pc.is_in(topics, value_set=pa.array(self._topics, topics.type))
        unlisted = pc.and_(pc.invert(listed), pc.is_valid(topics))
        if pc.any(unlisted).as_py():
            topic = pc.filter(topics, unlisted)[0].as_py()
            raise ColumnSerializationError(
                f"a row's topic {topic!r} is not in option 'topics' ({', '.join(self._topics)}): "
                f"the {self.name} schema ids were resolved on the driver for those topics "
                "only. Fix: add the topic to 'topics', or filter such rows out",
                column=self.name,
                code="unlisted_topic",
            )
        if len(self._groups) == 1:
            return self._groups[0][0].encode(array)
        return self._by_group(array, topics)

    def _by_group(self, array: pa.Array, topics: Any) -> pa.Array:
        pieces, order = [], []
        for number, (framed, group_topics) in enumerate(self._groups):
            mask = pc.is_in(topics, value_set=pa.array(group_topics, topics.type))
            if number == 0:  # null topics ride with the first group; the split refuses them
                mask = pc.or_(mask, pc.is_null(topics))
            rows = np.flatnonzero(np.asarray(pc.fill_null(mask, False)))
            if len(rows):
                pieces.append(framed.encode(array.take(pa.array(rows))))
                order.append(rows)
        inverse = np.empty(len(array), dtype=np.int64)
        inverse[np.concatenate(order)] = np.arange(len(array), dtype=np.int64)
        return pa.concat_arrays(pieces).take(pa.array(inverse))


class BatchEncoder:
    """Replaces a batch's planned columns by their serialized form."""

    def __init__(self, plan: FormatPlan) -> None:
        self._columns = [_ColumnEncoder(c) for c in plan.columns]

    def encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        topic_index = batch.schema.get_field_index("topic")
        topics = batch.column(topic_index) if topic_index >= 0 else None
        for column in self._columns:
            index = batch.schema.get_field_index(column.name)
            try:
                encoded = column.encode(batch.column(index), topics)
            except ColumnSerializationError:
                raise
            except SinkDataError as exc:
                # Which column failed is what a dead letter's stage says (key or value).
                raise ColumnSerializationError(str(exc), column=column.name) from exc
            batch = batch.set_column(index, pa.field(column.name, encoded.type), encoded)
        return batch
