"""Ending, listing and aborting transactions without the producer that wrote them.

Role: what a process other than the writer needs (the Spark driver committing what its tasks
prepared, or a job sweeping what a dead process left open):

- :func:`complete_transaction` ends a :class:`~kafka_sink.producer.prepared.PreparedTransaction`
  with EndTxn, sent to the transaction coordinator with the prepared producer id and epoch;
- :func:`list_transactions` lists the transactions whose transactional id starts with a prefix
  (ListTransactions to every broker, then DescribeTransactions to each id's coordinator);
- :func:`abort_transactions` aborts the open ones among them.

Each call is one-shot and blocking: it builds a network client from a producer-style config
(Kafka's dotted keys; ``ProducerConfig`` validates it, so TLS/SASL settings are applied or
refused exactly as for the producer, and secrets stay out of logs, errors and ``repr``), does its
work and closes the client.

Invariants:
- Every wait is bounded by the caller's ``timeout`` (default: the config's ``max.block.ms``);
  when it passes, :class:`~kafka_sink.errors.KafkaTimeoutError` says what was being waited for
  and the last error seen.
- EndTxn is sent at v5 when the cluster finalized ``transaction.version`` >= 2 (Transactions V2:
  the coordinator bumps the epoch and returns it), else at the highest version <= 4 the
  coordinator supports.
- Retriable answers (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  CONCURRENT_TRANSACTIONS, a lost connection or request) are retried with backoff
  (``retry.backoff.ms`` .. ``retry.backoff.max.ms``), re-finding the coordinator when it may have
  moved. Ending a transaction is idempotent: the coordinator answers NONE to a retried commit of
  a committed transaction and to a retried abort of an aborted one, so a retry after a success
  whose answer was lost succeeds too.
- A commit that the coordinator refuses because the transaction is no longer open with that
  producer id and epoch (INVALID_TXN_STATE, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
  INVALID_PRODUCER_ID_MAPPING, TRANSACTIONAL_ID_NOT_FOUND) raises
  :class:`~kafka_sink.errors.TransactionLostError`: its records will never become visible.
- An abort succeeds when the transaction is aborted (by this call, an earlier one, or the
  coordinator after ``transaction.timeout.ms``). An abort the coordinator refuses raises
  :class:`~kafka_sink.errors.InvalidTxnStateError` when it shows the transaction committed by
  that producer epoch, or when the id moved on so far that the outcome cannot be told.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_sink.clock import SYSTEM_CLOCK, Clock
from kafka_sink.errors import (
    AuthenticationError,
    BrokerResponseError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
    TransactionLostError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_sink.net.metadata import ExponentialBackoff, Metadata
from kafka_sink.net.network_client import ClientRequest, ClientResponse, NetworkClient
from kafka_sink.producer.config import ProducerConfig
from kafka_sink.producer.prepared import PreparedTransaction, TopicPartition
from kafka_sink.producer.producer import build_network_config
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    KEY_TYPE_TRANSACTION,
    ApiVersionsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    ListTransactionsRequest,
)

__all__ = [
    "TransactionListing",
    "abort_transactions",
    "complete_transaction",
    "list_transactions",
]

log = logging.getLogger(__name__)

# Transaction states (Java's TransactionState names) by what they mean for an abort.
OPEN_STATES = frozenset({"Ongoing"})
ENDING_STATES = frozenset({"PrepareCommit", "PrepareAbort", "PrepareEpochFence"})

# The coordinator is elsewhere, or not ready yet: ask again (re-finding it for the first two).
_REFIND = (NotCoordinatorError, CoordinatorNotAvailableError)
_RETRY_SAME = (CoordinatorLoadInProgressError, ConcurrentTransactionsError)
# The transaction is no longer open with this producer id and epoch.
_LOST = (
    InvalidTxnStateError,
    ProducerFencedError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    TransactionalIdNotFoundError,
)

_TRANSACTION_VERSION_FEATURE = "transaction.version"
_TV1_END_TXN_MAX = 4


@dataclass(frozen=True)
class TransactionListing:
    """One transaction as its coordinator describes it.

    ``state`` is Java's ``TransactionState`` name (``Ongoing``, ``PrepareCommit``,
    ``CompleteAbort``, ...); ``partitions`` are the ``(topic, partition)`` pairs of an open
    transaction (sorted); ``coordinator_id`` is the broker that answered for it.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    partitions: tuple[TopicPartition, ...]
    coordinator_id: int
    transaction_timeout_ms: int = -1
    transaction_start_time_ms: int = -1

    def prepared(self) -> PreparedTransaction:
        """The handle :func:`complete_transaction` takes for this transaction."""
        return PreparedTransaction(
            self.transactional_id, self.producer_id, self.producer_epoch, self.partitions
        )


