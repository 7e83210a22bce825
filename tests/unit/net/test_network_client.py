"""NetworkClient with a ManualClock and a scripted selector: states, backoff, timeouts, caps."""

from __future__ import annotations

import logging
import random
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import (
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    SaslAuthenticationError,
    UnsupportedVersionError,
)
from kafka_sink.net.connection import ConnectionState
from kafka_sink.net.metadata import Metadata
from kafka_sink.net.network_client import (
    ClientRequest,
    ClientResponse,
    NetworkClient,
    NetworkConfig,
    parse_bootstrap_servers,
)
from kafka_sink.net.oauth.login import live_logins
from kafka_sink.net.oauth.token import OAuthBearerToken
from kafka_sink.net.selector import Address, PollResult
from kafka_sink.net.tls import TlsConfig
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    MetadataRequest,
    MetadataResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from tests.fakes.metadata import metadata_response

from .broker_script import ScriptedBroker, SeenRequest, api_versions_response, response_frame


@dataclass
class FakeChannel:
    address: Address
    broker: ScriptedBroker = field(default_factory=ScriptedBroker)
    seen: list[SeenRequest] = field(default_factory=list)
    held: list[tuple[bytes, int | None]] = field(default_factory=list)


class FakeSelector:
    """Stands in for Selector: tests decide when connects finish and what the broker says."""

    def __init__(self) -> None:
        self.channels: dict[int, FakeChannel] = {}
        self.pending = PollResult()
        self.poll_timeouts: list[int] = []
        self.connect_attempts: list[int] = []
        self.closed: list[int] = []
        self.hold_writes = False
        self.wakeups = 0

    # Selector interface
    def connect(self, conn_id: int, address: Address, **_: Any) -> None:
        assert conn_id not in self.channels
        self.connect_attempts.append(conn_id)
        self.channels[conn_id] = FakeChannel(address)

    def send(self, conn_id: int, data: bytes, token: int | None = None) -> None:
        channel = self.channels[conn_id]
        if self.hold_writes:
            channel.held.append((data, token))
            return
        self._deliver(conn_id, channel, data, token)

    def _deliver(self, conn_id: int, channel: FakeChannel, data: bytes, token: int | None) -> None:
        channel.seen += channel.broker.requests(data)
        if token is not None:
            self.pending.sent.append((conn_id, token))

    def release_writes(self, conn_id: int) -> None:
        channel = self.channels[conn_id]
        held, channel.held = channel.held, []
        for data, token in held:
            self._deliver(conn_id, channel, data, token)

    def pending_send_bytes(self, conn_id: int) -> int:
        channel = self.channels.get(conn_id)
        return 0 if channel is None else sum(len(d) for d, _ in channel.held)

    def poll(self, timeout_ms: int) -> PollResult:
        self.poll_timeouts.append(timeout_ms)
        result, self.pending = self.pending, PollResult()
        return result

    def close(self, conn_id: int) -> None:
        if self.channels.pop(conn_id, None) is not None:
            self.closed.append(conn_id)

    def wakeup(self) -> None:
        self.wakeups += 1

    def close_all(self) -> None:
        self.channels.clear()

    # Test controls
    def complete_connect(self, conn_id: int) -> None:
        self.pending.connected.append(conn_id)

    def fail(self, conn_id: int, error: OSError | None) -> None:
        del self.channels[conn_id]
        self.pending.disconnected.append((conn_id, error))

    def reply(self, conn_id: int, response: Any, *, index: int = -1) -> SeenRequest:
        """Answer the request at ``index`` of what the node received, at its version."""
        seen = self.channels[conn_id].seen[index]
        self.pending.received.append(
            (conn_id, response_frame(response, seen.version, seen.correlation_id))
        )
        return seen

    def requests(self, conn_id: int) -> list[SeenRequest]:
        return self.channels[conn_id].seen


def _metadata_response(leader: int = 1) -> MetadataResponse:
    """Topic "t", one partition led by ``leader`` (epoch 1); brokers 1 and 2 on ports 9001-9002."""
    return metadata_response(
        "t", [(0, leader, 1)], brokers=[(b, "127.0.0.1", 9000 + b) for b in (1, 2)]
    )


class Harness:
    def __init__(self, **config: Any) -> None:
        self.clock = ManualClock(1_000)
        self.selector = FakeSelector()
        self.metadata = Metadata(
            metadata_max_age_ms=config.get("metadata_max_age_ms", 300_000),
            retry_backoff_ms=100,
            rng=random.Random(7),
        )
        self.metadata.add_topic("t")
        defaults: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:9092", "client_id": "test"}
        defaults.update(config)
        self.client = NetworkClient(
            NetworkConfig(**defaults),
            self.metadata,
            self.clock,
            selector=self.selector,  # type: ignore[arg-type]
            rng=random.Random(7),
        )
        self.client.bootstrap(self.clock.now_ms())

    @property
    def now(self) -> int:
        return self.clock.now_ms()

    def poll(self, timeout_ms: int = 0) -> list[ClientResponse]:
        return self.client.poll(timeout_ms, self.now)

    def handshake(self, node_id: int) -> None:
        """Finish connect + ApiVersions for a node that is connecting."""
        self.selector.complete_connect(node_id)
        self.poll()
        [seen] = self.selector.requests(node_id)
        assert seen.api_key is ApiKey.API_VERSIONS
        self.selector.reply(node_id, api_versions_response())
        self.poll()

    def bootstrap_metadata(self) -> None:
        """Bootstrap node -1 answers the first Metadata request: brokers 1 and 2."""
        self.poll()
        assert self.selector.connect_attempts == [-1]
        self.handshake(-1)
        metadata_request = self.selector.requests(-1)[-1]
        assert metadata_request.api_key is ApiKey.METADATA
        self.selector.reply(-1, _metadata_response())
        self.poll()
        assert self.metadata.leader_for("t", 0) is not None

    def connect_ready(self, node_id: int) -> None:
        assert not self.client.ready(node_id, self.now)
        self.handshake(node_id)
        assert self.client.ready(node_id, self.now)


