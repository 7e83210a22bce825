"""The demo's verdict (``jobs/_tally.py``): read_committed holds every input row exactly once."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _tally() -> ModuleType:
    spec = importlib.util.spec_from_file_location("jobs_tally", ROOT / "jobs" / "_tally.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building the class
    spec.loader.exec_module(module)
    return module


EXPECTED = {b"0", b"1", b"2", b"3"}


def test_every_row_once_passes() -> None:
    t = _tally()
    reading = t.tally("read_committed", [b"2", b"0", b"3", b"1"], EXPECTED)
    assert (reading.rows, reading.distinct, reading.duplicates, reading.missing) == (4, 4, 0, 0)
    assert t.exactly_once_problem(reading) is None


def test_a_duplicate_fails() -> None:
    t = _tally()
    reading = t.tally("read_committed", [b"0", b"1", b"1", b"2", b"3"], EXPECTED)
    assert reading.duplicates == 1
    assert t.exactly_once_problem(reading) == "1 row(s) read more than once"


def test_a_lost_row_fails() -> None:
    t = _tally()
    reading = t.tally("read_committed", [b"0", b"1", b"3"], EXPECTED)
    assert reading.missing == 1
    assert t.exactly_once_problem(reading) == "1 row(s) lost"


def test_a_value_never_fed_in_fails() -> None:
    t = _tally()
    reading = t.tally("read_committed", [b"0", b"1", b"2", b"3", b"x"], EXPECTED)
    assert t.exactly_once_problem(reading) == "1 value(s) that were never in the input"


def test_the_table_has_one_line_per_reader() -> None:
    t = _tally()
    readings = [
        t.tally("read_committed", [b"0", b"1", b"2", b"3"], EXPECTED),
        t.tally("read_uncommitted", [b"0", b"1", b"1", b"2", b"3"], EXPECTED),
    ]
    lines = t.table(readings).splitlines()
    assert lines[0].split() == ["consumer", "rows", "distinct", "duplicates", "missing"]
    assert lines[2].split() == ["read_committed", "4", "4", "0", "0"]
    assert lines[3].split() == ["read_uncommitted", "5", "4", "1", "0"]
