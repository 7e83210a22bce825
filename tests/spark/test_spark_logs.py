"""What a user's driver prints: the sink's log level, its line format, and a stop mid-batch.

One driver process (``logs_child.py``) runs every step, its output captured whole (the driver's
Python workers print to the JVM's stderr, which a test's own session would not capture): batch
writes quieted by ``logLevel`` and by ``spark.pykafka.logLevel``, one that is not, and a
streaming query stopped while its batch's tasks are held after their rows were acknowledged,
at-least-once and then exactly-once (where the aborted document counts what the killed tasks'
transactions wrote).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafka_sink.testing.oracle import read_all

# A fault proof: `-m "not slow"` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

CHILD = str(Path(__file__).with_name("logs_child.py"))
STREAM_ROWS = 40
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"


def _steps(text: str) -> dict[str, str]:
    parts = re.split(r"^=== (\S+)\n", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


# PySpark's accumulator server (a socketserver in the driver) prints a traceback of its own when a
# stopped query's killed Python worker drops its connection mid-update; it is not the sink's.
_ACCUMULATOR_SERVER_ERROR = re.compile(
    r"-{40}\nException occurred during processing of request from .*?\n-{40}\n", re.DOTALL
)


def _one_abort_line(output: str, rest: str) -> None:
    """No ERROR line of the sink, no Python traceback (but PySpark's accumulator server's), and
    one INFO abort line ending as ``rest`` says (a regular expression after the guarantee's
    opening words)."""
    assert not re.search(r" ERROR kafka_sink", output), output[-4000:]
    ours = _ACCUMULATOR_SERVER_ERROR.sub("", output)
    assert "Traceback (most recent call last)" not in ours, ours[-4000:]
    [aborted] = [x for x in output.splitlines() if "pykafka abort" in x]
    head = STAMP + r" INFO kafka_sink\.spark: pykafka abort \(micro-batch 0, append, "
    assert re.match(head + rest, aborted), aborted


def _aborted_document(checkpoint: Path) -> dict[str, Any]:
    text = (checkpoint / "pykafka-commits" / "0.aborted.json").read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def test_log_level_and_a_stop_mid_batch(kafka_bootstrap, topic_factory, tmp_path) -> None:
    batch_topic = topic_factory(partitions=2)
    stream_topic = topic_factory(partitions=2)
    eos_topic = topic_factory(partitions=2)
    pause = tmp_path / "pause"
    pause.mkdir()
    (pause / "resume-task-done-job").touch()  # batch writes pass the hook
    env = dict(os.environ)
    env["PYKAFKA_TEST_COMMIT_PAUSE_DIR"] = str(pause)
    env["PYKAFKA_TEST_PAUSE_AT"] = "task-done"
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
    child = subprocess.Popen(
        [
            sys.executable,
            CHILD,
            kafka_bootstrap,
            batch_topic,
            stream_topic,
            str(tmp_path),
            eos_topic,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    try:
        out, _ = child.communicate(timeout=420)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    text = out.decode("utf-8", errors="replace")
    assert child.returncode == 0, text[-4000:]
    steps = _steps(text)

    # logLevel=WARN, then the session's spark.pykafka.logLevel=WARN: no per-batch line.
    assert "pykafka commit" not in steps["option-warn"], steps["option-warn"]
    assert "pykafka commit" not in steps["conf-warn"], steps["conf-warn"]
    # Neither: one short line with time, level and logger, and the batch's few metrics; the
    # ranges are not in it.
    [line] = [x for x in steps["default"].splitlines() if "pykafka commit" in x]
    assert re.fullmatch(
        STAMP + r" INFO kafka_sink\.spark: pykafka commit \(batch, append, at-least-once\): "
        r"30 records to [12] partitions from 2 tasks; 30 records, \d+\.\d\d MB, \d+ rows/s, "
        r"latency avg (n/a|\d+\.\d) ms max \d+\.\d ms, 0 retries",
        line,
    ), line

    # A stop mid-batch: no ERROR line of the sink, no Python traceback, one INFO line.
    _one_abort_line(
        steps["stream"] + steps["stopped"],
        r"at-least-once\): rolled back; tasks \[0, 1\] of 2 did not finish",
    )
    doc = _aborted_document(tmp_path / "checkpoint")
    assert doc["failed_tasks"] == [0, 1]
    # The held tasks' rows were acknowledged before the stop and stay in Kafka; the killed
    # tasks reported nothing, so the document's count is a lower bound and says so.
    records = read_all(kafka_bootstrap, stream_topic, expected=STREAM_ROWS)
    assert sorted(r.value for r in records) == sorted(b"s%d" % i for i in range(STREAM_ROWS))
    assert doc["acknowledged_record_count_is_lower_bound"] is True
    assert doc["acknowledged_record_count"] <= len(records)

    # Exactly-once, the same stop: the driver counts what the killed tasks' open transactions
    # wrote before it aborts them. The count is what a read_uncommitted reader finds of the
    # batch, offset range by offset range; read_committed finds none of it.
    _one_abort_line(
        steps["stream-eos"] + steps["stopped-eos"],
        r"exactly-once\): rolled back; tasks \[0, 1\] of 2 did not finish .*the unfinished ones "
        rf"{STREAM_ROWS} records in [12] partitions; its open transactions are aborted",
    )
    doc = _aborted_document(tmp_path / "checkpoint-eos")
    written = read_all(kafka_bootstrap, eos_topic, expected=STREAM_ROWS)
    assert sorted(r.value for r in written) == sorted(b"s%d" % i for i in range(STREAM_ROWS))
    assert doc["failed_tasks"] == [0, 1]
    assert doc["acknowledged_record_count"] == len(written) == STREAM_ROWS
    assert doc["acknowledged_record_count_is_lower_bound"] is False
    for r in doc["aborted_offsets"]:
        inside = [
            x
            for x in written
            if x.partition == r["partition"] and r["first_offset"] <= x.offset <= r["last_offset"]
        ]
        assert len(inside) == r["record_count"], (r, written)
    assert sum(r["record_count"] for r in doc["aborted_offsets"]) == STREAM_ROWS
    assert read_all(kafka_bootstrap, eos_topic, isolation_level="read_committed") == []
