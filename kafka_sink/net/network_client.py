"""NetworkClient: connections to every broker, request/response bookkeeping, metadata refresh.

Theory of operation (Java's ``NetworkClient`` + ``ClusterConnectionStates`` +
``DefaultMetadataUpdater``). The sender thread drives everything through :meth:`poll`:

1. the :class:`MetadataUpdater` sends a Metadata request to the least loaded node when an update
   was requested or the metadata aged past ``metadata.max.age.ms`` (connecting first if needed);
2. the selector waits for I/O, bounded by the caller's timeout and by the next connection-setup
   or request deadline, so timeouts fire on time even when the network is silent;
3. written acks=0 requests complete, received bytes complete requests in send order, finished
   connects start the ApiVersions (and SASL) exchange, lost connections fail their in-flight
   requests with ``disconnected=True``;
4. connections that did not become ready within ``socket.connection.setup.timeout.ms`` (growing
   exponentially per consecutive failure up to the ``.max`` setting), connections with a request
   older than ``request.timeout.ms`` and re-authentications unanswered for that long are closed,
   failing their requests (``timed_out=True``);
5. idle connections close, and drained connections whose session is ending start re-authenticating;
6. callbacks run, and the completed responses are returned.

Every node has a connection state. A lost or failed connection waits ``reconnect.backoff.ms``
(doubling per consecutive failure, +-20 % jitter, capped at ``reconnect.backoff.max.ms``) before
:meth:`NetworkClient.ready` may dial it again; a connection that reached READY resets that count.
A connection that cannot be established is warned about once, then at most once a minute per
node while it stays unreachable (``connect_warnings``); a lost READY connection is INFO.

Thread model: :meth:`poll`, :meth:`ready`, :meth:`send` and the other methods run on the sender
thread only. :meth:`wakeup`, :meth:`connection_stats` (an immutable snapshot, replaced whole) and
the :class:`~kafka_sink.net.metadata.Metadata` object are the only entry points safe from other
threads.

Invariants:

- At most ``max.in.flight.requests.per.connection`` requests await a response per node, and a new
  request is accepted only once the previous bytes left the socket buffer.
- Every request passed to :meth:`send` completes exactly once: with a response, with a
  disconnect/timeout, or (acks=0) when written; its callback runs on the sender thread inside
  :meth:`poll`.
- Any disconnect makes a metadata refresh due (the leader may have moved); a disconnect from the
  node serving the in-progress Metadata request counts as a failed refresh (backoff applies).
- A TLS error before a connection is READY (a failed handshake, or with TLS 1.3 the broker's
  alert rejecting our certificate, read just after it) is an
  :class:`~kafka_sink.errors.SslAuthenticationError` naming the node, its address and the
  setting to check; like SASL failures it is fatal for metadata waiters (Java's
  ``SslAuthenticationException``), so a send fails at once instead of after ``max.block.ms``.
- Why the last attempt to set up a node's connection failed (unreachable, a TLS refusal, a SASL
  token the broker refused or the token source could not give) is kept until a connection to it
  becomes ready (:meth:`NetworkClient.last_connect_error`), so that work expiring for want of
  that node can say why.
- Unreachable brokers never make :meth:`poll` hang: connects are bounded by the setup timeout and
  the failure reason is recorded in the metadata (shown when a caller's wait for metadata ends).
- KIP-368 re-authentication keeps the connection, as Java's client does. When SaslAuthenticate
  granted a session lifetime, the connection is re-authenticated at a random 85-95 % of it: from
  then on it takes no new request, its in-flight requests complete (bounded by their
  ``request.timeout.ms``, their answers delivered as usual), then SaslHandshake + SaslAuthenticate
  run again on the same socket (OAUTHBEARER with the login's current token), bounded by
  ``request.timeout.ms``, and requests resume. An idle connection re-authenticates on time too
  (the exchange does not count as activity for ``connections.max.idle.ms``). A failed, timed
  out or interrupted re-authentication closes the connection with an error naming the node, its
  address and the mechanism (and for OAUTHBEARER the token's source, never a secret); refused
  credentials are a :class:`~kafka_sink.errors.SaslAuthenticationError`, fatal for metadata
  waiters as at connection setup (Java does the same), the rest a
  :class:`~kafka_sink.errors.KafkaConnectionError`; the next connection follows the usual
  reconnect backoff. :meth:`NetworkClient.connection_stats` counts connections created and
  re-authentications.
"""

from __future__ import annotations

import logging
import random
import ssl
from dataclasses import dataclass, replace

