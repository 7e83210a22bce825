"""onRecordError, deadLetterTopic, deadLetterMaxRecords and deadLetterMaxRatio: parsed, checked
together, and refused naming the option and the fix."""

from __future__ import annotations

import pickle

import pytest

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.options import SinkOptions

BASE = {"kafka.bootstrap.servers": "localhost:9092", "topic": "orders"}
DEAD_LETTER = {**BASE, "onRecordError": "deadLetter", "deadLetterTopic": "orders-dlq"}


def parse(options: dict[str, str]) -> SinkOptions:
    # Spark hands the options over with lower-cased keys.
    return SinkOptions.from_options({k.lower(): v for k, v in options.items()})


def test_the_default_is_fail_with_no_dead_letter_topic_and_no_bounds() -> None:
    opts = parse(BASE)
    assert opts.on_record_error == "fail"
    assert opts.dead_letter_topic is None
    assert (opts.dead_letter_max_records, opts.dead_letter_max_ratio) == (None, None)


@pytest.mark.parametrize(
    ("value", "policy"),
    [
        ("fail", "fail"),
        ("FAIL", "fail"),
        ("skip", "skip"),
        (" Skip ", "skip"),
        ("deadLetter", "deadLetter"),
        ("deadletter", "deadLetter"),
        ("DEADLETTER", "deadLetter"),
    ],
)
def test_on_record_error_takes_any_case_and_keeps_the_canonical_spelling(
    value: str, policy: str
) -> None:
    extra = {"deadLetterTopic": "orders-dlq"} if policy == "deadLetter" else {}
    assert parse({**BASE, "onRecordError": value, **extra}).on_record_error == policy


@pytest.mark.parametrize("value", ["", "ignore", "dead-letter", "dead_letter", "dlq", "skip,fail"])
def test_other_policies_are_refused_listing_the_three(value: str) -> None:
    with pytest.raises(SinkOptionError) as info:
        parse({**BASE, "onRecordError": value})
    assert "option 'onRecordError' must be one of fail, deadLetter, skip" in str(info.value)


def test_dead_letter_is_parsed_with_its_topic_and_bounds_and_pickles() -> None:
    opts = parse({**DEAD_LETTER, "deadLetterMaxRecords": " 100 ", "deadLetterMaxRatio": "0.05"})
    assert opts.on_record_error == "deadLetter"
    assert opts.dead_letter_topic == "orders-dlq"
    assert opts.dead_letter_max_records == 100
    assert opts.dead_letter_max_ratio == 0.05
    assert pickle.loads(pickle.dumps(opts)) == opts
    shown = repr(opts)
    assert "onRecordError='deadLetter'" in shown and "deadLetterTopic='orders-dlq'" in shown
    assert "deadLetterMaxRecords=100" in shown and "deadLetterMaxRatio=0.05" in shown


@pytest.mark.parametrize("value", ["", "a b", "orders/dlq", "..", "x" * 250])
def test_a_dead_letter_topic_that_is_no_topic_name_is_refused(value: str) -> None:
    with pytest.raises(SinkOptionError, match=r"option 'deadLetterTopic' must be a Kafka topic"):
        parse({**BASE, "onRecordError": "deadLetter", "deadLetterTopic": value})


@pytest.mark.parametrize(
    ("value", "parsed"), [("0", 0), ("+7", 7), ("9223372036854775807", 2**63 - 1)]
)
def test_max_records_is_a_whole_number_from_zero(value: str, parsed: int) -> None:
    opts = parse({**BASE, "onRecordError": "skip", "deadLetterMaxRecords": value})
    assert opts.dead_letter_max_records == parsed


@pytest.mark.parametrize("value", ["-1", "1.5", "ten", "", "1_000", "١٢", "9223372036854775808"])
def test_a_bad_max_records_is_refused_with_the_fix(value: str) -> None:
    with pytest.raises(SinkOptionError) as info:
        parse({**BASE, "onRecordError": "skip", "deadLetterMaxRecords": value})
    message = str(info.value)
    assert "option 'deadLetterMaxRecords' must be a whole number from 0 up" in message
    assert "leave the option out for no bound" in message


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("0", 0.0), ("1", 1.0), ("0.25", 0.25), (".5", 0.5), ("1e-3", 0.001), (" 1.0 ", 1.0)],
)
def test_max_ratio_is_a_number_from_zero_to_one(value: str, parsed: float) -> None:
    opts = parse({**BASE, "onRecordError": "skip", "deadLetterMaxRatio": value})
    assert opts.dead_letter_max_ratio == parsed


