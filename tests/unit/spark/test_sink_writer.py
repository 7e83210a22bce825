"""The task write path (``task.write_task``) and the producer cache, with a fake producer.

A stand-in for ``KafkaProducer`` records every ``send_columns`` call and completes its futures
with chosen offsets or errors, so folding, failure handling and cache eviction are checked without
Spark or a broker (the Spark tests do the real thing).
"""

from __future__ import annotations

import pickle
import threading
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import KafkaError, KafkaTimeoutError, NotLeaderOrFollowerError
from kafka_sink.producer.bulk import RecordTooLargeInColumnsError
from kafka_sink.producer.futures import BulkSendFuture, ProduceRequestResult
from kafka_sink.sink_errors import SinkDataError, SinkDeliveryTimeoutError, SinkModeError
from kafka_sink.spark.commit_log.document import PartitionRange, PyKafkaCommitMessage
from kafka_sink.spark.executor import producer_cache
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaBatchWriter, PyKafkaStreamWriter
from tests.fakes.spark import FakeProducer


@pytest.fixture(autouse=True)
def fake_producers(monkeypatch):
    FakeProducer.instances = []
    producer_cache.close_all()
    monkeypatch.setattr(producer_cache, "_create", FakeProducer)
    yield FakeProducer.instances
    producer_cache.close_all()


def _writer(
    topic: str | None = "t", options: dict[str, str] | None = None, **layout: bool
) -> PyKafkaBatchWriter:
    opts = {"kafka.bootstrap.servers": "h:1", **(options or {})}
    if topic is not None:
        opts["topic"] = topic
    flags = {
        "topic_column": topic is None,
        "key_column": False,
        "partition_column": False,
        "headers_column": False,
        "timestamp": None,
    }
    flags.update(layout)
    return PyKafkaBatchWriter(
        SinkOptions.from_options(opts),
        InputLayout(**flags),
        streaming=False,
        overwrite=False,
        write_id="w1",
    )


def _batch(n: int, start: int = 0, **cols: Any) -> pa.RecordBatch:
    return pa.record_batch({"value": [str(i).encode() for i in range(start, start + n)], **cols})


def test_offsets_fold_per_topic_partition(fake_producers) -> None:
    message = _writer().write(iter([_batch(3), _batch(2, 3), _batch(3, 5)]))
    assert isinstance(message, PyKafkaCommitMessage)
    assert message.ranges == (PartitionRange("t", 0, 0, 1, 2), PartitionRange("t", 1, 0, 5, 6))
    assert message.record_count == 8
    assert (message.partition_id, message.attempt_number, message.batch_id) == (0, 0, None)
    assert pickle.loads(pickle.dumps(message)) == message
    [producer] = fake_producers
    assert producer.flushed == 1
    assert [c["values"] for c in producer.calls][1] == [b"3", b"4"]


def test_producer_is_reused_across_tasks_with_the_same_config(fake_producers) -> None:
    _writer().write(iter([_batch(1)]))
    _writer().write(iter([_batch(1)]))
    assert len(fake_producers) == 1
    assert producer_cache.cached_count() == 1


def test_a_task_releases_its_producer_for_the_idle_timeout_it_was_given(
    fake_producers, monkeypatch
) -> None:
    clock = ManualClock(0)
    monkeypatch.setattr(producer_cache, "_clock", clock)
    monkeypatch.setattr(producer_cache, "_start_closer", lambda: None)
    _writer(options={"producerIdleTimeoutMs": "2000"}).write(iter([_batch(1)]))
    # A data error fails the task but keeps the producer: released as well.
    batch = pa.record_batch({"value": [b"a"], "partition": pa.array([5], pa.int32())})
    with pytest.raises(SinkDataError):
        _writer(partition_column=True, options={"producerIdleTimeoutMs": "2000"}).write(
            iter([batch])
        )
    [producer] = fake_producers
    clock.advance(1_999)
    assert producer_cache.close_idle(clock.now_ms()) == 0
    clock.advance(1)
    assert producer_cache.close_idle(clock.now_ms()) == 1
    assert producer.closed and producer_cache.cached_count() == 0


def test_empty_task_needs_no_producer(fake_producers) -> None:
    message = _writer().write(iter([_batch(0)]))
    assert isinstance(message, PyKafkaCommitMessage) and message.ranges == ()
    assert fake_producers == []


def test_delivery_failure_fails_the_task_and_evicts_the_producer(fake_producers) -> None:
    _writer().write(iter([_batch(1)]))
    [producer] = fake_producers
    producer.fail_with = NotLeaderOrFollowerError()
    with pytest.raises(KafkaError):
        _writer().write(iter([_batch(2)]))
    assert producer.closed
    assert producer_cache.cached_count() == 0
    _writer().write(iter([_batch(1)]))  # the retry gets a fresh producer
    assert len(fake_producers) == 2 and not fake_producers[1].closed


