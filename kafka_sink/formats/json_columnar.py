"""JSON text of whole Arrow columns: one UTF-8 JSON payload per row, built in bulk.

Role: the executor-side half of the JSON Schema format. ``encode_column(array, binding)`` turns
an Arrow column (typically the struct ``value`` or ``key`` column of the batch Spark hands a
task) into a ``large_binary`` array of JSON documents, one per row, following the
``JsonBinding`` that ``json_schema.bind_json`` built on the driver. ``JsonColumnEncoder`` binds
a schema (explicit, or derived from the column's type) to each Arrow type it meets once and
encodes batch after batch with that plan.

How: every value becomes a column of its JSON text (``formats.columnar``'s piece columns), built
with ``pyarrow.compute`` and numpy: integers, floats and decimals are cast to strings (Arrow
writes the shortest text that reads back to the same float, e.g. ``0.1``, ``1e+20``; a float32
as its own shortest text, as Spark's ``to_json`` does; decimals with their scale's digits, or
Arrow's exponent form such as ``1E-10`` for small ones, both JSON numbers); booleans are
``true``/``false`` by ``if_else``; strings are escaped with ``replace_substring``, one pass per
character present that needs it (backslash, quote, control characters as ``\\n`` or
``\\u001f``; found by one numpy pass over the bytes), and quoted; dates and timestamps are
ISO-8601 text laid out by numpy (``formats.iso_text``; UTC with ``Z``, microseconds); a
struct joins ``{"name":`` + value + ``,...}`` per row (the field names escaped once); arrays and
maps build all their items' text at once, put a comma before every item but each row's first
(a validity mask, no copy), and group each row's items by the list offsets (zero-copy) between
brackets. A null value is the text ``null`` (a struct's null fields are written, not omitted).
Binary values are the one type without a bulk path: they are base64-encoded per row with the
stdlib (``base64``).

Invariants: each payload is valid JSON that parses to exactly the row's values (the tests hold
it to ``json.loads`` on random data and to confluent-kafka's ``JSONSerializer``); the text is
UTF-8, non-ASCII characters unescaped; a null input row is a null output row (a tombstone, never
encoded); a null where the schema has no null, or a NaN or infinite float (JSON has no such
number), raises :class:`~kafka_sink.sink_errors.SinkDataError` naming the field path and row.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_sink.formats.base import ColumnEncoder
from kafka_sink.formats.columnar import (
    PIECES,
    as_pieces,
    constant_pieces,
    group_pieces,
    join_pieces,
    list_offsets,
    micros,
    only_rows,
    plain_layout,
)
from kafka_sink.formats.iso_text import iso_dates, iso_timestamps
from kafka_sink.formats.json_schema import (
    JsonBinding,
    JsonSchema,
    bind_json,
    derive_json_schema,
)
from kafka_sink.formats.sql_types import (
    ArrayType,
    AtomicType,
    DecimalType,
    MapType,
    SqlType,
    StructType,
)
from kafka_sink.records.arrow import binary_offsets, binary_scalar, int_column, valid_mask
from kafka_sink.sink_errors import SinkDataError

__all__ = ["JsonColumnEncoder", "encode_column"]

_Mask = npt.NDArray[np.bool_]
_NULL = binary_scalar(b"null", large=True)
_TRUE = binary_scalar(b"true", large=True)
_FALSE = binary_scalar(b"false", large=True)
_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


class JsonColumnEncoder(ColumnEncoder[JsonSchema | None, JsonBinding]):
    """Encodes columns with one JSON Schema (None: the schema derived from each column's type).

    Binds once per Arrow type it is given. Picklable; build it on the driver, use it in tasks.
    """

    def __init__(self, schema: JsonSchema | None = None, path: str = "value") -> None:
        super().__init__(schema, path)

    def _bind(self, sql_type: SqlType) -> JsonBinding:
        schema = self.schema if self.schema is not None else derive_json_schema(sql_type)
        return bind_json(sql_type, schema, self.path)

    def _encode_bound(self, array: Any, binding: JsonBinding) -> Any:
        return encode_column(array, binding)


def encode_column(array: Any, binding: JsonBinding) -> Any:
    """One JSON document per row of ``array`` (``large_binary``); a null row stays null."""
    arr = _plain(array)
    valid = valid_mask(arr)
    text = _text(arr, binding, valid)
    return text if arr.null_count == 0 else only_rows(text, valid)


def _plain(arr: Any) -> Any:
    """The array as the encoders read it, strings as ``large_string`` (what the escaping takes)."""
    arr = plain_layout(arr)
    return arr.cast(pa.large_string()) if pa.types.is_string(arr.type) else arr


def _text(arr: Any, b: JsonBinding, live: _Mask) -> Any:
    """Every row's JSON text as a piece column without nulls (``null`` for a null row).

    Only ``live`` rows must be right: the others are dropped by a parent.
    """
    arr = _plain(arr)
    valid = valid_mask(arr)
    if not b.nullable:
        _refuse(b, live & ~valid, "is null, but the JSON Schema does not allow null here", "fill")
    text = _value(arr, b, live & valid)
    if arr.null_count == 0:
        return text
    return pc.if_else(pc.is_valid(arr), text, _NULL)


def _refuse(b: JsonBinding, bad: _Mask, what: str, fix: str) -> None:
    if bad.any():
        row = int(np.argmax(bad))
        fixes = {
            "fill": "fill the nulls (coalesce), or allow null in the schema",
            "finite": "replace NaN and infinities (e.g. with null) before writing",
        }
        raise SinkDataError(f"{b.path}: row {row} {what}. Fix: {fixes[fix]}")


def _value(arr: Any, b: JsonBinding, live: _Mask) -> Any:
    t = b.sql
    if isinstance(t, StructType):
        return _struct(arr, b, live)
    if isinstance(t, ArrayType):
        return _list(arr, b, live, is_map=False)
    if isinstance(t, MapType):
        return _list(arr, b, live, is_map=True)
    if isinstance(t, DecimalType):
        digits = as_pieces(arr.cast(pa.large_string()))
        return join_pieces([b'"', digits, b'"'], len(arr)) if b.quoted else digits
    assert isinstance(t, AtomicType)
    return _atomic(arr, t.name, b, live)


def _atomic(arr: Any, name: str, b: JsonBinding, live: _Mask) -> Any:
    if name == "void" or pa.types.is_null(arr.type):
        return constant_pieces(b"null", len(arr))
    if name == "boolean":
        return pc.if_else(arr, _TRUE, _FALSE)
    if name in ("float", "double"):
        finite = pc.fill_null(pc.is_finite(arr), True).to_numpy(zero_copy_only=False)
        _refuse(b, live & ~finite, "is NaN or infinite, which JSON cannot write", "finite")
        return as_pieces(arr.cast(pa.large_string()))
    t = arr.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return _dates_and_times(arr)
    if pa.types.is_duration(t):
        return as_pieces(pa.array(micros(arr)).cast(pa.large_string()))
    if pa.types.is_large_string(t):
        return quoted_strings(arr)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _base64_per_row(arr)
    return as_pieces(arr.cast(pa.large_string()))  # integers


def _dates_and_times(arr: Any) -> Any:
    """ISO-8601 text, built with numpy (``iso_text``); Arrow's formatting for years past 9999."""
    t = arr.type
    valid = valid_mask(arr)
    if pa.types.is_date(t):
        days = int_column(arr.cast(pa.date32()).view(pa.int32()), 0, np.int64)
        text = iso_dates(days, valid)
        fallback = "%Y-%m-%d"
    else:
        text = iso_timestamps(micros(arr), valid, utc=t.tz is not None)
        fallback = "%Y-%m-%dT%H:%M:%S" + ("Z" if t.tz is not None else "")
        if t.tz is not None:
            arr = arr.cast(pa.timestamp(t.unit, "UTC"))
    if text is None:
        return as_pieces(pc.strftime(arr, format=f'"{fallback}"'))
    return text if arr.null_count == 0 else only_rows(text, valid)


def quoted_strings(arr: Any) -> Any:
    """Each string as a JSON string literal: escaped and quoted, in bulk; nulls stay null.

    One numpy pass over the bytes finds which characters need escaping; each one present costs
    one ``replace_substring`` pass (backslash first, so no escape is escaped twice).
    """
    text = arr if pa.types.is_large_string(arr.type) else arr.cast(pa.large_string())
    for code in _needing_escape(text):
        char = chr(code)
        text = pc.replace_substring(text, char, _ESCAPES.get(char, f"\\u{code:04x}"))
    return join_pieces([b'"', as_pieces(text), b'"'], len(arr))


def _needing_escape(text: Any) -> list[int]:
    """The bytes present in ``text`` that JSON escapes, the backslash first."""
    data = text.buffers()[2]
    if data is None or len(text) == 0:
        return []
    offsets = binary_offsets(as_pieces(text))
    raw = np.frombuffer(data, dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])]
    special = raw[(raw < 0x20) | (raw == 0x22) | (raw == 0x5C)]
    if special.size == 0:
        return []
    present = set(np.unique(special).tolist())
    return sorted(present, key=lambda code: code != 0x5C)


