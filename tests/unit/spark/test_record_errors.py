"""A row a task cannot write passes through the write's record error policy, once, with its
position in the task's input; the default policy fails the task with the sink's data error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink.producer.bulk import RecordTooLargeInColumnsError
from kafka_sink.sink_errors import SinkDataError
from kafka_sink.spark.executor import producer_cache
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.executor.record_errors import BadRecord, FailTask
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from tests.fakes.spark import FakeProducer

_HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])


class SizeLimitProducer(FakeProducer):
    """Refuses a call holding a value over 100 bytes, as the producer's size check does."""

    def send_columns(self, topic, values, keys=None, *, partitions=None, headers=None,
                     timestamps_ms=None, track_rows=False):  # fmt: skip
        for row, value in enumerate(values.to_pylist()):
            if len(value) > 100:
                raise RecordTooLargeInColumnsError(
                    topic, row, 1_048_700, "max.request.size", 1 << 20
                )
        return super().send_columns(
            topic, values, keys, partitions=partitions, headers=headers,
            timestamps_ms=timestamps_ms, track_rows=track_rows,
        )  # fmt: skip


@pytest.fixture(autouse=True)
def fake_producers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeProducer]]:
    FakeProducer.instances = []
    producer_cache.close_all()
    monkeypatch.setattr(producer_cache, "_create", SizeLimitProducer)
    # No cluster to read topics' rules from: none known, as when DescribeConfigs is refused.
    monkeypatch.setattr(task_module, "topic_rules", lambda items, topic: None)
    yield FakeProducer.instances
    producer_cache.close_all()


class Recording:
    """A policy that records what it is handed, then fails the task as FailTask does."""

    action = None

    def __init__(self) -> None:
        self.seen: list[BadRecord] = []

    def reject(self, record: BadRecord, contents: Any) -> None:
        self.seen.append(record)
        raise SinkDataError(record.reason)

    def take_dead_letters(self) -> list[Any]:
        return []

    def counts(self, rows_read: int) -> None:
        return None


def _layout(**flags: Any) -> InputLayout:
    base: dict[str, Any] = {
        "topic_column": False,
        "key_column": False,
        "partition_column": False,
        "headers_column": False,
        "timestamp": None,
    }
    return InputLayout(**{**base, **flags})


def _ok(n: int = 2) -> pa.RecordBatch:
    return pa.record_batch({"value": [b"%d" % i for i in range(n)]})


# (topic option, layout, batches, expected row, expected topic, start of the message)
CASES = {
    "null topic": (
        None,
        _layout(topic_column=True),
        [
            pa.record_batch({"topic": ["a", "a"], "value": [b"0", b"1"]}),
            pa.record_batch({"topic": ["a", None], "value": [b"2", b"3"]}),
        ],
        3,
        None,
        "row 3 has a null 'topic' and no 'topic' option is set. Fix: set .option('topic', "
        "'name') as a default, or fill the column, e.g. coalesce(topic, 'name').",
    ),
    "empty topic": (
        None,
        _layout(topic_column=True),
        [_ok().append_column("topic", pa.array(["", ""]))],
        0,
        None,
        "row 0 has an empty 'topic'.",
    ),
    "partition out of range": (
        "t",
        _layout(partition_column=True),
        [
            _ok().append_column("partition", pa.array([0, 1], pa.int32())),
            pa.record_batch(
                {"value": [b"2", b"3", b"4"], "partition": pa.array([1, 5, 9], pa.int32())}
            ),
        ],
        3,
        "t",
        "row 3 (topic 't') has partition 5, which is out of range: the topic has 2 partitions",
    ),
    "timestamp before 1970": (
        "t",
        _layout(timestamp="millis"),
        [_ok(3).append_column("timestamp", pa.array([5, -1, 7], pa.int64()))],
        1,
        "t",
        "row 1 has a 'timestamp' before 1970-01-01 (-1 ms)",
    ),
    "null header key": (
        "t",
        _layout(headers_column=True),
        [
            _ok().append_column(
                "headers",
                pa.array([[], [{"key": None, "value": b"v"}]], pa.list_(_HEADER)),
            )
        ],
        1,
        "t",
        "row 1 has a null header (or a null header key) in column 'headers'.",
    ),
    "record too large": (
        "t",
        _layout(),
        [_ok(), pa.record_batch({"value": [b"2", b"x" * 200]})],
        3,
        "t",
        "row 3 (topic 't') is 1048700 bytes when serialized, larger than "
        "max.request.size=1048576. Fix: raise option kafka.max.request.size and the topic's "
        "max.message.bytes with it (the broker refuses a larger batch), or write smaller records",
    ),
}


# The reason code each case's row is counted under.
CODES = {
    "null topic": "null_topic",
    "empty topic": "null_topic",
    "partition out of range": "partition_out_of_range",
    "timestamp before 1970": "invalid_timestamp",
    "null header key": "invalid_header",
    "record too large": "record_too_large",
}


def _run(case: str, policy: Any) -> SinkDataError:
    topic, layout, batches, *_ = CASES[case]
    opts = {"kafka.bootstrap.servers": "h:1"}
    if topic is not None:
        opts["topic"] = topic
    write = task_module._TaskWrite(
        SinkOptions.from_options(opts),
        layout,
        task_module._TaskInfo(0, 0, 0, None),
        record_errors=policy,
    )
    with pytest.raises(SinkDataError) as caught:
        write.run(task_module._AtLeastOnce(write.options), iter(batches))
    return caught.value


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_default_policy_fails_the_task_with_the_data_error(case: str) -> None:
    *_, message = CASES[case]
    error = _run(case, FailTask())
    assert type(error) is SinkDataError
    assert str(error).startswith(message)
    # Raised as the task always raised it: no chained internal exception in its traceback.
    assert error.__cause__ is None and error.__suppress_context__


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_policy_sees_the_bad_record_once_with_its_position(case: str) -> None:
    *_, row, topic, message = CASES[case]
    policy = Recording()
    error = _run(case, policy)
    assert len(policy.seen) == 1
    [seen] = policy.seen
    assert (seen.row, seen.topic) == (row, topic)
    assert seen.reason == str(error) and seen.reason.startswith(message)
    assert seen.code == CODES[case]


def test_rows_before_the_bad_one_were_sent_and_the_producer_kept(
    fake_producers: list[FakeProducer],
) -> None:
    _run("record too large", FailTask())
    [producer] = fake_producers
    assert [c["values"] for c in producer.calls] == [[b"0", b"1"]]
    assert not producer.closed and producer_cache.cached_count() == 1
