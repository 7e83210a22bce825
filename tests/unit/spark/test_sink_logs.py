"""The sink's logging: one line format, the level from ``logLevel`` or Spark's conf, short lines.

The level is process state (the ``kafka_sink`` logger's): every test here restores it.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from collections.abc import Iterator

import pyarrow as pa
import pytest

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.commit_log.document import PartitionRange, PyKafkaCommitMessage
from kafka_sink.spark.executor import producer_cache
from kafka_sink.spark.logs import OFF, parse_level
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaStreamWriter
from tests.fakes.spark import FakeProducer

BASE = {"kafka.bootstrap.servers": "h:1", "topic": "t"}


@pytest.fixture(autouse=True)
def _restore_level(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    package = logging.getLogger("kafka_sink")
    saved = package.level
    producer_cache.close_all()
    monkeypatch.setattr(producer_cache, "_create", FakeProducer)
    yield
    package.setLevel(saved)
    producer_cache.close_all()


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("DEBUG", logging.DEBUG),
        ("info", logging.INFO),
        ("Warn", logging.WARNING),
        (" warning ", logging.WARNING),
        ("ERROR", logging.ERROR),
        ("off", OFF),
    ],
)
def test_log_level_option_accepts_the_level_names(text: str, level: int) -> None:
    assert parse_level(text) == level
    assert SinkOptions.from_options({**BASE, "logLevel": text}).log_level == level
    assert SinkOptions.from_options(BASE).log_level is None


def test_a_bad_log_level_is_refused_naming_the_option_and_the_choices() -> None:
    with pytest.raises(SinkOptionError) as info:
        SinkOptions.from_options({**BASE, "loglevel": "verbose"})
    text = str(info.value)
    assert "option 'logLevel' is 'verbose'" in text
    assert "DEBUG, INFO, WARN, WARNING, ERROR, OFF" in text


def _stream(tmp_path, **options: str) -> PyKafkaStreamWriter:
    opts = SinkOptions.from_options({**BASE, "checkpointlocation": str(tmp_path), **options})
    layout = InputLayout(False, False, False, False, None)
    return PyKafkaStreamWriter(opts, layout, streaming=True, overwrite=False, write_id="s")


def _message(conf_level: int | None = None) -> PyKafkaCommitMessage:
    return PyKafkaCommitMessage(
        0, 0, 0, 7, (PartitionRange("t", 0, 10, 19, 10),), conf_log_level=conf_level
    )


def _sink_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("kafka_sink")]


def test_the_per_batch_line_is_one_short_info_line_and_the_ranges_are_debug(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    _stream(tmp_path, logLevel="DEBUG").commit([_message()], 7)
    [(info_level, info), (debug_level, debug)] = _sink_lines(caplog)
    assert info_level == logging.INFO and debug_level == logging.DEBUG
    assert info.startswith("pykafka commit (micro-batch 7, append, at-least-once): 10 records")
    # The ranges are at DEBUG only (the commit file's path may hold "t-0", as "pytest-0" does).
    assert info.endswith("7.json") and "t-0:" not in info.rsplit(" ", 1)[0]
    assert debug == "pykafka commit (micro-batch 7): offsets t-0:10..19(10)"


@pytest.mark.parametrize("where", ["option", "conf"])
def test_warn_from_the_option_or_the_tasks_conf_drops_the_per_batch_line(
    tmp_path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    caplog.set_level(logging.NOTSET)
    if where == "option":
        writer, message = _stream(tmp_path, logLevel="WARN"), _message()
    else:  # Spark's conf, as the task saw it
        writer, message = _stream(tmp_path), _message(conf_level=logging.WARNING)
    writer.commit([message], 7)
    assert _sink_lines(caplog) == []
    assert (tmp_path / "pykafka-commits" / "7.json").exists()  # the file is still written


def test_the_option_wins_over_the_conf_and_the_level_does_not_outlive_the_write(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.NOTSET)
    _stream(tmp_path, logLevel="INFO").commit([_message(conf_level=logging.ERROR)], 7)
    assert [level for level, _ in _sink_lines(caplog)] == [logging.INFO]


def test_a_task_takes_the_level_of_the_option(tmp_path) -> None:
    writer = _stream(tmp_path, logLevel="ERROR")
    writer.write(iter([pa.RecordBatch.from_pydict({"value": [b"v"]})]))
    assert logging.getLogger("kafka_sink").level == logging.ERROR


_CHILD = """
import logging
from kafka_sink.spark.logs import apply_level
apply_level(None)
logging.getLogger("kafka_sink.net.network_client").warning("connection to node 1 refused")
logging.getLogger("kafka_sink.spark").info("pykafka commit (batch)")
logging.getLogger("kafka_sink.spark").debug("not shown at INFO")
apply_level(logging.WARNING)
logging.getLogger("kafka_sink.spark").info("not shown at WARN")
apply_level(None)  # the next write of a reused worker, without a level: INFO again
logging.getLogger("kafka_sink.spark").info("shown again")
"""


def test_every_line_carries_time_level_and_logger_in_a_bare_worker() -> None:
    # A Python worker Spark starts has no logging set up: the connection warning printed there
    # had neither time nor source.
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    lines = done.stderr.strip().splitlines()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    assert len(lines) == 3, lines
    assert re.fullmatch(
        stamp + r" WARNING kafka_sink\.net\.network_client: connection to node 1 refused", lines[0]
    )
    assert re.fullmatch(stamp + r" INFO kafka_sink\.spark: pykafka commit \(batch\)", lines[1])
    assert re.fullmatch(stamp + r" INFO kafka_sink\.spark: shown again", lines[2])


def test_an_abort_is_one_info_line_saying_what_was_rolled_back(
    tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    # A stopped query's killed tasks look like failed ones to abort(): no message. Spark raises
    # a real failure itself; the sink's line is bookkeeping, not a second error.
    caplog.set_level(logging.INFO)
    _stream(tmp_path).abort([_message(), None], 7)
    [(level, line)] = _sink_lines(caplog)
    assert level == logging.INFO
    assert line.startswith("pykafka abort (micro-batch 7, append, at-least-once): rolled back;")
    assert "tasks [1] of 2 did not finish" in line
    assert line.endswith("7.aborted.json")
