"""Commit messages and the driver's commit record: gathering, files, summaries, pickling."""

from __future__ import annotations

import json
import os
import pickle

from kafka_sink.spark.commit_log.document import (
    PartitionRange,
    PyKafkaCommitMessage,
    build_document,
    gather,
    log_line,
    offsets_line,
    write_document,
)

NOW = 1_700_000_000_123


def msg(pid: int, *ranges: PartitionRange, attempt: int = 0) -> PyKafkaCommitMessage:
    return PyKafkaCommitMessage(pid, attempt, 100 + pid, 7, ranges)


def test_message_pickles_and_counts() -> None:
    m = msg(1, PartitionRange("t", 0, 5, 9, 5), PartitionRange("t", 1, 0, 2, 3))
    again = pickle.loads(pickle.dumps(m))
    assert again == m
    assert again.record_count == 8


def test_gather_merges_per_partition() -> None:
    merged = gather(
        [
            PartitionRange("t", 1, 10, 19, 10),
            PartitionRange("t", 0, 0, 4, 5),
            PartitionRange("t", 1, 0, 9, 10),
            PartitionRange("a", 0, -1, -1, 3),
        ]
    )
    assert merged == [
        PartitionRange("a", 0, -1, -1, 3),
        PartitionRange("t", 0, 0, 4, 5),
        PartitionRange("t", 1, 0, 19, 20),
    ]


def test_commit_document_and_summary(tmp_path) -> None:
    doc = build_document(
        "commit",
        [msg(0, PartitionRange("t", 0, 0, 4, 5)), msg(1, PartitionRange("t", 0, 5, 6, 2))],
        mode="append",
        batch_id=3,
        write_id="w",
        query_name="q",
        now_ms=NOW,
    )
    assert doc["record_count"] == 7
    assert doc["offsets"] == [
        {
            "topic": "t",
            "partition": 0,
            "first_offset": 0,
            "last_offset": 6,
            "record_count": 7,
            "unknown_offset_count": 0,
        }
    ]
    assert doc["committed_at"] == "2023-11-14T22:13:20.123Z"
    path = write_document(str(tmp_path / "log"), "3.json", doc)
    with open(path, encoding="utf-8") as f:
        assert json.load(f) == doc
    line = log_line(doc, path)
    assert line.startswith(
        "pykafka commit (micro-batch 3, append, at-least-once): 7 records to 1 partitions"
    )
    assert doc["delivery_guarantee"] == "at-least-once"
    assert "\n" not in line and line.endswith(f"; log {path}")
    # One short line: the ranges are in the file, and at DEBUG (the file's path may hold
    # "t-0" itself, as pytest's "pytest-0" directory does).
    assert "t-0:" not in line.removesuffix(f"; log {path}")
    assert offsets_line(doc) == "pykafka commit (micro-batch 3): offsets t-0:0..6(7)"


def test_rewrite_keeps_the_earlier_file(tmp_path) -> None:
    write_document(str(tmp_path), "0.json", {"a": 1})
    write_document(str(tmp_path), "0.json", {"a": 2})
    names = sorted(os.listdir(tmp_path))
    assert names[0] == "0.json" and names[1].startswith("0.json.replaced-")
    assert json.loads((tmp_path / "0.json").read_text()) == {"a": 2}
    assert len(names) == 2


def test_abort_document_names_failed_tasks() -> None:
    doc = build_document(
        "abort",
        [msg(0, PartitionRange("t", 2, 40, 49, 10)), None],
        mode="append",
        now_ms=NOW,
    )
    assert doc["failed_tasks"] == [1]
    assert doc["acknowledged_record_count"] == 10
    line = log_line(doc, None)
    assert "rolled back; tasks [1] of 2 did not finish" in line
    assert "10 records acknowledged in 1 partitions" in line
    assert doc["acknowledged_record_count_is_lower_bound"] is True
    assert "t-2:40..49(10)" in offsets_line(doc)


def test_acks_zero_ranges_have_null_offsets() -> None:
    doc = build_document(
        "commit", [msg(0, PartitionRange("t", 0, -1, -1, 4, 4))], mode="append", now_ms=NOW
    )
    assert doc["offsets"][0]["first_offset"] is None
    assert doc["offsets"][0]["unknown_offset_count"] == 4
    assert "t-0:?(4)" in offsets_line(doc)


def test_records_without_offsets_are_counted_apart_from_the_range() -> None:
    # Task 0's first batch was answered DUPLICATE_SEQUENCE_NUMBER (3 records, offsets unknown),
    # its second landed at 10..11; task 1 wrote 20..24.
    doc = build_document(
        "commit",
        [msg(0, PartitionRange("t", 0, 10, 11, 5, 3)), msg(1, PartitionRange("t", 0, 20, 24, 5))],
        mode="append",
        now_ms=NOW,
    )
    [offsets] = doc["offsets"]
    assert (offsets["first_offset"], offsets["last_offset"]) == (10, 24)
    assert (offsets["record_count"], offsets["unknown_offset_count"]) == (10, 3)
    assert doc["record_count"] == 10
    assert "t-0:10..24(10, 3 without offset)" in offsets_line(doc)