def _request(
    node_id: int, now: int, done: list[ClientResponse] | None = None, **kw: Any
) -> ClientRequest:
    return ClientRequest(
        node_id,
        MetadataRequest.for_topics(["t"], allow_auto_topic_creation=False),
        None,
        now,
        None if done is None else done.append,
        **kw,
    )


# ------------------------------------------------------------------------------ bootstrap


def test_bootstrap_fetches_metadata_for_the_producer_topics() -> None:
    h = Harness()
    h.poll()
    assert h.selector.connect_attempts == [-1]
    assert h.client.connection_state(-1) is ConnectionState.CONNECTING
    h.handshake(-1)
    assert h.client.connection_state(-1) is ConnectionState.READY
    request = h.selector.requests(-1)[-1]
    assert request.api_key is ApiKey.METADATA
    assert request.version == 12
    assert request.client_id == "test"
    assert [t.name for t in request.body.topics] == ["t"]
    assert request.body.allow_auto_topic_creation is False
    h.selector.reply(-1, _metadata_response(leader=2))
    responses = h.poll()
    assert responses == []  # internal requests are not handed to the caller
    leader = h.metadata.leader_for("t", 0)
    assert leader is not None and leader.node_id == 2
    # The bootstrap connection has done its job.
    h.poll()
    assert -1 in h.selector.closed


