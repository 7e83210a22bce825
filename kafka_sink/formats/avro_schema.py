"""Avro schemas for Spark columns: derived from a Spark type as Spark does, or checked against one.

Role: the driver-side half of the Avro format, free of pyspark, numpy and fastavro (so the
driver's planning loads none of them). Three things:

- ``derive_avro_schema(sql_type, record_name, namespace)``: the schema Spark's own ``to_avro``
  writes for a Spark type (``SchemaConverters.toAvroType``): boolean -> boolean; tinyint,
  smallint, int -> int; bigint -> long; float -> float; double -> double; string -> string;
  binary -> bytes; date -> int (``date``); timestamp -> long (``timestamp-micros``);
  timestamp_ntz -> long (``local-timestamp-micros``); decimal(p, s) -> fixed of the fewest bytes
  that hold p digits, with logicalType decimal, named ``fixed`` in the namespace
  ``<namespace>.<field name>``; void -> null; array -> array; map with string keys -> map;
  struct -> record named after its field (the top level: ``record_name``, default
  ``topLevelRecord``) in the namespace of its parents' names; the year-month and day-time
  intervals -> int and long tagged ``spark.sql.catalyst.type``. A nullable field, array element
  or map value is the union ``[type, "null"]`` (the type first, as Spark orders it). The top
  level is not a union: a null value is a null Kafka value (a tombstone), never encoded, as
  Confluent's serializers treat None (Spark's ``to_avro`` on a nullable column writes the
  union instead).
- ``parse_avro_schema(text, path)``: an explicit schema (Avro JSON) as a tree of ``Avro*`` nodes
  with named types resolved (namespaces inherited as the Avro specification says). A malformed
  schema (a record without ``fields``, an array without ``items``, a field without ``type``, a
  ``size`` or ``symbols`` of the wrong type, a union directly in a union) or one nested past the
  bounds of ``nesting.py`` is a ``SinkSchemaError`` naming the field path in the schema; a
  named type referring to itself (a recursive record) stays legal: references are not walked.
- ``bind(sql_type, schema, path)``: checks that a Spark type is writable with an Avro schema
  and returns the ``Binding`` tree the columnar encoder follows (which union branch each
  value takes, which Spark field feeds each Avro field). A mismatch is a
  :class:`~kafka_sink.sink_errors.SinkSchemaError` naming the field path, as in
  ``value.address.zip: Spark type string cannot be written as Avro int``.

Writable pairs (Spark -> Avro): boolean -> boolean; tinyint/smallint/int -> int or long;
bigint -> long; float -> float or double; double -> double; string -> string, or enum (each
value must be a symbol; checked per row); binary -> bytes, or fixed (each value must have its
size; checked per row); date -> int (``date`` or none); timestamp -> long (``timestamp-micros``,
``timestamp-millis`` or none, read as micros); timestamp_ntz -> long (``local-timestamp-micros``
/ ``-millis`` or none); decimal(p, s) -> bytes or fixed with logicalType decimal of scale s and
precision >= p; intervals -> int (year-month) and long (day-time); array -> array; map with
string keys -> map; struct -> record, fields matched by name. An Avro record field with no Spark
field is written as null when its type allows null, else refused; a Spark field with no Avro
field is refused. A union takes the first branch the Spark type is writable as, and null in its
null branch; a Spark-nullable value bound to an Avro type without null is accepted here and
refused per row, only if a null actually comes (Spark types are nullable by default).

Invariants: a derived schema always binds to its own Spark type; Binding trees are immutable
and picklable (the driver builds them once, tasks follow them); every error names the path; no
walk recurses deeper than ``nesting.MAX_NESTING`` levels (deriving and binding follow the Spark
type, checked first; parsing counts its own levels); binding tries each (Spark type, Avro type,
path) once, so unions of records sharing named types cost time linear in the schema, not
exponential in its depth.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kafka_sink.formats.nesting import MAX_NESTING, check_document_depth, too_deep
from kafka_sink.formats.sql_types import (
    ArrayType,
    AtomicType,
    DecimalType,
    MapType,
    SqlType,
    StructType,
    check_nesting,
)
from kafka_sink.sink_errors import SinkSchemaError

__all__ = [
    "AvroArray",
    "AvroEnum",
    "AvroField",
    "AvroFixed",
    "AvroMap",
    "AvroPrimitive",
    "AvroRecord",
    "AvroSchema",
    "AvroType",
    "AvroUnion",
    "Binding",
    "bind",
    "derive_avro_schema",
    "min_bytes_for_precision",
    "parse_avro_schema",
]

DEFAULT_RECORD_NAME = "topLevelRecord"
CATALYST_TYPE_PROP = "spark.sql.catalyst.type"
PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(eq=False)
class AvroPrimitive:
    type: str
    logical: str | None = None
    precision: int = 0
    scale: int = 0

    def describe(self) -> str:
        if self.logical == "decimal":
            return f"{self.type} decimal({self.precision},{self.scale})"
        return f"{self.type} ({self.logical})" if self.logical else self.type


@dataclass(eq=False)
class AvroFixed:
    name: str
    size: int
    logical: str | None = None
    precision: int = 0
    scale: int = 0

    def describe(self) -> str:
        if self.logical == "decimal":
            return f"fixed({self.size}) decimal({self.precision},{self.scale})"
        return f"fixed {self.name} of size {self.size}"


@dataclass(eq=False)
class AvroEnum:
    name: str
    symbols: tuple[str, ...]

    def describe(self) -> str:
        return f"enum {self.name}"


@dataclass(eq=False)
class AvroArray:
    items: AvroType

    def describe(self) -> str:
        return "array"


@dataclass(eq=False)
class AvroMap:
    values: AvroType

    def describe(self) -> str:
        return "map"


@dataclass(eq=False)
class AvroField:
    name: str
    type: AvroType


@dataclass(eq=False)
class AvroRecord:
    name: str
    # Filled after the record is registered, so a field may refer to the record itself.
    fields: list[AvroField] = field(default_factory=list)

    def describe(self) -> str:
        return f"record {self.name}"


@dataclass(eq=False)
class AvroUnion:
    branches: tuple[AvroType, ...]

    def describe(self) -> str:
        return "union [" + ", ".join(b.describe() for b in self.branches) + "]"

    def null_branch(self) -> int | None:
        for i, b in enumerate(self.branches):
            if isinstance(b, AvroPrimitive) and b.type == "null":
                return i
        return None


AvroType = AvroPrimitive | AvroFixed | AvroEnum | AvroArray | AvroMap | AvroRecord | AvroUnion


@dataclass(frozen=True, eq=False)
class AvroSchema:
    """An Avro schema: its JSON form (what a registry stores) and its parsed tree."""

    json: Any
    root: AvroType

    @property
    def text(self) -> str:
        """The schema as compact JSON text."""
        return json.dumps(self.json, separators=(",", ":"))

    def __reduce__(self) -> tuple[Any, ...]:
        # The tree may be cyclic (a recursive record); the JSON form is what travels.
        return (parse_avro_schema, (self.json,))


# ---- deriving a schema from a Spark type -------------------------------------------------


def min_bytes_for_precision(precision: int) -> int:
    """The fewest bytes whose two's complement holds every ``precision``-digit integer."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def derive_avro_schema(
    sql_type: SqlType,
    record_name: str = DEFAULT_RECORD_NAME,
    namespace: str = "",
    *,
    nullable: bool = False,
    path: str = "value",
) -> AvroSchema:
    """The Avro schema Spark's ``to_avro`` derives for ``sql_type`` (see the module docstring)."""
    _check_name(record_name, path, "record name")
    for part in namespace.split(".") if namespace else ():
        _check_name(part, path, "namespace")
    check_nesting(sql_type, path)
    schema_json = _derive(sql_type, nullable, record_name, namespace, path)
    return parse_avro_schema(schema_json, path)


