"""``python -m kafka_sink report``: reading a commit log, the table's rows, totals and the plot.

The commit documents are written by the sink's own document code with hand-made task metrics;
the stores are a local directory and a ``pyarrow.fs`` store (the class S3, GCS, Azure and HDFS
go through), so reading a remote log runs the same ``names``/``read`` path.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_sink.__main__ import main as kafka_sink_main
from kafka_sink.report.plot import SERIES, PlotUnavailableError, plot_rows
from kafka_sink.report.reader import READ_VERSIONS, load_commits
from kafka_sink.report.table import (
    AUTO_BATCH_ROWS,
    bad_record_lines,
    printable,
    render,
    report_rows,
    totals,
)
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
        "version": 1,
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
    read = load_commits(str(tmp_path))
    assert read.location == str(log)
    assert [d["batch_id"] for d in read.documents] == [0, 1]
    assert [s.name for s in read.skipped] == ["notes.json"]
    assert read.skipped[0].reason.startswith("not JSON: ")
    assert load_commits(str(log)).documents == read.documents


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


# ---- documents the report cannot use --------------------------------------------------------


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


#: file name -> content of a file the report must skip, and the reason its line gives.
BAD_FILES: dict[str, tuple[str, str]] = {
    "10.json": ('{"format": "pykafka-commit", ', "not JSON: "),
    "11.json": ("[1, 2]", "not a pykafka commit document"),
    "12.json": (json.dumps({"format": "other"}), "not a pykafka commit document"),
    "13.json": (_deep(100_000), "not JSON: nested too deeply"),
    "14.json": ("\xff\xfe", "not JSON: "),
}


def _bad_documents() -> dict[str, tuple[dict, str]]:
    """File name -> (a commit document broken in one field, the reason its skip line gives)."""

    def broken(batch_id: int, change: dict, drop: str = "", in_metrics: bool = False) -> dict:
        d = _document(batch_id, 5, at_ms=3_000_000 + batch_id)
        target = d["metrics"] if in_metrics else d
        target.update(change)
        target.pop(drop, None)
        return d

    return {
        "20.json": (broken(20, {"version": 2}), "commit document version 2; this report reads "
                                                "version 1"),
        "21.json": (broken(21, {}, drop="version"), "commit document version null"),
        "22.json": (broken(22, {"committed_at_ms": 10**20}), "committed_at_ms 100000000000000000000"
                                                            " is not a time"),
        "23.json": (broken(23, {"committed_at_ms": "soon"}), "committed_at_ms \"soon\" is not"),
        "24.json": (broken(24, {}, drop="requests", in_metrics=True), "metrics.requests null is"),
        "25.json": (broken(25, {"retries": "2"}, in_metrics=True), "metrics.retries \"2\" is not"),
        "26.json": (broken(26, {"batch_id": [1]}), "batch_id list is not a non-negative integer"),
        "27.json": (broken(27, {"record_count": -1}), "record_count -1 is not"),
        "28.json": (broken(28, {"kind": "merge"}), "unknown document kind \"merge\""),
        "29.json": (broken(29, {"metrics": [1]}), "metrics is not an object"),
        "30.json": (broken(30, {"write_duration_ms": float("inf")}, in_metrics=True),
                    "metrics.write_duration_ms Infinity is not"),
    }  # fmt: skip


def _mixed_log(directory: Path) -> list[str]:
    """Three good documents and every kind of bad file; the bad files' names."""
    good = [_document(i, 100, at_ms=(i + 1) * 60_000) for i in range(3)]
    _log(directory, good)
    for name, (content, _) in BAD_FILES.items():
        (directory / name).write_bytes(content.encode("latin-1"))
    for name, (document, _) in _bad_documents().items():
        (directory / name).write_text(json.dumps(document))
    (directory / "4.aborted.json").write_text("{}")  # the log's own: left out silently
    (directory / "40.json").write_text(json.dumps({**good[0], "kind": "abort", "batch_id": 40}))
    return [*BAD_FILES, *_bad_documents()]


