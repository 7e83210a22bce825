"""The per-batch bounds on bad rows: ``deadLetterMaxRecords`` and ``deadLetterMaxRatio``.

Role: under ``onRecordError=deadLetter`` or ``skip`` the tasks write their good rows and count
their bad ones (``bad_records.py``); the driver's ``commit()`` (``writer.py``) adds the tasks'
counts up and calls :func:`check_bounds` before anything of the batch is committed: at-least-once
before its commit document is written, exactly-once before its intent is recorded (the check
runs inside ``EosCommitter.commit``, whose failure path before the intent aborts the batch's
transactions, so nothing of it becomes visible).

Invariants:
- A bound is per batch: a streaming micro-batch, or a batch job's whole write. Exactly-once, the
  re-run of a partly committed batch is not checked again: its first run passed the bounds over
  all its rows, and its committed partitions report no counts in the re-run.
- ``deadLetterMaxRecords``: more bad rows than it fail the batch (equal passes).
  ``deadLetterMaxRatio``: a larger share than it of the rows the tasks read fails it (equal
  passes); a batch that read no rows has no ratio to exceed. A bound that is None is no bound.
- The error (:class:`~kafka_sink.sink_errors.BadRecordsLimitError`) is one line naming the
  option(s) exceeded and their values, the batch's count and share, and the first bad rows'
  reasons (their samples); it quotes no option value but the bounds themselves.
"""

from __future__ import annotations

from kafka_sink.sink_errors import BadRecordsLimitError
from kafka_sink.spark.bad_records import BadRecordCounts

__all__ = ["check_bounds", "exceeded"]


def exceeded(
    counts: BadRecordCounts, *, max_records: int | None, max_ratio: float | None
) -> list[str]:
    """The bounds ``counts`` exceeds, each as ``option=value`` (empty: within them)."""
    out: list[str] = []
    if max_records is not None and counts.total > max_records:
        out.append(f"deadLetterMaxRecords={max_records}")
    if max_ratio is not None and counts.rows_read > 0 and counts.ratio > max_ratio:
        out.append(f"deadLetterMaxRatio={max_ratio:g}")
    return out


def check_bounds(
    counts: BadRecordCounts | None,
    *,
    max_records: int | None,
    max_ratio: float | None,
    batch_id: int | None,
    guarantee: str,
) -> None:
    """Raise :class:`BadRecordsLimitError` when the batch's merged ``counts`` exceed a bound.

    ``counts`` None (``onRecordError=fail``, or no task wrote anything) is never refused.
    """
    if counts is None:
        return
    over = exceeded(counts, max_records=max_records, max_ratio=max_ratio)
    if not over:
        return
    what = "the batch job" if batch_id is None else f"micro-batch {batch_id}"
    first = "; ".join(s.describe() for s in counts.samples) or "no sample was kept"
    reasons = ", ".join(f"{reason} {n}" for reason, n in counts.by_reason)
    if guarantee == "exactly-once":
        fate = "nothing of it is committed (its transactions, dead letters included, are aborted)"
    else:
        fate = (
            "its good rows (and any dead letters) are already in Kafka (at-least-once), and "
            "the commit is not recorded"
        )
    raise BadRecordsLimitError(
        f"{what} failed: {counts.total} of {counts.rows_read} rows ({counts.ratio:.1%}) were "
        f"bad under onRecordError={counts.action} ({reasons}), more than "
        f"{' and '.join(over)} allow; {fate}. First: {first}. Fix: correct or filter the rows "
        "named, or raise (or remove) the bound"
    )