def test_parse_bootstrap_servers() -> None:
    assert parse_bootstrap_servers("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap_servers(["[::1]:9092", ("h", 3)]) == [("::1", 9092), ("h", 3)]
    for bad in ("", "nohost", "h:notaport", "h:0"):
        with pytest.raises(ConfigError):
            parse_bootstrap_servers(bad)


# --------------------------------------------------------------------------- connections


def test_reconnect_backoff_grows_exponentially_with_jitter_up_to_the_max() -> None:
    h = Harness(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1_000)
    h.bootstrap_metadata()
    delays = []
    for _ in range(7):
        assert h.client.ready(1, h.now) is False
        assert h.selector.connect_attempts[-1] == 1
        h.selector.fail(1, ConnectionRefusedError(111, "Connection refused"))
        h.poll()
        assert h.client.is_connection_failed(1)
        delay = h.client.connection_delay(1, h.now)
        delays.append(delay)
        # Inside the backoff, ready() does not dial again.
        attempts = len(h.selector.connect_attempts)
        if delay > 1:
            h.clock.advance(delay - 1)
            assert not h.client.ready(1, h.now)
            assert len(h.selector.connect_attempts) == attempts
            h.clock.advance(1)
        else:
            h.clock.advance(delay)
    for delay, expected in zip(delays, [50, 100, 200, 400, 800, 1000, 1000], strict=True):
        assert expected * 0.8 <= delay <= min(expected * 1.2, 1_000), delays
    # A connection that reaches READY resets the backoff.
    h.connect_ready(1)
    h.selector.fail(1, ConnectionResetError(104, "reset"))
    h.poll()
    assert h.client.connection_delay(1, h.now) <= 60


def test_disconnect_fails_in_flight_requests_and_requests_metadata() -> None:
    h = Harness()
    h.bootstrap_metadata()
    h.connect_ready(1)
    h.clock.advance(200)
    done: list[ClientResponse] = []
    h.client.send(_request(1, h.now, done), h.now)
    h.client.send(_request(1, h.now, done), h.now)
    assert h.client.in_flight_count(1) == 2
    assert not h.metadata.update_requested()
    h.selector.fail(1, ConnectionResetError(104, "Connection reset by peer"))
    responses = h.poll()
    assert len(responses) == 2 and responses == done
    assert all(r.disconnected and not r.timed_out for r in responses)
    assert all(isinstance(r.error, KafkaConnectionError) for r in responses)
    assert "Connection reset by peer" in str(responses[0].error)
    assert h.client.in_flight_count(1) == 0
    assert h.metadata.update_requested()


def test_connection_setup_timeout_closes_and_grows_up_to_the_max() -> None:
    h = Harness(
        socket_connection_setup_timeout_ms=10_000, socket_connection_setup_timeout_max_ms=30_000
    )
    h.poll()
    assert h.selector.connect_attempts == [-1]
    # The poll wait is bounded by the setup deadline, so a silent network cannot hang it.
    h.poll(timeout_ms=60_000)
    assert h.selector.poll_timeouts[-1] <= 12_000
    timeouts = []
    for _ in range(3):
        while h.client.connection_state(-1) is not ConnectionState.DISCONNECTED:
            h.clock.advance(100)
            h.poll()
        # How long this attempt was allowed, from the recorded error.
        error = h.metadata.last_error()
        assert isinstance(error, KafkaConnectionError)
        assert "was not ready within" in str(error)
        timeouts.append(int(str(error).split("within ")[1].split(" ms")[0]))
        attempts = len(h.selector.connect_attempts)
        while len(h.selector.connect_attempts) == attempts:
            h.clock.advance(100)
            h.poll()
    assert 8_000 <= timeouts[0] <= 12_000
    assert 16_000 <= timeouts[1] <= 24_000
    assert 24_000 <= timeouts[2] <= 30_000
    with pytest.raises(KafkaTimeoutError, match="was not ready within"):
        h.metadata.await_update(h.metadata.version, 0)


def test_setup_timeout_also_covers_a_broker_that_never_answers_api_versions() -> None:
    h = Harness(
        socket_connection_setup_timeout_ms=1_000, socket_connection_setup_timeout_max_ms=1_000
    )
    h.poll()
    h.selector.complete_connect(-1)
    h.poll()
    assert h.client.connection_state(-1) is ConnectionState.CHECKING_API_VERSIONS
    h.clock.advance(1_000)
    h.poll()
    assert h.client.connection_state(-1) is ConnectionState.DISCONNECTED
    assert -1 in h.selector.closed
    assert "CHECKING_API_VERSIONS" in str(h.metadata.last_error())


def test_dns_failure_is_a_connection_error_not_a_crash() -> None:
    h = Harness(bootstrap_servers="no-such-host.invalid:9092")
    h.poll()
    assert h.client.is_connection_failed(-1)
    error = h.metadata.last_error()
    assert isinstance(error, KafkaConnectionError)
    assert "no-such-host.invalid:9092" in str(error)


def test_sasl_failure_is_fatal_for_metadata_waiters() -> None:
    h = Harness(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password="top-secret",
    )
    h.poll()
    h.handshake(-1)
    assert h.client.connection_state(-1) is ConnectionState.AUTHENTICATING
    h.selector.reply(-1, SaslHandshakeResponse(33, ["SCRAM-SHA-512"]))
    h.poll()
    assert h.client.connection_state(-1) is ConnectionState.DISCONNECTED
    with pytest.raises(SaslAuthenticationError) as info:
        h.metadata.await_update(h.metadata.version, 1_000)
    assert "top-secret" not in str(info.value)
    assert "top-secret" not in repr(h.client.config)


def test_idle_connections_are_closed() -> None:
    h = Harness(connections_max_idle_ms=5_000)
    h.bootstrap_metadata()
    h.connect_ready(1)
    h.clock.advance(4_999)
    h.poll()
    assert h.client.connection_state(1) is ConnectionState.READY
    h.clock.advance(1)
    h.poll()
    assert h.client.connection_state(1) is ConnectionState.DISCONNECTED
    assert 1 in h.selector.closed
    assert h.client.can_connect(1, h.now)


# ------------------------------------------------------------------------------ requests


def test_request_timeout_disconnects_and_fails_in_flight_requests() -> None:
    h = Harness(request_timeout_ms=30_000)
    h.bootstrap_metadata()
    h.connect_ready(1)
    done: list[ClientResponse] = []
    h.client.send(_request(1, h.now, done), h.now)
    h.clock.advance(10_000)
    h.client.send(_request(1, h.now, done), h.now)
    h.poll(timeout_ms=60_000)
    # The wait is bounded by the oldest request's deadline.
    assert h.selector.poll_timeouts[-1] <= 20_000
    h.clock.advance(19_999)
    assert h.poll() == []
    h.clock.advance(1)
    responses = h.poll()
    assert len(responses) == 2 and responses == done
    assert all(r.disconnected and r.timed_out for r in responses)
    assert isinstance(responses[0].error, KafkaTimeoutError)
    assert "30000 ms" in str(responses[0].error)
    assert 1 in h.selector.closed
    assert h.client.connection_state(1) is ConnectionState.DISCONNECTED
    assert h.metadata.update_requested()


def test_per_request_timeout_overrides_the_default() -> None:
    h = Harness(request_timeout_ms=30_000)
    h.bootstrap_metadata()
    h.connect_ready(1)
    done: list[ClientResponse] = []
    h.client.send(_request(1, h.now, done, request_timeout_ms=500), h.now)
    h.clock.advance(500)
    h.poll()
    assert len(done) == 1 and done[0].timed_out


def test_responses_complete_in_order_with_callbacks() -> None:
    h = Harness()
    h.bootstrap_metadata()
    h.connect_ready(1)
    done: list[ClientResponse] = []
    first = _request(1, h.now, done)
    second = _request(1, h.now, done)
    h.client.send(first, h.now)
    h.client.send(second, h.now)
    assert first.api_version == 12 and first.correlation_id >= 0
    h.clock.advance(7)
    h.selector.reply(1, _metadata_response(), index=-2)
    h.selector.reply(1, _metadata_response(), index=-1)
    responses = h.poll()
    assert [r.request for r in responses] == [first, second]
    assert done == responses
    assert all(isinstance(r.response, MetadataResponse) for r in responses)
    assert responses[0].request_latency_ms == 7


def test_in_flight_cap_per_connection() -> None:
    h = Harness(max_in_flight=2)
    h.bootstrap_metadata()
    h.connect_ready(1)
    h.client.send(_request(1, h.now), h.now)
    assert h.client.is_ready(1, h.now)
    h.client.send(_request(1, h.now), h.now)
    assert h.client.in_flight_count(1) == 2
    assert not h.client.is_ready(1, h.now)
    assert not h.client.ready(1, h.now)
    with pytest.raises(IllegalStateError, match="not ready"):
        h.client.send(_request(1, h.now), h.now)
    h.selector.reply(1, _metadata_response(), index=-2)
    h.poll()
    assert h.client.in_flight_count(1) == 1
    assert h.client.is_ready(1, h.now)


def test_acks_zero_completes_when_written() -> None:
    h = Harness()
    h.bootstrap_metadata()
    h.connect_ready(1)
    h.selector.hold_writes = True
    done: list[ClientResponse] = []
    h.client.send(_request(1, h.now, done, expect_response=False), h.now)
    # Not written yet: counts as in flight, and nothing new may be queued behind it.
    assert h.client.in_flight_count(1) == 1
    assert not h.client.can_send_request(1, h.now)
    assert h.poll() == []
    h.selector.release_writes(1)
    responses = h.poll()
    assert responses == done
    assert len(responses) == 1
    r = responses[0]
    assert r.response is None and not r.disconnected and r.error is None
    assert h.client.in_flight_count(1) == 0


def test_unsupported_version_completes_with_an_error() -> None:
    h = Harness()
    h.bootstrap_metadata()
    h.connect_ready(1)
    done: list[ClientResponse] = []
    request = _request(1, h.now, done)
    request.version = 99
    h.client.send(request, h.now)
    responses = h.poll()
    assert responses == done
    assert isinstance(responses[0].error, UnsupportedVersionError)
    assert not responses[0].disconnected


def test_send_to_a_node_that_is_not_ready_is_refused() -> None:
    h = Harness()
    with pytest.raises(IllegalStateError):
        h.client.send(_request(5, h.now), h.now)


def test_a_due_metadata_refresh_goes_first() -> None:
    h = Harness(metadata_max_age_ms=60_000)
    h.bootstrap_metadata()
    h.connect_ready(1)
    h.metadata.request_update()
    h.clock.advance(200)  # past retry.backoff.ms
    assert not h.client.is_ready(1, h.now)  # update due: nodes look busy
    h.poll()
    request = h.selector.requests(1)[-1]
    assert request.api_key is ApiKey.METADATA
    assert h.client.is_ready(1, h.now)
    h.selector.reply(1, _metadata_response())
    h.poll()
    assert not h.metadata.update_requested()
    # And metadata.max.age.ms later it refreshes on its own.
    count = len(h.selector.requests(1))
    h.clock.advance(60_000)
    h.poll()
    assert len(h.selector.requests(1)) == count + 1


def test_least_loaded_node_prefers_idle_ready_nodes() -> None:
    h = Harness()
    h.bootstrap_metadata()
    assert h.client.least_loaded_node(h.now) in (1, 2)  # both can connect
    h.connect_ready(1)
    assert h.client.least_loaded_node(h.now) == 1
    h.client.send(_request(1, h.now), h.now)
    # Node 1 is busy, node 2 is disconnected: a ready node with load still beats dialing.
    assert h.client.least_loaded_node(h.now) == 1
    h.connect_ready(2)
    assert h.client.least_loaded_node(h.now) == 2


def test_metadata_fetch_failure_backs_off() -> None:
    h = Harness()
    h.poll()
    h.handshake(-1)
    assert h.selector.requests(-1)[-1].api_key is ApiKey.METADATA
    h.selector.fail(-1, ConnectionResetError(104, "reset"))
    h.poll()
    assert h.metadata.time_to_next_update(h.now) > 0
    assert h.metadata.last_error() is not None


def test_wakeup_and_close() -> None:
    h = Harness()
    h.client.wakeup()
    assert h.selector.wakeups == 1
    h.client.close()
    assert h.client.closed
    assert h.poll() == []
    with pytest.raises(IllegalStateError):
        h.client.send(_request(1, h.now), h.now)


def test_network_config_validation_and_secrecy() -> None:
    with pytest.raises(ConfigError, match=r"security\.protocol"):
        NetworkConfig(bootstrap_servers="h:1", security_protocol="TLS")
    with pytest.raises(ConfigError, match=r"sasl\.mechanism"):
        NetworkConfig(bootstrap_servers="h:1", security_protocol="SASL_PLAINTEXT")
    config = NetworkConfig(
        bootstrap_servers="h:1",
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_password="pw-1",
        tls=TlsConfig(keystore_location="/k.pem", key_password="pw-2"),
    )
    assert "pw-1" not in repr(config) and "pw-2" not in repr(config)
    with pytest.raises(ConfigError, match=r"ssl\.\* settings need security\.protocol"):
        NetworkConfig(bootstrap_servers="h:1", tls=TlsConfig())


def test_broker_throttle_holds_back_requests_until_it_ends() -> None:
    h = Harness()
    h.bootstrap_metadata()
    h.connect_ready(1)
    done: list[ClientResponse] = []
    h.client.send(_request(1, h.now, done), h.now)
    throttled = _metadata_response()
    throttled.throttle_time_ms = 500
    h.selector.reply(1, throttled)
    h.poll()
    assert len(done) == 1
    assert not h.client.can_send_request(1, h.now)
    assert not h.client.ready(1, h.now)
    assert h.client.connection_delay(1, h.now) == 500
    assert h.client.throttle_delay(1, h.now) == 500
    h.clock.advance(500)
    assert h.client.ready(1, h.now)
    assert h.client.throttle_delay(1, h.now) == 0


def _plain_harness(**config: Any) -> Harness:
    return Harness(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password="top-secret",
        **config,
    )


def _authenticate(h: Harness, node_id: int, mechanism: str, lifetime_ms: int = 10_000) -> None:
    """Finish connect + ApiVersions + SASL for a connecting node; the broker grants a session."""
    h.handshake(node_id)
    h.selector.reply(node_id, SaslHandshakeResponse(0, [mechanism]))
    h.poll()
    assert h.selector.requests(node_id)[-1].api_key is ApiKey.SASL_AUTHENTICATE
    h.selector.reply(node_id, SaslAuthenticateResponse(0, None, b"", lifetime_ms))
    h.poll()


def _sasl_node_ready(h: Harness, mechanism: str) -> None:
    """Bootstrap through node -1, then authenticate node 1 (10 s sessions on both)."""
    h.poll()
    _authenticate(h, -1, mechanism)
    h.selector.reply(-1, _metadata_response())  # the bootstrap metadata request
    h.poll()
    h.poll()  # bootstrap connection closes once done; use a broker node from here on
    assert not h.client.ready(1, h.now)
    _authenticate(h, 1, mechanism)
    assert h.client.ready(1, h.now)


def _api_keys(h: Harness, node_id: int) -> list[ApiKey]:
    return [seen.api_key for seen in h.selector.requests(node_id)]


_SETUP = [ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE]
_REAUTH = [ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE]


def test_sasl_session_lifetime_drains_then_reauthenticates_on_the_same_connection() -> None:
    h = _plain_harness()
    _sasl_node_ready(h, "PLAIN")
    attempts = h.selector.connect_attempts.count(1)
    created = h.client.connection_stats().created
    done: list[ClientResponse] = []
    h.client.send(_request(1, h.now, done), h.now)
    h.clock.advance(9_500)  # past 85-95 % of the session lifetime
    assert not h.client.can_send_request(1, h.now)  # drain: no new requests
    h.poll(timeout_ms=60_000)
    assert h.selector.poll_timeouts[-1] > 0  # draining does not spin
    assert h.client.connection_state(1) is ConnectionState.READY  # in flight: not cut
    # Nothing goes out behind the in-flight request: re-authentication waits for its answer.
    assert _api_keys(h, 1) == [*_SETUP, ApiKey.METADATA]
    h.selector.reply(1, _metadata_response())
    h.poll()
    assert len(done) == 1 and not done[0].disconnected and done[0].response is not None
    # Answered: the same connection re-authenticates at once, and takes no request meanwhile.
    assert _api_keys(h, 1) == [*_SETUP, ApiKey.METADATA, ApiKey.SASL_HANDSHAKE]
    assert h.client.connection_state(1) is ConnectionState.REAUTHENTICATING
    assert not h.client.ready(1, h.now)
    assert h.selector.connect_attempts.count(1) == attempts
    h.selector.reply(1, SaslHandshakeResponse(0, ["PLAIN"]))
    h.poll()
    again = h.selector.requests(1)[-1]
    assert again.api_key is ApiKey.SASL_AUTHENTICATE
    assert again.body == SaslAuthenticateRequest(auth_bytes=b"\x00u\x00top-secret")
    assert not h.client.can_send_request(1, h.now)
    h.clock.advance(7)
    h.selector.reply(1, SaslAuthenticateResponse(0, None, b"", 10_000))
    h.poll()
    assert h.client.ready(1, h.now)
    h.client.send(_request(1, h.now, done), h.now)
    assert _api_keys(h, 1) == [*_SETUP, ApiKey.METADATA, *_REAUTH, ApiKey.METADATA]
    assert 1 not in h.selector.closed
    assert h.selector.connect_attempts.count(1) == attempts
    stats = h.client.connection_stats()
    assert stats.created == created
    assert (stats.reauthentications, stats.failed_reauthentications) == (1, 0)
    assert stats.reauthentication_ms_max == 7 and stats.reauthentication_ms_avg == 7


def test_an_idle_connection_reauthenticates_at_the_scheduled_time_and_still_closes_when_idle() -> (
    None
):
    h = _plain_harness(connections_max_idle_ms=40_000)
    _sasl_node_ready(h, "PLAIN")
    authenticated_at = h.now
    h.client.poll(60_000, h.now)
    # The wait ends by the re-authentication time (85-95 % of the 10 s session).
    assert 8_500 <= h.selector.poll_timeouts[-1] <= 9_500
    h.clock.advance(8_499)
    h.poll()
    assert _api_keys(h, 1) == _SETUP  # not yet
    h.clock.advance(1_001)
    h.poll()
    assert _api_keys(h, 1) == [*_SETUP, ApiKey.SASL_HANDSHAKE]
    h.selector.reply(1, SaslHandshakeResponse(0, ["PLAIN"]))
    h.poll()
    h.selector.reply(1, SaslAuthenticateResponse(0, None, b"", 10_000))
    h.poll()
    assert h.client.ready(1, h.now)
    # Sessions keep being renewed while idle...
    for _ in range(3):
        h.clock.advance(9_500)
        h.poll()
        h.selector.reply(1, SaslHandshakeResponse(0, ["PLAIN"]))
        h.poll()
        h.selector.reply(1, SaslAuthenticateResponse(0, None, b"", 10_000))
        h.poll()
    assert h.client.connection_stats().reauthentications == 4
    assert h.now - authenticated_at == 38_000
    # ...but that is not use: connections.max.idle.ms still closes the connection.
    h.clock.advance(2_000)
    h.poll()
    assert h.client.connection_state(1) is ConnectionState.DISCONNECTED
    assert 1 in h.selector.closed


def test_a_refused_reauthentication_closes_the_connection_naming_node_and_mechanism(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = _plain_harness()
    _sasl_node_ready(h, "PLAIN")
    attempts = h.selector.connect_attempts.count(1)
    h.clock.advance(9_500)
    h.poll()
    h.selector.reply(1, SaslHandshakeResponse(0, ["PLAIN"]))
    h.poll()
    h.selector.reply(
        1, SaslAuthenticateResponse(58, "Authentication failed: Invalid username or password", b"")
    )
    h.poll()
    assert h.client.connection_state(1) is ConnectionState.DISCONNECTED
    assert 1 in h.selector.closed
    error = h.client.last_connect_error(1)
    assert isinstance(error, SaslAuthenticationError)
    text = str(error)
    assert "re-authentication (SASL PLAIN) of the connection to node 1 (127.0.0.1:9001)" in text
    assert "Invalid username or password" in text
    assert "top-secret" not in text and "top-secret" not in caplog.text
    assert any("re-authentication (SASL PLAIN)" in m for m in _warnings(caplog))
    stats = h.client.connection_stats()
    assert (stats.reauthentications, stats.failed_reauthentications) == (0, 1)
    # As at connection setup, refused credentials fail metadata waiters at once (Java).
    with pytest.raises(SaslAuthenticationError, match="re-authentication"):
        h.metadata.await_update(h.metadata.version, 1_000)
    # The usual reconnect path takes over, after its backoff.
    assert not h.client.can_connect(1, h.now)
    h.clock.advance(h.client.connection_delay(1, h.now))
    h.client.ready(1, h.now)
    assert h.selector.connect_attempts.count(1) == attempts + 1


def test_a_reauthentication_without_answer_times_out_after_the_request_timeout() -> None:
    h = _plain_harness(request_timeout_ms=3_000)
    _sasl_node_ready(h, "PLAIN")
    h.clock.advance(9_500)
    h.poll()
    assert _api_keys(h, 1)[-1] is ApiKey.SASL_HANDSHAKE
    h.client.poll(60_000, h.now)
    assert h.selector.poll_timeouts[-1] <= 3_000  # the wait is bounded by that deadline
    h.clock.advance(2_999)
    h.poll()
    assert h.client.connection_state(1) is ConnectionState.REAUTHENTICATING
    h.clock.advance(1)
    h.poll()
    assert h.client.connection_state(1) is ConnectionState.DISCONNECTED
    error = h.client.last_connect_error(1)
    assert isinstance(error, KafkaConnectionError)
    assert "re-authentication (SASL PLAIN)" in str(error)
    assert "3000 ms (request.timeout.ms)" in str(error)
    assert h.client.connection_stats().failed_reauthentications == 1


def test_a_reauthentication_waits_at_most_the_request_timeout_for_in_flight_answers() -> None:
    h = _plain_harness(request_timeout_ms=3_000)
    _sasl_node_ready(h, "PLAIN")
    seen = h.selector.requests(1)
    h.clock.advance(8_000)
    done: list[ClientResponse] = []
    h.client.send(_request(1, h.now, done), h.now)
    h.clock.advance(2_999)  # re-authentication due, its request still unanswered
    h.poll()
    assert h.client.connection_state(1) is ConnectionState.READY
    assert not done
    h.clock.advance(1)
    h.poll()  # the request timed out: the connection goes, as any timed-out one does
    assert len(done) == 1 and done[0].timed_out
    assert isinstance(done[0].error, KafkaTimeoutError)
    assert h.client.connection_state(1) is ConnectionState.DISCONNECTED
    assert [r.api_key for r in seen] == [*_SETUP, ApiKey.METADATA]  # no handshake behind it


def test_acks_zero_request_stuck_in_the_socket_buffer_times_out() -> None:
    h = Harness(request_timeout_ms=1_000)
    h.bootstrap_metadata()
    h.connect_ready(1)
    h.selector.hold_writes = True  # the broker stopped reading
    done: list[ClientResponse] = []
    h.client.send(_request(1, h.now, done, expect_response=False), h.now)
    h.clock.advance(1_000)
    h.poll()
    assert len(done) == 1
    assert done[0].disconnected and done[0].timed_out
    assert "written" in str(done[0].error)
    assert h.client.connection_state(1) is ConnectionState.DISCONNECTED


def test_a_broker_that_moved_is_resolved_again() -> None:
    h = Harness()
    h.bootstrap_metadata()
    h.connect_ready(1)
    assert h.selector.channels[1].address == (socket.AF_INET, ("127.0.0.1", 9001))
    h.selector.fail(1, ConnectionResetError(104, "reset"))
    h.poll()
    moved = _metadata_response()
    moved.brokers[0].port = 9101
    h.metadata.update(moved, h.now)
    h.clock.advance(1_000)
    h.client.ready(1, h.now)
    assert h.selector.channels[1].address == (socket.AF_INET, ("127.0.0.1", 9101))


def test_a_failing_callback_does_not_stop_the_others_and_surfaces() -> None:
    h = Harness()
    h.bootstrap_metadata()
    h.connect_ready(1)
    seen: list[str] = []

    def boom(response: ClientResponse) -> None:
        seen.append("boom")
        raise RuntimeError("handler bug")

    h.client.send(ClientRequest(1, MetadataRequest.for_topics([]), None, h.now, boom), h.now)
    h.client.send(_request(1, h.now, None), h.now)
    second = ClientRequest(
        1, MetadataRequest.for_topics([]), None, h.now, lambda r: seen.append("ok")
    )
    h.client.send(second, h.now)
    for index in (-3, -2, -1):
        h.selector.reply(1, _metadata_response(), index=index)
    with pytest.raises(RuntimeError, match="handler bug"):
        h.poll()
    assert seen == ["boom", "ok"]
    assert h.client.in_flight_count(1) == 0


def test_rebootstrap_when_every_known_broker_is_in_backoff() -> None:
    h = Harness(reconnect_backoff_ms=10_000, reconnect_backoff_max_ms=10_000)
    h.bootstrap_metadata()
    h.poll()
    h.metadata.request_update()
    h.clock.advance(200)
    h.poll()
    # Each broker is refused once; then both sit in a 10 s reconnect backoff while the metadata
    # refresh (backing off far less) finds no node to ask.
    _refuse_brokers(h, step_ms=500, rounds=8)
    assert h.metadata.fetch().is_bootstrap
    assert h.now < 10_000
    assert h.selector.connect_attempts.count(1) == h.selector.connect_attempts.count(2) == 1
    _dial_bootstrap(h)


def _dial_bootstrap(h: Harness) -> None:
    for _ in range(20):
        if h.selector.connect_attempts[-1] == -1 and -1 in h.selector.channels:
            return
        h.clock.advance(50)
        h.poll()
    raise AssertionError(f"bootstrap node not dialed: {h.selector.connect_attempts}")


def _refuse_brokers(h: Harness, *, rounds: int = 40, step_ms: int = 50) -> None:
    """Every dial to brokers 1 and 2 is refused, until the client goes back to bootstrap."""
    for _ in range(rounds):
        for node_id in (1, 2):
            if node_id in h.selector.channels:
                h.selector.fail(node_id, ConnectionRefusedError(111, "Connection refused"))
        h.clock.advance(step_ms)
        h.poll()
        if h.metadata.fetch().is_bootstrap:
            return


def test_rebootstrap_when_no_update_succeeds_for_the_trigger_time() -> None:
    h = Harness(metadata_recovery_rebootstrap_trigger_ms=1_000)
    h.bootstrap_metadata()
    h.poll()  # bootstrap connection closes
    h.metadata.request_update()
    h.clock.advance(200)
    h.poll()  # refresh due: dials a broker
    _refuse_brokers(h)
    # No broker answered for metadata.recovery.rebootstrap.trigger.ms: back to bootstrap.
    assert h.metadata.fetch().is_bootstrap
    _dial_bootstrap(h)
    assert h.metadata.partitions_for("t") is not None
    h.handshake(-1)
    h.selector.reply(-1, _metadata_response())
    h.poll()
    assert not h.metadata.fetch().is_bootstrap


def test_rebootstrap_can_be_turned_off() -> None:
    h = Harness(metadata_recovery_strategy="none", metadata_recovery_rebootstrap_trigger_ms=1_000)
    h.bootstrap_metadata()
    h.poll()
    h.metadata.request_update()
    h.clock.advance(200)
    h.poll()
    _refuse_brokers(h)
    assert not h.metadata.fetch().is_bootstrap
    assert -1 not in h.selector.connect_attempts[1:]


def test_bad_tls_files_are_a_config_error_without_secrets(tmp_path: Path) -> None:
    missing = tmp_path / "missing-ca.pem"
    config = NetworkConfig(
        bootstrap_servers="h:1",
        security_protocol="SSL",
        tls=TlsConfig(
            truststore_location=str(missing), keystore_location="/k.pem", key_password="key-pw"
        ),
    )
    with pytest.raises(ConfigError, match=r"missing-ca\.pem") as info:
        config.ssl_context()
    assert "key-pw" not in str(info.value)
    assert NetworkConfig(bootstrap_servers="h:1").ssl_context() is None


# ------------------------------------------------------------------ connection-failure warnings

_NC_LOGGER = "kafka_sink.net.network_client"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == _NC_LOGGER and r.levelno >= logging.WARNING
    ]


def _refuse_bootstrap_for(h: Harness, duration_ms: int) -> int:
    """Refuse every dial to the bootstrap node for ``duration_ms``; returns the dial count."""
    end = h.now + duration_ms
    dials = 0
    while h.now < end:
        if -1 in h.selector.channels:
            h.selector.fail(-1, ConnectionRefusedError(111, "Connection refused"))
            dials += 1
        h.poll()
        h.clock.advance(max(min(h.client.connection_delay(-1, h.now), 1_000), 50))
    return dials


def test_an_unreachable_node_warns_once_then_summarises_at_most_once_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=_NC_LOGGER)
    h = Harness(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1_000)
    dials = _refuse_bootstrap_for(h, 59_000)
    assert dials >= 20  # a dial every second or two once the backoffs have grown
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    # The first one says which node, where, and why.
    assert "node -1 (127.0.0.1:9092)" in warnings[0]
    assert "Connection refused" in warnings[0]
    # Each repeat is still there for whoever turns on DEBUG.
    repeats = [
        r
        for r in caplog.records
        if r.levelno == logging.DEBUG and "could not be established" in r.getMessage()
    ]
    assert len(repeats) == dials - 1
    # Five minutes of it: one summary a minute, each counting what it stood for.
    caplog.clear()
    dials += _refuse_bootstrap_for(h, 5 * 60_000)
    warnings = _warnings(caplog)
    assert 4 <= len(warnings) <= 5, warnings
    for text in warnings:
        assert "node -1 (127.0.0.1:9092)" in text and "Connection refused" in text
        assert "more failed attempt" in text
    # Every failure is counted by a warning, except those since the last one (under a minute's
    # worth: the backoff is at least 800 ms).
    counted = 1 + sum(int(m[1]) for t in warnings if (m := re.search(r"\((\d+) more", t)))
    assert dials - 75 <= counted <= dials


