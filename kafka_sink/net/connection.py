"""Sans-IO state machine of one broker connection: bytes in, bytes out, no sockets, no clock.

Theory of operation. The network client owns the socket; this object owns everything Kafka about
the byte streams on it. The caller reports transport events and moves bytes:

- :meth:`BrokerConnection.connection_made` once the TCP (and TLS) channel is up;
- :meth:`BrokerConnection.data_to_send` returns bytes the connection itself wants written
  (ApiVersions and SASL requests during setup);
- :meth:`BrokerConnection.send` frames a caller request (READY only) and returns its bytes;
- :meth:`BrokerConnection.receive_data` takes whatever arrived (any split: partial frames,
  several frames) and returns the caller requests it completed, in send order;
- :meth:`BrokerConnection.close` returns the caller requests still waiting for a response.

States: ``DISCONNECTED -> CONNECTING -> CHECKING_API_VERSIONS -> [AUTHENTICATING] -> READY``,
and with SASL ``READY -> REAUTHENTICATING -> READY`` for KIP-368 re-authentication.
ApiVersions goes first (the broker allows it before authentication) so that the SASL requests
are sent at versions the broker speaks; SASL (SaslHandshake v1, then SaslAuthenticate tokens) runs
only when credentials are configured. :meth:`BrokerConnection.begin_reauthentication` runs the same
SaslHandshake + SaslAuthenticate exchange again on the same channel, with a fresh mechanism (so
OAUTHBEARER sends the login's current token), keeping the negotiated versions (Java's client does
not repeat ApiVersions either).

Invariants:

- A broker answers requests on one connection in the order they were sent, so responses are
  matched against the head of a FIFO of in-flight requests; any other correlation id is a
  :class:`~kafka_sink.errors.ProtocolError` and the caller must drop the connection.
- Requests sent with ``expect_response=False`` (Produce with acks=0) never enter that FIFO: the
  broker sends nothing back for them.
- The finalized features of the ApiVersions answer (``finalized_features``, e.g.
  ``transaction.version``, which picks the transaction protocol) are kept with the versions.
- Negotiated versions belong to this connection only and are forgotten on close; a reconnect
  negotiates again (brokers can differ during a rolling upgrade).
- A protocol fault found by :meth:`receive_data` (kept in :attr:`BrokerConnection.failure`)
  leaves the connection unusable: the caller closes it, and every caller request is either
  completed or returned by :meth:`BrokerConnection.close`, never lost.
- Credentials (passwords, OAUTHBEARER tokens) are never shown in ``repr`` or exception text;
  a failed SASL exchange's error carries the broker's message and what the mechanism adds
  (OAUTHBEARER: where the token came from and the broker's error JSON).
- ``session_lifetime_ms`` is the broker's KIP-368 session lifetime from the last successful
  SaslAuthenticate (0: none); the network client re-authenticates before it ends.
- Re-authentication starts only on a READY connection with nothing in flight (the caller drains
  it first), so every answer on the channel during it is a SASL one; caller requests cannot be
  sent until it succeeds. Its failure is kept in :attr:`BrokerConnection.failure` like any other
  and the caller closes the connection.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Generic, TypeVar

from kafka_sink.errors import (
    KafkaError,
    ProtocolError,
    SaslAuthenticationError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_sink.net.sasl import SaslConfig, SaslMechanism, create_mechanism
from kafka_sink.wire.api import CLIENT_VERSIONS, ApiKey, negotiate
from kafka_sink.wire.framing import FrameDecoder
from kafka_sink.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka_sink.wire.protocol import correlation_id_of, decode_response, encode_request_frame

__all__ = [
    "CLIENT_SOFTWARE_NAME",
    "CLIENT_SOFTWARE_VERSION",
    "BrokerConnection",
    "ConnectionState",
    "InFlightRequest",
]

log = logging.getLogger(__name__)

CLIENT_SOFTWARE_NAME = "pykafka-sink"
CLIENT_SOFTWARE_VERSION = "0.1.0"

_UNSUPPORTED_VERSION = 35
_MAX_CORRELATION_ID = 2**31 - 1

T = TypeVar("T")


class ConnectionState(Enum):
    DISCONNECTED = "DISCONNECTED"
    CONNECTING = "CONNECTING"
    CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
    AUTHENTICATING = "AUTHENTICATING"
    READY = "READY"
    # KIP-368: authenticating again on an established connection (versions stay negotiated).
    REAUTHENTICATING = "REAUTHENTICATING"


@dataclass(eq=False)
class InFlightRequest(Generic[T]):
    """A request whose bytes were produced and whose response (if any) is awaited."""

    correlation_id: int
    request: Any
    api_version: int
    expect_response: bool
    sent_ms: int
    context: T | None = None
    internal: bool = field(default=False, repr=False)


class BrokerConnection(Generic[T]):
    """Kafka-level state of one connection to one broker; ``T`` is the caller's request context."""

    def __init__(
        self,
        node_id: int,
        *,
        client_id: str | None,
        max_frame_size: int = 100 * 1024 * 1024,
        sasl: SaslConfig | None = None,
        client_software_name: str = CLIENT_SOFTWARE_NAME,
        client_software_version: str = CLIENT_SOFTWARE_VERSION,
    ) -> None:
        self.node_id = node_id
        self._client_id = client_id
        self._max_frame_size = max_frame_size
        self._sasl = sasl
        self._software = (client_software_name, client_software_version)
        self.state = ConnectionState.DISCONNECTED
        self._decoder = FrameDecoder(max_frame_size)
        self._in_flight: deque[InFlightRequest[T]] = deque()
        self._outgoing: list[bytes] = []
        self._next_correlation_id = 0
        self._now_ms = 0
        self._mechanism: SaslMechanism | None = None
        self.failure: KafkaError | None = None
        self.broker_api_ranges: dict[int, tuple[int, int]] = {}
        self.api_versions: dict[ApiKey, int] = {}
        # Finalized feature name -> max version level, from the last ApiVersions v3+ answer.
        self.finalized_features: dict[str, int] = {}
        self.session_lifetime_ms = 0

    # ------------------------------------------------------------------ transport events

    def connecting(self) -> None:
        """A transport connection attempt started; forget everything about the previous one."""
        self._reset()
        self.state = ConnectionState.CONNECTING

    def connection_made(self, now_ms: int) -> None:
        """The channel is up: start the ApiVersions exchange."""
        if self.state is not ConnectionState.CONNECTING:
            raise ProtocolError(f"connection_made in state {self.state.name}")
        self._now_ms = now_ms
        self.state = ConnectionState.CHECKING_API_VERSIONS
        self._send_api_versions(CLIENT_VERSIONS[ApiKey.API_VERSIONS][1])

    def close(self) -> list[InFlightRequest[T]]:
        """The channel is gone: return the caller requests that will never be answered."""
        pending = [r for r in self._in_flight if not r.internal]
        self._reset()
        self.state = ConnectionState.DISCONNECTED
        return pending

    def begin_reauthentication(self, now_ms: int) -> None:
        """Start SaslHandshake + SaslAuthenticate again on this READY, drained connection."""
        if self._sasl is None or self.state is not ConnectionState.READY or self._in_flight:
            raise ProtocolError(
                f"node {self.node_id}: cannot re-authenticate in state {self.state.name} "
                f"with {len(self._in_flight)} request(s) in flight"
            )
        self._now_ms = now_ms
        self.state = ConnectionState.REAUTHENTICATING
        self._send_sasl_handshake()

    @property
    def mechanism_name(self) -> str:
        """The SASL mechanism of this connection ("-" without SASL)."""
        return self._sasl_name()

    # ------------------------------------------------------------------ caller requests

    @property
    def is_ready(self) -> bool:
        return self.state is ConnectionState.READY

    def in_flight_count(self) -> int:
        """Caller requests awaiting a response (internal setup requests are not counted)."""
        return sum(1 for r in self._in_flight if not r.internal)

    def in_flight(self) -> list[InFlightRequest[T]]:
        """Caller requests awaiting a response, oldest first."""
        return [r for r in self._in_flight if not r.internal]

    def oldest_sent_ms(self) -> int | None:
        return self._in_flight[0].sent_ms if self._in_flight else None

    def api_version(self, api_key: ApiKey) -> int | None:
        """The version negotiated for ``api_key``, or None (not negotiated yet or unusable)."""
        return self.api_versions.get(api_key)

    def send(
        self,
        request: Any,
        version: int,
        now_ms: int,
        *,
        context: T | None = None,
        expect_response: bool = True,
    ) -> tuple[InFlightRequest[T], bytes]:
        """Frame ``request`` at ``version``; returns its in-flight record and the bytes to write."""
        if self.state is not ConnectionState.READY:
            raise ProtocolError(f"cannot send on node {self.node_id} in state {self.state.name}")
        record, data = self._frame(
            request,
            version,
            now_ms,
            expect_response=expect_response,
            context=context,
            internal=False,
        )
        return record, data

    def data_to_send(self) -> bytes:
        """Bytes the connection itself queued (setup requests); empty when there are none."""
        if not self._outgoing:
            return b""
        data = b"".join(self._outgoing)
        self._outgoing.clear()
        return data

    def receive_data(
        self, data: bytes | memoryview, now_ms: int
    ) -> list[tuple[InFlightRequest[T], Any]]:
        """Feed received bytes; returns completed caller requests with their decoded responses.

        When the bytes break the protocol (bad frame, correlation mismatch, failed version
        negotiation or authentication), the requests completed before the fault are still
        returned and the error is kept in :attr:`failure`; the caller must then close the
        connection (its remaining requests come back from :meth:`close`).
        """
        self._now_ms = now_ms
        completed: list[tuple[InFlightRequest[T], Any]] = []
        if self.failure is not None:
            return completed
        try:
            for payload in self._decoder.feed(data):
                self._receive_payload(payload, completed)
        except KafkaError as exc:
            self.failure = exc
        return completed

    def _receive_payload(
        self, payload: bytes, completed: list[tuple[InFlightRequest[T], Any]]
    ) -> None:
        correlation_id = correlation_id_of(payload)
        if not self._in_flight:
            raise ProtocolError(
                f"node {self.node_id} sent a response (correlation id {correlation_id}) "
                "with no request in flight"
            )
        head = self._in_flight[0]
        if correlation_id != head.correlation_id:
            raise ProtocolError(
                f"node {self.node_id}: correlation id {correlation_id} does not match the "
                f"oldest in-flight request ({head.correlation_id}, {type(head.request).__name__})"
            )
        self._in_flight.popleft()
        if head.internal:
            self._handle_internal(head, payload)
            return
        try:
            _cid, response = decode_response(type(head.request), head.api_version, payload)
        except KafkaError:
            # Keep the request so that close() fails it instead of losing it.
            self._in_flight.appendleft(head)
            raise
        completed.append((head, response))

    # ------------------------------------------------------------------ internals

    def _reset(self) -> None:
        self._decoder = FrameDecoder(self._max_frame_size)
        self._in_flight.clear()
        self._outgoing.clear()
        self._mechanism = None
        self.failure = None
        self.broker_api_ranges = {}
        self.api_versions = {}
        self.finalized_features = {}
        self.session_lifetime_ms = 0

    def _frame(
        self,
        request: Any,
        version: int,
        now_ms: int,
        *,
        expect_response: bool,
        context: T | None,
        internal: bool,
    ) -> tuple[InFlightRequest[T], bytes]:
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (
            0 if correlation_id >= _MAX_CORRELATION_ID else correlation_id + 1
        )
        data = encode_request_frame(request, version, correlation_id, self._client_id)
        record: InFlightRequest[T] = InFlightRequest(
            correlation_id=correlation_id,
            request=request,
            api_version=version,
            expect_response=expect_response,
            sent_ms=now_ms,
            context=context,
            internal=internal,
        )
        if expect_response:
            self._in_flight.append(record)
        return record, data

    def _send_internal(self, request: Any, version: int) -> None:
        _record, data = self._frame(
            request, version, self._now_ms, expect_response=True, context=None, internal=True
        )
        self._outgoing.append(data)

    def _send_api_versions(self, version: int) -> None:
        name, software_version = self._software
        self._send_internal(
            ApiVersionsRequest(client_software_name=name, client_software_version=software_version),
            version,
        )

    def _handle_internal(self, head: InFlightRequest[T], payload: bytes) -> None:
        if isinstance(head.request, ApiVersionsRequest):
            self._on_api_versions(head, payload)
        elif isinstance(head.request, SaslHandshakeRequest):
            _cid, response = decode_response(SaslHandshakeRequest, head.api_version, payload)
            assert isinstance(response, SaslHandshakeResponse)
            self._on_sasl_handshake(response)
        elif isinstance(head.request, SaslAuthenticateRequest):
            _cid, response = decode_response(SaslAuthenticateRequest, head.api_version, payload)
            assert isinstance(response, SaslAuthenticateResponse)
            self._on_sasl_authenticate(response)
        else:  # pragma: no cover - only the three types above are sent internally
            raise ProtocolError(f"unexpected internal request {type(head.request).__name__}")

    def _on_api_versions(self, head: InFlightRequest[T], payload: bytes) -> None:
        _cid, response = decode_response(ApiVersionsRequest, head.api_version, payload)
        assert isinstance(response, ApiVersionsResponse)
        if response.error_code == _UNSUPPORTED_VERSION and head.api_version > 0:
            # The broker does not know our version; it answered in the v0 layout (decoded as
            # such by the wire layer) listing its own ApiVersions range, if it is 2.4+.
            broker_max = 0
            for entry in response.api_keys:
                if entry.api_key == ApiKey.API_VERSIONS:
                    broker_max = entry.max_version
            retry_version = max(min(broker_max, head.api_version - 1), 0)
            log.debug(
                "node %s does not support ApiVersions v%s; retrying with v%s",
                self.node_id,
                head.api_version,
                retry_version,
            )
            self._send_api_versions(retry_version)
            return
        if response.error_code != 0:
            error = error_for_code(response.error_code, f"ApiVersions v{head.api_version}")
            raise error if error is not None else ProtocolError("ApiVersions failed")
        self.broker_api_ranges = {
            int(e.api_key): (int(e.min_version), int(e.max_version)) for e in response.api_keys
        }
        self.api_versions = negotiate(self.broker_api_ranges)
        self.finalized_features = {
            f.name: int(f.max_version_level) for f in response.finalized_features or ()
        }
        if self._sasl is None:
            self.state = ConnectionState.READY
            return
        self.state = ConnectionState.AUTHENTICATING
        for needed in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            if needed not in self.api_versions:
                raise UnsupportedVersionError(
                    f"node {self.node_id} supports no {needed.name} version this client speaks"
                )
        if self.api_versions[ApiKey.SASL_HANDSHAKE] < 1:
            raise UnsupportedVersionError(
                f"node {self.node_id} only supports SaslHandshake v0 (legacy SASL framing)"
            )
        self._send_sasl_handshake()

    def _send_sasl_handshake(self) -> None:
        assert self._sasl is not None
        self._send_internal(
            SaslHandshakeRequest(mechanism=self._sasl.mechanism),
            min(self.api_versions[ApiKey.SASL_HANDSHAKE], 1),
        )

    def _on_sasl_handshake(self, response: SaslHandshakeResponse) -> None:
        assert self._sasl is not None
        if response.error_code != 0:
            enabled = ", ".join(response.mechanisms or [])
            raise _sasl_error(
                response.error_code,
                f"node {self.node_id} refused mechanism {self._sasl.mechanism} "
                f"(enabled: {enabled or 'none'})",
            )
        self._mechanism = create_mechanism(self._sasl)
        self._send_sasl_token(self._mechanism.initial_response())

    def _send_sasl_token(self, token: bytes) -> None:
        self._send_internal(
            SaslAuthenticateRequest(auth_bytes=token), self.api_versions[ApiKey.SASL_AUTHENTICATE]
        )

    def _on_sasl_authenticate(self, response: SaslAuthenticateResponse) -> None:
        assert self._mechanism is not None
        if response.error_code != 0:
            message = response.error_message or "authentication failed"
            detail = self._mechanism.failure_detail(message)
            raise _sasl_error(
                response.error_code,
                f"node {self.node_id}: {message}" + (f" ({detail})" if detail else ""),
            )
        token = self._mechanism.evaluate(bytes(response.auth_bytes or b""))
        if token is not None:
            self._send_sasl_token(token)
            return
        if not self._mechanism.complete:  # pragma: no cover - mechanisms end with None
            raise SaslAuthenticationError(f"node {self.node_id}: SASL exchange ended early")
        self.session_lifetime_ms = int(getattr(response, "session_lifetime_ms", 0) or 0)
        self._mechanism = None
        again = "re-" if self.state is ConnectionState.REAUTHENTICATING else ""
        self.state = ConnectionState.READY
        log.debug(
            "node %s: SASL %s %sauthentication succeeded", self.node_id, self._sasl_name(), again
        )

    def _sasl_name(self) -> str:
        return self._sasl.mechanism if self._sasl is not None else "-"

    def __repr__(self) -> str:
        return (
            f"BrokerConnection(node_id={self.node_id}, state={self.state.name}, "
            f"in_flight={len(self._in_flight)}, sasl={self._sasl_name()})"
        )


def _sasl_error(code: int, message: str) -> KafkaError:
    error = error_for_code(code, message)
    if error is None:  # pragma: no cover - callers check code != 0
        return SaslAuthenticationError(message)
    if isinstance(error, SaslAuthenticationError):
        return error
    # Other codes during authentication (e.g. ILLEGAL_SASL_STATE variants) still mean "not
    # authenticated"; keep the broker's class but make the type testable as a SASL failure.
    return SaslAuthenticationError(str(error))


def negotiated_versions_summary(versions: Mapping[ApiKey, int]) -> str:
    """A compact ``NAME=vN`` list for debug logs."""
    return ", ".join(f"{key.name}=v{v}" for key, v in sorted(versions.items()))
