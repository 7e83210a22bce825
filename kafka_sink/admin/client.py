"""A blocking client for coordinator requests that need no producer.

Role: drives the net layer's NetworkClient from the caller's thread (no sender thread) for
short administrative exchanges: wait for metadata, find a transaction coordinator, send one
request to a node and wait for its answer, retry what is retriable. Built from a producer-style
config (Kafka's dotted keys) read as an :class:`AdminConfig`: the keys every client shares
(:class:`~kafka_sink.net.config.ClientConfig`: bootstrap, TLS, SASL, timings) mean exactly what
they mean for the producer and are refused with the same words, secrets stay out of logs, errors
and ``repr``, and the producer's own keys are skipped (the producer checks them).

Invariants:
- Every wait is bounded by one :class:`Deadline`; when it passes, the
  :class:`~kafka_sink.errors.KafkaTimeoutError` names the operation, what it was waiting for and
  the last error seen. A request never waits longer than ``request.timeout.ms`` for its node to
  become ready or to answer.
- Retriable failures (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  CONCURRENT_TRANSACTIONS, a lost connection, a request timeout) are retried with exponential
  backoff (``retry.backoff.ms`` .. ``retry.backoff.max.ms``); an authentication failure ends the
  call at once, as it does for the producer's metadata waiters.
- Topics are never auto-created by its metadata requests.
- ``request_all`` sends a set of requests (each to its node) before awaiting any answer, and
  reports each answer or failure apart; ``find_coordinators`` looks up many transactional ids
  with one FindCoordinator where the broker supports v4 (KIP-699).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from kafka_sink.clock import SYSTEM_CLOCK, Clock
from kafka_sink.errors import (
    AuthenticationError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_sink.net.config import CLIENT_KEYS, MAX_LONG, ClientConfig, ConfigKey, int_in
from kafka_sink.net.metadata import ExponentialBackoff, Metadata
from kafka_sink.net.network_client import ClientRequest, ClientResponse, NetworkClient
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    KEY_TYPE_TRANSACTION,
    ApiVersionsRequest,
    DescribeConfigsRequest,
    FindCoordinatorRequest,
)
from kafka_sink.wire.messages.describe_configs import RESOURCE_TYPE_BROKER, RESOURCE_TYPE_TOPIC

__all__ = ["RETRIABLE", "AdminClient", "AdminConfig", "Deadline"]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Failures worth another attempt; the first three also mean the coordinator may have moved.
MOVED = (NotCoordinatorError, CoordinatorNotAvailableError, KafkaConnectionError)
RETRIABLE = (*MOVED, CoordinatorLoadInProgressError, ConcurrentTransactionsError, KafkaTimeoutError)

_POLL_MS = 100  # the longest single poll while waiting for a connection or metadata


@dataclass(frozen=True, kw_only=True, repr=False)
class AdminConfig(ClientConfig):
    """The shared client keys, plus the three producer keys an admin client honours.

    It reads the config given to a producer (the Spark sink's, a user's): the producer's other
    keys are skipped, as the producer checks them. Each key keeps the producer's meaning, default
    and range.
    """

    _KEYS: ClassVar[Mapping[str, ConfigKey]] = {
        **CLIENT_KEYS,
        # The default bound of every call that is given no timeout.
        "max.block.ms": ConfigKey(60000, int_in(0, MAX_LONG), "max_block_ms"),
        "metadata.max.idle.ms": ConfigKey(300000, int_in(5000, MAX_LONG), "metadata_max_idle_ms"),
        "max.in.flight.requests.per.connection": ConfigKey(5, int_in(1), "max_in_flight"),
    }
    _KIND: ClassVar[str] = "admin"
    _OTHER_KEYS_IGNORED: ClassVar[bool] = True

    max_block_ms: int
    metadata_max_idle_ms: int
    max_in_flight: int


class Deadline:
    """The caller's time budget and what it is being spent on (for the timeout message)."""

    def __init__(self, clock: Clock, timeout_ms: int, operation: str) -> None:
        self.clock = clock
        self.timeout_ms = timeout_ms
        self.at_ms = clock.now_ms() + timeout_ms
        self.operation = operation
        self.waiting_for = "the cluster metadata"
        self.last_error: KafkaError | None = None
        self._raised: KafkaTimeoutError | None = None

    def remaining_ms(self) -> int:
        return self.at_ms - self.clock.now_ms()

    def check(self) -> None:
        """Raise the timeout error once the budget is spent."""
        if self.remaining_ms() <= 0:
            cause = f"; last error: {self.last_error}" if self.last_error is not None else ""
            self._raised = KafkaTimeoutError(
                f"{self.operation} did not finish within {self.timeout_ms} ms: still waiting "
                f"for {self.waiting_for}{cause}"
            )
            raise self._raised

    def is_own(self, error: BaseException) -> bool:
        """Whether ``error`` is this deadline's own timeout (never retried)."""
        return error is self._raised


