"""deliveryGuarantee, transactionalIdPrefix and the exactly-once producer settings."""

from __future__ import annotations

import pickle

import pytest

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.driver.eos.timeout import resolve_transaction_timeout_ms
from kafka_sink.spark.options import SinkOptions

BASE = {"kafka.bootstrap.servers": "localhost:9092"}


def test_at_least_once_is_the_default_and_changes_nothing() -> None:
    opts = SinkOptions.from_options(BASE)
    assert opts.delivery_guarantee == "at-least-once"
    assert not opts.exactly_once
    assert "acks" not in opts.producer_config


@pytest.mark.parametrize("value", ["exactly-once", "EXACTLY-ONCE", " Exactly-Once "])
def test_exactly_once_is_case_insensitive_and_forces_acks_all_and_idempotence(value: str) -> None:
    opts = SinkOptions.from_options({**BASE, "deliveryGuarantee": value})
    assert opts.exactly_once
    assert opts.producer_config["acks"] == "all"
    assert opts.producer_config["enable.idempotence"] == "true"
    assert pickle.loads(pickle.dumps(opts)) == opts


@pytest.mark.parametrize("value", ["exactly_once", "once", "", "at-most-once"])
def test_other_guarantees_are_refused_listing_the_valid_ones(value: str) -> None:
    with pytest.raises(
        SinkOptionError, match=r"'deliveryGuarantee' must be one of at-least-once, exactly-once"
    ):
        SinkOptions.from_options({**BASE, "deliveryguarantee": value})


@pytest.mark.parametrize("acks", ["1", "0"])
def test_exactly_once_refuses_weaker_acks(acks: str) -> None:
    with pytest.raises(SinkOptionError, match=r"'kafka.acks' is '.*'.*acks=all"):
        SinkOptions.from_options({**BASE, "deliveryGuarantee": "exactly-once", "kafka.acks": acks})


@pytest.mark.parametrize("acks", ["all", "-1", "ALL"])
def test_exactly_once_accepts_acks_all(acks: str) -> None:
    opts = SinkOptions.from_options(
        {**BASE, "deliveryGuarantee": "exactly-once", "kafka.acks": acks}
    )
    assert opts.producer_config["acks"] == "all"


def test_exactly_once_refuses_idempotence_off() -> None:
    with pytest.raises(SinkOptionError, match=r"'kafka.enable.idempotence'.*idempotent"):
        SinkOptions.from_options(
            {**BASE, "deliveryGuarantee": "exactly-once", "kafka.enable.idempotence": "false"}
        )


def test_transactional_id_is_refused_pointing_to_the_two_options() -> None:
    with pytest.raises(
        SinkOptionError, match=r"transactional.id.*deliveryGuarantee.*transactionalIdPrefix"
    ):
        SinkOptions.from_options(
            {**BASE, "deliveryGuarantee": "exactly-once", "kafka.transactional.id": "x"}
        )


def test_prefix_is_kept_and_checked() -> None:
    opts = SinkOptions.from_options(
        {**BASE, "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": "orders-etl"}
    )
    assert opts.transactional_id_prefix == "orders-etl"
    with pytest.raises(SinkOptionError, match="'transactionalIdPrefix' must be"):
        SinkOptions.from_options(
            {**BASE, "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": "a b"}
        )


def test_prefix_without_exactly_once_is_refused() -> None:
    with pytest.raises(SinkOptionError, match="only used with deliveryGuarantee=exactly-once"):
        SinkOptions.from_options({**BASE, "transactionalIdPrefix": "orders"})


def test_timeout_defaults_to_the_brokers_maximum() -> None:
    assert resolve_transaction_timeout_ms(BASE, lambda c: 600_000) == 600_000


def test_timeout_defaults_to_900000_when_the_maximum_is_unknown() -> None:
    assert resolve_transaction_timeout_ms(BASE, lambda c: None) == 900_000


def test_timeout_at_or_under_the_maximum_is_kept() -> None:
    config = {**BASE, "transaction.timeout.ms": "120000"}
    assert resolve_transaction_timeout_ms(config, lambda c: 900_000) == 120_000
    assert resolve_transaction_timeout_ms(config, lambda c: None) == 120_000


def test_timeout_above_the_maximum_fails_naming_both() -> None:
    config = {**BASE, "transaction.timeout.ms": "3600000"}
    with pytest.raises(SinkOptionError, match=r"3600000 ms, above .*\(900000 ms\).*at most 900000"):
        resolve_transaction_timeout_ms(config, lambda c: 900_000)


def test_the_intent_store_defaults_to_the_kafka_topic() -> None:
    opts = SinkOptions.from_options({**BASE, "deliveryGuarantee": "exactly-once"})
    assert (opts.intent_store, opts.intent_topic) == ("kafka", "pykafka-commit-intents")
    assert "intentStore='kafka'" in repr(opts)


def test_intent_store_and_topic_options() -> None:
    opts = SinkOptions.from_options(
        {**BASE, "deliveryGuarantee": "exactly-once", "intentStore": " Checkpoint "}
    )
    assert opts.intent_store == "checkpoint"
    opts = SinkOptions.from_options(
        {**BASE, "deliveryGuarantee": "exactly-once", "intentTopic": "etl.intents"}
    )
    assert (opts.intent_store, opts.intent_topic) == ("kafka", "etl.intents")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"intentStore": "zookeeper"}, r"'intentStore' must be one of kafka, checkpoint"),
        ({"intentTopic": "bad topic"}, r"'intentTopic' must be a Kafka topic name"),
        ({"intentTopic": "x" * 250}, r"'intentTopic' must be a Kafka topic name"),
        (
            {"intentStore": "checkpoint", "intentTopic": "t"},
            r"'intentTopic' names the topic of intentStore=kafka",
        ),
    ],
)
def test_bad_intent_store_options_are_refused(extra: dict[str, str], message: str) -> None:
    with pytest.raises(SinkOptionError, match=message):
        SinkOptions.from_options({**BASE, "deliveryGuarantee": "exactly-once", **extra})


@pytest.mark.parametrize("key", ["intentStore", "intentTopic"])
def test_intent_options_need_exactly_once(key: str) -> None:
    with pytest.raises(SinkOptionError, match=f"'{key}' is only used with deliveryGuarantee"):
        SinkOptions.from_options({**BASE, key: "kafka" if key == "intentStore" else "t"})
