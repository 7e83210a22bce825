"""Hypothesis strategies for the Avro tests: random Spark-shaped Arrow types and rows for them,
and the rows as fastavro and confluent-kafka take them."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

UTC = dt.UTC

_INTS = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


@st.composite
def decimal_types(draw: st.DrawFn) -> pa.DataType:
    precision = draw(st.integers(1, 38))
    return pa.decimal128(precision, draw(st.integers(0, precision)))


atomic_types = st.one_of(
    st.sampled_from(
        [
            pa.bool_(),
            *_INTS.values(),
            pa.float32(),
            pa.float64(),
            pa.string(),
            pa.binary(),
            pa.date32(),
            pa.timestamp("us", tz="UTC"),
            pa.timestamp("us"),
        ]
    ),
    decimal_types(),
)

_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)


def _fields(inner: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    return st.lists(
        st.tuples(_NAMES, inner, st.booleans()), min_size=1, max_size=4, unique_by=lambda f: f[0]
    ).map(lambda fs: pa.struct([pa.field(n, t, nullable=nb) for n, t, nb in fs]))


spark_types = st.recursive(
    atomic_types,
    lambda inner: st.one_of(
        st.tuples(inner, st.booleans()).map(
            lambda p: pa.list_(pa.field("element", p[0], nullable=p[1]))
        ),
        st.tuples(inner, st.booleans()).map(
            lambda p: pa.map_(
                pa.field("key", pa.string(), nullable=False),
                pa.field("value", p[0], nullable=p[1]),
            )
        ),
        _fields(inner),
    ),
    max_leaves=8,
)
struct_types = _fields(spark_types)


def _decimal_values(t: pa.Decimal128Type) -> st.SearchStrategy[decimal.Decimal]:
    top = 10**t.precision - 1
    edges = [0, 1, -1, top, -top, 127, -128, 128, -129, 255, -256]
    unscaled = st.one_of(
        st.sampled_from([e for e in edges if abs(e) <= top]),
        st.integers(-top, top),
        st.integers(0, 127).map(lambda k: -(2**k)).filter(lambda v: -top <= v),
    )
    return unscaled.map(lambda u: decimal.Decimal(f"{u}e-{t.scale}"))


_TS_MIN = dt.datetime(1, 1, 1)
_TS_MAX = dt.datetime(9999, 12, 31, 23, 59, 59)


def values(t: pa.DataType, nullable: bool = True) -> st.SearchStrategy[Any]:
    """Python values of type ``t`` as ``pa.array`` takes them (maps as lists of pairs)."""
    strategy = _non_null_values(t)
    return st.one_of(st.none(), strategy) if nullable else strategy


def _non_null_values(t: pa.DataType) -> st.SearchStrategy[Any]:
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_integer(t):
        bits = t.bit_width
        edges = [0, -1, 1, 63, 64, -64, -65, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1]
        return st.one_of(
            st.sampled_from(edges), st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        )
    if pa.types.is_floating(t):
        return st.floats(width=32 if pa.types.is_float32(t) else 64, allow_nan=False)
    if pa.types.is_string(t):
        return st.text(max_size=12)
    if pa.types.is_binary(t):
        return st.binary(max_size=12)
    if pa.types.is_date(t):
        return st.dates()
    if pa.types.is_timestamp(t):
        if t.tz is None:
            return st.datetimes(_TS_MIN, _TS_MAX)
        return st.datetimes(_TS_MIN, _TS_MAX, timezones=st.just(UTC))
    if pa.types.is_decimal(t):
        return _decimal_values(t)
    if pa.types.is_map(t):
        item = values(t.item_type, t.item_field.nullable)
        return st.dictionaries(st.text(max_size=6), item, max_size=3).map(lambda d: list(d.items()))
    if pa.types.is_list(t):
        return st.lists(values(t.value_type, t.value_field.nullable), max_size=3)
    assert pa.types.is_struct(t), t
    return st.fixed_dictionaries(
        {t.field(i).name: values(t.field(i).type, t.field(i).nullable) for i in range(t.num_fields)}
    )


@st.composite
def columns(draw: st.DrawFn, max_rows: int = 12) -> tuple[pa.DataType, list[Any]]:
    """A struct type and rows of it (a row may be null: a tombstone)."""
    t = draw(struct_types)
    rows = draw(st.lists(values(t, nullable=True), max_size=max_rows))
    return t, rows


def as_fastavro(value: Any, t: pa.DataType) -> Any:
    """A row as fastavro's writers take it: maps as dicts, the rest as pyarrow gives it."""
    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: as_fastavro(v, t.item_type) for k, v in value}
    if pa.types.is_list(t):
        return [as_fastavro(v, t.value_type) for v in value]
    if pa.types.is_struct(t):
        return {
            t.field(i).name: as_fastavro(value[t.field(i).name], t.field(i).type)
            for i in range(t.num_fields)
        }
    return value
