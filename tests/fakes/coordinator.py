"""A model of Kafka's transaction coordinator (Transactions V2, or V1 on request), on a manual
clock.

Role: the driver's exactly-once commit is tested against what the coordinator would answer, not
against a list of expected calls. :class:`FakeCoordinator` keeps, per transactional id, what
Kafka's ``TransactionMetadata`` keeps (producer id, epoch, state, partitions, transaction start
time and timeout) and answers InitProducerId, the first write of a transaction (Produce v12 adds
its partition), EndTxn v5, DescribeTransactions and ListTransactions as
``TransactionCoordinator`` does:

- InitProducerId fences: an Ongoing transaction is aborted with an epoch bump, then the id moves
  to a fresh epoch (Empty); a new id gets a new producer id at epoch 0.
- EndTxn v5 bumps the epoch on every end; a retry (the epoch just before the current one, or,
  after the end rolled the epoch over to a new producer id, the last epoch of the previous
  producer id: Kafka's retryOnOverflow) of a commit that completed answers NONE, of an abort
  that completed too; commit after an abort or on Empty answers INVALID_TXN_STATE; a wrong
  epoch PRODUCER_FENCED, a wrong producer id INVALID_PRODUCER_ID_MAPPING.
- The reaper (:meth:`FakeCoordinator.expire`, run by :meth:`advance`) aborts a transaction
  older than its timeout, counted as Kafka does on the wall clock (``transaction_start_time_ms``
  is wall-clock ms), bumping the epoch (PrepareEpochFence, then CompleteAbort).
- Transactions V1 (``FakeCoordinator(transaction_version=1)``): an end keeps the epoch, so a
  retry is a request at the current epoch, any older epoch is PRODUCER_FENCED, and an abort with
  nothing open is INVALID_TXN_STATE; a write stands for AddPartitionsToTxn then Produce (a stale
  epoch is refused by the AddPartitionsToTxn, PRODUCER_FENCED). Fences and the reaper bump the
  epoch as under V2.
- Markers are written at once: Prepare* states pass straight to Complete*. Each is kept in
  :attr:`FakeCoordinator.markers` (at the offset the partition's next row gets), and
  :meth:`FakeCoordinator.transaction_outcome` reads a transaction's outcome from them as
  ``kafka_sink.admin.control_records`` reads it from a partition (operation ``"outcome"``).
- :meth:`read_committed` is what a read_committed consumer sees: the rows of committed
  transactions, per partition.
- Each partition's leader keeps, per producer id, what Kafka's ``ProducerStateEntry`` keeps
  (:class:`LeaderProducerState`: epoch, last sequence, the open transaction's first offset; a
  row's offset is its index in :attr:`FakeCoordinator.log`): a write at a new epoch restarts
  the sequence at 0, a marker ends the open transaction, and a marker at a bumped epoch (V2)
  moves the entry to that epoch with no sequence. :meth:`describe_producers` answers as
  ``kafka_sink.admin.producers.describe_producers`` does (operation ``"producers"``).

A task's side: :class:`CoordinatedProducer` is a transactional producer of one id over the
model, shaped like the :class:`~tests.fakes.spark.FakeTxnProducer` a task leases, and
:meth:`FakeCoordinator.describe_states` has the shape of
``kafka_sink.spark.executor.slots.describe_states`` (the round a task asks before its
InitProducerId), so the slot choice and the driver's commit are tested against one model.

Fault injection: :meth:`FakeCoordinator.script` queues answers for the next calls of one
operation (``"init"``, ``"write"``, ``"end_txn"``, ``"describe"``, ``"list"``): an error code
answered instead of applying the request, :data:`LOST_ANSWER` (applied, then the connection
drops before the answer), :data:`TIMEOUT` (not applied, no answer in time) or a callable run
before the request is applied (to stage a concurrent fence or a timeout abort).

:func:`coordinator_ops` builds the committer's ``TransactionOps`` over it, ending transactions
as ``kafka_sink.admin.transactions`` does: a commit refused because the transaction is gone
raises ``TransactionLostError``, an abort of an aborted transaction succeeds, retriable answers
reach the caller (the committer retries them).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kafka_sink.admin.control_records import TransactionOutcomeUnknownError
from kafka_sink.admin.producers import ActiveProducer, PartitionProducers
from kafka_sink.admin.transactions import TransactionListing
from kafka_sink.clock import ManualClock
from kafka_sink.errors import (
    BrokerResponseError,
    InvalidTxnStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionLostError,
    error_for_code,
)
from kafka_sink.prepared import PreparedTransaction, TopicPartition
from kafka_sink.producer.futures import PartitionOffsets
from kafka_sink.spark.driver.eos.committer import TransactionOps
from tests.fakes.spark import FakeFuture

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TXN_STATE = 48
CONCURRENT_TRANSACTIONS = 51
TOPIC_AUTHORIZATION_FAILED = 29
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105

RETRIABLE_CODES = (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
    CONCURRENT_TRANSACTIONS,
)

EMPTY, ONGOING = "Empty", "Ongoing"
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT = "CompleteCommit", "CompleteAbort"
PREPARE_EPOCH_FENCE = "PrepareEpochFence"

_MAX_EPOCH = 32767


class _Signal:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


LOST_ANSWER = _Signal("LOST_ANSWER")  # applied, then the connection dropped
TIMEOUT = _Signal("TIMEOUT")  # never applied, never answered

Answer = int | _Signal | Callable[[], None]


@dataclass
class TxnMetadata:
    """What the coordinator holds for one transactional id (Kafka's ``TransactionMetadata``)."""

    producer_id: int
    producer_epoch: int
    state: str = EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    timeout_ms: int = 60_000
    start_ms: int = -1  # wall-clock, as Kafka's transaction_start_time_ms
    serial: int = -1  # which run of a transaction on this id the rows belong to
    previous_producer_id: int = -1  # the producer id before an epoch overflow moved it on


@dataclass
class LeaderProducerState:
    """What a partition's leader keeps for one producer id (Kafka's ``ProducerStateEntry``)."""

    epoch: int
    last_sequence: int = -1
    txn_start_offset: int = -1


class FakeCoordinator:
    """Every transactional id of a cluster, one coordinator (see the module docstring)."""

    def __init__(self, clock: ManualClock | None = None, *, transaction_version: int = 2) -> None:
        self.clock = clock if clock is not None else ManualClock()
        self.transaction_version = transaction_version
        self.txns: dict[str, TxnMetadata] = {}
        self.log: dict[TopicPartition, list[tuple[int, object]]] = {}
        #: Per partition, the markers written to it: (offset, producer id, epoch, commit).
        self.markers: dict[TopicPartition, list[tuple[int, int, int, bool]]] = {}
        #: Per partition, its leader's state of each producer id that wrote to it.
        self.leader_states: dict[TopicPartition, dict[int, LeaderProducerState]] = {}
        self.committed: set[int] = set()
        self.calls: list[tuple[str, str]] = []
        self._scripts: dict[str, list[Answer]] = {}
        self._pids = itertools.count(1000)
        self._serials = itertools.count(1)
        #: Ids a ListTransactions answer leaves out (a coordinator whose cache is loading).
        self.listing_misses: set[str] = set()
        #: Every id ever initialised (kept by Kafka for transactional.id.expiration.ms).
        self.ever_used: set[str] = set()
        #: The ids of each :meth:`describe_states` round, in order.
        self.describes: list[tuple[str, ...]] = []

    # -- fault injection -------------------------------------------------------------------

    def script(self, operation: str, *answers: Answer) -> None:
        """Answer the next calls of ``operation`` with ``answers`` (then normally again)."""
        self._scripts.setdefault(operation, []).extend(answers)

    def _scripted(self, operation: str) -> Answer | None:
        queue = self._scripts.get(operation)
        if not queue:
            return None
        answer = queue.pop(0)
        if callable(answer) and not isinstance(answer, _Signal):
            answer()
            return None
        return answer

    def _call(self, operation: str, key: str, apply: Callable[[], int]) -> None:
        """Run one request: a scripted fault, else ``apply`` (its error code raises)."""
        self.calls.append((operation, key))
        answer = self._scripted(operation)
        if isinstance(answer, int) and answer != NONE:
            raise _error(answer, f"{operation} {key!r} (scripted)")
        if answer is TIMEOUT:
            raise KafkaTimeoutError(f"{operation} {key!r} got no answer (scripted)")
        code = apply()
        if answer is LOST_ANSWER:
            raise KafkaConnectionError(f"{operation} {key!r}: the connection was lost (scripted)")
        if code != NONE:
            raise _error(code, f"{operation} {key!r}")

    # -- time ------------------------------------------------------------------------------

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.expire()

    def expire(self) -> None:
        """The reaper: abort every transaction open longer than its timeout, fencing it."""
        now = self.clock.wall_ms()
        for tid, meta in self.txns.items():
            if meta.state == ONGOING and now - meta.start_ms > meta.timeout_ms:
                self.time_out(tid)

    def time_out(self, transactional_id: str) -> None:
        """The reaper's abort of one id's open transaction, whatever its age (fencing it)."""
        meta = self.txns[transactional_id]
        if meta.state == ONGOING:
            self._bump(meta)
            meta.state = PREPARE_EPOCH_FENCE
            self._complete(meta, commit=False)

    # -- the producer's requests -------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int = 60_000) -> tuple[int, int]:
        """InitProducerId: (producer id, epoch); fences whatever the id had open."""
        out: list[tuple[int, int]] = []

        def apply() -> int:
            self.ever_used.add(transactional_id)
            meta = self.txns.get(transactional_id)
            if meta is None:
                meta = TxnMetadata(next(self._pids), 0, timeout_ms=timeout_ms)
                self.txns[transactional_id] = meta
            else:
                if meta.state == ONGOING:  # the fence: abort at a bumped epoch
                    self._bump(meta)
                    meta.state = PREPARE_EPOCH_FENCE
                    self._complete(meta, commit=False)
                self._bump(meta)
                meta.state = EMPTY
                meta.timeout_ms = timeout_ms
            out.append((meta.producer_id, meta.producer_epoch))
            return NONE

        self._call("init", transactional_id, apply)
        return out[0]

    def begin_fence(self, transactional_id: str) -> None:
        """The first half of an InitProducerId that finds ``transactional_id``'s transaction
        Ongoing: the coordinator aborts it at a bumped epoch and answers CONCURRENT_TRANSACTIONS;
        the new producer's retry (:meth:`init_producer_id`) then moves the id on. In between,
        the id shows CompleteAbort at the old epoch + 1."""
        meta = self.txns[transactional_id]
        assert meta.state == ONGOING, meta.state
        self._bump(meta)
        meta.state = PREPARE_EPOCH_FENCE
        self._complete(meta, commit=False)

    def write(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        tp: TopicPartition,
        row: object,
        *,
        duplicate: bool = False,
    ) -> None:
        """A transactional Produce v12: adds the partition (the first one starts the txn).

        ``duplicate``: the leader already has a batch at this sequence, so it appends nothing
        and answers as if it had (V1: the partition is still added by AddPartitionsToTxn).
        """

        def apply() -> int:
            meta = self.txns.get(transactional_id)
            if meta is None or meta.producer_id != producer_id:
                return INVALID_PRODUCER_ID_MAPPING
            if meta.producer_epoch != epoch:
                return PRODUCER_FENCED
            if meta.state not in (EMPTY, ONGOING, COMPLETE_COMMIT, COMPLETE_ABORT):
                return CONCURRENT_TRANSACTIONS
            if meta.state != ONGOING:
                meta.state, meta.partitions = ONGOING, set()
                meta.start_ms, meta.serial = self.clock.wall_ms(), next(self._serials)
            meta.partitions.add(tp)
            if not duplicate:
                self._appended(tp, producer_id, epoch)
                self.log.setdefault(tp, []).append((meta.serial, row))
            return NONE

        self._call("write", transactional_id, apply)

    def begin(
        self,
        transactional_id: str,
        rows: Mapping[TopicPartition, Sequence[object]],
        timeout_ms: int = 60_000,
    ) -> PreparedTransaction:
        """What a task does: InitProducerId, write ``rows``, and hand back the handle."""
        pid, epoch = self.init_producer_id(transactional_id, timeout_ms)
        for tp, values in rows.items():
            for row in values:
                self.write(transactional_id, pid, epoch, tp, row)
        return PreparedTransaction(transactional_id, pid, epoch, tuple(rows))

    def end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> tuple[int, int]:
        """EndTxn v5: (producer id, epoch) the id moved to."""
        out: list[tuple[int, int]] = []

        def apply() -> int:
            meta = self.txns.get(transactional_id)
            if meta is None:
                return INVALID_PRODUCER_ID_MAPPING
            overflowed = (
                meta.previous_producer_id == producer_id
                and epoch == _MAX_EPOCH - 1
                and meta.producer_epoch == 0
            )
            if meta.producer_id != producer_id and not overflowed:
                return INVALID_PRODUCER_ID_MAPPING
            if self.transaction_version == 1:
                if epoch != meta.producer_epoch:
                    return PRODUCER_FENCED
                code = self._end_v1(meta, commit)
            else:
                retry = overflowed or epoch == meta.producer_epoch - 1
                if epoch != meta.producer_epoch and not retry:
                    return PRODUCER_FENCED
                code = self._end(meta, commit, retry)
            out.append((meta.producer_id, meta.producer_epoch))
            return code

        self._call("end_txn", transactional_id, apply)
        return out[0]

    def _end(self, meta: TxnMetadata, commit: bool, retry: bool) -> int:
        done, other = (
            (COMPLETE_COMMIT, COMPLETE_ABORT) if commit else (COMPLETE_ABORT, COMPLETE_COMMIT)
        )
        if meta.state == ONGOING:
            if retry:
                return PRODUCER_FENCED
            self._bump(meta)
            meta.state = PREPARE_COMMIT if commit else PREPARE_ABORT
            self._complete(meta, commit)
            return NONE
        if meta.state == done and retry:
            return NONE
        if meta.state in (PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE):
            return CONCURRENT_TRANSACTIONS
        if not commit and not retry and meta.state in (EMPTY, other, done):
            self._bump(meta)  # TV2: an abort with nothing open only bumps the epoch
            return NONE
        return INVALID_TXN_STATE

    def _end_v1(self, meta: TxnMetadata, commit: bool) -> int:
        done = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        if meta.state == ONGOING:
            meta.state = PREPARE_COMMIT if commit else PREPARE_ABORT
            self._complete(meta, commit)
            return NONE
        if meta.state == done:  # a retry: V1 answers it at the epoch it keeps
            return NONE
        if meta.state in (PREPARE_COMMIT, PREPARE_ABORT, PREPARE_EPOCH_FENCE):
            return CONCURRENT_TRANSACTIONS
        return INVALID_TXN_STATE

    def _bump(self, meta: TxnMetadata) -> None:
        if meta.producer_epoch + 1 >= _MAX_EPOCH:
            meta.previous_producer_id = meta.producer_id
            meta.producer_id, meta.producer_epoch = next(self._pids), 0
        else:
            meta.producer_epoch += 1

    def _complete(self, meta: TxnMetadata, commit: bool) -> None:
        meta.state = COMPLETE_COMMIT if commit else COMPLETE_ABORT
        if commit:
            self.committed.add(meta.serial)
        for tp in meta.partitions:  # the markers, at the id's epoch now
            at = len(self.log.get(tp, []))
            self.markers.setdefault(tp, []).append(
                (at, meta.producer_id, meta.producer_epoch, commit)
            )
            entry = self.leader_states.get(tp, {}).get(meta.producer_id)
            if entry is not None and meta.producer_epoch > entry.epoch:
                entry.epoch, entry.last_sequence = meta.producer_epoch, -1
            if entry is not None:
                entry.txn_start_offset = -1

    def _appended(self, tp: TopicPartition, producer_id: int, epoch: int) -> None:
        """The leader's state after one record of ``producer_id`` at ``epoch`` is appended."""
        states = self.leader_states.setdefault(tp, {})
        entry = states.get(producer_id)
        if entry is None or entry.epoch != epoch:
            entry = states[producer_id] = LeaderProducerState(epoch)
        if entry.txn_start_offset < 0:
            entry.txn_start_offset = len(self.log.get(tp, []))
        entry.last_sequence += 1

    def describe_producers(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionProducers]:
        """Each partition leader's producers and log end offset (one ``"producers"`` call)."""
        out: dict[TopicPartition, PartitionProducers] = {}

        def apply() -> int:
            for tp in partitions:
                states = self.leader_states.get(tp, {})
                out[tp] = PartitionProducers(
                    tp[0],
                    tp[1],
                    len(self.log.get(tp, [])),
                    tuple(
                        ActiveProducer(pid, e.epoch, e.last_sequence, e.txn_start_offset)
                        for pid, e in sorted(states.items())
                    ),
                )
            return NONE

        self._call("producers", ",".join(f"{t}-{p}" for t, p in partitions), apply)
        return out

    def transaction_outcome(
        self, prepared: PreparedTransaction, first_offsets: Mapping[TopicPartition, int]
    ) -> bool:
        """``admin.control_records``' answer from the markers: the first of ``prepared``'s
        producer id at its epoch or later, at or after its first offset (one ``"outcome"`` call).
        """
        out: list[bool] = []

        def apply() -> int:
            if not any(first_offsets.get(tp, -1) >= 0 for tp in prepared.partitions):
                raise TransactionOutcomeUnknownError(
                    f"the first offsets of transaction {prepared.transactional_id!r} in its "
                    "partitions are not known, so its markers cannot be read"
                )
            for tp in sorted(tp for tp in prepared.partitions if tp in first_offsets):
                out.extend(
                    commit
                    for at, pid, epoch, commit in self.markers.get(tp, [])
                    if at >= first_offsets[tp]
                    and pid == prepared.producer_id
                    and epoch >= prepared.producer_epoch
                )
                if out:
                    return NONE
            raise TransactionOutcomeUnknownError(
                f"no marker of {prepared.transactional_id!r} in {sorted(first_offsets)}"
            )

        self._call("outcome", prepared.transactional_id, apply)
        return out[0]

    # -- the admin's requests --------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionListing | None:
        """DescribeTransactions for one id; None for TRANSACTIONAL_ID_NOT_FOUND."""
        out: list[TransactionListing | None] = []

        def apply() -> int:
            meta = self.txns.get(transactional_id)
            out.append(None if meta is None else self._listing(transactional_id, meta))
            return NONE

        self._call("describe", transactional_id, apply)
        return out[0]

    def describe_states(self, config: Mapping[str, str], ids: Sequence[str]) -> list[str | None]:
        """``slots.describe_states`` answered from the model: each id's state, None if unknown.

        One DescribeTransactions round: one ``"describe"`` call (and scripted answer) for all.
        """
        self.describes.append(tuple(ids))
        out: list[str | None] = []

        def apply() -> int:
            out.extend(None if (meta := self.txns.get(t)) is None else meta.state for t in ids)
            return NONE

        self._call("describe", ",".join(ids), apply)
        return out

    def list_transactions(
        self, prefix: str, states: frozenset[str] | None = None
    ) -> list[TransactionListing]:
        """ListTransactions (by prefix and state), each described."""
        out: list[TransactionListing] = []

        def apply() -> int:
            for tid in sorted(self.txns):
                meta = self.txns[tid]
                if not tid.startswith(prefix) or tid in self.listing_misses:
                    continue
                if states is None or meta.state in states:
                    out.append(self._listing(tid, meta))
            return NONE

        self._call("list", prefix, apply)
        return out

    @staticmethod
    def _listing(transactional_id: str, meta: TxnMetadata) -> TransactionListing:
        open_now = meta.state not in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)
        return TransactionListing(
            transactional_id,
            meta.producer_id,
            meta.producer_epoch,
            meta.state,
            tuple(sorted(meta.partitions)) if open_now else (),
            coordinator_id=0,
            transaction_timeout_ms=meta.timeout_ms,
            transaction_start_time_ms=meta.start_ms if open_now else -1,
        )

    # -- what readers see --------------------------------------------------------------------

    def read_committed(self) -> dict[TopicPartition, list[object]]:
        """Per partition, the rows a read_committed consumer reads (committed transactions)."""
        return {
            tp: [row for serial, row in rows if serial in self.committed]
            for tp, rows in self.log.items()
        }

    def visible_rows(self) -> list[object]:
        return sorted((row for rows in self.read_committed().values() for row in rows), key=repr)

    def open_transactions(self) -> list[str]:
        """Ids whose transaction still holds read_committed readers back."""
        return sorted(
            t
            for t, m in self.txns.items()
            if m.state not in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)
        )