class _Deadline:
    """The caller's time budget and what it is being spent on (for the timeout message)."""

    def __init__(self, clock: Clock, timeout_ms: int, operation: str) -> None:
        self.clock = clock
        self.timeout_ms = timeout_ms
        self.at_ms = clock.now_ms() + timeout_ms
        self.operation = operation
        self.waiting_for = "the cluster metadata"
        self.last_error: KafkaError | None = None

    def remaining_ms(self) -> int:
        return self.at_ms - self.clock.now_ms()

    def check(self) -> None:
        if self.remaining_ms() <= 0:
            raise self.expired()

    def expired(self) -> KafkaTimeoutError:
        cause = f"; last error: {self.last_error}" if self.last_error is not None else ""
        return KafkaTimeoutError(
            f"{self.operation} did not finish within {self.timeout_ms} ms: still waiting for "
            f"{self.waiting_for}{cause}"
        )


class _AdminClient:
    """A blocking, single-threaded driver of the net layer's NetworkClient for one-shot calls.

    The caller's thread polls the network client itself (no sender thread): each request waits
    for its node to be ready, is sent, and the client is polled until it completes or the
    deadline passes.
    """

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
        self._transaction_version: int | None = None

    @classmethod
    def from_config(
        cls, config: Mapping[str, object], clock: Clock = SYSTEM_CLOCK
    ) -> tuple[_AdminClient, ProducerConfig]:
        cfg = ProducerConfig.from_mapping(config)
        metadata = Metadata(
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            metadata_max_idle_ms=cfg.metadata_max_idle_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        )
        network_config = build_network_config(cfg, cfg.client_id or "transaction-admin")
        # Listing and ending transactions must never create topics.
        network_config.allow_auto_topic_creation = False
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
        close_metadata = getattr(self.metadata, "close", None)
        if close_metadata is not None:
            close_metadata()

    # -- waiting ------------------------------------------------------------------------------

    def _poll(self, timeout_ms: int, deadline: _Deadline) -> list[ClientResponse]:
        responses: list[ClientResponse] = self.network.poll(
            max(min(timeout_ms, deadline.remaining_ms()), 0), self.clock.now_ms()
        )
        error = self.metadata.last_error()
        if isinstance(error, AuthenticationError):
            raise error  # no retry can fix it (as for the producer's metadata waiters)
        return responses

    def backoff(self, attempts: int, deadline: _Deadline) -> None:
        """Wait the retry backoff for ``attempts`` failures (doing I/O meanwhile)."""
        until = self.clock.now_ms() + self._backoff.backoff_ms(attempts)
        while self.clock.now_ms() < until:
            deadline.check()
            self._poll(until - self.clock.now_ms(), deadline)

    def brokers(self, deadline: _Deadline) -> list[int]:
        """Node ids of every broker of the cluster (after the first real metadata update)."""
        deadline.waiting_for = "the cluster metadata (the broker list)"
        while True:
            cluster = self.metadata.fetch()
            if not cluster.is_bootstrap and cluster.brokers:
                return sorted(cluster.brokers)
            deadline.check()
            self.metadata.request_update()
            self._poll(self.retry_poll_ms, deadline)
            last = self.metadata.last_error()
            if last is not None:
                deadline.last_error = last

    @property
    def retry_poll_ms(self) -> int:
        return 100

    def request(
        self, node_id: int, body: Any, deadline: _Deadline, version: int | None = None
    ) -> Any:
        """Send ``body`` to ``node_id`` and return its response.

        Raises a retriable :class:`KafkaConnectionError` / :class:`KafkaTimeoutError` when the
        node cannot be reached or the request is lost, the net layer's error (e.g.
        UnsupportedVersionError) as is, and the caller's timeout when the deadline passes.
        """
        connect_by = self.clock.now_ms() + self.request_timeout_ms
        while not self.network.ready(node_id, self.clock.now_ms()):
            deadline.check()
            if self.clock.now_ms() >= connect_by:
                raise KafkaConnectionError(
                    f"node {node_id} was not ready within {self.request_timeout_ms} ms "
                    "(request.timeout.ms)"
                )
            self._poll(self.retry_poll_ms, deadline)
        done: list[ClientResponse] = []
        now = self.clock.now_ms()
        request = ClientRequest(
            node_id,
            body,
            version,
            now,
            done.append,
            request_timeout_ms=max(min(self.request_timeout_ms, deadline.remaining_ms()), 1),
        )
        self.network.send(request, now)
        while not done:
            deadline.check()
            self._poll(deadline.remaining_ms(), deadline)
        response = done[0]
        if response.response is not None:
            return response.response
        if response.error is not None:
            raise response.error
        if response.timed_out:
            raise KafkaTimeoutError(f"{type(body).__name__} to node {node_id} timed out")
        raise KafkaConnectionError(f"connection to node {node_id} was lost")

    # -- coordinator and versions ---------------------------------------------------------------

    def find_coordinator(self, transactional_id: str, deadline: _Deadline) -> int:
        """The node id of the transaction coordinator for ``transactional_id``."""
        attempts = 0
        while True:
            deadline.waiting_for = f"the transaction coordinator of {transactional_id!r}"
            try:
                node_id = self._find_coordinator_once(transactional_id, deadline)
                if node_id is not None:
                    return node_id
            except (*_REFIND, *_RETRY_SAME, KafkaConnectionError) as exc:
                deadline.last_error = exc
            except KafkaTimeoutError as exc:
                if deadline.remaining_ms() <= 0:
                    raise deadline.expired() from exc
                deadline.last_error = exc
            self.backoff(attempts, deadline)
            attempts += 1

    def _find_coordinator_once(self, transactional_id: str, deadline: _Deadline) -> int | None:
        brokers = self.brokers(deadline)
        node = self.network.least_loaded_node(self.clock.now_ms())
        if node is None:
            node = brokers[0]
        version = self._negotiated(node, ApiKey.FIND_COORDINATOR, deadline)
        if version >= 4:
            body = FindCoordinatorRequest(
                key_type=KEY_TYPE_TRANSACTION, coordinator_keys=[transactional_id]
            )
        else:
            body = FindCoordinatorRequest(key=transactional_id, key_type=KEY_TYPE_TRANSACTION)
        response = self.request(node, body, deadline)
        if response.coordinators:
            entry = response.coordinators[0]
            code, message, coordinator = entry.error_code, entry.error_message, entry.node_id
        else:
            code, message, coordinator = (
                response.error_code,
                response.error_message,
                response.node_id,
            )
        error = error_for_code(code, message)
        if error is not None:
            raise error
        if coordinator not in self.metadata.fetch().brokers:
            # A broker newer than our metadata: refresh, then ask again.
            self.metadata.request_update()
            deadline.last_error = KafkaConnectionError(
                f"coordinator node {coordinator} is not in the cluster metadata yet"
            )
            return None
        return int(coordinator)

    def _negotiated(self, node_id: int, api_key: ApiKey, deadline: _Deadline) -> int:
        """The version of ``api_key`` negotiated with ``node_id`` (connecting first)."""
        version = self.network.api_version(node_id, api_key)
        while version is None:
            deadline.check()
            self.network.ready(node_id, self.clock.now_ms())
            self._poll(self.retry_poll_ms, deadline)
            version = self.network.api_version(node_id, api_key)
            if version is None and self._connection_unusable(node_id):
                raise UnsupportedVersionError(
                    f"node {node_id} supports no {api_key.name} version this client speaks"
                )
        return int(version)

    def _connection_unusable(self, node_id: int) -> bool:
        # Ready but without the API: the broker does not support it at all.
        ready = self.network.ready(node_id, self.clock.now_ms())
        return bool(ready)

    def transaction_version(self, node_id: int, deadline: _Deadline) -> int:
        """The cluster's finalized ``transaction.version`` (0 when none is finalized).

        Asked once per client with an ApiVersions request (the negotiation done at connect
        time keeps only the version ranges).
        """
        if self._transaction_version is None:
            deadline.waiting_for = f"the finalized features of node {node_id}"
            response = self.request(node_id, ApiVersionsRequest(), deadline)
            level = 0
            for feature in response.finalized_features:
                if feature.name == _TRANSACTION_VERSION_FEATURE:
                    level = int(feature.max_version_level)
            self._transaction_version = level
        return self._transaction_version

    def end_txn_version(self, node_id: int, deadline: _Deadline) -> int:
        negotiated = self._negotiated(node_id, ApiKey.END_TXN, deadline)
        if negotiated >= 5 and self.transaction_version(node_id, deadline) >= 2:
            return 5
        return min(negotiated, _TV1_END_TXN_MAX)

    # -- transactions -------------------------------------------------------------------------

    def describe(
        self, node_id: int, transactional_ids: list[str], deadline: _Deadline
    ) -> list[Any]:
        response = self.request(node_id, DescribeTransactionsRequest(transactional_ids), deadline)
        return list(response.transaction_states)

    def describe_one(self, transactional_id: str, deadline: _Deadline) -> TransactionListing | None:
        """The coordinator's view of one transactional id (None when it does not know it)."""
        attempts = 0
        while True:
            deadline.waiting_for = f"a description of transaction {transactional_id!r}"
            try:
                node = self.find_coordinator(transactional_id, deadline)
                (state,) = self.describe(node, [transactional_id], deadline)
                error = error_for_code(state.error_code)
                if error is None:
                    return _listing(state, node)
                if isinstance(error, TransactionalIdNotFoundError):
                    return None
                raise error
            except (*_REFIND, *_RETRY_SAME, KafkaConnectionError) as exc:
                deadline.last_error = exc
            except KafkaTimeoutError as exc:
                if deadline.remaining_ms() <= 0:
                    raise deadline.expired() from exc
                deadline.last_error = exc
            self.backoff(attempts, deadline)
            attempts += 1

    def end_transaction(
        self, prepared: PreparedTransaction, commit: bool, deadline: _Deadline
    ) -> tuple[int, int] | None:
        """EndTxn until the coordinator gives a final answer; NONE returns, others raise."""
        what = "commit" if commit else "abort"
        body = EndTxnRequest(
            prepared.transactional_id, prepared.producer_id, prepared.producer_epoch, commit
        )
        attempts = 0
        node: int | None = None
        while True:
            try:
                if node is None:
                    node = self.find_coordinator(prepared.transactional_id, deadline)
                version = self.end_txn_version(node, deadline)
                deadline.waiting_for = (
                    f"the coordinator (node {node}) to {what} transaction "
                    f"{prepared.transactional_id!r}"
                )
                response = self.request(node, body, deadline, version)
                error = error_for_code(response.error_code)
                if error is None:
                    log.info(
                        "%s of transaction %r (producer id %s, epoch %s) done by node %s",
                        what,
                        prepared.transactional_id,
                        prepared.producer_id,
                        prepared.producer_epoch,
                        node,
                    )
                    if version >= 5 and response.producer_id >= 0:
                        return int(response.producer_id), int(response.producer_epoch)
                    return None
                raise error
            except _RETRY_SAME as exc:
                deadline.last_error = exc
            except (*_REFIND, KafkaConnectionError) as exc:
                deadline.last_error = exc
                node = None
            except KafkaTimeoutError as exc:
                if deadline.remaining_ms() <= 0:
                    raise deadline.expired() from exc
                deadline.last_error = exc
                node = None
            self.backoff(attempts, deadline)
            attempts += 1