from kafka_sink.clock import Clock
from kafka_sink.errors import (
    AuthenticationError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SaslAuthenticationError,
    SslAuthenticationError,
    UnsupportedVersionError,
)
from kafka_sink.net.client_request import ClientRequest, ClientResponse
from kafka_sink.net.config import NetworkConfig, parse_bootstrap_servers
from kafka_sink.net.connect_warnings import ConnectFailureLog
from kafka_sink.net.connection import BrokerConnection, ConnectionState
from kafka_sink.net.metadata import ExponentialBackoff, Metadata
from kafka_sink.net.metadata_updater import MetadataUpdater
from kafka_sink.net.oauth.login import OAuthBearerLogin, release_login
from kafka_sink.net.selector import Address, PollResult, Selector, resolve
from kafka_sink.net.tls import describe_tls_failure, is_tls_failure
from kafka_sink.wire.api import ApiKey

__all__ = [
    "ClientRequest",
    "ClientResponse",
    "ConnectionStats",
    "MetadataUpdater",
    "NetworkClient",
    "NetworkConfig",
    "parse_bootstrap_servers",
]

log = logging.getLogger(__name__)

_NO_DEADLINE = 2**63 - 1
# States in which a connection's negotiated API versions hold.
_NEGOTIATED = (ConnectionState.READY, ConnectionState.REAUTHENTICATING)


@dataclass(frozen=True)
class ConnectionStats:
    """Cumulative connection counts of one client (Java's selector counters of the same names:
    ``connection-creation-total``, ``successful-reauthentication-total``,
    ``failed-reauthentication-total``, ``reauthentication-latency-avg/max``)."""

    #: Connections whose TCP (and TLS) channel came up.
    created: int = 0
    #: KIP-368 re-authentications that succeeded on a kept connection.
    reauthentications: int = 0
    #: Re-authentications that failed or timed out (their connection was closed).
    failed_reauthentications: int = 0
    #: Sum and maximum of the successful re-authentications' durations, in ms.
    reauthentication_ms_total: int = 0
    reauthentication_ms_max: int = 0

    @property
    def reauthentication_ms_avg(self) -> float:
        """The successful re-authentications' mean duration (NaN without any)."""
        if not self.reauthentications:
            return float("nan")
        return self.reauthentication_ms_total / self.reauthentications


class _NodeState:
    """Connection bookkeeping for one node (Java's ``NodeConnectionState``)."""

    __slots__ = (
        "address_index",
        "addresses",
        "connection",
        "failed_attempts",
        "last_activity_ms",
        "last_attempt_ms",
        "last_connect_error",
        "reauthenticate_at_ms",
        "reauthentication_started_ms",
        "reconnect_backoff_ms",
        "resolved_for",
        "setup_timeout_ms",
        "throttle_until_ms",
        "unwritten",
    )

    def __init__(self, connection: BrokerConnection[ClientRequest]) -> None:
        self.connection = connection
        self.failed_attempts = 0
        # Why the last attempt to set up a connection failed (None once one became ready).
        self.last_connect_error: KafkaError | None = None
        self.last_attempt_ms: int | None = None
        self.last_activity_ms = 0
        self.reconnect_backoff_ms = 0
        self.setup_timeout_ms = 0
        self.addresses: list[Address] = []
        self.address_index = 0
        self.resolved_for = ""  # "host:port" that ``addresses`` belong to
        # KIP-219: a broker that throttled us already answered; we must not send until this time.
        self.throttle_until_ms = 0
        # KIP-368: past this time the connection drains, then authenticates again in-band.
        self.reauthenticate_at_ms: int | None = None
        # When the running re-authentication started (None: none running).
        self.reauthentication_started_ms: int | None = None
        # acks=0 requests whose bytes are still queued in the selector, by correlation id.
        self.unwritten: dict[int, ClientRequest] = {}

    @property
    def state(self) -> ConnectionState:
        return self.connection.state


