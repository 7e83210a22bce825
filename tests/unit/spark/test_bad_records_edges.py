"""onRecordError at its edges: every row bad, a dead letter larger than its row, a topic column
naming a topic that does not exist, rows numbered across topic groups and pieces, a dead letter
that cannot be delivered, bad rows spread over a batch, the broker refusing a row's timestamp,
and the bounds in a partly committed batch's re-run. Against fake producers, as
tests/unit/spark/test_bad_records.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink.errors import KafkaTimeoutError, UnknownTopicOrPartitionError
from kafka_sink.producer.bulk import RecordTooLargeInColumnsError
from kafka_sink.sink_errors import ColumnSerializationError, SinkError
from kafka_sink.spark.commit_log.document import PyKafkaCommitMessage
from kafka_sink.spark.driver.eos.intents import DONE, PARTIAL, BatchRecord, FileIntentStore
from kafka_sink.spark.eos_plan import EosPlan, PartialBatch
from kafka_sink.spark.executor import producer_cache, record_errors, slots
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaStreamWriter
from tests.fakes.spark import FakeProducer, FakeTxnProducer
from tests.unit.spark import test_sink_writer_eos as writer_eos

# Planning and committing without a broker (the exactly-once writer tests' fixture).
no_broker = writer_eos.no_broker

DLQ = "orders-dlq"

_LAYOUT = InputLayout(
    topic_column=False,
    key_column=False,
    partition_column=False,
    headers_column=False,
    timestamp=None,
)
_TOPIC_LAYOUT = InputLayout(
    topic_column=True,
    key_column=False,
    partition_column=False,
    headers_column=False,
    timestamp=None,
)


@pytest.fixture(autouse=True)
def fake_producers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeProducer]]:
    FakeProducer.instances = []
    producer_cache.close_all()
    monkeypatch.setattr(producer_cache, "_create", FakeProducer)
    monkeypatch.setattr(task_module, "topic_rules", lambda items, topic: None)
    yield FakeProducer.instances
    producer_cache.close_all()


def _write(options: SinkOptions, layout: InputLayout, encoder: Any = None) -> Any:
    task = task_module._TaskInfo(4, 1, 77, 9)
    policy = record_errors.policy_for(options, partition_id=4, attempt_number=1, batch_id=9)
    return task_module._TaskWrite(options, layout, task, encoder, record_errors=policy)


def _options(action: str = "deadLetter", topic: str | None = "t", **extra: str) -> SinkOptions:
    opts = {"kafka.bootstrap.servers": "h:1", "onRecordError": action, **extra}
    if action == "deadLetter":
        opts["deadLetterTopic"] = DLQ
    if topic is not None:
        opts["topic"] = topic
    return SinkOptions.from_options(opts)


class _NothingBinds:
    """A format for which no row binds (a schema the whole batch does not match)."""

    def encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        raise ColumnSerializationError("field 'price' is missing", column="value")


def test_a_task_whose_every_row_fails_to_serialize_still_writes_its_dead_letters(
    fake_producers: list[FakeProducer],
) -> None:
    batch = pa.record_batch({"value": ["a", "b", "c"]})
    write = _write(_options(), _LAYOUT, encoder=_NothingBinds())
    message = write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    assert message.bad_records.total == 3  # counted as dead-lettered ...
    letters = [v for p in fake_producers for c in p.calls if c["topic"] == DLQ for v in c["values"]]
    assert letters == [b"a", b"b", b"c"]  # ... so they must be in the dead-letter topic


def test_exactly_once_writes_them_in_the_transaction_when_no_row_binds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    FakeTxnProducer.txn_instances = []
    monkeypatch.setattr(task_module, "_create_transactional", FakeTxnProducer)
    monkeypatch.setattr(slots, "describe_states", lambda config, ids: [None] * len(ids))
    options = _options(deliveryGuarantee="exactly-once")
    task = task_module._TaskInfo(4, 1, 77, 9)
    policy = record_errors.policy_for(options, partition_id=4, attempt_number=1, batch_id=9)
    write = task_module._TaskWrite(
        options, _LAYOUT, task, _NothingBinds(), record_errors=policy, transactional=True
    )
    batch = pa.record_batch({"value": ["a", "b"]})
    message = write.run(task_module._ExactlyOnce(options, "pykafka-q"), iter([batch]))
    [producer] = FakeTxnProducer.txn_instances
    assert [v for c in producer.calls if c["topic"] == DLQ for v in c["values"]] == [b"a", b"b"]
    assert producer.events[-1] == "prepare" and message.transaction is not None


class _SizeCheckingProducer(FakeProducer):
    """Refuses a call holding a record over max.request.size (values plus headers, roughly
    as the producer's own check counts them)."""

    def send_columns(self, topic, values, keys=None, *, partitions=None, headers=None,
                     timestamps_ms=None, track_rows=False):  # fmt: skip
        limit = int(self.config["max.request.size"])
        for row, value in enumerate(values.to_pylist()):
            size = 61 + len(value or b"")
            size += sum(len(k) + len(v or b"") for k, v in (headers[row] if headers else ()))
            if size > limit:
                raise RecordTooLargeInColumnsError(topic, row, size, "max.request.size", limit)
        return super().send_columns(
            topic, values, keys, partitions=partitions, headers=headers,
            timestamps_ms=timestamps_ms, track_rows=track_rows,
        )  # fmt: skip


def test_a_row_over_max_request_size_fails_the_task_naming_it_as_its_dead_letter_cannot_fit(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer]
) -> None:
    # A dead letter holds the row's own bytes (the issue: "a dead letter that itself cannot be
    # written fails the batch"), so a row over max.request.size cannot be set aside: the task
    # fails naming the row and the fix, and nothing of the row is lost in silence.
    monkeypatch.setattr(producer_cache, "_create", _SizeCheckingProducer)
    options = _options(**{"kafka.max.request.size": "300"})
    batch = pa.record_batch({"value": [b"ok", b"x" * 280, b"ok2"]})
    write = _write(options, _LAYOUT)
    with pytest.raises(SinkError, match="the dead letter of row 1 for topic") as caught:
        write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    assert "max.request.size=300" in str(caught.value)
    assert "onRecordError=skip" in str(caught.value)
    assert not [c for p in fake_producers for c in p.calls if c["topic"] == DLQ]
    # skip sets the same row aside.
    skip = _write(_options("skip", **{"kafka.max.request.size": "300"}), _LAYOUT)
    message = skip.run(task_module._AtLeastOnce(skip.options), iter([batch]))
    assert message.bad_records.by_reason == (("record_too_large", 1),)


