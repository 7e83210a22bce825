"""SinkOptions against hostile values: malformed URIs, huge numbers, huge paths, odd digits.

Every value either parses or gives the sink's option error naming the option, never a raw
ValueError/OSError/RecursionError, and no message grows with the value (a 100 KB value gives
a short message). Integers are read as Java reads them: Kafka's own ``kafka.*`` settings as
``Integer.parseInt``/``Long.parseLong`` of the value with Java's ``trim()`` (a sign, any Unicode
decimal digits, no ``_``); the sink's own options take a sign and ASCII digits only, within
Java's ``int``/``long`` range.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.options import SinkOptions

BASE = {"kafka.bootstrap.servers": "localhost:9092"}
#: No option error is longer than this, whatever the value.
MESSAGE_CAP = 1_000

HOSTILE = [
    "http://[::1",
    "s3a://[::1",
    "hdfs://nn:99999999/x",
    "9" * 5_000,
    "-" + "9" * 5_000,
    "/x" * 50_000,
    "x" * 100_000,
    "1_000",
    "+5",
    "\u0665",
    "\u00a07",
    "1e3",
    "0x10",
    "\x00",
    "s3a://k:Zq1/Xk2@b/p",
]
# Options read on their own; the exactly-once ones with deliveryGuarantee=exactly-once.
OPTIONS = [
    "topic",
    "commitLog",
    "checkpointLocation",
    "producerIdleTimeoutMs",
    "preflightTimeoutMs",
    "deliveryGuarantee",
    "logLevel",
    "metricsPushGateway",
    "metricsJob",
    "kafka.linger.ms",
    "kafka.batch.size",
    "kafka.delivery.timeout.ms",
    "kafka.buffer.memory",
    "kafka.acks",
    "kafka.compression.type",
    "kafka.enable.idempotence",
    "kafka.bootstrap.servers",
    "transactionalIdPrefix",
    "intentStore",
    "intentTopic",
    "idempotencyKey",
]
EXACTLY_ONCE_ONLY = {"transactionalIdPrefix", "intentStore", "intentTopic", "idempotencyKey"}

values = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(max_size=30),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.from_regex(r"[ \t]*[+-]?[0-9_\u0660-\u0669]{1,25}[ \t]*", fullmatch=True),
)


def _parse(key: str, value: str) -> SinkOptions:
    options = {**BASE, key: value}
    if key in EXACTLY_ONCE_ONLY:
        options["deliveryGuarantee"] = "exactly-once"
    if key == "metricsPushGateway":
        options["metricsJob"] = "j"
    if key == "metricsJob":
        options["metricsPushGateway"] = "http://gw:9091"
    opts = SinkOptions.from_options(options)
    opts.validate_producer_config()
    return opts


@settings(max_examples=400, deadline=None)
@given(key=st.sampled_from(OPTIONS), value=values)
def test_every_value_parses_or_gives_an_option_error_naming_the_option(
    key: str, value: str
) -> None:
    try:
        opts = _parse(key, value)
    except SinkOptionError as exc:
        text = str(exc)
        assert key in text, text[:300]
        assert len(text) < MESSAGE_CAP, text[:300]
    else:
        assert len(repr(opts)) < 2_000


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("key", ["commitLog", "checkpointLocation"])
def test_hostile_locations_are_option_errors_when_checked_too(
    key: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative location lands here, not in the checkout
    try:
        opts = _parse(key, value)
        opts.check_commit_dir(streaming=True)
    except SinkOptionError as exc:
        assert key in str(exc) and len(str(exc)) < MESSAGE_CAP
        assert "Zq1" not in str(exc) and "Xk2" not in str(exc)


def test_a_deep_local_commit_log_is_made_or_refused_without_recursion(tmp_path: Path) -> None:
    deep = str(tmp_path) + "/d" * 1_500  # under PATH_MAX, deeper than Python's recursion limit
    try:
        opts = SinkOptions.from_options({**BASE, "commitLog": deep})
        assert opts.check_commit_dir(streaming=False) == deep
        assert os.path.isdir(deep)
    finally:
        # Removed bottom-up here: shutil.rmtree (pytest's clean-up of old temporary
        # directories) recurses once per level and would fail on 1,500 of them later.
        path = deep
        while path != str(tmp_path):
            if os.path.isdir(path):
                os.rmdir(path)
            path = os.path.dirname(path)


# -- integers as Java reads them ------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("+5", 5), (" 7\t", 7), ("\u0665\u0660", 50), ("-0", 0), ("0000000000000000000000012", 12)],
)
def test_kafka_integers_are_read_as_java_reads_them(value: str, expected: int) -> None:
    from kafka_sink.producer.config import ProducerConfig

    config = ProducerConfig.from_mapping({"bootstrap.servers": "h:1", "linger.ms": value})
    assert config.linger_ms == expected


@pytest.mark.parametrize(
    "value", ["1_000", "\u00a07", "5\u00a0", "1.0", "", "+", "--1", "2147483648", "\u00b2"]
)
def test_kafka_integers_java_refuses_are_refused(value: str) -> None:
    # request.timeout.ms is an INT in Java: 2^31 is no int, whatever its range would be.
    with pytest.raises(SinkOptionError, match=r"option 'kafka\.request\.timeout\.ms'") as caught:
        _parse("kafka.request.timeout.ms", value)
    assert len(str(caught.value)) < MESSAGE_CAP


def test_kafka_long_settings_take_64_bit_values() -> None:
    opts = _parse("kafka.buffer.memory", str(2**40))
    assert opts.producer_config["buffer.memory"] == str(2**40)
    with pytest.raises(SinkOptionError, match=r"option 'kafka\.buffer\.memory'"):
        _parse("kafka.buffer.memory", str(2**63))


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("producerIdleTimeoutMs", "+5", 5),
        ("producerIdleTimeoutMs", str(2**63 - 1), 2**63 - 1),
        ("preflightTimeoutMs", "+1500", 1500),
        ("preflightTimeoutMs", str(2**31 - 1), 2**31 - 1),
    ],
)
def test_sink_integers_take_a_sign_as_java_does(key: str, value: str, expected: int) -> None:
    opts = _parse(key, value)
    got = (
        opts.producer_idle_timeout_ms
        if key == "producerIdleTimeoutMs"
        else opts.preflight_timeout_ms
    )
    assert got == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("producerIdleTimeoutMs", "1_000"),
        ("producerIdleTimeoutMs", "\u0665"),
        ("producerIdleTimeoutMs", str(2**63)),
        ("producerIdleTimeoutMs", "9" * 5_000),
        ("preflightTimeoutMs", "1_000"),
        ("preflightTimeoutMs", "\uff15"),
        ("preflightTimeoutMs", str(2**31)),
        ("preflightTimeoutMs", "9" * 5_000),
    ],
)
def test_sink_integers_refuse_underscores_other_digits_and_out_of_range(
    key: str, value: str
) -> None:
    with pytest.raises(SinkOptionError, match=rf"option '{key}'") as caught:
        _parse(key, value)
    assert len(str(caught.value)) < MESSAGE_CAP


def test_a_long_value_is_quoted_capped_with_its_length() -> None:
    with pytest.raises(SinkOptionError) as caught:
        _parse("deliveryGuarantee", "y" * 100_000)
    assert "(100000 characters)" in str(caught.value)


def test_secret_values_are_never_quoted() -> None:
    with pytest.raises(SinkOptionError) as caught:
        _parse("kafka.ssl.key.password", "Zq1" * 50_000)
    assert "Zq1" not in str(caught.value) and len(str(caught.value)) < MESSAGE_CAP


@pytest.mark.parametrize("key", ["x" * 100_000, "kafka." + "x" * 100_000])
def test_a_huge_unknown_key_is_named_capped(key: str) -> None:
    with pytest.raises(SinkOptionError, match="unknown option") as caught:
        SinkOptions.from_options({**BASE, key: "v"})
    assert len(str(caught.value)) < MESSAGE_CAP and "(100" in str(caught.value)


def _every_key() -> list[str]:
    from kafka_sink.formats import registry
    from kafka_sink.producer.config import ProducerConfig
    from kafka_sink.spark.option_names import SINK_OPTION_NAMES, SPARK_OPTION_NAMES

    return sorted(
        {
            *SINK_OPTION_NAMES,
            *SPARK_OPTION_NAMES,
            *("kafka." + k for k in ProducerConfig._KEYS),
            *(registry.PREFIX + k for k in registry._KEYS),
        }
        - {"schema.registry."}  # FORMAT_OPTION_NAMES names the prefix itself
    )


# The values a key's message once quoted whole, past the other hostile values.
_PLUGIN_PATHS = ["x" * 100_000, "m." * 50_000 + "C", "org.apache.kafka." + "x" * 100_000]


@pytest.mark.parametrize("key", _every_key())
def test_every_key_of_the_sink_producer_and_registry_gives_a_short_error_naming_it(
    key: str,
) -> None:
    from kafka_sink.errors import ConfigError
    from kafka_sink.formats.registry import SchemaRegistryConfig

    for value in [*HOSTILE, *_PLUGIN_PATHS]:
        try:
            if key.startswith("schema.registry."):
                given = {"schema.registry.url": "http://registry:8081", key: value}
                SchemaRegistryConfig.from_options(given)
            else:
                _parse(key, value)
        except ConfigError as exc:  # SinkOptionError is one too
            text = str(exc)
            assert key in text, (value[:40], text[:300])
            assert len(text) < MESSAGE_CAP, (value[:40], text[:300])
