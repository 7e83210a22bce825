"""A task's input as Arrow record batches, whether Spark hands it batches or ``Row`` s.

Role: the write loop (``task.py``) reads Arrow record batches. Every PySpark the sink supports
hands its writers batches (``spark_api.py``); a PySpark that handed a stream writer ``Row`` s
instead would reach the loop through :func:`arrow_batches`, which gathers the rows in bulk
(:data:`ROWS_PER_BATCH` at a time, one Arrow conversion per column, not a call per field) into
batches of the input's own Arrow schema, so every feature of the loop works unchanged.

Invariants:
- Batches pass through untouched; the first item decides which kind the whole input is.
- A row's values are converted as Spark's own Arrow hand-off converts them: a naive timestamp
  (Spark gives a ``TimestampType`` value as local wall-clock time, in a column or nested in a
  struct, an array or a map) is read in the worker's local time zone, so it names the same
  instant as the batch Spark would have handed.
- A batch holds at most :data:`ROWS_PER_BATCH` rows: memory stays bounded by the batch, not by
  the task.
"""

from __future__ import annotations

import datetime
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import ArrayType, DataType, MapType, StructType, TimestampType

__all__ = ["ROWS_PER_BATCH", "arrow_batches"]

#: Rows per Arrow batch built from ``Row`` s: Spark's own default batch size for Arrow
#: (``spark.sql.execution.arrow.maxRecordsPerBatch``) is 10,000; a smaller batch keeps a wide
#: row's batch small, a larger one would gain nothing per row.
ROWS_PER_BATCH = 4096


def arrow_batches(
    items: Iterable[Any], schema: StructType, rows_per_batch: int = ROWS_PER_BATCH
) -> Iterator[pa.RecordBatch]:
    """``items`` as Arrow record batches: as given when they are batches, else built from rows."""
    iterator = iter(items)
    first = next(iterator, None)
    if first is None:
        return
    if isinstance(first, pa.RecordBatch):
        yield first
        yield from iterator
        return
    arrow_schema = _arrow_schema(schema)
    local_times = {
        i: convert
        for i, f in enumerate(schema.fields)
        if (convert := _local_time_converter(f.dataType)) is not None
    }
    chunk: list[Sequence[Any]] = [first]
    for row in iterator:
        chunk.append(row)
        if len(chunk) >= rows_per_batch:
            yield _batch(chunk, arrow_schema, local_times)
            chunk = []
    if chunk:
        yield _batch(chunk, arrow_schema, local_times)


def _arrow_schema(schema: StructType) -> pa.Schema:
    # Spark's own mapping of its types to Arrow's (it needs no pandas). Timestamps are UTC
    # instants: PySpark 4.0 says so with timestamp_utc (its default), later ones with timezone.
    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema)


def _batch(
    rows: Sequence[Sequence[Any]], schema: pa.Schema, local_times: Mapping[int, Converter]
) -> pa.RecordBatch:
    columns: list[list[Any]] = [list(column) for column in zip(*rows, strict=True)]
    for index, convert in local_times.items():
        columns[index] = [convert(value) for value in columns[index]]
    arrays = [
        pa.array(column, type=field.type) for column, field in zip(columns, schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


Converter = Callable[[Any], Any]


def _local_time_converter(data_type: DataType) -> Converter | None:
    """What makes every naive timestamp in a value of ``data_type`` an aware one (at any depth:
    a struct's field, an array's element, a map's key or value); None when it holds none."""
    if isinstance(data_type, TimestampType):
        return _aware
    if isinstance(data_type, ArrayType):
        element = _local_time_converter(data_type.elementType)
        if element is None:
            return None
        return lambda value: None if value is None else [element(v) for v in value]
    if isinstance(data_type, MapType):
        key = _local_time_converter(data_type.keyType) or _same
        item = _local_time_converter(data_type.valueType) or _same
        if key is _same and item is _same:
            return None
        return lambda value: None if value is None else {key(k): item(v) for k, v in value.items()}
    if isinstance(data_type, StructType):
        fields = [_local_time_converter(f.dataType) or _same for f in data_type.fields]
        if all(f is _same for f in fields):
            return None
        return lambda value: (
            None if value is None else tuple(f(v) for f, v in zip(fields, value, strict=True))
        )
    return None


def _same(value: Any) -> Any:
    return value


def _aware(value: datetime.datetime | None) -> datetime.datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.astimezone(datetime.UTC)
