"""OAUTHBEARER's client first message, its extensions, and the exchange on a connection."""

from __future__ import annotations

import pytest

from kafka_sink.errors import ConfigError, SaslAuthenticationError, SaslAuthenticationFailedError
from kafka_sink.net.connection import BrokerConnection, ConnectionState
from kafka_sink.net.oauth.mechanism import OAuthBearerMechanism, client_first_message
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError
from kafka_sink.net.sasl import SUPPORTED_MECHANISMS, SaslConfig, create_mechanism
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from tests.unit.net.broker_script import ScriptedBroker, api_versions_response, response_frame

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"


class Holder:
    """A login that hands out one token, or fails as a source would."""

    def __init__(
        self, token: OAuthBearerToken | None = None, error: TokenSourceError | None = None
    ) -> None:
        self._token = token
        self._error = error
        self.calls = 0

    def token(self) -> OAuthBearerToken:
        self.calls += 1
        if self._error is not None:
            raise self._error
        assert self._token is not None
        return self._token

    def describe(self) -> str:
        return "https://idp.example/oauth2/token"


def test_the_first_message_is_rfc_7628s_with_kafkas_layout() -> None:
    assert client_first_message(TOKEN) == f"n,,\x01auth=Bearer {TOKEN}\x01\x01".encode()
    message = client_first_message(
        TOKEN, {"logicalCluster": "lkc-abc123", "identityPoolId": "pool-Xy1"}
    )
    assert (
        message
        == (
            f"n,,\x01auth=Bearer {TOKEN}\x01logicalCluster=lkc-abc123\x01"
            "identityPoolId=pool-Xy1\x01\x01"
        ).encode()
    )


@pytest.mark.parametrize(
    ("extensions", "words"),
    [
        ({"auth": "x"}, "'auth' is reserved"),
        ({"logical_cluster": "x"}, "extension name 'logical_cluster'"),
        ({"cluster1": "x"}, "extension name 'cluster1'"),
        ({"": "x"}, "extension name ''"),
        ({"cluster": ""}, "the value of extension 'cluster'"),
        ({"cluster": "a\x01b"}, "the value of extension 'cluster'"),
        ({"cluster": "caf\u00e9"}, "the value of extension 'cluster'"),
    ],
)
def test_extensions_kafka_would_refuse_are_refused_naming_the_key(
    extensions: dict[str, str], words: str
) -> None:
    with pytest.raises(ConfigError, match=words) as info:
        client_first_message(TOKEN, extensions)
    assert "a\x01b" not in str(info.value)


def test_extension_values_may_hold_spaces_tabs_and_line_breaks() -> None:
    message = client_first_message(TOKEN, {"note": "a b\tc\r\nd"})
    assert b"\x01note=a b\tc\r\nd\x01\x01" in message


@pytest.mark.parametrize("bad", ["", "two words", "ctl\x01char", "t\u00f6ken"])
def test_a_token_that_would_break_the_framing_is_refused_and_not_shown(bad: str) -> None:
    with pytest.raises(SaslAuthenticationError, match="visible ASCII") as info:
        client_first_message(bad)
    assert bad not in str(info.value) or not bad


def test_the_mechanism_takes_the_current_token_and_answers_an_error_with_ctrl_a() -> None:
    holder = Holder(OAuthBearerToken(TOKEN, expires_at_ms=2**41, extensions={"a": "b"}))
    mechanism = OAuthBearerMechanism(holder)
    assert mechanism.initial_response() == f"n,,\x01auth=Bearer {TOKEN}\x01a=b\x01\x01".encode()
    assert holder.calls == 1
    assert mechanism.evaluate(b'{"status":"invalid_token"}') == b"\x01"
    assert not mechanism.complete
    assert mechanism.server_error == '{"status":"invalid_token"}'
    with pytest.raises(SaslAuthenticationError, match="more after refusing"):
        mechanism.evaluate(b"again")
    assert TOKEN not in repr(mechanism)
    ok = OAuthBearerMechanism(holder)
    ok.initial_response()
    assert ok.evaluate(b"") is None
    assert ok.complete


