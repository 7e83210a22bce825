"""Hypothesis strategies shared by the records tests."""

from __future__ import annotations

from hypothesis import strategies as st

from kafka_sink.records.batch import Header

BASE_TS = 1_700_000_000_000

maybe_bytes = st.one_of(st.none(), st.binary(max_size=80))
headers_strategy = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=12))), max_size=3
)
timestamp_strategy = st.one_of(
    st.integers(BASE_TS - 100, BASE_TS + 100),
    st.integers(BASE_TS - 10**7, BASE_TS + 10**7),
)


@st.composite
def record_lists(
    draw: st.DrawFn, *, min_size: int = 1, max_size: int = 40, with_headers: bool = True
) -> list[tuple[int, bytes | None, bytes | None, list[Header]]]:
    n = draw(st.integers(min_size, max_size))
    return [
        (
            draw(timestamp_strategy),
            draw(maybe_bytes),
            draw(maybe_bytes),
            draw(headers_strategy) if with_headers else [],
        )
        for _ in range(n)
    ]
