"""JSON Schema: the schema derived from each Spark type, the binding check, the columnar encoder.

Random Spark-shaped struct columns (nested structs, arrays, maps, decimals with their edge
values, extreme ints, unicode with quotes, backslashes and control characters, nulls at every
level, empty arrays and maps) are encoded in bulk; each payload must parse (``json.loads``) to
exactly the row's values, validate against the derived schema (jsonschema), and, framed, equal
confluent-kafka's ``JSONSerializer`` output once parsed, with the same 5-byte header.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import pickle
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from kafka_sink.formats.json_columnar import JsonColumnEncoder
from kafka_sink.formats.json_schema import (
    DRAFT_07,
    bind_json,
    derive_json_schema,
    parse_json_schema,
)
from kafka_sink.formats.json_serializer import JsonSchemaSerializer
from kafka_sink.formats.sql_types import sql_type_from_arrow, sql_type_from_json
from kafka_sink.sink_errors import SinkDataError, SinkSchemaError
from tests.unit.formats.avro_strategies import columns
from tests.unit.formats.confluent_reference import confluent_serializer

jsonschema = pytest.importorskip("jsonschema")

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_NULL = {"type": "null"}


# ---- the mapping ------------------------------------------------------------------------------

_MAPPING = [
    ("boolean", {"type": "boolean"}),
    ("byte", {"type": "integer"}),
    ("short", {"type": "integer"}),
    ("integer", {"type": "integer"}),
    ("long", {"type": "integer"}),
    ("float", {"type": "number"}),
    ("double", {"type": "number"}),
    ("decimal(38,10)", {"type": "number"}),
    ("string", {"type": "string"}),
    ("varchar(5)", {"type": "string"}),
    ("binary", {"type": "string", "contentEncoding": "base64"}),
    ("date", {"type": "string", "format": "date"}),
    ("timestamp", {"type": "string", "format": "date-time"}),
    ("timestamp_ntz", {"type": "string"}),
    ("interval year to month", {"type": "integer"}),
    ("interval day to second", {"type": "integer"}),
    ("null", {"type": "null"}),
    (
        {"type": "array", "elementType": "long", "containsNull": True},
        {"type": "array", "items": {"oneOf": [_NULL, {"type": "integer"}]}},
    ),
    (
        {"type": "array", "elementType": "long", "containsNull": False},
        {"type": "array", "items": {"type": "integer"}},
    ),
    (
        {"type": "map", "keyType": "string", "valueType": "double", "valueContainsNull": False},
        {"type": "object", "additionalProperties": {"type": "number"}},
    ),
]


@pytest.mark.parametrize(("spark", "expected"), _MAPPING)
def test_every_spark_type_has_its_documented_json_schema(spark: Any, expected: Any) -> None:
    field = {"name": "f", "type": spark, "nullable": False}
    schema = derive_json_schema(sql_type_from_json({"type": "struct", "fields": [field]}))
    assert schema.json == {
        "$schema": DRAFT_07,
        "title": "topLevelRecord",
        "type": "object",
        "properties": {"f": expected},
        "required": ["f"],
    }


def test_nullable_fields_are_one_of_null_and_nested_structs_are_objects() -> None:
    spark = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": False},
            {
                "name": "address",
                "type": {"type": "struct", "fields": [{"name": "zip", "type": "string"}]},
                "nullable": True,
            },
        ],
    }
    schema = derive_json_schema(sql_type_from_json(spark), title="Order")
    address = {"type": "object", "properties": {"zip": {"oneOf": [_NULL, {"type": "string"}]}}}
    assert schema.title == "Order"
    assert schema.json["required"] == ["id"]  # the non-nullable fields
    assert schema.json["properties"] == {
        "id": {"type": "integer"},
        "address": {"oneOf": [_NULL, address]},
    }
    jsonschema.Draft7Validator.check_schema(schema.json)


def test_a_map_with_non_string_keys_is_refused_naming_the_path() -> None:
    spark = {"type": "map", "keyType": "integer", "valueType": "string"}
    t = sql_type_from_json({"type": "struct", "fields": [{"name": "tags", "type": spark}]})
    with pytest.raises(SinkSchemaError, match=r"value\.tags: .*cast the map's keys to string"):
        derive_json_schema(t)


# ---- binding to an explicit schema ------------------------------------------------------------

_ORDER = pa.struct(
    [
        ("id", pa.int64()),
        ("amount", pa.decimal128(10, 2)),
        ("address", pa.struct([("zip", pa.string())])),
    ]
)


def _bind(schema: Any, t: pa.DataType = _ORDER) -> Any:
    return bind_json(sql_type_from_arrow(t), parse_json_schema(json.dumps(schema)))


def test_a_type_mismatch_names_the_field_path() -> None:
    schema = {
        "type": "object",
        "properties": {"address": {"type": "object", "properties": {"zip": {"type": "integer"}}}},
    }
    with pytest.raises(SinkSchemaError, match=r"value\.address\.zip: Spark type string .* integer"):
        _bind(schema)


def test_required_properties_and_closed_objects_are_checked() -> None:
    with pytest.raises(SinkSchemaError, match=r"value: .*requires property 'customer'"):
        _bind({"type": "object", "required": ["customer"]})
    closed = {"type": "object", "properties": {"id": {}}, "additionalProperties": False}
    with pytest.raises(SinkSchemaError, match=r"value\.amount: .*additionalProperties is false"):
        _bind(closed)


def test_explicit_features_refs_quoted_decimals_and_type_lists() -> None:
    schema = {
        "definitions": {"Zip": {"type": ["string", "null"]}},
        "type": "object",
        "properties": {
            "id": {"type": "number"},
            "amount": {"anyOf": [{"type": "string"}, _NULL]},
            "address": {"type": "object", "properties": {"zip": {"$ref": "#/definitions/Zip"}}},
        },
    }
    binding = _bind(schema)
    assert binding.children[1].quoted and binding.children[1].nullable
    row = {"id": 7, "amount": decimal.Decimal("-0.50"), "address": {"zip": 'a"b'}}
    (payload,) = (
        JsonColumnEncoder(parse_json_schema(schema)).encode(pa.array([row], _ORDER)).to_pylist()
    )
    assert json.loads(payload) == {"id": 7, "amount": "-0.50", "address": {"zip": 'a"b'}}
    jsonschema.validate(json.loads(payload), schema)


def test_a_null_where_the_schema_has_no_null_names_the_path_and_row() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "integer"}}}
    encoder = JsonColumnEncoder(parse_json_schema(schema))
    rows = [{"id": 1, "amount": None, "address": None}, {"id": None, "amount": None}]
    with pytest.raises(SinkDataError, match=r"value\.id: row 1 is null"):
        encoder.encode(pa.array(rows, _ORDER))


def test_non_finite_floats_are_refused_naming_the_path_and_row() -> None:
    t = pa.struct([("x", pa.float64())])
    with pytest.raises(SinkDataError, match=r"value\.x: row 2 is NaN or infinite"):
        JsonColumnEncoder().encode(pa.array([{"x": 1.0}, {"x": None}, {"x": math.inf}], t))


# ---- the columnar encoder on random data ------------------------------------------------------


def _same(parsed: Any, value: Any, t: pa.DataType) -> bool:
    """Whether a payload's parsed value (floats as Decimal) is exactly the row's value."""
    if value is None:
        return parsed is None
    if pa.types.is_struct(t):
        names = [t.field(i).name for i in range(t.num_fields)]
        return list(parsed) == names and all(
            _same(parsed[n], value[n], t.field(i).type) for i, n in enumerate(names)
        )
    if pa.types.is_map(t):
        return list(parsed) == [k for k, _ in value] and all(
            _same(parsed[k], v, t.item_type) for k, v in value
        )
    if pa.types.is_list(t):
        return len(parsed) == len(value) and all(
            _same(p, v, t.value_type) for p, v in zip(parsed, value, strict=True)
        )
    if pa.types.is_float32(t):
        return bool(np.float32(parsed) == np.float32(value))
    if pa.types.is_floating(t):
        return float(parsed) == value
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        text = value.isoformat(timespec="microseconds")
        return bool(parsed == (text + "Z" if t.tz is not None else text))
    if pa.types.is_date(t):
        return bool(parsed == value.isoformat())
    if pa.types.is_binary(t):
        return base64.b64decode(parsed, validate=True) == value
    if pa.types.is_decimal(t):
        return bool(decimal.Decimal(parsed) == value)
    return type(parsed) is type(value) and bool(parsed == value)


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    return False


@_SETTINGS
@given(columns())
def test_bulk_payloads_parse_to_the_rows_values_and_fit_the_schema(
    column: tuple[pa.DataType, list[Any]],
) -> None:
    t, rows = column
    array = pa.array(rows, type=t)
    schema = derive_json_schema(sql_type_from_arrow(t))
    values = array.to_pylist()
    if _has_non_finite(values):
        with pytest.raises(SinkDataError, match="NaN or infinite"):
            JsonColumnEncoder().encode(array)
        return
    payloads = JsonColumnEncoder().encode(array).to_pylist()
    assert len(payloads) == len(values)
    for payload, value in zip(payloads, values, strict=True):
        if value is None:
            assert payload is None  # a tombstone, not the text null
            continue
        parsed = json.loads(payload.decode("utf-8"), parse_float=decimal.Decimal)
        assert _same(parsed, value, t), (payload, value)
        jsonschema.validate(json.loads(payload), schema.json)


def _as_confluent(value: Any, t: pa.DataType) -> Any:
    """A row as confluent-kafka's JSONSerializer takes it: plain JSON-ready Python values."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {
            t.field(i).name: _as_confluent(value[t.field(i).name], t.field(i).type)
            for i in range(t.num_fields)
        }
    if pa.types.is_map(t):
        return {k: _as_confluent(v, t.item_type) for k, v in value}
    if pa.types.is_list(t):
        return [_as_confluent(v, t.value_type) for v in value]
    if pa.types.is_float32(t):
        return float(str(np.float32(value)))  # the float32's shortest text, as written
    if pa.types.is_decimal(t):
        # Ours writes a decimal's exact digits: past 2**53 an integral one reads back as an int,
        # which a float would not equal.
        return int(value) if t.scale == 0 else float(value)
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return json.loads(JsonSchemaSerializer().serialize(value) or b"")
    if pa.types.is_binary(t):
        return base64.b64encode(value).decode()
    return value


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns(max_rows=8))
def test_framed_payloads_equal_confluent_kafkas_json_serializer(
    column: tuple[pa.DataType, list[Any]],
) -> None:
    t, rows = column
    array = pa.array(rows, type=t)
    if _has_non_finite(array.to_pylist()):
        return  # refused, tested above
    schema = derive_json_schema(sql_type_from_arrow(t))
    schema_id, theirs = confluent_serializer("JSON", schema.text)
    expected = [theirs(_as_confluent(row, t)) for row in array.to_pylist()]
    ours = JsonSchemaSerializer(schema, schema_id=schema_id).serialize_column(array).to_pylist()
    for mine, their in zip(ours, expected, strict=True):
        if their is None:
            assert mine is None
            continue
        assert mine[:5] == their[:5]
        assert json.loads(mine[5:]) == json.loads(their[5:])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns(max_rows=6))