def test_oauthbearer_is_a_supported_mechanism_and_needs_a_token_holder() -> None:
    assert "OAUTHBEARER" in SUPPORTED_MECHANISMS
    with pytest.raises(ConfigError, match="needs a token source"):
        SaslConfig("OAUTHBEARER")
    config = SaslConfig("OAUTHBEARER", oauth=Holder())
    assert isinstance(create_mechanism(config), OAuthBearerMechanism)
    assert "Holder" not in repr(config)


def _until_authenticate(
    holder: Holder, broker: ScriptedBroker
) -> tuple[BrokerConnection[str], int]:
    conn: BrokerConnection[str] = BrokerConnection(
        3, client_id="c", sasl=SaslConfig("OAUTHBEARER", oauth=holder)
    )
    conn.connecting()
    conn.connection_made(0)
    [versions] = broker.requests(conn.data_to_send())
    conn.receive_data(
        response_frame(api_versions_response(), versions.version, versions.correlation_id), 1
    )
    [handshake] = broker.requests(conn.data_to_send())
    assert handshake.body == SaslHandshakeRequest(mechanism="OAUTHBEARER")
    conn.receive_data(
        response_frame(SaslHandshakeResponse(0, ["OAUTHBEARER"]), 1, handshake.correlation_id), 2
    )
    return conn, handshake.correlation_id


def test_a_connection_authenticates_with_the_token_and_keeps_the_session_lifetime() -> None:
    broker = ScriptedBroker()
    conn, _ = _until_authenticate(Holder(OAuthBearerToken(TOKEN, expires_at_ms=2**41)), broker)
    [auth] = broker.requests(conn.data_to_send())
    assert auth.api_key is ApiKey.SASL_AUTHENTICATE
    assert auth.body == SaslAuthenticateRequest(
        auth_bytes=f"n,,\x01auth=Bearer {TOKEN}\x01\x01".encode()
    )
    conn.receive_data(
        response_frame(SaslAuthenticateResponse(0, None, b"", 10_000), 2, auth.correlation_id), 3
    )
    assert conn.state is ConnectionState.READY
    assert conn.session_lifetime_ms == 10_000


def test_a_refused_token_fails_with_the_brokers_json_and_the_source_but_not_the_token() -> None:
    broker = ScriptedBroker()
    conn, _ = _until_authenticate(Holder(OAuthBearerToken(TOKEN, expires_at_ms=2**41)), broker)
    [auth] = broker.requests(conn.data_to_send())
    error_json = b'{"status":"invalid_token","scope":"kafka"}'
    conn.receive_data(
        response_frame(SaslAuthenticateResponse(0, None, error_json, 0), 2, auth.correlation_id),
        3,
    )
    assert conn.failure is None
    [ack] = broker.requests(conn.data_to_send())
    assert ack.body == SaslAuthenticateRequest(auth_bytes=b"\x01")
    conn.receive_data(
        response_frame(
            SaslAuthenticateResponse(58, "Authentication failed: Invalid JWT", b"", 0),
            2,
            ack.correlation_id,
        ),
        4,
    )
    assert isinstance(conn.failure, SaslAuthenticationFailedError)
    text = str(conn.failure)
    assert "Authentication failed: Invalid JWT" in text
    assert '{"status":"invalid_token","scope":"kafka"}' in text
    assert "https://idp.example/oauth2/token" in text
    assert TOKEN not in text


def test_a_token_source_failure_fails_the_connection_naming_the_source() -> None:
    broker = ScriptedBroker()
    error = TokenSourceError(
        "https://idp.example/oauth2/token refused the client credentials (401)", may_clear=False
    )
    conn, _ = _until_authenticate(Holder(error=error), broker)
    assert conn.failure is error
    assert broker.requests(conn.data_to_send()) == []
