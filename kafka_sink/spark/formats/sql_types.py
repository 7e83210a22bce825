"""Spark SQL types as plain data, read from Spark's JSON form or from an Arrow type.

Role: the formats see a column's Spark type without importing pyspark, so that the same code
runs on the driver (which has ``StructType.jsonValue()``) and in an executor or a plain producer
(which has the Arrow type of the batch in hand). ``sql_type_from_json`` reads Spark's
``DataType.jsonValue()`` form; ``sql_type_from_arrow`` reads the Arrow type Spark gives a Python
data source (``timestamp[us, tz]`` for timestamp, ``timestamp[us]`` for timestamp_ntz,
``decimal128`` for decimal, ``date32``, ``map``, ``list``, ``struct``, ``duration[us]`` for
day-time intervals).

Invariants: the tree is immutable and hashable; names are Spark's ``simpleString`` names
(``int``, ``bigint``, ``decimal(10,2)``), which every error message uses; char, varchar and
collated strings are ``string`` (Spark writes them as strings); a type this module does not
know raises :class:`~kafka_sink.spark.errors.SinkSchemaError` naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kafka_sink.spark.errors import SinkSchemaError

__all__ = [
    "ArrayType",
    "AtomicType",
    "DecimalType",
    "MapType",
    "SqlType",
    "StructField",
    "StructType",
    "sql_type_from_arrow",
    "sql_type_from_json",
]


@dataclass(frozen=True)
class AtomicType:
    """A type without parameters, by Spark's simpleString name (``int``, ``timestamp``...)."""

    name: str

    def simple_string(self) -> str:
        return self.name


@dataclass(frozen=True)
class DecimalType:
    precision: int
    scale: int

    def simple_string(self) -> str:
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True)
class ArrayType:
    element: SqlType
    contains_null: bool = True

    def simple_string(self) -> str:
        return f"array<{self.element.simple_string()}>"


@dataclass(frozen=True)
class MapType:
    key: SqlType
    value: SqlType
    value_contains_null: bool = True

    def simple_string(self) -> str:
        return f"map<{self.key.simple_string()},{self.value.simple_string()}>"


@dataclass(frozen=True)
class StructField:
    name: str
    type: SqlType
    nullable: bool = True


@dataclass(frozen=True)
class StructType:
    fields: tuple[StructField, ...]

    def simple_string(self) -> str:
        inner = ",".join(f"{f.name}:{f.type.simple_string()}" for f in self.fields)
        return f"struct<{inner}>"


SqlType = AtomicType | DecimalType | ArrayType | MapType | StructType

# Spark's JSON type names -> simpleString names.
_JSON_ATOMIC = {
    "boolean": "boolean",
    "byte": "tinyint",
    "short": "smallint",
    "integer": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
    "null": "void",
    "interval year to month": "interval year to month",
    "interval year": "interval year to month",
    "interval month": "interval year to month",
}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
_STRING_LIKE = re.compile(r"(char|varchar)\(\d+\)|string collate \S+")
_DAY_TIME = re.compile(r"interval (day|hour|minute|second)( to (day|hour|minute|second))?")


def sql_type_from_json(value: Any) -> SqlType:
    """A Spark type from its ``jsonValue()`` form (a name, or a dict for complex types)."""
    if isinstance(value, str):
        name = value.strip().lower()
        if name in _JSON_ATOMIC:
            return AtomicType(_JSON_ATOMIC[name])
        if name == "decimal":
            return DecimalType(10, 0)
        match = _DECIMAL.fullmatch(name)
        if match:
            return DecimalType(int(match[1]), int(match[2]))
        if _STRING_LIKE.fullmatch(name):
            return AtomicType("string")
        if _DAY_TIME.fullmatch(name):
            return AtomicType("interval day to second")
        raise SinkSchemaError(f"Spark type {value!r} has no mapping to a registry format")
    if isinstance(value, dict):
        kind = value.get("type")
        if kind == "struct":
            return StructType(
                tuple(
                    StructField(
                        f["name"], sql_type_from_json(f["type"]), bool(f.get("nullable", True))
                    )
                    for f in value.get("fields", [])
                )
            )
        if kind == "array":
            return ArrayType(
                sql_type_from_json(value["elementType"]), bool(value.get("containsNull", True))
            )
        if kind == "map":
            return MapType(
                sql_type_from_json(value["keyType"]),
                sql_type_from_json(value["valueType"]),
                bool(value.get("valueContainsNull", True)),
            )
        if kind == "udt" and "sqlType" in value:
            return sql_type_from_json(value["sqlType"])
    raise SinkSchemaError(f"not a Spark type in its JSON form: {value!r}")


def sql_type_from_arrow(arrow_type: Any) -> SqlType:
    """The Spark type behind an Arrow type as Spark hands it to a Python data source."""
    # Imported here: the driver reads Spark's JSON form only, and pyarrow loads numpy.
    import pyarrow as pa

    t = arrow_type
    if pa.types.is_dictionary(t):
        return sql_type_from_arrow(t.value_type)
    simple = _arrow_atomic(t)
    if simple is not None:
        return AtomicType(simple)
    if pa.types.is_decimal(t):
        return DecimalType(t.precision, t.scale)
    if pa.types.is_map(t):
        return MapType(
            sql_type_from_arrow(t.key_type),
            sql_type_from_arrow(t.item_type),
            t.item_field.nullable,
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return ArrayType(sql_type_from_arrow(t.value_type), t.value_field.nullable)
    if pa.types.is_struct(t):
        return StructType(
            tuple(
                StructField(
                    t.field(i).name, sql_type_from_arrow(t.field(i).type), t.field(i).nullable
                )
                for i in range(t.num_fields)
            )
        )
    raise SinkSchemaError(f"Arrow type {t} has no Spark type this sink can write in a format")


def _arrow_atomic(t: Any) -> str | None:
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        # Unsigned types never come from Spark; a plain producer's column gets the next
        # wider signed type, so no value is out of range.
        names = {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}
        width: int = t.bit_width * (2 if pa.types.is_unsigned_integer(t) else 1)
        return names.get(width)
    if pa.types.is_float32(t) or pa.types.is_float16(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_null(t):
        return "void"
    if pa.types.is_duration(t):
        return "interval day to second"
    return None
