"""Subject name strategies as Confluent's serializers name subjects."""

from __future__ import annotations

import pytest

from kafka_sink.errors import ConfigError
from kafka_sink.formats.subjects import parse_strategy, subject_name


@pytest.mark.parametrize(
    ("strategy", "side", "expected"),
    [
        ("topic", "value", "orders-value"),
        ("topic", "key", "orders-key"),
        ("record", "value", "com.acme.Order"),
        ("topic_record", "value", "orders-com.acme.Order"),
        ("topic_record", "key", "orders-com.acme.Order"),
    ],
)
def test_subject_names(strategy: str, side: str, expected: str) -> None:
    parsed = parse_strategy(strategy, side)  # type: ignore[arg-type]
    assert subject_name(parsed, "orders", side, "com.acme.Order") == expected  # type: ignore[arg-type]


def test_default_and_java_class_names() -> None:
    assert parse_strategy(None, "value") == "topic"
    assert parse_strategy("TOPIC_RECORD", "key") == "topic_record"
    java = "io.confluent.kafka.serializers.subject.RecordNameStrategy"
    assert parse_strategy(java, "value") == "record"


def test_unknown_strategy_names_the_option_and_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"key\.subject\.name\.strategy: unknown .*topic_record"):
        parse_strategy("by_topic", "key")


def test_record_strategies_need_a_record_name() -> None:
    with pytest.raises(ConfigError, match=r"value\.subject\.name\.strategy=record needs"):
        subject_name("record", "orders", "value", None)
    assert subject_name("topic", "orders", "value", None) == "orders-value"
