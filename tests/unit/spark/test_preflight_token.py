"""The driver's preflight with OAUTHBEARER: a token is had first, through the process's login
for the write's settings, and a source that cannot give one is refused naming it (never its
secret) before any broker is asked; the login is released when the preflight ends."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from kafka_sink.admin.client import AdminClient, AdminConfig
from kafka_sink.clock import ManualClock
from kafka_sink.net.oauth.login import live_logins
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.driver import preflight
from tests.unit.spark.test_preflight import DESCRIBE, WRITE, Cluster, connect, ops

SECRET = "client-secret-value-9f3"


class Source:
    """A token source answering from a script; counts its fetches."""

    def __init__(self, error: TokenSourceError | None = None) -> None:
        self.error = error
        self.fetches = 0

    def fetch(self) -> OAuthBearerToken:
        self.fetches += 1
        if self.error is not None:
            raise self.error
        return OAuthBearerToken("header.payload.signature", int(time.time() * 1000) + 3_600_000)

    def describe(self) -> str:
        return "token endpoint https://idp.example/token (client_credentials grant)"


def config(source: Source) -> dict[str, Any]:
    return {
        "bootstrap.servers": "b0:9092,b1:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.provider": source,
    }


@pytest.fixture(autouse=True)
def _fresh_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "_PASSED", set())


def test_a_source_that_refuses_fails_before_any_broker_is_asked() -> None:
    refused = TokenSourceError(
        "token endpoint https://idp.example/token (client_credentials grant): refused "
        "(401 invalid_client)",
        may_clear=False,
    )
    source = Source(refused)

    def no_cluster(config: Mapping[str, object]) -> tuple[AdminClient, AdminConfig]:
        raise AssertionError("the brokers were asked before a token was had")

    with pytest.raises(SinkOptionError) as info:
        preflight.check_write(
            config(source),  # type: ignore[arg-type]
            topic="events",
            timeout_ms=15_000,
            idempotent=False,
            streaming=False,
            client_factory=no_cluster,
        )
    message = str(info.value)
    assert message.startswith(
        "kafka.sasl.mechanism=OAUTHBEARER: the driver got no token: token endpoint "
        "https://idp.example/token (client_credentials grant): refused (401 invalid_client). Fix"
    )
    assert "401 invalid_client" in message and SECRET not in message
    assert source.fetches == 1  # a refusal is not retried
    assert live_logins() == []


def test_an_error_that_does_not_name_its_source_gets_the_source_named() -> None:
    source = Source(TokenSourceError("the answer held no access_token", may_clear=False))
    with pytest.raises(SinkOptionError) as info:
        preflight.check_write(
            config(source),  # type: ignore[arg-type]
            topic=None,
            timeout_ms=15_000,
            idempotent=False,
            streaming=False,
            client_factory=connect(Cluster(clock=ManualClock())),
        )
    assert str(info.value).startswith(
        "kafka.sasl.mechanism=OAUTHBEARER: the driver got no token from token endpoint "
        "https://idp.example/token (client_credentials grant): the answer held no access_token."
    )


def test_a_token_had_lets_the_checks_run_and_the_login_is_released() -> None:
    source = Source()
    cluster = Cluster(clock=ManualClock(), topics={"events": ops(WRITE, DESCRIBE)})
    preflight.check_write(
        config(source),  # type: ignore[arg-type]
        topic="events",
        timeout_ms=15_000,
        idempotent=False,
        streaming=False,
        client_factory=connect(cluster),
    )
    assert source.fetches == 1
    assert cluster.sent  # the brokers were asked once the token was had
    assert live_logins() == []
