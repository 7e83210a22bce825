"""The fingerprint of a task's rows: order-insensitive, sensitive to every field it covers."""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_sink.spark.executor.row_fingerprint import batch_fingerprint
from kafka_sink.spark.fingerprint import EMPTY_FINGERPRINT, Fingerprint
from kafka_sink.spark.schema import InputLayout

FULL = InputLayout(
    topic_column=True,
    key_column=True,
    partition_column=True,
    headers_column=False,
    timestamp="timestamp",
)


def _batch(n: int = 50, **changes: list[object]) -> pa.RecordBatch:
    columns: dict[str, list[object]] = {
        "topic": [f"t{i % 3}" for i in range(n)],
        "key": [None if i % 7 == 0 else f"k{i}".encode() for i in range(n)],
        "value": [None if i % 11 == 0 else f"value-{i}" * (1 + i % 4) for i in range(n)],
        "partition": [None if i % 5 == 0 else i % 4 for i in range(n)],
        "timestamp": [
            None
            if i % 6 == 0
            else dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=i)
            for i in range(n)
        ],
    }
    columns.update(changes)
    return pa.record_batch(
        {
            "topic": pa.array(columns["topic"], pa.string()),
            "key": pa.array(columns["key"], pa.binary()),
            "value": pa.array(columns["value"], pa.string()),
            "partition": pa.array(columns["partition"], pa.int32()),
            "timestamp": pa.array(columns["timestamp"], pa.timestamp("us", tz="UTC")),
        }
    )


def _fp(batch: pa.RecordBatch, topic: str | None = None) -> Fingerprint:
    return batch_fingerprint(batch, FULL, topic)


def test_the_order_of_the_rows_and_of_the_batches_does_not_matter() -> None:
    batch = _batch()
    shuffled = batch.take(np.random.default_rng(7).permutation(batch.num_rows))
    assert _fp(shuffled) == _fp(batch)
    halves = _fp(batch.slice(30)).plus(_fp(batch.slice(0, 30)))
    assert halves == _fp(batch) and halves.rows == 50


@pytest.mark.parametrize(
    ("column", "row", "new"),
    [
        ("value", 3, "value-3!"),
        ("value", 3, None),  # null is not the empty value
        ("value", 11, ""),
        ("key", 4, b"k5"),
        ("key", 4, None),
        ("topic", 8, "t9"),
        ("partition", 9, 2),
        ("partition", 9, None),
        ("timestamp", 13, dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=dt.UTC)),
        ("timestamp", 13, None),
    ],
)
def test_any_changed_field_of_any_row_changes_it(column: str, row: int, new: object) -> None:
    base = _batch()
    values = base.column(column).to_pylist()
    assert values[row] != new
    values[row] = new
    assert _fp(_batch(**{column: values})) != _fp(base)


def test_a_moved_value_or_swapped_key_and_value_changes_it() -> None:
    base = _batch(4, key=[b"a", b"b", b"c", b"d"], value=["a", "b", "c", "d"])
    swapped = _batch(4, key=[b"b", b"a", b"c", b"d"], value=["a", "b", "c", "d"])
    assert _fp(swapped) != _fp(base)
    crossed = _batch(4, key=[b"x", b"b", b"c", b"d"], value=["a", "b", "c", "d"])
    assert _fp(crossed) != _fp(_batch(4, key=[b"a", b"b", b"c", b"d"], value=["x", "b", "c", "d"]))


def test_the_topic_option_is_part_of_the_row() -> None:
    batch = _batch()
    assert _fp(batch, "orders") != _fp(batch, "payments")
    assert _fp(batch, "orders") != _fp(batch)


def test_a_missing_column_is_not_a_null_one() -> None:
    values = pa.record_batch({"value": pa.array([b"a", b"b"])})
    plain = InputLayout(False, False, False, False, None)
    with_nulls = pa.record_batch(
        {"value": pa.array([b"a", b"b"]), "key": pa.array([None, None], pa.binary())}
    )
    keyed = InputLayout(False, True, False, False, None)
    assert batch_fingerprint(values, plain, "t") != batch_fingerprint(with_nulls, keyed, "t")


def test_an_empty_batch_and_the_text_form() -> None:
    assert _fp(_batch().slice(0, 0)) == EMPTY_FINGERPRINT
    f = _fp(_batch())
    assert Fingerprint.from_text(f.to_text()) == f
    with pytest.raises(ValueError, match="digest"):
        Fingerprint(1, 1 << 64)


def test_a_row_hashes_the_same_whatever_the_lengths_of_the_rows_beside_it() -> None:
    plain = InputLayout(False, False, False, False, None)

    def fp(*values: bytes) -> Fingerprint:
        return batch_fingerprint(pa.record_batch({"value": pa.array(values)}), plain, "t")

    # Alone, every row has the same length (no padding); together, they are padded to widths.
    long = b"x" * 1000
    assert fp(b"abc", b"abc").plus(fp(long)) == fp(b"abc", long, b"abc")
    assert fp(b"a" * 17).plus(fp(b"b" * 9)) == fp(b"b" * 9, b"a" * 17)
    # A trailing zero byte is part of the value, not padding.
    assert fp(b"ab\x00", b"abcdefgh") != fp(b"ab", b"abcdefgh")
    assert fp(b"", b"abc") != fp(b"\x00", b"abc")


