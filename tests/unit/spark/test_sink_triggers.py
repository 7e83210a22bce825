"""A continuous trigger is refused when Spark asks for the writer, before any epoch runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.types import StringType, StructField, StructType

from kafka_sink.sink_errors import SinkModeError
from kafka_sink.spark.datasource import PyKafkaDataSource

SCHEMA = StructType([StructField("value", StringType())])


def _checkpoint(tmp_path: Path, *, offsets: range, commits: range) -> Path:
    for directory, ids in (("offsets", offsets), ("commits", commits)):
        (tmp_path / directory).mkdir()
        for n in ids:
            (tmp_path / directory / str(n)).write_text("v1\n")
        (tmp_path / directory / f".{ids.stop}.tmp").write_text("")  # not a batch
    return tmp_path


def _stream_writer(checkpoint: Path | None) -> None:
    options = {"kafka.bootstrap.servers": "h:9092", "topic": "t"}
    if checkpoint is not None:
        options["checkpointLocation"] = str(checkpoint)
    PyKafkaDataSource(CaseInsensitiveDict(options)).streamWriter(SCHEMA, overwrite=False)


@pytest.mark.parametrize(
    ("offsets", "commits"),
    [(range(0), range(0)), (range(4), range(4))],
    ids=["fresh-query", "restart-after-clean-stop"],
)
def test_a_writer_asked_for_with_no_micro_batch_pending_is_refused(
    tmp_path: Path, offsets: range, commits: range
) -> None:
    # A continuous query asks for its writer at start, before any epoch's offsets are written.
    checkpoint = _checkpoint(tmp_path, offsets=offsets, commits=commits)
    with pytest.raises(SinkModeError) as caught:
        _stream_writer(checkpoint)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "format('pykafka') refuses this streaming query: Spark asked for its writer with no "
        f"micro-batch to plan in checkpoint {checkpoint}"
    )
    assert "trigger(continuous=...)" in message
    assert message.endswith(
        "Fix: use a micro-batch trigger, .trigger(processingTime='1 second') for low latency "
        "or .trigger(availableNow=True)"
    )


@pytest.mark.parametrize(
    ("offsets", "commits"),
    [(range(1), range(0)), (range(5), range(4)), (range(5), range(3))],
    ids=["first-batch", "next-batch", "re-run-after-a-crash"],
)
def test_a_micro_batch_planned_or_committed_is_not_refused(
    tmp_path: Path, offsets: range, commits: range
) -> None:
    # Spark writes a batch's offsets before planning it, and its commit after committing it.
    _stream_writer(_checkpoint(tmp_path, offsets=offsets, commits=commits))


def test_a_checkpoint_the_sink_cannot_see_is_not_refused() -> None:
    _stream_writer(None)  # set through the session's conf, or Spark's temporary one
