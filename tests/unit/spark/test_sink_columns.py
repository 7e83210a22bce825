"""Arrow batch -> per-topic send columns, with no Spark and no broker."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kafka_sink.sink_errors import SinkDataError
from kafka_sink.spark.executor.columns import check_partitions, topic_columns
from kafka_sink.spark.schema import InputLayout

NOW = 1_700_000_000_000
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def layout(**flags) -> InputLayout:
    base = {
        "topic_column": False,
        "key_column": False,
        "partition_column": False,
        "headers_column": False,
        "timestamp": None,
    }
    base.update(flags)
    return InputLayout(**base)


def test_strings_become_binary_and_option_topic_wins() -> None:
    batch = pa.record_batch(
        {"key": pa.array(["a", None]), "value": pa.array(["é", "x"]), "topic": ["ignored", None]}
    )
    [group] = topic_columns(batch, layout(key_column=True), "t", now_ms=NOW)
    assert group.topic == "t"
    assert group.values.type == pa.binary()
    assert group.values.to_pylist() == ["é".encode(), b"x"]
    assert group.keys is not None and group.keys.to_pylist() == [b"a", None]
    assert group.partitions is None and group.timestamps_ms is None and group.headers is None


def test_all_null_keys_are_dropped() -> None:
    batch = pa.record_batch({"key": pa.array([None, None], pa.binary()), "value": [b"1", b"2"]})
    [group] = topic_columns(batch, layout(key_column=True), "t", now_ms=NOW)
    assert group.keys is None


def test_split_by_topic_keeps_order() -> None:
    batch = pa.record_batch(
        {"topic": ["a", "b", "a", "b", "a"], "value": [b"0", b"1", b"2", b"3", b"4"]}
    )
    groups = topic_columns(batch, layout(topic_column=True), None, now_ms=NOW)
    by_topic = {g.topic: g.values.to_pylist() for g in groups}
    assert by_topic == {"a": [b"0", b"2", b"4"], "b": [b"1", b"3"]}


def test_null_topic_fails_naming_the_row() -> None:
    batch = pa.record_batch({"topic": ["a", None], "value": [b"0", b"1"]})
    with pytest.raises(SinkDataError, match=r"row 11 has a null 'topic'.*option\('topic'"):
        topic_columns(batch, layout(topic_column=True), None, now_ms=NOW, row_base=10)


def test_a_timestamp_before_1970_is_refused_naming_the_row_and_the_fix() -> None:
    # -1 means "no timestamp" to the broker; any negative value would be stored as garbage.
    micros = pa.array([5_000, None, -1_000], pa.timestamp("us", tz="UTC"))
    batch = pa.record_batch({"value": [b"a", b"b", b"c"], "timestamp": micros})
    with pytest.raises(SinkDataError, match=r"row 2 has a 'timestamp' before 1970.*-1 ms.*Fix"):
        topic_columns(batch, layout(timestamp="timestamp"), "t", now_ms=NOW)
    millis = pa.record_batch({"value": [b"a"], "timestamp": pa.array([-7], pa.int64())})
    with pytest.raises(SinkDataError, match=r"row 0 .*-7 ms"):
        topic_columns(millis, layout(timestamp="millis"), "t", now_ms=NOW)


def test_timestamps_from_timestamp_and_millis_columns() -> None:
    micros = pa.array([1_000_999, None, 0], pa.timestamp("us", tz="UTC"))
    batch = pa.record_batch({"value": [b"a", b"b", b"c"], "timestamp": micros})
    [group] = topic_columns(batch, layout(timestamp="timestamp"), "t", now_ms=NOW)
    assert group.timestamps_ms is not None
    assert group.timestamps_ms.dtype == np.int64
    assert group.timestamps_ms.tolist() == [1000, NOW, 0]
    millis = pa.record_batch({"value": [b"a", b"b"], "timestamp": pa.array([5, None], pa.int64())})
    [group] = topic_columns(millis, layout(timestamp="millis"), "t", now_ms=NOW)
    assert group.timestamps_ms is not None and group.timestamps_ms.tolist() == [5, NOW]


def test_headers_only_when_present() -> None:
    empty = pa.array([[], None], HEADER_TYPE)
    batch = pa.record_batch({"value": [b"a", b"b"], "headers": empty})
    [group] = topic_columns(batch, layout(headers_column=True), "t", now_ms=NOW)
    assert group.headers is None
    some = pa.array([[{"key": "h", "value": b"1"}, {"key": "n", "value": None}], None], HEADER_TYPE)
    batch = pa.record_batch({"value": [b"a", b"b"], "headers": some})
    [group] = topic_columns(batch, layout(headers_column=True), "t", now_ms=NOW)
    assert group.headers == [[("h", b"1"), ("n", None)], []]


def test_null_header_key_fails() -> None:
    bad = pa.array([[{"key": None, "value": b"1"}]], HEADER_TYPE)
    batch = pa.record_batch({"value": [b"a"], "headers": bad})
    with pytest.raises(SinkDataError, match="row 0 has a null header"):
        topic_columns(batch, layout(headers_column=True), "t", now_ms=NOW)


def test_partitions_pass_through_and_are_range_checked() -> None:
    batch = pa.record_batch(
        {"value": [b"a", b"b", b"c"], "partition": pa.array([0, None, 2], pa.int32())}
    )
    [group] = topic_columns(batch, layout(partition_column=True), "t", now_ms=NOW)
    assert group.partitions is not None and group.partitions.to_pylist() == [0, None, 2]
    check_partitions(group, 3)
    with pytest.raises(SinkDataError, match=r"row 2 \(topic 't'\) has partition 2.*2 partitions"):
        check_partitions(group, 2)
    neg = pa.record_batch({"value": [b"a"], "partition": pa.array([-1], pa.int32())})
    [group] = topic_columns(neg, layout(partition_column=True), "t", now_ms=NOW, row_base=4)
    with pytest.raises(SinkDataError, match=r"row 4 .* partition -1"):
        check_partitions(group, 3)


def test_partition_error_names_the_source_row_after_a_topic_split() -> None:
    batch = pa.record_batch(
        {
            "topic": ["a", "b", "b"],
            "value": [b"0", b"1", b"2"],
            "partition": pa.array([0, 0, 9], pa.int32()),
        }
    )
    groups = topic_columns(
        batch, layout(topic_column=True, partition_column=True), None, now_ms=NOW
    )
    b = next(g for g in groups if g.topic == "b")
    with pytest.raises(SinkDataError, match=r"row 2 \(topic 'b'\) has partition 9"):
        check_partitions(b, 1)


def test_all_null_partitions_mean_partitioner_decides() -> None:
    batch = pa.record_batch({"value": [b"a"], "partition": pa.array([None], pa.int32())})
    [group] = topic_columns(batch, layout(partition_column=True), "t", now_ms=NOW)
    assert group.partitions is None


def test_empty_batch() -> None:
    batch = pa.record_batch({"value": pa.array([], pa.binary())})
    assert topic_columns(batch, layout(), "t", now_ms=NOW) == []