def test_data_error_keeps_the_producer(fake_producers) -> None:
    batch = pa.record_batch({"value": [b"a"], "partition": pa.array([5], pa.int32())})
    _writer().write(iter([_batch(1)]))
    with pytest.raises(SinkDataError, match="partition 5"):
        _writer(partition_column=True).write(iter([batch]))
    assert not fake_producers[0].closed and producer_cache.cached_count() == 1


def test_rows_are_numbered_across_batches_in_errors(fake_producers) -> None:
    ok = pa.record_batch({"topic": ["a", "a"], "value": [b"0", b"1"]})
    bad = pa.record_batch({"topic": ["a", None], "value": [b"2", b"3"]})
    with pytest.raises(SinkDataError, match="row 3 has a null 'topic'"):
        _writer(topic=None).write(iter([ok, bad]))


def test_topic_column_sends_one_call_per_topic(fake_producers) -> None:
    batch = pa.record_batch({"topic": ["a", "b", "a"], "value": [b"0", b"1", b"2"]})
    message = _writer(topic=None).write(iter([batch]))
    assert isinstance(message, PyKafkaCommitMessage)
    assert sorted(c["topic"] for c in fake_producers[0].calls) == ["a", "b"]
    assert {r.topic for r in message.ranges} == {"a", "b"}


def test_writers_pickle_without_a_producer(fake_producers) -> None:
    writer = _writer()
    writer.write(iter([_batch(1)]))
    again = pickle.loads(pickle.dumps(writer))
    assert again.options == writer.options and again.write_id == "w1"
    stream = PyKafkaStreamWriter(
        writer.options, writer.layout, streaming=True, overwrite=True, write_id="s"
    )
    assert pickle.loads(pickle.dumps(stream)).overwrite


def test_commit_and_abort_write_their_files(tmp_path, fake_producers) -> None:
    opts = SinkOptions.from_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "t", "checkpointlocation": str(tmp_path)}
    )
    layout = InputLayout(False, False, False, False, None)
    stream = PyKafkaStreamWriter(opts, layout, streaming=True, overwrite=False, write_id="s")
    message = stream.write(iter([_batch(2)]))
    stream.commit([message, None], 4)
    stream.abort([message, None], 5)
    names = sorted(p.name for p in (tmp_path / "pykafka-commits").iterdir())
    assert names == ["4.json", "5.aborted.json"]


