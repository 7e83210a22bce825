"""Per process, where a traced case's time went (``bench_first_row.py --trace DIR``).

    python benchmarks/first_row_trace/summarize.py DIR/pykafka-r1.trace [...]

For every Python process Spark started after the driver's mark (``first-write-begin`` or
``start-begin``), in order: its role (the PySpark worker module it ran first), when it was
started (or forked from its daemon), when its worker function began, when its first sink or
data source module finished importing (the import cost is the gap from the function's start), and
each traced step of the sink, all in seconds from the mark. Steps of a process' later calls (a
second write, a second micro-batch) are left out after the driver's end mark.
"""

from __future__ import annotations

import sys
from collections import defaultdict

ENTRY_MODULES = ("kafka_sink.spark.datasource", "kafka_sink.spark.writer", "python_discard")


def summarize(path: str) -> str:
    events = []
    with open(path) as f:
        for line in f:
            t, pid, what = line.rstrip("\n").split(" ", 2)
            events.append((float(t), int(pid), what))
    zero = next(
        (t for t, _p, w in events if w in ("mark first-write-begin", "mark start-begin")), None
    )
    end = next(
        (t for t, _p, w in events if w in ("mark first-write-end", "mark first-record-read")), None
    )
    if zero is None or end is None:
        return f"{path}: no marks"
    by_pid: dict[int, list[tuple[float, str]]] = defaultdict(list)
    for t, pid, what in events:
        if zero - 5 <= t <= end:
            by_pid[pid].append((t - zero, what))
    out = [f"{path}: {end - zero:.2f} s from the mark to its end"]
    rows = []
    for pid, evs in by_pid.items():
        role = next(
            (w.split()[1].split(":")[0] for _t, w in evs if w.startswith("begin pyspark")), None
        )
        if role is None:
            continue
        born = next((t for t, w in evs if w.startswith(("start", "forked"))), None)
        main = next(t for t, w in evs if w.startswith("begin pyspark"))
        imported = next(
            (t for t, w in evs if w.startswith("imported") and w.split()[1] in ENTRY_MODULES), None
        )
        steps = []
        opened: dict[str, float] = {}
        for t, w in evs:
            kind, _, label = w.partition(" ")
            if label.startswith("pyspark"):
                continue
            short = label.split(":")[-1]
            if kind == "begin":
                opened.setdefault(short, t)
            elif kind == "end" and short in opened:
                steps.append(f"{short} {1000 * (t - opened.pop(short)):.0f} ms")
        last = max(t for t, _w in evs)
        rows.append((born if born is not None else main, pid, role, main, imported, steps, last))
    for born, pid, role, main, imported, steps, last in sorted(rows):
        imp = f"sink module imported +{1000 * (imported - main):.0f} ms" if imported else ""
        out.append(
            f"  {role.removeprefix('pyspark.'):<36} pid {pid}: up {born:6.2f} s, worker at "
            f"{main:6.2f} s, {imp}; last event {last:6.2f} s; " + ", ".join(steps[:8])
        )
    return "\n".join(out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(summarize(p))
