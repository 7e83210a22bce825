"""Send-path plugins: serializers, interceptors and ``partitioner.class``, through ``send()`` and
``send_columns()``.

The producer points at a closed port with a ManualClock, so nothing is ever sent: the test plays
the broker's part by applying a Metadata response itself, then reads the queued batches' bytes
back and completes the batches (acknowledged or failed) by hand.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import ConfigError, KafkaError, SerializationError
from kafka_sink.producer.batch import ProducerBatch
from kafka_sink.producer.config import ProducerConfig
from kafka_sink.producer.producer import KafkaProducer, ProducerRecord
from kafka_sink.records.batch import Record, read_batches
from kafka_sink.testing import plugins as examples
from tests.fakes.metadata import metadata_response

PARTITIONS = 3


@pytest.fixture
def make_producer() -> Iterator[Any]:
    made: list[KafkaProducer] = []

    def make(**config: object) -> KafkaProducer:
        clock = ManualClock()
        producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", **config}, clock=clock)
        producer._metadata.update(metadata_response(partitions=PARTITIONS), clock.now_ms())
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.close(0)


def _batches(producer: KafkaProducer) -> list[ProducerBatch]:
    acc = producer._accumulator
    with acc._lock:
        return [b for dq in acc._batches.values() for b in dq]


def _records(producer: KafkaProducer) -> dict[int, list[Record]]:
    """Queued records by partition, decoded from the batches' bytes."""
    out: dict[int, list[Record]] = {}
    for batch in _batches(producer):
        for decoded in read_batches(batch.encode()):
            out.setdefault(batch.partition, []).extend(decoded.records)
    return out


def _complete(producer: KafkaProducer, error: BaseException | None = None) -> None:
    for batch in _batches(producer):
        batch.done(-1 if error else 100, -1, error)


def _nothing_queued(producer: KafkaProducer) -> bool:
    return not _batches(producer) and producer._accumulator.used_memory == 0


# -- serializers ----------------------------------------------------------------------------------


def test_one_and_three_argument_serializers(make_producer) -> None:
    producer = make_producer(
        **{
            "key.serializer": examples.json_serializer,  # (data)
            "value.serializer": "kafka_sink.testing.plugins.TaggingJsonSerializer",  # (t, d, h)
        }
    )
    producer.send("t", {"b": 1, "a": [2]}, key="k1", partition=1, headers=[("h", b"1")])
    [record] = _records(producer)[1]
    assert record.key == b'"k1"'
    assert record.value == b'{"a":[2],"b":1}'
    # The three-argument serializer saw the record's headers and added one.
    assert record.headers == [("h", b"1"), (examples.SERIALIZED_HEADER, b"t")]


def test_serializer_signature_detection() -> None:
    from kafka_sink.producer.plugins import load_serializer

    def three(topic: str, data: Any, headers: list[Any]) -> bytes:
        return f"{topic}:{data}:{len(headers)}".encode()

    def three_with_default(topic: str, data: Any, headers: Any = None) -> bytes:
        return b"3"

    def one_with_default(data: Any, encoding: str = "ascii") -> bytes:
        return str(data).encode(encoding)

    assert load_serializer("value.serializer", three)("t", 5, [("h", None)]) == b"t:5:1"
    assert load_serializer("value.serializer", three_with_default)("t", 5, []) == b"3"
    assert load_serializer("value.serializer", one_with_default)("t", 5, []) == b"5"
    assert load_serializer("value.serializer", lambda d: f"{d}é")("t", 5, []) == "5é".encode()
    with pytest.raises(ConfigError, match=r"value.serializer: .* must accept"):
        ProducerConfig.from_mapping(
            {"bootstrap.servers": "a:1", "value.serializer": lambda a, b: b""}
        )


def test_serializer_error_raises_serialization_error_with_nothing_queued(make_producer) -> None:
    def broken(data: Any) -> bytes:
        raise RuntimeError("no way")

    producer = make_producer(**{"value.serializer": broken})
    with pytest.raises(
        SerializationError, match=r"value.serializer .*broken.*RuntimeError: no way"
    ):
        producer.send("t", {"x": 1})
    assert _nothing_queued(producer)

    producer = make_producer(**{"key.serializer": lambda data: 42})
    with pytest.raises(SerializationError, match=r"returned int .* must return bytes"):
        producer.send("t", b"v", key="k")
    assert _nothing_queued(producer)


def test_serializers_are_not_called_for_null(make_producer) -> None:
    calls: list[Any] = []

    def ser(data: Any) -> bytes:
        calls.append(data)
        return b"x"

    producer = make_producer(**{"key.serializer": ser, "value.serializer": ser})
    producer.send("t", None, partition=0)  # a tombstone stays a tombstone
    [record] = _records(producer)[0]
    assert (record.key, record.value, calls) == (None, None, [])


