"""Sans-IO BrokerConnection driven by byte scripts: no sockets, no clock."""

from __future__ import annotations

import time

import pytest

from kafka_sink.errors import (
    ProtocolError,
    SaslAuthenticationError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from kafka_sink.net.connection import BrokerConnection, ConnectionState
from kafka_sink.net.sasl import SaslConfig, ScramMechanism
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from tests.fakes.metadata import metadata_response

from .broker_script import (
    ScriptedBroker,
    api_versions_response,
    response_frame,
    unsupported_api_versions_v0,
)


def _ready_connection(
    broker: ScriptedBroker, sasl: SaslConfig | None = None
) -> BrokerConnection[str]:
    conn: BrokerConnection[str] = BrokerConnection(7, client_id="cid", sasl=sasl)
    conn.connecting()
    conn.connection_made(0)
    [seen] = broker.requests(conn.data_to_send())
    assert (
        conn.receive_data(
            response_frame(api_versions_response(), seen.version, seen.correlation_id), 1
        )
        == []
    )
    return conn


def test_api_versions_first_then_ready_with_highest_common_versions() -> None:
    broker = ScriptedBroker()
    conn: BrokerConnection[str] = BrokerConnection(1, client_id="cid")
    assert conn.state is ConnectionState.DISCONNECTED
    conn.connecting()
    assert conn.state is ConnectionState.CONNECTING
    conn.connection_made(0)
    assert conn.state is ConnectionState.CHECKING_API_VERSIONS
    [seen] = broker.requests(conn.data_to_send())
    assert seen.api_key is ApiKey.API_VERSIONS
    assert seen.version == 4
    assert seen.client_id == "cid"
    assert seen.body.client_software_name == "pykafka-sink"
    ranges = {ApiKey.METADATA: (0, 9), ApiKey.PRODUCE: (0, 11)}
    conn.receive_data(
        response_frame(api_versions_response(ranges), 4, seen.correlation_id), now_ms=1
    )
    assert conn.state is ConnectionState.READY
    assert conn.api_version(ApiKey.METADATA) == 9
    assert conn.api_version(ApiKey.PRODUCE) == 11
    assert conn.api_version(ApiKey.SASL_AUTHENTICATE) == 2
    assert conn.in_flight_count() == 0


def test_api_versions_falls_back_on_unsupported_version() -> None:
    broker = ScriptedBroker()
    conn: BrokerConnection[str] = BrokerConnection(1, client_id=None)
    conn.connecting()
    conn.connection_made(0)
    [first] = broker.requests(conn.data_to_send())
    assert first.version == 4
    # An older broker: knows ApiVersions up to v2 and says so in a v0-format error response.
    conn.receive_data(unsupported_api_versions_v0(first.correlation_id, broker_max=2), 1)
    assert conn.state is ConnectionState.CHECKING_API_VERSIONS
    [second] = broker.requests(conn.data_to_send())
    assert second.api_key is ApiKey.API_VERSIONS
    assert second.version == 2
    conn.receive_data(response_frame(api_versions_response(), 2, second.correlation_id), 2)
    assert conn.state is ConnectionState.READY


def test_api_versions_fallback_to_v0_when_broker_lists_nothing() -> None:
    broker = ScriptedBroker()
    conn: BrokerConnection[str] = BrokerConnection(1, client_id=None)
    conn.connecting()
    conn.connection_made(0)
    [first] = broker.requests(conn.data_to_send())
    conn.receive_data(unsupported_api_versions_v0(first.correlation_id, broker_max=None), 1)
    [second] = broker.requests(conn.data_to_send())
    assert second.version == 0
    # And an UNSUPPORTED_VERSION answer to v0 is final.
    conn.receive_data(unsupported_api_versions_v0(second.correlation_id, broker_max=None), 2)
    assert isinstance(conn.failure, UnsupportedVersionError)


def test_partial_frames_and_several_frames_per_read() -> None:
    broker = ScriptedBroker()
    conn = _ready_connection(broker)
    sent = []
    for name in ("a", "b", "c"):
        record, data = conn.send(
            MetadataRequest.for_topics([name]), 12, now_ms=5, context=f"ctx-{name}"
        )
        [seen] = broker.requests(data)
        assert seen.body.topics[0].name == name
        sent.append((record, seen))
    assert conn.in_flight_count() == 3
    stream = b"".join(
        response_frame(metadata_response(seen.body.topics[0].name), 12, seen.correlation_id)
        for _record, seen in sent
    )
    # First byte by byte up to the middle of the second frame, then the rest in one read.
    completed = []
    cut = len(stream) // 2
    for i in range(cut):
        completed += conn.receive_data(stream[i : i + 1], 6)
    assert [r.context for r, _ in completed] == ["ctx-a"]
    completed += conn.receive_data(stream[cut:], 7)
    assert [r.context for r, _ in completed] == ["ctx-a", "ctx-b", "ctx-c"]
    assert [resp.topics[0].name for _, resp in completed] == ["a", "b", "c"]
    assert conn.in_flight_count() == 0
    assert conn.failure is None


def test_correlation_mismatch_is_a_protocol_error_and_returns_pending_on_close() -> None:
    broker = ScriptedBroker()
    conn = _ready_connection(broker)
    first, data1 = conn.send(MetadataRequest.for_topics(["a"]), 12, 0, context="first")
    second, data2 = conn.send(MetadataRequest.for_topics(["b"]), 12, 0, context="second")
    [seen1] = broker.requests(data1)
    [seen2] = broker.requests(data2)
    # The broker answers the second request first: impossible for Kafka, so fatal.
    ok_then_bad = response_frame(metadata_response(), 12, seen1.correlation_id)
    completed = conn.receive_data(
        ok_then_bad + response_frame(metadata_response(), 12, seen2.correlation_id + 100), 1
    )
    assert [r.context for r, _ in completed] == ["first"]
    assert isinstance(conn.failure, ProtocolError)
    assert "correlation id" in str(conn.failure)
    pending = conn.close()
    assert [r.context for r in pending] == ["second"]
    assert conn.state is ConnectionState.DISCONNECTED
    assert second is pending[0]
    assert first.correlation_id != second.correlation_id


def test_response_without_request_is_a_protocol_error() -> None:
    broker = ScriptedBroker()
    conn = _ready_connection(broker)
    conn.receive_data(response_frame(metadata_response(), 12, 99), 1)
    assert isinstance(conn.failure, ProtocolError)


def test_oversized_frame_is_a_protocol_error() -> None:
    conn: BrokerConnection[str] = BrokerConnection(1, client_id=None, max_frame_size=1024)
    conn.connecting()
    conn.connection_made(0)
    conn.data_to_send()
    conn.receive_data((1 << 20).to_bytes(4, "big"), 1)
    assert isinstance(conn.failure, ProtocolError)


def test_acks_zero_requests_are_not_awaited() -> None:
    broker = ScriptedBroker()
    conn = _ready_connection(broker)
    record, data = conn.send(
        MetadataRequest.for_topics(["a"]), 12, 0, context="x", expect_response=False
    )
    assert broker.requests(data)[0].correlation_id == record.correlation_id
    assert conn.in_flight_count() == 0
    assert conn.close() == []


def test_send_before_ready_is_refused() -> None:
    conn: BrokerConnection[str] = BrokerConnection(1, client_id=None)
    conn.connecting()
    with pytest.raises(ProtocolError, match="CONNECTING"):
        conn.send(MetadataRequest.for_topics([]), 12, 0)


def test_reconnect_negotiates_again() -> None:
    broker = ScriptedBroker()
    conn = _ready_connection(broker)
    assert conn.api_version(ApiKey.PRODUCE) == 12
    conn.close()
    assert conn.api_version(ApiKey.PRODUCE) is None
    conn.connecting()
    conn.connection_made(10)
    [seen] = ScriptedBroker().requests(conn.data_to_send())
    assert seen.api_key is ApiKey.API_VERSIONS


# ---------------------------------------------------------------------------------------- SASL


def _authenticate_until_handshake(
    broker: ScriptedBroker, sasl: SaslConfig
) -> tuple[BrokerConnection[str], int]:
    conn = _ready_connection(broker, sasl)
    assert conn.state is ConnectionState.AUTHENTICATING
    [handshake] = broker.requests(conn.data_to_send())
    assert handshake.api_key is ApiKey.SASL_HANDSHAKE
    assert handshake.version == 1
    assert handshake.body == SaslHandshakeRequest(mechanism=sasl.mechanism)
    return conn, handshake.correlation_id


def test_sasl_plain_exchange() -> None:
    broker = ScriptedBroker()
    sasl = SaslConfig("PLAIN", "alice", "s3cret")
    conn, cid = _authenticate_until_handshake(broker, sasl)
    conn.receive_data(
        response_frame(SaslHandshakeResponse(0, ["PLAIN", "SCRAM-SHA-256"]), 1, cid), 2
    )
    [auth] = broker.requests(conn.data_to_send())
    assert auth.api_key is ApiKey.SASL_AUTHENTICATE
    assert auth.version == 2
    assert auth.body == SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00s3cret")
    conn.receive_data(
        response_frame(SaslAuthenticateResponse(0, None, b"", 0), 2, auth.correlation_id), 3
    )
    assert conn.state is ConnectionState.READY
    assert "s3cret" not in repr(conn)
    assert "s3cret" not in repr(sasl)


def test_sasl_unsupported_mechanism() -> None:
    broker = ScriptedBroker()
    conn, cid = _authenticate_until_handshake(broker, SaslConfig("SCRAM-SHA-512", "u", "pw-x"))
    conn.receive_data(response_frame(SaslHandshakeResponse(33, ["PLAIN"]), 1, cid), 2)
    assert isinstance(conn.failure, UnsupportedSaslMechanismError)
    assert isinstance(conn.failure, SaslAuthenticationError)
    assert "PLAIN" in str(conn.failure)
    assert "pw-x" not in str(conn.failure)


def test_sasl_authentication_failed() -> None:
    broker = ScriptedBroker()
    conn, cid = _authenticate_until_handshake(broker, SaslConfig("PLAIN", "u", "wrong-pw"))
    conn.receive_data(response_frame(SaslHandshakeResponse(0, ["PLAIN"]), 1, cid), 2)
    [auth] = broker.requests(conn.data_to_send())
    conn.receive_data(
        response_frame(
            SaslAuthenticateResponse(58, "Invalid username or password", b"", 0),
            2,
            auth.correlation_id,
        ),
        3,
    )
    assert isinstance(conn.failure, SaslAuthenticationFailedError)
    assert "Invalid username or password" in str(conn.failure)
    assert "wrong-pw" not in str(conn.failure)


def test_sasl_scram_sha_256_exchange_with_rfc7677_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    # RFC 7677 section 3: user "user", password "pencil", fixed nonces.
    client_nonce = "rOprNGfwEbeRWgbNEkqO"
    monkeypatch.setattr("kafka_sink.net.sasl.secrets.token_urlsafe", lambda n: client_nonce)
    broker = ScriptedBroker()
    conn, cid = _authenticate_until_handshake(broker, SaslConfig("SCRAM-SHA-256", "user", "pencil"))
    conn.receive_data(response_frame(SaslHandshakeResponse(0, ["SCRAM-SHA-256"]), 1, cid), 2)
    [first] = broker.requests(conn.data_to_send())
    assert first.body.auth_bytes == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    conn.receive_data(
        response_frame(SaslAuthenticateResponse(0, None, server_first, 0), 2, first.correlation_id),
        3,
    )
    assert conn.state is ConnectionState.AUTHENTICATING
    [final] = broker.requests(conn.data_to_send())
    assert final.body.auth_bytes == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    server_final = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    conn.receive_data(
        response_frame(
            SaslAuthenticateResponse(0, None, server_final, 3_600_000), 2, final.correlation_id
        ),
        4,
    )
    assert conn.state is ConnectionState.READY
    assert conn.session_lifetime_ms == 3_600_000


def test_sasl_scram_rejects_a_forged_server_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "kafka_sink.net.sasl.secrets.token_urlsafe", lambda n: "rOprNGfwEbeRWgbNEkqO"
    )
    broker = ScriptedBroker()
    conn, cid = _authenticate_until_handshake(broker, SaslConfig("SCRAM-SHA-256", "user", "pencil"))
    conn.receive_data(response_frame(SaslHandshakeResponse(0, ["SCRAM-SHA-256"]), 1, cid), 2)
    [first] = broker.requests(conn.data_to_send())
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    conn.receive_data(
        response_frame(SaslAuthenticateResponse(0, None, server_first, 0), 2, first.correlation_id),
        3,
    )
    [final] = broker.requests(conn.data_to_send())
    forged = b"v=" + b"A" * 43 + b"="
    conn.receive_data(
        response_frame(SaslAuthenticateResponse(0, None, forged, 0), 2, final.correlation_id), 4
    )
    assert isinstance(conn.failure, SaslAuthenticationError)
    assert "signature" in str(conn.failure)


