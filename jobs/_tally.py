"""What a consumer read, against the rows the demo fed its query: counts and the verdict.

Pure functions over record values (no Kafka, no Spark), so the demo's pass/fail rule is tested on
its own. Invariants: a read_committed tally passes only when it holds every expected row exactly
once and nothing else; a read_uncommitted tally is never judged (aborted rows are expected there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Tally:
    """One consumer's reading: rows read, distinct values, repeats, expected rows not read."""

    isolation_level: str
    rows: int
    distinct: int
    duplicates: int
    missing: int
    unexpected: int


def tally(isolation_level: str, values: Iterable[bytes | None], expected: set[bytes]) -> Tally:
    counts = Counter(values)
    return Tally(
        isolation_level=isolation_level,
        rows=sum(counts.values()),
        distinct=len(counts),
        duplicates=sum(n - 1 for n in counts.values() if n > 1),
        missing=len(expected - counts.keys()),
        unexpected=sum(1 for v in counts if v not in expected),
    )


def exactly_once_problem(committed: Tally) -> str | None:
    """Why a read_committed reading is not every row exactly once, or None."""
    problems = []
    if committed.missing:
        problems.append(f"{committed.missing} row(s) lost")
    if committed.duplicates:
        problems.append(f"{committed.duplicates} row(s) read more than once")
    if committed.unexpected:
        problems.append(f"{committed.unexpected} value(s) that were never in the input")
    return "; ".join(problems) or None


def table(tallies: Iterable[Tally]) -> str:
    """The closing table, one line per consumer."""
    header = f"{'consumer':<18}{'rows':>8}{'distinct':>10}{'duplicates':>12}{'missing':>9}"
    lines = [header, "-" * len(header)]
    lines += [
        f"{t.isolation_level:<18}{t.rows:>8}{t.distinct:>10}{t.duplicates:>12}{t.missing:>9}"
        for t in tallies
    ]
    return "\n".join(lines)