def test_bytes_and_str_need_no_serializer(make_producer) -> None:
    producer = make_producer()
    producer.send("t", "vé", key=b"k", partition=2)
    [record] = _records(producer)[2]
    assert (record.key, record.value) == (b"k", "vé".encode())


# -- interceptors ---------------------------------------------------------------------------------


class _Recorder:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.log.append(f"{self.name}.on_send")
        return dataclasses.replace(record, value=record.value + self.name.encode())

    def on_acknowledgement(self, metadata: Any, exception: BaseException | None) -> None:
        self.log.append(f"{self.name}.ack")


class _Raising:
    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        raise RuntimeError("interceptor bug")

    def on_acknowledgement(self, metadata: Any, exception: BaseException | None) -> None:
        raise RuntimeError("interceptor bug")


def test_interceptors_run_in_order_before_serializers(make_producer) -> None:
    log: list[str] = []
    producer = make_producer(
        **{
            "interceptor.classes": [_Recorder("A", log), _Recorder("B", log)],
            "value.serializer": lambda data: b"<" + data + b">",
        }
    )
    calls: list[str] = []
    producer.send("t", b"v", partition=0, callback=lambda m, e: calls.append("callback"))
    [record] = _records(producer)[0]
    assert record.value == b"<vAB>"  # A, then B, then the serializer
    assert log == ["A.on_send", "B.on_send"]
    _complete(producer)
    assert log == ["A.on_send", "B.on_send", "A.ack", "B.ack"]
    assert calls == ["callback"]  # after the interceptors, as in Java


def test_interceptor_exceptions_are_logged_and_swallowed(make_producer, caplog) -> None:
    log: list[str] = []
    producer = make_producer(**{"interceptor.classes": [_Raising(), _Recorder("B", log)]})
    with caplog.at_level(logging.WARNING, logger="kafka_sink.producer.interceptors"):
        future = producer.send("t", b"secret-value", key=b"secret-key", partition=0)
        _complete(producer)
    assert future.get(0).offset == 100
    [record] = _records(producer)[0]
    assert record.value == b"secret-valueB"  # the raising one left it as it was
    warnings = [r for r in caplog.records if r.name == "kafka_sink.producer.interceptors"]
    assert len(warnings) == 2  # on_send, on_acknowledgement
    for warning in warnings:
        assert "_Raising" in warning.getMessage()
        assert "secret" not in warning.getMessage()
    assert log == ["B.on_send", "B.ack"]


def test_on_acknowledgement_for_success_and_delivery_failure(make_producer) -> None:
    counter = examples.CountingInterceptor()
    producer = make_producer(**{"interceptor.classes": [counter]})
    producer.send("t", b"a", partition=1)
    producer.send("t", b"b", partition=1)
    _complete(producer)
    assert counter.sent == 2
    assert [(m.topic, m.partition, m.offset) for m in counter.acknowledged] == [
        ("t", 1, 100),
        ("t", 1, 101),
    ]
    assert [m.serialized_value_size for m in counter.acknowledged] == [1, 1]

    failure = KafkaError("broker said no")
    producer.send("t", b"c", partition=2)
    for batch in _batches(producer):
        if batch.partition == 2:
            batch.done(-1, -1, failure)
    [(metadata, exc)] = counter.failed
    assert exc is failure
    assert (metadata.topic, metadata.partition, metadata.offset) == ("t", 2, -1)


def test_on_acknowledgement_for_a_record_failing_inside_send(make_producer) -> None:
    counter = examples.CountingInterceptor()
    producer = make_producer(
        **{"interceptor.classes": [counter], "value.serializer": lambda data: 1 / 0}
    )
    with pytest.raises(SerializationError) as caught:
        producer.send("t", b"v")
    assert counter.sent == 1
    [(metadata, exc)] = counter.failed
    assert exc is caught.value
    assert (metadata.topic, metadata.partition) == ("t", -1)  # not partitioned yet
    assert _nothing_queued(producer)


def test_interceptor_may_change_partition_key_and_headers(make_producer) -> None:
    class Reroute:
        def on_send(self, record: ProducerRecord) -> ProducerRecord:
            return dataclasses.replace(
                record, partition=2, key=b"new", headers=(("added", b"1"),), timestamp=1234
            )

    producer = make_producer(**{"interceptor.classes": [Reroute()]})
    producer.send("t", b"v", key=b"old", partition=0)
    [record] = _records(producer)[2]
    assert (record.key, record.headers, record.timestamp_ms) == (b"new", [("added", b"1")], 1234)


