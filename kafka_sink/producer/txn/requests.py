"""Transactional requests: the pending-request handlers and the results callers wait on.

Role (Java's TxnRequestHandler and TransactionalRequestResult): a ``TxnRequestHandler`` is one
coordinator request the TransactionManager wants sent (FindCoordinator, InitProducerId,
AddPartitionsToTxn, EndTxn); the sender picks them in priority order (Java's: find the
coordinator first, then InitProducerId, then AddPartitionsToTxn, then EndTxn), builds the request
from the manager's current state, sends it to the coordinator (FindCoordinator goes to any node)
and hands the answer back to the manager. A ``TransactionalRequestResult`` is what the user's
``init_transactions()`` / ``commit_transaction()`` / ``abort_transaction()`` wait on.

Invariants: a handler's fields change only through its own methods (the manager and
``producer.txn.coordinator`` call them); a result completes exactly once (success or error) and
its wait is always bounded by the caller's timeout; a handler is in the queue or in flight,
never both, and at most one coordinator request is in flight at a time.
"""

from __future__ import annotations

import enum
import itertools
import threading
from dataclasses import dataclass, field

from kafka_sink.errors import KafkaError, KafkaTimeoutError

TopicPartition = tuple[str, int]

_order = itertools.count()


class TransactionalRequestResult:
    """Completion of one transactional operation, waited on by the user's thread."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._done = threading.Event()
        self.error: BaseException | None = None
        # The caller saw it succeed: a new call starts a new operation instead of resuming.
        self.acked = False

    def done(self, error: BaseException | None = None) -> None:
        if self._done.is_set():
            return
        self.error = error
        self._done.set()

    def is_completed(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_ms: int, waiting_for: object) -> None:
        """Wait up to ``timeout_ms``; KafkaTimeoutError saying what was awaited, or the error.

        ``waiting_for`` is called (if callable) only on timeout, for the message.
        """
        if not self._done.wait(max(timeout_ms, 0) / 1000.0):
            what = waiting_for() if callable(waiting_for) else waiting_for
            raise KafkaTimeoutError(
                f"{self.operation} timed out after {timeout_ms} ms while waiting for {what}; "
                f"calling {self.operation} again resumes the wait"
            )
        if self.error is not None:
            raise self.error
        self.acked = True


class RequestKind(enum.IntEnum):
    """The handler kinds in Java's priority order (lowest value is sent first)."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS = 2
    END_TXN = 3


_API_NAMES = {
    RequestKind.FIND_COORDINATOR: "FindCoordinator",
    RequestKind.INIT_PRODUCER_ID: "InitProducerId",
    RequestKind.ADD_PARTITIONS: "AddPartitionsToTxn",
    RequestKind.END_TXN: "EndTxn",
}


@dataclass(eq=False)
class TxnRequestHandler:
    """One pending coordinator request; the request itself is built when it is sent."""

    kind: RequestKind
    result: TransactionalRequestResult | None = None
    # EndTxn: commit (True) or abort (False).
    committed: bool = False
    # AddPartitionsToTxn: the partitions it adds.
    partitions: frozenset[TopicPartition] = frozenset()
    # InitProducerId: resume this (producer id, epoch) (KIP-360 epoch bump) instead of -1/-1.
    bump_epoch: bool = False
    attempts: int = 0
    retry_at_ms: int = 0
    # The last retriable error, for a timeout message.
    last_error: KafkaError | None = None
    order: int = field(default_factory=lambda: next(_order))

    @property
    def priority(self) -> tuple[int, int]:
        return (int(self.kind), self.order)

    @property
    def api_name(self) -> str:
        """The protocol name of the request (for messages)."""
        return _API_NAMES[self.kind]

    @property
    def needs_coordinator(self) -> bool:
        return self.kind is not RequestKind.FIND_COORDINATOR

    def record_attempt(self) -> None:
        """The request went out once more (the retry backoff grows with the attempts)."""
        self.attempts += 1

    def schedule_retry(self, retry_at_ms: int, error: KafkaError | None = None) -> None:
        """Send again no earlier than ``retry_at_ms``; ``error`` (if any) is why."""
        self.retry_at_ms = retry_at_ms
        if error is not None:
            self.last_error = error

    def retain_partitions(self, partitions: frozenset[TopicPartition]) -> None:
        """AddPartitionsToTxn: only ``partitions`` are left to add (the others were added)."""
        self.partitions = partitions

    def fail(self, error: KafkaError) -> None:
        if self.result is not None:
            self.result.done(error)

    def __repr__(self) -> str:
        extra = ""
        if self.kind is RequestKind.END_TXN:
            extra = " commit" if self.committed else " abort"
        elif self.kind is RequestKind.ADD_PARTITIONS:
            extra = f" {sorted(self.partitions)}"
        return f"TxnRequestHandler({self.kind.name}{extra}, attempts={self.attempts})"


__all__ = ["RequestKind", "TransactionalRequestResult", "TxnRequestHandler"]
