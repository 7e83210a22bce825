"""The columnar Avro encoder, byte for byte against fastavro and confluent-kafka's serializer.

Random Spark-shaped struct columns (nested structs, arrays, maps, decimals of every precision
with their edge values, extreme ints, unicode, nulls at every level, empty arrays and maps)
are encoded in bulk and compared with fastavro's ``schemaless_writer`` row by row; framed,
with confluent-kafka's ``AvroSerializer`` over its mock registry.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import pickle
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from kafka_sink.formats.avro_columnar import AvroColumnEncoder
from kafka_sink.formats.avro_schema import derive_avro_schema, parse_avro_schema
from kafka_sink.formats.avro_serializer import AvroSerializer
from kafka_sink.formats.sql_types import sql_type_from_arrow
from kafka_sink.formats.wire_format import frame_column
from kafka_sink.sink_errors import SinkDataError
from tests.unit.formats.avro_strategies import as_fastavro, columns
from tests.unit.formats.confluent_reference import confluent_serializer

fastavro = pytest.importorskip("fastavro")

_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _fastavro_payloads(schema_json: Any, t: pa.DataType, rows: list[Any]) -> list[bytes | None]:
    parsed = fastavro.parse_schema(schema_json)
    out: list[bytes | None] = []
    for row in rows:
        if row is None:
            out.append(None)
            continue
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed, as_fastavro(row, t))
        out.append(buffer.getvalue())
    return out


@_SETTINGS
@given(columns())
def test_columnar_payloads_equal_fastavros(column: tuple[pa.DataType, list[Any]]) -> None:
    t, rows = column
    array = pa.array(rows, type=t)
    schema = derive_avro_schema(sql_type_from_arrow(t))
    encoded = AvroColumnEncoder(schema).encode(array)
    assert encoded.to_pylist() == _fastavro_payloads(schema.json, t, array.to_pylist())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns(max_rows=6))
def test_sliced_and_chunked_columns_encode_like_whole_ones(
    column: tuple[pa.DataType, list[Any]],
) -> None:
    t, rows = column
    array = pa.array([*rows, *rows], type=t)
    encoder = AvroColumnEncoder(derive_avro_schema(sql_type_from_arrow(t)))
    whole = encoder.encode(array).to_pylist()
    assert encoder.encode(array.slice(len(rows))).to_pylist() == whole[len(rows) :]
    chunked = pa.chunked_array([array.slice(0, 1), array.slice(1)], type=t)
    assert encoder.encode(chunked).to_pylist() == whole


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns(max_rows=8))
def test_framed_payloads_equal_confluent_kafkas_avro_serializer(
    column: tuple[pa.DataType, list[Any]],
) -> None:
    t, rows = column
    array = pa.array(rows, type=t)
    schema = derive_avro_schema(sql_type_from_arrow(t))
    schema_id, theirs = confluent_serializer("AVRO", schema.text)
    expected = [theirs(as_fastavro(row, t)) for row in array.to_pylist()]
    ours = AvroSerializer(schema, schema_id=schema_id)
    assert ours.serialize_column(array).to_pylist() == expected
    # the per-record form, as the producer's value.serializer calls it
    assert [ours(as_fastavro(row, t)) for row in array.to_pylist()] == expected


def test_explicit_schema_features_equal_fastavro() -> None:
    """Enums from strings, fixed, null-first unions, a missing nullable field, millis, bytes
    decimals of a wider precision, ints written as longs, a multi-branch union."""
    schema = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {
                "name": "status",
                "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]},
            },
            {"name": "id", "type": {"type": "fixed", "name": "Id", "size": 4}},
            {"name": "note", "type": ["null", "string"]},
            {"name": "coupon", "type": ["null", "string"], "default": None},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "total",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 2},
            },
            {"name": "qty", "type": "long"},
            {"name": "ref", "type": ["null", "string", "long"]},
            {"name": "ratio", "type": "double"},
        ],
    }
    t = pa.struct(
        [
            ("qty", pa.int32()),
            ("status", pa.string()),
            ("id", pa.binary()),
            ("note", pa.string()),
            ("at", pa.timestamp("us", tz="UTC")),
            ("total", pa.decimal128(10, 2)),
            ("ref", pa.int64()),
            ("ratio", pa.float32()),
        ]
    )
    at = dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=dt.UTC)  # floors to -1 ms
    rows = [
        {
            "qty": 1,
            "status": "NEW",
            "id": b"abcd",
            "note": None,
            "at": at,
            "total": decimal.Decimal("-1.28"),
            "ref": 5,
            "ratio": 0.5,
        },
        {
            "qty": -7,
            "status": "PAID",
            "id": b"\x00\x01\x02\x03",
            "note": "ü",
            "at": at,
            "total": decimal.Decimal("99999999.99"),
            "ref": None,
            "ratio": -2.25,
        },
    ]
    array = pa.array(rows, type=t)
    parsed = parse_avro_schema(json.dumps(schema))
    encoded = AvroColumnEncoder(parsed).encode(array).to_pylist()
    expected = []
    for row in array.to_pylist():
        datum = {**row, "coupon": None}
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema), datum)
        expected.append(buffer.getvalue())
    assert encoded == expected


def _one_field(avro_type: Any, arrow_type: pa.DataType, values: list[Any]) -> Any:
    schema = parse_avro_schema(
        {"type": "record", "name": "r", "fields": [{"name": "f", "type": avro_type}]}
    )
    array = pa.array([{"f": v} for v in values], type=pa.struct([("f", arrow_type)]))
    return AvroColumnEncoder(schema).encode(array)


def test_a_null_where_the_avro_type_has_no_null_names_the_path_and_row() -> None:
    with pytest.raises(SinkDataError, match=r"^value\.f: row 1 is null, but Avro long cannot"):
        _one_field("long", pa.int64(), [1, None])


def test_a_null_inside_a_null_parent_is_not_an_error() -> None:
    schema = parse_avro_schema(
        {
            "type": "record",
            "name": "r",
            "fields": [
                {
                    "name": "s",
                    "type": [
                        "null",
                        {"type": "record", "name": "s", "fields": [{"name": "x", "type": "long"}]},
                    ],
                }
            ],
        }
    )
    t = pa.struct([("s", pa.struct([("x", pa.int64())]))])
    array = pa.array([{"s": None}, {"s": {"x": 3}}], type=t)
    assert AvroColumnEncoder(schema).encode(array).to_pylist() == [b"\x00", b"\x02\x06"]


def test_a_string_that_is_no_enum_symbol_is_refused() -> None:
    enum = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    with pytest.raises(SinkDataError, match=r"^value\.f: row 2 holds 'C', which is not a symbol"):
        _one_field(enum, pa.string(), ["A", "B", "C"])


def test_a_fixed_of_the_wrong_size_is_refused() -> None:
    fixed = {"type": "fixed", "name": "F", "size": 2}
    with pytest.raises(SinkDataError, match=r"^value\.f: row 0 has 3 bytes, but Avro fixed F"):
        _one_field(fixed, pa.binary(), [b"abc"])


def test_null_rows_are_tombstones_and_the_encoder_pickles() -> None:
    encoder = AvroColumnEncoder(
        derive_avro_schema(sql_type_from_arrow(pa.struct([("a", pa.int64())])))
    )
    again = pickle.loads(pickle.dumps(encoder))
    array = pa.array([None, {"a": 1}], type=pa.struct([("a", pa.int64())]))
    assert again.encode(array).to_pylist() == [None, b"\x00\x02"]


def test_non_struct_columns_encode_too() -> None:
    array = pa.array(["x", None, ""], type=pa.string())
    encoder = AvroColumnEncoder(derive_avro_schema(sql_type_from_arrow(array.type)))
    assert encoder.encode(array).to_pylist() == [b"\x02x", None, b"\x00"]


def test_frame_column_prefixes_magic_byte_and_id_and_keeps_nulls() -> None:
    payloads = pa.array([b"\x02", None, b""], type=pa.binary())
    assert frame_column(payloads, 258).to_pylist() == [
        b"\x00\x00\x00\x01\x02\x02",
        None,
        b"\x00\x00\x00\x01\x02",
    ]


def test_the_serializer_is_a_producer_value_serializer() -> None:
    from kafka_sink.producer.plugins import check_plugin, load_serializer

    schema = '{"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}'
    serializer = AvroSerializer(schema, schema_id=9)
    check_plugin("value.serializer", serializer)
    loaded = load_serializer("value.serializer", serializer)
    assert loaded("t", {"a": -1}, []) == b"\x00\x00\x00\x00\x09\x01"
    assert loaded("t", None, []) is None
    plain = pickle.loads(pickle.dumps(AvroSerializer(schema)))
    assert plain({"a": 1}) == b"\x02"
    assert repr(serializer) == "AvroSerializer(r, schema_id=9)"
