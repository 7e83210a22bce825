"""The Avro schema a Spark type maps to (as Spark's to_avro maps it), and the writability check.

Spark's mapping is SchemaConverters.toAvroType: nullable values are unions [type, "null"],
decimals are fixed of the fewest bytes for their precision named ``fixed`` in the namespace of
their record and field, nested records are named after their field in their parents' namespace.
"""

from __future__ import annotations

import pickle
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink.formats.avro_schema import (
    AvroRecord,
    bind,
    derive_avro_schema,
    min_bytes_for_precision,
    parse_avro_schema,
)
from kafka_sink.formats.sql_types import (
    ArrayType,
    AtomicType,
    DecimalType,
    MapType,
    StructField,
    StructType,
    sql_type_from_arrow,
    sql_type_from_json,
)
from kafka_sink.sink_errors import SinkSchemaError


def _field_type(spark_type_json: Any, nullable: bool = False) -> Any:
    """The Avro type Spark gives a top-level field ``f`` of this Spark type."""
    struct = {
        "type": "struct",
        "fields": [{"name": "f", "type": spark_type_json, "nullable": nullable, "metadata": {}}],
    }
    schema = derive_avro_schema(sql_type_from_json(struct))
    return schema.json["fields"][0]["type"]


@pytest.mark.parametrize(
    ("spark", "avro"),
    [
        ("boolean", "boolean"),
        ("byte", "int"),
        ("short", "int"),
        ("integer", "int"),
        ("long", "long"),
        ("float", "float"),
        ("double", "double"),
        ("string", "string"),
        ("varchar(10)", "string"),
        ("char(3)", "string"),
        ("binary", "bytes"),
        ("date", {"type": "int", "logicalType": "date"}),
        ("timestamp", {"type": "long", "logicalType": "timestamp-micros"}),
        ("timestamp_ntz", {"type": "long", "logicalType": "local-timestamp-micros"}),
        (
            "interval year to month",
            {"type": "int", "spark.sql.catalyst.type": "interval year to month"},
        ),
        (
            "interval day to second",
            {"type": "long", "spark.sql.catalyst.type": "interval day to second"},
        ),
        (
            "decimal(10,2)",
            {
                "type": "fixed",
                "name": "fixed",
                "namespace": "topLevelRecord.f",
                "size": 5,
                "logicalType": "decimal",
                "precision": 10,
                "scale": 2,
            },
        ),
        (
            {"type": "array", "elementType": "integer", "containsNull": True},
            {"type": "array", "items": ["int", "null"]},
        ),
        (
            {"type": "array", "elementType": "integer", "containsNull": False},
            {"type": "array", "items": "int"},
        ),
        (
            {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True},
            {"type": "map", "values": ["long", "null"]},
        ),
    ],
)
def test_each_spark_type_maps_as_spark_maps_it(spark: Any, avro: Any) -> None:
    assert _field_type(spark) == avro
    if spark != "null":
        assert _field_type(spark, nullable=True) == [avro, "null"]  # the type first, then null


def test_void_is_null_and_never_a_union() -> None:
    assert _field_type("null", nullable=True) == "null"


def test_nested_records_are_named_after_their_field_in_their_parents_namespace() -> None:
    inner = {
        "type": "struct",
        "fields": [
            {"name": "zip", "type": "decimal(5,0)", "nullable": False, "metadata": {}},
        ],
    }
    outer = {
        "type": "struct",
        "fields": [{"name": "address", "type": inner, "nullable": False, "metadata": {}}],
    }
    schema = derive_avro_schema(sql_type_from_json(outer), "Person", "com.example")
    assert schema.json == {
        "type": "record",
        "name": "Person",
        "namespace": "com.example",
        "fields": [
            {
                "name": "address",
                "type": {
                    "type": "record",
                    "name": "address",
                    "namespace": "com.example.Person",
                    "fields": [
                        {
                            "name": "zip",
                            "type": {
                                "type": "fixed",
                                "name": "fixed",
                                "namespace": "com.example.Person.address.zip",
                                "size": 3,
                                "logicalType": "decimal",
                                "precision": 5,
                                "scale": 0,
                            },
                        }
                    ],
                },
            }
        ],
    }
    assert isinstance(schema.root, AvroRecord)
    assert schema.root.name == "com.example.Person"


@pytest.mark.parametrize(
    ("precision", "size"), [(1, 1), (2, 1), (3, 2), (9, 4), (10, 5), (18, 8), (19, 9), (38, 16)]
)
def test_decimal_fixed_size_is_the_fewest_bytes_for_the_precision(
    precision: int, size: int
) -> None:
    assert min_bytes_for_precision(precision) == size


def test_map_keys_other_than_string_are_refused_with_the_fix() -> None:
    with pytest.raises(SinkSchemaError, match=r"value\.f: .*map<int,string>.*Avro map keys are "):
        _field_type({"type": "map", "keyType": "integer", "valueType": "string"})


