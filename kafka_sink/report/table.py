"""A commit log's metrics as rows: one per batch, or one per minute for long runs, and totals.

Role: :func:`report_rows` turns commit documents (``reader.py``) into :class:`Row`\\ s;
:func:`render` prints them as a fixed-width table; :func:`printable` is how any text read from
the log is shown.

The rule for rows: ``per="batch"`` gives one row per committed batch; ``per="minute"`` sums the
batches committed in each wall-clock minute (UTC); ``per="auto"`` (the default) is per batch up
to :data:`AUTO_BATCH_ROWS` batches and per minute beyond, so a day-long query stays readable.

Invariants:
- A row's rates are ratios of its sums (rows/s = records / write time; latency avg = summed
  request latency / requests), never averages of the batches' rates; maxima are maxima.
- A batch whose document has no ``metrics`` section counts its ``record_count`` and leaves the
  rest empty (None), as does a row with no measured batch.
- The totals row sums every batch; its time span is the first batch's start to the last commit.
- The ``bad`` column sums the batches' bad rows (``onRecordError`` deadLetter / skip, the
  documents' ``bad_records``); ``-`` where no batch counted them. :func:`bad_record_lines` gives
  the batches that had any, per reason.
- Nothing read from the log reaches the terminal raw: every cell goes through
  :func:`printable`, which strips terminal escape sequences and C0/C1 control characters.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "AUTO_BATCH_ROWS",
    "Row",
    "bad_record_lines",
    "printable",
    "render",
    "report_rows",
    "totals",
]

AUTO_BATCH_ROWS = 60
_MB = 1_000_000


# Terminal escape sequences (ECMA-48), whole, then any control character left: CSI (ESC [ or
# C1 0x9b) with its parameters; OSC, DCS, SOS, PM, APC strings up to their terminator (BEL or
# ST) or the end; other ESC sequences; then C0, DEL and C1.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d-\x9f]).*?(?:\x07|\x1b\\|\x9c|$)"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x1f\x7f-\x9f]",
    re.DOTALL,
)


def printable(text: str) -> str:
    """``text`` without terminal escape sequences or control characters (C0, DEL, C1): what a
    file in the log says cannot move the cursor, recolour, retitle or clear the terminal."""
    return _ESCAPES.sub("", text)


@dataclass(frozen=True)
class Row:
    """One batch, one minute, or the totals."""

    label: str
    batches: int
    records: int
    compressed_mb: float
    records_per_s: float | None
    mb_per_s: float | None
    latency_ms_avg: float | None
    latency_ms_max: float | None
    retries: int
    errors: int
    commit_ms_max: float | None
    compression_ratio: float | None
    #: Bad rows (``onRecordError`` deadLetter / skip) dead-lettered or skipped; None when no
    #: batch of the row counted them (``onRecordError=fail``).
    bad_records: int | None
    #: Where the row sits on a plot's x axis: the batch id, or the minute's epoch seconds.
    x: float


def _row(label: str, x: float, documents: Sequence[dict[str, Any]]) -> Row:
    measured = [d["metrics"] for d in documents if d.get("metrics")]
    records = sum(d.get("record_count", 0) for d in documents)
    compressed = sum(m["compressed_bytes"] for m in measured)
    uncompressed = sum(m["uncompressed_bytes"] for m in measured)
    requests = sum(m["requests"] for m in measured)
    latency_sum = sum((m["produce_latency_ms_avg"] or 0.0) * m["requests"] for m in measured)
    write_ms = sum(m["write_duration_ms"] for m in measured)
    measured_records = sum(m["records"] for m in measured)
    return Row(
        label=label,
        batches=len(documents),
        records=records,
        compressed_mb=compressed / _MB,
        records_per_s=measured_records * 1000 / write_ms if write_ms else None,
        mb_per_s=compressed / _MB * 1000 / write_ms if write_ms else None,
        latency_ms_avg=latency_sum / requests if requests else None,
        latency_ms_max=max((m["produce_latency_ms_max"] for m in measured), default=None),
        retries=sum(m["retries"] for m in measured),
        errors=sum(m["errors"] for m in measured),
        commit_ms_max=max((m["commit_duration_ms"] for m in measured), default=None),
        compression_ratio=uncompressed / compressed if compressed else None,
        bad_records=(
            sum(b["bad_records"] for b in bad) if (bad := _bad_sections(documents)) else None
        ),
        x=x,
    )


def _bad_sections(documents: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d["bad_records"] for d in documents if d.get("bad_records") is not None]


_ACTIONS = {"deadLetter": "dead-lettered", "skip": "skipped"}


def bad_record_lines(documents: Sequence[dict[str, Any]]) -> list[str]:
    """One line per batch that had bad rows: how many, what became of them, per reason."""
    out = []
    for d in documents:
        bad = d.get("bad_records")
        if not bad or not bad["bad_records"]:
            continue
        label = str(d["batch_id"]) if d.get("batch_id") is not None else str(d.get("write_id"))
        reasons = ", ".join(f"{r} {n}" for r, n in sorted(bad["by_reason"].items()))
        share = f" of {bad['rows_read']} rows" if bad["rows_read"] else ""
        action = _ACTIONS.get(bad["action"], bad["action"])
        out.append(printable(f"batch {label}: {bad['bad_records']}{share} {action} ({reasons})"))
    return out


def _minute(document: dict[str, Any]) -> int:
    return int(document.get("committed_at_ms", 0)) // 60_000 * 60


def report_rows(
    documents: Sequence[dict[str, Any]], per: Literal["auto", "batch", "minute"] = "auto"
) -> list[Row]:
    """The table's rows (see the module docstring for the rule)."""
    if per == "auto":
        per = "batch" if len(documents) <= AUTO_BATCH_ROWS else "minute"
    if per == "batch":
        return [
            _row(
                str(d["batch_id"]) if d.get("batch_id") is not None else str(d.get("write_id")),
                float(d["batch_id"] if d.get("batch_id") is not None else i),
                [d],
            )
            for i, d in enumerate(documents)
        ]
    minutes: dict[int, list[dict[str, Any]]] = {}
    for d in documents:
        minutes.setdefault(_minute(d), []).append(d)
    return [
        _row(time.strftime("%Y-%m-%d %H:%M", time.gmtime(m)), float(m), docs)
        for m, docs in sorted(minutes.items())
    ]