class SilentBrokerProducer(FakeProducer):
    """A producer whose broker never answers: real bulk futures that never complete, and a
    ``flush()`` that waits for them as ``KafkaProducer.flush`` does (forever without a timeout).
    ``expire_with`` instead fails each batch as the producer does at delivery.timeout.ms."""

    expire_with: Exception | None = None

    def __init__(self, config: dict[str, str]) -> None:
        super().__init__(config)
        self.results: list[ProduceRequestResult] = []
        self.flush_timeouts: list[float | None] = []
        self.close_timeouts: list[float | None] = []

    def send_columns(self, topic, values, keys=None, *, partitions=None, headers=None,
                     timestamps_ms=None):  # fmt: skip
        self.calls.append({"topic": topic, "values": values.to_pylist()})
        future = BulkSendFuture(topic)
        for p in (0, 1):  # each call: one batch per partition, the second half in partition 1
            n = len(values) // 2 if p == 0 else len(values) - len(values) // 2
            result = ProduceRequestResult(topic, p)
            self.results.append(result)
            future._add(p, n, n - 1, result)
        future._seal()
        if self.expire_with is not None:
            for result in self.results:
                result.complete(-1, -1, self.expire_with)
        return future

    def flush(self, timeout: float | None = None) -> None:
        self.flush_timeouts.append(timeout)
        for result in self.results:
            if not result.wait(timeout):
                raise KafkaTimeoutError(f"flush timed out after {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        self.close_timeouts.append(timeout)
        self.closed = True
        for result in self.results:  # as close() does: fail whatever is left
            result.complete(-1, -1, KafkaError("the producer was closed"))


FAST_TIMEOUTS = {
    "kafka.delivery.timeout.ms": "1000",
    "kafka.request.timeout.ms": "500",
    "kafka.linger.ms": "0",
}


def _write_in_thread(writer: PyKafkaBatchWriter, batches: list[pa.RecordBatch]) -> list[Any]:
    """Run write() on a thread; [result or exception], or [] if it is still waiting after 30 s."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(writer.write(iter(batches)))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    return outcome


def test_silent_broker_fails_the_task_within_the_bound_naming_what_was_pending(
    monkeypatch,
) -> None:
    monkeypatch.setattr(producer_cache, "_create", SilentBrokerProducer)
    monkeypatch.setattr(task_module, "_STALL_SLACK_MS", 0, raising=False)
    outcome = _write_in_thread(_writer(options=FAST_TIMEOUTS), [_batch(5), _batch(4, 5)])
    [producer] = [p for p in FakeProducer.instances if isinstance(p, SilentBrokerProducer)]
    try:
        assert outcome, "write() did not return: the flush is unbounded"
        [error] = outcome
        assert isinstance(error, SinkDeliveryTimeoutError), error
        text = str(error)
        assert "9 record(s) in 4 batch(es) not acknowledged" in text
        assert "t-0: 4 record(s) in 2 batch(es); t-1: 5 record(s) in 2 batch(es)" in text
        assert "kafka.delivery.timeout.ms (1000 ms) + kafka.request.timeout.ms (500 ms)" in text
        assert "producer was closed" in text
        # One bound for the whole wait; then evicted and closed without waiting again.
        assert producer.flush_timeouts == [1.5]
        assert producer.close_timeouts == [0.0]
        assert producer_cache.cached_count() == 0
    finally:
        for result in producer.results:
            result.complete(-1, -1, KafkaError("test over"))


def test_producer_giving_up_at_delivery_timeout_names_every_pending_partition(
    monkeypatch,
) -> None:
    monkeypatch.setattr(producer_cache, "_create", SilentBrokerProducer)
    monkeypatch.setattr(
        SilentBrokerProducer,
        "expire_with",
        KafkaTimeoutError("Expiring 2 record(s) for t-0: delivery.timeout.ms=1000 passed"),
    )
    outcome = _write_in_thread(_writer(options=FAST_TIMEOUTS), [_batch(4)])
    [error] = outcome
    assert isinstance(error, SinkDeliveryTimeoutError), error
    text = str(error)
    assert "4 record(s) in 2 batch(es) not acknowledged by Kafka within kafka.delivery" in text
    assert "t-0: 2 record(s) in 1 batch(es); t-1: 2 record(s) in 1 batch(es)" in text
    assert "Producer: Expiring 2 record(s) for t-0" in text
    assert isinstance(error.__cause__, KafkaTimeoutError)
    assert producer_cache.cached_count() == 0


def test_a_streaming_commit_no_task_wrote_is_refused_naming_the_trigger(tmp_path) -> None:
    # What PySpark hands a Python sink under trigger(continuous=...): one None per task, no
    # write() call ever. Committing would let Spark mark the epoch's rows done, unwritten.
    opts = SinkOptions.from_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "t", "checkpointlocation": str(tmp_path)}
    )
    layout = InputLayout(False, False, False, False, None)
    stream = PyKafkaStreamWriter(opts, layout, streaming=True, overwrite=False, write_id="s")
    with pytest.raises(SinkModeError) as caught:
        stream.commit([None, None], 0)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("format('pykafka') refuses to commit epoch 0: none of its 2 tasks")
    assert "trigger(continuous=...)" in message
    assert "trigger(processingTime='1 second')" in message
    assert "trigger(availableNow=True)" in message
    assert not (tmp_path / "pykafka-commits").exists() or not any(
        (tmp_path / "pykafka-commits").iterdir()
    )
    # A micro-batch whose tasks had no rows still ran write(): committed as usual.
    stream.commit([stream.write(iter([])), stream.write(iter([]))], 1)
    assert (tmp_path / "pykafka-commits" / "1.json").exists()


class SizeLimitProducer(FakeProducer):
    """Refuses a call holding a value over 100 bytes, as the producer's size check does."""

    def send_columns(self, topic, values, keys=None, *, partitions=None, headers=None,
                     timestamps_ms=None):  # fmt: skip
        for row, value in enumerate(values.to_pylist()):
            if len(value) > 100:
                raise RecordTooLargeInColumnsError(
                    topic, row, 1_048_700, "max.request.size", 1 << 20
                )
        return super().send_columns(topic, values, keys, partitions=partitions)


def test_a_record_too_large_names_its_row_and_the_options_to_raise(monkeypatch) -> None:
    monkeypatch.setattr(producer_cache, "_create", SizeLimitProducer)
    ok = pa.record_batch({"value": [b"0", b"1"]})
    big = pa.record_batch({"value": [b"2", b"x" * 200]})
    with pytest.raises(SinkDataError) as caught:
        _writer().write(iter([ok, big]))
    assert str(caught.value) == (
        "row 3 (topic 't') is 1048700 bytes when serialized, larger than "
        "max.request.size=1048576. Fix: raise option kafka.max.request.size and the topic's "
        "max.message.bytes with it (the broker refuses a larger batch), or write smaller records"
    )
    # Bad data, not a bad producer: it stays cached for the next task.
    assert producer_cache.cached_count() == 1