def _check_name(name: str, path: str, what: str) -> None:
    if not _NAME.fullmatch(name):
        raise SinkSchemaError(
            f"{path}: {what} {name!r} is not a valid Avro name ([A-Za-z_][A-Za-z0-9_]*). "
            "Fix: rename or alias it, or give an explicit Avro schema"
        )


def _derive(t: SqlType, nullable: bool, record_name: str, namespace: str, path: str) -> Any:
    schema: Any
    if isinstance(t, AtomicType):
        schema = _derive_atomic(t, path)
        if t.name == "void":
            return schema
    elif isinstance(t, DecimalType):
        schema = {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{record_name}" if namespace else record_name,
            "size": min_bytes_for_precision(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    elif isinstance(t, ArrayType):
        items = _derive(t.element, t.contains_null, record_name, namespace, f"{path}[]")
        schema = {"type": "array", "items": items}
    elif isinstance(t, MapType):
        if t.key != AtomicType("string"):
            raise SinkSchemaError(
                f"{path}: Spark type {t.simple_string()} cannot be written as Avro map: Avro "
                "map keys are strings. Fix: cast the keys to string, or write the map as "
                "map_entries(...) (an array of key-value structs)"
            )
        values = _derive(t.value, t.value_contains_null, record_name, namespace, f"{path}{{}}")
        schema = {"type": "map", "values": values}
    else:
        child_namespace = f"{namespace}.{record_name}" if namespace else record_name
        fields = []
        for f in t.fields:
            _check_name(f.name, f"{path}.{f.name}", "field name")
            fields.append(
                {
                    "name": f.name,
                    "type": _derive(
                        f.type, f.nullable, f.name, child_namespace, f"{path}.{f.name}"
                    ),
                }
            )
        schema = {"type": "record", "name": record_name, "fields": fields}
        if namespace:
            schema["namespace"] = namespace
    return [schema, "null"] if nullable else schema


_ATOMIC_AVRO: dict[str, Any] = {
    "boolean": "boolean",
    "tinyint": "int",
    "smallint": "int",
    "int": "int",
    "bigint": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "bytes",
    "void": "null",
    "date": {"type": "int", "logicalType": "date"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "timestamp_ntz": {"type": "long", "logicalType": "local-timestamp-micros"},
    "interval year to month": {"type": "int", CATALYST_TYPE_PROP: "interval year to month"},
    "interval day to second": {"type": "long", CATALYST_TYPE_PROP: "interval day to second"},
}


def _derive_atomic(t: AtomicType, path: str) -> Any:
    try:
        return _ATOMIC_AVRO[t.name]
    except KeyError:
        raise SinkSchemaError(f"{path}: Spark type {t.name} has no Avro mapping") from None


# ---- parsing an explicit schema ----------------------------------------------------------


def parse_avro_schema(schema: Any, path: str = "value") -> AvroSchema:
    """Parse Avro JSON (text, or the decoded object); SinkSchemaError if it is not valid.

    ``path`` names the column: errors name the field path in the schema (``value.address.zip``;
    ``[]`` an array's items, ``{}`` a map's values).
    """
    check_document_depth(schema, path, "the Avro schema")
    if isinstance(schema, str) and schema.strip()[:1] in '{["':
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise SinkSchemaError(f"{path}: the Avro schema is not valid JSON: {exc}") from None
    return AvroSchema(schema, _Parser().parse(schema, "", path, 0, 0))


def _excerpt(s: Any) -> str:
    try:
        text = json.dumps(s)
    except (TypeError, ValueError):
        text = repr(s)
    return text if len(text) <= 200 else text[:197] + "..."


def _invalid(path: str, what: str) -> SinkSchemaError:
    return SinkSchemaError(
        f"{path}: {what}. Fix: correct the Avro schema (see the Avro specification's "
        "schema declarations)"
    )


def _int(s: dict[str, Any], key: str, path: str, default: int | None = None) -> int:
    value = s.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _invalid(path, f"the {s['type']} schema's {key!r} is not a non-negative integer: "
                       f"{_excerpt(value)}")  # fmt: skip
    return value


class _Parser:
    """Builds the tree; ``depth`` counts the levels above a schema (record fields, array items,
    map values) and ``hops`` the unions and ``{"type": {...}}`` wrappers since the last level:
    both bounded by MAX_NESTING before recursing."""

    def __init__(self) -> None:
        self.named: dict[str, AvroType] = {}

    def parse(self, s: Any, namespace: str, path: str, depth: int, hops: int) -> AvroType:
        if isinstance(s, str):
            return self._reference(s, namespace, path)
        if isinstance(s, list):
            if hops >= MAX_NESTING:
                raise too_deep(path, "the Avro schema")
            if any(isinstance(b, list) for b in s):
                raise _invalid(path, "a union may not contain a union directly")
            return AvroUnion(tuple(self.parse(b, namespace, path, depth, hops + 1) for b in s))
        if not isinstance(s, dict) or "type" not in s:
            raise _invalid(path, f"not an Avro schema: {_excerpt(s)}")
        kind = s["type"]
        if isinstance(kind, dict | list):
            if hops >= MAX_NESTING:
                raise too_deep(path, "the Avro schema")
            return self.parse(kind, namespace, path, depth, hops + 1)
        if not isinstance(kind, str):
            raise _invalid(
                path, f"an Avro schema's type is a name or a schema, not {_excerpt(kind)}"
            )
        logical = s.get("logicalType")
        # Unknown or malformed logical types are ignored, as the specification says.
        logical = logical if isinstance(logical, str) else None
        if kind in PRIMITIVES:
            if kind == "bytes" and logical == "decimal":
                precision, scale = self._decimal(s, path)
                return AvroPrimitive(kind, logical, precision, scale)
            return AvroPrimitive(kind, logical)
        if kind in ("array", "map"):
            key = "items" if kind == "array" else "values"
            if key not in s:
                raise _invalid(path, f"the {kind} schema has no {key!r}")
            if depth >= MAX_NESTING:
                raise too_deep(path, "the Avro schema")
            child = f"{path}[]" if kind == "array" else f"{path}{{}}"
            inner = self.parse(s[key], namespace, child, depth + 1, 0)
            return AvroArray(inner) if kind == "array" else AvroMap(inner)
        if kind not in ("record", "error", "enum", "fixed"):
            return self._reference(kind, namespace, path)
        full, own_namespace = self._full_name(s, namespace, path)
        node: AvroType
        if kind == "fixed":
            size = _int(s, "size", path)
            if logical == "decimal":
                node = AvroFixed(full, size, logical, *self._decimal(s, path))
            else:
                node = AvroFixed(full, size, logical)
        elif kind == "enum":
            symbols = s.get("symbols")
            if not (isinstance(symbols, list) and all(isinstance(x, str) for x in symbols)):
                raise _invalid(path, f"enum {full}'s symbols are not a list of strings")
            node = AvroEnum(full, tuple(symbols))
        else:
            node = AvroRecord(full)
        self._register(full, node, path)
        if isinstance(node, AvroRecord):
            node.fields = self._fields(s, full, own_namespace, path, depth)
        return node

    def _fields(
        self, s: dict[str, Any], full: str, namespace: str, path: str, depth: int
    ) -> list[AvroField]:
        fields = s.get("fields")
        if not isinstance(fields, list):
            raise _invalid(path, f"record {full} has no list of 'fields'")
        out = []
        for f in fields:
            if not (isinstance(f, dict) and isinstance(f.get("name"), str)):
                raise _invalid(path, f"a field of record {full} is not an object with a string "
                               f"'name': {_excerpt(f)}")  # fmt: skip
            child = f"{path}.{f['name']}"
            if "type" not in f:
                raise _invalid(child, "the field has no 'type'")
            if depth >= MAX_NESTING:
                raise too_deep(child, "the Avro schema")
            out.append(AvroField(f["name"], self.parse(f["type"], namespace, child, depth + 1, 0)))
        return out

    def _decimal(self, s: dict[str, Any], path: str) -> tuple[int, int]:
        precision = _int(s, "precision", path)
        scale = _int(s, "scale", path, 0)
        if precision < 1 or scale > precision:
            raise _invalid(path, f"decimal precision {precision} and scale {scale} are not "
                           "1 <= precision and 0 <= scale <= precision")  # fmt: skip
        return precision, scale

    def _full_name(self, s: dict[str, Any], namespace: str, path: str) -> tuple[str, str]:
        name = s.get("name")
        if not isinstance(name, str) or not name:
            raise _invalid(path, f"the {s['type']} schema has no string 'name'")
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        own = s.get("namespace", namespace) or ""
        if not isinstance(own, str):
            raise _invalid(path, f"the namespace of {name} is not a string: {_excerpt(own)}")
        return (f"{own}.{name}" if own else name), own

    def _register(self, full: str, node: AvroType, path: str) -> None:
        if full in self.named:
            raise _invalid(path, f"the Avro schema defines the name {full!r} twice")
        self.named[full] = node

    def _reference(self, name: str, namespace: str, path: str) -> AvroType:
        if name in PRIMITIVES:
            return AvroPrimitive(name)
        for candidate in (f"{namespace}.{name}" if namespace and "." not in name else None, name):
            if candidate is not None and candidate in self.named:
                return self.named[candidate]
        raise _invalid(path, f"the Avro schema refers to {name!r}, which it does not define")


# ---- binding a Spark type to a schema -----------------------------------------------------


@dataclass(frozen=True, eq=False)
class Binding:
    """How one Spark value is written: the Avro type it takes, and its children's bindings.

    ``avro`` is never a union: for a union, ``branch`` is the index of the branch the value
    takes and ``null_branch`` the index of its null branch (None when it has none; a null value
    is then an error). ``children``: one binding per Avro record field (``sources`` gives the
    Spark field index feeding it, None for a field written as null), or the items' binding of an
    array, or the values' binding of a map.
    """

    path: str
    sql: SqlType
    avro: AvroType
    branch: int | None = None
    null_branch: int | None = None
    children: tuple[Binding, ...] = ()
    sources: tuple[int | None, ...] = ()


def bind(sql_type: SqlType, schema: AvroSchema | AvroType, path: str = "value") -> Binding:
    """Check that ``sql_type`` is writable as ``schema``; the encoder's plan for it."""
    root = schema.root if isinstance(schema, AvroSchema) else schema
    check_nesting(sql_type, path)  # the walk follows the Spark type, so this bounds it
    return _bind(sql_type, root, path, {})


# What a (Spark type, Avro type, path) bound to, or why not, within one bind(): a union tries
# each branch, and branches sharing named types (records referring to the same records) would
# otherwise be tried again on every path to them, exponentially in the depth. Keyed by identity
# (hashing a type walks it); each entry holds its two objects, so no id is reused meanwhile.
_Memo = dict[tuple[int, int, str], tuple[SqlType, AvroType, "Binding | SinkSchemaError"]]


def _mismatch(path: str, t: SqlType, avro: AvroType, why: str = "") -> SinkSchemaError:
    return SinkSchemaError(
        f"{path}: Spark type {t.simple_string()} cannot be written as Avro {avro.describe()}"
        + (f" ({why})" if why else "")
        + ". Fix: cast the column to a matching type, or change the Avro schema"
    )


def _bind(t: SqlType, avro: AvroType, path: str, memo: _Memo) -> Binding:
    if not isinstance(avro, AvroUnion):
        return _bind_single(t, avro, path, memo)
    null_branch = avro.null_branch()
    if t == AtomicType("void"):
        if null_branch is None:
            raise _mismatch(path, t, avro)
        return Binding(path, t, avro.branches[null_branch], null_branch, null_branch)
    first_error: SinkSchemaError | None = None
    for i, branch in enumerate(avro.branches):
        if i == null_branch:
            continue
        try:
            single = _bind_single(t, branch, path, memo)
        except SinkSchemaError as exc:
            first_error = first_error or exc
            continue
        return Binding(path, t, single.avro, i, null_branch, single.children, single.sources)
    if first_error is not None and sum(i != null_branch for i in range(len(avro.branches))) == 1:
        raise first_error  # one candidate: its own reason is the clearest
    raise _mismatch(path, t, avro, "no branch of the union matches")


_ATOMIC_WRITABLE: dict[str, tuple[tuple[str, tuple[str | None, ...]], ...]] = {
    "boolean": (("boolean", (None,)),),
    "tinyint": (("int", (None,)), ("long", (None,))),
    "smallint": (("int", (None,)), ("long", (None,))),
    "int": (("int", (None,)), ("long", (None,))),
    "bigint": (("long", (None,)),),
    "float": (("float", (None,)), ("double", (None,))),
    "double": (("double", (None,)),),
    "string": (("string", (None, "uuid")),),
    "binary": (("bytes", (None,)),),
    "date": (("int", (None, "date")),),
    "timestamp": (("long", (None, "timestamp-micros", "timestamp-millis")),),
    "timestamp_ntz": (("long", (None, "local-timestamp-micros", "local-timestamp-millis")),),
    "void": (("null", (None,)),),
    "interval year to month": (("int", (None,)),),
    "interval day to second": (("long", (None,)),),
}


def _bind_single(t: SqlType, avro: AvroType, path: str, memo: _Memo) -> Binding:
    key = (id(t), id(avro), path)
    if key in memo:
        found = memo[key][2]
    else:
        try:
            found = _bind_single_once(t, avro, path, memo)
        except SinkSchemaError as exc:
            found = exc
        memo[key] = (t, avro, found)
    if isinstance(found, SinkSchemaError):
        raise found
    return found


def _bind_single_once(t: SqlType, avro: AvroType, path: str, memo: _Memo) -> Binding:
    if isinstance(avro, AvroUnion):  # a union directly inside a union is not valid Avro
        raise _mismatch(path, t, avro, "a union may not contain a union")
    if isinstance(t, AtomicType):
        if isinstance(avro, AvroPrimitive):
            logical = avro.logical if avro.logical in _KNOWN_LOGICAL else None
            if (avro.type, logical) in {
                (kind, lt) for kind, lts in _ATOMIC_WRITABLE.get(t.name, ()) for lt in lts
            }:
                return Binding(path, t, avro)
        elif (isinstance(avro, AvroEnum) and t.name == "string") or (
            isinstance(avro, AvroFixed) and t.name == "binary" and avro.logical != "decimal"
        ):
            return Binding(path, t, avro)
        raise _mismatch(path, t, avro)
    if isinstance(t, DecimalType):
        return _bind_decimal(t, avro, path)
    if isinstance(t, ArrayType):
        if not isinstance(avro, AvroArray):
            raise _mismatch(path, t, avro)
        items = _bind(t.element, avro.items, f"{path}[]", memo)
        return Binding(path, t, avro, children=(items,))
    if isinstance(t, MapType):
        if not isinstance(avro, AvroMap):
            raise _mismatch(path, t, avro)
        if t.key != AtomicType("string"):
            raise _mismatch(path, t, avro, "Avro map keys are strings")
        values = _bind(t.value, avro.values, f"{path}{{}}", memo)
        return Binding(path, t, avro, children=(values,))
    if not isinstance(avro, AvroRecord):
        raise _mismatch(path, t, avro)
    return _bind_record(t, avro, path, memo)


_KNOWN_LOGICAL = {
    "decimal",
    "uuid",
    "date",
    "timestamp-micros",
    "timestamp-millis",
    "local-timestamp-micros",
    "local-timestamp-millis",
    "time-millis",
    "time-micros",
}


def _bind_decimal(t: DecimalType, avro: AvroType, path: str) -> Binding:
    if not (isinstance(avro, AvroPrimitive | AvroFixed) and avro.logical == "decimal"):
        raise _mismatch(path, t, avro)
    if isinstance(avro, AvroPrimitive) and avro.type != "bytes":
        raise _mismatch(path, t, avro)
    if avro.scale != t.scale:
        raise _mismatch(path, t, avro, f"scale {t.scale} is not the schema's {avro.scale}")
    if avro.precision < t.precision:
        raise _mismatch(
            path, t, avro, f"precision {t.precision} exceeds the schema's {avro.precision}"
        )
    if isinstance(avro, AvroFixed) and avro.size < min_bytes_for_precision(t.precision):
        raise _mismatch(path, t, avro, f"{t.precision} digits need more than {avro.size} bytes")
    return Binding(path, t, avro)


def _bind_record(t: StructType, avro: AvroRecord, path: str, memo: _Memo) -> Binding:
    by_name = {f.name: i for i, f in enumerate(t.fields)}
    known = {f.name for f in avro.fields}
    for f in t.fields:
        if f.name not in known:
            raise SinkSchemaError(
                f"{path}.{f.name}: the Spark field has no field in Avro {avro.describe()}. "
                "Fix: drop the field from the column, or add it to the Avro schema"
            )
    children = []
    sources: list[int | None] = []
    for af in avro.fields:
        child_path = f"{path}.{af.name}"
        index = by_name.get(af.name)
        if index is None:
            children.append(_bind_missing(af, child_path, memo))
            sources.append(None)
            continue
        sf = t.fields[index]
        children.append(_bind(sf.type, af.type, child_path, memo))
        sources.append(index)
    return Binding(path, t, avro, children=tuple(children), sources=tuple(sources))


def _bind_missing(af: AvroField, path: str, memo: _Memo) -> Binding:
    void = AtomicType("void")
    try:
        return _bind(void, af.type, path, memo)
    except SinkSchemaError:
        raise SinkSchemaError(
            f"{path}: Avro field of type {af.type.describe()} has no Spark field and cannot be "
            "null. Fix: add the field to the column (for example lit(...).alias("
            f"{af.name!r}) inside the struct), or make it a union with null in the schema"
        ) from None