def _base64_per_row(arr: Any) -> Any:
    # No Arrow kernel encodes base64; the stdlib's per row is the documented fallback.
    return pa.array(
        [None if v is None else b'"' + base64.b64encode(v) + b'"' for v in arr.to_pylist()],
        type=PIECES,
    )


def _struct(arr: Any, b: JsonBinding, live: _Mask) -> Any:
    fields = arr.flatten()  # the struct's slice and validity applied to each child
    parts: list[Any] = []
    for i, child in enumerate(b.children):
        name = json.dumps(arr.type.field(i).name, ensure_ascii=False).encode()
        parts.append((b"{" if i == 0 else b",") + name + b":")
        parts.append(_text(fields[i], child, live))
    if not parts:
        return constant_pieces(b"{}", len(arr))
    parts.append(b"}")
    return join_pieces(parts, len(arr))


def _list(arr: Any, b: JsonBinding, live: _Mask, *, is_map: bool) -> Any:
    """An array (or a map) per row: its items' text, comma separated, in brackets (braces)."""
    n = len(arr)
    values, keys = (arr.items, arr.keys) if is_map else (arr.values, None)
    offsets = list_offsets(arr)
    first, last = int(offsets[0]), int(offsets[-1])
    count = last - first
    item_live = np.repeat(live, np.diff(offsets))
    items = [_text(values.slice(first, count), b.children[0], item_live)]
    if keys is not None:
        items = [quoted_strings(keys.slice(first, count)), b":", *items]
    not_first = np.ones(count, dtype=np.bool_)
    starts = offsets[:-1] - first
    not_first[starts[starts < count]] = False
    pieces = join_pieces([only_rows(b",", not_first, count), *items], count)
    grouped = group_pieces(pieces, offsets - first)
    return join_pieces([b"{" if is_map else b"[", grouped, b"}" if is_map else b"]"], n)
