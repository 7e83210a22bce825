"""onRecordError=skip and deadLetter in a task's write: each bad row is taken out once, counted by
reason, and (deadLetter) becomes a dead letter with Kafka Connect's headers, sent through the
task's own producer; the good rows around it are all sent. Against fake producers; the real
broker and Spark cases are in tests/spark/test_spark_bad_records.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from kafka_sink import errors
from kafka_sink.errors import InvalidRecordError, KafkaError, NotEnoughReplicasError
from kafka_sink.producer.futures import PartitionOffsets
from kafka_sink.sink_errors import ColumnSerializationError, SinkDataError, SinkError
from kafka_sink.spark.bad_records import BadRecordCounts, merge_counts
from kafka_sink.spark.executor import producer_cache, record_errors
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from tests.fakes.spark import FakeFuture, FakeProducer
from tests.unit.spark.test_record_errors import CASES, CODES

DLQ = "orders-dlq"


@pytest.fixture(autouse=True)
def fake_producers(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeProducer]]:
    FakeProducer.instances = []
    producer_cache.close_all()
    monkeypatch.setattr(producer_cache, "_create", FakeProducer)
    monkeypatch.setattr(task_module, "topic_rules", lambda items, topic: None)
    yield FakeProducer.instances
    producer_cache.close_all()


def _options(case_topic: str | None, action: str, **extra: str) -> SinkOptions:
    opts = {
        "kafka.bootstrap.servers": "h:1",
        # The "record too large" case's 200-byte row is over this; every other row is under.
        "kafka.max.request.size": "150",
        "onRecordError": action,
        **extra,
    }
    if action == "deadLetter":
        opts["deadLetterTopic"] = DLQ
    if case_topic is not None:
        opts["topic"] = case_topic
    return SinkOptions.from_options(opts)


def _write(
    options: SinkOptions, layout: InputLayout, *, batch_id: int | None = None, encoder: Any = None
) -> Any:
    task = task_module._TaskInfo(4, 1, 77, batch_id)
    policy = record_errors.policy_for(options, partition_id=4, attempt_number=1, batch_id=batch_id)
    return task_module._TaskWrite(options, layout, task, encoder, record_errors=policy)


def _rows(batches: list[pa.RecordBatch]) -> list[bytes]:
    return [v for b in batches for v in b.column("value").to_pylist()]


# The task-input rows each case's batches hold that are bad.
BAD_ROWS = {
    "null topic": [3],
    "empty topic": [0, 1],
    "partition out of range": [3, 4],
    "timestamp before 1970": [1],
    "null header key": [1],
    "record too large": [3],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_skip_takes_out_each_bad_row_once_and_sends_every_other(
    case: str, fake_producers: list[FakeProducer]
) -> None:
    topic, layout, batches, *_ = CASES[case]
    write = _write(_options(topic, "skip"), layout)
    message = write.run(task_module._AtLeastOnce(write.options), iter(batches))
    rows = _rows(batches)
    bad = BAD_ROWS[case]
    sent = [v for p in fake_producers for c in p.calls for v in c["values"]]
    assert sent == [v for i, v in enumerate(rows) if i not in bad]
    counts = message.bad_records
    assert counts == BadRecordCounts("skip", len(rows), ((CODES[case], len(bad)),), counts.samples)
    assert [s.row for s in counts.samples] == bad
    assert all(s.partition_id == 4 and s.reason == CODES[case] for s in counts.samples)
    assert message.record_count == len(rows) - len(bad)


@pytest.mark.parametrize("case", sorted(CASES))
def test_dead_letters_carry_the_row_and_connect_s_headers(
    case: str, fake_producers: list[FakeProducer]
) -> None:
    topic, layout, batches, _row, bound_topic, message = CASES[case]
    write = _write(_options(topic, "deadLetter"), layout, batch_id=12)
    result = write.run(task_module._AtLeastOnce(write.options), iter(batches))
    rows = _rows(batches)
    bad = BAD_ROWS[case]
    calls = [c for p in fake_producers for c in p.calls]
    letters = [c for c in calls if c["topic"] == DLQ]
    assert [v for c in calls if c["topic"] != DLQ for v in c["values"]] == [
        v for i, v in enumerate(rows) if i not in bad
    ]
    assert [v for c in letters for v in c["values"]] == [rows[i] for i in bad]
    headers = [dict(h) for c in letters for h in c["headers"]]
    first = headers[0]
    assert first["__connect.errors.topic"] == (bound_topic or "").encode()
    assert first["__connect.errors.stage"] == (
        b"HEADER_CONVERTER" if case == "null header key" else b"KAFKA_PRODUCE"
    )
    # The size check before sending words the record-too-large case its own way.
    assert first["__connect.errors.exception.message"].decode().startswith(message[:21])
    assert first["__connect.errors.exception.class.name"].startswith(b"kafka_sink.")
    assert first["pykafka.errors.reason"] == CODES[case].encode()
    assert (first["pykafka.batch.id"], first["pykafka.task.partition"]) == (b"12", b"4")
    assert first["pykafka.task.attempt"] == b"1"
    assert [h["pykafka.row"] for h in headers] == [str(i).encode() for i in bad]
    assert result.bad_records.action == "deadLetter"
    assert result.bad_records.total == len(bad)
    # Each dead-letter range is in the task's message, as the topic's own are.
    assert DLQ in {r.topic for r in result.ranges}


def test_a_dead_letter_keeps_the_row_s_key_headers_partition_and_timestamp(
    fake_producers: list[FakeProducer],
) -> None:
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    batch = pa.record_batch(
        {
            "key": [b"k0", b"k1"],
            "value": [b"v0", b"v1"],
            "partition": pa.array([0, 7], pa.int32()),
            "headers": pa.array([[], [{"key": "trace", "value": b"abc"}]], pa.list_(header)),
            "timestamp": pa.array([5, 1_700_000_000_000], pa.int64()),
        }
    )
    layout = InputLayout(
        topic_column=False,
        key_column=True,
        partition_column=True,
        headers_column=True,
        timestamp="millis",
    )
    write = _write(_options("t", "deadLetter"), layout)
    write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    [letter] = [c for p in fake_producers for c in p.calls if c["topic"] == DLQ]
    assert (letter["keys"], letter["values"]) == ([b"k1"], [b"v1"])
    [headers] = letter["headers"]
    assert headers[0] == ("trace", b"abc")
    assert dict(headers)["__connect.errors.partition"] == b"7"
    assert letter["timestamps_ms"].to_pylist() == [1_700_000_000_000]
    assert "pykafka.batch.id" not in dict(headers)  # a batch job has no streaming batch id


class _RefusingEncoder:
    """Serializes values; a value b"bad..." does not bind (as a format refuses a row)."""

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        self.calls += 1
        values = batch.column("value").to_pylist()
        for i, v in enumerate(values):
            if v.startswith("bad"):
                raise ColumnSerializationError(
                    f"row {i}: field 'price' is null, the schema has no null", column="value"
                )
        encoded = pa.array([v.encode() for v in values], pa.binary())
        return batch.set_column(0, pa.field("value", pa.binary()), encoded)


def test_rows_that_do_not_serialize_are_isolated_and_dead_lettered_raw(
    fake_producers: list[FakeProducer],
) -> None:
    values = [f"r{i}" for i in range(64)]
    for i in (5, 6, 40):
        values[i] = f"bad{i}"
    batch = pa.record_batch({"value": values})
    encoder = _RefusingEncoder()
    layout = InputLayout(
        topic_column=False,
        key_column=False,
        partition_column=False,
        headers_column=False,
        timestamp=None,
    )
    write = _write(_options("t", "deadLetter"), layout, encoder=encoder)
    result = write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    calls = [c for p in fake_producers for c in p.calls]
    good = [v for c in calls if c["topic"] == "t" for v in c["values"]]
    assert good == [v.encode() for v in values if not v.startswith("bad")]
    letters = [c for c in calls if c["topic"] == DLQ]
    assert [v for c in letters for v in c["values"]] == [b"bad5", b"bad6", b"bad40"]
    stages = {dict(h)["__connect.errors.stage"] for c in letters for h in c["headers"]}
    assert stages == {b"VALUE_CONVERTER"}
    assert result.bad_records.by_reason == (("serialization", 3),)
    # Halving finds 3 bad rows among 64 in far fewer encodes than one per row.
    assert encoder.calls < 40


def test_a_struct_that_does_not_serialize_is_dead_lettered_as_json() -> None:
    batch = pa.record_batch({"value": pa.array([{"id": 1, "price": None}])})
    contents = record_errors.row_contents(batch, 0, timestamp_ms=lambda c: None)
    assert json.loads(contents.value or b"") == {"id": 1, "price": None}


def test_without_a_policy_a_serialization_failure_fails_the_task_as_before() -> None:
    batch = pa.record_batch({"value": ["ok", "bad"]})
    layout = InputLayout(
        topic_column=False,
        key_column=False,
        partition_column=False,
        headers_column=False,
        timestamp=None,
    )
    options = SinkOptions.from_options({"kafka.bootstrap.servers": "h:1", "topic": "t"})
    write = task_module._TaskWrite(
        options, layout, task_module._TaskInfo(0, 0, 0, None), _RefusingEncoder()
    )
    with pytest.raises(SinkDataError, match="field 'price' is null"):
        write.run(task_module._AtLeastOnce(options), iter([batch]))


def test_more_bad_rows_than_dead_letter_max_records_fail_the_task(
    fake_producers: list[FakeProducer],
) -> None:
    topic, layout, batches, *_ = CASES["partition out of range"]
    write = _write(_options(topic, "skip", deadLetterMaxRecords="1"), layout)
    with pytest.raises(SinkDataError, match=r"deadLetterMaxRecords' \(1\)") as caught:
        write.run(task_module._AtLeastOnce(write.options), iter(batches))
    assert "partition_out_of_range (Spark partition 4, row 3)" in str(caught.value)


class _RefusedFuture(FakeFuture):
    """A bulk send whose row 1 the broker refused (INVALID_RECORD), the others acknowledged."""

    def __init__(self, refused: BaseException) -> None:
        super().__init__(None, refused)
        self.refused = refused

    def failed_rows(self) -> list[tuple[int, BaseException]]:
        return [(1, self.refused)]

    def offsets(self) -> dict[int, PartitionOffsets]:
        return {0: PartitionOffsets(10, 11, 2)}


class _RefusingProducer(FakeProducer):
    refusal: BaseException = InvalidRecordError("compacted topic needs a key")

    def send_columns(self, topic, values, keys=None, **kw):  # fmt: skip
        future = super().send_columns(topic, values, keys, **kw)
        return _RefusedFuture(self.refusal) if topic == "t" else future


def _refused_write(monkeypatch: pytest.MonkeyPatch, refusal: BaseException) -> Any:
    monkeypatch.setattr(producer_cache, "_create", _RefusingProducer)
    monkeypatch.setattr(_RefusingProducer, "refusal", refusal)
    layout = InputLayout(
        topic_column=False,
        key_column=False,
        partition_column=False,
        headers_column=False,
        timestamp=None,
    )
    write = _write(_options("t", "deadLetter"), layout)
    batch = pa.record_batch({"value": [b"a", b"b", b"c"]})
    return write, batch


def test_a_record_the_broker_refuses_becomes_a_dead_letter_and_the_rest_count(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer]
) -> None:
    write, batch = _refused_write(monkeypatch, InvalidRecordError("compacted topic needs a key"))
    result = write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    [call, letter] = [c for p in fake_producers for c in p.calls]
    assert call["track_rows"] is True
    assert letter["topic"] == DLQ and letter["values"] == [b"b"]
    assert dict(letter["headers"][0])["pykafka.errors.reason"] == b"invalid_record"
    assert [r.record_count for r in result.ranges if r.topic == "t"] == [2]


def test_a_refusal_that_is_not_a_record_s_fails_the_task(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer]
) -> None:
    write, batch = _refused_write(monkeypatch, NotEnoughReplicasError("2 < 3"))
    with pytest.raises(NotEnoughReplicasError):
        write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    assert not [c for p in fake_producers for c in p.calls if c["topic"] == DLQ]


def test_a_dead_letter_that_cannot_be_written_fails_the_task(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer]
) -> None:
    class _DlqDown(FakeProducer):
        def send_columns(self, topic, values, keys=None, **kw):  # fmt: skip
            future = super().send_columns(topic, values, keys, **kw)
            return FakeFuture(None, KafkaError("dlq partition offline")) if topic == DLQ else future

    monkeypatch.setattr(producer_cache, "_create", _DlqDown)
    topic, layout, batches, *_ = CASES["timestamp before 1970"]
    write = _write(_options(topic, "deadLetter"), layout)
    with pytest.raises(
        SinkError, match=r"dead letters for topic 'orders-dlq'.*could not be written"
    ):
        write.run(task_module._AtLeastOnce(write.options), iter(batches))


# Every error the broker or the producer can raise, by class: which are a record's own.
RECORD_LEVEL = {
    "RecordTooLargeError": "record_too_large",
    "RecordTooLargeInColumnsError": "record_too_large",
    "MessageTooLargeError": "record_too_large",
    "InvalidRecordError": "invalid_record",
    "InvalidTimestampError": "invalid_timestamp",
    "CorruptMessageError": "corrupt_message",
    "TopicAuthorizationFailedError": "topic_authorization",
    "InvalidTopicError": "unknown_topic",
}


def _error_classes() -> list[type[BaseException]]:
    from kafka_sink.producer.bulk import RecordTooLargeInColumnsError

    found = [
        cls
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.KafkaError)
    ]
    return [*found, RecordTooLargeInColumnsError]


@pytest.mark.parametrize("kind", _error_classes(), ids=lambda c: c.__name__)
def test_each_error_is_on_its_side_of_the_table(kind: type[BaseException]) -> None:
    error = kind.__new__(kind)
    assert record_errors.reason_of(error) == RECORD_LEVEL.get(kind.__name__)


def test_fencing_timeouts_and_replication_are_never_a_record_s() -> None:
    for name in (
        "ProducerFencedError",
        "KafkaTimeoutError",
        "NotEnoughReplicasError",
        "NotEnoughReplicasAfterAppendError",
        "SaslAuthenticationError",
        "ClusterAuthorizationFailedError",
        "TransactionalIdAuthorizationFailedError",
    ):
        kind = getattr(errors, name)
        assert record_errors.reason_of(kind.__new__(kind)) is None, name


def test_counts_merge_by_reason_and_keep_the_first_rows() -> None:
    a = _write(_options("t", "skip"), CASES["null topic"][1])
    b = _write(_options("t", "skip"), CASES["null topic"][1])
    for write in (a, b):
        write.run(task_module._AtLeastOnce(write.options), iter(CASES["null topic"][2]))
    merged = merge_counts([None, a.record_errors.counts(4), b.record_errors.counts(6)])
    assert merged is not None
    assert (merged.rows_read, merged.total) == (10, 0)
    skipped = record_errors.SkipRecords(2, None)
    for row in (9, 1):
        skipped.reject(record_errors.BadRecord(row, None, "why", code="null_topic"), lambda: None)
    merged = merge_counts([skipped.counts(10), skipped.counts(30)])
    assert merged is not None
    assert merged.by_reason == (("null_topic", 4),) and merged.ratio == 0.1
    assert [s.row for s in merged.samples] == [1, 1, 9]


class _MissingTopicProducer(FakeProducer):
    """Topic "gone" does not exist (the brokers say so) or, with ``unreachable``, no broker
    answered; every other topic has 2 partitions."""

    unreachable = False
    asked: ClassVar[list[str]] = []

    def partitions_for(self, topic: str) -> list[int]:
        _MissingTopicProducer.asked.append(topic)
        if topic != "gone":
            return [0, 1]
        timeout = errors.KafkaTimeoutError("topic 'gone' not present in metadata after 60000 ms")
        if not self.unreachable:
            timeout.topic_error = errors.UnknownTopicOrPartitionError("no such topic")
        raise timeout


def _column_topics_write(monkeypatch: pytest.MonkeyPatch, *, unreachable: bool) -> Any:
    monkeypatch.setattr(producer_cache, "_create", _MissingTopicProducer)
    monkeypatch.setattr(_MissingTopicProducer, "unreachable", unreachable)
    _MissingTopicProducer.asked = []
    layout = InputLayout(
        topic_column=True,
        key_column=False,
        partition_column=False,
        headers_column=False,
        timestamp=None,
    )
    return _write(_options(None, "deadLetter"), layout)


def test_rows_naming_a_topic_that_does_not_exist_are_dead_lettered_asking_once(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer]
) -> None:
    write = _column_topics_write(monkeypatch, unreachable=False)
    batches = [
        pa.record_batch({"topic": ["ok", "gone", "ok"], "value": [b"a", b"b", b"c"]}),
        pa.record_batch({"topic": ["gone", "ok"], "value": [b"d", b"e"]}),
    ]
    result = write.run(task_module._AtLeastOnce(write.options), iter(batches))
    calls = [c for p in fake_producers for c in p.calls]
    assert [v for c in calls if c["topic"] == "ok" for v in c["values"]] == [b"a", b"c", b"e"]
    assert [v for c in calls if c["topic"] == DLQ for v in c["values"]] == [b"b", b"d"]
    assert result.bad_records.by_reason == (("unknown_topic", 2),)
    assert _MissingTopicProducer.asked.count("gone") == 1


def test_an_unreachable_cluster_is_not_a_row_s_fault(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer]
) -> None:
    write = _column_topics_write(monkeypatch, unreachable=True)
    batch = pa.record_batch({"topic": ["ok", "gone"], "value": [b"a", b"b"]})
    with pytest.raises(errors.KafkaTimeoutError):
        write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    assert not [c for p in fake_producers for c in p.calls if c["topic"] == DLQ]


def test_the_runs_around_bad_rows_are_sent_as_one_group_per_topic_keeping_row_numbers(
    fake_producers: list[FakeProducer],
) -> None:
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    batch = pa.record_batch(
        {
            "topic": ["a", "b", "a", None, "a", "b", None, "a"],
            "value": [b"%d" % i for i in range(8)],
            "key": [b"k0", None, None, b"k3", b"k4", None, None, None],
            "headers": pa.array(
                [[], [], [{"key": "h", "value": b"2"}], [], [], [], [], []], pa.list_(header)
            ),
        }
    )
    layout = InputLayout(
        topic_column=True,
        key_column=True,
        partition_column=False,
        headers_column=True,
        timestamp=None,
    )
    write = _write(_options(None, "skip"), layout)
    write._acquire = lambda: FakeProducer({})
    groups = {g.topic: g for g in write._groups(batch, 100)}
    assert sorted(groups) == ["a", "b"]
    a, b = groups["a"], groups["b"]
    assert [a.row_number(i) for i in range(a.num_rows)] == [100, 102, 104, 107]
    assert a.values.to_pylist() == [b"0", b"2", b"4", b"7"]
    assert a.keys is not None and a.keys.to_pylist() == [b"k0", None, b"k4", None]
    assert a.headers == [[], [("h", b"2")], [], []]
    assert [b.row_number(i) for i in range(b.num_rows)] == [101, 105]
    assert b.keys is None  # no key in b's rows
    assert write.record_errors.counts(8).by_reason == (("null_topic", 2),)


def test_a_broker_refusal_the_topic_s_rules_should_have_caught_drops_them(
    monkeypatch: pytest.MonkeyPatch, fake_producers: list[FakeProducer]
) -> None:
    forgotten: list[str] = []
    monkeypatch.setattr(
        task_module.topic_rules_module, "forget", lambda items, topic: forgotten.append(topic)
    )
    write, batch = _refused_write(monkeypatch, InvalidRecordError("compacted topic needs a key"))
    write.run(task_module._AtLeastOnce(write.options), iter([batch]))
    assert forgotten == ["t"]


def test_a_row_refused_for_its_timestamp_is_stamped_now_its_own_in_a_header() -> None:
    letters = record_errors.DeadLetters(
        DLQ, partition_id=0, attempt_number=0, batch_id=None, max_records=None
    )
    ahead = 4_102_444_800_000
    contents = record_errors.RowContents(b"k", b"v", timestamp_ms=ahead)
    for code in ("invalid_timestamp", "invalid_record"):
        letters.reject(record_errors.BadRecord(0, "t", "why", code=code), lambda: contents)
    late, other = letters.take_dead_letters()
    assert late.timestamp_ms is None
    assert dict(late.headers)["pykafka.timestamp"] == str(ahead).encode()
    assert other.timestamp_ms == ahead and "pykafka.timestamp" not in dict(other.headers)
