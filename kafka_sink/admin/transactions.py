"""Ending, listing and aborting transactions without the producer that wrote them.

Role: what a process other than the writer needs (the Spark driver committing what its tasks
prepared, or a job sweeping what a dead process left open):

- :func:`complete_transaction` ends a :class:`~kafka_sink.prepared.PreparedTransaction`
  with EndTxn, sent to the transaction coordinator with the prepared producer id and epoch;
- :func:`list_transactions` lists the transactions whose transactional id starts with a prefix
  (ListTransactions to every broker, then DescribeTransactions to each id's coordinator; a
  broker that died is waited for only until the controller fences it and its coordinators move);
- :func:`describe_transactions` describes given ids (DescribeTransactions, one request per
  coordinator): what a caller that knows its ids asks instead of listing, since a listing can
  leave out an id whose coordinator is moving or loading;
- :func:`abort_transactions` aborts the open ones among them;
- :func:`complete_transactions` ends many prepared transactions at once: one FindCoordinator
  for all their ids (v4+), every EndTxn sent before any answer is awaited, one
  :class:`Completion` per handle;
- :meth:`TransactionAdmin.producers` asks partition leaders what an open transaction wrote
  (``producers.py``: DescribeProducers and the log end offset);
- :func:`init_producer_id` and :func:`end_transaction` are the two coordinator requests a
  writer of its own small transactions needs (the intent store's fenced writes, through
  ``topic_log.py``).

:class:`TransactionAdmin` makes these calls over one
:class:`~kafka_sink.admin.client.AdminClient`, built from a producer-style config (Kafka's
dotted keys: bootstrap, TLS and SASL settings mean what they mean for the producer; secrets stay
out of logs, errors and ``repr``) on first use and kept open until ``close()`` (connections, API
versions and finalized features negotiated once). Each module function is its one-shot form:
blocking, a ``TransactionAdmin`` opened for the one call and closed.

Invariants:
- :func:`complete_transactions` raises only for bad arguments: each handle's outcome (ended,
  or the error :func:`complete_transaction` would raise for it, the deadline's timeout for those
  still unanswered when it passed) is reported apart, so a caller knows what was and was not
  ended. Retriable answers are retried together, after one backoff, within the one deadline.
- Every wait is bounded by the caller's ``timeout`` in seconds (default: the config's
  ``max.block.ms``); when it passes, :class:`~kafka_sink.errors.KafkaTimeoutError` says what was
  being waited for and the last error seen.
- EndTxn is sent at v5 when the cluster finalized ``transaction.version`` >= 2 (Transactions V2:
  the coordinator bumps the epoch and returns it), else at the highest version <= 4 the
  coordinator supports.
- Retriable answers (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
  CONCURRENT_TRANSACTIONS, a lost connection or request) are retried with backoff, re-finding
  the coordinator when it may have moved. Ending a transaction is idempotent: the coordinator
  answers NONE to a retried commit of a committed transaction and to a retried abort of an
  aborted one, so a retry after a success whose answer was lost succeeds too.
- A handle without partitions (the producer prepared a transaction it wrote nothing to) has
  nothing to end: no EndTxn is sent (the coordinator would answer INVALID_TXN_STATE, as it never
  started that transaction) and the call returns None, commit or abort, unless
  DescribeTransactions shows a transaction open at exactly that producer id and epoch (a handle
  built by hand without its partitions), which is then ended as any other.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kafka_sink.admin.client import MOVED, RETRIABLE, AdminClient, Deadline
from kafka_sink.admin.producers import PartitionProducers, describe_producers
from kafka_sink.errors import (
    BrokerResponseError,
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
    TransactionLostError,
    UnsupportedVersionError,
    error_for_code,
)
from kafka_sink.prepared import PreparedTransaction, TopicPartition
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
)

__all__ = [
    "Completion",
    "TransactionAdmin",
    "TransactionListing",
    "abort_transactions",
    "complete_transaction",
    "complete_transactions",
    "describe_transactions",
    "end_transaction",
    "init_producer_id",
    "list_transactions",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

# Transaction states (Java's TransactionState names) by what they mean for an abort.
OPEN_STATES = frozenset({"Ongoing"})
ENDING_STATES = frozenset({"PrepareCommit", "PrepareAbort", "PrepareEpochFence"})

# The transaction is no longer open with this producer id and epoch.
_LOST = (
    InvalidTxnStateError,
    ProducerFencedError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    TransactionalIdNotFoundError,
)

_TV2_LEVEL = 2  # transaction.version from which EndTxn v5 bumps the epoch
_TV1_END_TXN_MAX = 4


@dataclass(frozen=True)
class TransactionListing:
    """One transaction as its coordinator describes it.

    ``state`` is Java's ``TransactionState`` name (``Ongoing``, ``PrepareCommit``,
    ``CompleteAbort``, ...); ``partitions`` are the ``(topic, partition)`` pairs of an open
    transaction (sorted); ``coordinator_id`` is the broker that answered for it;
    ``transaction_start_time_ms`` is wall-clock ms (-1 when no transaction is running).
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


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and timeout < 0:
        raise ValueError(f"timeout must be >= 0 seconds (or None), got {timeout}")


