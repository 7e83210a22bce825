"""The input contract of Spark's Kafka sink, checked on the driver against the DataFrame schema.

Role: decide, before any task runs, which columns the writer uses and refuse a DataFrame that
``format("kafka")`` would refuse, with a message naming the column, the type found and the fix.

Columns (names matched exactly, case-sensitive, as Spark's sink does; nullability ignored):

============  ==========================================  ===================================
column        type                                        when absent
============  ==========================================  ===================================
value         string or binary (required)                 error
key           string or binary                            null key (the partitioner decides)
topic         string; the ``topic`` option overrides it    error unless the option is set
partition     int                                         the partitioner decides
headers       array<struct<key:string,value:binary>>      no headers
timestamp     timestamp, or bigint epoch milliseconds     the producer's current time
============  ==========================================  ===================================

``timestamp`` is this sink's addition; Spark's sink has no record-timestamp column. Every other
column is ignored. Strings are written as their UTF-8 bytes.

With ``valueFormat`` / ``keyFormat`` set (``serialized``), that column may have any Spark type:
the sink serializes it (``formats/``), and whether its type fits the schema is checked there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from kafka_sink.sink_errors import SinkSchemaError

__all__ = ["HEADERS_TYPE", "InputLayout", "validate_schema"]

HEADERS_TYPE = "array<struct<key:string,value:binary>>"

TimestampKind = Literal["timestamp", "millis"]


@dataclass(frozen=True)
class InputLayout:
    """Which optional columns the writer reads (picklable; computed once on the driver)."""

    topic_column: bool
    key_column: bool
    partition_column: bool
    headers_column: bool
    timestamp: TimestampKind | None


_FIX = {
    "value": "cast or serialize it, e.g. CAST(value AS STRING), to_json(struct(*)) or to_avro(...)",
    "key": "cast or serialize it, e.g. CAST(key AS STRING)",
    "topic": "cast it with CAST(topic AS STRING), or set .option('topic', ...) which overrides it",
    "partition": "cast it with CAST(partition AS INT)",
    "headers": (
        "build it as array(named_struct('key', 'name', 'value', CAST('v' AS BINARY)), ...); a "
        "map<string,string> m becomes transform(map_entries(m), e -> named_struct('key', e.key, "
        "'value', CAST(e.value AS BINARY)))"
    ),
    "timestamp": (
        "convert it with to_timestamp(...) or give epoch milliseconds as bigint; if it is not "
        "meant as the Kafka record timestamp, rename it"
    ),
}

_ALLOWED = {
    "value": "string or binary",
    "key": "string or binary",
    "topic": "string",
    "partition": "int",
    "headers": HEADERS_TYPE,
    "timestamp": "timestamp or bigint (epoch milliseconds)",
}


def _bad_type(column: str, found: DataType) -> SinkSchemaError:
    return SinkSchemaError(
        f"column '{column}' has unsupported type {found.simpleString()}: '{column}' must be "
        f"{_ALLOWED[column]}. Fix: {_FIX[column]}."
    )


def _is_bytes_like(dtype: DataType) -> bool:
    return isinstance(dtype, StringType | BinaryType)


def _is_headers(dtype: DataType) -> bool:
    if not isinstance(dtype, ArrayType) or not isinstance(dtype.elementType, StructType):
        return False
    fields = dtype.elementType.fields
    return (
        len(fields) == 2
        and fields[0].name == "key"
        and isinstance(fields[0].dataType, StringType)
        and fields[1].name == "value"
        and isinstance(fields[1].dataType, BinaryType)
    )


def validate_schema(
    schema: StructType, topic_option: str | None, serialized: Collection[str] = ()
) -> InputLayout:
    """Check ``schema`` against the sink's input contract; raise :class:`SinkSchemaError`.

    ``serialized``: the columns (``value``, ``key``) the sink serializes, of any type.
    """
    counts = Counter(f.name for f in schema.fields)
    types: dict[str, DataType] = {f.name: f.dataType for f in schema.fields}
    for name in _ALLOWED:
        if counts[name] > 1:
            raise SinkSchemaError(
                f"column '{name}' appears {counts[name]} times: the sink cannot tell which to "
                "write. Fix: select or alias the columns so each name appears once."
            )

    if "value" not in types:
        found = ", ".join(f.name for f in schema.fields) or "none"
        raise SinkSchemaError(
            "required column 'value' not found (columns: "
            f"{found}). Fix: provide a string or binary column named 'value', e.g. "
            "df.selectExpr('CAST(id AS STRING) AS key', 'to_json(struct(*)) AS value')."
        )
    for name in ("value", "key"):
        if name in types and name not in serialized and not _is_bytes_like(types[name]):
            raise _bad_type(name, types[name])

    topic_column = False
    if topic_option is None:
        if "topic" not in types:
            raise SinkSchemaError(
                "no topic: the DataFrame has no 'topic' column and the 'topic' option is not "
                "set. Fix: .option('topic', 'name'), or add a string column named 'topic'."
            )
        if not isinstance(types["topic"], StringType):
            raise _bad_type("topic", types["topic"])
        topic_column = True

    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise _bad_type("partition", types["partition"])

    if "headers" in types and not _is_headers(types["headers"]):
        raise _bad_type("headers", types["headers"])

    timestamp: TimestampKind | None = None
    if "timestamp" in types:
        if isinstance(types["timestamp"], TimestampType):
            timestamp = "timestamp"
        elif isinstance(types["timestamp"], LongType):
            timestamp = "millis"
        else:
            raise _bad_type("timestamp", types["timestamp"])

    return InputLayout(
        topic_column=topic_column,
        key_column="key" in types,
        partition_column="partition" in types,
        headers_column="headers" in types,
        timestamp=timestamp,
    )
