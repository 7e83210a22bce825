"""JSON Schemas for Spark columns: derived from a Spark type, or checked against one.

Role: the driver-side half of the JSON Schema format, free of pyspark, numpy and jsonschema (so
the driver's planning loads none of them). Three things:

- ``derive_json_schema(sql_type, title)``: a draft-07 schema for a Spark type (``$schema``,
  ``title`` from the record name, default ``topLevelRecord``): boolean -> boolean; tinyint,
  smallint, int, bigint -> integer; float, double -> number; string -> string; binary ->
  string with ``contentEncoding: base64``; date -> string, format ``date``; timestamp ->
  string, format ``date-time`` (UTC, ``2024-01-02T03:04:05.123456Z``); timestamp_ntz -> string
  (no format: it has no offset, which ``date-time`` requires); decimal(p, s) -> number (the
  exact digits, as Spark's ``to_json`` writes decimals; readers that keep precision parse them
  as decimals); intervals -> integer (months for year-month, microseconds for day-time); void ->
  null; array -> array with ``items``; map with string keys -> object with
  ``additionalProperties``; struct -> object with ``properties`` in the Spark order and
  ``required`` listing its non-nullable fields (left out when there are none; every field is
  written all the same, ``null`` when null, so adding a nullable field to a schema does not
  require it of older payloads). A nullable field, array element or map value is
  ``{"oneOf": [{"type": "null"}, T]}``: what confluent-kafka's ``JSONSerializer`` validates
  (with the jsonschema package) and what Confluent's JSON Schema converter reads as optional.
  The top level is never made nullable: a null value is a null Kafka value (a tombstone),
  never the text ``null``.
- ``parse_json_schema(text)``: an explicit schema (JSON text or a parsed dict).
- ``bind_json(sql_type, schema, path)``: checks that a Spark type is writable with a JSON Schema
  and returns the ``JsonBinding`` tree the columnar encoder follows. A mismatch is a
  :class:`~kafka_sink.sink_errors.SinkSchemaError` naming the field path, as in
  ``value.address.zip: Spark type string cannot be written as JSON Schema integer``.

Writable pairs (Spark -> JSON Schema ``type``): boolean -> boolean; integral types and
intervals -> integer or number; float, double, decimal -> number; decimal -> string too (the
digits quoted); string, binary, date, timestamps -> string; array -> array (``items`` one
schema); map with string keys -> object (values checked against ``additionalProperties``);
struct -> object, each Spark field against its ``properties`` entry (or
``additionalProperties``; refused when that is ``false``), each ``required`` property must be a
Spark field. A schema without ``type`` (``{}``, ``true``) takes any value. ``oneOf`` / ``anyOf``
and ``type`` lists take their first non-null branch that the Spark type is writable as; a null
branch, or a ``null`` in the type list, lets the value be null. A Spark-nullable value bound to
a schema without null is accepted here and refused per row by the encoder, only if a null
actually comes. ``$ref`` to ``#/definitions/...`` or ``#/$defs/...`` is followed; other
keywords (``format``, ``pattern``, bounds, ``enum``) are not checked.

Malformed keywords the binding reads (``properties`` not an object, ``required`` not a list of
names, ``type`` not a name or list of names, ``oneOf`` / ``anyOf`` not a list) are refused
naming the path and keyword; so are documents nested past ``nesting.MAX_DOCUMENT_DEPTH``, and
``oneOf`` / ``anyOf`` nested (or cycling through ``$ref``) more than ``nesting.MAX_NESTING`` deep
without a level between.

Invariants: a derived schema always binds to its own Spark type; bindings are immutable and
picklable (the driver builds them once, tasks follow them); every error names the path; no walk
recurses deeper than ``nesting.MAX_NESTING`` levels (the Spark type is checked first); binding
tries each (Spark type, schema node, path) once, so ``oneOf`` branches sharing ``$ref`` targets
cost time linear in the schema, and a ``$ref`` cycle with no level in it is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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
    "DEFAULT_TITLE",
    "DRAFT_07",
    "JsonBinding",
    "JsonSchema",
    "bind_json",
    "derive_json_schema",
    "parse_json_schema",
]

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DEFAULT_TITLE = "topLevelRecord"

_INTEGRAL = frozenset(
    {"tinyint", "smallint", "int", "bigint", "interval year to month", "interval day to second"}
)
_AS_STRING = frozenset({"string", "binary", "date", "timestamp", "timestamp_ntz"})


@dataclass(frozen=True)
class JsonSchema:
    """A JSON Schema document: its parsed form and its text (what the registry stores)."""

    json: Any

    @property
    def text(self) -> str:
        return json.dumps(self.json, separators=(",", ":"))

    @property
    def title(self) -> str | None:
        """The record name Confluent's ``record`` subject strategies read from a schema."""
        title = self.json.get("title") if isinstance(self.json, dict) else None
        return title if isinstance(title, str) else None

    def __reduce__(self) -> tuple[Any, ...]:
        return (parse_json_schema, (self.text,))