# -- the two transaction requests -----------------------------------------------------------------


def _describe_one(
    client: AdminClient, transactional_id: str, deadline: Deadline
) -> TransactionListing | None:
    """The coordinator's view of one transactional id (None when it does not know it)."""
    node: int | None = None

    def attempt() -> TransactionListing | None:
        nonlocal node
        if node is None:
            node = client.find_coordinator(transactional_id, deadline)
        deadline.waiting_for = f"a description of transaction {transactional_id!r}"
        response = client.request(node, DescribeTransactionsRequest([transactional_id]), deadline)
        (state,) = response.transaction_states
        error = error_for_code(state.error_code)
        if isinstance(error, TransactionalIdNotFoundError):
            return None
        if error is not None:
            raise error
        return _listing(state, node)

    def moved() -> None:
        nonlocal node
        node = None

    return client.retrying(deadline, attempt, on_moved=moved)


def _end_txn_version(client: AdminClient, node: int, deadline: Deadline) -> int:
    """EndTxn v5 under Transactions V2 (finalized ``transaction.version`` >= 2), else <= v4."""
    version = client.api_version(node, ApiKey.END_TXN, deadline)
    if version < 5 or client.finalized_feature(node, "transaction.version", deadline) < _TV2_LEVEL:
        version = min(version, _TV1_END_TXN_MAX)
    return version


def _end_transaction(
    client: AdminClient, prepared: PreparedTransaction, commit: bool, deadline: Deadline
) -> tuple[int, int] | None:
    """EndTxn until the coordinator gives a final answer: NONE returns, other errors raise."""
    what = "commit" if commit else "abort"
    body = EndTxnRequest(
        prepared.transactional_id, prepared.producer_id, prepared.producer_epoch, commit
    )
    node: int | None = None

    def attempt() -> tuple[int, int] | None:
        nonlocal node
        if node is None:
            node = client.find_coordinator(prepared.transactional_id, deadline)
        version = _end_txn_version(client, node, deadline)
        deadline.waiting_for = (
            f"the coordinator (node {node}) to {what} transaction {prepared.transactional_id!r}"
        )
        response = client.request(node, body, deadline, version)
        error = error_for_code(response.error_code)
        if error is not None:
            raise error
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

    def moved() -> None:
        nonlocal node
        node = None

    return client.retrying(deadline, attempt, on_moved=moved)


def end_transaction(
    client: AdminClient, prepared: PreparedTransaction, commit: bool, deadline: Deadline
) -> tuple[int, int] | None:
    """EndTxn for ``prepared`` on ``client`` within ``deadline``: the (producer id, epoch) the
    coordinator moved to under Transactions V2, else None; refusals raise as the broker's
    error (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...)."""
    return _end_transaction(client, prepared, commit, deadline)


