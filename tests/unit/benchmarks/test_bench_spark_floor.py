"""The Spark benchmark's floor table: what any Python sink costs at least, cell by cell.

The table decides, from numbers measured in one run, whether a CPU goal is within reach of any
Python data source sink; these tests hold its arithmetic and the in-process encoding measure.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    path = os.path.join(ROOT, "benchmarks", "bench_spark.py")
    spec = importlib.util.spec_from_file_location("bench_spark_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _result(bench: ModuleType, writer: str, wall_s: float, cpu_s: float) -> Any:
    r = bench.Result("json1k", "lz4", writer, 1_000_000, 1_000_000_000)
    r.runs.append({"wall_s": wall_s, "cpu_s": cpu_s, "peak_rss_mb": 100.0})
    return r


def test_floor_table_says_whether_the_cpu_goal_is_within_reach(bench: ModuleType) -> None:
    results = [
        _result(bench, "ceiling", 2.0, 3.0),  # 500k rows/s, 3 CPU s per 1M rows
        _result(bench, "jvm-default", 5.0, 6.0),
        _result(bench, "jvm-tuned", 4.0, 5.0),  # the better JVM setting: 250k rows/s
        _result(bench, "pykafka", 5.0, 7.0),
    ]
    out_of_reach = bench.EncodeCost("json1k", "lz4", 1000, 2.5, 1.5, 0.4)
    rows = bench.floor_table(results, [out_of_reach]).splitlines()
    # floor 3 + 1.5 = 4.5 against 0.7 x 5 = 3.5; the ceiling is 2.0x the better JVM setting.
    assert rows[2] == (
        "| json1k | lz4 | 3.00 | 1.50 | 4.50 | 7.00 | 4.00 | 2.50 | 3.50 | **no** | 2.00x | 0.40 |"
    )
    within_reach = bench.EncodeCost("json1k", "lz4", 1000, 0.6, 0.4, 0.4)
    assert "| 3.40 | 7.00 | 4.00 | 0.60 | 3.50 | yes |" in bench.floor_table(
        results, [within_reach]
    )


def test_floor_table_skips_cells_without_a_ceiling_or_jvm_run(bench: ModuleType) -> None:
    cost = bench.EncodeCost("json1k", "lz4", 1000, 1.0, 1.0, 0.5)
    only_pykafka = [_result(bench, "pykafka", 1.0, 1.0)]
    assert len(bench.floor_table(only_pykafka, [cost]).splitlines()) == 2  # the header only


class _Frame:
    """What encode_cost asks of a DataFrame: limit(n).toArrow()."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def limit(self, n: int) -> _Frame:
        return _Frame(self.table.slice(0, n))

    def toArrow(self) -> pa.Table:  # PySpark's name
        return self.table


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_encode_cost_measures_a_sample_of_the_rows(bench: ModuleType, codec: str) -> None:
    n = 3000
    table = pa.table(
        {
            "key": pa.array([b"%016d" % i for i in range(n)], pa.binary()),
            "value": pa.array([b'{"id": %d, "pad": "%s"}' % (i, b"x" * 200) for i in range(n)]),
        }
    )
    cost = bench.encode_cost(_Frame(table), bench.WORKLOADS["json200"], codec, 2000)
    assert (cost.workload, cost.codec, cost.sample_rows) == ("json200", codec, 2000)
    assert cost.encode_cpu_per_m > 0 and cost.codec_cpu_per_m > 0
    assert 0.0 < cost.ratio < 0.5  # repetitive values compress