def test_a_field_name_avro_cannot_hold_is_refused_naming_the_path() -> None:
    struct = {"type": "struct", "fields": [{"name": "a-b", "type": "long", "nullable": True}]}
    with pytest.raises(SinkSchemaError, match=r"value\.a-b: field name 'a-b' is not a valid Avro"):
        derive_avro_schema(sql_type_from_json(struct))


def test_arrow_types_as_spark_hands_them_read_as_the_spark_types() -> None:
    arrow = pa.struct(
        [
            pa.field("b", pa.bool_()),
            pa.field("i8", pa.int8()),
            pa.field("i16", pa.int16()),
            pa.field("i", pa.int32(), nullable=False),
            pa.field("l", pa.int64()),
            pa.field("f", pa.float32()),
            pa.field("d", pa.float64()),
            pa.field("s", pa.string()),
            pa.field("bin", pa.binary()),
            pa.field("dt", pa.date32()),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
            pa.field("ntz", pa.timestamp("us")),
            pa.field("dec", pa.decimal128(12, 3)),
            pa.field("dur", pa.duration("us")),
            pa.field("a", pa.list_(pa.field("item", pa.int64(), nullable=False))),
            pa.field("m", pa.map_(pa.string(), pa.float64())),
        ]
    )
    assert sql_type_from_arrow(arrow) == StructType(
        (
            StructField("b", AtomicType("boolean")),
            StructField("i8", AtomicType("tinyint")),
            StructField("i16", AtomicType("smallint")),
            StructField("i", AtomicType("int"), nullable=False),
            StructField("l", AtomicType("bigint")),
            StructField("f", AtomicType("float")),
            StructField("d", AtomicType("double")),
            StructField("s", AtomicType("string")),
            StructField("bin", AtomicType("binary")),
            StructField("dt", AtomicType("date")),
            StructField("ts", AtomicType("timestamp")),
            StructField("ntz", AtomicType("timestamp_ntz")),
            StructField("dec", DecimalType(12, 3)),
            StructField("dur", AtomicType("interval day to second")),
            StructField("a", ArrayType(AtomicType("bigint"), contains_null=False)),
            StructField("m", MapType(AtomicType("string"), AtomicType("double"))),
        )
    )


def test_spark_json_and_arrow_give_the_same_schema() -> None:
    spark_json = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "price", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
            {
                "name": "tags",
                "type": {"type": "array", "elementType": "string", "containsNull": True},
                "nullable": True,
                "metadata": {},
            },
        ],
    }
    arrow = pa.struct(
        [("id", pa.int64()), ("price", pa.decimal128(10, 2)), ("tags", pa.list_(pa.string()))]
    )
    assert (
        derive_avro_schema(sql_type_from_json(spark_json)).json
        == derive_avro_schema(sql_type_from_arrow(arrow)).json
    )


# ---- the writability check ----------------------------------------------------------------

ADDRESS = {
    "type": "struct",
    "fields": [
        {"name": "street", "type": "string", "nullable": True, "metadata": {}},
        {"name": "zip", "type": "string", "nullable": True, "metadata": {}},
    ],
}
PERSON = sql_type_from_json(
    {
        "type": "struct",
        "fields": [
            {"name": "name", "type": "string", "nullable": True, "metadata": {}},
            {"name": "address", "type": ADDRESS, "nullable": True, "metadata": {}},
        ],
    }
)


def _person_schema(zip_type: Any) -> str:
    import json

    return json.dumps(
        {
            "type": "record",
            "name": "Person",
            "fields": [
                {"name": "name", "type": "string"},
                {
                    "name": "address",
                    "type": [
                        "null",
                        {
                            "type": "record",
                            "name": "Address",
                            "fields": [
                                {"name": "street", "type": ["null", "string"]},
                                {"name": "zip", "type": zip_type},
                            ],
                        },
                    ],
                },
            ],
        }
    )


def test_a_mismatch_is_refused_naming_the_field_path() -> None:
    with pytest.raises(
        SinkSchemaError,
        match=r"^value\.address\.zip: Spark type string cannot be written as Avro int",
    ):
        bind(PERSON, parse_avro_schema(_person_schema("int")))


def test_a_matching_explicit_schema_binds_with_its_union_branches() -> None:
    binding = bind(PERSON, parse_avro_schema(_person_schema(["null", "string"])))
    address = binding.children[1]
    assert (address.branch, address.null_branch) == (1, 0)
    assert address.children[1].path == "value.address.zip"