def totals(documents: Sequence[dict[str, Any]]) -> Row:
    """Every batch summed; rows/s over the summed write time."""
    return _row("total", 0.0, documents)


_COLUMNS = (
    ("batch", "label", "{}"),
    ("batches", "batches", "{}"),
    ("records", "records", "{}"),
    ("MB", "compressed_mb", "{:.2f}"),
    ("rows/s", "records_per_s", "{:.0f}"),
    ("MB/s", "mb_per_s", "{:.2f}"),
    ("lat avg ms", "latency_ms_avg", "{:.1f}"),
    ("lat max ms", "latency_ms_max", "{:.1f}"),
    ("retries", "retries", "{}"),
    ("errors", "errors", "{}"),
    ("commit ms", "commit_ms_max", "{:.0f}"),
    ("ratio", "compression_ratio", "{:.2f}"),
    ("bad", "bad_records", "{}"),
)


def render(rows: Iterable[Row], total: Row, *, per_minute: bool = False) -> str:
    """A fixed-width table, the totals last."""
    header = [("minute (UTC)" if per_minute else name) if i == 0 else name
              for i, (name, _, _) in enumerate(_COLUMNS)]  # fmt: skip
    cells = [header]
    for row in [*rows, total]:
        line = []
        for _, attr, fmt in _COLUMNS:
            value = getattr(row, attr)
            line.append("-" if value is None else printable(fmt.format(value)))
        cells.append(line)
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.insert(len(lines) - 1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