def test_sasl_needs_sasl_authenticate_support() -> None:
    broker = ScriptedBroker()
    conn: BrokerConnection[str] = BrokerConnection(
        1, client_id=None, sasl=SaslConfig("PLAIN", "u", "p")
    )
    conn.connecting()
    conn.connection_made(0)
    [seen] = broker.requests(conn.data_to_send())
    ranges = {ApiKey.SASL_HANDSHAKE: (0, 0)}
    conn.receive_data(response_frame(api_versions_response(ranges), 4, seen.correlation_id), 1)
    assert isinstance(conn.failure, UnsupportedVersionError)


def test_scram_mechanism_alone_matches_rfc5802_sha1_vector() -> None:
    # RFC 5802 section 5 (SCRAM-SHA-1): the same code path with another hash.
    mech = ScramMechanism("SCRAM-SHA-1", "user", "pencil", client_nonce="fyko+d2lbbFgONRv9qkxdawL")
    assert mech.initial_response() == b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    final = mech.evaluate(b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")
    assert final == (
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    )
    assert mech.evaluate(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=") is None
    assert mech.complete
    assert "pencil" not in repr(mech)


@pytest.mark.parametrize("iterations", [16385, 2**31 - 1])
def test_sasl_scram_refuses_a_hostile_iteration_count_quickly(
    monkeypatch: pytest.MonkeyPatch, iterations: int
) -> None:
    # A server demanding 2**31-1 PBKDF2 rounds would pin the I/O thread for many minutes; Kafka
    # never stores credentials above ScramMechanism's 16384, so the client refuses at once.
    monkeypatch.setattr(
        "kafka_sink.net.sasl.secrets.token_urlsafe", lambda n: "rOprNGfwEbeRWgbNEkqO"
    )
    broker = ScriptedBroker()
    conn, cid = _authenticate_until_handshake(broker, SaslConfig("SCRAM-SHA-512", "user", "pw-9"))
    conn.receive_data(response_frame(SaslHandshakeResponse(0, ["SCRAM-SHA-512"]), 1, cid), 2)
    [first] = broker.requests(conn.data_to_send())
    server_first = f"r=rOprNGfwEbeRWgbNEkqOsrv,s=W22ZaJ0SNY7soEsUEjb6gQ==,i={iterations}"
    began = time.monotonic()
    conn.receive_data(
        response_frame(
            SaslAuthenticateResponse(0, None, server_first.encode(), 0), 2, first.correlation_id
        ),
        3,
    )
    elapsed = time.monotonic() - began
    assert isinstance(conn.failure, SaslAuthenticationError)
    assert f"asked for {iterations} iterations" in str(conn.failure)
    assert "16384" in str(conn.failure)
    assert "pw-9" not in str(conn.failure)
    assert elapsed < 1.0
    assert conn.data_to_send() == b""  # no client-final message was computed or queued


def test_scram_accepts_kafkas_maximum_iteration_count() -> None:
    mech = ScramMechanism("SCRAM-SHA-512", "user", "pencil", client_nonce="abc")
    mech.initial_response()
    began = time.monotonic()
    final = mech.evaluate(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=16384")
    assert final is not None and final.startswith(b"c=biws,r=abcdef,p=")
    assert time.monotonic() - began < 2.0  # milliseconds in practice; bounded for a busy host


def test_api_versions_records_the_finalized_features() -> None:
    from kafka_sink.wire.messages import ApiVersionsResponse

    broker = ScriptedBroker()
    conn: BrokerConnection[str] = BrokerConnection(1, client_id="cid")
    conn.connecting()
    conn.connection_made(0)
    [seen] = broker.requests(conn.data_to_send())
    response = api_versions_response()
    response.finalized_features = [
        ApiVersionsResponse.FinalizedFeatureKey("transaction.version", 1, 1),
        ApiVersionsResponse.FinalizedFeatureKey("metadata.version", 27, 27),
    ]
    conn.receive_data(response_frame(response, 4, seen.correlation_id), now_ms=1)
    assert conn.state is ConnectionState.READY
    assert conn.finalized_features == {"transaction.version": 1, "metadata.version": 27}
    conn.close()
    assert conn.finalized_features == {}


def _scram_exchange(broker: ScriptedBroker, conn: BrokerConnection[str], lifetime: int) -> None:
    """RFC 7677's SCRAM-SHA-256 exchange from the SaslHandshake on (fixed nonce patched in)."""
    [handshake] = broker.requests(conn.data_to_send())
    assert handshake.body == SaslHandshakeRequest(mechanism="SCRAM-SHA-256")
    conn.receive_data(
        response_frame(SaslHandshakeResponse(0, ["SCRAM-SHA-256"]), 1, handshake.correlation_id),
        2,
    )
    [first] = broker.requests(conn.data_to_send())
    assert first.body.auth_bytes == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    conn.receive_data(
        response_frame(SaslAuthenticateResponse(0, None, server_first, 0), 2, first.correlation_id),
        3,
    )
    [final] = broker.requests(conn.data_to_send())
    server_final = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    conn.receive_data(
        response_frame(
            SaslAuthenticateResponse(0, None, server_final, lifetime), 2, final.correlation_id
        ),
        4,
    )
    assert conn.failure is None


def test_scram_reauthenticates_on_the_same_connection_keeping_its_versions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "kafka_sink.net.sasl.secrets.token_urlsafe", lambda n: "rOprNGfwEbeRWgbNEkqO"
    )
    broker = ScriptedBroker()
    conn = _ready_connection(broker, SaslConfig("SCRAM-SHA-256", "user", "pencil"))
    _scram_exchange(broker, conn, 10_000)
    assert conn.state is ConnectionState.READY and conn.session_lifetime_ms == 10_000
    versions = dict(conn.api_versions)
    # Not while a request is in flight: the caller drains the connection first.
    record, data = conn.send(MetadataRequest.for_topics(["t"]), 9, 5, context="m")
    with pytest.raises(ProtocolError, match="1 request"):
        conn.begin_reauthentication(6)
    [seen] = broker.requests(data)
    [(done, _response)] = conn.receive_data(
        response_frame(metadata_response("t", [(0, 1, 1)]), seen.version, seen.correlation_id), 7
    )
    assert done is record
    conn.begin_reauthentication(8)
    assert conn.state is ConnectionState.REAUTHENTICATING
    with pytest.raises(ProtocolError, match="REAUTHENTICATING"):
        conn.send(MetadataRequest.for_topics(["t"]), 9, 8)
    _scram_exchange(broker, conn, 20_000)  # no ApiVersions again: straight to SaslHandshake
    assert conn.state is ConnectionState.READY
    assert conn.session_lifetime_ms == 20_000
    assert conn.api_versions == versions


def test_reauthentication_needs_sasl() -> None:
    conn = _ready_connection(ScriptedBroker())
    assert conn.state is ConnectionState.READY
    with pytest.raises(ProtocolError, match="cannot re-authenticate"):
        conn.begin_reauthentication(2)