@pytest.mark.parametrize(
    ("spark", "avro", "error"),
    [
        ("long", "int", "Spark type bigint cannot be written as Avro int"),
        ("double", "float", "Spark type double cannot be written as Avro float"),
        ("string", "bytes", "Spark type string cannot be written as Avro bytes"),
        ("timestamp", "int", "Spark type timestamp cannot be written as Avro int"),
        (
            "decimal(10,2)",
            {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3},
            "scale 2 is not the schema's 3",
        ),
        (
            "decimal(12,2)",
            {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
            "precision 12 exceeds the schema's 10",
        ),
        (
            "decimal(10,2)",
            {
                "type": "fixed",
                "name": "d",
                "size": 4,
                "logicalType": "decimal",
                "precision": 10,
                "scale": 2,
            },
            "10 digits need more than 4 bytes",
        ),
    ],
)
def test_refused_pairs_name_the_reason(spark: str, avro: Any, error: str) -> None:
    struct = sql_type_from_json({"type": "struct", "fields": [{"name": "f", "type": spark}]})
    schema = parse_avro_schema(
        {"type": "record", "name": "r", "fields": [{"name": "f", "type": avro}]}
    )
    with pytest.raises(
        SinkSchemaError, match=r"^value\.f: .*" + error.replace("(", r"\(").replace(")", r"\)")
    ):
        bind(struct, schema)


@pytest.mark.parametrize(
    ("spark", "avro"),
    [
        ("integer", "long"),
        ("short", "int"),
        ("float", "double"),
        ("string", {"type": "enum", "name": "E", "symbols": ["A", "B"]}),
        ("string", {"type": "string", "logicalType": "uuid"}),
        ("binary", {"type": "fixed", "name": "F", "size": 16}),
        ("timestamp", {"type": "long", "logicalType": "timestamp-millis"}),
        ("timestamp", "long"),
        ("date", "int"),
        ("decimal(5,2)", {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}),
        ("long", ["null", "string", "long"]),
    ],
)
def test_writable_pairs_bind(spark: str, avro: Any) -> None:
    struct = sql_type_from_json({"type": "struct", "fields": [{"name": "f", "type": spark}]})
    bind(
        struct,
        parse_avro_schema({"type": "record", "name": "r", "fields": [{"name": "f", "type": avro}]}),
    )


def test_fields_are_matched_by_name_and_extra_ones_refused_or_written_as_null() -> None:
    struct = sql_type_from_json(
        {"type": "struct", "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "long"}]}
    )
    no_b = parse_avro_schema(
        {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}
    )
    with pytest.raises(SinkSchemaError, match=r"^value\.b: the Spark field has no field in Avro"):
        bind(struct, no_b)
    extra = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "b", "type": "long"},
            {"name": "c", "type": ["null", "int"]},
            {"name": "a", "type": "long"},
        ],
    }
    binding = bind(struct, parse_avro_schema(extra))
    assert binding.sources == (1, None, 0)
    extra["fields"][1]["type"] = "int"  # type: ignore[index]
    with pytest.raises(
        SinkSchemaError, match=r"^value\.c: Avro field of type int has no Spark field"
    ):
        bind(struct, parse_avro_schema(extra))


def test_named_types_resolve_through_namespaces_and_recursion() -> None:
    schema = parse_avro_schema(
        {
            "type": "record",
            "name": "Node",
            "namespace": "com.example",
            "fields": [
                {"name": "value", "type": {"type": "fixed", "name": "Id", "size": 2}},
                {"name": "other", "type": "com.example.Id"},
                {"name": "same", "type": "Id"},
                {"name": "next", "type": ["null", "Node"]},
            ],
        }
    )
    assert isinstance(schema.root, AvroRecord)
    fields = schema.root.fields
    assert fields[0].type is fields[1].type is fields[2].type
    assert fields[3].type.branches[1] is schema.root  # type: ignore[union-attr]
    again = pickle.loads(pickle.dumps(schema))
    assert again.json == schema.json


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{not json", "not valid JSON"),
        (
            '{"type": "record", "name": "r", "fields": [{"name": "a", "type": "Missing"}]}',
            "refers to 'Missing'",
        ),
        (
            '[{"type": "fixed", "name": "a", "size": 1}, '
            '{"type": "fixed", "name": "a", "size": 2}]',
            "defines the name 'a' twice",
        ),
    ],
)
def test_invalid_explicit_schemas_are_refused(text: str, error: str) -> None:
    with pytest.raises(SinkSchemaError, match=error):
        parse_avro_schema(text)


def test_every_derived_schema_is_valid_for_fastavro_and_binds_to_its_type() -> None:
    fastavro = pytest.importorskip("fastavro")
    struct = sql_type_from_json(
        {
            "type": "struct",
            "fields": [
                {"name": "a", "type": {"type": "array", "elementType": ADDRESS}},
                {"name": "m", "type": {"type": "map", "keyType": "string", "valueType": ADDRESS}},
                {"name": "d1", "type": "decimal(4,1)"},
                {
                    "name": "s",
                    "type": {"type": "struct", "fields": [{"name": "d1", "type": "decimal(4,1)"}]},
                },
            ],
        }
    )
    schema = derive_avro_schema(struct)
    fastavro.parse_schema(schema.json)
    bind(struct, schema)
