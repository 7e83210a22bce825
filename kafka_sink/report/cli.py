"""The command line of ``python -m kafka_sink report``.

Role: parse the arguments, read the commit log (``reader.py``), print the table and totals
(``table.py``), then one line per batch that had bad rows (``onRecordError`` deadLetter / skip:
how many, per reason) and, with ``--plot FILE.png``, write the picture (``plot.py``).

Invariants:
- Exit status 0 on success; 2 with a one-line message (no traceback) when the location cannot be
  read, holds no commit document, or the plot cannot be drawn.
- The location is echoed without the password of its user info and capped to its first 200
  characters and its length (``shown_location``); a store's error quotes no path uncapped.
- A file of the log that cannot be used (``reader.Skipped``: unreadable, not JSON, another
  version, a malformed field) costs one line on stderr, ``report: skipped <file>: <why>``, and
  a count after them; the others are reported, and the status is 0 as long as one document was
  read (2, as above, when none was).
- Text read from the log (file names, fields, reasons quoting them) is printed through
  ``table.printable``: no terminal escape sequence or control character from a file reaches the
  terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kafka_sink.report.reader import load_commits
from kafka_sink.report.table import (
    AUTO_BATCH_ROWS,
    bad_record_lines,
    printable,
    render,
    report_rows,
    totals,
)

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_sink report",
        description="The pykafka sink's per-batch metrics, read from its commit log.",
    )
    parser.add_argument(
        "location",
        help="the commitLog location, or a streaming query's checkpointLocation (local path, "
        "file:, s3a://, gs://, abfss://, hdfs://)",
    )
    parser.add_argument(
        "--per",
        choices=("auto", "batch", "minute"),
        default="auto",
        help="one row per batch, per minute, or (auto) per batch up to 60 batches",
    )
    parser.add_argument("--plot", metavar="FILE.png", help="also draw the metrics to FILE.png")
    parser.add_argument("--title", help="the plot's title (default: the commit log's location)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from kafka_sink.report.plot import PlotUnavailableError, plot_rows
    from kafka_sink.sink_errors import CommitStoreError
    from kafka_sink.spark.commit_log.store import shown_location

    try:
        log = load_commits(args.location)
    except CommitStoreError as exc:
        where = printable(shown_location(args.location))
        print(f"report: cannot read {where}: {printable(str(exc))}", file=sys.stderr)
        return 2
    where, documents = log.location, log.documents
    for skipped in log.skipped:
        print(f"report: skipped {printable(skipped.name)}: {printable(skipped.reason)}",
              file=sys.stderr)  # fmt: skip
    if log.skipped:
        print(f"report: {len(log.skipped)} file(s) skipped, {len(documents)} read",
              file=sys.stderr)  # fmt: skip
    if not documents:
        print(f"report: no pykafka commit documents in {shown_location(where)}", file=sys.stderr)
        return 2
    per_minute = args.per == "minute" or (args.per == "auto" and len(documents) > AUTO_BATCH_ROWS)
    rows = report_rows(documents, "minute" if per_minute else "batch")
    print(f"pykafka commit log {where}: {len(documents)} batches")
    print(render(rows, totals(documents), per_minute=per_minute))
    bad = bad_record_lines(documents)
    if bad:
        print(f"bad records ({len(bad)} batch(es)):")
        for line in bad:
            print(f"  {line}")
    if args.plot:
        try:
            plot_rows(
                rows, args.plot, title=args.title or f"pykafka: {where}", per_minute=per_minute
            )
        except (PlotUnavailableError, OSError) as exc:
            print(f"report: {exc}", file=sys.stderr)
            return 2
        print(f"plot written to {args.plot}")
    return 0