def init_producer_id(
    client: AdminClient, transactional_id: str, transaction_timeout_ms: int, deadline: Deadline
) -> tuple[int, int]:
    """InitProducerId for ``transactional_id``: its new (producer id, epoch).

    This fences every earlier producer of the id: an open transaction of the id is aborted (the
    coordinator answers CONCURRENT_TRANSACTIONS meanwhile, retried here) and a producer still
    holding the old epoch is refused from then on.
    """
    body = InitProducerIdRequest(
        transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms
    )
    node: int | None = None

    def attempt() -> tuple[int, int]:
        nonlocal node
        if node is None:
            node = client.find_coordinator(transactional_id, deadline)
        deadline.waiting_for = f"InitProducerId({transactional_id!r}) on node {node}"
        response = client.request(node, body, deadline)
        error = error_for_code(response.error_code)
        if error is not None:
            raise error
        return int(response.producer_id), int(response.producer_epoch)

    def moved() -> None:
        nonlocal node
        node = None

    return client.retrying(deadline, attempt, on_moved=moved)


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

    It returns once the coordinator has recorded the decision (state PrepareCommit or
    PrepareAbort); the transaction markers reach the partitions after that, as with Java's
    ``commitTransaction``.

    Returns ``(producer_id, producer_epoch)`` the coordinator moved the transactional id to
    under Transactions V2 (EndTxn v5 bumps the epoch), or None under Transactions V1 and when
    the coordinator answered a repeated call without them. Calling it again after a success
    succeeds again (the coordinator answers NONE).

    A handle without partitions (a transaction that wrote nothing) is done at once: commit and
    abort both return None without sending EndTxn, once DescribeTransactions shows that the
    coordinator holds no transaction open at that producer id and epoch (if it does, the handle
    was built without its partitions, and that transaction is ended as any other).

    Raises :class:`~kafka_sink.errors.TransactionLostError` when a commit finds the transaction
    no longer open with that producer id and epoch (the coordinator aborted it after
    ``transaction.timeout.ms``, a newer producer took the transactional id, or the id is
    unknown): its records will never be visible. An abort succeeds when the transaction was
    already aborted, and raises :class:`~kafka_sink.errors.InvalidTxnStateError` when it was
    committed or when the coordinator can no longer tell (a newer producer took the id).
    :class:`~kafka_sink.errors.KafkaTimeoutError` when ``timeout`` passed, naming what it
    waited for.
    """
    with TransactionAdmin(config, timeout) as admin:
        return admin.complete(prepared, commit)


def _check_prepared(prepared: object) -> None:
    if not isinstance(prepared, PreparedTransaction):
        raise TypeError(f"prepared must be a PreparedTransaction, got {type(prepared).__name__}")


def _complete_one(
    client: AdminClient, prepared: PreparedTransaction, commit: bool, deadline: Deadline
) -> tuple[int, int] | None:
    if not prepared.partitions and not _holds_open(client, prepared, deadline):
        log.info(
            "transaction %r (producer id %s, epoch %s) wrote nothing: nothing to %s",
            prepared.transactional_id,
            prepared.producer_id,
            prepared.producer_epoch,
            "commit" if commit else "abort",
        )
        return None
    try:
        return _end_transaction(client, prepared, commit, deadline)
    except _LOST as exc:
        return _settle_refusal(client, prepared, commit, exc, deadline)


# -- complete_transactions: many at once ---------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """How ending one transaction of :func:`complete_transactions` went.

    ``error`` is None when it is ended (``epoch`` then holds what :func:`complete_transaction`
    returns); else the error that call would have raised (``TransactionLostError`` for a commit
    Kafka refused because the transaction is gone, ``KafkaTimeoutError`` when the deadline
    passed before the coordinator answered, ...).
    """

    prepared: PreparedTransaction
    epoch: tuple[int, int] | None = None
    error: KafkaError | None = None


def complete_transactions(
    config: Mapping[str, object],
    prepared: Sequence[PreparedTransaction],
    commit: bool = True,
    timeout: float | None = None,
) -> list[Completion]:
    """Commit (or abort) many prepared transactions at once, with one admin client.

    The coordinators of all the ids are found with one FindCoordinator (v4+), then every EndTxn
    is sent at once, each to its coordinator, and the answers are awaited together; retriable
    answers are retried (together) after backoff, all within one ``timeout`` (seconds; None:
    ``max.block.ms``). Each transaction ends exactly as with :func:`complete_transaction`; the
    result holds one :class:`Completion` per handle, in order, and the call itself raises only
    for bad arguments: a failure is reported per transaction, so the caller knows which ones
    were ended and which were not.
    """
    with TransactionAdmin(config, timeout) as admin:
        return admin.complete_all(prepared, commit)


def _end_all(
    client: AdminClient, items: list[PreparedTransaction], commit: bool, deadline: Deadline
) -> list[Completion]:
    """EndTxn for every handle at once; rounds of retries until each has a final answer."""
    what = "commit" if commit else "abort"
    results: dict[int, Completion] = {}
    pending: dict[int, PreparedTransaction] = {}
    for i, handle in enumerate(items):
        if handle.partitions:
            pending[i] = handle
            continue
        try:  # rare (a handle that wrote nothing): the one-by-one path decides
            results[i] = Completion(handle, _complete_one(client, handle, commit, deadline))
        except KafkaError as exc:
            results[i] = Completion(handle, error=exc)
    nodes: dict[str, int] = {}
    attempts = 0
    try:
        while pending:
            lookup = [h.transactional_id for h in pending.values()]
            nodes.update(client.find_coordinators([t for t in lookup if t not in nodes], deadline))
            order: list[int] = []
            requests: list[tuple[int, Any, int | None]] = []
            for i in sorted(pending):
                handle = pending[i]
                node = nodes[handle.transactional_id]
                try:
                    version = _end_txn_version(client, node, deadline)
                except RETRIABLE as exc:
                    # The coordinator died since FindCoordinator answered: look it up again
                    # next round (its partitions move once the controller fences it).
                    if deadline.is_own(exc):
                        raise
                    deadline.last_error = exc
                    nodes.pop(handle.transactional_id, None)
                    continue
                body = EndTxnRequest(
                    handle.transactional_id, handle.producer_id, handle.producer_epoch, commit
                )
                order.append(i)
                requests.append((node, body, version))
            deadline.waiting_for = (
                f"the coordinators to {what} {len(order)} transaction(s) "
                f"({', '.join(repr(pending[i].transactional_id) for i in order[:5])}"
                f"{', ...' if len(order) > 5 else ''})"
            )
            answers = client.request_all(requests, deadline)
            for i, (node, _body, sent_version), answer in zip(
                order, requests, answers, strict=True
            ):
                handle = pending[i]
                error = (
                    answer if isinstance(answer, KafkaError) else error_for_code(answer.error_code)
                )
                if error is None:
                    log.info(
                        "%s of transaction %r (producer id %s, epoch %s) done by node %s",
                        what,
                        handle.transactional_id,
                        handle.producer_id,
                        handle.producer_epoch,
                        node,
                    )
                    epoch = None
                    if sent_version is not None and sent_version >= 5 and answer.producer_id >= 0:
                        epoch = (int(answer.producer_id), int(answer.producer_epoch))
                    results[i] = Completion(handle, epoch)
                    del pending[i]
                elif isinstance(error, RETRIABLE) and not deadline.is_own(error):
                    deadline.last_error = error
                    if isinstance(error, MOVED):
                        nodes.pop(handle.transactional_id, None)
                else:
                    del pending[i]
                    results[i] = _refused(client, handle, commit, error, deadline)
            if pending:
                client.back_off(attempts, deadline)
                attempts += 1
    except KafkaError as exc:  # the deadline passed, or a lookup failed for good
        for i, handle in pending.items():
            results[i] = Completion(handle, error=exc)
    return [results[i] for i in range(len(items))]


def _refused(
    client: AdminClient,
    handle: PreparedTransaction,
    commit: bool,
    error: KafkaError,
    deadline: Deadline,
) -> Completion:
    """The outcome of a final refusal, judged as :func:`complete_transaction` judges it."""
    if not isinstance(error, _LOST):
        return Completion(handle, error=error)
    try:
        return Completion(handle, _settle_refusal(client, handle, commit, error, deadline))
    except KafkaError as exc:
        return Completion(handle, error=exc)


def _holds_open(client: AdminClient, prepared: PreparedTransaction, deadline: Deadline) -> bool:
    """Whether the coordinator holds a transaction open at the handle's producer id and epoch.

    Asked for a handle without partitions: a producer that prepared a transaction it wrote
    nothing to never started it at the coordinator (which would answer an EndTxn with
    INVALID_TXN_STATE), while a handle built by hand may have left its partitions out.
    """
    try:
        now = _describe_one(client, prepared.transactional_id, deadline)
    except UnsupportedVersionError:
        return False  # no DescribeTransactions (brokers before 3.0): trust the handle
    return (
        now is not None
        and (now.producer_id, now.producer_epoch) == (prepared.producer_id, prepared.producer_epoch)
        and (now.state in OPEN_STATES or now.state in ENDING_STATES)
    )


def _settle_refusal(
    client: AdminClient,
    prepared: PreparedTransaction,
    commit: bool,
    refusal: BrokerResponseError,
    deadline: Deadline,
) -> tuple[int, int] | None:
    """Explain (commit) or judge (abort) a refusal with what the coordinator now shows."""
    try:
        now = _describe_one(client, prepared.transactional_id, deadline)
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


class _NodeLeftError(Exception):
    """A broker being listed left the cluster's metadata: list the live brokers again."""