def _listing(state: Any, node_id: int) -> TransactionListing:
    partitions = tuple(
        sorted((topic.topic, int(p)) for topic in state.topics for p in topic.partitions)
    )
    return TransactionListing(
        transactional_id=state.transactional_id,
        producer_id=int(state.producer_id),
        producer_epoch=int(state.producer_epoch),
        state=state.transaction_state,
        partitions=partitions,
        coordinator_id=node_id,
        transaction_timeout_ms=int(state.transaction_timeout_ms),
        transaction_start_time_ms=int(state.transaction_start_time_ms),
    )


def _timeout_ms(timeout: float | None, cfg: ProducerConfig) -> int:
    if timeout is None:
        return int(cfg.max_block_ms)
    if timeout < 0:
        raise ValueError(f"timeout must be >= 0 seconds, got {timeout}")
    return int(timeout * 1000)


def _run(
    config: Mapping[str, object],
    timeout: float | None,
    operation: str,
    body: Callable[[_AdminClient, _Deadline], Any],
) -> Any:
    client, cfg = _AdminClient.from_config(config)
    try:
        deadline = _Deadline(client.clock, _timeout_ms(timeout, cfg), operation)
        return body(client, deadline)
    finally:
        client.close()


# -- complete_transaction ------------------------------------------------------------------------


