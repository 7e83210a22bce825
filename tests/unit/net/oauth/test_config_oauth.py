"""OAUTHBEARER in the client settings: accepted with its keys, which are refused otherwise."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_sink.admin.client import AdminConfig
from kafka_sink.errors import ConfigError
from kafka_sink.net.config import ClientConfig
from kafka_sink.net.oauth.login import OAuthBearerLogin, live_logins, oauth_keys, release_login
from kafka_sink.net.oauth.token import OAuthBearerToken
from kafka_sink.producer.config import ProducerConfig


class Source:
    def fetch(self) -> OAuthBearerToken:
        return OAuthBearerToken("secret-token-value", expires_at_ms=2**42)

    def describe(self) -> str:
        return "test source"


BASE = {"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_PLAINTEXT"}


@pytest.fixture(autouse=True)
def _no_leaked_logins() -> Iterator[None]:
    yield
    assert live_logins() == []


@pytest.mark.parametrize("config_class", [ClientConfig, ProducerConfig, AdminConfig])
def test_oauthbearer_with_a_token_source_object_builds_a_login(
    config_class: type[ClientConfig],
) -> None:
    source = Source()
    config = config_class.from_mapping(
        {
            **BASE,
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.provider": source,
            "sasl.login.refresh.buffer.seconds": "30",
        }
    )
    assert "oauthbearer_keys_set=['sasl.login.refresh.buffer.seconds'" in repr(config)
    assert "Source" not in repr(config)
    network = config.network_config("client-1")
    assert "Source" not in repr(network)
    sasl = network.sasl_config()
    assert sasl is not None and sasl.mechanism == "OAUTHBEARER"
    assert isinstance(sasl.oauth, OAuthBearerLogin)
    try:
        assert sasl.oauth.timings.buffer_s == 30
        assert sasl.oauth.token().value == "secret-token-value"
        assert "secret-token-value" not in repr(sasl.oauth)
    finally:
        release_login(sasl.oauth)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
@pytest.mark.parametrize(
    "key", ["sasl.login.refresh.window.factor", "sasl.oauthbearer.token.provider"]
)
def test_oauthbearer_keys_are_refused_with_another_mechanism(mechanism: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"^{key}: set, but sasl.mechanism={mechanism}"):
        ClientConfig.from_mapping(
            {
                **BASE,
                "sasl.mechanism": mechanism,
                "sasl.username": "u",
                "sasl.password": "p",
                key: "0.9",
            }
        )


def test_oauthbearer_keys_are_refused_without_sasl() -> None:
    with pytest.raises(ConfigError, match="uses no SASL"):
        ClientConfig.from_mapping(
            {"bootstrap.servers": "h:1", "sasl.login.refresh.buffer.seconds": "10"}
        )


def test_every_oauthbearer_key_is_accepted_only_with_oauthbearer() -> None:
    for key in sorted(oauth_keys()):
        with pytest.raises(ConfigError, match=f"^{key}: set"):
            ClientConfig.from_mapping(
                {**BASE, "sasl.mechanism": "PLAIN", "sasl.username": "u", key: "1"}
                | {"sasl.password": "p"}
            )


@pytest.mark.parametrize("key", ["sasl.username", "sasl.password"])
def test_a_password_with_oauthbearer_is_refused(key: str) -> None:
    with pytest.raises(ConfigError, match=f"^{key}: set, but sasl.mechanism=OAUTHBEARER"):
        ClientConfig.from_mapping(
            {
                **BASE,
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.token.provider": Source(),
                key: "x",
            }
        )


def test_a_bad_refresh_setting_is_refused_at_construction() -> None:
    with pytest.raises(ConfigError, match=r"^sasl.login.refresh.window.jitter: 0.5 is out of"):
        ProducerConfig.from_mapping(
            {
                **BASE,
                "sasl.mechanism": "oauthbearer",
                "sasl.oauthbearer.token.provider": Source(),
                "sasl.login.refresh.window.jitter": "0.5",
            }
        )