@pytest.mark.parametrize(
    "value",
    ["1.01", "-0.1", "5%", "nan", "inf", "", "0_5", "half", "2e0", "0x1", "1e400", "1" * 5000],
)
def test_a_bad_max_ratio_is_refused_with_the_fix(value: str) -> None:
    with pytest.raises(SinkOptionError) as info:
        parse({**BASE, "onRecordError": "skip", "deadLetterMaxRatio": value})
    message = str(info.value)
    assert "option 'deadLetterMaxRatio' must be a number from 0 to 1" in message
    assert "0.01 for 1%" in message
    assert len(message) < 400  # the value is quoted capped


def test_dead_letter_without_its_topic_is_refused_naming_both() -> None:
    with pytest.raises(SinkOptionError) as info:
        parse({**BASE, "onRecordError": "deadLetter"})
    message = str(info.value)
    assert "option 'onRecordError' is deadLetter, which needs option 'deadLetterTopic'" in message
    assert ".option('deadLetterTopic', 'orders-dlq')" in message


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("deadLetterTopic", "orders-dlq"),
        ("deadLetterMaxRecords", "10"),
        ("deadLetterMaxRatio", "0.1"),
    ],
)
@pytest.mark.parametrize("policy", [None, "fail"])
def test_a_dead_letter_setting_with_fail_is_refused_not_ignored(
    name: str, value: str, policy: str | None
) -> None:
    given = {**BASE, name: value}
    if policy is not None:
        given["onRecordError"] = policy
    with pytest.raises(SinkOptionError) as info:
        parse(given)
    message = str(info.value)
    assert f"option '{name}' is only used with onRecordError=deadLetter or skip" in message
    assert f"remove '{name}'" in message


def test_the_bounds_apply_to_skip_but_a_dead_letter_topic_is_refused() -> None:
    opts = parse(
        {**BASE, "onRecordError": "skip", "deadLetterMaxRecords": "5", "deadLetterMaxRatio": "1"}
    )
    assert (opts.on_record_error, opts.dead_letter_max_records) == ("skip", 5)
    assert opts.dead_letter_max_ratio == 1.0
    with pytest.raises(SinkOptionError) as info:
        parse({**BASE, "onRecordError": "skip", "deadLetterTopic": "orders-dlq"})
    message = str(info.value)
    assert "option 'deadLetterTopic' is only used with onRecordError=deadLetter" in message
    assert "onRecordError is skip" in message


def test_the_dead_letter_topic_may_not_be_the_topic_options() -> None:
    with pytest.raises(SinkOptionError) as info:
        parse({**DEAD_LETTER, "deadLetterTopic": " orders "})
    message = str(info.value)
    assert "option 'deadLetterTopic' is 'orders', the topic of option 'topic'" in message
    # A write whose rows name their topics (no 'topic' option) may take any dead-letter topic.
    rows_name_topics = {k: v for k, v in DEAD_LETTER.items() if k != "topic"}
    assert parse(rows_name_topics).dead_letter_topic == "orders-dlq"


def test_exactly_once_refuses_the_intent_topic_as_the_dead_letter_topic() -> None:
    eos = {**BASE, "deliveryGuarantee": "exactly-once", "onRecordError": "deadLetter"}
    with pytest.raises(SinkOptionError) as info:
        parse({**eos, "deadLetterTopic": "pykafka-commit-intents"})
    message = str(info.value)
    assert "the intent topic of exactly-once (option 'intentTopic')" in message
    with pytest.raises(SinkOptionError, match="option 'intentTopic'"):
        parse({**eos, "intentTopic": "intents", "deadLetterTopic": "intents"})
    # Another intent topic, or intents kept in the checkpoint: the name is free.
    assert parse({**eos, "intentTopic": "intents", "deadLetterTopic": "pykafka-commit-intents"})
    checkpoint = {**eos, "intentStore": "checkpoint", "deadLetterTopic": "pykafka-commit-intents"}
    assert parse(checkpoint).dead_letter_topic == "pykafka-commit-intents"
    # At-least-once keeps no intents.
    assert parse({**DEAD_LETTER, "deadLetterTopic": "pykafka-commit-intents"})