class NetworkClient:
    """Java's ``NetworkClient`` over :class:`~kafka_sink.net.selector.Selector`."""

    def __init__(
        self,
        config: NetworkConfig,
        metadata: Metadata,
        clock: Clock,
        *,
        selector: Selector | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.metadata = metadata
        self._clock = clock
        self._selector = selector or Selector()
        self._rng = rng or random.Random()
        self._reconnect_backoff = ExponentialBackoff(
            config.reconnect_backoff_ms, config.reconnect_backoff_max_ms, rng=self._rng
        )
        self._setup_timeout = ExponentialBackoff(
            config.socket_connection_setup_timeout_ms,
            config.socket_connection_setup_timeout_max_ms,
            rng=self._rng,
        )
        # With OAUTHBEARER this holds the process's login for these settings (released on close).
        self._sasl = config.sasl_config()
        self._ssl_context = config.ssl_context()
        self._nodes: dict[int, _NodeState] = {}
        self._completed: list[ClientResponse] = []
        self._updater = MetadataUpdater(self, metadata, config)
        self._connect_failures = ConnectFailureLog(log)
        self._closed = False
        self._bootstrapped = False
        self._became_ready = False
        self._stats = ConnectionStats()

    # ------------------------------------------------------------------ setup

    def bootstrap(self, now_ms: int) -> None:
        """Seed the metadata with the bootstrap servers; the first poll fetches real metadata."""
        servers = parse_bootstrap_servers(self.config.bootstrap_servers)
        self.metadata.bootstrap(servers)
        self.metadata.request_update()
        self._bootstrapped = True
        log.debug("bootstrapping from %s at %s ms", servers, now_ms)

    # ------------------------------------------------------------------ node states

    def _node_state(self, node_id: int) -> _NodeState:
        state = self._nodes.get(node_id)
        if state is None:
            connection: BrokerConnection[ClientRequest] = BrokerConnection(
                node_id,
                client_id=self.config.client_id,
                max_frame_size=self.config.max_frame_size,
                sasl=self._sasl,
            )
            state = _NodeState(connection)
            self._nodes[node_id] = state
        return state

    def connection_state(self, node_id: int) -> ConnectionState:
        state = self._nodes.get(node_id)
        return ConnectionState.DISCONNECTED if state is None else state.state

    def can_connect(self, node_id: int, now_ms: int) -> bool:
        """Disconnected and past its reconnect backoff."""
        state = self._nodes.get(node_id)
        if state is None:
            return True
        if state.state is not ConnectionState.DISCONNECTED:
            return False
        return (
            state.last_attempt_ms is None
            or now_ms - state.last_attempt_ms >= state.reconnect_backoff_ms
        )

    def is_any_node_connecting(self) -> bool:
        return any(
            s.state
            in (
                ConnectionState.CONNECTING,
                ConnectionState.CHECKING_API_VERSIONS,
                ConnectionState.AUTHENTICATING,
                # A connection authenticating again is waited for like one being set up.
                ConnectionState.REAUTHENTICATING,
            )
            for s in self._nodes.values()
        )

    def is_any_node_ready(self) -> bool:
        return any(s.state is ConnectionState.READY for s in self._nodes.values())

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        """Ms to wait before trying ``node_id`` again.

        Disconnected: the rest of the reconnect backoff. Throttled by the broker: the rest of
        the throttle time. Connecting, or ready and waiting for I/O: a very large value (I/O
        events end the wait).
        """
        state = self._nodes.get(node_id)
        if state is None or state.last_attempt_ms is None:
            return 0
        if state.state is ConnectionState.DISCONNECTED:
            return max(state.last_attempt_ms + state.reconnect_backoff_ms - now_ms, 0)
        if state.state is ConnectionState.READY and now_ms < state.throttle_until_ms:
            return state.throttle_until_ms - now_ms
        return _NO_DEADLINE

    def last_connect_error(self, node_id: int) -> KafkaError | None:
        """Why the last attempt to connect to ``node_id`` failed (an unreachable address, a
        refused TLS handshake or SASL token...), or None when its last connection became ready."""
        state = self._nodes.get(node_id)
        return None if state is None else state.last_connect_error

    def throttle_delay(self, node_id: int, now_ms: int) -> int:
        """Ms until a broker-imposed throttle on ``node_id`` ends (0: not throttled)."""
        state = self._nodes.get(node_id)
        return 0 if state is None else max(state.throttle_until_ms - now_ms, 0)

    def is_connection_failed(self, node_id: int) -> bool:
        """Whether the last attempt to reach ``node_id`` failed (and it is disconnected)."""
        state = self._nodes.get(node_id)
        return (
            state is not None
            and state.state is ConnectionState.DISCONNECTED
            and state.failed_attempts > 0
        )

    def can_send_request(self, node_id: int, now_ms: int) -> bool:
        state = self._nodes.get(node_id)
        if state is None or state.state is not ConnectionState.READY:
            return False
        if now_ms < state.throttle_until_ms:
            return False
        if state.reauthenticate_at_ms is not None and now_ms >= state.reauthenticate_at_ms:
            return False
        if self._selector.pending_send_bytes(node_id) > 0:
            return False
        return self.in_flight_count(node_id) < self.config.max_in_flight

    def is_ready(self, node_id: int, now_ms: int) -> bool:
        """Connected, negotiated, below the in-flight cap, and no metadata refresh pending.

        A due metadata refresh makes every node look busy so that the refresh goes out first
        (as in Java).
        """
        return not self._updater.is_update_due(now_ms) and self.can_send_request(node_id, now_ms)

    def ready(self, node_id: int, now_ms: int) -> bool:
        """:meth:`is_ready`, and start connecting when disconnected and allowed to."""
        if self.is_ready(node_id, now_ms):
            return True
        if self.can_connect(node_id, now_ms):
            self.initiate_connect(node_id, now_ms)
        return False

    def in_flight_count(self, node_id: int | None = None) -> int:
        """Requests awaiting a response (or acks=0 requests awaiting their write)."""
        if node_id is None:
            return sum(self.in_flight_count(n) for n in self._nodes)
        state = self._nodes.get(node_id)
        if state is None:
            return 0
        return state.connection.in_flight_count() + len(state.unwritten)

    def has_in_flight_requests(self) -> bool:
        return any(self.in_flight_count(n) for n in self._nodes)

    def api_version(self, node_id: int, api_key: ApiKey) -> int | None:
        """The version of ``api_key`` negotiated with ``node_id`` (None when not connected)."""
        state = self._nodes.get(node_id)
        if state is None or state.state not in _NEGOTIATED:
            return None
        return state.connection.api_version(api_key)

    def finalized_feature_level(self, node_id: int, name: str) -> int | None:
        """The finalized max level of feature ``name`` (e.g. ``transaction.version``) as
        ``node_id`` last reported it in ApiVersions; None when not connected or not finalized."""
        state = self._nodes.get(node_id)
        if state is None or state.state not in _NEGOTIATED:
            return None
        return state.connection.finalized_features.get(name)

    def least_loaded_node(self, now_ms: int) -> int | None:
        """The known node with the fewest in-flight requests (Java's ``leastLoadedNode``).

        Prefers a ready node (an idle one at once), then one that is connecting, then the
        disconnected node whose last attempt is oldest and whose backoff has passed.
        """
        nodes = self.metadata.nodes()
        if not nodes:
            return None
        offset = self._rng.randrange(len(nodes))
        best: int | None = None
        best_in_flight = _NO_DEADLINE
        connecting: int | None = None
        can_connect: int | None = None
        can_connect_attempt = _NO_DEADLINE
        for i in range(len(nodes)):
            node_id = nodes[(offset + i) % len(nodes)].node_id
            state = self._nodes.get(node_id)
            if self.can_send_request(node_id, now_ms):
                in_flight = self.in_flight_count(node_id)
                if in_flight == 0:
                    return node_id
                if in_flight < best_in_flight:
                    best, best_in_flight = node_id, in_flight
            elif state is not None and state.state not in (
                ConnectionState.DISCONNECTED,
                ConnectionState.READY,
            ):
                connecting = node_id
            elif self.can_connect(node_id, now_ms):
                attempt = (
                    -1 if state is None or state.last_attempt_ms is None else state.last_attempt_ms
                )
                if can_connect is None or attempt < can_connect_attempt:
                    can_connect, can_connect_attempt = node_id, attempt
        if best is not None:
            return best
        if connecting is not None:
            return connecting
        return can_connect

    # ------------------------------------------------------------------ connecting

    def initiate_connect(self, node_id: int, now_ms: int) -> None:
        node = self.metadata.node(node_id)
        state = self._node_state(node_id)
        if node is None:
            log.debug("cannot connect to node %s: not in metadata", node_id)
            return
        state.last_attempt_ms = now_ms
        state.last_activity_ms = now_ms
        state.setup_timeout_ms = self._setup_timeout.backoff_ms(state.failed_attempts)
        state.connection.connecting()
        try:
            if state.address_index >= len(state.addresses) or state.resolved_for != node.address:
                # Resolve again once every address failed, or when the broker moved.
                state.addresses = resolve(node.host, node.port)
                state.address_index = 0
                state.resolved_for = node.address
            address = state.addresses[state.address_index]
            log.debug("connecting to node %s at %s:%s (%s)", node_id, node.host, node.port, address)
            self._selector.connect(
                node_id,
                address,
                send_buffer_bytes=self.config.send_buffer_bytes,
                receive_buffer_bytes=self.config.receive_buffer_bytes,
                ssl_context=self._ssl_context,
                server_hostname=node.host,
            )
        except OSError as exc:
            state.addresses = []
            state.address_index = 0
            error = KafkaConnectionError(
                f"cannot connect to node {node_id} ({node.address}): {_describe(exc)}"
            )
            self._disconnected(node_id, error, now_ms, responses=self._completed)

    # ------------------------------------------------------------------ requests

    def send(self, request: ClientRequest, now_ms: int) -> None:
        """Queue ``request`` to its node; it completes in a later :meth:`poll`.

        Raises :class:`~kafka_sink.errors.IllegalStateError` when the node cannot take a request
        now (check :meth:`ready` first). A version the node does not support completes the
        request with :class:`~kafka_sink.errors.UnsupportedVersionError` at the next poll.
        """
        if self._closed:
            raise IllegalStateError("network client is closed")
        node_id = request.node_id
        if not self.can_send_request(node_id, now_ms):
            raise IllegalStateError(
                f"attempt to send a request to node {node_id}, which is not ready"
            )
        state = self._nodes[node_id]
        connection = state.connection
        api_key = request.api_key
        broker_range = connection.broker_api_ranges.get(int(api_key))
        if request.version is None:
            version = connection.api_version(api_key)
        else:
            version = request.version
            if broker_range is None or not broker_range[0] <= version <= broker_range[1]:
                version = None
        if version is None:
            error = UnsupportedVersionError(
                f"node {node_id} supports {api_key.name} versions "
                f"{broker_range if broker_range else 'none'}, which do not fit "
                f"{request.version if request.version is not None else 'this client'}"
            )
            self._completed.append(ClientResponse(request, None, False, False, error, now_ms))
            return
        request.api_version = version
        request.sent_ms = now_ms
        record, data = connection.send(
            request.request,
            version,
            now_ms,
            context=request,
            expect_response=request.expect_response,
        )
        request.correlation_id = record.correlation_id
        state.last_activity_ms = now_ms
        if request.expect_response:
            self._selector.send(node_id, data)
        else:
            state.unwritten[record.correlation_id] = request
            self._selector.send(node_id, data, token=record.correlation_id)

    def disconnect(self, node_id: int, now_ms: int | None = None) -> None:
        """Close the connection to ``node_id``; its in-flight requests complete as disconnected."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        state = self._nodes.get(node_id)
        if state is None or state.state is ConnectionState.DISCONNECTED:
            return
        self._selector.close(node_id)
        self._disconnected(
            node_id,
            KafkaConnectionError(f"connection to node {node_id} was closed by the client"),
            now,
            responses=self._completed,
            count_failure=False,
        )

    def wakeup(self) -> None:
        """Interrupt a blocking :meth:`poll` (thread-safe)."""
        self._selector.wakeup()

    def close(self) -> None:
        """Close every connection and the selector. In-flight requests are dropped silently."""
        if self._closed:
            return
        self._closed = True
        for node_id in list(self._nodes):
            self._nodes[node_id].connection.close()
        self._selector.close_all()
        if self._sasl is not None and isinstance(self._sasl.oauth, OAuthBearerLogin):
            release_login(self._sasl.oauth)

    @property
    def closed(self) -> bool:
        return self._closed

    def connection_stats(self) -> ConnectionStats:
        """Connections created and KIP-368 re-authentications so far (a snapshot)."""
        return self._stats

    # ------------------------------------------------------------------ poll

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        """Do I/O for up to ``timeout_ms``; return (and call back) the completed requests.

        Callbacks run here, on the calling (sender) thread, in completion order. If one raises,
        the others still run and the first exception propagates from ``poll``.
        """
        if self._closed:
            return []
        if not self._bootstrapped:
            self.bootstrap(now_ms)
        metadata_timeout = self._updater.maybe_update(now_ms)
        wait_ms = min(max(timeout_ms, 0), metadata_timeout, self.config.request_timeout_ms)
        wait_ms = min(wait_ms, max(self._next_deadline_ms(now_ms) - now_ms, 0))
        if self._completed:
            wait_ms = 0
        result = self._selector.poll(wait_ms)
        now = self._clock.now_ms()
        responses, self._completed = self._completed, []
        self._handle_completed_sends(result, now, responses)
        self._handle_receives(result, now, responses)
        self._handle_disconnects(result, now, responses)
        self._handle_connects(result, now, responses)
        self._handle_timed_out_connections(now, responses)
        self._handle_timed_out_requests(now, responses)
        self._close_idle_connections(now)
        self._start_due_reauthentications(now)
        if self._became_ready:
            # A refresh waiting for a connection goes out now rather than one poll later.
            self._became_ready = False
            self._updater.maybe_update(now)
        return self._complete(responses)

    def _next_deadline_ms(self, now_ms: int) -> int:
        deadline = _NO_DEADLINE
        for state in self._nodes.values():
            if state.state is ConnectionState.DISCONNECTED:
                continue
            if state.reauthentication_started_ms is not None:
                deadline = min(
                    deadline, state.reauthentication_started_ms + self.config.request_timeout_ms
                )
            elif state.state is not ConnectionState.READY and state.last_attempt_ms is not None:
                deadline = min(deadline, state.last_attempt_ms + state.setup_timeout_ms)
            if state.reauthenticate_at_ms is not None and state.reauthenticate_at_ms > now_ms:
                # (Once passed, the connection drains; the requests' own deadlines bound that,
                # and the last answer starts the re-authentication in the same poll.)
                deadline = min(deadline, state.reauthenticate_at_ms)
            for request in self._awaiting(state):
                deadline = min(deadline, request.sent_ms + self._timeout_of(request))
        return deadline

    def _timeout_of(self, request: ClientRequest) -> int:
        if request.request_timeout_ms is not None:
            return request.request_timeout_ms
        return self.config.request_timeout_ms

    def _handle_completed_sends(
        self, result: PollResult, now_ms: int, responses: list[ClientResponse]
    ) -> None:
        for node_id, token in result.sent:
            state = self._nodes.get(node_id)
            if state is None:
                continue
            request = state.unwritten.pop(token, None)
            if request is not None:
                responses.append(ClientResponse(request, None, False, False, None, now_ms))

    def _handle_receives(
        self, result: PollResult, now_ms: int, responses: list[ClientResponse]
    ) -> None:
        for node_id, data in result.received:
            state = self._nodes.get(node_id)
            if state is None:
                continue
            connection = state.connection
            was_ready = connection.is_ready
            reauthenticating = state.reauthentication_started_ms is not None
            if not reauthenticating:
                # Re-authentication traffic is not use: an idle connection still closes.
                state.last_activity_ms = now_ms
            for record, response in connection.receive_data(data, now_ms):
                request = record.context
                assert request is not None
                throttle_ms = getattr(response, "throttle_time_ms", 0)
                if throttle_ms and throttle_ms > 0:
                    state.throttle_until_ms = max(state.throttle_until_ms, now_ms + throttle_ms)
                    log.debug("node %s throttled the client for %s ms", node_id, throttle_ms)
                responses.append(ClientResponse(request, response, False, False, None, now_ms))
            if connection.failure is not None:
                error = connection.failure
                if reauthenticating:
                    # (Logged by _disconnected, which sees the re-authentication fail.)
                    error = self._reauthentication_failed(node_id, state, str(error), error)
                else:
                    log.warning("node %s: %s; closing the connection", node_id, error)
                self._selector.close(node_id)
                self._disconnected(node_id, error, now_ms, responses=responses)
                continue
            self._flush_connection_output(node_id, state)
            if connection.is_ready and reauthenticating:
                self._on_reauthenticated(node_id, state, now_ms)
            elif connection.is_ready and not was_ready:
                self._on_ready(node_id, state, now_ms)

    def _flush_connection_output(self, node_id: int, state: _NodeState) -> None:
        out = state.connection.data_to_send()
        if out:
            self._selector.send(node_id, out)

    def _on_ready(self, node_id: int, state: _NodeState, now_ms: int) -> None:
        self._became_ready = True
        state.failed_attempts = 0
        state.last_connect_error = None
        state.reconnect_backoff_ms = 0
        state.throttle_until_ms = 0
        self._schedule_reauthentication(state, now_ms)
        self._connect_failures.connected(node_id, self._where(node_id), now_ms)
        log.debug(
            "node %s ready (negotiated %s)",
            node_id,
            ", ".join(f"{k.name}=v{v}" for k, v in sorted(state.connection.api_versions.items())),
        )

    def _where(self, node_id: int) -> str:
        node = self.metadata.node(node_id)
        return f"node {node_id}" + (f" ({node.address})" if node is not None else "")

    def _schedule_reauthentication(self, state: _NodeState, now_ms: int) -> None:
        lifetime = state.connection.session_lifetime_ms
        # Like Java, at a random 85-95 % of the session lifetime the broker granted, so that
        # the exchange ends before the broker would close the connection on its next request.
        state.reauthenticate_at_ms = (
            now_ms + int(lifetime * self._rng.uniform(0.85, 0.95)) if lifetime > 0 else None
        )

    def _start_due_reauthentications(self, now_ms: int) -> None:
        """Start KIP-368 re-authentication on READY connections that are due and drained."""
        for node_id, state in self._nodes.items():
            if (
                state.state is not ConnectionState.READY
                or state.reauthenticate_at_ms is None
                or now_ms < state.reauthenticate_at_ms
                or self.in_flight_count(node_id)
                or self._selector.pending_send_bytes(node_id) > 0
            ):
                continue
            log.debug(
                "node %s: re-authenticating (SASL %s) on the same connection",
                node_id,
                state.connection.mechanism_name,
            )
            state.reauthenticate_at_ms = None
            state.reauthentication_started_ms = now_ms
            state.connection.begin_reauthentication(now_ms)
            self._flush_connection_output(node_id, state)

    def _on_reauthenticated(self, node_id: int, state: _NodeState, now_ms: int) -> None:
        started = state.reauthentication_started_ms
        assert started is not None
        state.reauthentication_started_ms = None
        took = now_ms - started
        stats = self._stats
        self._stats = replace(
            stats,
            reauthentications=stats.reauthentications + 1,
            reauthentication_ms_total=stats.reauthentication_ms_total + took,
            reauthentication_ms_max=max(stats.reauthentication_ms_max, took),
        )
        self._schedule_reauthentication(state, now_ms)
        # A metadata refresh or a batch that waited for this connection goes out now.
        self._became_ready = True
        log.debug(
            "node %s re-authenticated (SASL %s) in %s ms on the same connection",
            node_id,
            state.connection.mechanism_name,
            took,
        )

    def _reauthentication_failed(
        self, node_id: int, state: _NodeState, reason: str, cause: KafkaError | None
    ) -> KafkaError:
        """Count a failed re-authentication; the error to close the connection with."""
        state.reauthentication_started_ms = None
        self._stats = replace(
            self._stats, failed_reauthentications=self._stats.failed_reauthentications + 1
        )
        text = (
            f"re-authentication (SASL {state.connection.mechanism_name}) of the connection to "
            f"{self._where(node_id)} failed: {reason}"
        )
        if isinstance(cause, AuthenticationError):
            # Refused credentials: fatal for metadata waiters, as at connection setup (Java).
            return SaslAuthenticationError(text)
        # A lost connection, no answer in time or a protocol fault: the reconnect retries.
        return KafkaConnectionError(text)

    def _handle_disconnects(
        self, result: PollResult, now_ms: int, responses: list[ClientResponse]
    ) -> None:
        for node_id, exc in result.disconnected:
            state = self._nodes.get(node_id)
            if state is None or state.state is ConnectionState.DISCONNECTED:
                continue
            where = self._where(node_id)
            error: KafkaError
            if state.state is ConnectionState.REAUTHENTICATING:
                reason = "the connection was lost" + (f": {_describe(exc)}" if exc else "")
                error = self._reauthentication_failed(node_id, state, reason, None)
            elif state.state not in _NEGOTIATED and is_tls_failure(exc):
                # Before READY an SSL error is the handshake, or (TLS 1.3) the broker's verdict
                # on our certificate read after it: an authentication failure, fatal as in Java.
                assert isinstance(exc, ssl.SSLError)
                error = SslAuthenticationError(
                    f"connection to {where} over {self.config.security_protocol} could not be "
                    f"established: {describe_tls_failure(exc)}"
                )
            else:
                if state.state is ConnectionState.READY:
                    text = f"connection to {where} was lost"
                else:
                    text = f"connection to {where} could not be established"
                if exc is not None:
                    text = f"{text}: {_describe(exc)}"
                error = KafkaConnectionError(text)
            self._disconnected(node_id, error, now_ms, responses=responses)

    def _handle_connects(
        self, result: PollResult, now_ms: int, responses: list[ClientResponse]
    ) -> None:
        for node_id in result.connected:
            state = self._nodes.get(node_id)
            if state is None or state.state is not ConnectionState.CONNECTING:
                continue
            state.last_activity_ms = now_ms
            self._stats = replace(self._stats, created=self._stats.created + 1)
            state.connection.connection_made(now_ms)
            self._flush_connection_output(node_id, state)

    def _handle_timed_out_connections(self, now_ms: int, responses: list[ClientResponse]) -> None:
        for node_id, state in list(self._nodes.items()):
            started = state.reauthentication_started_ms
            if (
                started is not None
                and state.state is ConnectionState.REAUTHENTICATING
                and now_ms - started >= self.config.request_timeout_ms
            ):
                reason = (
                    f"no answer within {self.config.request_timeout_ms} ms (request.timeout.ms)"
                )
                error = self._reauthentication_failed(node_id, state, reason, None)
                self._selector.close(node_id)
                self._disconnected(node_id, error, now_ms, responses=responses, timed_out=True)
                continue
            if state.state in (
                ConnectionState.DISCONNECTED,
                ConnectionState.READY,
                ConnectionState.REAUTHENTICATING,
            ):
                continue
            if state.last_attempt_ms is None:
                continue
            if now_ms - state.last_attempt_ms < state.setup_timeout_ms:
                continue
            where = self._where(node_id)
            error = KafkaConnectionError(
                f"connection to {where} was not ready within {state.setup_timeout_ms} ms "
                f"(socket.connection.setup.timeout.ms; state {state.state.name})"
            )
            self._selector.close(node_id)
            self._disconnected(node_id, error, now_ms, responses=responses, timed_out=True)

    def _handle_timed_out_requests(self, now_ms: int, responses: list[ClientResponse]) -> None:
        for node_id, state in list(self._nodes.items()):
            if state.state is not ConnectionState.READY:
                continue
            expired = next(
                (r for r in self._awaiting(state) if now_ms - r.sent_ms >= self._timeout_of(r)),
                None,
            )
            if expired is None:
                continue
            waiting_for = "a response" if expired.expect_response else "its bytes to be written"
            error = KafkaTimeoutError(
                f"{type(expired.request).__name__} to node {node_id} waited for {waiting_for} "
                f"longer than {self._timeout_of(expired)} ms (request.timeout.ms); disconnecting"
            )
            log.warning("%s", error)
            self._selector.close(node_id)
            self._disconnected(
                node_id, error, now_ms, responses=responses, timed_out=True, count_failure=False
            )

    @staticmethod
    def _awaiting(state: _NodeState) -> list[ClientRequest]:
        """Requests of a node that have not completed: awaiting a response or their write."""
        pending = [r.context for r in state.connection.in_flight() if r.context is not None]
        pending.extend(state.unwritten.values())
        return pending

    def _close_idle_connections(self, now_ms: int) -> None:
        bootstrap_done = not self.metadata.fetch().is_bootstrap
        for node_id, state in list(self._nodes.items()):
            if state.state is not ConnectionState.READY or self.in_flight_count(node_id):
                continue
            if self._updater.in_progress_node == node_id:
                continue
            idle = now_ms - state.last_activity_ms >= self.config.connections_max_idle_ms
            # Bootstrap connections are only for the first metadata fetch; the real brokers
            # (same hosts, usually) get their own connections under their node ids.
            if idle or (bootstrap_done and node_id < 0):
                log.debug("closing idle connection to node %s", node_id)
                self._selector.close(node_id)
                state.connection.close()
                state.last_attempt_ms = now_ms
                state.reconnect_backoff_ms = 0
                state.reauthenticate_at_ms = None

    def _disconnected(
        self,
        node_id: int,
        error: KafkaError,
        now_ms: int,
        *,
        responses: list[ClientResponse],
        timed_out: bool = False,
        count_failure: bool = True,
    ) -> None:
        state = self._nodes[node_id]
        was_ready = state.state in _NEGOTIATED
        # A failed re-authentication is an authentication failure of a working connection.
        reauth_failed = state.state is ConnectionState.REAUTHENTICATING and count_failure
        pending = state.connection.close()
        unwritten = list(state.unwritten.values())
        state.unwritten.clear()
        state.reauthenticate_at_ms = None
        state.reauthentication_started_ms = None
        if not was_ready:
            # Next attempt tries the host's next address (Java's use_all_dns_ips).
            state.address_index += 1
        state.last_attempt_ms = now_ms
        state.reconnect_backoff_ms = self._reconnect_backoff.backoff_ms(state.failed_attempts)
        if count_failure or not was_ready:
            state.failed_attempts += 1
        if reauth_failed:
            state.last_connect_error = error
            log.warning("%s; closing the connection", error)
            self._connect_failures.lost(node_id, now_ms)
        elif not was_ready:
            state.last_connect_error = error
            self._connect_failures.failed(node_id, str(error), now_ms)
        else:
            log.info("%s", error)
            self._connect_failures.lost(node_id, now_ms)
        for record in pending:
            assert record.context is not None
            responses.append(ClientResponse(record.context, None, True, timed_out, error, now_ms))
        responses.extend(ClientResponse(r, None, True, timed_out, error, now_ms) for r in unwritten)
        self._updater.handle_server_disconnect(node_id, error, now_ms)

    def _complete(self, responses: list[ClientResponse]) -> list[ClientResponse]:
        # Every callback runs even if an earlier one fails; the first failure is then raised
        # from poll() so that a bug in a completion handler surfaces instead of leaving its
        # request unaccounted for.
        out: list[ClientResponse] = []
        failure: BaseException | None = None
        for response in responses:
            callback = response.request.callback
            if callback is not None:
                try:
                    callback(response)
                except Exception as exc:
                    log.exception("uncaught error in a request completion callback")
                    failure = failure or exc
            if not response.request.internal:
                out.append(response)
        if failure is not None:
            raise failure
        return out

    def __repr__(self) -> str:
        states = {n: s.state.name for n, s in sorted(self._nodes.items())}
        return f"NetworkClient(nodes={states}, in_flight={self.in_flight_count()})"


def _describe(exc: OSError) -> str:
    text = exc.strerror or str(exc) or type(exc).__name__
    return text