def complete_transaction(
    config: Mapping[str, object],
    prepared: PreparedTransaction,
    commit: bool = True,
    timeout: float | None = None,
) -> tuple[int, int] | None:
    """Commit (or abort, ``commit=False``) a prepared transaction from any process.

    ``config`` is a producer config (``bootstrap.servers`` and the security settings; Kafka's
    dotted keys); the producer that wrote the transaction is not needed. ``timeout`` (seconds)
    bounds the whole call; None means the config's ``max.block.ms``.

    Returns ``(producer_id, producer_epoch)`` the coordinator moved the transactional id to
    under Transactions V2 (EndTxn v5 bumps the epoch), or None under Transactions V1 and when
    the coordinator answered a repeated call without them. Calling it again after a success
    succeeds again (the coordinator answers NONE).

    Raises :class:`~kafka_sink.errors.TransactionLostError` when a commit finds the transaction
    no longer open with that producer id and epoch (the coordinator aborted it after
    ``transaction.timeout.ms``, a newer producer took the transactional id, or the id is
    unknown): its records will never be visible. An abort succeeds when the transaction was
    already aborted, and raises :class:`~kafka_sink.errors.InvalidTxnStateError` when it was
    committed or when the coordinator can no longer tell (a newer producer took the id).
    :class:`~kafka_sink.errors.KafkaTimeoutError` when ``timeout`` passed, naming what it
    waited for.
    """
    if not isinstance(prepared, PreparedTransaction):
        raise TypeError(f"prepared must be a PreparedTransaction, got {type(prepared).__name__}")
    what = "commit" if commit else "abort"
    operation = (
        f"complete_transaction({what}) of {prepared.transactional_id!r} "
        f"(producer id {prepared.producer_id}, epoch {prepared.producer_epoch})"
    )

    def body(client: _AdminClient, deadline: _Deadline) -> tuple[int, int] | None:
        try:
            return client.end_transaction(prepared, commit, deadline)
        except _LOST as exc:
            return _settle_refusal(client, prepared, commit, exc, deadline)

    result: tuple[int, int] | None = _run(config, timeout, operation, body)
    return result


