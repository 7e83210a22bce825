"""TransactionManager: producer id, epoch, epoch bumps, and the transaction state machine.

Role (Java's TransactionManager): holds the producer id/epoch obtained with InitProducerId and
owns the per-partition sequence bookkeeping (a ``TxnPartitionMap``, ``producer.txn.sequences``):
it lets the accumulator drain and stamp batches, hears every batch's outcome, and decides, for
every failure, whether the partition's sequences can go on or need an epoch bump (KIP-360).
With a ``transactional.id`` it also owns the transaction state machine and the queue of
coordinator requests the sender sends (``producer.txn.coordinator``).

Transactions (Java's states): UNINITIALIZED -> (init_transactions) INITIALIZING -> READY ->
(begin_transaction) IN_TRANSACTION -> COMMITTING / ABORTING -> READY. A failed record or a
refused partition moves an open transaction to ABORTABLE_ERROR (only abort_transaction() leaves
it); fencing, authorization failures, unsupported versions and a transaction the coordinator no
longer holds move the producer to FATAL_ERROR for good; the error of a coordinator refusal says
why, that an open transaction's records are lost (aborted), and that writing them means
beginning again with a new producer. prepare_transaction() moves
IN_TRANSACTION -> PREPARED: the transaction stays open for another process to end, and only
init_transactions() leaves that state (its InitProducerId aborts the transaction if it is still
open). Under Transactions V1 a batch drains only once its partition was added with
AddPartitionsToTxn (``prepare_drain`` queues the partition); under V2 the first drained batch adds
it. EndTxn is sent only once every batch of the transaction completed, and not at all when no
batch was ever drained (the coordinator knows nothing of such a transaction). User calls wait on
a ``TransactionalRequestResult``; a call that timed out resumes the same wait when repeated.

Epoch bumps (the names are Java's; the sequence invariants are in ``producer.txn.sequences``):

- A batch that fails for good leaves its range unresolved; ``maybe_resolve_sequences`` (start of
  each sender run) settles it once nothing of its partition is in flight and requests an epoch
  bump for a real gap.
- OUT_OF_ORDER_SEQUENCE_NUMBER on the batch the broker should have taken next requests a bump;
  other OUT_OF_ORDER_SEQUENCE_NUMBER answers are retried without one, waiting for the earlier
  batches. UNKNOWN_PRODUCER_ID (brokers up to 2.4) requests a bump, once: a batch from an epoch
  that was already bumped, or from a partition already waiting for its re-stamp, is only
  retried (``can_retry``).
- An idempotent producer bumps locally (epoch + 1, as Java does; a new InitProducerId when the
  epoch would overflow). The partitions that requested it drain nothing until none of their
  batches is in a request; then ``start_sequences_at_beginning_if_ready`` re-stamps their
  in-flight batches from sequence 0 under the new epoch.
- A transactional producer cannot repair a gap inside a transaction: the batch fails, the
  transaction must be aborted, and the abort bumps the epoch (EndTxn v5, or under V1 an
  InitProducerId with the current epoch), under which every partition restarts at 0.

Invariants: the producer id/epoch, the states and the fatal error change only through this
class's methods (the sender and ``producer.txn.coordinator`` report answers by calling them);
an idempotent producer's InitProducerId, its attempts and its backoff are the sender's.

Locking: one lock, which also covers the ``TxnPartitionMap``; callers may hold the accumulator
lock when calling in (never the reverse).
"""

from __future__ import annotations

import enum
import heapq
import logging
import threading

from kafka_sink.errors import (
    AbortableTransactionError,
    ClusterAuthorizationFailedError,
    InvalidTxnStateError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    UnknownProducerIdError,
    UnsupportedVersionError,
)
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.producer.batch import NO_SEQUENCE, ProducerBatch
from kafka_sink.producer.txn.requests import (
    RequestKind,
    TransactionalRequestResult,
    TxnRequestHandler,
)
from kafka_sink.producer.txn.sequences import TopicPartition, TxnPartitionMap

log = logging.getLogger(__name__)

MAX_EPOCH = 32767


