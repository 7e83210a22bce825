"""What a topic refuses, found before sending: rows over its max.message.bytes as they would be
sent (compressed), rows without a key for a compacted topic, rows over max.request.size; and the
rules' cache: read once, refreshed when stale, a failure never kept past its retry window."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

from kafka_sink.errors import KafkaTimeoutError
from kafka_sink.producer.config import ProducerConfig
from kafka_sink.spark.executor import topic_rules as rules_module
from kafka_sink.spark.executor.columns import TopicColumns
from kafka_sink.spark.executor.topic_rules import TopicRules, refused_rows, topic_rules


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    rules_module._CACHE.clear()
    yield
    rules_module._CACHE.clear()


def _group(values: list[bytes], keys: list[bytes | None] | None = None) -> TopicColumns:
    return TopicColumns(
        "t",
        pa.array(values, pa.binary()),
        None if keys is None else pa.array(keys, pa.binary()),
        None,
        None,
        None,
        row_base=100,
    )


def _config(**settings: str) -> ProducerConfig:
    return ProducerConfig.from_mapping({"bootstrap.servers": "h:1", **settings})


def test_rows_over_the_topic_s_limit_as_sent_are_refused_and_compressible_ones_are_not() -> None:
    compressible = b"a" * 5000
    random = os.urandom(5000)
    group = _group([b"small", compressible, random, b"x" * 100])
    rules = TopicRules("t", 2000, compacted=False)
    plain = refused_rows(group, rules, _config())
    assert [(r.row, r.code) for r in plain] == [
        (101, "record_too_large"),
        (102, "record_too_large"),
    ]
    assert "topic 't''s max.message.bytes (2000)" in plain[0].reason
    compressed = refused_rows(group, rules, _config(**{"compression.type": "lz4"}))
    assert [r.row for r in compressed] == [102]


def test_without_rules_only_the_client_s_own_limits_refuse() -> None:
    group = _group([b"small", b"y" * 3000])
    assert refused_rows(group, None, _config()) == []
    [too_large] = refused_rows(group, None, _config(**{"max.request.size": "2000"}))
    assert too_large.row == 101 and "option kafka.max.request.size (2000)" in too_large.reason


def test_a_compacted_topic_refuses_rows_without_a_key() -> None:
    group = _group([b"a", b"b", b"c"], keys=[b"k", None, b"k"])
    [refused] = refused_rows(group, TopicRules("t", None, compacted=True), _config())
    assert (refused.row, refused.code, refused.error_class) == (
        101,
        "invalid_record",
        "kafka_sink.errors.InvalidRecordError",
    )
    keyless = refused_rows(_group([b"a", b"b"]), TopicRules("t", None, True), _config())
    assert [r.row for r in keyless] == [100, 101]


def test_rules_are_read_once_refreshed_when_stale_and_a_failure_is_not_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    monkeypatch.setattr(rules_module.time, "monotonic", lambda: now[0])
    answers: list[TopicRules | Exception] = [
        KafkaTimeoutError("no answer"),
        TopicRules("t", 100, False),
        TopicRules("t", 200, False),
    ]
    reads: list[str] = []

    def fetch(items: tuple[tuple[str, str], ...], topic: str) -> TopicRules:
        reads.append(topic)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    items = (("bootstrap.servers", "h:1"),)
    assert topic_rules(items, "t", fetch=fetch) is None
    assert topic_rules(items, "t", fetch=fetch) is None  # within the retry window
    now[0] += rules_module.RULES_RETRY_AFTER_MS / 1000
    first = topic_rules(items, "t", fetch=fetch)
    assert first is not None and first.max_message_bytes == 100
    now[0] += rules_module.RULES_MAX_AGE_MS / 1000 - 1
    assert topic_rules(items, "t", fetch=fetch) is first
    now[0] += 1
    second = topic_rules(items, "t", fetch=fetch)
    assert second is not None and second.max_message_bytes == 200
    assert reads == ["t", "t", "t"]


def test_rows_outside_the_topic_s_time_bounds_are_refused_before_sending() -> None:
    now = int(time.time() * 1000)
    hour = 3_600_000
    group = TopicColumns(
        "t",
        pa.array([b"a", b"b", b"c", b"d"], pa.binary()),
        None,
        None,
        np.array([now, now + 2 * hour, now - 3 * hour, now + hour // 2], dtype=np.int64),
        None,
        row_base=0,
    )
    rules = TopicRules("t", None, False, timestamp_after_max_ms=hour, timestamp_before_max_ms=hour)
    refused = refused_rows(group, rules, _config())
    assert [(r.row, r.code) for r in refused] == [
        (1, "invalid_timestamp"),
        (2, "invalid_timestamp"),
    ]
    assert "message.timestamp.after.max.ms=3600000" in refused[0].reason
    # LogAppendTime topics (no bounds in the rules) take any timestamp.
    assert refused_rows(group, TopicRules("t", None, False), _config()) == []


def test_a_topic_s_settings_are_read_into_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {
        "max.message.bytes": "4000",
        "cleanup.policy": "compact,delete",
        "message.timestamp.type": "CreateTime",
        "message.timestamp.after.max.ms": "3600000",
        "message.timestamp.before.max.ms": "9223372036854775807",
    }

    class _Admin:
        def brokers(self, deadline: object) -> list[int]:
            return [1]

        def topic_configs(self, node: int, topic: str, keys: object, deadline: object) -> dict:
            return answers

        def close(self) -> None:
            pass

    from kafka_sink.admin.client import AdminClient

    monkeypatch.setattr(AdminClient, "from_config", classmethod(lambda cls, c: (_Admin(), None)))
    rules = rules_module._read((("bootstrap.servers", "h:1"),), "t")
    assert rules == TopicRules("t", 4000, True, 3_600_000, None)
    answers["message.timestamp.type"] = "LogAppendTime"
    assert rules_module._read((), "t") == TopicRules("t", 4000, True, None, None)