class _NoSuchTopicProducer(FakeProducer):
    """``partitions_for`` as the real producer answers for a topic that does not exist (and is
    not auto-created): it waits max.block.ms for metadata, then times out."""

    def partitions_for(self, topic: str) -> list[int]:
        if topic == "missing":
            timeout = KafkaTimeoutError(
                "Topic missing not present in metadata after 60000 ms (max.block.ms)"
            )
            # What the brokers answered while it waited.
            timeout.topic_error = UnknownTopicOrPartitionError("no such topic")
            raise timeout
        return [0, 1]


def test_a_topic_column_naming_a_missing_topic_is_a_bad_row(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer]
) -> None:
    monkeypatch.setattr(producer_cache, "_create", _NoSuchTopicProducer)
    batch = pa.record_batch({"topic": ["t", "missing", "t"], "value": [b"a", b"b", b"c"]})
    write = _write(_options(topic=None), _TOPIC_LAYOUT)
    message = write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    assert message.bad_records.by_reason == (("unknown_topic", 1),)


@pytest.mark.usefixtures("no_broker")
def test_the_rerun_of_a_partly_committed_batch_is_not_refused_by_bounds_its_first_run_passed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.unit.spark import test_eos_skip_task as skip_task

    FakeTxnProducer.txn_instances = []
    monkeypatch.setattr(task_module, "_create_transactional", FakeTxnProducer)
    monkeypatch.setattr(slots, "describe_states", lambda config, ids: [None] * len(ids))
    options = writer_eos._options(
        onRecordError="skip", deadLetterMaxRatio="0.1", **{"kafka.max.request.size": "150"}
    )

    def writer(plan: EosPlan) -> PyKafkaStreamWriter:
        return PyKafkaStreamWriter(
            options, _LAYOUT, streaming=True, overwrite=False, write_id="s", eos=plan
        )

    big = pa.record_batch({"value": [b"a", b"x" * 200, b"c"]})  # row 1 is over 150 bytes
    good = skip_task._rows(0, 20)
    # The first run: partition 0 (20 good rows) committed, partition 1 (1 bad of 3) lost;
    # 1 bad row of 23 is within deadLetterMaxRatio=0.1.
    skip_task._as_task(monkeypatch, 0, skip_task.BATCH)
    first = writer(EosPlan("pykafka-q", "q", None)).write(iter([good]))
    assert isinstance(first, PyKafkaCommitMessage) and first.fingerprint is not None
    FileIntentStore(str(tmp_path)).write(
        BatchRecord("q", skip_task.BATCH, PARTIAL, (), committed={0: first.fingerprint}, lost=(1,))
    )
    plan = EosPlan(
        "pykafka-q",
        "q",
        str(tmp_path),
        partial=PartialBatch(skip_task.BATCH, {0: first.fingerprint}),
    )
    rerun = writer(plan)
    messages = []
    for partition, rows in ((0, good), (1, big)):
        skip_task._as_task(monkeypatch, partition, skip_task.BATCH)
        messages.append(rerun.write(iter([rows])))
    open_now = [m.transaction for m in messages if m.transaction]
    skip_task._fake_ops(monkeypatch, open_now)
    rerun.commit(messages, skip_task.BATCH)
    record = FileIntentStore(str(tmp_path)).last("q")
    assert record is not None and record.state == DONE


