"""TransactionalSender: the coordinator requests of a transactional producer.

Role (the coordinator half of Java's Sender, ``maybeSendAndPollTransactionalRequest``, and the
response handlers of Java's TransactionManager): each ``Sender.run_once`` first settles the
batches (a fatal error fails them all; an abort fails the queued ones never sent), then asks
this class to send the TransactionManager's next coordinator request, if any: FindCoordinator
(key type 1, to the least loaded node), InitProducerId, AddPartitionsToTxn (Transactions V1
only) and EndTxn (to the transaction coordinator); it handles the answer when the network
client's poll delivers it.

Dependencies: the TransactionManager, a network client and the cluster metadata, given
explicitly and typed by the narrow ``CoordinatorNetwork`` / ``CoordinatorMetadata`` protocols;
this module knows nothing of the Sender. A fatal answer moves the TransactionManager to its
fatal state and is reported through the ``on_fatal_error`` callback.

Which protocol: the coordinator's finalized ``transaction.version`` (ApiVersions) is read when
InitProducerId is sent; ``begin_transaction()`` fixes it for the transaction. Transactions V2
(level >= 2): Produce v12 adds partitions implicitly, EndTxn v5 bumps the epoch and its answer
carries the producer id/epoch the next transaction uses. Transactions V1: AddPartitionsToTxn v3
adds each partition before its first batch, Produce is capped at v11, EndTxn at v4.

Retries (Java's): NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE (and a lost connection or a
timed-out request to the coordinator) look the coordinator up again, then retry;
COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS retry after a backoff
(``retry.backoff.ms`` growing to ``retry.backoff.max.ms``). PRODUCER_FENCED and
INVALID_PRODUCER_EPOCH from the coordinator, authorization failures and unexpected answers are
fatal; a topic authorization failure or TRANSACTION_ABORTABLE while adding partitions is
abortable.

Invariants: at most one coordinator request is in flight; every handler ends (its result
completes) on success, on a fatal error, or when the producer is closed.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from kafka_sink.errors import (
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafka_sink.net.metadata import ExponentialBackoff
from kafka_sink.net.network_client import ClientRequest, ClientResponse
from kafka_sink.producer.txn.manager import TRANSACTION_VERSION_FEATURE
from kafka_sink.producer.txn.requests import RequestKind, TxnRequestHandler
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    KEY_TYPE_TRANSACTION,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)

if TYPE_CHECKING:
    from kafka_sink.net.metadata import Cluster
    from kafka_sink.producer.txn.manager import TransactionManager

log = logging.getLogger(__name__)

_MAX_POLL_MS = 1000
# Produce v12 means "Transactions V2" for transactional batches; V1 must stay at or below v11.
PRODUCE_V1_MAX = 11
END_TXN_V1_MAX = 4
END_TXN_V2 = 5
PRODUCE_V2 = 12
_FIND_COORDINATOR_BATCHED = 4  # from v4 keys go in coordinator_keys

# Coordinator answers that mean "ask again later" (with the coordinator looked up again or not).
_RETRY_SAME = (CoordinatorLoadInProgressError, ConcurrentTransactionsError)
_RETRY_RELOOKUP = (NotCoordinatorError, CoordinatorNotAvailableError)
# AddPartitionsToTxn also retries a partition the broker does not know yet (or left unanswered).
_RETRY_ADD = (
    UnknownTopicOrPartitionError,
    KafkaConnectionError,
    *_RETRY_SAME,
    *_RETRY_RELOOKUP,
)


class CoordinatorNetwork(Protocol):
    """The network client calls coordinator requests need (NetworkClient implements them)."""

    def ready(self, node_id: int, now_ms: int) -> bool: ...
    def connection_delay(self, node_id: int, now_ms: int) -> int: ...
    def send(self, request: ClientRequest, now_ms: int) -> None: ...
    def least_loaded_node(self, now_ms: int) -> int | None: ...
    def is_connection_failed(self, node_id: int) -> bool: ...
    def api_version(self, node_id: int, api_key: ApiKey) -> int | None: ...
    def finalized_feature_level(self, node_id: int, name: str) -> int | None: ...


class CoordinatorMetadata(Protocol):
    """The metadata calls FindCoordinator's answer needs (is the coordinator a known broker?)."""

    def fetch(self) -> Cluster: ...
    def request_update(self) -> int: ...