class CoordinatedProducer:
    """A transactional producer of ``config["transactional.id"]`` over a :class:`FakeCoordinator`.

    Every row goes to partition 0 of its topic; futures are done at once. A test sets the class's
    ``coordinator`` and replaces the task's producer factory with this class.
    """

    coordinator: ClassVar[FakeCoordinator]
    instances: ClassVar[list[CoordinatedProducer]] = []

    def __init__(self, config: dict[str, str]) -> None:
        self.config = config
        self.tid = config["transactional.id"]
        self.pid = -1
        self.epoch = -1
        self.partitions: set[TopicPartition] = set()
        self.next_offset = 0
        self.closed = False
        CoordinatedProducer.instances.append(self)

    def init_transactions(self, timeout: float | None = None) -> None:
        self.pid, self.epoch = self.coordinator.init_producer_id(self.tid)

    def begin_transaction(self) -> None:
        self.partitions = set()

    def send_columns(self, topic: str, values: Any, keys: Any = None, **kw: Any) -> FakeFuture:
        rows = [bytes(v) for v in values.to_pylist()]
        try:
            for row in rows:
                self.coordinator.write(self.tid, self.pid, self.epoch, (topic, 0), row)
        except ProducerFencedError as exc:
            return FakeFuture(None, exc)
        self.partitions.add((topic, 0))
        first = self.next_offset
        self.next_offset += len(rows)
        return FakeFuture({0: PartitionOffsets(first, first + len(rows) - 1, len(rows))}, None)

    def flush(self, timeout: float | None = None) -> None:
        pass

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        return PreparedTransaction(self.tid, self.pid, self.epoch, tuple(sorted(self.partitions)))

    def abort_transaction(self, timeout: float | None = None) -> None:
        coordinator_ops(self.coordinator).complete(self.prepare_transaction(), False)

    def close(self, timeout: float | None = None) -> None:
        self.closed = True

    def partitions_for(self, topic: str) -> list[int]:
        return [0]


