"""The driver's side of ``onRecordError`` deadLetter / skip: the tasks' bad-row counts merged,
the batch's bounds (``deadLetterMaxRecords``, ``deadLetterMaxRatio``) enforced before anything
is committed, and the counts in the commit document, its log line and the Prometheus push."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kafka_sink.sink_errors import BadRecordsLimitError, SinkDataError
from kafka_sink.spark.bad_records import (
    MAX_SAMPLES,
    BadRecordCounts,
    BadRecordSample,
    merge_counts,
)
from kafka_sink.spark.commit_log.document import (
    PartitionRange,
    PyKafkaCommitMessage,
    bad_records_summary,
    build_document,
    log_line,
)
from kafka_sink.spark.driver.eos.committer import ALREADY_DONE, COMMITTED
from kafka_sink.spark.driver.record_bounds import check_bounds
from kafka_sink.spark.metrics import prometheus
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaBatchWriter, PyKafkaStreamWriter
from tests.fakes.coordinator import COMPLETE_ABORT, FakeCoordinator
from tests.unit.spark.eos_support import (
    FaultyStore,
    committer,
    expected_rows,
    run_tasks,
    visible_counts,
)

LAYOUT = InputLayout(
    topic_column=False,
    key_column=False,
    partition_column=False,
    headers_column=False,
    timestamp=None,
)


def _sample(partition: int, row: int, reason: str = "record_too_large") -> BadRecordSample:
    return BadRecordSample(partition, row, "t", reason, f"row {row} is {reason} (fix it)")


def _counts(
    rows_read: int, action: str = "deadLetter", partition: int = 0, **by_reason: int
) -> BadRecordCounts:
    samples = tuple(
        _sample(partition, i * 10, reason)
        for i, (reason, n) in enumerate(sorted(by_reason.items()))
        if n
    )
    return BadRecordCounts(action, rows_read, tuple(sorted(by_reason.items())), samples)


def _check(counts: BadRecordCounts | None, **bounds: Any) -> None:
    check_bounds(
        counts,
        max_records=bounds.get("max_records"),
        max_ratio=bounds.get("max_ratio"),
        batch_id=bounds.get("batch_id", 7),
        guarantee=bounds.get("guarantee", "at-least-once"),
    )


# -- merging -----------------------------------------------------------------------------------


def test_merge_adds_rows_and_reasons_and_keeps_the_first_samples_in_position_order() -> None:
    a = BadRecordCounts("skip", 10, (("serialization", 1),), (_sample(2, 5, "serialization"),))
    b = BadRecordCounts(
        "skip",
        30,
        (("record_too_large", 2), ("serialization", 3)),
        tuple(_sample(0, r) for r in (9, 1, 4)),
    )
    merged = merge_counts([a, None, b])
    assert merged is not None
    assert merged.action == "skip" and merged.rows_read == 40
    assert merged.by_reason == (("record_too_large", 2), ("serialization", 4))
    assert merged.total == 6 and merged.ratio == pytest.approx(0.15)
    assert [(s.partition_id, s.row) for s in merged.samples] == [(0, 1), (0, 4), (0, 9)]
    assert len(merged.samples) == MAX_SAMPLES


def test_merge_of_no_counts_is_none() -> None:
    assert merge_counts([]) is None
    assert merge_counts([None, None]) is None


# -- the bounds --------------------------------------------------------------------------------


def test_more_bad_rows_than_max_records_fails_the_batch_naming_option_count_and_reasons() -> None:
    counts = _counts(40, record_too_large=10, serialization=2)
    _check(counts, max_records=12)  # equal passes
    with pytest.raises(BadRecordsLimitError) as info:
        _check(counts, max_records=11)
    text = str(info.value)
    assert isinstance(info.value, SinkDataError)
    assert "micro-batch 7" in text and "deadLetterMaxRecords=11" in text
    assert "12 of 40 rows (30.0%)" in text and "onRecordError=deadLetter" in text
    assert "record_too_large 10, serialization 2" in text
    assert "record_too_large (Spark partition 0, row 0): row 0 is record_too_large" in text
    assert "\n" not in text


def test_a_larger_share_than_max_ratio_fails_the_batch() -> None:
    counts = _counts(40, serialization=4)  # 10%
    _check(counts, max_ratio=0.1)  # equal passes
    with pytest.raises(BadRecordsLimitError, match=r"deadLetterMaxRatio=0\.05 allow") as info:
        _check(counts, max_ratio=0.05, batch_id=None, guarantee="exactly-once")
    text = str(info.value)
    assert "the batch job" in text and "4 of 40 rows (10.0%)" in text
    assert "nothing of it is committed" in text


def test_both_bounds_exceeded_are_both_named() -> None:
    with pytest.raises(BadRecordsLimitError, match="deadLetterMaxRecords=1 and deadLetterMaxRatio"):
        _check(_counts(10, serialization=5), max_records=1, max_ratio=0.2)


def test_no_bound_no_counts_and_no_rows_never_fail() -> None:
    _check(_counts(10, serialization=10))  # both None: no bound
    _check(None, max_records=0, max_ratio=0.0)  # onRecordError=fail: no counts
    _check(BadRecordCounts("skip", 0), max_records=0, max_ratio=0.0)  # nothing read, no ratio


def test_a_zero_bound_fails_on_the_first_bad_row() -> None:
    with pytest.raises(BadRecordsLimitError, match="1 of 100 rows"):
        _check(_counts(100, null_topic=1), max_records=0)


# -- the document and its line -------------------------------------------------------------------


def _message(partition: int, bad: BadRecordCounts | None, records: int = 5) -> PyKafkaCommitMessage:
    return PyKafkaCommitMessage(
        partition,
        0,
        partition,
        3,
        (PartitionRange("t", partition, 0, records - 1, records),),
        bad_records=bad,
    )


def test_the_document_carries_the_batchs_merged_counts_and_its_line_says_them() -> None:
    messages = [
        _message(0, _counts(20, record_too_large=2)),
        _message(1, _counts(20, partition=1, serialization=1)),
    ]
    doc = build_document("commit", messages, mode="append", batch_id=3, now_ms=0)
    assert doc["bad_records"] == {
        "action": "deadLetter",
        "rows_read": 40,
        "bad_records": 3,
        "by_reason": {"record_too_large": 2, "serialization": 1},
        "first": [
            {
                "spark_partition": 0,
                "row": 0,
                "topic": "t",
                "reason": "record_too_large",
                "message": "row 0 is record_too_large (fix it)",
            },
            {
                "spark_partition": 1,
                "row": 0,
                "topic": "t",
                "reason": "serialization",
                "message": "row 0 is serialization (fix it)",
            },
        ],
    }
    line = log_line(doc, "/log/3.json")
    assert line.endswith(
        "from 2 tasks; 3 bad record(s) dead-lettered (record_too_large 2, serialization 1); "
        "first: record_too_large (Spark partition 0, row 0): row 0 is record_too_large (fix it)"
        "; log /log/3.json"
    )


def test_skipped_rows_are_said_skipped_and_a_clean_batch_adds_nothing_to_its_line() -> None:
    skipped = build_document(
        "commit", [_message(0, _counts(9, "skip", null_topic=1))], mode="append", now_ms=0
    )
    assert "1 bad record(s) skipped (null_topic 1); first: null_topic" in log_line(skipped, None)
    clean = build_document(
        "commit", [_message(0, BadRecordCounts("skip", 9))], mode="append", now_ms=0
    )
    assert clean["bad_records"]["bad_records"] == 0
    assert "bad record" not in log_line(clean, None)
    plain = build_document("commit", [_message(0, None)], mode="append", now_ms=0)
    assert "bad_records" not in plain
    assert bad_records_summary(None) == ""


# -- the writer's commit ---------------------------------------------------------------------------


def _stream_writer(tmp_path: Path, **options: Any) -> PyKafkaStreamWriter:
    opts = SinkOptions.from_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "t", "checkpointlocation": str(tmp_path)}
    )
    return PyKafkaStreamWriter(
        replace(opts, **options), LAYOUT, streaming=True, overwrite=False, write_id="s"
    )


def test_an_at_least_once_batch_over_its_bound_writes_no_commit_file(tmp_path: Path) -> None:
    writer = _stream_writer(tmp_path, on_record_error="skip", dead_letter_max_records=1)
    messages = [_message(0, _counts(10, "skip", serialization=2))]
    with pytest.raises(BadRecordsLimitError, match=r"micro-batch 4.*deadLetterMaxRecords=1"):
        writer.commit(messages, 4)
    assert not list((tmp_path / "pykafka-commits").glob("4.json"))
    writer.abort(messages, 4)  # what Spark calls next: the abort document has the counts
    aborted = (tmp_path / "pykafka-commits" / "4.aborted.json").read_text()
    assert '"bad_records": 2' in aborted


def test_a_batch_with_bad_rows_logs_its_line_at_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = _stream_writer(tmp_path, on_record_error="skip", dead_letter_max_records=5)
    with caplog.at_level(logging.INFO, logger="kafka_sink.spark"):
        writer.commit([_message(0, _counts(10, "skip", serialization=2))], 0)
        writer.commit([_message(0, BadRecordCounts("skip", 10))], 1)
    lines = [
        (r.levelno, r.getMessage()) for r in caplog.records if "pykafka commit" in r.getMessage()
    ]
    assert [level for level, _ in lines] == [logging.WARNING, logging.INFO]
    assert (
        "2 bad record(s) skipped (serialization 2); first: serialization (Spark partition 0, "
        "row 0)" in lines[0][1]
    )


# -- exactly-once: a batch over its bound leaves nothing visible ---------------------------------


def test_an_exactly_once_batch_over_its_bound_commits_nothing_and_aborts_its_transactions(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 5)
    counts = _counts(9, record_too_large=4)

    def bound() -> None:
        check_bounds(counts, max_records=3, max_ratio=None, batch_id=5, guarantee="exactly-once")

    with pytest.raises(BadRecordsLimitError, match="deadLetterMaxRecords=3"):
        committer(coord, store).commit(5, tasks, check=bound)
    assert visible_counts(coord) == expected_rows([])  # nothing of the batch is visible
    assert coord.open_transactions() == []  # its transactions are aborted, none left open
    assert store.history == []  # no intent: the re-run starts afresh
    assert coord.committed == set()  # no EndTxn committed any of them
    assert {m.state for m in coord.txns.values()} == {COMPLETE_ABORT}
    # Spark's abort() that follows changes nothing; a re-run within its bound commits.
    committer(coord, store).abort(5, tasks)
    assert visible_counts(coord) == expected_rows([])
    assert committer(coord, store).commit(5, run_tasks(coord, 5), check=lambda: None) == COMMITTED
    assert visible_counts(coord) == expected_rows([5])


def test_a_batch_already_done_is_not_checked_again(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    assert committer(coord, store).commit(2, run_tasks(coord, 2)) == COMMITTED

    def refuse() -> None:
        raise AssertionError("a done batch's re-run is aborted, not checked")

    assert committer(coord, store).commit(2, run_tasks(coord, 2), check=refuse) == ALREADY_DONE
    assert visible_counts(coord) == expected_rows([2])


def test_the_writer_hands_its_bound_to_the_exactly_once_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_sink.spark.driver.eos.committer import EosCommitter
    from kafka_sink.spark.eos_plan import EosPlan

    seen: list[str] = []

    class Committer:
        store = None

        def commit(self, number: int, tasks: Any, skipped: Any, *, check: Any) -> str:
            try:
                check()
            except BadRecordsLimitError as exc:
                seen.append(str(exc))
                raise
            return COMMITTED

        def close(self) -> None:
            pass

    monkeypatch.setattr(
        EosCommitter, "for_plan", classmethod(lambda cls, plan, config: Committer())
    )
    opts = SinkOptions.from_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "t", "deliveryGuarantee": "exactly-once"}
    )
    writer = PyKafkaBatchWriter(
        replace(
            opts, on_record_error="deadLetter", dead_letter_topic="dlq", dead_letter_max_ratio=0.1
        ),
        LAYOUT,
        streaming=False,
        overwrite=False,
        write_id="w1",
        eos=EosPlan("pykafka-w1", "w1", str(tmp_path)),
    )
    with pytest.raises(BadRecordsLimitError):
        writer.commit([_message(0, _counts(10, invalid_header=2))])
    assert seen and "2 of 10 rows (20.0%)" in seen[0] and "nothing of it is committed" in seen[0]


# -- the Prometheus push ---------------------------------------------------------------------------

SECTION: dict[str, Any] = {
    "partitions": [
        {"topic": "t", "partition": 0, "records": 2, "uncompressed_bytes": 9, "compressed_bytes": 7}
    ],
    "retries": 0,
    "errors": 0,
    "requests": 1,
    "produce_latency_ms_avg": 4.0,
    "throttle_time_ms_sum": 0.0,
    "records": 2,
    "records_per_s": 10.0,
    "compression_ratio": 1.3,
    "produce_latency_ms_max": 4.0,
    "commit_duration_ms": 12.0,
}


def _exposition(totals: Any, bad: dict[str, Any] | None) -> str:
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(prometheus._BatchCollector(totals, SECTION, 3, bad))
    return generate_latest(registry).decode()


def test_the_push_counts_bad_rows_per_reason_and_action_and_gauges_the_last_batch() -> None:
    totals = prometheus._Totals()
    first = _counts(10, record_too_large=2, serialization=1).to_json()
    second = _counts(10, "skip", serialization=4).to_json()
    for bad in (first, second):
        totals.add(SECTION)
        totals.add_bad_records(bad)
    text = _exposition(totals, second)
    assert 'pykafka_bad_records_total{action="deadLetter",reason="record_too_large"} 2.0' in text
    assert 'pykafka_bad_records_total{action="deadLetter",reason="serialization"} 1.0' in text
    assert 'pykafka_bad_records_total{action="skip",reason="serialization"} 4.0' in text
    assert "pykafka_batch_bad_records 4.0" in text
    assert "# TYPE pykafka_bad_records_total counter" in text


def test_a_push_without_bad_record_counts_has_no_bad_record_series() -> None:
    totals = prometheus._Totals()
    totals.add(SECTION)
    totals.add_bad_records(None)
    text = _exposition(totals, None)
    assert "pykafka_bad_records" not in text and "pykafka_batch_bad_records" not in text