class AdminClient:
    """Java's ``KafkaAdminClient`` reduced to what ending transactions needs, and blocking."""

    def __init__(
        self,
        network: Any,
        metadata: Any,
        clock: Clock,
        *,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
    ) -> None:
        self.network = network
        self.metadata = metadata
        self.clock = clock
        self.request_timeout_ms = request_timeout_ms
        self._backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms)
        self._finalized: dict[str, int] | None = None

    @classmethod
    def from_config(
        cls, config: Mapping[str, object], clock: Clock = SYSTEM_CLOCK
    ) -> tuple[AdminClient, AdminConfig]:
        """A client for the cluster a producer-style config points at, and that config, read."""
        cfg = AdminConfig.from_mapping(config)
        metadata = Metadata(
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            metadata_max_idle_ms=cfg.metadata_max_idle_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        )
        network_config = cfg.network_config(
            cfg.client_id or "kafka-sink-admin", max_in_flight=cfg.max_in_flight
        )
        network = NetworkClient(network_config, metadata, clock)
        network.bootstrap(clock.now_ms())
        client = cls(
            network,
            metadata,
            clock,
            request_timeout_ms=cfg.request_timeout_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        )
        return client, cfg

    def close(self) -> None:
        self.network.close()
        self.metadata.close()

    # -- waiting ------------------------------------------------------------------------------

    def _poll(self, timeout_ms: int, deadline: Deadline) -> None:
        self.network.poll(max(min(timeout_ms, deadline.remaining_ms()), 0), self.clock.now_ms())
        error = self.metadata.last_error()
        if isinstance(error, AuthenticationError):
            raise error  # no retry can fix it

    def retrying(
        self,
        deadline: Deadline,
        step: Callable[[], T],
        on_moved: Callable[[], None] | None = None,
    ) -> T:
        """``step()`` until it returns, backing off after each :data:`RETRIABLE` failure.

        ``on_moved`` runs after a failure meaning the coordinator may be elsewhere (so the next
        attempt looks it up again). Other errors, and the deadline's timeout, propagate.
        """
        attempts = 0
        while True:
            try:
                return step()
            except RETRIABLE as exc:
                if deadline.is_own(exc):
                    raise
                deadline.last_error = exc
                log.debug("%s: retrying after %s", deadline.operation, exc)
                if on_moved is not None and isinstance(exc, MOVED):
                    on_moved()
            self.back_off(attempts, deadline)
            attempts += 1

    def back_off(self, attempts: int, deadline: Deadline) -> None:
        """Wait the backoff after ``attempts`` failed attempts (polling, within the deadline)."""
        until = self.clock.now_ms() + self._backoff.backoff_ms(attempts)
        while self.clock.now_ms() < until:
            deadline.check()
            self._poll(until - self.clock.now_ms(), deadline)

    def brokers(self, deadline: Deadline) -> list[int]:
        """Node ids of every broker (waiting for the first metadata from the cluster)."""
        deadline.waiting_for = "the cluster metadata (the broker list)"
        while True:
            cluster = self.metadata.fetch()
            if not cluster.is_bootstrap and cluster.brokers:
                return sorted(cluster.brokers)
            deadline.check()
            self.metadata.request_update()
            self._poll(_POLL_MS, deadline)
            last = self.metadata.last_error()
            if last is not None:
                deadline.last_error = last

    def request(
        self, node_id: int, body: Any, deadline: Deadline, version: int | None = None
    ) -> Any:
        """Send ``body`` to ``node_id`` (at ``version``, else the negotiated one); its response.

        Raises :class:`KafkaConnectionError` when the node cannot be reached or the connection
        drops, :class:`KafkaTimeoutError` when the request times out, the net layer's error
        (e.g. UnsupportedVersionError) as is, and the deadline's timeout.
        """
        self._await_ready(node_id, deadline)
        done: list[ClientResponse] = []
        now = self.clock.now_ms()
        timeout_ms = max(min(self.request_timeout_ms, deadline.remaining_ms()), 1)
        self.network.send(
            ClientRequest(node_id, body, version, now, done.append, request_timeout_ms=timeout_ms),
            now,
        )
        while not done:
            deadline.check()
            self._poll(deadline.remaining_ms(), deadline)
        response = done[0]
        if response.response is not None:
            return response.response
        if response.error is not None:
            raise response.error
        if response.timed_out:
            raise KafkaTimeoutError(
                f"{type(body).__name__} to node {node_id} got no answer within {timeout_ms} ms"
            )
        raise KafkaConnectionError(f"the connection to node {node_id} was lost")

    def request_all(
        self, requests: Sequence[tuple[int, Any, int | None]], deadline: Deadline
    ) -> list[Any]:
        """Send every ``(node_id, body, version)`` at once and wait for all answers.

        Each slot of the result holds that request's response, or the error it failed with
        (:class:`KafkaConnectionError` for an unreachable node or a lost connection,
        :class:`KafkaTimeoutError` for a request that got no answer in ``request.timeout.ms``,
        the net layer's error as is). When the deadline passes while answers are awaited, the
        unanswered slots hold the deadline's own timeout (``deadline.is_own``); it raises only
        while the nodes are still being connected to.
        """
        out: list[Any] = [None] * len(requests)
        now = self.clock.now_ms()
        for node_id in {node for node, _body, _version in requests}:
            self.network.ready(node_id, now)  # starts every connection at once
        unreachable: dict[int, KafkaError] = {}
        for node_id in sorted({node for node, _body, _version in requests}):
            try:
                self._await_ready(node_id, deadline)
            except KafkaConnectionError as exc:
                unreachable[node_id] = exc
        done: dict[int, ClientResponse] = {}
        timeouts: dict[int, int] = {}
        # A node takes max.in.flight.requests.per.connection at a time: the rest are sent as
        # answers come back.
        queued = [i for i, (node, _b, _v) in enumerate(requests) if node not in unreachable]
        for i, (node_id, _body, _version) in enumerate(requests):
            if node_id in unreachable:
                out[i] = unreachable[node_id]
        try:
            while True:
                queued = self._send_ready(
                    requests, queued, done=done, timeouts=timeouts, out=out, deadline=deadline
                )
                if not queued and len(done) == len(timeouts):
                    break
                deadline.check()
                wait_ms = _POLL_MS if queued else deadline.remaining_ms()
                self._poll(min(wait_ms, deadline.remaining_ms()), deadline)
        except KafkaTimeoutError as exc:
            if not deadline.is_own(exc):
                raise
            for i in [*timeouts, *queued]:
                if i not in done:
                    out[i] = exc  # the answers that came are still told apart
        for i, response in done.items():
            node_id, body, _version = requests[i]
            if response.response is not None:
                out[i] = response.response
            elif response.error is not None:
                out[i] = response.error
            elif response.timed_out:
                out[i] = KafkaTimeoutError(
                    f"{type(body).__name__} to node {node_id} got no answer within {timeouts[i]} ms"
                )
            else:
                out[i] = KafkaConnectionError(f"the connection to node {node_id} was lost")
        return out

    def _send_ready(
        self,
        requests: Sequence[tuple[int, Any, int | None]],
        queued: list[int],
        *,
        done: dict[int, ClientResponse],
        timeouts: dict[int, int],
        out: list[Any],
        deadline: Deadline,
    ) -> list[int]:
        """Send the queued requests whose node is ready; the ones still waiting."""
        waiting: list[int] = []
        for i in queued:
            node_id, body, version = requests[i]
            now = self.clock.now_ms()
            if not self.network.ready(node_id, now):
                if self.network.is_connection_failed(node_id):
                    out[i] = KafkaConnectionError(f"node {node_id} cannot be reached")
                else:
                    waiting.append(i)
                continue
            timeout_ms = max(min(self.request_timeout_ms, deadline.remaining_ms()), 1)
            timeouts[i] = timeout_ms

            def answered(response: ClientResponse, i: int = i) -> None:
                done[i] = response

            self.network.send(
                ClientRequest(node_id, body, version, now, answered, request_timeout_ms=timeout_ms),
                now,
            )
        return waiting

    def _await_ready(self, node_id: int, deadline: Deadline) -> None:
        give_up_ms = self.clock.now_ms() + self.request_timeout_ms
        while not self.network.ready(node_id, self.clock.now_ms()):
            deadline.check()
            if self.network.is_connection_failed(node_id):
                raise KafkaConnectionError(f"node {node_id} cannot be reached")
            if self.clock.now_ms() >= give_up_ms:
                raise KafkaConnectionError(
                    f"node {node_id} was not ready within {self.request_timeout_ms} ms "
                    "(request.timeout.ms)"
                )
            self._poll(_POLL_MS, deadline)

    def api_version(self, node_id: int, api_key: ApiKey, deadline: Deadline) -> int:
        """The version of ``api_key`` negotiated with ``node_id`` (connecting first)."""
        self._await_ready(node_id, deadline)
        version = self.network.api_version(node_id, api_key)
        if version is None:
            raise UnsupportedVersionError(
                f"node {node_id} supports no {api_key.name} version this client speaks"
            )
        return int(version)

    def finalized_feature(self, node_id: int, name: str, deadline: Deadline) -> int:
        """The cluster's finalized level of feature ``name`` (0 when not finalized).

        Asked once per client with an ApiVersions request (the negotiation at connect time
        keeps only the version ranges).
        """
        if self._finalized is None:
            deadline.waiting_for = f"the finalized features of node {node_id}"
            response = self.request(node_id, ApiVersionsRequest(), deadline)
            self._finalized = {
                f.name: int(f.max_version_level) for f in response.finalized_features
            }
        return self._finalized.get(name, 0)

    def broker_configs(
        self, node_id: int, keys: Sequence[str], deadline: Deadline
    ) -> dict[str, str | None]:
        """The values of ``keys`` in broker ``node_id``'s configuration (DescribeConfigs).

        A key the broker does not report is absent; a sensitive one is None. An error the
        broker answers for the resource is raised (retriable ones are retried).
        """

        return self._configs(node_id, RESOURCE_TYPE_BROKER, str(node_id), keys, deadline)

    def topic_configs(
        self, node_id: int, topic: str, keys: Sequence[str], deadline: Deadline
    ) -> dict[str, str | None]:
        """The values of ``keys`` in ``topic``'s configuration (its own or the broker default),
        asked of broker ``node_id`` (DescribeConfigs; needs DESCRIBE_CONFIGS on the topic)."""
        return self._configs(node_id, RESOURCE_TYPE_TOPIC, topic, keys, deadline)

    def _configs(
        self,
        node_id: int,
        resource_type: int,
        name: str,
        keys: Sequence[str],
        deadline: Deadline,
    ) -> dict[str, str | None]:
        def attempt() -> dict[str, str | None]:
            what = "broker" if resource_type == RESOURCE_TYPE_BROKER else "topic"
            deadline.waiting_for = f"the configuration of {what} {name}"
            resource = DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configuration_keys=list(keys),
            )
            request = DescribeConfigsRequest(
                resources=[resource], include_synonyms=False, include_documentation=False
            )
            response = self.request(node_id, request, deadline)
            found: dict[str, str | None] = {}
            for result in response.results:
                error = error_for_code(result.error_code, result.error_message)
                if error is not None:
                    raise error
                found.update((entry.name, entry.value) for entry in result.configs)
            return found

        return self.retrying(deadline, attempt)

    # -- coordinators -------------------------------------------------------------------------

    def find_coordinator(self, transactional_id: str, deadline: Deadline) -> int:
        """The node id of the transaction coordinator of ``transactional_id``."""

        def attempt() -> int:
            deadline.waiting_for = f"the transaction coordinator of {transactional_id!r}"
            brokers = self.brokers(deadline)
            node = self.network.least_loaded_node(self.clock.now_ms())
            if node is None:
                node = brokers[0]
            if self.api_version(node, ApiKey.FIND_COORDINATOR, deadline) >= 4:
                body = FindCoordinatorRequest(
                    key_type=KEY_TYPE_TRANSACTION, coordinator_keys=[transactional_id]
                )
            else:
                body = FindCoordinatorRequest(key=transactional_id, key_type=KEY_TYPE_TRANSACTION)
            response = self.request(node, body, deadline)
            # v4+ answers per key; v1-v3 in the response's own fields.
            found = response.coordinators[0] if response.coordinators else response
            error = error_for_code(found.error_code, found.error_message)
            if error is not None:
                raise error
            if found.node_id not in self.metadata.fetch().brokers:
                self.metadata.request_update()  # a broker newer than our metadata
                raise KafkaConnectionError(
                    f"coordinator node {found.node_id} is not in the cluster metadata yet"
                )
            return int(found.node_id)

        return self.retrying(deadline, attempt)

    def find_coordinators(
        self, transactional_ids: Sequence[str], deadline: Deadline
    ) -> dict[str, int]:
        """The coordinator node of each id: one FindCoordinator for all of them (v4+, KIP-699),
        else one request per id. A retriable error for any id retries the whole lookup."""
        wanted = sorted(set(transactional_ids))
        if not wanted:
            return {}

        def attempt() -> dict[str, int]:
            deadline.waiting_for = (
                f"the transaction coordinators of {len(wanted)} transactional id(s)"
            )
            brokers = self.brokers(deadline)
            node = self.network.least_loaded_node(self.clock.now_ms())
            if node is None:
                node = brokers[0]
            if self.api_version(node, ApiKey.FIND_COORDINATOR, deadline) < 4:
                return {t: self.find_coordinator(t, deadline) for t in wanted}
            body = FindCoordinatorRequest(key_type=KEY_TYPE_TRANSACTION, coordinator_keys=wanted)
            response = self.request(node, body, deadline)
            known = self.metadata.fetch().brokers
            found: dict[str, int] = {}
            for entry in response.coordinators:
                error = error_for_code(entry.error_code, entry.error_message)
                if error is not None:
                    raise error
                if entry.node_id not in known:
                    self.metadata.request_update()
                    raise KafkaConnectionError(
                        f"coordinator node {entry.node_id} is not in the cluster metadata yet"
                    )
                found[entry.key] = int(entry.node_id)
            missing = [t for t in wanted if t not in found]
            if missing:
                raise CoordinatorNotAvailableError(
                    f"FindCoordinator answered for no coordinator of {missing}"
                )
            return found

        return self.retrying(deadline, attempt)
