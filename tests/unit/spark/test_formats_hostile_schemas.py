"""Schemas and Spark types a user gives, malformed or nested without bound.

Every such input gets the formats' own error (:class:`SinkSchemaError`) naming the field path
(``value...``), never a bare RecursionError, KeyError, TypeError or AttributeError: random
malformed Avro and JSON Schema documents, valid schemas with one node broken, types and schemas
nested past the bound (64 levels) as text and as objects, and recursive proto3 messages, which no
Spark type can express.
"""

from __future__ import annotations

import copy
import json
import pickle
import sys
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_sink.formats.avro_columnar import AvroColumnEncoder
from kafka_sink.formats.avro_schema import bind, derive_avro_schema, parse_avro_schema
from kafka_sink.formats.json_columnar import JsonColumnEncoder
from kafka_sink.formats.json_schema import bind_json, derive_json_schema, parse_json_schema
from kafka_sink.formats.nesting import MAX_DOCUMENT_DEPTH, MAX_NESTING
from kafka_sink.formats.protobuf_schema import bind_protobuf, derive_protobuf_schema
from kafka_sink.formats.sql_types import (
    AtomicType,
    SqlType,
    StructField,
    StructType,
    sql_type_from_arrow,
    sql_type_from_json,
)
from kafka_sink.sink_errors import SinkSchemaError
from tests.unit.formats.avro_strategies import spark_types

HOSTILE = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_KEYS = st.sampled_from(
    ["type", "fields", "items", "values", "name", "symbols", "size", "logicalType",
     "precision", "scale", "namespace", "properties", "required", "additionalProperties",
     "oneOf", "anyOf", "$ref", "definitions", "a"]
)  # fmt: skip
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False),
    st.sampled_from(
        ["record", "array", "map", "enum", "fixed", "int", "string", "null", "bytes", "decimal",
         "object", "integer", "number", "boolean", "#", "#/definitions/a", "a", ""]
    ),
)  # fmt: skip
#: Any JSON value, biased toward the keywords and type names of the two schema languages.
junk = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=5)),
    max_leaves=20,
)


def _refused_naming_a_path(call: Any, *args: Any) -> SinkSchemaError | None:
    """Call; a SinkSchemaError must name the path (``value...: ``). Anything else escapes."""
    try:
        call(*args)
    except SinkSchemaError as e:
        assert str(e).startswith("value"), str(e)
        assert ": " in str(e)
        return e
    return None


