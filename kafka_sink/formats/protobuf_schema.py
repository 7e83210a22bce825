"""Protobuf schemas for Spark columns: a proto3 message derived from a Spark struct type.

Role: the driver-side half of the Protobuf format, free of pyspark, numpy and the ``protobuf``
library (the driver's planning loads none of them). Two things:

- ``derive_protobuf_schema(sql_type, record_name, namespace)``: the proto3 file for a Spark
  struct: one top-level message named ``record_name`` in the package ``namespace``, fields
  numbered 1, 2, ... in the struct's order. The mapping (also in docs/formats.md):
  boolean -> bool; tinyint, smallint, int -> int32; bigint -> int64; float -> float;
  double -> double; string -> string; binary -> bytes; decimal(p, s) -> string (the value's
  text as ``str(decimal.Decimal)`` and Java's ``BigDecimal.toString`` write it, so a reader's
  ``Decimal(text)`` is the exact value); date -> int32 (days since 1970-01-01); timestamp and
  timestamp_ntz -> int64 (microseconds since the epoch, as Spark keeps them); day-time
  interval -> int64 (microseconds); struct -> a message nested in its parent, named after the
  field with its first letter upper-cased (``_`` appended while that name is taken in the
  parent); array -> ``repeated``; map with string, integral or
  boolean keys -> ``map<k, v>``. A nullable scalar field is ``optional`` (explicit presence: a
  null is absent, a 0 or "" is written); a non-nullable one has proto3's implicit presence (its
  default is not written). A null struct field is absent; a null array or map is written as an
  empty one (Protobuf has no null list). Refused, naming the field path: a top level that is
  not a struct, arrays of arrays or maps, maps of arrays or maps, year-month intervals, void,
  field names that are not Protobuf identifiers, and structs nested so deep that their messages
  would be declared more than ``MAX_NESTED_MESSAGES`` (31, protoc's limit) levels deep. Array
  elements and map values have no presence in Protobuf: a null element is refused per row by
  the encoder (Spark types say ``containsNull`` by default, so the type alone is not refused).
- ``bind_protobuf(sql_type, schema, path)``: checks that a Spark type is writable with the
  message (fields matched by name, each Spark type as the mapping above writes it) and returns
  the ``ProtoBinding`` tree the columnar encoder follows.

Invariants: a derived schema always binds to its own Spark type; the trees are immutable and
picklable (built on the driver, followed by tasks); ``ProtoSchema.text`` is the ``.proto``
text registered with schemaType ``PROTOBUF``, rendered from the tree (so the registry, the
encoder and a reader's generated class agree); every error names the field path; the Spark
type's nesting is checked (``sql_types.check_nesting``) before either walk recurses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    "ProtoBinding",
    "ProtoField",
    "ProtoMessage",
    "ProtoSchema",
    "bind_protobuf",
    "derive_protobuf_schema",
]

DEFAULT_MESSAGE_NAME = "topLevelRecord"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PACKAGE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
# Spark simpleString -> (Protobuf scalar type, how the encoder reads the Arrow column).
_SCALARS = {
    "boolean": "bool",
    "tinyint": "int32",
    "smallint": "int32",
    "int": "int32",
    "bigint": "int64",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "bytes",
    "date": "int32",
    "timestamp": "int64",
    "timestamp_ntz": "int64",
    "interval day to second": "int64",
}
_MAP_KEYS = ("string", "int32", "int64", "bool")
#: protoc's parser refuses message declarations nested deeper than this (its recursion limit):
#: the bound of a derived file, whose nested structs are declared inside their parents.
MAX_NESTED_MESSAGES = 31
#: The scalar types written as varints (the others: fixed32, fixed64, length-delimited).
VARINT_TYPES = ("bool", "int32", "int64")


@dataclass(frozen=True)
class ProtoField:
    """A message field. ``type`` is a scalar type or ``message``; maps have ``key_type``."""

    name: str
    number: int
    type: str
    #: ``implicit`` (proto3 default presence), ``optional``, ``repeated`` or ``map``.
    label: str
    message: ProtoMessage | None = None
    key_type: str | None = None

    def declaration(self) -> str:
        value = self.message.name if self.message is not None else self.type
        if self.label == "map":
            return f"map<{self.key_type}, {value}> {self.name} = {self.number};"
        prefix = "" if self.label == "implicit" else f"{self.label} "
        return f"{prefix}{value} {self.name} = {self.number};"


@dataclass(frozen=True)
class ProtoMessage:
    name: str
    fields: tuple[ProtoField, ...]

    def render(self, indent: str = "") -> list[str]:
        lines = [f"{indent}message {self.name} {{"]
        lines += [f"{indent}  {f.declaration()}" for f in self.fields]
        for f in self.fields:
            if f.message is not None:
                lines += f.message.render(indent + "  ")
        return [*lines, f"{indent}}}"]


@dataclass(frozen=True)
class ProtoSchema:
    """A proto3 file of one top-level message (message index ``[0]`` in the wire format)."""

    root: ProtoMessage
    package: str = ""
    #: The ``.proto`` text as given (an explicit or registered schema); empty: derived.
    given_text: str = ""

    @property
    def text(self) -> str:
        if self.given_text:
            return self.given_text
        head = ['syntax = "proto3";']
        if self.package:
            head.append(f"package {self.package};")
        return "\n".join([*head, "", *self.root.render()]) + "\n"

    @property
    def full_name(self) -> str:
        """The message's fully qualified name (the ``record`` subject strategies' name)."""
        return f"{self.package}.{self.root.name}" if self.package else self.root.name

    #: The message-index list of the root message (the file's first message).
    message_indexes: tuple[int, ...] = (0,)


def derive_protobuf_schema(
    sql_type: SqlType,
    record_name: str = DEFAULT_MESSAGE_NAME,
    namespace: str = "",
    *,
    path: str = "value",
) -> ProtoSchema:
    """The proto3 schema of a Spark struct type (see the module's mapping)."""
    if not isinstance(sql_type, StructType):
        raise SinkSchemaError(
            f"{path}: Protobuf writes a message, and Spark type {sql_type.simple_string()} is "
            f"not a struct. Fix: wrap the column, e.g. struct(col('{path}').alias('{path}'))"
        )
    _check_name(record_name, path, "message name (recordName)")
    if namespace and not _PACKAGE.fullmatch(namespace):
        raise SinkSchemaError(
            f"{path}: recordNamespace {namespace!r} is not a Protobuf package name "
            "(dot-separated identifiers). Fix: change recordNamespace"
        )
    check_nesting(sql_type, path)
    _check_declarations(sql_type, path)
    return ProtoSchema(_message(sql_type, record_name, path), namespace)


def _check_declarations(t: StructType, path: str) -> None:
    """Refuse a type whose derived file would nest more message declarations than protoc
    parses (each struct's message is declared inside its parent's), without recursing."""
    stack: list[tuple[SqlType, str, int]] = [(t, path, 1)]
    while stack:
        node, where, messages = stack.pop()
        if isinstance(node, StructType):
            if messages > MAX_NESTED_MESSAGES:
                raise SinkSchemaError(
                    f"{where}: the derived .proto would declare this struct's message "
                    f"{messages} levels deep, and protoc parses at most {MAX_NESTED_MESSAGES} "
                    "nested message declarations. Fix: give an explicit .proto schema declaring "
                    "the messages side by side (each at the top level), or flatten the type"
                )
            stack.extend((f.type, f"{where}.{f.name}", messages + 1) for f in node.fields)
        elif isinstance(node, ArrayType):
            stack.append((node.element, f"{where}[]", messages))
        elif isinstance(node, MapType):
            stack.append((node.value, f"{where}.value", messages))


def _check_name(name: str, path: str, what: str) -> None:
    if not _IDENTIFIER.fullmatch(name):
        raise SinkSchemaError(
            f"{path}: {name!r} is not a Protobuf identifier ([A-Za-z_][A-Za-z0-9_]*) for the "
            f"{what}. Fix: rename it (alias the field)"
        )


def _message(t: StructType, name: str, path: str) -> ProtoMessage:
    taken = {f.name for f in t.fields}
    json_names: dict[str, str] = {}
    fields = []
    for number, f in enumerate(t.fields, start=1):
        child = f"{path}.{f.name}"
        _check_name(f.name, child, "field name")
        clash = json_names.setdefault(_json_name(f.name), f.name)
        if clash != f.name:
            raise SinkSchemaError(
                f"{child}: fields {clash!r} and {f.name!r} have the same JSON name in proto3 "
                f"({_json_name(f.name)!r}), which protoc refuses. Fix: rename one of them"
            )
        fields.append(_field(f.name, number, f.type, f.nullable, child, taken=taken))
    return ProtoMessage(name, tuple(fields))


def _json_name(name: str) -> str:
    """protoc's JSON name of a field: underscores dropped, the letter after one upper-cased."""
    out, upper = [], False
    for c in name:
        if c == "_":
            upper = True
        else:
            out.append(c.upper() if upper else c)
            upper = False
    return "".join(out)


def _nested_name(field_name: str, taken: set[str]) -> str:
    """The nested message's name: the field's, capitalized, unique among the parent's names."""
    name = field_name[:1].upper() + field_name[1:]
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def _field(
    name: str, number: int, t: SqlType, nullable: bool, path: str, *, taken: set[str]
) -> ProtoField:
    if isinstance(t, ArrayType):
        element_type, message = _single(name, t.element, f"{path}[]", taken)
        return ProtoField(name, number, element_type, "repeated", message)
    if isinstance(t, MapType):
        key_type, _ = _single(name, t.key, f"{path}.key", taken)
        if key_type not in _MAP_KEYS or isinstance(t.key, DecimalType):
            raise SinkSchemaError(
                f"{path}: a Protobuf map key is a string, integral or boolean, not Spark "
                f"{t.key.simple_string()}. Fix: cast the keys to string"
            )
        value_type, message = _single(name, t.value, f"{path}.value", taken)
        return ProtoField(name, number, value_type, "map", message, key_type)
    proto_type, message = _single(name, t, path, taken)
    label = "optional" if nullable and message is None else "implicit"
    return ProtoField(name, number, proto_type, label, message)


def _single(name: str, t: SqlType, path: str, taken: set[str]) -> tuple[str, ProtoMessage | None]:
    """The type of one value (no repetition): a scalar type name, or a nested message."""
    if isinstance(t, StructType):
        return "message", _message(t, _nested_name(name, taken), path)
    if isinstance(t, DecimalType):
        return "string", None
    if isinstance(t, AtomicType) and t.name in _SCALARS:
        return _SCALARS[t.name], None
    what = "a list or map" if isinstance(t, ArrayType | MapType) else t.simple_string()
    raise SinkSchemaError(
        f"{path}: Spark {t.simple_string()} has no Protobuf type here ({what} cannot be "
        "repeated, a map value or written at all). Fix: wrap the inner value in a struct, or "
        "cast it (e.g. to string)"
    )


@dataclass(frozen=True)
class ProtoBinding:
    """A message's fields bound to the Spark struct's fields (``sources``: their indexes)."""

    message: ProtoMessage
    path: str
    sources: tuple[int, ...]
    #: Per field: how its Arrow values are read (``scalar``, ``decimal``, ``date``,
    #: ``timestamp``) and, for message-typed fields, the nested binding.
    kinds: tuple[str, ...]
    children: tuple[ProtoBinding | None, ...]


def bind_protobuf(sql_type: SqlType, schema: ProtoSchema, path: str = "value") -> ProtoBinding:
    """The binding of a Spark struct type to the schema's message; refuses a mismatch."""
    if not isinstance(sql_type, StructType):
        raise SinkSchemaError(
            f"{path}: Spark type {sql_type.simple_string()} is not a struct, and Protobuf "
            f"message {schema.root.name} is. Fix: write a struct column"
        )
    check_nesting(sql_type, path)  # the walk follows the Spark type, so this bounds it
    return _bind(sql_type, schema.root, path)


def _bind(t: StructType, message: ProtoMessage, path: str) -> ProtoBinding:
    by_name = {f.name: (i, f) for i, f in enumerate(t.fields)}
    extra = [f.name for f in t.fields if all(p.name != f.name for p in message.fields)]
    if extra:
        raise SinkSchemaError(
            f"{path}.{extra[0]}: Spark field has no field in Protobuf message {message.name}. "
            "Fix: drop the column or add the field to the schema"
        )
    sources: list[int] = []
    kinds: list[str] = []
    children: list[ProtoBinding | None] = []
    for pf in message.fields:
        child = f"{path}.{pf.name}"
        if pf.name not in by_name:
            raise SinkSchemaError(
                f"{child}: Protobuf field has no Spark field. Fix: add the column (proto3 "
                "fields are optional on the wire, but an absent column is likely a mistake)"
            )
        index, sf = by_name[pf.name]
        expected = _field(pf.name, pf.number, sf.type, sf.nullable, child, taken=set())
        same_shape = (expected.type, expected.key_type) == (pf.type, pf.key_type) and (
            expected.label == pf.label or {expected.label, pf.label} <= {"implicit", "optional"}
        )
        if not same_shape:
            raise SinkSchemaError(
                f"{child}: Spark type {sf.type.simple_string()} cannot be written as Protobuf "
                f"{pf.declaration()} (it maps to {expected.declaration()}). Fix: cast the "
                "column or change the schema"
            )
        value = sf.type
        if isinstance(value, ArrayType):
            value = value.element
        elif isinstance(value, MapType):
            value = value.value
        sources.append(index)
        kinds.append(_kind(value))
        if pf.message is not None:
            assert isinstance(value, StructType)
            children.append(_bind(value, pf.message, child))
        else:
            children.append(None)
    return ProtoBinding(message, path, tuple(sources), tuple(kinds), tuple(children))


def _kind(t: SqlType) -> str:
    if isinstance(t, DecimalType):
        return "decimal"
    if isinstance(t, AtomicType) and t.name in ("date", "timestamp", "timestamp_ntz"):
        return "date" if t.name == "date" else "timestamp"
    if isinstance(t, AtomicType) and t.name == "interval day to second":
        return "timestamp"  # microseconds, read the same way
    return "scalar"