def test_interceptor_close_and_partitioner_close_on_producer_close(make_producer) -> None:
    counter = examples.CountingInterceptor()
    closed: list[str] = []

    class Partitioner:
        def partition(self, topic: str, key: bytes | None, count: int) -> int:
            return 0

        def close(self) -> None:
            closed.append("partitioner")

    producer = make_producer(**{"interceptor.classes": [counter], "partitioner.class": Partitioner})
    producer.close(0)
    producer.close(0)
    assert counter.closed == 1
    assert closed == ["partitioner"]


def test_interceptor_classes_as_comma_separated_paths() -> None:
    cfg = ProducerConfig.from_mapping(
        {
            "bootstrap.servers": "a:1",
            "interceptor.classes": " kafka_sink.testing.plugins.StampInterceptor , "
            "kafka_sink.testing.plugins:CountingInterceptor",
        }
    )
    assert cfg.interceptor_classes == (
        "kafka_sink.testing.plugins.StampInterceptor",
        "kafka_sink.testing.plugins:CountingInterceptor",
    )


# -- partitioner ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    [
        "kafka_sink.testing.plugins.KeyDigitPartitioner",  # a class by path: instantiated
        "kafka_sink.testing.plugins:KeyDigitPartitioner",
        examples.KeyDigitPartitioner,  # a class
        examples.KeyDigitPartitioner(),  # an instance with partition()
        lambda topic, key, count: count - 1 if key is None else int(key) % count,  # a callable
    ],
)
def test_partitioner_forms(make_producer, spec: object) -> None:
    producer = make_producer(**{"partitioner.class": spec})
    producer.send("t", b"a", key=b"4")  # 4 % 3
    producer.send("t", b"b", key=b"2")
    producer.send("t", b"c")  # keyless records go through it too
    producer.send("t", b"d", key=b"4", partition=0)  # explicit wins
    got = {p: [r.value for r in rs] for p, rs in _records(producer).items()}
    assert got == {1: [b"a"], 2: [b"b", b"c"], 0: [b"d"]}


def test_partitioner_result_out_of_range_fails_that_record_only(make_producer) -> None:
    producer = make_producer(**{"partitioner.class": lambda topic, key, count: int(key)})
    producer.send("t", b"ok", key=b"1")
    with pytest.raises(ValueError, match=r"returned partition 3 .* 3 partitions \(valid: 0..2\)"):
        producer.send("t", b"bad", key=b"3")
    with pytest.raises(ValueError, match=r"returned partition -1"):
        producer.send("t", b"bad", key=b"-1")
    producer.send("t", b"ok2", key=b"2")
    got = {p: [r.value for r in rs] for p, rs in _records(producer).items()}
    assert got == {1: [b"ok"], 2: [b"ok2"]}


def test_partitioner_non_int_result_is_an_error(make_producer) -> None:
    producer = make_producer(**{"partitioner.class": lambda topic, key, count: "0"})
    with pytest.raises(ValueError, match=r"returned str .* must return an int"):
        producer.send("t", b"v")
    assert _nothing_queued(producer)


# -- import paths and config ----------------------------------------------------------------------


def test_import_path_forms_and_errors() -> None:
    base = {"bootstrap.servers": "a:1"}
    for path in (
        "kafka_sink.testing.plugins.last_partition",
        "kafka_sink.testing.plugins:last_partition",
    ):
        cfg = ProducerConfig.from_mapping({**base, "partitioner.class": path})
        assert cfg.partitioner_class == path  # the path is kept: the config pickles
        assert pickle.loads(pickle.dumps(cfg)).partitioner_class == path
        assert f"partitioner_class={path!r}" in repr(cfg)
    with pytest.raises(ConfigError, match=r"partitioner.class: cannot import 'no_such_mod.P'"):
        ProducerConfig.from_mapping({**base, "partitioner.class": "no_such_mod.P"})
    with pytest.raises(ConfigError, match=r"interceptor.classes: cannot import .*Nope"):
        ProducerConfig.from_mapping(
            {**base, "interceptor.classes": "kafka_sink.testing.plugins.Nope"}
        )
    with pytest.raises(ConfigError, match=r"key.serializer: .* is a Java class"):
        ProducerConfig.from_mapping(
            {**base, "key.serializer": "org.apache.kafka.common.serialization.StringSerializer"}
        )
    with pytest.raises(ConfigError, match=r"interceptor.classes: .*json.JSONDecoder defines none"):
        ProducerConfig.from_mapping({**base, "interceptor.classes": "json.JSONDecoder"})
    with pytest.raises(ConfigError, match=r"partitioner.class: class .* no partition"):
        ProducerConfig.from_mapping({**base, "partitioner.class": "json.JSONDecoder"})


def test_plugin_objects_in_repr_by_name() -> None:
    cfg = ProducerConfig.from_mapping(
        {"bootstrap.servers": "a:1", "interceptor.classes": [examples.CountingInterceptor()]}
    )
    assert "interceptor_classes=['kafka_sink.testing.plugins.CountingInterceptor']" in repr(cfg)


