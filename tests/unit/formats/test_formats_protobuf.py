"""Protobuf: the Spark-type mapping, and the columnar encoder byte for byte against protobuf's
``SerializeToString`` and confluent-kafka's ``ProtobufSerializer``.

The reference message class is generated at test time from the derived ``.proto`` text by
protoc (``grpcio-tools``) and protobuf's descriptor pool; rows are handed to it through
``json_format.ParseDict``, independent of the encoder's reading of Arrow. Random Spark-shaped
struct columns (nested structs, arrays of scalars and structs, maps, decimals of every
precision with their edge values, extreme ints, unicode, nulls) are compared row by row.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import pickle
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kafka_sink.formats.protobuf_columnar import ProtobufColumnEncoder
from kafka_sink.formats.protobuf_descriptor import message_class
from kafka_sink.formats.protobuf_schema import (
    bind_protobuf,
    derive_protobuf_schema,
)
from kafka_sink.formats.protobuf_serializer import ProtobufSerializer
from kafka_sink.formats.sql_types import sql_type_from_arrow, sql_type_from_json
from kafka_sink.formats.wire_format import frame_column
from kafka_sink.sink_errors import SinkDataError, SinkSchemaError
from tests.unit.formats.avro_strategies import atomic_types, values

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_NAMES = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _struct(inner: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    return st.lists(
        st.tuples(_NAMES, inner, st.booleans()), min_size=1, max_size=4, unique_by=lambda f: f[0]
    ).map(lambda fs: pa.struct([pa.field(n, t, nullable=nb) for n, t, nb in fs]))


# What Protobuf writes: no null elements, no lists or maps inside lists or maps.
_leaf = st.recursive(atomic_types, _struct, max_leaves=4)
_field_types = st.one_of(
    _leaf,
    _leaf.map(lambda t: pa.list_(pa.field("element", t, nullable=False))),
    _leaf.map(
        lambda t: pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", t, False))
    ),
)
struct_types = st.recursive(_struct(_field_types), _struct, max_leaves=3)


@st.composite
def columns(draw: st.DrawFn, max_rows: int = 10) -> tuple[pa.DataType, list[Any]]:
    t = draw(struct_types)
    return t, draw(st.lists(values(t, nullable=True), max_size=max_rows))


def _json(value: Any, t: pa.DataType) -> Any:
    """A row as protobuf's ``ParseDict`` takes it for the derived message."""
    if pa.types.is_struct(t):
        return {
            f.name: _json(value[f.name], f.type)
            for f in t
            if value[f.name] is not None and not _empty_list(value[f.name], f.type)
        }
    if pa.types.is_map(t):
        return {k: _json(v, t.item_type) for k, v in value}
    if pa.types.is_list(t):
        return [_json(v, t.value_type) for v in value]
    if pa.types.is_timestamp(t):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        delta = aware - _EPOCH
        return str((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
    if pa.types.is_date(t):
        return (value - _EPOCH.date()).days
    if pa.types.is_decimal(t):
        return str(value)
    if pa.types.is_binary(t):
        return base64.b64encode(value).decode()
    if pa.types.is_int64(t):
        return str(value)
    if pa.types.is_floating(t) and math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"  # ParseDict's spelling
    return value


def _empty_list(value: Any, t: pa.DataType) -> bool:
    return (pa.types.is_list(t) or pa.types.is_map(t)) and len(value) == 0


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_list(t):
        return _has_map(t.value_type)
    return pa.types.is_struct(t) and any(_has_map(f.type) for f in t)


def _reference(t: pa.DataType, rows: list[Any]) -> tuple[Any, list[bytes | None]]:
    schema = derive_protobuf_schema(sql_type_from_arrow(t))
    cls = message_class(schema.text)
    out = [
        None if r is None else json_format.ParseDict(_json(r, t), cls()).SerializeToString()
        for r in rows
    ]
    return cls, out


@_SETTINGS
@given(columns())
def test_columnar_payloads_equal_protobufs_serialize_to_string(
    column: tuple[pa.DataType, list[Any]],
) -> None:
    t, rows = column
    array = pa.array(rows, type=t)
    schema = derive_protobuf_schema(sql_type_from_arrow(t))
    encoded = ProtobufColumnEncoder(schema).encode(array).to_pylist()
    cls, expected = _reference(t, array.to_pylist())
    if not _has_map(t):
        assert encoded == expected
    # Map entries have no order in Protobuf: compare the messages read back.
    for got, want in zip(encoded, expected, strict=True):
        assert (got is None) == (want is None)
        if got is not None:
            assert cls.FromString(got) == cls.FromString(want)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns(max_rows=5))
def test_framed_payloads_equal_confluent_kafkas_protobuf_serializer(
    column: tuple[pa.DataType, list[Any]],
) -> None:
    from confluent_kafka.schema_registry._sync.mock_schema_registry_client import (
        MockSchemaRegistryClient,
    )
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as Confluent
    from confluent_kafka.serialization import MessageField, SerializationContext

    t, rows = column
    assume(not _has_map(t))
    array = pa.array(rows, type=t)
    cls, _ = _reference(t, [])
    registry = MockSchemaRegistryClient({"url": "mock://protobuf"})
    confluent = Confluent(cls, registry, {"use.deprecated.format": False})
    context = SerializationContext("orders", MessageField.VALUE)
    confluent(cls(), context)  # registers the schema, even for a column of no rows
    expected = [
        None if r is None else confluent(json_format.ParseDict(_json(r, t), cls()), context)
        for r in array.to_pylist()
    ]
    schema_id = registry.get_latest_version("orders-value").schema_id
    ours = ProtobufSerializer(derive_protobuf_schema(sql_type_from_arrow(t)), schema_id)
    assert ours.serialize_column(array).to_pylist() == expected


def test_map_entries_and_defaults_equal_protobuf_byte_for_byte() -> None:
    t = pa.struct(
        [
            pa.field("n", pa.int32(), nullable=False),
            pa.field("m", pa.map_(pa.string(), pa.int64())),
            pa.field("s", pa.map_(pa.int32(), pa.struct([pa.field("x", pa.float32())]))),
            pa.field("z", pa.float64(), nullable=False),
        ]
    )
    rows = [
        {"n": 0, "m": [("", 0)], "s": [(-1, {"x": None})], "z": -0.0},
        {"n": -7, "m": [], "s": None, "z": 0.0},
    ]
    array = pa.array(rows, type=t)
    schema = derive_protobuf_schema(sql_type_from_arrow(t))
    cls = message_class(schema.text)
    m = cls(n=0, z=-0.0)
    m.m[""] = 0
    m.s[-1].SetInParent()
    expected = [m.SerializeToString(), cls(n=-7, z=0.0).SerializeToString()]
    assert ProtobufColumnEncoder(schema).encode(array).to_pylist() == expected


_EVERY_TYPE = {
    "type": "struct",
    "fields": [
        {"name": name, "type": spark, "nullable": nullable}
        for name, spark, nullable in [
            ("b", "boolean", True),
            ("t", "byte", True),
            ("sh", "short", False),
            ("i", "integer", True),
            ("l", "long", False),
            ("f", "float", True),
            ("d", "double", True),
            ("s", "string", False),
            ("bin", "binary", True),
            ("dec", "decimal(38,18)", True),
            ("day", "date", True),
            ("ts", "timestamp", True),
            ("ntz", "timestamp_ntz", True),
            ("dur", "interval day to second", True),
            ("arr", {"type": "array", "elementType": "long", "containsNull": True}, True),
            (
                "mp",
                {
                    "type": "map",
                    "keyType": "string",
                    "valueType": {
                        "type": "struct",
                        "fields": [{"name": "v", "type": "string", "nullable": True}],
                    },
                    "valueContainsNull": True,
                },
                True,
            ),
            (
                "Inner",
                {
                    "type": "struct",
                    "fields": [{"name": "inner", "type": "integer", "nullable": False}],
                },
                True,
            ),
        ]
    ],
}


def test_every_spark_type_maps_as_documented_and_protoc_compiles_it() -> None:
    schema = derive_protobuf_schema(
        sql_type_from_json(_EVERY_TYPE), "Order", "shop.orders", path="value"
    )
    assert schema.full_name == "shop.orders.Order"
    assert schema.text == (
        'syntax = "proto3";\n'
        "package shop.orders;\n\n"
        "message Order {\n"
        "  optional bool b = 1;\n"
        "  optional int32 t = 2;\n"
        "  int32 sh = 3;\n"
        "  optional int32 i = 4;\n"
        "  int64 l = 5;\n"
        "  optional float f = 6;\n"
        "  optional double d = 7;\n"
        "  string s = 8;\n"
        "  optional bytes bin = 9;\n"
        "  optional string dec = 10;\n"
        "  optional int32 day = 11;\n"
        "  optional int64 ts = 12;\n"
        "  optional int64 ntz = 13;\n"
        "  optional int64 dur = 14;\n"
        "  repeated int64 arr = 15;\n"
        "  map<string, Mp> mp = 16;\n"
        "  Inner_ Inner = 17;\n"
        "  message Mp {\n"
        "    optional string v = 1;\n"
        "  }\n"
        "  message Inner_ {\n"
        "    int32 inner = 1;\n"
        "  }\n"
        "}\n"
    )
    cls = message_class(schema.text)
    assert cls.DESCRIPTOR.full_name == "shop.orders.Order"
    assert bind_protobuf(sql_type_from_json(_EVERY_TYPE), schema).sources == tuple(range(17))


@pytest.mark.parametrize(
    ("spark", "match"),
    [
        ("string", r"value: Protobuf writes a message.*struct\(col"),
        (
            {
                "type": "struct",
                "fields": [
                    {
                        "name": "a",
                        "type": {
                            "type": "array",
                            "elementType": {"type": "array", "elementType": "long"},
                        },
                        "nullable": True,
                    }
                ],
            },
            r"value\.a\[\]: Spark array<bigint> has no Protobuf type",
        ),
        (
            {
                "type": "struct",
                "fields": [
                    {
                        "name": "m",
                        "type": {"type": "map", "keyType": "double", "valueType": "long"},
                        "nullable": True,
                    }
                ],
            },
            r"value\.m: a Protobuf map key is a string, integral or boolean",
        ),
        (
            {
                "type": "struct",
                "fields": [{"name": "y", "type": "interval year", "nullable": True}],
            },
            r"value\.y: Spark interval year to month has no Protobuf type",
        ),
        (
            {"type": "struct", "fields": [{"name": "a-b", "type": "long", "nullable": True}]},
            r"value\.a-b: 'a-b' is not a Protobuf identifier",
        ),
        (
            {
                "type": "struct",
                "fields": [
                    {"name": "a_b", "type": "long", "nullable": True},
                    {"name": "aB", "type": "long", "nullable": True},
                ],
            },
            r"value\.aB: fields 'a_b' and 'aB' have the same JSON name",
        ),
    ],
)
def test_unwritable_types_are_refused_naming_the_field_path(spark: Any, match: str) -> None:
    with pytest.raises(SinkSchemaError, match=match):
        derive_protobuf_schema(sql_type_from_json(spark))


def test_a_schema_binds_only_to_a_spark_type_it_can_write() -> None:
    schema = derive_protobuf_schema(
        sql_type_from_json(
            {"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True}]}
        )
    )
    other = {"type": "struct", "fields": [{"name": "a", "type": "string", "nullable": True}]}
    with pytest.raises(SinkSchemaError, match=r"value\.a: Spark type string cannot be written"):
        bind_protobuf(sql_type_from_json(other), schema)
    extra = {
        "type": "struct",
        "fields": [
            {"name": "a", "type": "long", "nullable": True},
            {"name": "b", "type": "long", "nullable": True},
        ],
    }
    with pytest.raises(SinkSchemaError, match=r"value\.b: Spark field has no field"):
        bind_protobuf(sql_type_from_json(extra), schema)


def test_nulls_protobuf_cannot_hold_name_the_path_and_row() -> None:
    t = pa.struct([pa.field("a", pa.list_(pa.int64())), pa.field("n", pa.int32(), False)])
    schema = derive_protobuf_schema(sql_type_from_arrow(t))
    with pytest.raises(SinkDataError, match=r"value\.a: row 1 holds a null array element"):
        ProtobufColumnEncoder(schema).encode(
            pa.array([{"a": [1], "n": 1}, {"a": [None], "n": 1}], type=t)
        )
    # A non-nullable Arrow field can still hold a null when built by hand.
    loose = pa.struct([pa.field("a", pa.list_(pa.int64())), pa.field("n", pa.int32())])
    with pytest.raises(SinkDataError, match=r"value\.n: row 0 holds a null value"):
        ProtobufColumnEncoder(schema).encode(pa.array([{"a": [], "n": None}], type=loose))


def test_the_serializer_per_record_equals_its_column_form_and_pickles() -> None:
    t = pa.struct(
        [
            pa.field("id", pa.int64(), False),
            pa.field("price", pa.decimal128(10, 2)),
            pa.field("at", pa.timestamp("us", tz="UTC")),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("attrs", pa.map_(pa.string(), pa.string())),
            pa.field("who", pa.struct([pa.field("name", pa.string())])),
        ]
    )
    row = {
        "id": 7,
        "price": decimal.Decimal("-12.50"),
        "at": dt.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=dt.UTC),
        "tags": ["ü", ""],
        "attrs": {"k": "v"},
        "who": {"name": "Zoë"},
    }
    serializer = ProtobufSerializer(derive_protobuf_schema(sql_type_from_arrow(t)), schema_id=5)
    column = pa.array([{**row, "attrs": list(row["attrs"].items())}, None], type=t)
    framed = serializer.serialize_column(column).to_pylist()
    assert framed == [serializer(row), None]
    assert framed[0][:6] == b"\x00\x00\x00\x00\x05\x00"  # magic, id 5, message index [0]
    assert serializer(None) is None
    copy = pickle.loads(pickle.dumps(serializer))
    assert copy(row) == framed[0]
    message = serializer.message_class().FromString(framed[0][6:])
    assert decimal.Decimal(message.price) == row["price"]
    assert frame_column(pa.array([b"p"], pa.large_binary()), 5, (0,)).to_pylist() == [
        b"\x00\x00\x00\x00\x05\x00p"
    ]


def test_confluents_message_indexes_for_a_nested_and_a_second_message() -> None:
    import io

    from confluent_kafka.schema_registry.common.protobuf import _create_index_array
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as Confluent

    from kafka_sink.formats.wire_format import message_indexes

    text = (
        'syntax = "proto3";\nmessage A { message B {} }\nmessage C { message D {} message E {} }\n'
    )
    cls = message_class(text)
    pool_file = cls.DESCRIPTOR.file
    for descriptor, indexes in [
        (pool_file.message_types_by_name["A"], [0]),
        (pool_file.message_types_by_name["C"], [1]),
        (pool_file.message_types_by_name["A"].nested_types[0], [0, 0]),
        (pool_file.message_types_by_name["C"].nested_types_by_name["E"], [1, 1]),
    ]:
        assert _create_index_array(descriptor) == indexes
        reference = io.BytesIO()
        Confluent._encode_varints(reference, indexes, zigzag=True)
        assert message_indexes(indexes) == reference.getvalue()


def test_the_serializer_takes_proto_text_and_writes_its_first_message() -> None:
    text = (
        'syntax = "proto3";\npackage shop;\n'
        "message Order { int64 id = 2; optional string note = 1; repeated Line lines = 3; }\n"
        "message Line { string sku = 1; int32 qty = 2; }\n"
    )
    serializer = ProtobufSerializer(text, schema_id=9)
    assert repr(serializer) == "ProtobufSerializer(shop.Order, schema_id=9)"
    row = {"id": 5, "note": "", "lines": [{"sku": "a", "qty": 0}, {"sku": "", "qty": -1}]}
    t = pa.struct(
        [
            pa.field("note", pa.string()),
            pa.field("id", pa.int64(), False),
            pa.field(
                "lines",
                pa.list_(
                    pa.field(
                        "element",
                        pa.struct(
                            [
                                pa.field("sku", pa.string(), False),
                                pa.field("qty", pa.int32(), False),
                            ]
                        ),
                        False,
                    )
                ),
            ),
        ]
    )
    order = serializer.message_class()
    expected = order(id=5, note="", lines=[{"sku": "a"}, {"qty": -1}]).SerializeToString()
    assert serializer(row) == b"\x00\x00\x00\x00\x09\x00" + expected
    assert serializer.serialize_column(pa.array([row], t)).to_pylist() == [serializer(row)]