def test_rows_keep_their_task_input_number_across_topic_groups_and_pieces(
    fake_producers: list[FakeProducer],
) -> None:
    layout = InputLayout(
        topic_column=True,
        key_column=False,
        partition_column=True,
        headers_column=False,
        timestamp=None,
    )
    first = pa.record_batch(
        {
            "topic": ["a", "b", "a", "b", "b"],
            "value": [b"v0", b"v1", b"x" * 200, b"v3", b"v4"],
            "partition": pa.array([0, 5, 1, 0, 9], pa.int32()),
        }
    )
    second = pa.record_batch(
        {
            "topic": ["b", None, "a"],
            "value": [b"v5", b"v6", b"v7"],
            "partition": pa.array([1, 0, 7], pa.int32()),
        }
    )
    options = _options(topic=None, **{"kafka.max.request.size": "150"})
    write = _write(options, layout)
    message = write.run(task_module._AtLeastOnce(write.options), iter([first, second]))
    calls = [c for p in fake_producers for c in p.calls]
    letters = [
        (v, dict(h))
        for c in calls
        if c["topic"] == DLQ
        for v, h in zip(c["values"], c["headers"], strict=True)
    ]
    rows = {int(h["pykafka.row"]): v for v, h in letters}
    assert rows == {1: b"v1", 2: b"x" * 200, 4: b"v4", 6: b"v6", 7: b"v7"}
    good = sorted(v for c in calls if c["topic"] != DLQ for v in c["values"])
    assert good == [b"v0", b"v3", b"v5"]
    assert message.bad_records.total == 5 and message.bad_records.rows_read == 8


def test_a_dead_letter_delivery_failure_evicts_the_producer_as_any_delivery_failure(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer], caplog: Any
) -> None:
    from kafka_sink.errors import NotEnoughReplicasError
    from kafka_sink.sink_errors import SinkDataError, SinkError
    from tests.fakes.spark import FakeFuture

    class _DlqDown(FakeProducer):
        def send_columns(self, topic, values, keys=None, **kw):  # fmt: skip
            future = super().send_columns(topic, values, keys, **kw)
            if topic == DLQ:
                return FakeFuture(None, NotEnoughReplicasError("1 in-sync replica of 2"))
            return future

    monkeypatch.setattr(producer_cache, "_create", _DlqDown)
    batch = pa.record_batch({"topic": ["t", None, "t"], "value": [b"a", b"b", b"c"]})
    write = _write(_options(topic=None), _TOPIC_LAYOUT)
    with caplog.at_level("ERROR"), pytest.raises(SinkError, match="dead letters") as caught:
        write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    assert not isinstance(caught.value, SinkDataError)  # not the data's fault
    [producer] = fake_producers
    assert producer.closed and producer_cache.cached_count() == 0
    assert "failed after these records were acknowledged" in caplog.text


def test_bad_rows_spread_over_a_batch_do_not_fragment_its_sends(
    fake_producers: list[FakeProducer],
) -> None:
    values = [b"x" * 200 if i % 10 == 5 else b"v%d" % i for i in range(100)]
    batch = pa.record_batch({"value": values})
    options = _options(action="skip", **{"kafka.max.request.size": "150"})
    write = _write(options, _LAYOUT)
    message = write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    assert message.bad_records.total == 10
    calls = [c for p in fake_producers for c in p.calls if c["topic"] == "t"]
    assert sum(len(c["values"]) for c in calls) == 90
    assert len(calls) == 1


def test_a_row_the_broker_refuses_for_its_timestamp_is_a_bad_row(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer]
) -> None:
    from kafka_sink.errors import InvalidTimestampError
    from tests.unit.spark.test_bad_records import _refused_write

    refusal = InvalidTimestampError("timestamp 4102444800000 is out of range (after.max.ms)")
    write, batch = _refused_write(monkeypatch, refusal)
    result = write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    assert result.bad_records.by_reason == (("invalid_timestamp", 1),)