class TransactionalSender:
    """Coordinator requests of one transactional producer, driven by its Sender's thread."""

    def __init__(
        self,
        tm: TransactionManager,
        network: CoordinatorNetwork,
        metadata: CoordinatorMetadata,
        *,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        rng: random.Random | None,
        on_fatal_error: Callable[[KafkaError], None],
    ) -> None:
        self.tm = tm
        self._network = network
        self._metadata = metadata
        self._retry_backoff_ms = retry_backoff_ms
        self._backoff = ExponentialBackoff(
            retry_backoff_ms, max(retry_backoff_max_ms, retry_backoff_ms), rng=rng
        )
        self._on_fatal_error = on_fatal_error

    # -- each run -------------------------------------------------------------------------

    def send_next_request(self, now_ms: int, has_incomplete_batches: bool) -> int:
        """Send the next coordinator request, if one is due; returns the longest the poll may
        wait. EndTxn waits while ``has_incomplete_batches``."""
        tm = self.tm
        handler = tm.next_request(has_incomplete_batches, now_ms)
        if handler is None:
            wait = tm.time_to_next_request_ms(now_ms)
            return _MAX_POLL_MS if wait is None else min(max(wait, 1), _MAX_POLL_MS)
        return self._send(handler, now_ms)

    def wants_run_now(self) -> bool:
        """A partition waits to be added (Transactions V1): send AddPartitionsToTxn at once."""
        return self.tm.has_new_partitions()

    def has_pending_requests(self) -> bool:
        """close() waits for coordinator requests only while a transaction is being ended
        (Java's hasPendingTransactionalRequests): an init that cannot reach the coordinator
        does not hold the close."""
        return self.tm.has_pending_requests() and self.tm.has_ongoing_transaction()

    def abort_open_transaction_on_close(self) -> None:
        """close() without force: abort a transaction still open (Java does the same)."""
        tm = self.tm
        if tm.fatal_error is None and tm.has_ongoing_transaction() and not tm.is_completing():
            log.info("%s: aborting the open transaction on close", tm.describe_id())
            try:
                tm.begin_abort()
            except KafkaError as exc:
                log.info("could not abort the open transaction on close: %s", exc)

    def produce_version(self, node_id: int) -> int | None:
        """The Produce version for a transactional request to ``node_id``."""
        if self.tm.uses_transactions_v2():
            return None  # the highest negotiated (the client range stops at v12)
        negotiated = self._network.api_version(node_id, ApiKey.PRODUCE)
        return PRODUCE_V1_MAX if negotiated is None else min(negotiated, PRODUCE_V1_MAX)

    # -- sending --------------------------------------------------------------------------

    def _send(self, handler: TxnRequestHandler, now_ms: int) -> int:
        tm = self.tm
        network = self._network
        if handler.kind is RequestKind.FIND_COORDINATOR:
            node_id = network.least_loaded_node(now_ms)
        else:
            node_id = tm.coordinator
        if node_id is None:
            self._retry(handler, now_ms, None)
            return self._retry_backoff_ms
        if not network.ready(node_id, now_ms):
            tm.reenqueue(handler, now_ms)
            if handler.needs_coordinator and network.is_connection_failed(node_id):
                # The coordinator cannot be reached: it may have moved.
                tm.lookup_coordinator()
            return max(min(network.connection_delay(node_id, now_ms), _MAX_POLL_MS), 1)
        built = self._build(handler, node_id)
        if built is None:
            return 0
        request, version = built
        tm.request_sent(handler)

        def on_response(response: ClientResponse) -> None:
            self._on_response(handler, node_id, response)

        client_request = ClientRequest(node_id, request, version, now_ms, on_response)
        try:
            network.send(client_request, now_ms)
        except KafkaError as exc:
            self._on_response(
                handler, node_id, ClientResponse(client_request, None, True, False, exc, now_ms)
            )
        return 0

    def _build(self, handler: TxnRequestHandler, node_id: int) -> tuple[object, int | None] | None:
        tm = self.tm
        tid = tm.transactional_id
        assert tid is not None
        kind = handler.kind
        if kind is RequestKind.FIND_COORDINATOR:
            version = self._network.api_version(node_id, ApiKey.FIND_COORDINATOR)
            if version is not None and version >= _FIND_COORDINATOR_BATCHED:
                return (
                    FindCoordinatorRequest(key_type=KEY_TYPE_TRANSACTION, coordinator_keys=[tid]),
                    None,
                )
            return FindCoordinatorRequest(key=tid, key_type=KEY_TYPE_TRANSACTION), None
        if kind is RequestKind.INIT_PRODUCER_ID:
            tm.set_transaction_version(
                self._network.finalized_feature_level(node_id, TRANSACTION_VERSION_FEATURE)
            )
            pid, epoch = (tm.producer_id, tm.producer_epoch) if handler.bump_epoch else (-1, -1)
            return (
                InitProducerIdRequest(
                    transactional_id=tid,
                    transaction_timeout_ms=tm.transaction_timeout_ms,
                    producer_id=pid,
                    producer_epoch=epoch,
                ),
                None,
            )
        if kind is RequestKind.ADD_PARTITIONS:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(handler.partitions):
                by_topic.setdefault(topic, []).append(partition)
            return (
                AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=tid,
                    v3_and_below_producer_id=tm.producer_id,
                    v3_and_below_producer_epoch=tm.producer_epoch,
                    v3_and_below_topics=[
                        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(t, ps)
                        for t, ps in by_topic.items()
                    ],
                ),
                None,
            )
        assert kind is RequestKind.END_TXN
        if tm.uses_transactions_v2():
            end_version = END_TXN_V2
        else:
            negotiated = self._network.api_version(node_id, ApiKey.END_TXN)
            end_version = END_TXN_V1_MAX if negotiated is None else min(negotiated, END_TXN_V1_MAX)
        return (
            EndTxnRequest(
                transactional_id=tid,
                producer_id=tm.producer_id,
                producer_epoch=tm.producer_epoch,
                committed=handler.committed,
            ),
            end_version,
        )

    # -- answers --------------------------------------------------------------------------

    def _on_response(
        self, handler: TxnRequestHandler, node_id: int, response: ClientResponse
    ) -> None:
        tm = self.tm
        now_ms = response.received_ms
        tm.request_done(handler)
        body = response.response
        if body is None:
            error = response.error or (
                KafkaTimeoutError(f"{handler.api_name} to node {node_id} timed out")
                if response.timed_out
                else KafkaConnectionError(f"disconnected from node {node_id}")
            )
            if not error.retriable:  # e.g. UNSUPPORTED_VERSION
                self._fatal(handler, error)
                return
            log.debug("%r to node %d failed: %s; retrying", handler, node_id, error)
            if handler.needs_coordinator:
                tm.lookup_coordinator()
            self._retry(handler, now_ms, error)
            return
        if isinstance(body, FindCoordinatorResponse):
            self._on_find_coordinator(handler, body, now_ms)
        elif isinstance(body, InitProducerIdResponse):
            self._on_init_producer_id(handler, body, now_ms)
        elif isinstance(body, AddPartitionsToTxnResponse):
            self._on_add_partitions(handler, body, now_ms)
        elif isinstance(body, EndTxnResponse):
            self._on_end_txn(handler, body, now_ms)

    def _retry(self, handler: TxnRequestHandler, now_ms: int, error: KafkaError | None) -> None:
        retry_at_ms = now_ms + self._backoff.backoff_ms(max(handler.attempts - 1, 0))
        self.tm.reenqueue(handler, retry_at_ms, error)

    def _fatal(self, handler: TxnRequestHandler, error: KafkaError) -> None:
        self.tm.transition_to_fatal_error(error)
        handler.fail(error)
        self._on_fatal_error(error)

    def _common(self, handler: TxnRequestHandler, error: KafkaError, now_ms: int) -> bool:
        """The answers every coordinator request shares; True when handled."""
        if isinstance(error, _RETRY_RELOOKUP):
            self.tm.lookup_coordinator()
            self._retry(handler, now_ms, error)
            return True
        if isinstance(error, _RETRY_SAME):
            self._retry(handler, now_ms, error)
            return True
        if isinstance(error, ProducerFencedError | InvalidProducerEpochError):
            self._fatal(handler, self.tm.fenced_error(error, handler, now_ms))
            return True
        if isinstance(
            error, TransactionalIdAuthorizationFailedError | ClusterAuthorizationFailedError
        ):
            self._fatal(
                handler,
                type(error)(
                    f"{self.tm.describe_id()}: not authorized ({error.name}); the principal needs "
                    "WRITE and DESCRIBE on the transactional id"
                ),
            )
            return True
        return False

    def _on_find_coordinator(
        self, handler: TxnRequestHandler, body: FindCoordinatorResponse, now_ms: int
    ) -> None:
        if body.coordinators:
            entry = body.coordinators[0]
            code, node_id, message = entry.error_code, entry.node_id, entry.error_message
        else:
            code, node_id, message = body.error_code, body.node_id, body.error_message
        error = error_for_code(code, message)
        if error is None:
            if self._metadata.fetch().brokers.get(node_id) is None:
                # A broker metadata does not know yet: learn it, then look up again.
                self._metadata.request_update()
                self._retry(handler, now_ms, None)
                return
            log.debug("%s: transaction coordinator is node %d", self.tm.describe_id(), node_id)
            self.tm.set_coordinator(node_id)
            return
        if isinstance(error, TransactionalIdAuthorizationFailedError):
            self._common(handler, error, now_ms)
            return
        if error.retriable:
            self._retry(handler, now_ms, error)
            return
        self._fatal(handler, error)

    def _on_init_producer_id(
        self, handler: TxnRequestHandler, body: InitProducerIdResponse, now_ms: int
    ) -> None:
        error = error_for_code(body.error_code)
        if error is None:
            # A new producer id is news (INFO, as Java's "ProducerId set to"); the epoch bump of
            # a warm producer re-initialised for its next task is routine (DEBUG): an
            # exactly-once query does one per task and micro-batch.
            log.log(
                logging.DEBUG if body.producer_id == self.tm.previous_producer_id else logging.INFO,
                "%s: producer id %d epoch %d (transaction.version %d)",
                self.tm.describe_id(),
                body.producer_id,
                body.producer_epoch,
                self.tm.transaction_version,
            )
            self.tm.init_producer_id_succeeded(handler, body.producer_id, body.producer_epoch)
            return
        if self._common(handler, error, now_ms):
            return
        if isinstance(error, InvalidTransactionTimeoutError):
            error = InvalidTransactionTimeoutError(
                f"transaction.timeout.ms={self.tm.transaction_timeout_ms} is above the broker's "
                "transaction.max.timeout.ms (900000 by default): lower transaction.timeout.ms"
            )
        self._fatal(handler, error)

    def _on_add_partitions(
        self, handler: TxnRequestHandler, body: AddPartitionsToTxnResponse, now_ms: int
    ) -> None:
        tm = self.tm
        added: set[tuple[str, int]] = set()
        worst: KafkaError | None = None
        for topic in body.results_by_topic_v3_and_below or ():
            for result in topic.results_by_partition:
                tp = (topic.name, result.partition_index)
                error = error_for_code(result.partition_error_code)
                if error is None:
                    added.add(tp)
                elif not isinstance(error, OperationNotAttemptedError) and (
                    worst is None or isinstance(worst, _RETRY_SAME + _RETRY_RELOOKUP)
                ):
                    worst = error
        if added:
            tm.add_partitions_succeeded(frozenset(added))
        rest = handler.partitions - added
        if not rest:
            return
        if worst is None:
            worst = KafkaConnectionError("AddPartitionsToTxn answered without these partitions")
        if isinstance(worst, _RETRY_ADD):
            if isinstance(worst, _RETRY_RELOOKUP):
                tm.lookup_coordinator()
            handler.retain_partitions(frozenset(rest))
            self._retry(handler, now_ms, worst)
            return
        if self._common(handler, worst, now_ms):
            tm.add_partitions_failed(frozenset(rest))
            return
        if isinstance(worst, TopicAuthorizationFailedError | TransactionAbortableError):
            tm.add_partitions_failed(frozenset(rest))
            tm.transition_to_abortable_error(
                type(worst)(f"adding {sorted(rest)} to the transaction failed: {worst}")
            )
            return
        if isinstance(worst, InvalidProducerIdMappingError | InvalidTxnStateError):
            self._fatal(handler, tm.lost_error(worst, now_ms))
            return
        self._fatal(handler, worst)

    def _on_end_txn(self, handler: TxnRequestHandler, body: EndTxnResponse, now_ms: int) -> None:
        tm = self.tm
        error = error_for_code(body.error_code)
        if error is None:
            pid = body.producer_id if tm.uses_transactions_v2() else -1
            epoch = body.producer_epoch if tm.uses_transactions_v2() else -1
            log.debug(
                "%s: transaction %s",
                tm.describe_id(),
                "committed" if handler.committed else "aborted",
            )
            tm.end_txn_succeeded(handler, pid, epoch)
            return
        if self._common(handler, error, now_ms):
            return
        if isinstance(error, InvalidTxnStateError | InvalidProducerIdMappingError):
            self._fatal(handler, tm.lost_error(error, now_ms))
            return
        if isinstance(error, TransactionAbortableError):
            tm.end_txn_abortable(handler, error)
            return
        self._fatal(handler, error)


__all__ = [
    "END_TXN_V1_MAX",
    "END_TXN_V2",
    "PRODUCE_V1_MAX",
    "PRODUCE_V2",
    "CoordinatorMetadata",
    "CoordinatorNetwork",
    "TransactionalSender",
]