# ---- deriving a schema from a Spark type ---------------------------------------------------


def derive_json_schema(
    sql_type: SqlType, title: str = DEFAULT_TITLE, path: str = "value"
) -> JsonSchema:
    """The draft-07 schema this module documents for ``sql_type``, titled ``title``.

    ``path`` names the column in errors (``value`` or ``key``).
    """
    check_nesting(sql_type, path)
    return JsonSchema({"$schema": DRAFT_07, "title": title, **_derive(sql_type, path)})


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [{"type": "null"}, schema]}


def _derive(t: SqlType, path: str) -> dict[str, Any]:
    if isinstance(t, DecimalType):
        return {"type": "number"}
    if isinstance(t, ArrayType):
        items = _derive(t.element, f"{path}[]")
        return {"type": "array", "items": _nullable(items) if t.contains_null else items}
    if isinstance(t, MapType):
        _check_map_key(t, path)
        values = _derive(t.value, f"{path}{{}}")
        return {
            "type": "object",
            "additionalProperties": _nullable(values) if t.value_contains_null else values,
        }
    if isinstance(t, StructType):
        properties: dict[str, Any] = {}
        for f in t.fields:
            if f.name in properties:
                raise SinkSchemaError(
                    f"{path}: the struct has two fields named {f.name!r}, which one JSON object "
                    "cannot hold. Fix: rename one of them"
                )
            child = _derive(f.type, f"{path}.{f.name}")
            properties[f.name] = _nullable(child) if f.nullable else child
        required = [f.name for f in t.fields if not f.nullable]
        derived: dict[str, Any] = {"type": "object", "properties": properties}
        return {**derived, "required": required} if required else derived
    return _derive_atomic(t)


def _derive_atomic(t: AtomicType) -> dict[str, Any]:
    name = t.name
    if name == "boolean":
        return {"type": "boolean"}
    if name in _INTEGRAL:
        return {"type": "integer"}
    if name in ("float", "double"):
        return {"type": "number"}
    if name == "binary":
        return {"type": "string", "contentEncoding": "base64"}
    if name == "date":
        return {"type": "string", "format": "date"}
    if name == "timestamp":
        return {"type": "string", "format": "date-time"}
    if name in _AS_STRING:
        return {"type": "string"}
    if name == "void":
        return {"type": "null"}
    raise SinkSchemaError(f"Spark type {name} has no JSON Schema mapping")


def _check_map_key(t: MapType, path: str) -> None:
    if t.key != AtomicType("string"):
        raise SinkSchemaError(
            f"{path}: Spark type {t.simple_string()} cannot be written as a JSON object, whose "
            "keys are strings. Fix: cast the map's keys to string"
        )


# ---- an explicit schema ----------------------------------------------------------------------


def parse_json_schema(schema: Any, path: str = "value") -> JsonSchema:
    """An explicit schema: JSON text, a dict, or a boolean schema (``path``: the column, named
    by errors)."""
    check_document_depth(schema, path, "the JSON Schema")
    value = schema
    if isinstance(schema, str | bytes):
        try:
            value = json.loads(schema)
        except ValueError as e:
            raise SinkSchemaError(
                f"{path}: the JSON Schema is not valid JSON ({e}). Fix: give the schema as JSON "
                "text"
            ) from None
    if not isinstance(value, dict | bool):
        raise SinkSchemaError(
            f"{path}: a JSON Schema is an object or a boolean, not {type(value).__name__}. Fix: "
            "give "
            'the schema as a JSON object such as {"type": "object", "properties": {...}}'
        )
    return JsonSchema(value)


# ---- binding a Spark type to a schema ----------------------------------------------------------


@dataclass(frozen=True)
class JsonBinding:
    """How one Spark value is written as JSON.

    ``nullable``: the schema lets the value be null (a null reaching a binding without it is
    refused per row). ``quoted``: a decimal written as a string. ``children``: the element's
    binding of an array, the values' of a map, one per Spark field of a struct.
    """

    path: str
    sql: SqlType
    nullable: bool = True
    quoted: bool = False
    children: tuple[JsonBinding, ...] = ()


def bind_json(sql_type: SqlType, schema: JsonSchema | Any, path: str = "value") -> JsonBinding:
    """Check that ``sql_type`` is writable with ``schema``; the encoder's plan for it."""
    root = schema.json if isinstance(schema, JsonSchema) else schema
    check_nesting(sql_type, path)  # each level of the walk is one of the Spark type's
    return _Binder(root).bind(sql_type, root, path)