class TransactionState(enum.Enum):
    """Java's TransactionManager.State."""

    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING_TRANSACTION = "committing"
    ABORTING_TRANSACTION = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"
    # Written and flushed, handed to another process to end (prepare_transaction()).
    PREPARED_TRANSACTION = "prepared"


_S = TransactionState
# target -> the states it may be entered from (Java's isTransitionValid).
_VALID_SOURCES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.INITIALIZING: frozenset(
        {
            _S.UNINITIALIZED,
            _S.COMMITTING_TRANSACTION,
            _S.ABORTING_TRANSACTION,
            _S.PREPARED_TRANSACTION,
        }
    ),
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.ABORTABLE_ERROR: frozenset(
        {_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR}
    ),
    _S.PREPARED_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
}
# Errors that end the producer (Java's maybeTransitionToErrorState): only a new producer helps.
_FATAL_ERRORS = (
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    UnsupportedVersionError,
)
TRANSACTION_VERSION_FEATURE = "transaction.version"


class TransactionManager:
    def __init__(
        self,
        transactional_id: str | None = None,
        *,
        transaction_timeout_ms: int = 60000,
    ) -> None:
        self._lock = threading.Lock()
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self._transactional = transactional_id is not None
        self.producer_id = -1
        #: The id before the last init_transactions(): a re-initialised producer keeps it.
        self.previous_producer_id = -1
        self.producer_epoch = -1
        self._sequences = TxnPartitionMap()
        self._epoch_bump_required = False
        self.fatal_error: KafkaError | None = None
        # -- transactions (only with a transactional id) --
        self.state = TransactionState.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.coordinator: int | None = None
        # The finalized transaction.version the coordinator reported (0: unknown or V1 only).
        self.transaction_version = 0
        self._tv2 = False  # frozen at begin_transaction() for the whole transaction
        self._pending: list[tuple[tuple[int, int], TxnRequestHandler]] = []
        self.in_flight_handler: TxnRequestHandler | None = None
        self._partitions_in_transaction: set[TopicPartition] = set()
        self._new_partitions: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self.transaction_started = False
        self.transaction_begin_ms: int | None = None
        self._txn_epoch_bump_required = False
        self._init_result: TransactionalRequestResult | None = None
        self._end_result: TransactionalRequestResult | None = None

    # -- producer id ----------------------------------------------------------------------

    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        with self._lock:
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch

    # -- drain (called under the accumulator lock) ----------------------------------------

    def prepare_drain(self, batch: ProducerBatch) -> bool:
        """May ``batch`` (the head of its deque) be drained now?

        The negation of Java's shouldStopDrainBatchesForPartition, plus
        maybeUpdateProducerIdAndEpoch for a partition that can move to the current epoch.
        """
        with self._lock:
            if self.producer_id < 0 or self.fatal_error is not None:
                return False
            tp = batch.tp
            if self._transactional and not self._may_send_to_partition(tp):
                return False
            return self._sequences.prepare_drain(batch, self.producer_id, self.producer_epoch)

    def stamp(self, batch: ProducerBatch) -> None:
        """Give a first-time batch its base sequence (retries keep theirs)."""
        if batch.has_sequence:
            return
        with self._lock:
            self._sequences.stamp(batch, self._transactional)

    # -- outcomes -------------------------------------------------------------------------

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        """The broker acknowledged ``batch`` (or recognised it as a duplicate)."""
        with self._lock:
            self._sequences.handle_completed_batch(batch)

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException | None = None) -> None:
        """``batch`` failed for good: leave the other sequences alone, mark its range unresolved.

        Whether it was written is unknown (an earlier attempt may have landed), so it is settled
        by ``maybe_resolve_sequences`` once nothing of the partition is in flight. In a
        transaction the failure also moves the manager to an abortable (or, for fencing and
        authorization errors, fatal) error state.
        """
        if self._transactional and error is not None and batch.transactional:
            self.maybe_transition_to_error_state(error)
        with self._lock:
            self._sequences.handle_failed_batch(batch)

    def can_retry(self, batch: ProducerBatch, error: KafkaError) -> bool:
        """Java's canRetry for a batch whose retry budget is not spent.

        OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID are always retried by an idempotent
        producer; they request an epoch bump when they reveal a real gap
        (``TxnPartitionMap.sequence_error_needs_epoch_bump``). Any other error is retried if it
        is retriable.
        """
        if not isinstance(error, OutOfOrderSequenceNumberError | UnknownProducerIdError):
            return bool(error.retriable)
        if self._transactional:
            with self._lock:
                bumps_before = self._txn_epoch_bump_required
                self._txn_epoch_bump_required = False
            retry = self._can_retry_sequence_error(batch, error)
            with self._lock:
                gap = self._txn_epoch_bump_required
                self._txn_epoch_bump_required = bumps_before or gap
            # A real gap cannot be repaired inside a transaction: the batch fails, the
            # transaction must be aborted, and the abort bumps the epoch.
            return retry and not gap
        return self._can_retry_sequence_error(batch, error)

    def _can_retry_sequence_error(self, batch: ProducerBatch, error: KafkaError) -> bool:
        with self._lock:
            if self._sequences.sequence_error_needs_epoch_bump(batch, error):
                self._request_epoch_bump_for_partition(batch.tp)
            return True

    def replace_split(self, parent: ProducerBatch, children: list[ProducerBatch]) -> None:
        """A sequenced batch was split: its halves take over its sequence range, in order.

        The broker rejected the whole batch (nothing was written), so the first half's base
        sequence is the parent's and the next ones follow: no gap, no epoch bump (Java does the
        same in splitAndReenqueue).
        """
        with self._lock:
            self._sequences.replace_split(parent, children, self._transactional)

    def request_epoch_bump_for_partition(self, tp: TopicPartition) -> None:
        with self._lock:
            self._request_epoch_bump_for_partition(tp)

    def _request_epoch_bump_for_partition(self, tp: TopicPartition) -> None:
        if self._transactional:
            # Sequences of a transactional producer restart under the epoch the coordinator
            # gives after the abort (EndTxn v5, or InitProducerId with the current epoch).
            self._txn_epoch_bump_required = True
            return
        self._epoch_bump_required = True
        self._sequences.mark_for_rewrite(tp)

    # -- sender thread, start of each run -------------------------------------------------

    def maybe_resolve_sequences(self) -> None:
        """Settle unresolved partitions that have nothing in flight any more; a real gap
        requests an epoch bump."""
        with self._lock:
            for tp in self._sequences.resolve_sequences():
                self._request_epoch_bump_for_partition(tp)

    def bump_idempotent_epoch_and_reset_id_if_needed(self) -> bool:
        """Apply a requested bump; True when a new InitProducerId is needed instead."""
        with self._lock:
            if not self._epoch_bump_required or self.producer_id < 0:
                return self.producer_id < 0
            self._epoch_bump_required = False
            if self.producer_epoch >= MAX_EPOCH:
                self.producer_id = -1
                self.producer_epoch = -1
                return True
            self.producer_epoch += 1
            return False

    def start_sequences_at_beginning_if_ready(self) -> list[TopicPartition]:
        """Re-stamp partitions waiting for a bump once none of their batches is in a request.

        Their in-flight batches get sequences 0.. under the current id/epoch, in their order.
        Returns the partitions re-stamped.
        """
        with self._lock:
            if self.producer_id < 0 or self._epoch_bump_required:
                return []
            return self._sequences.start_sequences_at_beginning_if_ready(
                self.producer_id, self.producer_epoch, self._transactional
            )

    # -- transactions: user-thread operations -----------------------------------------------

    @property
    def is_transactional(self) -> bool:
        return self._transactional

    def describe_id(self) -> str:
        return f"transactional.id {self.transactional_id!r}"

    _describe_id = describe_id

    def _transition(self, target: TransactionState, operation: str) -> None:
        """Under the lock. Invalid transitions raise InvalidTxnStateError naming both states."""
        if target is not TransactionState.FATAL_ERROR and self.state not in _VALID_SOURCES[target]:
            raise InvalidTxnStateError(
                f"{self._describe_id()}: cannot {operation} in state {self.state.value!r}"
                + self._state_hint()
            )
        log.debug("%s: %s -> %s", self._describe_id(), self.state.value, target.value)
        self.state = target
        if target not in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            self.last_error = None

    def _state_hint(self) -> str:
        hints = {
            TransactionState.UNINITIALIZED: " (call init_transactions() first)",
            TransactionState.INITIALIZING: " (init_transactions() has not completed)",
            TransactionState.READY: " (call begin_transaction() first)",
            TransactionState.IN_TRANSACTION: " (a transaction is open: commit or abort it)",
            TransactionState.COMMITTING_TRANSACTION: " (a commit is under way: call "
            "commit_transaction() again to wait for it)",
            TransactionState.ABORTING_TRANSACTION: " (an abort is under way: call "
            "abort_transaction() again to wait for it)",
            TransactionState.PREPARED_TRANSACTION: " (the transaction was prepared: end it "
            "with complete_transaction(); call init_transactions() to use this producer again)",
        }
        return hints.get(self.state, "")

    def _maybe_fail_with_error(self) -> None:
        """Under the lock: raise the fatal error, or an AbortableTransactionError."""
        error = self.last_error
        if self.state is TransactionState.FATAL_ERROR and error is not None:
            raise error
        if self.state is TransactionState.ABORTABLE_ERROR and error is not None:
            raise AbortableTransactionError(
                f"{self._describe_id()}: the transaction failed and must be aborted "
                f"(call abort_transaction()): {error}"
            ) from error

    def initialize_transactions(self) -> TransactionalRequestResult:
        """Start (or resume waiting for) InitProducerId with the transactional id."""
        with self._lock:
            if self._init_result is not None and not self._init_result.acked:
                return self._init_result
            self._maybe_fail_with_error()
            if self.state not in (
                TransactionState.UNINITIALIZED,
                TransactionState.PREPARED_TRANSACTION,
            ):
                raise InvalidTxnStateError(
                    f"{self.describe_id()}: cannot init_transactions() in state "
                    f"{self.state.value!r}" + self._state_hint()
                )
            self._transition(TransactionState.INITIALIZING, "init_transactions()")
            self.previous_producer_id = self.producer_id
            self.producer_id = -1
            self.producer_epoch = -1
            self._partitions_in_transaction.clear()
            self._pending_partitions.clear()
            self._new_partitions.clear()
            self.transaction_started = False
            self.transaction_begin_ms = None
            result = self._init_result = TransactionalRequestResult("init_transactions()")
            self._enqueue(TxnRequestHandler(RequestKind.INIT_PRODUCER_ID, result=result))
            return result

    def begin_transaction(self, now_ms: int) -> None:
        with self._lock:
            self._maybe_fail_with_error()
            self._transition(TransactionState.IN_TRANSACTION, "begin_transaction()")
            self._tv2 = self.transaction_version >= 2
            self.transaction_begin_ms = now_ms
            self._end_result = None

    def begin_commit(self) -> TransactionalRequestResult:
        return self._begin_end(committed=True)

    def begin_abort(self) -> TransactionalRequestResult:
        return self._begin_end(committed=False)

    def _begin_end(self, *, committed: bool) -> TransactionalRequestResult:
        operation = "commit_transaction()" if committed else "abort_transaction()"
        completing = (
            TransactionState.COMMITTING_TRANSACTION
            if committed
            else TransactionState.ABORTING_TRANSACTION
        )
        with self._lock:
            result = self._end_result
            if result is not None and result.operation == operation and not result.acked:
                return result  # a call that timed out before: keep waiting for the same one
            if committed or self.state is TransactionState.FATAL_ERROR:
                self._maybe_fail_with_error()
            self._transition(completing, operation)
            # Partitions not yet added are dropped: their batches are failed, never sent.
            self._new_partitions.clear()
            result = self._end_result = TransactionalRequestResult(operation)
            self._enqueue(
                TxnRequestHandler(RequestKind.END_TXN, result=result, committed=committed)
            )
            return result

    def ensure_can_send(self) -> None:
        """Refuse a send outside a transaction or after an error (Java's failIfNotReadyForSend)."""
        state = self.state
        if state is TransactionState.IN_TRANSACTION:
            return
        with self._lock:
            self._maybe_fail_with_error()
            raise InvalidTxnStateError(
                f"{self._describe_id()}: cannot send in state {self.state.value!r}"
                + self._state_hint()
            )

    # -- transactions: state shared with the sender -----------------------------------------

    def _may_send_to_partition(self, tp: TopicPartition) -> bool:
        """Under the lock: may a batch of ``tp`` be produced now (Java's isSendToPartitionAllowed)?

        Under Transactions V2 the broker adds the partition itself (Produce v12); under V1 the
        partition must have been added with AddPartitionsToTxn first: it is queued for that here.
        """
        if tp in self._partitions_in_transaction:
            return True
        if self.state not in (
            TransactionState.IN_TRANSACTION,
            TransactionState.COMMITTING_TRANSACTION,
        ):
            return False
        if self._tv2:
            self._partitions_in_transaction.add(tp)
            self.transaction_started = True
            return True
        if tp not in self._pending_partitions:
            self._new_partitions.add(tp)
        return False

    def uses_transactions_v2(self) -> bool:
        return self._tv2

    def has_abortable_error(self) -> bool:
        return self.state is TransactionState.ABORTABLE_ERROR

    def is_aborting(self) -> bool:
        return self.state is TransactionState.ABORTING_TRANSACTION

    def is_completing(self) -> bool:
        return self.state in (
            TransactionState.COMMITTING_TRANSACTION,
            TransactionState.ABORTING_TRANSACTION,
        )

    def has_ongoing_transaction(self) -> bool:
        return self.state in (
            TransactionState.IN_TRANSACTION,
            TransactionState.COMMITTING_TRANSACTION,
            TransactionState.ABORTING_TRANSACTION,
            TransactionState.ABORTABLE_ERROR,
        )

    def has_pending_requests(self) -> bool:
        with self._lock:
            return bool(self._pending) or self.in_flight_handler is not None

    def maybe_transition_to_error_state(self, error: BaseException) -> None:
        if isinstance(error, _FATAL_ERRORS):
            self.transition_to_fatal_error(error)
        elif isinstance(error, KafkaError):
            self.transition_to_abortable_error(error)
        else:
            self.transition_to_abortable_error(KafkaError(repr(error)))

    def transition_to_abortable_error(self, error: KafkaError) -> None:
        with self._lock:
            if self.state in (TransactionState.ABORTING_TRANSACTION, TransactionState.FATAL_ERROR):
                return  # the abort under way (or the fatal error) already covers it
            if self.state is TransactionState.ABORTABLE_ERROR:
                return  # keep the first error: it is the cause
            if self.state not in _VALID_SOURCES[TransactionState.ABORTABLE_ERROR]:
                self._fatal(error)
                return
            log.info("%s: transaction aborted by an error: %s", self._describe_id(), error)
            self.state = TransactionState.ABORTABLE_ERROR
            self.last_error = error

    def transition_to_fatal_error(self, error: KafkaError) -> None:
        with self._lock:
            self._fatal(error)

    def _fatal(self, error: KafkaError) -> None:
        if self.state is TransactionState.FATAL_ERROR:
            return
        if self._transactional:
            # An idempotent producer's sender logs which of its requests failed, and why.
            log.error("%s: fatal producer error: %s", self._describe_id(), error)
        self.state = TransactionState.FATAL_ERROR
        self.last_error = error
        self.fatal_error = error
        failed = [h for _p, h in self._pending]
        self._pending.clear()
        for handler in failed:
            handler.fail(error)

    def _enqueue(self, handler: TxnRequestHandler) -> None:
        """Under the lock."""
        heapq.heappush(self._pending, (handler.priority, handler))

    def reenqueue(
        self, handler: TxnRequestHandler, retry_at_ms: int, error: KafkaError | None = None
    ) -> None:
        """Queue ``handler`` again, to be sent no earlier than ``retry_at_ms`` (``error``, if
        any, is why: the timeout message of a waiting call quotes it)."""
        with self._lock:
            handler.schedule_retry(retry_at_ms, error)
            if self.in_flight_handler is handler:
                self.in_flight_handler = None
            if self.state is TransactionState.FATAL_ERROR and self.last_error is not None:
                handler.fail(self.last_error)
                return
            self._enqueue(handler)

    def lookup_coordinator(self) -> None:
        """Forget the coordinator and queue a FindCoordinator (once)."""
        with self._lock:
            self.coordinator = None
            if not any(h.kind is RequestKind.FIND_COORDINATOR for _p, h in self._pending) and not (
                self.in_flight_handler is not None
                and self.in_flight_handler.kind is RequestKind.FIND_COORDINATOR
            ):
                self._enqueue(TxnRequestHandler(RequestKind.FIND_COORDINATOR))

    def next_request(self, has_incomplete_batches: bool, now_ms: int) -> TxnRequestHandler | None:
        """The next coordinator request to send now, if any (Java's nextRequest).

        AddPartitionsToTxn is queued for partitions waiting to be added; EndTxn waits until
        every batch of the transaction is complete; with an error pending, queued requests fail
        with it (except FindCoordinator, which an abort still needs).
        """
        with self._lock:
            if self.in_flight_handler is not None:
                return None
            if self._new_partitions and self.state in (
                TransactionState.IN_TRANSACTION,
                TransactionState.COMMITTING_TRANSACTION,
            ):
                parts = frozenset(self._new_partitions)
                self._pending_partitions |= parts
                self._new_partitions.clear()
                self._enqueue(TxnRequestHandler(RequestKind.ADD_PARTITIONS, partitions=parts))
            while self._pending:
                _prio, handler = self._pending[0]
                if handler.kind is RequestKind.END_TXN and has_incomplete_batches:
                    return None
                if now_ms < handler.retry_at_ms:
                    return None
                heapq.heappop(self._pending)
                if (
                    self.state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR)
                    and self.last_error is not None
                    and handler.kind is not RequestKind.FIND_COORDINATOR
                ):
                    if handler.kind is RequestKind.ADD_PARTITIONS:
                        self._pending_partitions -= handler.partitions
                    handler.fail(self._error_for_waiters())
                    continue
                if handler.kind is RequestKind.FIND_COORDINATOR and not any(
                    h.needs_coordinator for _p, h in self._pending
                ):
                    continue  # nothing needs the coordinator any more
                if handler.needs_coordinator and self.coordinator is None:
                    self._enqueue(handler)
                    if not any(h.kind is RequestKind.FIND_COORDINATOR for _p, h in self._pending):
                        self._enqueue(TxnRequestHandler(RequestKind.FIND_COORDINATOR))
                    continue
                if handler.kind is RequestKind.END_TXN and not self.transaction_started:
                    # Nothing was produced in this transaction: the coordinator knows nothing
                    # of it (an EndTxn would get INVALID_TXN_STATE), so it ends here.
                    self._complete_transaction(handler, None, None)
                    continue
                self.in_flight_handler = handler
                return handler
            return None

    def time_to_next_request_ms(self, now_ms: int) -> int | None:
        with self._lock:
            if not self._pending or self.in_flight_handler is not None:
                return None
            return max(self._pending[0][1].retry_at_ms - now_ms, 0)

    def request_sent(self, handler: TxnRequestHandler) -> None:
        handler.record_attempt()

    def request_done(self, handler: TxnRequestHandler) -> None:
        with self._lock:
            if self.in_flight_handler is handler:
                self.in_flight_handler = None

    # -- transactions: coordinator answers (sender thread) ----------------------------------

    def set_coordinator(self, node_id: int) -> None:
        with self._lock:
            self.coordinator = node_id

    def set_transaction_version(self, level: int | None) -> None:
        if level is not None:
            self.transaction_version = level

    def init_producer_id_succeeded(
        self, handler: TxnRequestHandler, producer_id: int, producer_epoch: int
    ) -> None:
        with self._lock:
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch
            self._reset_sequences_for_new_epoch()
            self.state = TransactionState.READY
            self.last_error = None
        if handler.result is not None:
            handler.result.done()

    def add_partitions_succeeded(self, partitions: frozenset[TopicPartition]) -> None:
        with self._lock:
            self._pending_partitions -= partitions
            self._partitions_in_transaction |= partitions
            self.transaction_started = True

    def add_partitions_failed(self, partitions: frozenset[TopicPartition]) -> None:
        """``partitions`` could not be added (the transaction is failing): not pending any more;
        their batches stay queued until the abort drops them."""
        with self._lock:
            self._pending_partitions -= partitions

    def has_new_partitions(self) -> bool:
        """Partitions wait for an AddPartitionsToTxn not yet queued (Transactions V1)."""
        return bool(self._new_partitions)

    def end_txn_abortable(self, handler: TxnRequestHandler, error: KafkaError) -> None:
        """EndTxn answered TRANSACTION_ABORTABLE: the commit cannot succeed; abort instead."""
        with self._lock:
            if self.state is TransactionState.ABORTING_TRANSACTION:
                # Aborting is what the broker asks for: try again.
                self._enqueue(handler)
                return
            self.state = TransactionState.ABORTABLE_ERROR
            self.last_error = error
            waiter_error = self._error_for_waiters()
        handler.fail(waiter_error)

    def _error_for_waiters(self) -> KafkaError:
        """Under the lock: the error a caller waiting on a failed operation gets."""
        error = self.last_error
        assert error is not None
        if self.state is TransactionState.ABORTABLE_ERROR:
            wrapped = AbortableTransactionError(
                f"{self.describe_id()}: the transaction failed and must be aborted "
                f"(call abort_transaction()): {error}"
            )
            wrapped.__cause__ = error
            return wrapped
        return error

    def _elapsed_note(self, now_ms: int | None) -> str:
        begin = self.transaction_begin_ms
        if begin is None or now_ms is None:
            return ""
        elapsed = now_ms - begin
        over = " (longer than" if elapsed >= self.transaction_timeout_ms else " (within"
        return (
            f"; this transaction began {elapsed} ms ago{over} "
            f"transaction.timeout.ms={self.transaction_timeout_ms})"
        )

    def _lost_consequence(self) -> str:
        """Under the lock: what a fatal coordinator answer means for the open transaction's
        records, and what the user does next (the producer is done either way)."""
        if not self.transaction_started and self.state not in (
            TransactionState.IN_TRANSACTION,
            TransactionState.COMMITTING_TRANSACTION,
            TransactionState.ABORTING_TRANSACTION,
        ):
            return "This producer cannot be used any more: close it"
        return (
            "The transaction was aborted and its records are lost: none of them will become "
            "visible to read_committed consumers. This producer cannot be used any more; to "
            "write those records, begin again: close this producer, create a new one, call "
            "init_transactions() and begin_transaction(), and send them again (unless another "
            "process now owns this transactional.id)"
        )

    def fenced_error(
        self, error: KafkaError, handler: TxnRequestHandler, now_ms: int | None = None
    ) -> ProducerFencedError:
        """PRODUCER_FENCED / INVALID_PRODUCER_EPOCH from the coordinator, explained."""
        with self._lock:
            note = self._elapsed_note(now_ms)
            epoch = self.producer_epoch
            pid = self.producer_id
            consequence = self._lost_consequence()
        fenced = ProducerFencedError(
            f"{self.describe_id()} (producer id {pid}, epoch {epoch}) was fenced during "
            f"{handler.api_name}: another producer initialised the same transactional.id, or "
            "the coordinator aborted the open transaction because it exceeded "
            f"transaction.timeout.ms{note}. {consequence}"
        )
        fenced.__cause__ = error
        return fenced

    def lost_error(self, error: KafkaError, now_ms: int | None = None) -> KafkaError:
        """INVALID_TXN_STATE / INVALID_PRODUCER_ID_MAPPING while the transaction was open: the
        coordinator no longer holds it (it aborted it), so its records are lost."""
        with self._lock:
            note = self._elapsed_note(now_ms)
            consequence = self._lost_consequence()
        lost = type(error)(
            f"{self.describe_id()}: the transaction coordinator no longer has this transaction "
            f"open: the broker aborted it (typically because it was open longer than "
            f"transaction.timeout.ms{note}, or another producer took the id). {consequence}"
        )
        lost.__cause__ = error
        return lost

    def prepare(self) -> PreparedTransaction:
        """IN_TRANSACTION -> PREPARED: the handle of the transaction, which stays open.

        The caller has flushed and every batch is acknowledged; a failure seen meanwhile raises
        the abortable (or fatal) error instead.
        """
        with self._lock:
            self._maybe_fail_with_error()
            if self._new_partitions or self._pending_partitions:
                raise InvalidTxnStateError(
                    f"{self.describe_id()}: partitions are still being added to the transaction"
                )
            self._transition(TransactionState.PREPARED_TRANSACTION, "prepare_transaction()")
            assert self.transactional_id is not None
            return PreparedTransaction(
                self.transactional_id,
                self.producer_id,
                self.producer_epoch,
                tuple(self._partitions_in_transaction),
            )

    def end_txn_succeeded(
        self, handler: TxnRequestHandler, producer_id: int, producer_epoch: int
    ) -> None:
        with self._lock:
            self._complete_transaction(handler, producer_id, producer_epoch)

    def _complete_transaction(
        self, handler: TxnRequestHandler, producer_id: int | None, producer_epoch: int | None
    ) -> None:
        """Under the lock: the transaction ended (or had nothing to end): back to READY.

        EndTxn v5 (Transactions V2) returns a bumped epoch: sequences restart under it. Under
        V1 an abort after a sequence gap asks the coordinator for a bumped epoch first.
        """
        self._partitions_in_transaction.clear()
        self._pending_partitions.clear()
        self._new_partitions.clear()
        self.transaction_started = False
        self.transaction_begin_ms = None
        if producer_id is not None and producer_id >= 0 and producer_epoch is not None:
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch
            self._reset_sequences_for_new_epoch()
        elif not handler.committed and (
            self._txn_epoch_bump_required or self._sequences.has_unresolved_sequences()
        ):
            self.state = TransactionState.INITIALIZING
            self._enqueue(
                TxnRequestHandler(
                    RequestKind.INIT_PRODUCER_ID, result=handler.result, bump_epoch=True
                )
            )
            return
        self.state = TransactionState.READY
        self.last_error = None
        if handler.result is not None:
            handler.result.done()

    def _reset_sequences_for_new_epoch(self) -> None:
        """Under the lock: a new (id, epoch) with nothing in flight: every partition restarts
        at sequence 0 when it next drains (``prepare_drain`` moves its entry)."""
        self._txn_epoch_bump_required = False
        self._sequences.reset_for_new_epoch()

    def describe_wait(self, has_incomplete_batches: bool = False) -> str:
        """What a transactional call is waiting for, for its timeout message."""
        with self._lock:
            handler = self.in_flight_handler
            queued = [h for _p, h in sorted(self._pending, key=lambda e: e[0])]
            coordinator = self.coordinator
        who = self.describe_id()
        if handler is not None:
            where = "any broker" if coordinator is None else f"coordinator node {coordinator}"
            return f"the answer to {handler.api_name} from {where} ({who})"
        if not queued:
            return f"the transaction coordinator ({who})"
        handler = queued[0]
        last = f"; last answer: {handler.last_error}" if handler.last_error is not None else ""
        if handler.kind is RequestKind.END_TXN and has_incomplete_batches:
            return f"the transaction's records to be acknowledged before EndTxn can be sent ({who})"
        if handler.kind is RequestKind.FIND_COORDINATOR or (
            coordinator is None and handler.needs_coordinator
        ):
            return f"a broker to answer FindCoordinator for {who} (none reachable yet?){last}"
        return (
            f"the transaction coordinator (node {coordinator}) to take {handler.api_name} "
            f"({who}){last}"
        )

    # -- introspection (tests, diagnostics) -----------------------------------------------

    def next_sequence(self, tp: TopicPartition) -> int:
        with self._lock:
            return self._sequences.next_sequence(tp)

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        with self._lock:
            return self._sequences.last_acked_sequence(tp)

    def in_flight_count(self, tp: TopicPartition) -> int:
        with self._lock:
            return self._sequences.in_flight_count(tp)

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        with self._lock:
            return self._sequences.has_unresolved_sequence(tp)

    def has_pending_sequence_rewrite(self, tp: TopicPartition) -> bool:
        with self._lock:
            return self._sequences.has_pending_sequence_rewrite(tp)


__all__ = ["MAX_EPOCH", "NO_SEQUENCE", "TransactionManager", "TransactionState"]