def _error(code: int, context: str) -> KafkaError:
    error = error_for_code(code, context)
    assert error is not None
    return error


_LOST_CODES = (
    INVALID_TXN_STATE,
    PRODUCER_FENCED,
    INVALID_PRODUCER_ID_MAPPING,
    TRANSACTIONAL_ID_NOT_FOUND,
)


def install_coordinated_tasks(monkeypatch: Any, coordinator: FakeCoordinator) -> None:
    """Make exactly-once tasks write through ``coordinator``: their producers are
    :class:`CoordinatedProducer` and their slot choice asks it (the producer cache emptied)."""
    from kafka_sink.spark.executor import producer_cache, slots
    from kafka_sink.spark.executor import task as task_module

    CoordinatedProducer.coordinator = coordinator
    CoordinatedProducer.instances = []
    producer_cache.close_all()
    monkeypatch.setattr(task_module, "_create_transactional", CoordinatedProducer)
    monkeypatch.setattr(slots, "describe_states", coordinator.describe_states)


def coordinator_ops(coordinator: FakeCoordinator, *, batched: bool = True) -> TransactionOps:
    """The committer's ``TransactionOps`` over ``coordinator`` (see the module docstring)."""

    def complete(prepared: PreparedTransaction, commit: bool) -> None:
        try:
            coordinator.end_txn(
                prepared.transactional_id, prepared.producer_id, prepared.producer_epoch, commit
            )
        except BrokerResponseError as exc:
            if exc.code not in _LOST_CODES:
                raise
            now = coordinator.txns.get(prepared.transactional_id)
            if commit:
                seen = (
                    "nothing" if now is None else (now.state, now.producer_id, now.producer_epoch)
                )
                raise TransactionLostError(
                    f"transaction {prepared.transactional_id!r} cannot be committed: "
                    f"{exc.name}; the coordinator shows {seen}"
                ) from exc
            aborted = (
                now is not None
                and now.producer_id == prepared.producer_id
                and now.producer_epoch - prepared.producer_epoch in (0, 1)
                and now.state == COMPLETE_ABORT
            )
            if not aborted:
                raise InvalidTxnStateError(
                    f"cannot confirm the abort of {prepared.transactional_id!r}: {exc.name}"
                ) from exc

    def complete_all(
        handles: Sequence[PreparedTransaction], commit: bool
    ) -> list[KafkaError | None]:
        out: list[KafkaError | None] = []
        for handle in handles:
            try:
                complete(handle, commit)
            except KafkaError as exc:
                out.append(exc)
            else:
                out.append(None)
        return out

    def list_open(prefix: str) -> list[PreparedTransaction]:
        return [t.prepared() for t in coordinator.list_transactions(prefix, frozenset({ONGOING}))]

    def describe(ids: Sequence[str]) -> dict[str, TransactionListing | None]:
        return {tid: coordinator.describe(tid) for tid in ids}

    return TransactionOps(
        complete=complete,
        list_open=list_open,
        complete_all=complete_all if batched else None,
        describe=describe,
        init=coordinator.init_producer_id,
        producers=coordinator.describe_producers,
        outcome=coordinator.transaction_outcome,
    )