def test_a_node_that_comes_back_is_reported_and_its_next_failure_warns_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=_NC_LOGGER)
    h = Harness(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1_000)
    _refuse_bootstrap_for(h, 10_000)
    assert len(_warnings(caplog)) == 1
    while -1 not in h.selector.channels:
        h.clock.advance(50)
        h.poll()
    h.handshake(-1)
    back = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.INFO and "node -1" in r.getMessage()
    ]
    assert any("reachable again after" in text for text in back), back
    caplog.clear()
    h.selector.fail(-1, ConnectionResetError(104, "Connection reset by peer"))
    h.poll()
    _refuse_bootstrap_for(h, 5_000)
    # A new run of failures starts with a full warning, not a summary.
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "more failed attempt" not in warnings[0], warnings


def test_a_connection_setup_timeout_is_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=_NC_LOGGER)
    h = Harness(
        socket_connection_setup_timeout_ms=1_000, socket_connection_setup_timeout_max_ms=1_000
    )
    h.poll()
    h.clock.advance(1_000)
    h.poll()
    assert h.client.connection_state(-1) is ConnectionState.DISCONNECTED
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "was not ready within 1000 ms" in warnings[0]


def _infos(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]


def test_a_lost_connection_that_comes_back_says_reconnected_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=_NC_LOGGER)
    h = Harness(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1_000)
    h.bootstrap_metadata()
    h.connect_ready(1)
    caplog.clear()
    # A broker restart: the READY connection is reset, the next dial is refused, the one after
    # that succeeds.
    h.selector.fail(1, ConnectionResetError(104, "Connection reset by peer"))
    h.poll()
    h.clock.advance(100)
    assert not h.client.ready(1, h.now)  # dials again
    h.selector.fail(1, ConnectionRefusedError(111, "Connection refused"))
    h.poll()
    h.clock.advance(1_000)
    assert not h.client.ready(1, h.now)
    h.handshake(1)
    assert h.client.ready(1, h.now)
    reconnected = [t for t in _infos(caplog) if "reconnected" in t]
    assert len(reconnected) == 1, _infos(caplog)
    assert reconnected[0].startswith("node 1 (") and "1 failed attempt(s)" in reconnected[0]
    # The refused dial in between was warned in full (a run's first failure).
    warnings = _warnings(caplog)
    assert len(warnings) == 1 and "more failed attempt" not in warnings[0], warnings
    # A loss that reconnects at the first dial is reported too, once.
    caplog.clear()
    h.selector.fail(1, ConnectionResetError(104, "Connection reset by peer"))
    h.poll()
    h.clock.advance(100)
    assert not h.client.ready(1, h.now)
    h.handshake(1)
    reconnected = [t for t in _infos(caplog) if "reconnected" in t]
    assert len(reconnected) == 1 and "0 failed attempt(s)" in reconnected[0], _infos(caplog)
    assert _warnings(caplog) == []