_ANY: dict[str, Any] = {}


class _Binder:
    def __init__(self, root: Any) -> None:
        self.root = root
        # What a (Spark type, schema node, path) bound to, or why not (None: being bound), by
        # identity: oneOf branches sharing $ref targets are bound once, not once per path to
        # them (exponential in the depth), and a node met again while being bound is a cycle.
        # Each entry holds its objects, so no id is reused during the binding.
        self.memo: dict[tuple[int, int, str], tuple[Any, Any, JsonBinding | Exception | None]]
        self.memo = {}

    def resolve(self, node: Any, path: str) -> Any:
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            node = self._follow(node["$ref"], path)
            seen += 1
            if seen > 64:
                raise SinkSchemaError(f"{path}: the JSON Schema's $ref chain does not end")
        return node

    def _follow(self, ref: Any, path: str) -> Any:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SinkSchemaError(
                f"{path}: JSON Schema $ref {ref!r} points outside the schema; only local "
                "references (#/definitions/..., #/$defs/...) are followed. Fix: inline the "
                "referenced schema"
            )
        node = self.root
        for part in filter(None, ref[1:].split("/")):
            key = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, dict) or key not in node:
                raise SinkSchemaError(f"{path}: JSON Schema $ref {ref!r} points to nothing")
            node = node[key]
        return node

    def bind(self, t: SqlType, node: Any, path: str, hops: int = 0) -> JsonBinding:
        """``hops``: the oneOf/anyOf branches taken since the last level (bounded)."""
        node = self.resolve(node, path)
        key = (id(t), id(node), path)
        if key in self.memo:
            found = self.memo[key][2]
            if found is None:
                raise SinkSchemaError(
                    f"{path}: the JSON Schema refers back to a schema that contains the "
                    "reference (a $ref cycle through oneOf/anyOf) with no property or item "
                    "between, which no value can end. Fix: correct the $ref"
                )
        else:
            self.memo[key] = (t, node, None)
            try:
                found = self._bind_node(t, node, path, hops)
            except SinkSchemaError as exc:
                found = exc
            self.memo[key] = (t, node, found)
        if isinstance(found, Exception):
            raise found
        return found

    def _bind_node(self, t: SqlType, node: Any, path: str, hops: int) -> JsonBinding:
        if node is True or node == _ANY:
            return _default(t, path, nullable=True)
        if node is False:
            raise _mismatch(path, t, "false (no value is valid)")
        if not isinstance(node, dict):
            raise SinkSchemaError(f"{path}: {node!r} is not a JSON Schema")
        keyword = "oneOf" if "oneOf" in node else "anyOf"
        branches = node.get(keyword)
        if branches is not None:
            if not isinstance(branches, list):
                raise _malformed(path, keyword, "a list of schemas", branches)
            if hops >= MAX_NESTING:
                raise too_deep(path, f"the JSON Schema's {keyword}")
            return self._bind_branches(t, branches, path, hops + 1)
        types = node.get("type")
        names = types if isinstance(types, list) else [types] if types is not None else []
        if not all(isinstance(n, str) for n in names):
            raise _malformed(path, "type", "a type name or a list of them", types)
        nullable = not names or "null" in names
        candidates = [n for n in names if n != "null"]
        if not candidates:
            if names:  # only "null": nothing but null is valid
                return _null_only(t, path)
            return self._bind_untyped(t, node, path)
        for name in candidates:
            found = self._bind_type(t, name, node, path, nullable)
            if found is not None:
                return found
        raise _mismatch(path, t, " or ".join(map(str, candidates)))

    def _bind_branches(self, t: SqlType, branches: list[Any], path: str, hops: int) -> JsonBinding:
        resolved = [self.resolve(b, path) for b in branches]
        null = [b for b in resolved if isinstance(b, dict) and b.get("type") == "null"]
        errors: list[SinkSchemaError] = []
        for branch in resolved:
            if any(branch is b for b in null):
                continue
            try:
                found = self.bind(t, branch, path, hops)
            except SinkSchemaError as e:
                errors.append(e)
                continue
            return _with_nullable(found, found.nullable or bool(null))
        if errors:
            raise errors[0]
        return _null_only(t, path)

    def _bind_untyped(self, t: SqlType, node: dict[str, Any], path: str) -> JsonBinding:
        # An object's keywords without "type" still constrain objects: follow them if present.
        if isinstance(t, StructType | MapType) and (
            "properties" in node or "additionalProperties" in node
        ):
            found = self._bind_type(t, "object", node, path, True)
            if found is not None:
                return found
        if isinstance(t, ArrayType) and "items" in node:
            found = self._bind_type(t, "array", node, path, True)
            if found is not None:
                return found
        return _default(t, path, nullable=True)

    def _bind_type(
        self, t: SqlType, name: Any, node: dict[str, Any], path: str, nullable: bool
    ) -> JsonBinding | None:
        """The binding of ``t`` to the JSON type ``name``; None when they do not fit."""
        if isinstance(t, DecimalType):
            if name in ("number", "string"):
                return JsonBinding(path, t, nullable, quoted=name == "string")
            return None
        if isinstance(t, ArrayType):
            if name != "array":
                return None
            items = node.get("items", True)
            if isinstance(items, list):
                raise _mismatch(path, t, "array with positional items")
            child = self.bind(t.element, items, f"{path}[]")
            return JsonBinding(path, t, nullable, children=(child,))
        if isinstance(t, MapType):
            if name != "object":
                return None
            _check_map_key(t, path)
            values = node.get("additionalProperties", True)
            child = self.bind(t.value, values, f"{path}{{}}")
            return JsonBinding(path, t, nullable, children=(child,))
        if isinstance(t, StructType):
            return self._bind_struct(t, node, path, nullable) if name == "object" else None
        return _bind_atomic(t, name, path, nullable)

    def _bind_struct(
        self, t: StructType, node: dict[str, Any], path: str, nullable: bool
    ) -> JsonBinding:
        properties = node.get("properties", {})
        if not isinstance(properties, dict):
            raise _malformed(path, "properties", "an object of schemas", properties)
        extra = node.get("additionalProperties", True)
        required_names = node.get("required", [])
        if not (
            isinstance(required_names, list) and all(isinstance(r, str) for r in required_names)
        ):
            raise _malformed(path, "required", "a list of property names", required_names)
        names = {f.name for f in t.fields}
        for required in required_names:
            if required not in names:
                raise SinkSchemaError(
                    f"{path}: the JSON Schema requires property {required!r}, which the Spark "
                    f"type {t.simple_string()} has no field for. Fix: add the field, or make "
                    "the property optional"
                )
        children = []
        for f in t.fields:
            child_path = f"{path}.{f.name}"
            if f.name in properties:
                children.append(self.bind(f.type, properties[f.name], child_path))
            elif extra is False:
                raise SinkSchemaError(
                    f"{child_path}: the JSON Schema has no property {f.name!r} and allows no "
                    "others (additionalProperties is false). Fix: drop the field, or add the "
                    "property to the schema"
                )
            else:
                children.append(self.bind(f.type, extra, child_path))
        return JsonBinding(path, t, nullable, children=tuple(children))


