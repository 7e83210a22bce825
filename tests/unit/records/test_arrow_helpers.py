"""Reading Arrow integer and validity data from buffers: slices, nulls, chunks and types."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kafka_sink.records.arrow import arrow_ints, binary_scalar, int_column, valid_mask


@pytest.mark.parametrize("arrow_type", [pa.int8(), pa.int32(), pa.int64(), pa.uint16()])
def test_int_column_fills_nulls_and_honours_the_slice_offset(arrow_type: pa.DataType) -> None:
    rows = [1, None, 3, 4, None, 6, 7, 8, 9, 10, None, 12]
    sliced = pa.array(rows, arrow_type).slice(1, 10)
    out = int_column(sliced, -1, np.int64)
    assert out.tolist() == [-1 if r is None else r for r in rows[1:11]]
    assert valid_mask(sliced).tolist() == [r is not None for r in rows[1:11]]
    out[0] = 99  # a fresh array the caller may write into
    assert sliced[0].as_py() is None


def test_int_column_and_valid_mask_take_chunked_empty_and_null_typed_columns() -> None:
    chunked = pa.chunked_array([[1], [None, 2]], pa.int32())
    assert int_column(chunked, 5, np.int32).tolist() == [1, 5, 2]
    assert valid_mask(chunked).tolist() == [True, False, True]
    assert int_column(pa.array([], pa.int64()), 0, np.int64).tolist() == []
    assert int_column(pa.nulls(3), 7, np.int64).tolist() == [7, 7, 7]
    assert valid_mask(pa.nulls(2)).tolist() == [False, False]
    with pytest.raises(TypeError, match="integer column"):
        int_column(pa.array([1.5]), 0, np.int64)


def test_arrow_ints_shares_memory_and_binary_scalar_joins_like_pa_scalar() -> None:
    ints = np.arange(5, dtype=np.int32)
    wrapped = arrow_ints(ints)
    assert wrapped.type == pa.int32() and wrapped.to_pylist() == [0, 1, 2, 3, 4]
    assert arrow_ints(np.array([1, 2], dtype=np.int16)).type == pa.int64()
    for large in (False, True):
        scalar = binary_scalar(b"\x01ab", large)
        assert scalar.as_py() == b"\x01ab"
        assert scalar.type == (pa.large_binary() if large else pa.binary())