def _list(client: AdminClient, prefix: str, deadline: Deadline) -> list[TransactionListing]:
    """ListTransactions to every broker, then DescribeTransactions for the ids it owns.

    A broker that cannot be reached is retried while the metadata still names it (it may
    coordinate ids: skipping it would hide them). Once the controller fences it, it leaves the
    metadata and its coordinators move to live brokers, so the whole listing starts again over
    the live ones: a listing completes with one broker down instead of waiting for it.
    """
    while True:
        deadline.check()
        found: dict[str, TransactionListing] = {}
        try:
            for node in client.brokers(deadline):
                ids = _list_node(client, node, prefix, deadline)
                if ids:
                    for listing in _describe_all(client, node, ids, deadline):
                        found[listing.transactional_id] = listing
        except _NodeLeftError as left:
            log.info("%s: %s; listing the live brokers again", deadline.operation, left)
            continue
        return [found[t] for t in sorted(found)]


def _list_node(client: AdminClient, node: int, prefix: str, deadline: Deadline) -> list[str]:
    """The ids starting with ``prefix`` that ``node``'s coordinator owns."""

    def attempt() -> list[str]:
        deadline.waiting_for = f"the list of transactions of node {node}"
        if node not in client.metadata.fetch().brokers:
            raise _NodeLeftError(f"node {node} left the cluster")
        try:
            version = client.api_version(node, ApiKey.LIST_TRANSACTIONS, deadline)
            pattern = _id_pattern(prefix) if version >= 2 and prefix else None
            request = ListTransactionsRequest(transactional_id_pattern=pattern)
            response = client.request(node, request, deadline)
        except KafkaConnectionError:
            client.metadata.request_update()  # has it been fenced meanwhile?
            raise
        error = error_for_code(response.error_code)
        if error is not None:
            raise error
        # Filtered here too: below v2 the broker lists every id.
        return sorted(
            s.transactional_id
            for s in response.transaction_states
            if s.transactional_id.startswith(prefix)
        )

    return client.retrying(deadline, attempt)