def _settle_refusal(
    client: _AdminClient,
    prepared: PreparedTransaction,
    commit: bool,
    refusal: BrokerResponseError,
    deadline: _Deadline,
) -> tuple[int, int] | None:
    """Explain (commit) or judge (abort) a refusal with what the coordinator now shows."""
    try:
        now = client.describe_one(prepared.transactional_id, deadline)
    except KafkaError as exc:  # the refusal is the answer; the description only adds detail
        log.debug("could not describe %r: %s", prepared.transactional_id, exc)
        now = None
        described = False
    else:
        described = True
    ours = now is not None and now.producer_id == prepared.producer_id
    # Our epoch, or the one EndTxn v5 (or the coordinator's fencing abort) moved it to.
    same_epochs = (
        ours and now is not None and now.producer_epoch - prepared.producer_epoch in (0, 1)
    )
    if not commit:
        if same_epochs and now is not None and now.state in ("CompleteCommit", "PrepareCommit"):
            raise InvalidTxnStateError(
                f"cannot abort transaction {prepared.transactional_id!r} (producer id "
                f"{prepared.producer_id}, epoch {prepared.producer_epoch}): it was committed "
                f"(the coordinator shows {now.state} at epoch {now.producer_epoch})"
            ) from refusal
        if same_epochs and now is not None and now.state in ("CompleteAbort", "PrepareAbort"):
            log.info(
                "transaction %r (producer id %s, epoch %s) was already aborted (%s)",
                prepared.transactional_id,
                prepared.producer_id,
                prepared.producer_epoch,
                now.state,
            )
            return None
        seen = (
            ""
            if now is None
            else f" (the coordinator shows {now.state} at producer id "
            f"{now.producer_id}, epoch {now.producer_epoch})"
        )
        raise InvalidTxnStateError(
            f"cannot confirm the abort of transaction {prepared.transactional_id!r} (producer "
            f"id {prepared.producer_id}, epoch {prepared.producer_epoch}): the coordinator "
            f"answered {refusal.name} and no longer holds it at that epoch{seen}. If it was "
            "still open when the id moved on, it was aborted; if it had been committed "
            "before, it stays committed"
        ) from refusal
    raise TransactionLostError(
        _lost_message(prepared, commit, refusal, now if described else None, described)
    ) from refusal