def _bind_atomic(t: SqlType, name: Any, path: str, nullable: bool) -> JsonBinding | None:
    assert isinstance(t, AtomicType)
    fits = {
        "boolean": t.name == "boolean",
        "integer": t.name in _INTEGRAL,
        "number": t.name in _INTEGRAL or t.name in ("float", "double"),
        "string": t.name in _AS_STRING,
        "null": t.name == "void",
    }
    return JsonBinding(path, t, nullable) if fits.get(name, False) else None


def _default(t: SqlType, path: str, nullable: bool) -> JsonBinding:
    """The binding of the derived mapping (for a schema that takes any value)."""
    if isinstance(t, ArrayType):
        children: tuple[JsonBinding, ...] = (_default(t.element, f"{path}[]", True),)
    elif isinstance(t, MapType):
        _check_map_key(t, path)
        children = (_default(t.value, f"{path}{{}}", True),)
    elif isinstance(t, StructType):
        children = tuple(_default(f.type, f"{path}.{f.name}", True) for f in t.fields)
    else:
        children = ()
    return JsonBinding(path, t, nullable, children=children)


def _null_only(t: SqlType, path: str) -> JsonBinding:
    if t != AtomicType("void"):
        raise _mismatch(path, t, "null")
    return JsonBinding(path, t, nullable=True)


def _with_nullable(b: JsonBinding, nullable: bool) -> JsonBinding:
    return (
        b if b.nullable == nullable else JsonBinding(b.path, b.sql, nullable, b.quoted, b.children)
    )


def _malformed(path: str, keyword: str, expected: str, found: Any) -> SinkSchemaError:
    text = repr(found)
    text = text if len(text) <= 120 else text[:117] + "..."
    return SinkSchemaError(
        f"{path}: the JSON Schema's {keyword!r} is not {expected}: {text}. Fix: correct the "
        "JSON Schema"
    )


def _mismatch(path: str, t: SqlType, what: str) -> SinkSchemaError:
    return SinkSchemaError(
        f"{path}: Spark type {t.simple_string()} cannot be written as JSON Schema {what}. "
        "Fix: cast the column to a matching type, or change the JSON Schema"
    )