@pytest.mark.parametrize("per", ["batch", "minute", "auto"])
def test_a_report_over_good_and_bad_documents_prints_the_good_and_a_line_per_skipped_file(
    tmp_path, capsys, per
) -> None:
    bad = _mixed_log(tmp_path)
    assert kafka_sink_main(["report", str(tmp_path), "--per", per]) == 0
    out, err = capsys.readouterr()
    assert "3 batches" in out
    table = out.splitlines()
    assert table[-1].split()[:3] == ["total", "3", "300"]
    lines = err.splitlines()
    reasons = {**{n: r for n, (_, r) in BAD_FILES.items()},
               **{n: r for n, (_, r) in _bad_documents().items()}}  # fmt: skip
    assert len(lines) == len(bad) + 1
    for name, line in zip(sorted(bad), lines[:-1], strict=True):
        assert line.startswith(f"report: skipped {name}: {reasons[name]}"), line
    assert lines[-1] == f"report: {len(bad)} file(s) skipped, 3 read"
    assert "Traceback" not in err


def test_a_file_the_store_cannot_read_is_skipped_with_the_stores_reason(
    tmp_path, capsys, monkeypatch
) -> None:
    from kafka_sink.sink_errors import CommitStoreError
    from kafka_sink.spark.commit_log.store import LocalCommitStore

    _log(tmp_path, [_document(i, 10, at_ms=(i + 1) * 1_000) for i in range(2)])
    real = LocalCommitStore.read

    def read(self, name: str) -> bytes | None:
        if name == "1.json":
            raise CommitStoreError("Permission denied")
        return real(self, name)

    monkeypatch.setattr(LocalCommitStore, "read", read)
    assert kafka_sink_main(["report", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "1 batches" in out
    assert err.splitlines()[0] == "report: skipped 1.json: cannot be read: Permission denied"


def test_a_log_of_only_bad_files_exits_2_with_a_line_each(tmp_path, capsys) -> None:
    for name, (content, _) in BAD_FILES.items():
        (tmp_path / name).write_bytes(content.encode("latin-1"))
    assert kafka_sink_main(["report", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert [line.split(":")[0] for line in lines[: len(BAD_FILES)]] == ["report"] * len(BAD_FILES)
    assert lines[len(BAD_FILES)] == f"report: {len(BAD_FILES)} file(s) skipped, 0 read"
    assert lines[-1].startswith("report: no pykafka commit documents in")


_HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x1b[31mred\x9b1mC1\x00\x08\r\x7fend\x1bc"


def test_control_characters_in_stored_fields_never_reach_the_terminal(tmp_path, capsys) -> None:
    d = _document(0, 10, at_ms=60_000)
    d["batch_id"] = None
    d["write_id"] = _HOSTILE
    (tmp_path / "w.json").write_text(json.dumps(d))
    (tmp_path / "\x1b[2Jevil\x1b]8;;x\x07.json").write_text("\x1b[5mnot json")
    (tmp_path / "v.json").write_text(json.dumps({**d, "version": _HOSTILE}))
    assert kafka_sink_main(["report", str(tmp_path), "--per", "batch"]) == 0
    out, err = capsys.readouterr()
    for text in (out, err):
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", text), repr(text)
    assert "redC1end" in out  # the text around the escapes stays
    assert "pwned" not in out  # an OSC window title is dropped whole
    assert "report: skipped evil.json: not JSON: " in err


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", "plain"),
        ("\x1b[1;31mbold red\x1b[0m", "bold red"),
        ("\x1b]0;title\x07after", "after"),
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("\x9b2Jc1 csi", "c1 csi"),
        ("\x9d0;t\x9cosc", "osc"),
        ("a\x00b\tc\nd\x7fe\x85f", "abcdef"),
        ("\x1bPdcs\x1b\\x", "x"),
        ("\x1b(Bcharset", "charset"),
        ("unicode é ✓ 数", "unicode é ✓ 数"),
        ("\x1b", ""),
    ],
)
def test_printable_strips_escape_sequences_and_control_characters(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_the_reader_reads_the_version_the_sink_writes() -> None:
    from kafka_sink.spark.commit_log.document import COMMIT_FORMAT_VERSION, build_document

    assert COMMIT_FORMAT_VERSION in READ_VERSIONS
    document = build_document("commit", [], mode="append", batch_id=3, now_ms=1_000)
    assert document["version"] == COMMIT_FORMAT_VERSION


_FIELDS = st.sampled_from(
    ["version", "kind", "batch_id", "write_id", "record_count", "committed_at_ms", "metrics",
     "metrics.records", "metrics.requests", "metrics.produce_latency_ms_avg",
     "metrics.produce_latency_ms_max", "metrics.write_duration_ms", "metrics.compressed_bytes",
     "bad_records", "bad_records.bad_records", "bad_records.rows_read", "bad_records.action",
     "bad_records.by_reason"]
)  # fmt: skip
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(changes=st.lists(st.tuples(_FIELDS, _VALUES), min_size=1, max_size=4))
def test_any_mangled_document_is_reported_or_skipped_never_raised(changes) -> None:
    import tempfile

    d = _with_bad_records(_document(7, 10, at_ms=120_000), "skip", 10, serialization=1)
    for field, value in changes:
        section, _, key = field.rpartition(".")
        target = d.get(section) if section else d
        if isinstance(target, dict):
            target[key] = value
    with tempfile.TemporaryDirectory() as tmp:
        _log(Path(tmp), [_document(0, 10, at_ms=60_000)])
        Path(tmp, "7.json").write_text(json.dumps(d))
        read = load_commits(tmp)
        assert len(read.documents) + len(read.skipped) + (d.get("kind") == "abort") >= 2
        for per in ("batch", "minute"):
            rows = report_rows(read.documents, per)  # type: ignore[arg-type]
            render(rows, totals(read.documents), per_minute=per == "minute")
        bad_record_lines(read.documents)


def _with_bad_records(d: dict, action: str, rows_read: int, **by_reason: int) -> dict:
    d["bad_records"] = {
        "action": action,
        "rows_read": rows_read,
        "bad_records": sum(by_reason.values()),
        "by_reason": by_reason,
        "first": [],
    }
    return d


def test_the_bad_column_sums_bad_rows_and_a_line_per_batch_says_them_per_reason(
    tmp_path, capsys
) -> None:
    documents = [
        _with_bad_records(
            _document(0, 10, at_ms=60_000), "deadLetter", 13, record_too_large=2, serialization=1
        ),
        _with_bad_records(_document(1, 10, at_ms=120_000), "deadLetter", 10),  # none bad
        _document(2, 10, at_ms=180_000),  # onRecordError=fail: not counted
    ]
    rows = report_rows(documents)
    assert [r.bad_records for r in rows] == [3, 0, None]
    assert totals(documents).bad_records == 3
    table = render(rows, totals(documents)).splitlines()
    assert table[0].split()[-1] == "bad"
    assert [line.split()[-1] for line in table[2:5]] == ["3", "0", "-"]
    _log(tmp_path, documents)
    assert kafka_sink_main(["report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-2:] == [
        "bad records (1 batch(es)):",
        "  batch 0: 3 of 13 rows dead-lettered (record_too_large 2, serialization 1)",
    ]


def test_a_malformed_bad_records_section_skips_its_file_naming_the_field(tmp_path) -> None:
    good = _with_bad_records(_document(0, 10, at_ms=60_000), "skip", 10, null_topic=1)
    bad = _with_bad_records(_document(1, 10, at_ms=120_000), "skip", 10, null_topic=1)
    bad["bad_records"]["by_reason"]["null_topic"] = -1
    _log(tmp_path, [good, bad])
    read = load_commits(str(tmp_path))
    assert [d["batch_id"] for d in read.documents] == [0]
    assert [(s.name, s.reason) for s in read.skipped] == [
        ("1.json", "bad_records.by_reason is not an object of non-negative integer counts")
    ]


@pytest.mark.parametrize("location", ["http://[::1", "s3a://[::1/x", "file://[::1", "hdfs://[nn"])
def test_a_malformed_location_is_one_line_naming_it_and_exit_2(location, capsys) -> None:
    assert kafka_sink_main(["report", location]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"report: cannot read {location}: ")
    assert "not a valid path or URI" in err
    assert "Traceback" not in err


def test_a_malformed_location_is_refused_by_the_store_naming_it_capped() -> None:
    from kafka_sink.sink_errors import CommitStoreError
    from kafka_sink.spark.commit_log.store import join, open_store

    location = "s3a://[::1/" + "x" * 100_000
    for call in (lambda: join(location, "pykafka-commits"), lambda: open_store(location)):
        with pytest.raises(CommitStoreError, match=r"not a valid path or URI") as caught:
            call()
        message = str(caught.value)
        assert "s3a://[::1/xxx" in message
        assert "(100011 characters)" in message
        assert len(message) < 1_000


@pytest.mark.parametrize("depth", [1, 20_000])
def test_a_long_location_is_quoted_capped_in_the_one_line(tmp_path, capsys, depth) -> None:
    location = str(tmp_path / "/".join(["d" * 4] * depth)) if depth > 1 else "/" + "y" * 100_000
    assert kafka_sink_main(["report", location]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1, err[:300]
    assert err.startswith(f"report: cannot read {location[:64]}")
    assert f"({len(location)} characters)" in err
    assert len(err) < 1_000, err[:300]


def test_a_commit_file_past_the_size_cap_is_refused_naming_it_and_the_cap(tmp_path) -> None:
    from pyarrow.fs import LocalFileSystem

    from kafka_sink.sink_errors import CommitStoreError
    from kafka_sink.spark.commit_log.store import (
        MAX_COMMIT_FILE_BYTES,
        ArrowCommitStore,
        LocalCommitStore,
    )

    assert MAX_COMMIT_FILE_BYTES == 16 * 1024 * 1024
    (tmp_path / "big.json").write_bytes(b" " * (MAX_COMMIT_FILE_BYTES + 1))
    (tmp_path / "edge.json").write_bytes(b" " * MAX_COMMIT_FILE_BYTES)
    stores = [
        LocalCommitStore(str(tmp_path)),
        ArrowCommitStore("s3a://b/log", LocalFileSystem(), str(tmp_path), False),
    ]
    for store in stores:
        assert store.read("edge.json") == b" " * MAX_COMMIT_FILE_BYTES
        with pytest.raises(CommitStoreError) as caught:
            store.read("big.json")
        assert str(caught.value) == (
            f"{store.location}/big.json is larger than {MAX_COMMIT_FILE_BYTES} bytes (16 MiB), "
            "more than a commit document can hold"
        )


def test_a_commit_file_past_the_size_cap_is_skipped_and_counted(tmp_path, capsys) -> None:
    from kafka_sink.spark.commit_log.store import MAX_COMMIT_FILE_BYTES

    _log(tmp_path, [_document(0, 10, at_ms=1_000)])
    (tmp_path / "1.json").write_bytes(b" " * (MAX_COMMIT_FILE_BYTES + 1))
    assert kafka_sink_main(["report", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "1 batches" in out
    assert err.splitlines() == [
        f"report: skipped 1.json: cannot be read: {tmp_path}/1.json is larger than "
        f"{MAX_COMMIT_FILE_BYTES} bytes (16 MiB), more than a commit document can hold",
        "report: 1 file(s) skipped, 1 read",
    ]