def _lost_message(
    prepared: PreparedTransaction,
    commit: bool,
    refusal: BrokerResponseError,
    now: TransactionListing | None,
    described: bool,
) -> str:
    if isinstance(refusal, ProducerFencedError | InvalidProducerEpochError):
        why = (
            "a newer epoch of the producer holds the transactional id: another producer "
            "initialised it (fencing this one), or the coordinator aborted the transaction "
            "because it stayed open longer than transaction.timeout.ms"
        )
    elif isinstance(refusal, InvalidTxnStateError):
        why = (
            "the coordinator no longer has it open: it aborted it (most often because it stayed "
            "open longer than transaction.timeout.ms) or it held no records"
        )
    else:
        why = (
            "the coordinator does not know this transactional id with this producer id (it "
            "expired after transactional.id.expiration.ms, or another producer id took it over)"
        )
    if now is not None:
        seen = (
            f"; the coordinator now shows state {now.state}, producer id {now.producer_id}, "
            f"epoch {now.producer_epoch}"
        )
    elif described:
        seen = "; the coordinator does not know the transactional id"
    else:
        seen = ""
    action = "committed" if commit else "aborted"
    return (
        f"transaction {prepared.transactional_id!r} (producer id {prepared.producer_id}, epoch "
        f"{prepared.producer_epoch}) cannot be {action}: the data it wrote is lost (aborted, "
        f"never visible to read_committed consumers). Why: {why}{seen}; the broker answered "
        f"{refusal.name}"
    )


# -- listing and aborting ------------------------------------------------------------------------


def _id_pattern(prefix: str) -> str:
    # re.escape leaves letters and digits alone and backslash-escapes the rest, which Java's
    # Pattern also reads as literals; anchored so only ids *starting* with the prefix match.
    return f"^{re.escape(prefix)}.*"


def _list(client: _AdminClient, prefix: str, deadline: _Deadline) -> list[TransactionListing]:
    """ListTransactions to every broker, then DescribeTransactions for the ids it owns."""
    found: dict[str, TransactionListing] = {}
    for node in client.brokers(deadline):
        ids = _list_node(client, node, prefix, deadline)
        if ids:
            for listing in _describe_all(client, node, ids, deadline):
                found[listing.transactional_id] = listing
    return [found[t] for t in sorted(found)]


def _list_node(client: _AdminClient, node: int, prefix: str, deadline: _Deadline) -> list[str]:
    attempts = 0
    while True:
        deadline.waiting_for = f"the list of transactions of node {node}"
        try:
            version = client._negotiated(node, ApiKey.LIST_TRANSACTIONS, deadline)
            body = ListTransactionsRequest(
                transactional_id_pattern=_id_pattern(prefix) if version >= 2 and prefix else None
            )
            response = client.request(node, body, deadline)
            error = error_for_code(response.error_code)
            if error is not None:
                raise error
            return sorted(
                s.transactional_id
                for s in response.transaction_states
                if s.transactional_id.startswith(prefix)
            )
        except (*_REFIND, *_RETRY_SAME, KafkaConnectionError) as exc:
            deadline.last_error = exc
        except KafkaTimeoutError as exc:
            if deadline.remaining_ms() <= 0:
                raise deadline.expired() from exc
            deadline.last_error = exc
        client.backoff(attempts, deadline)
        attempts += 1