def _describe_all(
    client: AdminClient, node: int, ids: list[str], deadline: Deadline
) -> list[TransactionListing]:
    """Describe ``ids`` at ``node`` in one request; an id it no longer owns is looked up anew."""
    out: list[TransactionListing] = []
    settled: set[str] = set()
    deadline.waiting_for = f"a description of {len(ids)} transaction(s) from node {node}"
    try:
        response = client.request(node, DescribeTransactionsRequest(ids), deadline)
    except RETRIABLE as exc:
        if deadline.is_own(exc):
            raise
        states = []
    else:
        states = list(response.transaction_states)
    for state in states:
        error = error_for_code(state.error_code)
        if error is None:
            out.append(_listing(state, node))
            settled.add(state.transactional_id)
        elif isinstance(error, TransactionalIdNotFoundError):
            settled.add(state.transactional_id)  # expired since the listing
    for transactional_id in ids:
        if transactional_id not in settled:
            listing = _describe_one(client, transactional_id, deadline)
            if listing is not None:
                out.append(listing)
    return out


def _describe_ids(
    client: AdminClient, ids: Sequence[str], deadline: Deadline
) -> dict[str, TransactionListing | None]:
    """DescribeTransactions for ``ids``: one request per coordinator, sent at once.

    An id whose coordinator answers a retriable error (loading, moved, unreachable) is asked
    again, after backoff, at its coordinator found anew; TRANSACTIONAL_ID_NOT_FOUND is None.
    """
    out: dict[str, TransactionListing | None] = {}
    pending = sorted(set(ids))
    nodes: dict[str, int] = {}
    attempts = 0
    while pending:
        nodes.update(client.find_coordinators([t for t in pending if t not in nodes], deadline))
        by_node: dict[int, list[str]] = {}
        for transactional_id in pending:
            by_node.setdefault(nodes[transactional_id], []).append(transactional_id)
        requests = [
            (node, DescribeTransactionsRequest(asked), None)
            for node, asked in sorted(by_node.items())
        ]
        deadline.waiting_for = f"a description of {len(pending)} transaction(s)"
        answers = client.request_all(requests, deadline)
        again: list[str] = []
        for (node, _body, _version), answer in zip(requests, answers, strict=True):
            asked = by_node[node]
            errors: dict[str, KafkaError | None] = {}
            if isinstance(answer, KafkaError):
                errors = dict.fromkeys(asked, answer)
            else:
                for state in answer.transaction_states:
                    refusal = error_for_code(state.error_code)
                    if refusal is None:
                        out[state.transactional_id] = _listing(state, node)
                    elif isinstance(refusal, TransactionalIdNotFoundError):
                        out[state.transactional_id] = None
                    errors[state.transactional_id] = refusal
            for transactional_id in asked:
                error = errors.get(transactional_id)
                if transactional_id in out:
                    continue
                if error is not None and not isinstance(error, RETRIABLE):
                    raise error
                if error is not None and deadline.is_own(error):
                    raise error
                deadline.last_error = error or deadline.last_error
                if error is None or isinstance(error, MOVED):
                    nodes.pop(transactional_id, None)  # unanswered or moved: look it up again
                again.append(transactional_id)
        pending = again
        if pending:
            client.back_off(attempts, deadline)
            attempts += 1
    return out


