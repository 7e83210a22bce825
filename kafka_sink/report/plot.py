"""A picture of a commit log's rows: rows/s, MB/s, produce latency, retries and commit time.

Role: :func:`plot_rows` draws the rows of ``table.py`` as five stacked panels sharing the x axis
(batch id, or the minute) and writes a PNG, with matplotlib (the ``report`` extra) on its
non-interactive Agg backend.

Invariants:
- matplotlib is imported here only; missing, :class:`PlotUnavailableError` names the extra.
- A row with no value for a series (no metrics in its documents) leaves a gap, not a zero.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from kafka_sink.report.table import Row

__all__ = ["INSTALL_HINT", "SERIES", "PlotUnavailableError", "plot_rows"]

INSTALL_HINT = "pip install 'pykafka-sink[report]'"

#: (panel title, the rows' attributes drawn in it): what the picture shows, top to bottom.
SERIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("rows/s", ("records_per_s",)),
    ("MB/s (as sent)", ("mb_per_s",)),
    ("produce latency (ms)", ("latency_ms_avg", "latency_ms_max")),
    ("retries", ("retries",)),
    ("commit time (ms)", ("commit_ms_max",)),
)
_LABELS = {"latency_ms_avg": "avg", "latency_ms_max": "max"}


class PlotUnavailableError(RuntimeError):
    """matplotlib is not installed."""


def plot_rows(
    rows: Sequence[Row], path: str, *, title: str, per_minute: bool = False
) -> dict[str, dict[str, list[float]]]:
    """Write the picture of ``rows`` to ``path`` (PNG); returns what each panel drew (panel ->
    line -> values, NaN for a gap), read back from the figure's lines."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise PlotUnavailableError(
            f"--plot needs matplotlib, which is not installed. Fix: {INSTALL_HINT}"
        ) from None
    xs = [r.x for r in rows]
    fig, axes = plt.subplots(len(SERIES), 1, sharex=True, figsize=(9, 10), layout="constrained")
    for ax, (name, attrs) in zip(axes, SERIES, strict=True):
        for attr in attrs:
            ys = [getattr(r, attr) for r in rows]
            values = [float("nan") if y is None else float(y) for y in ys]
            ax.plot(xs, values, marker="o", markersize=3, label=_LABELS.get(attr, name))
        ax.set_ylabel(name)
        ax.set_ylim(bottom=0)  # a flat series (no retries) sits on the axis, not mid-panel
        ax.grid(True, alpha=0.3)
        if len(attrs) > 1:
            ax.legend(loc="upper right")
    if per_minute:
        ticks = axes[-1].get_xticks()
        axes[-1].set_xticks(ticks)
        axes[-1].set_xticklabels([time.strftime("%H:%M", time.gmtime(t)) for t in ticks])
        axes[-1].set_xlabel("minute (UTC)")
    else:
        axes[-1].xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[-1].set_xlabel("batch")
    fig.suptitle(title)
    fig.savefig(path, format="png", dpi=100)
    drawn = {
        name: {line.get_label(): [float(y) for y in line.get_ydata()] for line in ax.get_lines()}
        for ax, (name, _) in zip(axes, SERIES, strict=True)
    }
    plt.close(fig)
    return drawn
