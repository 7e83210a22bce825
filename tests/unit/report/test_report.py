"""``python -m kafka_sink report``: reading a commit log, the table's rows, totals and the plot.

The commit documents are written by the sink's own document code with hand-made task metrics;
the stores are a local directory and a ``pyarrow.fs`` store (the class S3, GCS, Azure and HDFS
go through), so reading a remote log runs the same ``names``/``read`` path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kafka_sink.__main__ import main as kafka_sink_main
from kafka_sink.report.plot import SERIES, PlotUnavailableError, plot_rows
from kafka_sink.report.reader import load_commits
from kafka_sink.report.table import AUTO_BATCH_ROWS, render, report_rows, totals
from kafka_sink.spark.commit_log.store import ArrowCommitStore
from kafka_sink.spark.metrics import PartitionMetrics, TaskMetrics, batch_metrics


def _document(batch_id: int, records: int, *, at_ms: int, retries: int = 0) -> dict:
    task = TaskMetrics(
        (PartitionMetrics("t", 0, records, 100 * records, 20 * records, 1, 0, retries),),
        2,
        8.0,
        6.0,
        0.0,
        0.0,
        at_ms - 1_000,
        900,
        None,
    )
    return {
        "format": "pykafka-commit",
        "kind": "commit",
        "batch_id": batch_id,
        "record_count": records,
        "committed_at_ms": at_ms,
        "metrics": batch_metrics([(0, task)], commit_duration_ms=30, committed_wall_ms=at_ms),
    }


def _log(directory: Path, documents: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for d in documents:
        (directory / f"{d['batch_id']}.json").write_text(json.dumps(d))


def test_a_checkpoint_is_read_through_its_commit_directory_skipping_other_files(tmp_path) -> None:
    log = tmp_path / "pykafka-commits"
    _log(log, [_document(1, 20, at_ms=2_000_000), _document(0, 10, at_ms=1_000_000)])
    (log / "2.aborted.json").write_text(json.dumps({"format": "pykafka-commit", "kind": "abort"}))
    (log / "0.json.replaced-5").write_text("{}")
    (log / "notes.json").write_text("not json")
    where, documents = load_commits(str(tmp_path))
    assert where == str(log)
    assert [d["batch_id"] for d in documents] == [0, 1]
    assert load_commits(str(log))[1] == documents


def test_a_remote_store_lists_and_reads_the_same_way(tmp_path) -> None:
    from pyarrow.fs import LocalFileSystem

    _log(tmp_path / "log", [_document(0, 10, at_ms=1_000_000)])
    store = ArrowCommitStore("s3a://b/log", LocalFileSystem(), str(tmp_path / "log"), False)
    assert store.names() == ["0.json"]
    assert json.loads(store.read("0.json") or b"")["record_count"] == 10
    missing = ArrowCommitStore("s3a://b/none", LocalFileSystem(), str(tmp_path / "none"), False)
    assert missing.names() == []


def test_rows_per_batch_and_totals_are_ratios_of_sums() -> None:
    documents = [
        _document(0, 1_000, at_ms=1_000_000),
        _document(1, 3_000, at_ms=1_010_000, retries=2),
    ]
    rows = report_rows(documents)
    assert [(r.label, r.records, r.retries) for r in rows] == [("0", 1_000, 0), ("1", 3_000, 2)]
    assert rows[0].records_per_s == 1_000.0  # 1,000 records over the 1 s from start to commit
    total = totals(documents)
    assert (total.records, total.retries, total.batches) == (4_000, 2, 2)
    assert total.records_per_s == 2_000.0  # 4,000 records over 2 s of writes
    assert total.latency_ms_avg == 4.0 and total.latency_ms_max == 6.0
    assert total.compression_ratio == 5.0 and total.commit_ms_max == 30
    table = render(rows, total)
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["batch", "batches", "records", "MB"]
    assert lines[-1].split()[:3] == ["total", "2", "4000"]


def test_long_runs_get_a_row_per_minute() -> None:
    documents = [_document(i, 10, at_ms=600_000 + i * 10_000) for i in range(AUTO_BATCH_ROWS + 1)]
    rows = report_rows(documents)  # 61 batches, 10 s apart: 11 minutes
    assert len(rows) == 11
    assert [r.batches for r in rows] == [6] * 10 + [1]
    assert rows[0].label == "1970-01-01 00:10" and rows[0].records == 60
    assert len(report_rows(documents, "batch")) == AUTO_BATCH_ROWS + 1


def test_the_command_prints_the_table_and_plots_every_series(tmp_path, capsys) -> None:
    _log(tmp_path / "pykafka-commits", [_document(i, 100 * (i + 1), at_ms=(i + 1) * 60_000)
                                        for i in range(5)])  # fmt: skip
    png = tmp_path / "m.png"
    assert kafka_sink_main(["report", str(tmp_path), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "5 batches" in out and "total" in out and f"plot written to {png}" in out
    import matplotlib.image

    image = matplotlib.image.imread(str(png))
    assert image.shape[0] > 500 and image.shape[1] > 500
    assert [name for name, _ in SERIES] == [
        "rows/s",
        "MB/s (as sent)",
        "produce latency (ms)",
        "retries",
        "commit time (ms)",
    ]


def test_an_empty_location_is_a_clear_error(tmp_path, capsys) -> None:
    assert kafka_sink_main(["report", str(tmp_path)]) == 2
    assert "no pykafka commit documents in" in capsys.readouterr().err


def test_the_plot_draws_each_series_from_the_rows(tmp_path) -> None:
    documents = [_document(i, 1_000 * (i + 1), at_ms=(i + 1) * 60_000, retries=i) for i in range(3)]
    rows = report_rows(documents)
    drawn = plot_rows(rows, str(tmp_path / "p.png"), title="t")
    assert list(drawn) == [name for name, _ in SERIES]
    assert drawn["rows/s"]["rows/s"] == [r.records_per_s for r in rows]
    assert drawn["retries"]["retries"] == [0.0, 1.0, 2.0]
    assert drawn["produce latency (ms)"] == {"avg": [4.0] * 3, "max": [6.0] * 3}
    assert drawn["commit time (ms)"]["commit time (ms)"] == [30.0] * 3


def test_a_plot_without_matplotlib_names_the_extra(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rows = report_rows([_document(0, 1, at_ms=1_000)])
    with pytest.raises(PlotUnavailableError, match=r"pip install 'pykafka-sink\[report\]'"):
        plot_rows(rows, str(tmp_path / "x.png"), title="t")