_PLAIN = InputLayout(False, False, False, False, None)


def _values_fp(values: list[bytes | None], offset: int = 0) -> Fingerprint:
    # ``offset``: the column as a slice of a longer one, as Arrow hands slices around.
    padded = [b"-" * 3] * offset + values
    array = pa.array(padded, pa.binary()).slice(offset)
    return batch_fingerprint(pa.record_batch({"value": array}), _PLAIN, "t")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=500, max_size=1500)),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 3),
)
def test_every_path_hashes_a_row_as_it_hashes_it_alone(
    values: list[bytes | None], offset: int
) -> None:
    # Alone a row takes the fixed-width path (views of the buffer, or its checksum when long);
    # beside rows of other lengths it is padded into a matrix: the same hash either way.
    alone = EMPTY_FINGERPRINT
    for value in values:
        alone = alone.plus(_values_fp([value]))
    assert _values_fp(values, offset) == alone
    same_length = [v if v is None else v[:1].ljust(9, b"z") for v in values]
    alone = EMPTY_FINGERPRINT
    for value in same_length:
        alone = alone.plus(_values_fp([value]))
    assert _values_fp(same_length, offset) == alone


@pytest.mark.parametrize("length", [5, 13, 100, 511, 512, 4000])
@pytest.mark.parametrize("at", [0, -1])
def test_one_changed_byte_of_a_value_of_any_length_changes_it(length: int, at: int) -> None:
    rng = np.random.default_rng(length)
    values = [rng.bytes(length) for _ in range(4)]
    changed = list(values)
    row = bytearray(changed[2])
    row[at] ^= 0x80  # a high bit, the one a sum of products reaches last
    changed[2] = bytes(row)
    assert _values_fp(changed) != _values_fp(values)


# Digests recorded in intents must keep their values across releases: a batch left partly
# committed by one version is checked by its re-run under the next. Pinned per path (every row
# long and of varied lengths, long and of one length, long and short mixed, short), on a sliced
# batch (an offset into the buffers) and on large_binary.
PINNED = {
    "long-varied": "300:4a6e4be2add3a0e9",
    "long-varied-sliced": "200:4d4ff9bb2d4ffe23",
    "long-varied-large": "300:4a6e4be2add3a0e9",
    "long-fixed": "300:eccdaab2215a99bb",
    "long-fixed-sliced": "200:e346cfa81a8b0979",
    "long-fixed-large": "300:eccdaab2215a99bb",
    "mixed": "300:529964b668ea5656",
    "mixed-sliced": "200:abd13c5c449aa9fb",
    "mixed-large": "300:529964b668ea5656",
    "short": "300:5f42dfc65bd6a9d8",
    "short-sliced": "200:69d3d58b45ef302b",
    "short-large": "300:5f42dfc65bd6a9d8",
}
_PINNED_LAYOUT = replace(FULL, topic_column=False, partition_column=False)
_PINNED_LENGTHS = {
    "long-varied": (512, 1600),
    "long-fixed": (1024, 1024),
    "mixed": (1, 1200),
    "short": (1, 300),
}


def _pinned_batch(name: str, n: int = 300) -> pa.RecordBatch:
    low, high = _PINNED_LENGTHS[name]
    lengths = [low + (i * 7919) % (high - low + 1) for i in range(n)]
    values: list[bytes | None] = [
        hashlib.shake_256(f"{name}-{i}".encode()).digest(k) for i, k in enumerate(lengths)
    ]
    values[7] = None
    return pa.record_batch(
        {
            "key": pa.array([f"key-{i:012d}".encode() for i in range(n)], pa.binary()),
            "value": pa.array(values, pa.binary()),
            "timestamp": pa.array(
                np.arange(n, dtype=np.int64) + 1_700_000_000_000, pa.timestamp("ms")
            ),
        }
    )


@pytest.mark.parametrize("name", sorted(_PINNED_LENGTHS))
def test_the_digests_keep_their_pinned_values(name: str) -> None:
    batch = _pinned_batch(name)
    large = batch.set_column(1, "value", batch.column(1).cast(pa.large_binary()))
    got = {
        name: batch_fingerprint(batch, _PINNED_LAYOUT, "events").to_text(),
        f"{name}-sliced": batch_fingerprint(
            batch.slice(3, 200), _PINNED_LAYOUT, "events"
        ).to_text(),
        f"{name}-large": batch_fingerprint(large, _PINNED_LAYOUT, "events").to_text(),
    }
    assert got == {key: PINNED[key] for key in got}