def test_sliced_and_chunked_columns_encode_like_whole_ones(
    column: tuple[pa.DataType, list[Any]],
) -> None:
    t, rows = column
    array = pa.array(rows, type=t)
    if _has_non_finite(array.to_pylist()) or len(array) < 2:
        return
    encoder = JsonColumnEncoder()
    whole = encoder.encode(array).to_pylist()
    assert encoder.encode(array.slice(1)).to_pylist() == whole[1:]
    chunked = pa.chunked_array([array.slice(0, 1), array.slice(1)])
    assert encoder.encode(chunked).to_pylist() == whole


# ---- the producer's serializer ----------------------------------------------------------------


def test_the_serializer_is_a_producer_value_serializer_and_pickles() -> None:
    row = {
        "id": 1,
        "amount": decimal.Decimal("12345678901234567890.01"),
        "at": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        "day": dt.date(2024, 1, 2),
        "raw": b"\x00\xff",
        "tags": ["a\n", 'q"'],
    }
    serializer = JsonSchemaSerializer(schema_id=3)
    payload = serializer(row)
    assert payload is not None and payload[:5] == b"\x00\x00\x00\x00\x03"
    assert json.loads(payload[5:], parse_float=decimal.Decimal) == {
        **row,
        "at": "2024-01-02T03:04:05.000000Z",
        "day": "2024-01-02",
        "raw": "AP8=",
    }
    assert serializer(None) is None
    copy = pickle.loads(pickle.dumps(serializer))
    assert copy.serialize_column(pa.array([None, {"x": 1}])).to_pylist() == [
        None,
        b'\x00\x00\x00\x00\x03{"x":1}',
    ]
    with pytest.raises(ValueError):
        serializer({"x": math.nan})
    assert "secret" not in repr(serializer)


def test_dates_and_timestamps_past_year_9999_fall_back_to_arrows_formatting() -> None:
    days = pa.array([3_000_000, -1, None], pa.int32()).cast(pa.date32())
    micros = pa.array([3_000_000 * 86_400_000_000, -1, None], pa.int64())
    t = pa.struct([("d", pa.date32()), ("t", pa.timestamp("us", tz="UTC"))])
    column = pa.StructArray.from_arrays([days, micros.cast(t.field(1).type)], fields=list(t))
    assert [json.loads(p) for p in JsonColumnEncoder().encode(column).to_pylist()] == [
        {"d": "10183-09-21", "t": "10183-09-21T00:00:00.000000Z"},
        {"d": "1969-12-31", "t": "1969-12-31T23:59:59.999999Z"},
        {"d": None, "t": None},
    ]
