"""seal_columns against the per-record builder (byte for byte when uncompressed) and the reader."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_sink.records.batch import Header, RecordBatchBuilder, SealedBatch, read_batches
from kafka_sink.records.columnar import CompressionRatioEstimator, seal_columns
from kafka_sink.records.compression import CompressionType

from .strategies import BASE_TS, headers_strategy, maybe_bytes

NONE = CompressionType.NONE
LZ4 = CompressionType.LZ4


def per_record(
    values: list[bytes | None],
    keys: list[bytes | None] | None,
    timestamps: int | list[int],
    headers: list[list[Header] | None] | None,
    batch_size: int,
    *,
    ctype: CompressionType = NONE,
) -> list[SealedBatch]:
    """The oracle: the same records appended one by one, a new builder whenever one is full."""
    out: list[SealedBatch] = []
    builder = RecordBatchBuilder(compression_type=ctype, batch_size=batch_size)
    for i, value in enumerate(values):
        key = keys[i] if keys is not None else None
        ts = timestamps if isinstance(timestamps, int) else timestamps[i]
        hs = (headers[i] if headers is not None else None) or ()
        if builder.append(ts, key, value, hs) is None:
            out.append(builder.seal())
            builder = RecordBatchBuilder(compression_type=ctype, batch_size=batch_size)
            builder.append(ts, key, value, hs)
    if builder.record_count:
        out.append(builder.seal())
    return out


def encoded(batches: list[SealedBatch]) -> list[bytes]:
    return [b.encode() for b in batches]


@st.composite
def columns(draw: st.DrawFn) -> dict[str, object]:
    n = draw(st.integers(1, 120))
    values = [draw(st.one_of(maybe_bytes, st.binary(min_size=100, max_size=300))) for _ in range(n)]
    keys = draw(st.one_of(st.none(), st.lists(maybe_bytes, min_size=n, max_size=n)))
    timestamps = draw(
        st.one_of(
            st.integers(0, 2 * BASE_TS),
            st.lists(st.integers(BASE_TS - 40, BASE_TS + 40), min_size=n, max_size=n),
            st.lists(st.integers(BASE_TS - 10**6, BASE_TS + 10**6), min_size=n, max_size=n),
        )
    )
    headers = draw(
        st.one_of(
            st.none(),
            st.lists(st.one_of(st.none(), headers_strategy), min_size=n, max_size=n),
        )
    )
    batch_size = draw(st.sampled_from([1, 90, 300, 1000, 16384]))
    return {
        "values": values,
        "keys": keys,
        "timestamps": timestamps,
        "headers": headers,
        "batch_size": batch_size,
    }


def as_arrow(kind: str, data: list[bytes | None]) -> object:
    if kind == "list":
        return data
    if kind == "binary":
        return pa.array(data, type=pa.binary())
    if kind == "large":
        return pa.array(data, type=pa.large_binary())
    if kind == "chunked":
        half = len(data) // 2
        return pa.chunked_array([data[:half], data[half:]], type=pa.binary())
    # sliced: padding rows on both sides that must not leak into the output
    padded = pa.array([b"pad-before", None, *data, b"pad-after"], type=pa.binary())
    return padded.slice(2, len(data))


@settings(max_examples=80, deadline=None)
@given(
    case=columns(),
    value_kind=st.sampled_from(["list", "binary", "large", "chunked", "sliced"]),
    key_kind=st.sampled_from(["list", "binary", "large", "chunked", "sliced"]),
)
def test_columnar_equals_per_record_builder(
    case: dict[str, object], value_kind: str, key_kind: str
) -> None:
    values = case["values"]
    keys = case["keys"]
    timestamps = case["timestamps"]
    headers = case["headers"]
    batch_size = case["batch_size"]
    assert isinstance(values, list) and isinstance(batch_size, int)
    expected = per_record(values, keys, timestamps, headers, batch_size)  # type: ignore[arg-type]
    ts_arg = timestamps if isinstance(timestamps, int) else np.array(timestamps, dtype=np.int64)
    got = seal_columns(
        as_arrow(value_kind, values),
        None if keys is None else as_arrow(key_kind, keys),  # type: ignore[arg-type]
        timestamps_ms=ts_arg,  # type: ignore[arg-type]
        headers=headers,  # type: ignore[arg-type]
        compression_type=NONE,
        batch_size=batch_size,
    )
    assert encoded(got) == encoded(expected)
    assert got == expected


@pytest.mark.parametrize("ctype", list(CompressionType))
def test_compressed_columnar_round_trip(ctype: CompressionType) -> None:
    n = 3000
    values = [None if i % 17 == 0 else f"value-{i}-".encode() * (i % 9) for i in range(n)]
    keys = [None if i % 5 == 0 else f"k{i}".encode() for i in range(n)]
    ts = BASE_TS + np.arange(n, dtype=np.int64) * 3 - 100
    sealed = seal_columns(
        pa.array(values, type=pa.binary()),
        pa.array(keys, type=pa.large_binary()),
        timestamps_ms=ts,
        compression_type=ctype,
        batch_size=16384,
    )
    # Same split as uncompressed per-record building: sizes are judged on uncompressed bytes.
    expected = per_record(values, keys, ts.tolist(), None, 16384, ctype=ctype)
    assert [b.record_count for b in sealed] == [b.record_count for b in expected]
    data = b"".join(b.encode() for b in sealed)
    records = [r for batch in read_batches(data) for r in batch.records]
    assert [(r.key, r.value, r.timestamp_ms) for r in records] == list(
        zip(keys, values, ts.tolist(), strict=True)
    )
    for batch in read_batches(data):
        assert batch.compression_type is ctype
        assert [r.offset for r in batch.records] == list(range(len(batch.records)))
        assert batch.base_timestamp_ms == batch.records[0].timestamp_ms
        assert batch.max_timestamp_ms == max(r.timestamp_ms for r in batch.records)


def _round_trip(sealed: list[SealedBatch]) -> list[tuple[bytes | None, bytes | None, int]]:
    data = b"".join(b.encode() for b in sealed)
    return [(r.key, r.value, r.timestamp_ms) for b in read_batches(data) for r in b.records]


def test_ratio_estimator_bounds_the_compressed_batch() -> None:
    n = 5000
    values = [f"value-{i % 50}-".encode() * 4 for i in range(n)]
    keys = [f"key-{i}".encode() for i in range(n)]
    ts = BASE_TS + np.arange(n, dtype=np.int64)
    plain = seal_columns(values, keys, timestamps_ms=ts, compression_type=LZ4, batch_size=4096)
    estimator = CompressionRatioEstimator()
    first = seal_columns(
        values,
        keys,
        timestamps_ms=ts,
        compression_type=LZ4,
        batch_size=4096,
        ratio_estimator=estimator,
    )
    # A fresh estimator stretches nothing, then holds the ratio it saw.
    assert [b.record_count for b in first] == [b.record_count for b in plain]
    assert 0.0 < estimator.ratio < 0.5
    second = seal_columns(
        values,
        keys,
        timestamps_ms=ts,
        compression_type=LZ4,
        batch_size=4096,
        ratio_estimator=estimator,
    )
    assert len(second) < len(plain) / 2
    assert all(b.size_bytes <= 4096 for b in second)
    assert _round_trip(second) == list(zip(keys, values, ts.tolist(), strict=True))


def test_ratio_estimator_too_optimistic_recuts_as_without_one() -> None:
    rng = np.random.default_rng(7)
    values = [rng.bytes(100) for _ in range(400)]  # incompressible
    plain = seal_columns(values, timestamps_ms=BASE_TS, compression_type=LZ4, batch_size=2048)
    estimator = CompressionRatioEstimator(0.25)
    sealed = seal_columns(
        values,
        timestamps_ms=BASE_TS,
        compression_type=LZ4,
        batch_size=2048,
        ratio_estimator=estimator,
    )
    # Every stretched batch compressed above batch_size, so each was cut again by the
    # uncompressed rule: no batch holds more records than fit uncompressed.
    assert max(b.record_count for b in sealed) == max(b.record_count for b in plain)
    assert _round_trip(sealed) == [(None, v, BASE_TS) for v in values]
    assert estimator.ratio > 0.9


def test_ratio_estimator_is_ignored_without_compression() -> None:
    values = [b"a" * 50] * 300
    plain = seal_columns(values, timestamps_ms=BASE_TS, compression_type=NONE, batch_size=1000)
    sealed = seal_columns(
        values,
        timestamps_ms=BASE_TS,
        compression_type=NONE,
        batch_size=1000,
        ratio_estimator=CompressionRatioEstimator(0.1),
    )
    assert encoded(sealed) == encoded(plain)


@pytest.mark.parametrize("ts_step", [0, 1, 1000])
@pytest.mark.parametrize("ctype", [NONE, LZ4])
def test_segments_seal_as_separate_calls(ts_step: int, ctype: CompressionType) -> None:
    n = 2000
    values = [None if i % 13 == 0 else f"v{i}".encode() * (i % 7) for i in range(n)]
    keys = [f"key-{i}".encode() for i in range(n)]
    ts = BASE_TS + np.arange(n, dtype=np.int64) * ts_step
    segment_ends = [1, 2, 500, 501, 1200, n]
    segmented = seal_columns(
        values,
        keys,
        timestamps_ms=ts,
        compression_type=ctype,
        batch_size=700,
        segment_ends=segment_ends,
    )
    separate = [
        batch
        for lo, hi in zip([0, *segment_ends], segment_ends, strict=False)
        for batch in seal_columns(
            values[lo:hi],
            keys[lo:hi],
            timestamps_ms=ts[lo:hi],
            compression_type=ctype,
            batch_size=700,
        )
    ]
    assert encoded(segmented) == encoded(separate)
    with pytest.raises(ValueError, match="segment_ends"):
        seal_columns(
            values, timestamps_ms=0, compression_type=NONE, batch_size=99, segment_ends=[5]
        )


def test_string_arrays_are_utf8_bytes() -> None:
    values = pa.array(["héllo", None, "", "日本"], type=pa.string())
    keys = pa.chunked_array(
        [
            pa.array(["ä"], type=pa.large_string()),
            pa.array(["b", None, "c"], type=pa.large_string()),
        ]
    )
    (sealed,) = seal_columns(
        values, keys, timestamps_ms=BASE_TS, compression_type=NONE, batch_size=16384
    )
    (batch,) = read_batches(sealed.encode())
    assert [(r.key, r.value) for r in batch.records] == [
        ("ä".encode(), "héllo".encode()),
        (b"b", None),
        (None, b""),
        (b"c", "日本".encode()),
    ]


def test_oversized_record_goes_alone() -> None:
    values = [b"a", b"x" * 5000, b"b", b"c"]
    sealed = seal_columns(values, timestamps_ms=BASE_TS, compression_type=NONE, batch_size=200)
    assert [b.record_count for b in sealed] == [1, 1, 2]
    assert sealed[1].size_bytes > 200
    assert all(b.size_bytes <= 200 for i, b in enumerate(sealed) if i != 1)


def test_many_records_per_batch_use_two_byte_offset_deltas() -> None:
    n = 20_000
    values = pa.array([b"v"] * n)
    ts = np.full(n, BASE_TS, dtype=np.int64)
    ts[::1000] += 5000  # timestamp deltas of varying width, including negative ones
    sealed = seal_columns(values, timestamps_ms=ts, compression_type=NONE, batch_size=1 << 20)
    expected = per_record([b"v"] * n, None, ts.tolist(), None, 1 << 20)
    assert encoded(sealed) == encoded(expected)
    assert sealed[0].record_count == n


def test_empty_and_mismatched_inputs() -> None:
    assert seal_columns([], timestamps_ms=0, compression_type=NONE, batch_size=100) == []
    with pytest.raises(ValueError, match="keys"):
        seal_columns([b"a"], [b"k", b"k"], timestamps_ms=0, compression_type=NONE, batch_size=99)
    with pytest.raises(ValueError, match="timestamps"):
        seal_columns(
            [b"a"], timestamps_ms=np.zeros(2, np.int64), compression_type=NONE, batch_size=99
        )
    with pytest.raises(ValueError, match="headers"):
        seal_columns([b"a"], headers=[], timestamps_ms=0, compression_type=NONE, batch_size=99)
    with pytest.raises(TypeError):
        seal_columns(pa.array([1, 2]), timestamps_ms=0, compression_type=NONE, batch_size=99)
