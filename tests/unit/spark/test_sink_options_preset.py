"""The sink's ``preset`` option: parsed on the driver, applied to the ``kafka.*`` options the
user left out, and its limits refused naming the option as the user wrote it."""

from __future__ import annotations

import pickle

import pytest

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.options import SinkOptions

EVENT_HUBS = {
    "kafka.bootstrap.servers": "ns1.servicebus.windows.net",
    "kafka.sasl.password": "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKey=abc123==",
    "topic": "t",
}


def test_preset_fills_in_the_producer_config_and_is_kept() -> None:
    options = SinkOptions.from_options({**EVENT_HUBS, "preset": " Event-Hubs"})
    config = options.producer_config
    assert options.preset == "event-hubs"
    assert config["bootstrap.servers"] == "ns1.servicebus.windows.net:9093"
    assert (config["security.protocol"], config["sasl.mechanism"]) == ("SASL_SSL", "PLAIN")
    assert config["sasl.username"] == "$ConnectionString"
    assert config["max.request.size"] == "1000000"
    assert config["connections.max.idle.ms"] == "180000"
    options.validate_producer_config()
    again = pickle.loads(pickle.dumps(options))
    assert again == options
    assert "abc123" not in repr(options) and "preset='event-hubs'" in repr(options)


def test_preset_refuses_a_value_beyond_the_limit_naming_the_option() -> None:
    with pytest.raises(SinkOptionError) as refused:
        SinkOptions.from_options(
            {**EVENT_HUBS, "preset": "event-hubs", "kafka.max.request.size": "2097152"}
        )
    message = str(refused.value)
    assert message.startswith("'kafka.max.request.size' is 2097152, outside what Azure Event Hubs")
    assert "at most 1046528" in message and "abc123" not in message


def test_an_unknown_preset_is_refused_with_the_names() -> None:
    with pytest.raises(SinkOptionError, match=r"option 'preset' 'msk' is not a preset; known"):
        SinkOptions.from_options({**EVENT_HUBS, "preset": "msk"})


def test_without_preset_nothing_is_filled_in() -> None:
    options = SinkOptions.from_options({"kafka.bootstrap.servers": "b:9092", "topic": "t"})
    assert options.preset is None
    assert "security.protocol" not in options.producer_config


def test_preset_is_a_known_option_name() -> None:
    with pytest.raises(SinkOptionError, match=r"did you mean 'preset'"):
        SinkOptions.from_options({**EVENT_HUBS, "presets": "event-hubs"})