def describe_transactions(
    config: Mapping[str, object],
    transactional_ids: Sequence[str],
    timeout: float | None = None,
) -> dict[str, TransactionListing | None]:
    """How each coordinator describes each of ``transactional_ids`` (None: it does not know it).

    The coordinators are found with one FindCoordinator (v4+), then each is sent one
    DescribeTransactions for all its ids, at once; retriable answers are asked again within one
    ``timeout`` (seconds; None: ``max.block.ms``). Unlike a listing, an id is never left out:
    the result has every id asked, or the call raises.
    """
    with TransactionAdmin(config, timeout) as admin:
        return admin.describe(transactional_ids)


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
    with TransactionAdmin(config, timeout) as admin:
        return admin.list(prefix)


def abort_transactions(
    config: Mapping[str, object],
    prefix: str,
    timeout: float | None = None,
) -> list[TransactionListing]:
    """Abort every open transaction whose transactional id starts with ``prefix``.

    Lists them (see :func:`list_transactions`), then sends EndTxn(abort) with each Ongoing
    transaction's described producer id and epoch, and waits until each abort is complete (its
    markers written: read_committed readers of those partitions are no longer held back). A
    transaction already ending (PrepareCommit, PrepareAbort) is waited for, not touched. Returns
    the listings of the transactions it aborted (as they were before the abort).

    Raises :class:`~kafka_sink.errors.KafkaError` naming every transaction it could not abort
    and why (after trying them all); a transaction that ended meanwhile (another process
    committed or aborted it) is not an error, nor in the result.
    """
    with TransactionAdmin(config, timeout) as admin:
        return admin.abort(prefix)


def _abort_one(client: AdminClient, listing: TransactionListing, deadline: Deadline) -> bool:
    """Abort one listed transaction; False when it ended by itself (nothing to abort)."""
    current: TransactionListing | None = listing

    def still_ending() -> TransactionListing | None:
        # Being committed or aborted right now: ask again (after backoff) until it is done.
        found = _describe_one(client, listing.transactional_id, deadline)
        if found is not None and found.state in ENDING_STATES:
            deadline.waiting_for = (
                f"transaction {listing.transactional_id!r} to leave state {found.state}"
            )
            raise ConcurrentTransactionsError(f"{listing.transactional_id!r} is {found.state}")
        return found

    if listing.state in ENDING_STATES:
        current = client.retrying(deadline, still_ending)
    if current is None or current.state not in OPEN_STATES:
        return False
    try:
        _end_transaction(client, current.prepared(), False, deadline)
    except _LOST as exc:
        # Ended or taken over between the description and the abort: not ours to abort.
        log.info(
            "transaction %r ended before it could be aborted: %s", listing.transactional_id, exc
        )
        return False
    # EndTxn returns once the coordinator recorded the abort (PrepareAbort); the markers reach
    # the partitions after that. Wait for CompleteAbort, so that when this returns the
    # transaction no longer holds back read_committed readers.
    client.retrying(deadline, still_ending)
    return True


# -- a session: one admin client for several calls ----------------------------------------------