def _describe_all(
    client: _AdminClient, node: int, ids: list[str], deadline: _Deadline
) -> list[TransactionListing]:
    """Describe ``ids`` at ``node``; an id that moved to another coordinator is re-found."""
    out: list[TransactionListing] = []
    deadline.waiting_for = f"a description of {len(ids)} transaction(s) from node {node}"
    try:
        states = client.describe(node, ids, deadline)
    except (KafkaConnectionError, KafkaTimeoutError) as exc:
        if deadline.remaining_ms() <= 0:
            raise deadline.expired() from exc
        states = []
    described = set()
    for state in states:
        error = error_for_code(state.error_code)
        if error is None:
            out.append(_listing(state, node))
            described.add(state.transactional_id)
        elif isinstance(error, TransactionalIdNotFoundError):
            described.add(state.transactional_id)  # expired since the listing
    for transactional_id in ids:
        if transactional_id not in described:
            listing = client.describe_one(transactional_id, deadline)
            if listing is not None:
                out.append(listing)
    return out


def list_transactions(
    config: Mapping[str, object],
    prefix: str,
    timeout: float | None = None,
) -> list[TransactionListing]:
    """Every transaction whose transactional id starts with ``prefix``, in any state.

    Each broker answers ListTransactions for the ids its coordinator owns, so every broker is
    asked (with the KIP-1152 pattern filter where the broker supports ListTransactions v2, else
    the whole list is filtered here); each id is then described by its coordinator. Sorted by
    transactional id. ``timeout`` (seconds) bounds the call; None means ``max.block.ms``.
    """
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")

    def body(client: _AdminClient, deadline: _Deadline) -> list[TransactionListing]:
        return _list(client, prefix, deadline)

    result: list[TransactionListing] = _run(config, timeout, f"list_transactions({prefix!r})", body)
    return result


def abort_transactions(
    config: Mapping[str, object],
    prefix: str,
    timeout: float | None = None,
) -> list[TransactionListing]:
    """Abort every open transaction whose transactional id starts with ``prefix``.

    Lists them (see :func:`list_transactions`), then sends EndTxn(abort) with each Ongoing
    transaction's described producer id and epoch. A transaction already ending (PrepareCommit,
    PrepareAbort) is waited for, not touched. Returns the listings of the transactions it
    aborted (as they were before the abort).

    Raises :class:`~kafka_sink.errors.KafkaError` naming every transaction it could not abort
    and why (after trying them all); a transaction that ended meanwhile (another process
    committed or aborted it) is not an error, nor in the result.
    """
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(
            "abort_transactions needs a non-empty transactional-id prefix (an empty one would "
            "abort every transaction of the cluster)"
        )
    operation = f"abort_transactions({prefix!r})"

    def body(client: _AdminClient, deadline: _Deadline) -> list[TransactionListing]:
        aborted: list[TransactionListing] = []
        failures: list[str] = []
        for listing in _list(client, prefix, deadline):
            if listing.state not in OPEN_STATES and listing.state not in ENDING_STATES:
                continue
            try:
                if _abort_one(client, listing, deadline):
                    aborted.append(listing)
            except KafkaTimeoutError:
                raise
            except KafkaError as exc:
                failures.append(f"{listing.transactional_id!r}: {exc}")
        if failures:
            raise KafkaError(
                f"{operation} could not abort {len(failures)} transaction(s) (aborted "
                f"{len(aborted)}): " + "; ".join(failures)
            )
        return aborted

    result: list[TransactionListing] = _run(config, timeout, operation, body)
    return result


def _abort_one(client: _AdminClient, listing: TransactionListing, deadline: _Deadline) -> bool:
    """Abort one listed transaction; False when it ended by itself (nothing to abort)."""
    current: TransactionListing | None = listing
    attempts = 0
    while current is not None and current.state in ENDING_STATES:
        # Being committed or aborted right now: wait until the coordinator is done.
        client.backoff(attempts, deadline)
        attempts += 1
        deadline.waiting_for = (
            f"transaction {listing.transactional_id!r} to leave state {current.state}"
        )
        current = client.describe_one(listing.transactional_id, deadline)
    if current is None or current.state not in OPEN_STATES:
        return False
    try:
        client.end_transaction(current.prepared(), False, deadline)
    except _LOST as exc:
        # Ended or taken over between the description and the abort: not ours to abort.
        log.info(
            "transaction %r ended before it could be aborted: %s", listing.transactional_id, exc
        )
        return False
    return True
