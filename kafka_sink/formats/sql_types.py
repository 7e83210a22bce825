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
know, a malformed JSON form, a decimal outside Spark's range (precision 1 to 38, scale at most
the precision), or a type nested more than ``nesting.MAX_NESTING`` (64) levels
raises :class:`~kafka_sink.sink_errors.SinkSchemaError` naming the field path
(``value.address.street``); ``check_nesting`` refuses a hand-built type nested too deep, without
recursing, and every format calls it before it walks a type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kafka_sink.formats.nesting import MAX_NESTING, too_deep
from kafka_sink.sink_errors import SinkSchemaError

__all__ = [
    "ArrayType",
    "AtomicType",
    "DecimalType",
    "MapType",
    "SqlType",
    "StructField",
    "StructType",
    "check_nesting",
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
_MAX_DECIMAL_PRECISION = 38
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)")
_STRING_LIKE = re.compile(r"(char|varchar)\(\d+\)|string collate \S+")
_DAY_TIME = re.compile(r"interval (day|hour|minute|second)( to (day|hour|minute|second))?")


def sql_type_from_json(value: Any, path: str = "value") -> SqlType:
    """A Spark type from its ``jsonValue()`` form (a name, or a dict for complex types).

    ``path`` names the column in errors; a malformed form or one nested more than
    :data:`~kafka_sink.formats.nesting.MAX_NESTING` levels is refused naming the field.
    """
    return _from_json(value, path, 0)


def _from_json(value: Any, path: str, depth: int) -> SqlType:
    if isinstance(value, str):
        name = value.strip().lower()
        if name in _JSON_ATOMIC:
            return AtomicType(_JSON_ATOMIC[name])
        if name == "decimal":
            return DecimalType(10, 0)
        match = _DECIMAL.fullmatch(name)
        if match:
            return _decimal(match[1], match[2], path)
        if _STRING_LIKE.fullmatch(name):
            return AtomicType("string")
        if _DAY_TIME.fullmatch(name):
            return AtomicType("interval day to second")
        raise SinkSchemaError(f"{path}: Spark type {value!r} has no mapping to a registry format")
    if isinstance(value, dict) and value.get("type") in ("struct", "array", "map", "udt"):
        kind = value["type"]
        if kind == "udt":
            if "sqlType" in value:
                return _from_json(value["sqlType"], path, depth)
        elif depth >= MAX_NESTING:
            raise too_deep(path, "the Spark type")
        elif kind == "struct":
            return _struct_from_json(value, path, depth)
        elif kind == "array":
            return ArrayType(
                _from_json(_key(value, "elementType", path), f"{path}[]", depth + 1),
                bool(value.get("containsNull", True)),
            )
        else:
            return MapType(
                _from_json(_key(value, "keyType", path), f"{path}{{}}", depth + 1),
                _from_json(_key(value, "valueType", path), f"{path}{{}}", depth + 1),
                bool(value.get("valueContainsNull", True)),
            )
    raise SinkSchemaError(f"{path}: not a Spark type in its JSON form: {_excerpt(value)}")


def _decimal(precision: str, scale: str, path: str) -> DecimalType:
    # Spark's decimals hold at most 38 digits; the digit strings are checked before int()
    # (which refuses thousands of digits, and a huge precision would size an Avro fixed).
    if len(precision) > 2 or len(scale.lstrip("-")) > 2:
        p, s = 39, 0
    else:
        p, s = int(precision), int(scale)
    if not (1 <= p <= _MAX_DECIMAL_PRECISION and -_MAX_DECIMAL_PRECISION <= s <= p):
        raise SinkSchemaError(
            f"{path}: Spark type decimal({precision[:10]},{scale[:10]}) is not one Spark has "
            f"(precision 1 to {_MAX_DECIMAL_PRECISION}, scale at most the precision)"
        )
    return DecimalType(p, s)


def _struct_from_json(value: dict[str, Any], path: str, depth: int) -> StructType:
    fields = value.get("fields", [])
    if not isinstance(fields, list):
        raise SinkSchemaError(f"{path}: a Spark struct's fields are a list, not {_excerpt(fields)}")
    out = []
    for f in fields:
        if not (isinstance(f, dict) and isinstance(f.get("name"), str)):
            raise SinkSchemaError(
                f"{path}: a Spark struct field is an object with a string name, not {_excerpt(f)}"
            )
        child = f"{path}.{f['name']}"
        out.append(
            StructField(
                f["name"],
                _from_json(_key(f, "type", child), child, depth + 1),
                bool(f.get("nullable", True)),
            )
        )
    return StructType(tuple(out))


def _key(value: dict[str, Any], key: str, path: str) -> Any:
    if key not in value:
        raise SinkSchemaError(f"{path}: the Spark type's JSON form has no {key!r}")
    return value[key]


def _excerpt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def check_nesting(t: SqlType, path: str = "value") -> None:
    """Refuse a type nested more than :data:`~kafka_sink.formats.nesting.MAX_NESTING`
    levels (each struct field, array element and map value is one), naming the deepest path
    within the bound; checked without recursing, before any walk that recurses."""
    stack: list[tuple[SqlType, str, int]] = [(t, path, 0)]
    while stack:
        node, where, depth = stack.pop()
        if isinstance(node, AtomicType | DecimalType):
            continue
        if depth >= MAX_NESTING:
            raise too_deep(where, "the Spark type")
        if isinstance(node, ArrayType):
            stack.append((node.element, f"{where}[]", depth + 1))
        elif isinstance(node, MapType):
            stack.append((node.key, f"{where}{{}}", depth + 1))
            stack.append((node.value, f"{where}{{}}", depth + 1))
        else:
            stack.extend((f.type, f"{where}.{f.name}", depth + 1) for f in node.fields)


def sql_type_from_arrow(arrow_type: Any, path: str = "value") -> SqlType:
    """The Spark type behind an Arrow type as Spark hands it to a Python data source
    (nested at most :data:`~kafka_sink.formats.nesting.MAX_NESTING` levels)."""
    # Imported here: the driver reads Spark's JSON form only, and pyarrow loads numpy.
    import pyarrow as pa

    return _from_arrow(pa, arrow_type, path, 0)


def _from_arrow(pa: Any, t: Any, path: str, depth: int) -> SqlType:
    while pa.types.is_dictionary(t):
        t = t.value_type
    simple = _arrow_atomic(t)
    if simple is not None:
        return AtomicType(simple)
    if pa.types.is_decimal(t):
        return DecimalType(t.precision, t.scale)
    nested = (
        pa.types.is_map(t)
        or pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_struct(t)
    )
    if nested and depth >= MAX_NESTING:
        raise too_deep(path, "the Spark type")
    if pa.types.is_map(t):
        return MapType(
            _from_arrow(pa, t.key_type, f"{path}{{}}", depth + 1),
            _from_arrow(pa, t.item_type, f"{path}{{}}", depth + 1),
            t.item_field.nullable,
        )
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return ArrayType(
            _from_arrow(pa, t.value_type, f"{path}[]", depth + 1), t.value_field.nullable
        )
    if pa.types.is_struct(t):
        return StructType(
            tuple(
                StructField(
                    t.field(i).name,
                    _from_arrow(pa, t.field(i).type, f"{path}.{t.field(i).name}", depth + 1),
                    t.field(i).nullable,
                )
                for i in range(t.num_fields)
            )
        )
    raise SinkSchemaError(
        f"{path}: Arrow type {t} has no Spark type this sink can write in a format"
    )


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