# -- send_columns ---------------------------------------------------------------------------------


def test_send_columns_calls_interceptors_per_record(make_producer) -> None:
    counter = examples.CountingInterceptor()
    stamp = examples.StampInterceptor()
    producer = make_producer(**{"interceptor.classes": [stamp, counter]})
    values = pa.array([b"a", b"b", b"c", b"d"], pa.binary())
    future = producer.send_columns("t", values, partitions=pa.array([0, 1, 0, 2], pa.int32()))
    assert (stamp.sent, counter.sent) == (4, 4)
    got = {
        p: [(r.value, dict(r.headers)[examples.STAMP_HEADER]) for r in rs]
        for p, rs in _records(producer).items()
    }
    assert got == {0: [(b"a", b"1"), (b"c", b"3")], 1: [(b"b", b"2")], 2: [(b"d", b"4")]}
    _complete(producer)
    assert future.get(0) is not None
    acked = sorted((m.partition, m.offset) for m in counter.acknowledged)
    assert acked == [(0, 100), (0, 101), (1, 100), (2, 100)]
    assert counter.failed == []


def test_send_columns_on_acknowledgement_for_failed_batches(make_producer) -> None:
    counter = examples.CountingInterceptor()
    producer = make_producer(**{"interceptor.classes": [counter]})
    producer.send_columns("t", [b"a", b"b", b"c"], partitions=[0, 0, 1])
    # An interceptor that only observes leaves the call's columns as they were.
    got = {p: [r.value for r in rs] for p, rs in _records(producer).items()}
    assert got == {0: [b"a", b"b"], 1: [b"c"]}
    failure = KafkaError("no")
    _complete(producer, failure)
    assert counter.acknowledged == []
    assert sorted(m.partition for m, _e in counter.failed) == [0, 0, 1]
    assert all(e is failure for _m, e in counter.failed)


def test_send_columns_interceptor_topic_change_fails_the_call(make_producer) -> None:
    counter = examples.CountingInterceptor()

    class Reroute:
        def on_send(self, record: ProducerRecord) -> ProducerRecord:
            return dataclasses.replace(record, topic="elsewhere")

    producer = make_producer(**{"interceptor.classes": [Reroute(), counter]})
    with pytest.raises(ValueError, match=r"record 0 of this call: an interceptor changed"):
        producer.send_columns("t", [b"a", b"b"])
    assert _nothing_queued(producer)
    assert len(counter.failed) == 2  # every row is acknowledged, with the error


def test_send_columns_serializers(make_producer) -> None:
    producer = make_producer(
        **{
            "key.serializer": "kafka_sink.testing.plugins.json_serializer",
            "value.serializer": "kafka_sink.testing.plugins:TaggingJsonSerializer",
        }
    )
    producer.send_columns("t", [{"n": 1}, None, [3]], keys=["a", None, "c"], partitions=[0, 0, 0])
    records = _records(producer)[0]
    assert [(r.key, r.value) for r in records] == [
        (b'"a"', b'{"n":1}'),
        (None, None),
        (b'"c"', b"[3]"),
    ]
    assert [r.headers for r in records] == [
        [(examples.SERIALIZED_HEADER, b"t")],
        [],
        [(examples.SERIALIZED_HEADER, b"t")],
    ]


def test_send_columns_serializer_error_queues_nothing(make_producer) -> None:
    counter = examples.CountingInterceptor()
    producer = make_producer(
        **{"interceptor.classes": [counter], "value.serializer": examples.json_serializer}
    )
    with pytest.raises(SerializationError, match=r"record 1 of this call: .*nothing"):
        producer.send_columns("t", [{"ok": 1}, {1, 2}])  # a set is not JSON
    assert _nothing_queued(producer)
    assert len(counter.failed) == 2


def test_send_columns_with_partitioner(make_producer) -> None:
    producer = make_producer(**{"partitioner.class": examples.KeyDigitPartitioner})
    keys = pa.array([b"1", b"5", None, b"3"], pa.binary())
    producer.send_columns(
        "t", [b"a", b"b", b"c", b"d"], keys, partitions=pa.array([None, None, None, 1], pa.int32())
    )
    got = {p: [r.value for r in rs] for p, rs in _records(producer).items()}
    assert got == {1: [b"a", b"d"], 2: [b"b", b"c"]}


def test_send_columns_partitioner_out_of_range_names_the_record(make_producer) -> None:
    producer = make_producer(**{"partitioner.class": lambda topic, key, count: int(key)})
    with pytest.raises(ValueError, match=r"record 2 of this call: .*returned partition 7"):
        producer.send_columns("t", [b"a", b"b", b"c"], [b"0", b"1", b"7"])
    assert _nothing_queued(producer)