class TransactionAdmin:
    """The calls of this module over one admin client, kept open until :meth:`close`.

    For a caller that makes several in a row (the Spark driver committing a batch: list, then
    commit them all, then sweep): connections, API versions and the finalized features are
    negotiated once. The client is opened on first use. Each call is bounded by its own
    ``timeout`` (seconds; None: the config's ``max.block.ms``); not thread-safe. A context
    manager: leaving the ``with`` block closes it.
    """

    def __init__(self, config: Mapping[str, object], timeout: float | None = None) -> None:
        _check_timeout(timeout)
        self._config = config
        self._timeout = timeout
        self._client: AdminClient | None = None
        self._max_block_ms = 0

    def __enter__(self) -> TransactionAdmin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(
        self,
        operation: str,
        body: Callable[[AdminClient, Deadline], T],
        timeout: float | None = None,
    ) -> T:
        if self._client is None:
            self._client, cfg = AdminClient.from_config(self._config)
            self._max_block_ms = cfg.max_block_ms
        timeout = self._timeout if timeout is None else timeout
        timeout_ms = self._max_block_ms if timeout is None else int(timeout * 1000)
        return body(self._client, Deadline(self._client.clock, timeout_ms, operation))

    def complete(
        self, prepared: PreparedTransaction, commit: bool = True
    ) -> tuple[int, int] | None:
        """:func:`complete_transaction` over this session's client."""
        _check_prepared(prepared)
        what = "commit" if commit else "abort"
        result: tuple[int, int] | None = self._call(
            f"complete_transaction({what}) of {prepared.transactional_id!r} (producer id "
            f"{prepared.producer_id}, epoch {prepared.producer_epoch})",
            lambda client, deadline: _complete_one(client, prepared, commit, deadline),
        )
        return result

    def complete_all(
        self, prepared: Sequence[PreparedTransaction], commit: bool = True
    ) -> list[Completion]:
        """:func:`complete_transactions` over this session's client."""
        for handle in prepared:
            _check_prepared(handle)
        what = "commit" if commit else "abort"
        items = list(prepared)
        result: list[Completion] = self._call(
            f"complete_transactions({what}) of {len(items)} transaction(s)",
            lambda client, deadline: _end_all(client, items, commit, deadline),
        )
        return result

    def abort(self, prefix: str) -> list[TransactionListing]:
        """:func:`abort_transactions` over this session's client."""
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(
                "abort_transactions needs a non-empty transactional-id prefix (an empty one would "
                "abort every transaction of the cluster)"
            )
        operation = f"abort_transactions({prefix!r})"

        def body(client: AdminClient, deadline: Deadline) -> list[TransactionListing]:
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

        result: list[TransactionListing] = self._call(operation, body)
        return result

    def describe(self, transactional_ids: Sequence[str]) -> dict[str, TransactionListing | None]:
        """:func:`describe_transactions` over this session's client."""
        ids = list(transactional_ids)
        if any(not isinstance(t, str) or not t for t in ids):
            raise ValueError("describe_transactions needs non-empty transactional ids")
        result: dict[str, TransactionListing | None] = self._call(
            f"describe_transactions({len(ids)} id(s))",
            lambda client, deadline: _describe_ids(client, ids, deadline),
        )
        return result

    def init_producer_id(
        self, transactional_id: str, transaction_timeout_ms: int = 60_000
    ) -> tuple[int, int]:
        """:func:`init_producer_id` over this session's client."""
        result: tuple[int, int] = self._call(
            f"init_producer_id({transactional_id!r})",
            lambda client, deadline: init_producer_id(
                client, transactional_id, transaction_timeout_ms, deadline
            ),
        )
        return result

    def producers(
        self, partitions: Sequence[TopicPartition], timeout: float | None = None
    ) -> dict[TopicPartition, PartitionProducers]:
        """Each partition's active producers and log end offset
        (:func:`~kafka_sink.admin.producers.describe_producers`), within ``timeout`` (seconds;
        None: this session's)."""
        _check_timeout(timeout)
        wanted = list(partitions)
        result: dict[TopicPartition, PartitionProducers] = self._call(
            f"describe_producers({len(wanted)} partition(s))",
            lambda client, deadline: describe_producers(client, wanted, deadline),
            timeout,
        )
        return result

    def list(self, prefix: str) -> list[TransactionListing]:
        """:func:`list_transactions` over this session's client."""
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
        result: list[TransactionListing] = self._call(
            f"list_transactions({prefix!r})",
            lambda client, deadline: _list(client, prefix, deadline),
        )
        return result

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