def _nodes(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths (keys and indexes) of every node of a JSON value."""
    found = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _nodes(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _nodes(v, (*at, i))
    return found


@st.composite
def broken(draw: st.DrawFn, derive: Any) -> tuple[SqlType, Any]:
    """A Spark struct type and its derived schema (JSON) with one node replaced or removed."""
    sql = sql_type_from_arrow(pa.struct([pa.field("f", draw(spark_types))]))
    doc = copy.deepcopy(derive(sql).json)
    at = draw(st.sampled_from(_nodes(doc)[1:]))
    parent = doc
    for step in at[:-1]:
        parent = parent[step]
    if isinstance(parent, dict) and draw(st.booleans()):
        del parent[at[-1]]
    else:
        parent[at[-1]] = draw(junk)
    return sql, doc


# ---- Avro ----------------------------------------------------------------------------------------


@HOSTILE
@given(doc=junk, sql=spark_types)
def test_any_malformed_avro_document_is_refused_naming_the_path(doc: Any, sql: Any) -> None:
    def parse_and_bind(text: str) -> None:
        bind(sql_type_from_arrow(sql), parse_avro_schema(text))

    _refused_naming_a_path(parse_and_bind, json.dumps(doc))
    _refused_naming_a_path(parse_and_bind, doc)


@HOSTILE
@given(case=broken(derive_avro_schema))
def test_a_derived_avro_schema_with_one_node_broken_is_refused_naming_the_path(
    case: tuple[SqlType, Any],
) -> None:
    sql, doc = case
    error = _refused_naming_a_path(lambda: bind(sql, parse_avro_schema(json.dumps(doc))))
    if error is not None and "value.f" in str(error).split(":")[0]:
        assert str(error).startswith("value.f")


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ({"type": "record", "name": "r"}, r"^value: record r has no list of 'fields'"),
        ({"type": "record", "name": "r", "fields": {"a": 1}}, "has no list of 'fields'"),
        ({"type": "record", "fields": []}, r"^value: the record schema has no string 'name'"),
        (
            {"type": "record", "name": "r", "fields": [{"name": "a", "type": {"type": "array"}}]},
            r"^value\.a: the array schema has no 'items'",
        ),
        (
            {"type": "record", "name": "r", "fields": [{"name": "a"}]},
            r"^value\.a: the field has no 'type'",
        ),
        ({"type": "record", "name": "r", "fields": [5]}, r"^value: a field of record r is not"),
        ({"type": "fixed", "name": "x", "size": "4"}, r"'size' is not a non-negative integer"),
        ({"type": "enum", "name": "e", "symbols": "AB"}, r"^value: enum e's symbols are not"),
        ({"type": "bytes", "logicalType": "decimal"}, r"'precision' is not a non-negative"),
        ({"type": 5}, r"^value: an Avro schema's type is a name or a schema, not 5"),
        ([["int"]], r"^value: a union may not contain a union directly"),
        ({"type": "map", "values": {"type": "map", "values": "Nope"}}, r"^value\{\}\{\}: .*'Nope'"),
    ],
)
def test_malformed_avro_schemas_name_the_field_and_the_fault(schema: Any, error: str) -> None:
    with pytest.raises(SinkSchemaError, match=error):
        parse_avro_schema(json.dumps(schema))


def _nested_avro(depth: int, shape: str) -> tuple[Any, str]:
    """The schema as an object and as text (built as text: json.dumps itself recurses)."""
    schema: Any = "int"
    text = '"int"'
    for level in range(depth):
        if shape == "record":
            schema = {
                "type": "record",
                "name": f"r{level}",
                "fields": [{"name": "f", "type": schema}],
            }
            fields = f'[{{"name": "f", "type": {text}}}]'
            text = f'{{"type": "record", "name": "r{level}", "fields": {fields}}}'
        elif shape == "nullable":
            schema = [
                "null",
                {"type": "record", "name": f"r{level}", "fields": [{"name": "f", "type": schema}]},
            ]
            text = (
                f'["null", {{"type": "record", "name": "r{level}", '
                f'"fields": [{{"name": "f", "type": {text}}}]}}]'
            )
        elif shape == "array":
            schema = {"type": "array", "items": schema}
            text = f'{{"type": "array", "items": {text}}}'
        elif shape == "map":
            schema = {"type": "map", "values": schema}
            text = f'{{"type": "map", "values": {text}}}'
        else:  # type wrappers, which add no level: bounded between two levels
            schema = {"type": schema}
            text = f'{{"type": {text}}}'
    return schema, text  # fmt: skip


@HOSTILE
@given(
    depth=st.integers(MAX_NESTING + 1, 3 * MAX_DOCUMENT_DEPTH),
    shape=st.sampled_from(["record", "nullable", "array", "map", "wrapper"]),
    as_text=st.booleans(),
)
def test_avro_schemas_nested_past_the_bound_are_refused_naming_the_path(
    depth: int, shape: str, as_text: bool
) -> None:
    schema, text = _nested_avro(depth + (shape == "wrapper"), shape)
    with pytest.raises(SinkSchemaError, match=r"^value\S*: the Avro schema nests more than") as e:
        parse_avro_schema(text if as_text else schema)
    path = str(e.value).split(":")[0]
    if shape in ("record", "nullable") and depth <= MAX_DOCUMENT_DEPTH // 8:
        assert path == "value" + ".f" * MAX_NESTING
    if shape == "array" and depth <= MAX_DOCUMENT_DEPTH:
        assert path == "value" + "[]" * MAX_NESTING


def test_the_deepest_avro_schema_within_the_bound_parses_and_binds() -> None:
    sql = _deep_struct(MAX_NESTING)
    schema = derive_avro_schema(sql)
    binding = bind(sql, parse_avro_schema(schema.text))
    assert pickle.loads(pickle.dumps(binding)).path == "value"
    for shape in ("record", "nullable", "array", "map", "wrapper"):
        schema_json, text = _nested_avro(MAX_NESTING, shape)
        assert parse_avro_schema(text).json == parse_avro_schema(schema_json).json
    array = pa.array([_deep_row(MAX_NESTING, 7)], type=_deep_arrow(MAX_NESTING))
    # Each nullable level writes its union branch (0: the record), then 7 as a zigzag varint.
    assert AvroColumnEncoder(schema).encode(array).to_pylist() == [b"\x00" * MAX_NESTING + b"\x0e"]


def test_a_recursive_avro_record_stays_legal() -> None:
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}  # fmt: skip
    sql = sql_type_from_json(
        {"type": "struct", "fields": [{"name": "v", "type": "integer", "nullable": False}]}
    )
    assert bind(sql, parse_avro_schema(node)).sources == (0, None)


# ---- Spark types ---------------------------------------------------------------------------------


def _deep_struct(depth: int) -> SqlType:
    t: SqlType = AtomicType("int")
    for _ in range(depth):
        t = StructType((StructField("f", t),))
    return t


def _deep_arrow(depth: int) -> pa.DataType:
    t: pa.DataType = pa.int32()
    for _ in range(depth):
        t = pa.struct([pa.field("f", t)])
    return t


def _deep_row(depth: int, leaf: Any) -> Any:
    row = leaf
    for _ in range(depth):
        row = {"f": row}
    return row


def _deep_json(depth: int, shape: str) -> Any:
    t: Any = "integer"
    for _ in range(depth):
        if shape == "struct":
            t = {"type": "struct", "fields": [{"name": "f", "type": t, "nullable": True}]}
        elif shape == "array":
            t = {"type": "array", "elementType": t, "containsNull": True}
        else:
            t = {"type": "map", "keyType": "string", "valueType": t, "valueContainsNull": True}
    return t


@HOSTILE
@given(depth=st.integers(MAX_NESTING + 1, 4_000), shape=st.sampled_from(["struct", "array", "map"]))
def test_spark_types_nested_past_the_bound_are_refused_naming_the_path(
    depth: int, shape: str
) -> None:
    step = {"struct": ".f", "array": "[]", "map": "{}"}[shape]
    deep = "value" + step * MAX_NESTING
    with pytest.raises(SinkSchemaError, match=r"the Spark type nests more than 64") as e:
        sql_type_from_json(_deep_json(depth, shape))
    assert str(e.value).startswith(f"{deep}: ")


@pytest.mark.parametrize(
    "derive",
    [derive_avro_schema, derive_json_schema, derive_protobuf_schema],
    ids=["avro", "json", "protobuf"],
)
@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 5_000])
def test_hand_built_types_past_the_bound_are_refused_by_every_format(
    derive: Any, depth: int
) -> None:
    with pytest.raises(SinkSchemaError, match=r"^value(\.f){64}: the Spark type nests more"):
        derive(_deep_struct(depth))


def test_deep_arrow_types_are_refused_naming_the_path() -> None:
    with pytest.raises(SinkSchemaError, match=r"^value(\.f){64}: the Spark type nests more"):
        sql_type_from_arrow(_deep_arrow(MAX_NESTING + 1))
    assert sql_type_from_arrow(_deep_arrow(MAX_NESTING)) == _deep_struct(MAX_NESTING)


@HOSTILE
@given(doc=junk)
def test_any_malformed_spark_type_json_is_refused_naming_the_path(doc: Any) -> None:
    _refused_naming_a_path(sql_type_from_json, doc)
    _refused_naming_a_path(sql_type_from_json, {"type": "struct", "fields": [doc]})


# ---- JSON Schema ---------------------------------------------------------------------------------


@HOSTILE
@given(doc=junk, sql=spark_types)
def test_any_malformed_json_schema_is_refused_naming_the_path(doc: Any, sql: Any) -> None:
    def parse_and_bind(schema: Any) -> None:
        bind_json(sql_type_from_arrow(sql), parse_json_schema(schema))

    _refused_naming_a_path(parse_and_bind, json.dumps(doc))
    if isinstance(doc, dict | bool):
        _refused_naming_a_path(parse_and_bind, doc)


@HOSTILE
@given(case=broken(derive_json_schema))
def test_a_derived_json_schema_with_one_node_broken_is_refused_naming_the_path(
    case: tuple[SqlType, Any],
) -> None:
    sql, doc = case
    _refused_naming_a_path(lambda: bind_json(sql, parse_json_schema(json.dumps(doc))))


def _nested_one_of(depth: int) -> Any:
    schema: Any = {"type": "integer"}
    for _ in range(depth):
        schema = {"oneOf": [schema]}
    return schema


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        ({"type": "object", "properties": [1]}, r"^value: the JSON Schema's 'properties' is not"),
        ({"type": "object", "required": "f"}, r"^value: the JSON Schema's 'required' is not"),
        (
            {"type": "object", "properties": {"f": {"type": {"x": 1}}}},
            r"^value\.f: the JSON Schema's 'type' is not a type name",
        ),
        ({"oneOf": {"type": "object"}}, r"^value: the JSON Schema's 'oneOf' is not a list"),
        (
            {"type": "object", "properties": {"f": {"oneOf": [{"$ref": "#/properties/f"}]}}},
            r"^value\.f: the JSON Schema refers back to a schema that contains the reference",
        ),
        ({"oneOf": [{"$ref": "#"}]}, r"^value: the JSON Schema refers back to a schema that"),
        (
            {"type": "object", "properties": {"f": _nested_one_of(MAX_NESTING + 1)}},
            r"^value\.f: the JSON Schema's oneOf nests more than 64 levels deep",
        ),
    ],
)
def test_malformed_json_schemas_name_the_field_and_the_fault(schema: Any, error: str) -> None:
    sql = StructType((StructField("f", AtomicType("int")),))
    with pytest.raises(SinkSchemaError, match=error):
        bind_json(sql, parse_json_schema(json.dumps(schema)))


@settings(max_examples=60, deadline=None)
@given(depth=st.integers(MAX_DOCUMENT_DEPTH + 1, 2_500), as_text=st.booleans())
def test_json_schema_documents_nested_past_the_bound_are_refused(depth: int, as_text: bool) -> None:
    schema: Any = {"type": "integer"}
    text = '{"type": "integer"}'
    for _ in range(depth):
        schema = {"type": "object", "properties": {"f": schema}}
        text = f'{{"type": "object", "properties": {{"f": {text}}}}}'
    with pytest.raises(SinkSchemaError, match=r"^value: the JSON Schema nests more than 512 JSON"):
        parse_json_schema(text if as_text else schema)


def test_the_deepest_json_schema_within_the_bound_parses_binds_and_encodes() -> None:
    sql = _deep_struct(MAX_NESTING)
    schema = parse_json_schema(derive_json_schema(sql).text)
    binding = bind_json(sql, schema)
    assert pickle.loads(pickle.dumps(binding)).path == "value"
    array = pa.array([_deep_row(MAX_NESTING, 7)], type=_deep_arrow(MAX_NESTING))
    encoded = JsonColumnEncoder(schema).encode(array).to_pylist()
    assert json.loads(encoded[0]) == _deep_row(MAX_NESTING, 7)
    with pytest.raises(SinkSchemaError, match=r"^value(\.f){64}: the Spark type nests more"):
        bind_json(_deep_struct(MAX_NESTING + 1), schema)


def test_the_checks_hold_with_little_stack_left() -> None:
    """A deep caller (Spark's own frames) leaves less room; the walks stay within it."""
    from kafka_sink.formats.protobuf_descriptor import parse_protobuf_schema

    sql = _deep_struct(MAX_NESTING)
    chain = parse_protobuf_schema(_proto_chain(MAX_NESTING))

    def at_depth(frames: int) -> None:
        if frames:
            return at_depth(frames - 1)
        bind(sql, parse_avro_schema(derive_avro_schema(sql).text))
        bind_json(sql, parse_json_schema(derive_json_schema(sql).text))
        bind_protobuf(sql, chain)
        return None

    at_depth(sys.getrecursionlimit() // 3)


# ---- On the driver: the plan -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["avro", "jsonschema", "protobuf"])
def test_the_plan_names_the_column_whose_type_nests_past_the_bound(fmt: str) -> None:
    from kafka_sink.formats.options import FormatOptions
    from kafka_sink.formats.plan import resolve_formats
    from tests.unit.spark.test_sink_formats import URL, FakeClient

    options = FormatOptions.from_options({"keyformat": fmt, "schema.registry.url": URL})
    deep = {"key": _deep_json(MAX_NESTING + 1, "struct")}
    with pytest.raises(SinkSchemaError, match=r"^key(\.f){64}: the Spark type nests more than"):
        resolve_formats(options, deep, "t", client_factory=FakeClient)


@pytest.mark.parametrize(
    ("fmt", "registered", "error"),
    [
        ("avro", '{"type": "record", "name": "r"}', r"^value: record r has no list of 'fields'"),
        ("jsonschema", '{"properties": 5}', r"^value: the JSON Schema's 'properties' is not"),
    ],
)
def test_a_malformed_registered_schema_is_refused_naming_the_path(
    fmt: str, registered: str, error: str
) -> None:
    from kafka_sink.formats.options import FormatOptions
    from kafka_sink.formats.plan import resolve_formats
    from kafka_sink.formats.registry import Schema
    from tests.unit.spark.test_sink_formats import URL, FakeClient

    def factory(config: Any) -> Any:
        client = FakeClient(config)
        kind = "AVRO" if fmt == "avro" else "JSON"
        client.subjects["orders-value"] = [(3, Schema(registered, kind))]
        return client

    options = {"valueformat": fmt, "schema.registry.url": URL, "use.latest.version": "true"}
    struct = {"type": "struct", "fields": [{"name": "f", "type": "integer", "nullable": True}]}
    with pytest.raises(SinkSchemaError, match=error):
        resolve_formats(
            FormatOptions.from_options(options), {"value": struct}, "orders", client_factory=factory
        )


# ---- Protobuf ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("proto", "error"),
    [
        (
            "message Node { int32 v = 1; Node next = 2; }",
            r"^value\.next: message demo\.Node contains itself \(demo\.Node -> demo\.Node\), a "
            "recursion that Spark types cannot express",
        ),
        (
            "message Tree { repeated Tree children = 1; }",
            r"^value\.children: message demo\.Tree contains itself",
        ),
        (
            "message A { B b = 1; } message B { int32 v = 1; A a = 2; }",
            r"^value\.b\.a: message demo\.A contains itself \(demo\.A -> demo\.B -> demo\.A\)",
        ),
        (
            "message Dir { map<string, Dir> entries = 1; }",
            r"^value\.entries\.value: message demo\.Dir contains itself",
        ),
        (
            "message Outer { Inner i = 1; message Inner { Outer back = 1; } }",
            r"^value\.i\.back: message demo\.Outer contains itself",
        ),
    ],
    ids=["self", "repeated", "mutual", "map-value", "nested"],
)
def test_a_recursive_proto3_message_is_refused_naming_the_message_type(
    proto: str, error: str
) -> None:
    from kafka_sink.formats.protobuf_descriptor import parse_protobuf_schema

    with pytest.raises(SinkSchemaError, match=error):
        parse_protobuf_schema(f'syntax = "proto3";\npackage demo;\n{proto}\n')


def test_a_map_of_an_imported_message_is_refused_naming_the_field() -> None:
    from kafka_sink.formats.protobuf_descriptor import parse_protobuf_schema

    text = (
        'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\n'
        "message M { map<string, google.protobuf.Timestamp> at = 1; }\n"
    )
    with pytest.raises(SinkSchemaError, match=r"^value\.at\.value: message google\.protobuf\."):
        parse_protobuf_schema(text)


def test_proto_messages_nested_past_the_bound_are_refused_naming_the_path() -> None:
    from kafka_sink.formats.protobuf_descriptor import parse_protobuf_schema

    def chain(depth: int) -> str:
        lines = ['syntax = "proto3";']
        lines += [f"message M{i} {{ M{i + 1} f = 1; }}" for i in range(depth)]
        return "\n".join([*lines, f"message M{depth} {{ int32 v = 1; }}"])

    deepest = parse_protobuf_schema(chain(MAX_NESTING - 1))
    assert deepest.root.name == "M0"
    with pytest.raises(SinkSchemaError, match=r"^value(\.f){64}: the \.proto schema nests more"):
        parse_protobuf_schema(chain(MAX_NESTING))


def test_a_derived_proto_nests_no_more_message_declarations_than_protoc_parses() -> None:
    from kafka_sink.formats.protobuf_columnar import ProtobufColumnEncoder
    from kafka_sink.formats.protobuf_descriptor import message_class
    from kafka_sink.formats.protobuf_schema import MAX_NESTED_MESSAGES

    deepest = derive_protobuf_schema(_deep_struct(MAX_NESTED_MESSAGES))
    cls = message_class(deepest.text)  # protoc compiles it
    array = pa.array([_deep_row(MAX_NESTED_MESSAGES, 7)], type=_deep_arrow(MAX_NESTED_MESSAGES))
    message = cls.FromString(ProtobufColumnEncoder(deepest).encode(array).to_pylist()[0])
    for _ in range(MAX_NESTED_MESSAGES - 1):
        message = message.f
    assert message.f == 7
    with pytest.raises(
        SinkSchemaError, match=r"^value(\.f){31}: the derived \.proto would declare"
    ):
        derive_protobuf_schema(_deep_struct(MAX_NESTED_MESSAGES + 1))
    with pytest.raises(SinkSchemaError, match=r"Reached maximum recursion limit"):
        message_class(deepest.text.replace("int32 f = 1;", "Deeper f = 1; message Deeper {}"))


def test_an_explicit_proto_chain_at_the_bound_binds_and_encodes() -> None:
    from kafka_sink.formats.protobuf_columnar import ProtobufColumnEncoder
    from kafka_sink.formats.protobuf_descriptor import message_class, parse_protobuf_schema

    text = _proto_chain(MAX_NESTING)
    schema = parse_protobuf_schema(text)
    bind_protobuf(_deep_struct(MAX_NESTING), schema)
    array = pa.array([_deep_row(MAX_NESTING, 7)], type=_deep_arrow(MAX_NESTING))
    message = message_class(text).FromString(ProtobufColumnEncoder(schema).encode(array)[0].as_py())
    for _ in range(MAX_NESTING - 1):
        message = message.f
    assert message.f == 7


def _proto_chain(depth: int) -> str:
    """Messages M0 ... M<depth-1> declared side by side, each holding the next in field f: the
    last an optional int32 f, as derived for ``_deep_struct(depth)``."""
    lines = ['syntax = "proto3";']
    lines += [f"message M{i} {{ M{i + 1} f = 1; }}" for i in range(depth - 1)]
    return "\n".join([*lines, f"message M{depth - 1} {{ optional int32 f = 1; }}"])


# ---- Unions of shared named types: bound once, not once per path ------------------------------


def _avro_twins(depth: int) -> Any:
    """At each level a union of two records of one shape, the second referring by name to the
    next level's two: 2**depth paths through the schema, in a text linear in depth."""

    def level(k: int) -> Any:
        if k == depth:
            return "string"
        refs = [f"A{k + 1}", f"B{k + 1}"] if k + 1 < depth else "string"
        return [
            {"type": "record", "name": f"A{k}", "fields": [{"name": "f", "type": level(k + 1)}]},
            {"type": "record", "name": f"B{k}", "fields": [{"name": "f", "type": refs}]},
        ]

    return {"type": "record", "name": "top", "fields": [{"name": "f", "type": level(1)}]}


def _json_twins(depth: int) -> Any:
    """At each level a oneOf of two objects whose property refers to the next level."""
    defs: dict[str, Any] = {
        f"x{k}": {
            "oneOf": [
                {"type": "object", "properties": {"f": {"$ref": f"#/definitions/x{k + 1}"}}},
                {"type": "object", "properties": {"f": {"$ref": f"#/definitions/x{k + 1}"}}},
            ]
        }
        for k in range(depth)
    }
    defs[f"x{depth}"] = {"type": "string"}
    return {"definitions": defs, "$ref": "#/definitions/x0"}


@pytest.mark.timeout(30)
def test_branches_sharing_named_types_are_bound_once_not_once_per_path() -> None:
    sql = _deep_struct(MAX_NESTING)  # an int at the bottom, where the schemas have a string
    # (a union with two candidates is refused at its own level, naming neither branch's reason)
    with pytest.raises(SinkSchemaError, match=r"^value\.f: Spark type struct<f:.* union \[rec"):
        bind(sql, parse_avro_schema(_avro_twins(MAX_NESTING)))
    with pytest.raises(SinkSchemaError, match=r"^value(\.f){64}: Spark type int cannot be"):
        bind_json(sql, parse_json_schema(_json_twins(MAX_NESTING)))


def _proto_diamonds(depth: int, leaf: str = "int32 v = 1;") -> str:
    """M0 ... M<depth-1>, each holding the next twice (fields a and b): 2**depth paths."""
    lines = ['syntax = "proto3";']
    lines += [f"message M{i} {{ M{i + 1} a = 1; M{i + 1} b = 2; }}" for i in range(depth - 1)]
    return "\n".join([*lines, f"message M{depth - 1} {{ {leaf} }}"])


@pytest.mark.timeout(30)
def test_proto_messages_used_by_several_fields_are_read_once() -> None:
    from kafka_sink.formats.protobuf_descriptor import parse_protobuf_schema

    schema = parse_protobuf_schema(_proto_diamonds(MAX_NESTING))
    assert schema.root.fields[0].message is schema.root.fields[1].message  # shared
    # A shared message met again deeper than before is still held to the bound.
    text = (
        _proto_diamonds(MAX_NESTING).replace(
            "message M0 { M1 a = 1; M1 b = 2; }", "message M0 { M1 a = 1; M2 b = 2; X x = 3; }"
        )
        + "\nmessage X { Y y = 1; }\nmessage Y { M1 m = 1; }\n"
    )
    with pytest.raises(SinkSchemaError, match=r"^value\.x\.y\.m: the \.proto schema nests more"):
        parse_protobuf_schema(text)
    via_map = (
        _proto_diamonds(MAX_NESTING).replace(
            "message M0 { M1 a = 1; M1 b = 2; }", "message M0 { M1 a = 1; X x = 2; }"
        )
        + "\nmessage X { map<string, M1> m = 1; }\n"
    )
    with pytest.raises(SinkSchemaError, match=r"^value\.x\.m\.value: the \.proto schema nests"):
        parse_protobuf_schema(via_map)
    parse_protobuf_schema(via_map.replace("map<string, M1> m", "map<string, M2> m"))


_BAD_DECIMALS = ["decimal(0,0)", "decimal(39,0)", "decimal(5,6)", "decimal(10,-99999)",
                 "decimal(" + "9" * 5000 + ",1)"]  # fmt: skip


@pytest.mark.parametrize("name", _BAD_DECIMALS)
def test_decimals_spark_cannot_have_are_refused_naming_the_path(name: str) -> None:
    struct = {"type": "struct", "fields": [{"name": "d", "type": name, "nullable": True}]}
    with pytest.raises(
        SinkSchemaError, match=r"^value\.d: Spark type decimal\(.* is not one Spark"
    ):
        sql_type_from_json(struct)
    assert sql_type_from_json("decimal(38,38)") == sql_type_from_json("DECIMAL(38, 38)")
