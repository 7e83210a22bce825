"""A misspelled option is named, with the closest valid one, before anything it hides."""

from __future__ import annotations

import pytest

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.options import SinkOptions

BASE = {"kafka.bootstrap.servers": "localhost:9092"}


def _message(options: dict[str, str]) -> str:
    with pytest.raises(SinkOptionError) as caught:
        SinkOptions.from_options(options)
    return str(caught.value)


def test_a_misspelled_required_option_is_named_not_reported_missing() -> None:
    # Spark hands the options over lower-cased, as here.
    message = _message({"kafka.bootstrap.server": "h:9092", "topic": "t"})
    assert message == (
        "unknown option 'kafka.bootstrap.server' for format('pykafka'): did you mean "
        "'kafka.bootstrap.servers'? Fix: .option('kafka.bootstrap.servers', ...)"
    )


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("acks", "kafka.acks"),
        ("linger.ms", "kafka.linger.ms"),
        ("compression.type", "kafka.compression.type"),
        ("lingr.ms", "kafka.linger.ms"),
        ("kafka.lingerms", "kafka.linger.ms"),
        ("kafka.compresion.type", "kafka.compression.type"),
        ("kafka.topic", "topic"),
        ("comitlog", "commitLog"),
        ("deliveryguarantees", "deliveryGuarantee"),
        ("transactionidprefix", "transactionalIdPrefix"),
        ("checkpointlocaton", "checkpointLocation"),
    ],
)
def test_the_closest_valid_name_is_suggested_as_documented(given: str, meant: str) -> None:
    message = _message({**BASE, given: "x"})
    assert message.startswith(
        f"unknown option '{given}' for format('pykafka'): did you mean '{meant}'?"
    )


def test_an_unknown_producer_key_far_from_any_is_named_as_not_a_producer_setting() -> None:
    message = _message({**BASE, "kafka.frobnicate": "x"})
    assert "unknown option 'kafka.frobnicate'" in message
    assert "'frobnicate' is not a producer setting" in message


def test_an_unknown_name_far_from_any_lists_the_known_ones_in_their_spelling() -> None:
    message = _message({**BASE, "foo": "x"})
    assert "unknown option 'foo'" in message
    assert "did you mean" not in message
    for name in ("commitLog", "deliveryGuarantee", "kafka.<producer setting>", "queryName"):
        assert name in message


def test_messages_are_one_line_and_never_quote_the_value() -> None:
    for options in (
        {"kafka.bootstrap.server": "h:9092", "kafka.sasl.pasword": "s3cret"},
        {**BASE, "sasl.password": "s3cret"},
        {**BASE, "kafka.xyzzy": "s3cret"},
    ):
        message = _message(options)
        assert "\n" not in message
        assert "s3cret" not in message


@pytest.mark.parametrize(
    "key",
    [
        "path",
        "checkpointlocation",
        "queryname",
        "includeheaders",
        # JVM-only tuning, accepted with no effect
        "kafka.metrics.num.samples",
        "kafka.client.dns.lookup",
        "kafka.partitioner.adaptive.partitioning.enable",
    ],
)
def test_what_spark_passes_and_jvm_only_keys_are_still_accepted(key: str) -> None:
    values = {"kafka.client.dns.lookup": "use_all_dns_ips", "path": "/p", "queryname": "q"}
    SinkOptions.from_options({**BASE, key: values.get(key, "true" if "enable" in key else "1")})