class _ShortTokens:
    """Tokens living 30 ms of wall time, numbered: a renewed session must carry a newer one."""

    def __init__(self) -> None:
        self.count = 0

    def fetch(self) -> OAuthBearerToken:
        self.count += 1
        return OAuthBearerToken(f"token-{self.count}", expires_at_ms=int(time.time() * 1000) + 30)

    def describe(self) -> str:
        return "short tokens"


def test_an_oauthbearer_session_is_reauthenticated_in_band_with_the_current_token() -> None:
    source = _ShortTokens()
    h = Harness(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauthbearer={"sasl.oauthbearer.token.provider": source},
    )
    try:
        h.poll()
        h.handshake(-1)
        h.selector.reply(-1, SaslHandshakeResponse(0, ["OAUTHBEARER"]))
        h.poll()
        first = h.selector.requests(-1)[-1]
        assert first.body == SaslAuthenticateRequest(
            auth_bytes=b"n,,\x01auth=Bearer token-1\x01\x01"
        )
        h.selector.reply(-1, SaslAuthenticateResponse(0, None, b"", 10_000))
        h.poll()
        h.selector.reply(-1, _metadata_response())
        h.poll()
        h.poll()
        assert not h.client.ready(1, h.now)
        _authenticate(h, 1, "OAUTHBEARER")
        assert h.client.ready(1, h.now)
        attempts = h.selector.connect_attempts.count(1)
        done: list[ClientResponse] = []
        h.client.send(_request(1, h.now, done), h.now)
        time.sleep(0.05)  # the token of the first session has expired meanwhile
        h.clock.advance(9_500)
        h.poll()
        assert h.client.connection_state(1) is ConnectionState.READY  # drains first
        h.selector.reply(1, _metadata_response())
        h.poll()
        assert len(done) == 1 and not done[0].disconnected
        assert h.client.connection_state(1) is ConnectionState.REAUTHENTICATING
        h.selector.reply(1, SaslHandshakeResponse(0, ["OAUTHBEARER"]))
        h.poll()
        renewed = h.selector.requests(1)[-1]
        assert renewed.api_key is ApiKey.SASL_AUTHENTICATE
        sent = renewed.body.auth_bytes
        assert sent.startswith(b"n,,\x01auth=Bearer token-")
        assert b"token-1\x01" not in sent
        h.selector.reply(1, SaslAuthenticateResponse(0, None, b"", 10_000))
        h.poll()
        assert h.client.ready(1, h.now)
        assert 1 not in h.selector.closed
        assert h.selector.connect_attempts.count(1) == attempts
        assert h.client.connection_stats().reauthentications == 1
    finally:
        h.client.close()
    assert live_logins() == []
