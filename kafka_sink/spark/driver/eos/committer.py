"""The driver's exactly-once commit: a roll-forward log over an intent store (``intents.py``).

Role: Spark calls ``commit(messages, batchId)`` on the driver once the tasks of a batch are done;
each message carries the :class:`PreparedTransaction` its task attempt left open. This module
commits them all so that a read_committed reader sees the batch exactly once, whatever fails:

1. the store says the batch is done (a re-run after a restart): abort the re-run's transactions;
2. the store holds an intent for the batch that is not done (the driver died, or a commit failed,
   between the intent and done): commit the recorded transactions, write done, then abort the
   re-run's;
3. otherwise: verify, then commit. DescribeTransactions on the batch's own ids (never absence
   from a ListTransactions answer, which a coordinator moving or loading can leave out) must show
   each Ongoing at the producer id and epoch its task reported. One that is not (fenced by another
   attempt's InitProducerId, aborted by the coordinator after ``transaction.timeout.ms``, unknown
   to the coordinator), or one too close to its ``transaction.timeout.ms`` to be committed
   before the coordinator's reaper may abort it, fails the batch with that cause before anything
   becomes visible, so the re-run writes the whole batch again (the preflight refuses brokers
   without DescribeTransactions; one that still lacks it skips the check, with one warning per
   driver). A transaction's age is counted on the brokers' clock as their answers show it
   (``_brokers_now``: a driver clock ahead of theirs by what the planning's time proves is
   corrected). Then the intent is written durably **before** the first EndTxn (naming, per
   transaction, the fingerprint of its task's rows), each transaction is committed, and done is
   written. An intent recorded past its deadline (below) has the batch's transactions checked
   again first: one no longer open or about to expire makes the batch recorded as committing
   nothing of this run (partial, all of its partitions lost), its transactions aborted;
4. the store holds the batch **partial**: Kafka lost some of its transactions after others
   committed (below). The re-run's tasks of the committed Spark partitions wrote nothing and
   hand back their rows' fingerprints (``skipped``); each must equal the recorded one, which
   shows the re-run gave those partitions the same rows, and then the lost partitions' new
   transactions are committed as in 3. A fingerprint that differs, or a committed partition
   written again, stops the query with :class:`SinkPartlyCommittedError` (nothing of the re-run
   committed): its rows could not be shown to complete the batch exactly once. A batch an
   earlier release recorded lost (an intent marked with the ids Kafka lost, which that release
   wrote whole again) is read as partial: committed are its other Spark partitions, which that
   release did not record, nor their fingerprints, so its re-run stops the same way.

Once the intent is written the batch is finished, not failed: EndTxn answers that may clear
(retriable errors, a lost connection, a timeout) are retried with backoff until
``transaction.timeout.ms`` has passed since the intent (by then every transaction of the batch is
either committed or aborted by its coordinator); only a transaction Kafka lost fails the batch,
naming what is visible. A commit refused because its id moved on is read from its partitions
(``outcomes.py``); when its marker cannot be read, the batch fails as incomplete
(:class:`SinkCommitOutcomeUnknownError`, naming the transactions and why) with its intent
unfinished, so nothing of it is recorded lost or written again, and the next planning reads
again. A done record that cannot be written does not fail a committed batch (the next
planning's :meth:`EosCommitter.recover` finishes the intent). Before the intent, every
failure path (a store that cannot be read or written, a describe that never answers, the
writer's ``check`` refusing a batch over its bad-row bounds) aborts the batch's transactions
and sweeps, so a failed batch leaves nothing visible and nothing open;
except an intent write that reported an error: the intent may have landed, so the batch is
aborted only once the store shows it absent (committed when the store shows it, left to be
rolled forward when the store cannot say). Likewise :meth:`EosCommitter.abort` with an
unreadable store aborts the batch's transactions only when its commit never ran.

An abort first learns what the open transactions of its unfinished tasks (those Spark passed no
message for) had written, before it ends any of them (``aborted.py``; a count for the aborted
document only: whatever it meets, the aborts run).

Every commit and abort then sweeps: the ongoing transactions of the write's prefix that neither
the batch nor an unfinished intent names (failed or speculative attempts, earlier runs) are
aborted, so nothing lingers to hold back read_committed readers. :meth:`EosCommitter.recover`
(run while Spark plans a batch, before its tasks start) finishes an unfinished intent, so a
re-run's tasks never re-initialise (and so abort) an id whose transaction an intent names; a
write's start then sweeps the same way (:meth:`EosCommitter.sweep_leftovers`: a planning that
starts a streaming query on a driver, ``start.py``, and a batch job with ``idempotencyKey``,
``idempotency.py``).

A write's committer is built from its :class:`~kafka_sink.spark.eos_plan.EosPlan`
(:meth:`EosCommitter.for_plan`: the plan's intent store, :func:`listing_ops` on the cluster, the
write's ``transaction.timeout.ms``) by ``datasource.py`` while planning and by ``writer.py`` in
``commit()`` / ``abort()``.

Invariants:
- An intent is durable before the first EndTxn of its batch; a transaction named by an intent is
  only ever committed, never aborted, and ``done`` is written only after all of them committed.
- A transaction is aborted only when no message being committed and no unfinished intent names
  it (compared by transactional id, producer id and epoch), nor can: a batch whose intent may
  have been written, but cannot be read back, is never aborted.
- A transaction lost between the verification and its EndTxn (the broker aborted it meanwhile,
  or the driver was down longer than ``transaction.timeout.ms`` between two EndTxns) fails the
  batch naming the Spark partitions committed and lost; the batch is then recorded partial:
  the partitions committed by this and every earlier run of the batch, with their fingerprints,
  and the ones lost. A partition recorded committed is never written again by a re-run that
  commits: a re-run commits only when each committed partition's task skipped with an equal
  fingerprint.
- A commit refused because its id moved on (an earlier EndTxn of it applied, its answer lost,
  then another InitProducerId) is not taken as lost before its partitions are asked: a COMMIT
  marker makes it committed (``outcomes.py``), only an ABORT marker makes it lost. One whose
  marker cannot be read is unknown: the intent stays unfinished (never marked partial, so no
  re-run writes any of it), the batch fails with :class:`SinkCommitOutcomeUnknownError`, and
  every later roll-forward (the next planning, commit or abort) commits and reads again; a
  later batch is not committed while an earlier one's outcome is unknown.
- Every wait is bounded: the retries after the intent by ``transaction.timeout.ms`` since it,
  the verification's by ``transaction.timeout.ms`` since the commit began, the intent write (to
  a store that waits on the network) by the smallest time the batch's transactions have left
  less a share kept for their EndTxns, one deadline for the store's read of the key and its
  append (a re-read after a failed write is bounded by the store; an intent it finds past the
  deadline is checked again before the first EndTxn); each call of the ops by the ops' own
  deadline.
- A commit refused by the fence before its intent became visible still aborts the batch's own
  transactions (exact producer id and epoch: never a newer driver's); only the sweep, which
  lists, needs the fence. A batch job without ``idempotencyKey`` whose every transaction
  committed succeeds though the fence refuses its done record: no later write reads its write
  id's record, and failing it would have the job run again.
- Kafka is reached only through the injected :class:`TransactionOps`, and time only through the
  injected clock and sleep, so the state machine is tested with fakes on a manual clock.
- The test-only fault hook (``fault_hooks.pause_commit``) sits between the durable intent and
  the first EndTxn.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from kafka_sink.clock import SYSTEM_CLOCK, Clock
from kafka_sink.errors import KafkaError, TransactionLostError, UnsupportedVersionError
from kafka_sink.prepared import PreparedTransaction, TopicPartition
from kafka_sink.sink_errors import (
    SinkCommitIncompleteError,
    SinkCommitOutcomeUnknownError,
    SinkError,
    SinkFencedError,
    SinkIntentUnknownError,
    SinkPartlyCommittedError,
    SinkTransactionLostError,
)
from kafka_sink.spark import fault_hooks
from kafka_sink.spark.commit_log.document import UnfinishedWrites
from kafka_sink.spark.driver.eos.aborted import count_unfinished, not_known
from kafka_sink.spark.driver.eos.claims import refuse_foreign_claim, take_claim
from kafka_sink.spark.driver.eos.fence import DriverFence, open_fence
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, PARTIAL, BatchRecord, IntentStore
from kafka_sink.spark.driver.eos.job_fence import job_fence
from kafka_sink.spark.driver.eos.outcomes import OutcomeReader, marker_reader, settle_lost
from kafka_sink.spark.driver.eos.plan_store import open_intent_store
from kafka_sink.spark.eos_plan import EosPlan, parse_transactional_id
from kafka_sink.spark.fault_hooks import pause_commit
from kafka_sink.spark.fingerprint import Fingerprint
from kafka_sink.spark.logs import warn_once

if TYPE_CHECKING:
    from kafka_sink.admin.producers import PartitionProducers
    from kafka_sink.admin.transactions import TransactionListing

__all__ = [
    "ALREADY_DONE",
    "COMMITTED",
    "ROLLED_FORWARD",
    "EosCommitter",
    "SinkCommitIncompleteError",
    "SinkCommitOutcomeUnknownError",
    "SinkIntentUnknownError",
    "SinkPartlyCommittedError",
    "SinkTransactionLostError",
    "TaskTransaction",
    "TransactionOps",
]

log = logging.getLogger("kafka_sink.spark")

T = TypeVar("T")

COMMITTED = "committed"
ALREADY_DONE = "already-done"
ROLLED_FORWARD = "rolled-forward"
_LOST_KEY = "lost"
# On a partial record read from an earlier release's lost intent: the Spark partitions that
# committed were not recorded (every partition of the batch but the lost ones).
_UNRECORDED_KEY = "committed_unrecorded"
# The producer's default, which a write without the setting runs with.
_DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
# As the clients' retry.backoff.ms / retry.backoff.max.ms defaults.
_BACKOFF_MS = 100
_BACKOFF_MAX_MS = 1_000
# A fence transaction spans one Produce and its EndTxn. While open it holds back read_committed
# readers of the intent partition, which every query shares: a driver stopped between the two
# must not hold them for the write's transaction.timeout.ms (up to 15 minutes).
_FENCE_TRANSACTION_TIMEOUT_MS = 60_000
_ABORTED_STATES = frozenset({"PrepareAbort", "CompleteAbort", "PrepareEpochFence"})
_FRESH_STATES = frozenset({"Empty", "Ongoing"})
# What a transaction must have left of its transaction.timeout.ms when the check before the
# intent sees it, so that the intent write and the EndTxns reach its coordinator before the
# reaper may abort it (an expired transaction still shows Ongoing until the reaper's next run,
# every 10 s), with an allowance for the driver's clock running behind the broker's. A quarter
# of the timeout at most, so that short timeouts still leave the tasks most of it. The intent
# write is bounded to what the batch has left less a third of this (``_intent_bound``), so that
# a slow intent write cannot outlast a transaction the check let through.
_EXPIRY_MARGIN_MS = 15_000
# A moment that proves nothing about the driver's clock (tasks_after_wall_ms not known).
_NOT_KNOWN_MS = -1
# How long an abort waits for the partition leaders' producer state (a count only).
_COUNT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class TaskTransaction:
    """The transaction one task's commit message names, with the Spark partition it wrote and
    the fingerprint of its rows (None when the task did not compute one)."""

    partition_id: int
    transaction: PreparedTransaction
    fingerprint: Fingerprint | None = None
    #: Per topic-partition, the first offset the task's writes were acknowledged at (where a
    #: commit whose outcome the coordinator forgot is read from: ``outcomes.py``).
    first_offsets: tuple[tuple[TopicPartition, int], ...] = ()


@dataclass(frozen=True)
class TransactionOps:
    """How the committer reaches Kafka (``admin.transactions`` in production, fakes in tests).

    ``complete(prepared, commit)`` ends one transaction (raises ``TransactionLostError`` when a
    commit finds it gone); ``list_open(prefix)`` returns the transactions whose id starts with
    ``prefix`` and that are open (Ongoing), as handles. ``complete_all(handles, commit)``, when
    given, ends them all at once: per handle None (ended) or the error ending it met
    (``TransactionLostError`` when Kafka lost it; a retriable error when it may clear).
    ``describe(ids)`` is DescribeTransactions: per id the coordinator's view, None when the
    coordinator does not know the id; without it the check before the first commit is skipped.
    ``close()`` releases what the ops hold (called once the commit or abort is over).
    ``init(id, transaction_timeout_ms)`` is InitProducerId (taking a query's fence).
    ``producers(partitions)`` is each partition leader's producer state and log end offset
    (``admin/producers.py``); without it an abort cannot count what unfinished tasks wrote.
    ``outcome(prepared, first_offsets)`` reads a transaction's COMMIT or ABORT marker from its
    partitions (``admin/control_records.py``); without it a refused commit is always lost.
    """

    complete: Callable[[PreparedTransaction, bool], object]
    list_open: Callable[[str], list[PreparedTransaction]]
    complete_all: (
        Callable[[Sequence[PreparedTransaction], bool], Sequence[KafkaError | None]] | None
    ) = None
    close: Callable[[], None] = lambda: None
    describe: Callable[[Sequence[str]], Mapping[str, TransactionListing | None]] | None = None
    init: Callable[[str, int], tuple[int, int]] | None = None
    producers: (
        Callable[[Sequence[TopicPartition]], Mapping[TopicPartition, PartitionProducers]] | None
    ) = None
    outcome: OutcomeReader | None = None


@runtime_checkable
class _BoundedWrites(Protocol):
    """A store whose write can be given a deadline (the Kafka store)."""

    def write_within(self, record: BatchRecord, timeout_ms: int | None) -> None: ...


def _key(t: PreparedTransaction) -> tuple[str, int, int]:
    return (t.transactional_id, t.producer_id, t.producer_epoch)


def _sleep_ms(ms: int) -> None:
    time.sleep(ms / 1000)


def _backoff_ms(attempt: int) -> int:
    return int(min(_BACKOFF_MS * 2**attempt, _BACKOFF_MAX_MS))


class EosCommitter:
    """Commits, aborts and recovers the batches of one write (one query key, one prefix)."""

    def __init__(
        self,
        store: IntentStore,
        ops: TransactionOps,
        *,
        query_key: str,
        prefix: str,
        timeout_hint: str = "kafka.transaction.timeout.ms",
        transaction_timeout_ms: int = _DEFAULT_TRANSACTION_TIMEOUT_MS,
        clock: Clock = SYSTEM_CLOCK,
        sleep_ms: Callable[[int], None] = _sleep_ms,
        fence: DriverFence | None = None,
        batch_job: bool = False,
        idempotency_key: str | None = None,
        tasks_after_wall_ms: int | None = None,
    ) -> None:
        self.store = store
        # A moment (driver wall clock) before any transaction this committer is handed began:
        # the plan's, else this committer's creation (_brokers_now).
        self.tasks_after_wall_ms = (
            clock.wall_ms() if tasks_after_wall_ms is None else tasks_after_wall_ms
        )
        self.fence = fence
        # A batch job's failed commit is never finished by a later commit or query start:
        # its errors say what the user can do instead (_next_for_*).
        self.batch_job = batch_job
        self.idempotency_key = idempotency_key
        self.ops = ops
        self.query_key = query_key
        self.prefix = prefix
        self.timeout_hint = timeout_hint
        self.transaction_timeout_ms = transaction_timeout_ms
        self.clock = clock
        self.sleep_ms = sleep_ms

    @classmethod
    def for_plan(cls, plan: EosPlan, producer_config: Mapping[str, str]) -> EosCommitter:
        """The committer of ``plan``'s write, its store opened; ``close()`` it when done.

        ``producer_config`` is the write's, with the ``transaction.timeout.ms`` the planning
        settled: it bounds how long a recorded commit is retried. A ``fenced`` plan (a
        streaming query's, a keyed batch job's, a batch job's given ``transactionalIdPrefix``)
        first refuses a prefix another write claimed, then takes or loads this driver's fence
        (``fence.py``; a batch job takes it anew while planning and commits through the
        planning's: ``job_fence.py``) before the store is read, and claims the prefix (a batch
        job without a key claims nothing: ``job_fence.py`` says why).
        """
        timeout_ms = int(
            producer_config.get("transaction.timeout.ms", _DEFAULT_TRANSACTION_TIMEOUT_MS)
        )
        config = dict(producer_config)
        ops = listing_ops(producer_config)
        try:
            fence = _driver_fence(plan, config, ops)
            store = open_intent_store(plan, config, fence)
        except BaseException:
            ops.close()
            raise
        try:
            if fence is not None and (plan.idempotency_key is not None or not plan.batch_job):
                take_claim(store, plan.prefix, plan.query_key)
        except BaseException:
            store.close()
            ops.close()
            raise
        return cls(
            store,
            ops,
            query_key=plan.query_key,
            prefix=plan.prefix,
            transaction_timeout_ms=timeout_ms,
            fence=fence,
            # Unfenced plans are batch jobs without a key; keyed jobs are fenced.
            batch_job=plan.batch_job or plan.idempotency_key is not None or not plan.fenced,
            idempotency_key=plan.idempotency_key,
            # Built at commit time, after the tasks: only the planning's time precedes them.
            tasks_after_wall_ms=(
                _NOT_KNOWN_MS if plan.planned_wall_ms is None else plan.planned_wall_ms
            ),
        )

    def close(self) -> None:
        """Close the intent store and release the ops' client."""
        try:
            self.store.close()
        finally:
            self.ops.close()

    # -- planning --------------------------------------------------------------------------

    def recover(self) -> BatchRecord | None:
        """Finish an unfinished intent (commit what it names, then write done); the record."""
        last = self.store.last(self.query_key)
        if last is not None and self._unfinished(last):
            return self._roll_forward(last, raise_lost=False)
        return last

    def sweep_leftovers(self) -> int:
        """Abort the prefix's open transactions that no unfinished intent names; how many.

        Run once a write's planning has recovered (:meth:`recover`) and before any task of its
        batch runs (``start.py``, ``idempotency.py``), when every open transaction of the prefix
        is a leftover.
        """
        last = self.store.last(self.query_key)
        return self._sweep(
            keep=last.transactions if last is not None and self._unfinished(last) else ()
        )

    # -- commit ----------------------------------------------------------------------------

    def commit(
        self,
        batch_id: int,
        tasks: Sequence[TaskTransaction],
        skipped: Mapping[int, Fingerprint] | None = None,
        *,
        check: Callable[[], None] | None = None,
    ) -> str:
        """Commit batch ``batch_id``; returns COMMITTED, ALREADY_DONE or ROLLED_FORWARD.

        ``skipped``: the Spark partitions whose tasks wrote nothing because an earlier run of
        the batch committed them, with the fingerprints of the rows they were given.

        ``check``: the batch's own refusal (the bad-row bounds, ``driver/record_bounds.py``),
        run once the store shows the batch neither done nor recorded, before anything else: an
        error it raises fails the batch before its intent, its transactions aborted and swept
        like any failure there. A batch already done or rolled forward is not checked: what
        commits then is what an earlier run recorded.
        """
        began_ms = self.clock.now_ms()
        last: BatchRecord | None = None
        read = False
        try:
            last = self._older_lost_as_partial(self.store.last(self.query_key))
            read = True
            if last is not None and self._unfinished(last) and last.batch_id != batch_id:
                # An earlier batch's intent: recover() should have finished it while planning.
                last = self._roll_forward(last, raise_lost=False)
            if last is not None and self._already_done(last, batch_id):
                # A driver fenced since stops here rather than report a re-run it did not end.
                self._check_fence(f"ending the re-run of batch {batch_id}")
                self._abort_named(tasks, keep=last.transactions)
                self._sweep(keep=last.transactions)
                log.info(
                    "pykafka exactly-once: batch %d was already committed; aborted the %d "
                    "transaction(s) of its re-run",
                    batch_id,
                    len(tasks),
                )
                return ALREADY_DONE
            if last is not None and last.batch_id == batch_id and self._unfinished(last):
                self._roll_forward(last)
                self._abort_named(tasks, keep=last.transactions)
                self._sweep(keep=last.transactions)
                return ROLLED_FORWARD
            earlier = self._check_rerun(batch_id, last, tasks, skipped or {})
            if check is not None and not earlier:
                # A partly committed batch is not held to the bounds again: its first run
                # passed them over all its rows (an intent is recorded only after), the re-run
                # hands the committed partitions the same rows (checked above) and reports none
                # of theirs, and refusing it now would leave it partly committed for good.
                check()
            intent_within_ms = self._verify(batch_id, tasks, began_ms + self.transaction_timeout_ms)
            prepared = tuple(t.transaction for t in tasks)
            intent = BatchRecord(
                self.query_key,
                batch_id,
                INTENT,
                prepared,
                fingerprints={
                    t.transaction.transactional_id: t.fingerprint
                    for t in tasks
                    if t.fingerprint is not None
                },
                committed=earlier,
                first_offsets={
                    t.transaction.transactional_id: t.first_offsets
                    for t in tasks
                    if t.first_offsets
                },
            )
            late_ms = self._write_intent(intent, intent_within_ms)
        except SinkIntentUnknownError:
            raise  # the intent may name these transactions: only a roll-forward may end them
        except BaseException as exc:
            # Nothing of this batch was committed: leave nothing of it open either.
            self._clear_failed(tasks, last, swept=read)
            self._raise_if_fenced(exc, f"committing batch {batch_id}")
            raise
        if late_ms > 0:
            self._check_after_late_intent(batch_id, intent, tasks, late_ms)
        intent_ms = self.clock.now_ms()
        pause_commit(batch_id)
        lost = self._commit_all(batch_id, tasks, until_ms=intent_ms + self.transaction_timeout_ms)
        if lost:
            self._check_fence(f"reporting lost transactions of batch {batch_id}")
            partial = self._mark_partial(intent, tasks, lost)
            self._sweep(keep=())
            raise SinkTransactionLostError(self._lost_message(partial, lost))
        self._write_done(BatchRecord(self.query_key, batch_id, DONE, prepared))
        self._sweep(keep=prepared)
        return COMMITTED

    # -- abort -----------------------------------------------------------------------------

    def abort(
        self,
        batch_id: int,
        tasks: Sequence[TaskTransaction],
        *,
        intent_possible: bool = True,
        unfinished: Sequence[int] = (),
    ) -> UnfinishedWrites:
        """End what must not survive a failed batch; never touches what an intent names.

        An unfinished intent gets one more round of EndTxns (no waiting: Spark is failing the
        batch); if it stays unfinished, the next commit or planning finishes it (a streaming
        query's, or a keyed job's next run; nothing reads the record of a job without
        ``idempotencyKey`` again: the log line says what the user does, ``_next_for_*``).

        ``intent_possible`` is False when :meth:`commit` never ran for these transactions (Spark
        aborts with a missing message when a task failed, and commits only when none did): then
        no intent can name them. It matters only when the store cannot be read: see
        :meth:`_abort_unread`.

        ``unfinished`` are the Spark partitions whose tasks sent no message: what their open
        transactions wrote is counted before they are aborted (``aborted.py``) and returned.
        """
        if not self._holds_fence(f"aborting batch {batch_id}"):
            return not_known("this driver no longer holds the query's fence")
        try:
            last = self.store.last(self.query_key)
        except Exception as exc:
            self._abort_unread(batch_id, tasks, intent_possible, exc)
            return not_known("the intent store could not be read")
        keep: tuple[PreparedTransaction, ...] = ()
        if last is not None and self._unfinished(last):
            try:
                self._roll_forward(last, wait_ms=0)
            except (KafkaError, SinkError) as exc:
                log.error(
                    "pykafka exactly-once: could not finish the commit of batch %d recorded "
                    "before: %s. %s",
                    last.batch_id,
                    exc,
                    self._next_for_unfinished(),
                )
            keep = last.transactions
        elif last is not None and last.batch_id == batch_id and last.state == DONE:
            keep = last.transactions
        # Before the aborts: an aborted transaction no longer shows where its records are.
        written = count_unfinished(
            unfinished,
            prefix=self.prefix,
            describe=self.ops.describe,
            producers=self.ops.producers,
            keep=keep,
        )
        self._abort_named(tasks, keep=keep)
        self._sweep(keep=keep)
        return written

    def _abort_unread(
        self,
        batch_id: int,
        tasks: Sequence[TaskTransaction],
        intent_possible: bool,
        error: Exception,
    ) -> None:
        """Abort a failed batch whose intent store cannot be read: its own transactions only,
        and only when no intent can name them.

        Aborting a transaction an intent names is what makes a batch half-visible: the aborts
        go one by one and may fail part-way, and the intent's roll-forward then commits the
        transactions the aborts did not reach. With the store unreadable, the only proof that no
        intent names the batch's transactions is that :meth:`commit` never ran for them (a
        commit that failed may have written its intent, even one whose write reported an
        error). So: when ``intent_possible`` is False, the batch's own transactions are aborted
        (no sweep: it needs the store, to keep what an unfinished intent of an earlier batch
        names); otherwise nothing is aborted, and the intent (if any) is finished by the next
        commit or planning, or its absence lets the next sweep end them (a streaming query's
        next commit or start, a keyed job's next run); else, and always for a job without
        ``idempotencyKey``, whose record nothing reads again, the brokers abort them after
        ``transaction.timeout.ms``.
        """
        if not intent_possible:
            log.warning(
                "pykafka exactly-once: the intent store could not be read while aborting batch "
                "%d (%s); its commit never ran, so its %d transaction(s) are aborted",
                batch_id,
                error,
                len(tasks),
            )
            self._abort_named(tasks, keep=())
            return
        log.error(
            "pykafka exactly-once: the intent store could not be read while aborting batch %d "
            "(%s); its %d transaction(s) stay open, as a recorded commit may name them: %s",
            batch_id,
            error,
            len(tasks),
            self._next_for_unread(),
        )

    # -- steps -----------------------------------------------------------------------------

    def _write_intent(self, intent: BatchRecord, within_ms: int | None = None) -> int:
        """Write ``intent``; when the write fails, ask the store whether it landed anyway. How
        many ms past ``within_ms`` the intent was found recorded (0: in time, or no bound).

        ``within_ms`` (from :meth:`_verify`) is one deadline for the whole step: the intent must
        be written, or given up, while every transaction of the batch has time left for its
        EndTxn. A store that waits on the network (the Kafka store, else bounded by
        ``max.block.ms``) is handed it, for its read of the key and its append; the re-read
        after a failed write is bounded by the store alone. So the intent can still land late
        (a slow read, a slow re-read): the caller then checks the batch's transactions again
        before the first EndTxn (:meth:`_check_after_late_intent`).

        A write can fail after its record became durable (its answer lost; a file renamed into
        place whose directory could not be synced). Aborting the batch then is unsafe: the
        intent names its transactions, and its roll-forward would commit each one an abort
        failed to reach. So the error stands (and the batch is aborted) only when the store
        shows the intent absent; when it shows it, the commit goes on; when it cannot be read,
        :class:`SinkIntentUnknownError` leaves the batch to be rolled forward.
        """
        started_ms = self.clock.now_ms()

        def late_ms() -> int:
            if within_ms is None:
                return 0
            return max(self.clock.now_ms() - started_ms - within_ms, 0)

        try:
            if within_ms is not None and isinstance(self.store, _BoundedWrites):
                self.store.write_within(intent, within_ms)
            else:
                self.store.write(intent)
            return late_ms()
        except Exception as exc:
            try:
                found = self.store.last(self.query_key)
            except Exception as reread:
                raise SinkIntentUnknownError(
                    f"exactly-once commit of batch {intent.batch_id} failed: its intent may be "
                    f"recorded (the write reported: {exc}; the store could not be read back: "
                    f"{reread}). {self._next_for_unknown_intent()}"
                ) from exc
            if not _same_record(found, intent):
                raise
            log.warning(
                "pykafka exactly-once: the intent of batch %d is recorded although its write "
                "reported an error (%s); committing the batch",
                intent.batch_id,
                exc,
            )
            return late_ms()

    def _check_after_late_intent(
        self, batch_id: int, intent: BatchRecord, tasks: Sequence[TaskTransaction], late_ms: int
    ) -> None:
        """Before the first EndTxn of an intent recorded past its deadline: when a transaction
        of the batch is no longer open, or too close to its timeout to be committed, record the
        batch as committing nothing of this run (partial: the lost partitions are all of this
        run's), abort the rest, and fail, so that no part of the run becomes visible and its
        re-run writes these partitions again. When the check cannot be made, the commit goes
        on (as if the intent had been in time: a lost transaction is then found by its EndTxn).
        """
        try:
            self._verify(batch_id, tasks, self.clock.now_ms())
            return
        except SinkTransactionLostError as exc:
            why = str(exc)
        except (KafkaError, SinkError) as exc:
            log.warning(
                "pykafka exactly-once: the intent of batch %d was recorded %d ms past its "
                "deadline and its transactions could not be checked again (%s); committing",
                batch_id,
                late_ms,
                exc,
            )
            return
        # Written before any abort: until then the intent names them, and may only commit them.
        self._check_fence(f"recording batch {batch_id} as not committed")
        self._mark_partial(
            intent, tasks, [(t, TransactionLostError("not committed")) for t in tasks]
        )
        self._sweep(keep=())
        again = (
            "run the job again to write these rows"
            if self.batch_job
            else "the batch is run again and writes these rows again"
        )
        raise SinkTransactionLostError(
            f"exactly-once commit of batch {batch_id} failed: its intent was recorded {late_ms} "
            "ms later than its transactions allowed (the intent store was slow: a leader "
            "change, a broker under load), and then: "
            f"{why}. Nothing of this run of the batch was committed (it is recorded so, and "
            f"its transactions are aborted): {again}"
        )

    @staticmethod
    def _unfinished(record: BatchRecord) -> bool:
        return record.state == INTENT and _LOST_KEY not in record.extra

    def _check_rerun(
        self,
        batch_id: int,
        last: BatchRecord | None,
        tasks: Sequence[TaskTransaction],
        skipped: Mapping[int, Fingerprint],
    ) -> Mapping[int, Fingerprint | None]:
        """What earlier runs of the batch committed, once the re-run is shown to hand each of
        those Spark partitions the same rows; raises :class:`SinkPartlyCommittedError` if not.
        """
        partial = last is not None and last.state == PARTIAL and last.batch_id == batch_id
        if partial and last is not None and _UNRECORDED_KEY in last.extra:
            raise SinkPartlyCommittedError(self._unrecorded_message(batch_id, last))
        committed = last.committed if last is not None and partial else {}
        if not committed and not skipped:
            return committed
        written = {t.partition_id for t in tasks}
        unlike: list[str] = []
        for partition, recorded in sorted(committed.items()):
            given = skipped.get(partition)
            if given is None:
                unlike.append(
                    f"Spark partition {partition} "
                    + ("wrote its rows again" if partition in written else "returned no result")
                )
            elif recorded is None:
                unlike.append(f"Spark partition {partition}: its rows' fingerprint is unknown")
            elif given != recorded:
                unlike.append(f"Spark partition {partition}: {given}, committed {recorded}")
        unlike.extend(
            f"Spark partition {p} wrote nothing although no run committed it"
            for p in sorted(set(skipped) - set(committed))
        )
        if unlike:
            assert last is not None or not committed
            raise SinkPartlyCommittedError(self._not_repeatable_message(batch_id, last, unlike))
        log.info(
            "pykafka exactly-once: the re-run of batch %d handed the committed Spark partitions "
            "%s the same rows (fingerprints equal); it writes and commits the others",
            batch_id,
            sorted(committed),
        )
        return committed

    def _not_repeatable_message(
        self, batch_id: int, last: BatchRecord | None, unlike: Sequence[str]
    ) -> str:
        committed = sorted(last.committed) if last is not None else []
        lost = list(last.lost) if last is not None else []
        shown = "; ".join(unlike[:20]) + (
            f"; and {len(unlike) - 20} more" if len(unlike) > 20 else ""
        )
        return (
            f"exactly-once: batch {batch_id} was committed only in part by an earlier run (Spark "
            f"partitions {committed} are visible to readers, Spark partitions {lost} were lost), "
            "and this re-run of it did not hand the committed partitions the same rows "
            f"({shown}). Writing it could write rows twice or lose some, so nothing of this run "
            "was committed and the query stops here. Fix: make the query's input deterministic "
            "per Spark partition (a replayable source read from the same offsets, partitioned "
            "by a key, e.g. a shuffle by key; not repartition(n), whose round-robin hands rows "
            "to partitions in any order, nor a nondeterministic expression) and restart; or, to "
            "accept the committed partitions' rows twice, restart the query with a fresh intent "
            "store (a new intentTopic, or with intentStore=checkpoint remove this query's record "
            f"{self.query_key!r} under pykafka-intents): the batch is then written whole"
        )

    def _unrecorded_message(self, batch_id: int, last: BatchRecord) -> str:
        return (
            f"exactly-once: batch {batch_id} was committed only in part by a run of an earlier "
            f"release of the sink: Spark partitions {list(last.lost)} were lost, its other Spark "
            "partitions were committed and are visible to readers. That release recorded "
            "neither which partitions committed nor the fingerprints of their rows (its re-run "
            "wrote the whole batch again, the committed rows twice), so no re-run can be shown "
            "to complete the batch exactly once: nothing of this run was committed and the "
            "query stops here. Fix: to accept the committed partitions' rows twice, restart the "
            "query with a fresh intent store (a new intentTopic, or with "
            f"intentStore=checkpoint remove this query's record {self.query_key!r} under "
            "pykafka-intents): the batch is then written whole"
        )

    def _older_lost_as_partial(self, record: BatchRecord | None) -> BatchRecord | None:
        """An earlier release's record of a batch Kafka lost part of, read as partial.

        That release marked the intent lost (state INTENT, the lost ids in ``extra``, its
        transactions dropped) and its re-run wrote the whole batch again. Read as partial:
        lost are the Spark partitions of the lost ids, committed the partitions of its other
        transactions, with no fingerprints; with its transactions dropped, which partitions
        committed is not recorded (every one but the lost ones), and the record says so.
        """
        if record is None or record.state != INTENT or _LOST_KEY not in record.extra:
            return record
        lost_ids = {tid for tid in record.extra[_LOST_KEY].split(",") if tid}
        lost = {
            parsed[0]
            for tid in lost_ids
            if (parsed := parse_transactional_id(self.prefix, tid)) is not None
        }
        committed: dict[int, Fingerprint | None] = {
            self._partition_of(t): record.fingerprints.get(t.transactional_id)
            for t in record.transactions
            if t.transactional_id not in lost_ids and self._partition_of(t) >= 0
        }
        extra = dict(record.extra)
        if not record.transactions:
            extra[_UNRECORDED_KEY] = "true"
        return BatchRecord(
            record.query_key,
            record.batch_id,
            PARTIAL,
            (),
            extra,
            committed={**record.committed, **committed},
            lost=tuple(sorted(lost)),
        )

    @staticmethod
    def _already_done(record: BatchRecord, batch_id: int) -> bool:
        if record.batch_id > batch_id:
            return True  # the store only moves forward: an older batch was done before it
        return record.batch_id == batch_id and record.state == DONE

    def _list_prefix(self) -> str:
        return self.prefix + "-"

    def _clear_failed(
        self, tasks: Sequence[TaskTransaction], last: BatchRecord | None, *, swept: bool
    ) -> None:
        """Abort a batch that fails before its intent; sweep when the store could be read.

        Its own transactions are aborted even when the store could not be read: no intent names
        them (Spark commits a batch's messages once, and this call wrote no intent). The sweep
        needs the store's answer, to keep what an unfinished intent names.

        They are aborted also when this driver was fenced (a refused run): each EndTxn names
        its transaction's exact producer id and epoch, which the coordinator refuses once the
        id moved on, so no newer driver's transaction can be ended by it; and no intent names
        them, not even a newer driver's roll-forward (this call's intent never became visible).
        Left open, they would hold read_committed readers back for ``transaction.timeout.ms``.
        The sweep, which lists, stays behind the fence check.
        """
        keep = last.transactions if last is not None and self._unfinished(last) else ()
        try:
            self._abort_named(tasks, keep=keep, even_fenced=True)
            if swept:
                self._sweep(keep=keep)
        except Exception as exc:  # the batch's own failure is the one to report
            log.warning("pykafka exactly-once: cleaning up the failed batch failed: %s", exc)

    def _verify(self, batch_id: int, tasks: Sequence[TaskTransaction], until_ms: int) -> int | None:
        """Fail the batch, before anything is visible, unless each transaction is still open;
        how long the intent write may take (None: no bound known, see :func:`_intent_bound`).

        Asks DescribeTransactions for the batch's own ids: a coordinator that is loading or
        moving can leave an id out of a ListTransactions answer, and that absence is no proof.
        """
        describe = self.ops.describe
        if describe is None or not tasks:
            return None
        ids = sorted({t.transaction.transactional_id for t in tasks})
        try:
            seen = self._retrying(
                lambda: describe(ids), until_ms, f"describing the {len(ids)} transaction(s)"
            )
        except UnsupportedVersionError:
            warn_once(
                "describe-transactions-unsupported",
                "pykafka exactly-once: the brokers do not support DescribeTransactions (Kafka "
                "3.0+), so the driver commits a batch without first checking that each of its "
                "transactions is still open; one that Kafka aborted meanwhile is found by its "
                "EndTxn, after other transactions of the batch may be visible",
            )
            return None
        gone = [
            (task, why)
            for task in tasks
            if (why := _why_gone(task.transaction, seen.get(task.transaction.transactional_id)))
            is not None
        ]
        brokers_now = _brokers_now(seen, self.clock.wall_ms(), self.tasks_after_wall_ms)
        gone = gone or _expiring(tasks, seen, brokers_now)
        if gone:
            raise SinkTransactionLostError(self._gone_message(batch_id, gone))
        return _intent_bound(tasks, seen, brokers_now)

    def _retrying(self, call: Callable[[], T], until_ms: int, what: str) -> T:
        """``call()``, again after backoff while it fails retriably, until ``until_ms``."""
        attempt = 0
        while True:
            try:
                return call()
            except KafkaError as exc:
                if not exc.retriable or self.clock.now_ms() >= until_ms:
                    raise
                log.warning("pykafka exactly-once: %s failed, retrying: %s", what, exc)
            self.sleep_ms(_backoff_ms(attempt))
            attempt += 1

    def _roll_forward(
        self, record: BatchRecord, *, raise_lost: bool = True, wait_ms: int | None = None
    ) -> BatchRecord:
        """Commit what ``record`` names, then write done (or, when Kafka lost some, record the
        batch partial so that its re-run writes and commits the lost partitions); raises
        :class:`SinkCommitOutcomeUnknownError`, the intent left as it is, when a refused
        commit's outcome cannot be read."""
        wait = self.transaction_timeout_ms if wait_ms is None else wait_ms
        tasks = [
            TaskTransaction(
                self._partition_of(t),
                t,
                record.fingerprints.get(t.transactional_id),
                record.first_offsets.get(t.transactional_id, ()),
            )
            for t in record.transactions
        ]
        lost = self._commit_all(record.batch_id, tasks, until_ms=self.clock.now_ms() + wait)
        if lost:
            self._check_fence(f"reporting lost transactions of batch {record.batch_id}")
            marked = self._mark_partial(record, tasks, lost)
            message = self._lost_message(marked, lost)
            if raise_lost:
                raise SinkTransactionLostError(message)
            log.error("pykafka exactly-once: %s", message)
            return marked
        done = BatchRecord(self.query_key, record.batch_id, DONE, record.transactions)
        self.store.write(done)
        log.info(
            "pykafka exactly-once: finished the recorded commit of batch %d (%d transaction(s))",
            record.batch_id,
            len(record.transactions),
        )
        return done

    def _partition_of(self, t: PreparedTransaction) -> int:
        parsed = parse_transactional_id(self.prefix, t.transactional_id)
        return -1 if parsed is None else parsed[0]

    def _mark_partial(
        self,
        intent: BatchRecord,
        tasks: Sequence[TaskTransaction],
        lost_with_causes: Sequence[tuple[TaskTransaction, TransactionLostError]],
    ) -> BatchRecord:
        """Record what of ``intent``'s batch is visible (its earlier runs' and this run's
        committed partitions, with their fingerprints) and what Kafka lost."""
        lost = {_key(t.transaction) for t, _ in lost_with_causes}
        committed = dict(intent.committed)
        committed.update(
            (t.partition_id, t.fingerprint)
            for t in tasks
            if _key(t.transaction) not in lost and t.partition_id >= 0
        )
        marked = BatchRecord(
            self.query_key,
            intent.batch_id,
            PARTIAL,
            (),
            {_LOST_KEY: ",".join(t.transaction.transactional_id for t, _ in lost_with_causes)},
            committed=committed,
            lost=tuple(sorted({t.partition_id for t, _ in lost_with_causes})),
        )
        self.store.write(marked)
        return marked

    def _write_done(self, record: BatchRecord) -> None:
        """Write done; a committed batch does not fail because its bookkeeping could not be."""
        try:
            self.store.write(record)
        except SinkFencedError as exc:
            if self.batch_job and self.idempotency_key is None:
                # A job without a key: no later write reads its write id's record, and all of
                # its transactions are committed. Failing it would have it run again, twice.
                log.warning(
                    "pykafka exactly-once: the job is committed, but another write took its "
                    "prefix over before its done record was written: %s",
                    exc,
                )
                return
            raise  # the newer driver finishes the intent: nothing is lost, this driver stops
        except (OSError, KafkaError, SinkError) as exc:
            log.error(
                "pykafka exactly-once: batch %d is committed, but its done record could not be "
                "written (the next planning finishes the recorded intent, which commits "
                "nothing again): %s",
                record.batch_id,
                exc,
            )

    def _commit_all(
        self, batch_id: int, tasks: Sequence[TaskTransaction], *, until_ms: int
    ) -> list[tuple[TaskTransaction, TransactionLostError]]:
        """Commit each, retrying what may clear until ``until_ms``; the ones Kafka lost, why.

        Raises :class:`SinkCommitIncompleteError` when some could be neither committed nor
        found lost (the intent stays unfinished, for the next commit, abort or planning), and
        :class:`SinkCommitOutcomeUnknownError` when a refused commit's marker cannot be read.
        """
        pending = list(tasks)
        lost: list[tuple[TaskTransaction, TransactionLostError]] = []
        attempt = 0
        while pending:
            outcomes = self._end_each([t.transaction for t in pending], commit=True)
            failed: list[tuple[TaskTransaction, KafkaError]] = []
            for task, outcome in zip(pending, outcomes, strict=True):
                if isinstance(outcome, TransactionLostError):
                    # Not yet known lost: an earlier EndTxn of it may have been applied.
                    log.warning(
                        "pykafka exactly-once: the commit was refused%s: %s",
                        " (its marker is read next)" if self.ops.outcome is not None else "",
                        outcome,
                    )
                    lost.append((task, outcome))
                elif outcome is not None:
                    failed.append((task, outcome))
            pending = [task for task, _ in failed]
            if not failed:
                break
            final = [e for _, e in failed if not e.retriable]
            if final or self.clock.now_ms() >= until_ms:
                error = (final or [failed[-1][1]])[0]
                raise SinkCommitIncompleteError(
                    self._incomplete_message(batch_id, len(tasks), failed, lost)
                ) from error
            log.warning(
                "pykafka exactly-once: %d transaction(s) of batch %d are not committed yet, "
                "retrying: %s",
                len(failed),
                batch_id,
                failed[-1][1],
            )
            self.sleep_ms(_backoff_ms(attempt))
            attempt += 1
        # A refused commit may be one applied before its id moved on: its marker tells.
        settled = settle_lost(
            lost, lambda t: t.transaction, lambda t: dict(t.first_offsets), self.ops.outcome
        )
        if settled.unknown:
            # Not lost: recording the batch partial would have its re-run write them again.
            unknown = SinkCommitOutcomeUnknownError(
                self._unknown_message(batch_id, len(tasks), settled.unknown, settled.lost)
            )
            unknown.__cause__ = settled.unknown[0][2]
            # A newer driver that took over finishes the intent: that is the cause to report.
            self._raise_if_fenced(unknown, f"committing batch {batch_id}")
            raise unknown
        return settled.lost

    def _end_each(
        self, handles: Sequence[PreparedTransaction], *, commit: bool
    ) -> list[KafkaError | None]:
        """End each of ``handles``; per handle None or the error ending it met."""
        if self.ops.complete_all is not None:
            try:
                return list(self.ops.complete_all(handles, commit))
            except KafkaError as exc:  # the call as a whole failed: none is known ended
                return [exc] * len(handles)
        out: list[KafkaError | None] = []
        for handle in handles:
            try:
                self.ops.complete(handle, commit)
            except KafkaError as exc:
                out.append(exc)
            else:
                out.append(None)
        return out

    def _abort_named(
        self,
        tasks: Iterable[TaskTransaction],
        *,
        keep: Iterable[PreparedTransaction],
        even_fenced: bool = False,
    ) -> None:
        kept = {_key(t) for t in keep}
        mine = [t for t in tasks if _key(t.transaction) not in kept]
        if not mine:
            return
        if not even_fenced and not self._holds_fence(f"aborting {len(mine)} transaction(s)"):
            return
        for task in mine:
            self._abort_quietly(task.transaction)

    def _sweep(self, *, keep: Iterable[PreparedTransaction]) -> int:
        """Abort the open transactions of this write's ids that ``keep`` does not name; the
        number aborted."""
        kept = {_key(t) for t in keep}
        try:
            found = self.ops.list_open(self._list_prefix())
        except KafkaError as exc:
            log.warning(
                "pykafka exactly-once: could not list open transactions of prefix %r to end "
                "leftovers: %s. No recorded commit names them, so their rows never become "
                "visible: %s",
                self.prefix,
                exc,
                self._next_for_open(),
            )
            return 0
        leftovers = [
            t
            for t in found
            if _key(t) not in kept
            and parse_transactional_id(self.prefix, t.transactional_id) is not None
        ]
        # Checked after the listing: a newer driver's tasks open their transactions only after
        # it took the fence, so none of them is in a listing that precedes a passing check.
        if not leftovers or not self._holds_fence(f"sweeping prefix {self.prefix!r}"):
            return 0
        return sum(self._abort_quietly(t) for t in leftovers)

    def _check_fence(self, doing: str) -> None:
        """Raise :class:`SinkFencedError` when another driver took this query's fence."""
        if self.fence is not None:
            self.fence.check(doing)

    def _raise_if_fenced(self, exc: BaseException, doing: str) -> None:
        """Report a failure as fenced when another driver took over: its true cause (the newer
        driver's sweep or tasks ended this driver's transactions), and nothing is lost."""
        if self.fence is None or isinstance(exc, SinkFencedError):
            return
        if not isinstance(exc, (KafkaError, SinkError)):
            return
        try:
            why = self.fence.why_not_held()
        except KafkaError:
            return
        if why is not None:
            raise self.fence.error(doing, why) from exc

    def _holds_fence(self, doing: str) -> bool:
        """Whether this driver may end transactions: False (logged) once it was fenced."""
        try:
            self._check_fence(doing)
        except SinkFencedError as exc:
            log.error("pykafka exactly-once: skipped: %s", exc)
            return False
        except KafkaError as exc:
            log.warning(
                "pykafka exactly-once: skipped %s: the fence could not be checked: %s", doing, exc
            )
            return False
        return True

    def _abort_quietly(self, t: PreparedTransaction) -> bool:
        try:
            self.ops.complete(t, False)
        except KafkaError as exc:
            log.warning(
                "pykafka exactly-once: could not abort transaction %r (producer id %d, epoch "
                "%d): %s. No recorded commit names it, so its rows never become visible: %s",
                t.transactional_id,
                t.producer_id,
                t.producer_epoch,
                exc,
                self._next_for_open(),
            )
            return False
        return True

    def _lost_message(
        self,
        partial: BatchRecord,
        lost_with_causes: Sequence[tuple[TaskTransaction, TransactionLostError]],
    ) -> str:
        batch_id = partial.batch_id
        lost = [t for t, _ in lost_with_causes]
        causes = "; ".join(f"{error}" for _, error in lost_with_causes[:5])
        after = (
            self._next_for_lost(partial)
            if self.batch_job and (self.idempotency_key is None or not partial.committed)
            else "nothing of the batch became visible; the batch is run again and writes these "
            "rows again"
            if not partial.committed
            else f"{len(partial.committed)} other transaction(s) of the batch were committed "
            f"and are visible (Spark partitions {sorted(partial.committed)}; lost: Spark "
            f"partitions {list(partial.lost)}). The batch's re-run writes only the lost "
            "partitions when it hands each committed partition the same rows (their "
            "fingerprints are compared), and otherwise stops with nothing more written"
        )
        return (
            f"exactly-once commit of batch {batch_id} failed: Kafka aborted {len(lost)} "
            f"transaction(s){_spark_partitions(lost)} before the driver could commit them, "
            f"partitions {_shown(lost)} ({causes}). {after}. Fix: when Kafka timed them out, "
            f"raise {self.timeout_hint} (at most the brokers' transaction.max.timeout.ms) or "
            "make the tasks of a batch faster (smaller batches, more partitions); when another "
            "producer fenced them, check that no other write uses the same "
            "transactionalIdPrefix"
        )

    def _gone_message(self, batch_id: int, gone: Sequence[tuple[TaskTransaction, str]]) -> str:
        each = "; ".join(f"{t.transaction.transactional_id!r}: {why}" for t, why in gone[:20])
        if len(gone) > 20:
            each += f"; and {len(gone) - 20} more"
        timed_out = any(_TIMED_OUT in why for _, why in gone)
        fix = (
            f"raise {self.timeout_hint} (at most the brokers' transaction.max.timeout.ms) or "
            "make the tasks of a batch faster"
            if timed_out
            else "none needed if this was a retried or re-attempted task; otherwise check that "
            "no other write uses the same transactionalIdPrefix"
        )
        return (
            f"exactly-once commit of batch {batch_id} failed before anything became visible: "
            f"{len(gone)} of its transaction(s){_spark_partitions([t for t, _ in gone])} are "
            f"no longer open, partitions {_shown([t for t, _ in gone])}. {each}. "
            + (
                "Nothing of the job was committed and its other transactions were aborted: "
                "running the job again writes it once"
                if self.batch_job
                else "Nothing of the batch was committed; its other transactions were aborted, "
                "and the batch's re-run writes all of it again"
            )
            + f". Fix: {fix}"
        )

    def _incomplete_message(
        self,
        batch_id: int,
        total: int,
        failed: Sequence[tuple[TaskTransaction, KafkaError]],
        lost: Sequence[object],
    ) -> str:
        each = "; ".join(f"{t.transaction.transactional_id!r}: {e}" for t, e in failed[:5])
        unended = [t for t, _ in failed]
        return (
            f"exactly-once commit of batch {batch_id} is recorded (its intent is durable) but "
            f"{len(failed)} of its {total} transaction(s){_spark_partitions(unended)}"
            f" could not be committed within transaction.timeout.ms "
            f"({self.transaction_timeout_ms} ms): {each}. Partitions not yet visible: "
            f"{_shown(unended)}; {total - len(failed) - len(lost)} other "
            f"transaction(s) are committed and visible"
            + (
                f", {len(lost)} were refused (no longer open at their producer epoch; whether "
                "each was committed is read from its partitions when the commit is finished)"
                if lost
                else ""
            )
            + f". {self._next_for_incomplete()}"
        )

    def _next_for_incomplete(self) -> str:
        """Who finishes a recorded commit Kafka could not be told to finish in time, and the fix."""
        reachable = "Fix: check that the brokers are reachable from the driver"
        if not self.batch_job:
            return (
                "The intent stays: the next commit, abort or start of the query commits the "
                f"rest (it never writes the batch twice). {reachable}"
            )
        if self.idempotency_key is not None:
            return (
                "The intent stays: Spark's abort of the job tries once more, and else the next "
                f"run with idempotencyKey {self.idempotency_key!r} commits the rest (it never "
                f"writes the job twice). {reachable}, then run the job again with the same key"
            )
        return (
            "The intent stays, but the job has no idempotencyKey: once Spark's abort of the job "
            "tries once more, nothing commits the rest; the brokers abort it after "
            f"transaction.timeout.ms ({self.transaction_timeout_ms} ms) and its rows are never "
            f"visible (nothing is written twice). {reachable}; then write the rows of the Spark "
            "partitions not visible again (running the whole job again would write its visible "
            "rows twice). With an idempotencyKey, a run of the same key finishes such a commit"
        )

    def _next_for_unknown_intent(self) -> str:
        """Who settles a batch whose intent may or may not be recorded, and the fix."""
        reachable = "Fix: check that the intent store is reachable from the driver"
        settles = "commits it once if the intent is recorded, or ends its transactions if not"
        if not self.batch_job:
            return (
                "Nothing of the batch was aborted: the next commit, abort or start of the query "
                f"{settles}. {reachable}"
            )
        if self.idempotency_key is not None:
            return (
                "Nothing of the job was aborted: Spark's abort of the job, or else the next run "
                f"with idempotencyKey {self.idempotency_key!r}, {settles}. {reachable}, then "
                "run the job again with the same key"
            )
        return (
            f"Nothing of the job was aborted: Spark's abort of the job, which runs next, {settles} "
            f"(its log says which). {reachable}. If that abort could not read the store either, "
            "none of the job's rows becomes visible (nothing reads the record of a job without "
            "idempotencyKey again; the brokers abort its transactions after "
            f"transaction.timeout.ms, {self.transaction_timeout_ms} ms): run the job again"
        )

    def _next_for_unfinished(self) -> str:
        """Who finishes a recorded commit an abort could not finish, and the fix (logged: the
        abort itself does not fail)."""
        reachable = "check that the brokers are reachable from the driver"
        if not self.batch_job:
            return (
                "The intent stays: the next commit, abort or start of the query commits the "
                f"rest (it never writes the batch twice). Fix: {reachable}"
            )
        if self.idempotency_key is not None:
            return (
                f"The intent stays: the next run with idempotencyKey {self.idempotency_key!r} "
                "commits the rest while planning (it never writes the job twice). Fix: "
                f"{reachable}, then run the job again with the same key"
            )
        return (
            "The intent stays, but the job has no idempotencyKey, so nothing commits the rest: "
            "the brokers abort its transactions not yet committed after transaction.timeout.ms "
            f"({self.transaction_timeout_ms} ms) and their rows are never visible. Fix: "
            f"{reachable}; then write again the rows of the Spark partitions the job's error "
            "names as not visible (running the whole job again would write its visible rows "
            "twice)"
        )

    def _next_for_unread(self) -> str:
        """Who ends a failed batch's transactions left open because the intent store could not
        be read, and the fix (logged)."""
        bound = (
            "the brokers abort them after transaction.timeout.ms "
            f"({self.transaction_timeout_ms} ms)"
        )
        reachable = "check that the intent store is reachable from the driver"
        if not self.batch_job:
            return (
                "the next commit or start of the query commits them if the commit is recorded "
                f"or else ends them, else {bound}. Fix: {reachable}"
            )
        if self.idempotency_key is not None:
            return (
                f"the next run with idempotencyKey {self.idempotency_key!r} commits them while "
                f"planning if the commit is recorded or else ends them, else {bound}. Fix: "
                f"{reachable}, then run the job again with the same key"
            )
        return (
            "the job has no idempotencyKey, so nothing reads its record again: "
            f"{bound}, their rows are never visible, and read_committed readers of their "
            f"partitions wait until then. Fix: {reachable}; once that time has passed, write "
            "again the rows of the Spark partitions the job's error names as not visible (run "
            "the job again when none of its rows is visible)"
        )

    def _next_for_open(self) -> str:
        """Who ends open transactions no recorded commit names that an abort or sweep could not
        end, and the bound (logged: nothing is to be written again)."""
        bound = (
            "the brokers abort them after transaction.timeout.ms "
            f"({self.transaction_timeout_ms} ms)"
        )
        if not self.batch_job:
            return f"the next commit, abort or start of the query ends them, else {bound}"
        if self.idempotency_key is not None:
            return (
                f"the next run with idempotencyKey {self.idempotency_key!r} ends them (its "
                f"planning sweeps the prefix), else {bound}. Nothing is to be written again, "
                "but read_committed readers of their partitions wait until they end: run the "
                "job again with the same key to end them sooner"
            )
        return (
            "the job has no idempotencyKey, so once its commit and abort are over nothing of it "
            f"runs again to end them: {bound}. Nothing is to be written again, but "
            "read_committed readers of their partitions wait until then (a lower "
            f"{self.timeout_hint} shortens that wait)"
        )

    def _next_for_lost(self, partial: BatchRecord) -> str:
        """What a job's run Kafka lost transactions of leaves (with some committed: a job
        without idempotencyKey; a keyed one's re-run writes only the lost partitions)."""
        if not partial.committed:
            return "nothing of the job became visible: running the job again writes it once"
        return (
            f"{len(partial.committed)} other transaction(s) of the job were committed and are "
            f"visible (Spark partitions {sorted(partial.committed)}; lost: Spark partitions "
            f"{list(partial.lost)}). As the job has no idempotencyKey, running it again writes "
            "every partition again, the visible ones twice: write the rows of the lost Spark "
            "partitions again instead (with an idempotencyKey, a re-run of the key writes only "
            "the lost partitions)"
        )

    def _unknown_message(
        self,
        batch_id: int,
        total: int,
        unknown: Sequence[tuple[TaskTransaction, TransactionLostError, KafkaError]],
        lost: Sequence[object],
    ) -> str:
        tasks = [t for t, _, _ in unknown]
        each = "; ".join(
            f"{t.transaction.transactional_id!r} (producer id {t.transaction.producer_id}, "
            f"epoch {t.transaction.producer_epoch}): {why}"
            for t, _, why in unknown[:5]
        )
        if len(unknown) > 5:
            each += f"; and {len(unknown) - 5} more"
        causes = [c for _, _, why in unknown for c in _read_causes(why)]
        topics = sorted({topic for t in tasks for topic, _ in t.transaction.partitions})
        fixes: list[str] = []
        if any(getattr(c, "name", "") == "TOPIC_AUTHORIZATION_FAILED" for c in causes):
            fixes.append(
                "grant the driver's principal READ on the topic(s) (an administrator runs: "
                "kafka-acls --bootstrap-server <servers> --add --allow-principal "
                "User:<principal> "
                + " ".join(f"--operation Read --topic {topic}" for topic in topics)
                + ")"
            )
        if any(getattr(c, "name", "") == "OFFSET_OUT_OF_RANGE" for c in causes) or any(
            "first offsets" in str(c) for c in causes
        ):
            fixes.append(
                "where the marker can no longer be read (retention or compaction removed it, or "
                "the intent does not record where the transaction's records start), no later "
                "read can tell: check with a read_committed consumer whether those partitions' "
                "rows are visible; restarting on a fresh intent store (a new intentTopic, or "
                f"with intentStore=checkpoint removing the record {self.query_key!r} under "
                "pykafka-intents) writes the whole batch again, the rows already visible twice"
            )
        fixes.append(
            ("otherwise " if fixes else "")
            + "check that the partitions' leaders are reachable from the driver, and restart"
        )
        return (
            f"exactly-once commit of batch {batch_id} is recorded (its intent is durable) but "
            f"not finished: the commit of {len(unknown)} of its {total} transaction(s)"
            f"{_spark_partitions(tasks)} was refused (its transactional id moved on) and whether "
            f"it had been applied cannot be read from its partitions' markers: {each}. "
            f"Partitions whose outcome is unknown: {_shown(tasks)}; "
            f"{total - len(unknown) - len(lost)} other transaction(s) are committed and visible"
            + (f", {len(lost)} were aborted by Kafka" if lost else "")
            + ". Nothing is recorded lost and nothing of the batch is written again while this "
            "is unknown: the intent stays, and the next planning (a streaming query's restart, "
            "a batch job's re-run with the same idempotencyKey; a batch job without one is not "
            "read again, and its re-run writes every row again), commit or abort reads the "
            "markers again and finishes the batch. Fix: " + "; ".join(fixes)
        )


_TIMED_OUT = "transaction.timeout.ms"


def _read_causes(error: KafkaError) -> list[KafkaError]:
    """Why a marker could not be read: per partition tried (``TransactionOutcomeUnknownError``
    keeps them), else the error itself."""
    causes = getattr(error, "causes", None)
    if isinstance(causes, Mapping) and causes:
        return [c for c in causes.values() if isinstance(c, KafkaError)]
    return [error]


def _why_gone(t: PreparedTransaction, now: TransactionListing | None) -> str | None:
    """Why the coordinator's view ``now`` shows ``t`` no longer open; None while it is."""
    if now is None:
        return (
            "unknown to the coordinator (TRANSACTIONAL_ID_NOT_FOUND): its transactional id "
            "expired or was never initialised"
        )
    same = (now.producer_id, now.producer_epoch) == (t.producer_id, t.producer_epoch)
    if same and now.state == "Ongoing":
        return None
    seen = (
        f"the coordinator shows {now.state} at producer id {now.producer_id}, epoch "
        f"{now.producer_epoch}; the task reported producer id {t.producer_id}, epoch "
        f"{t.producer_epoch}"
    )
    newer = now.producer_id != t.producer_id or now.producer_epoch > t.producer_epoch
    if newer and (now.producer_id != t.producer_id or now.state in _FRESH_STATES):
        return (
            "fenced by another producer of the same transactional id (another attempt of the "
            f"task initialised it, which aborted this transaction): {seen}"
        )
    if newer and now.state in _ABORTED_STATES:
        return (
            "aborted by the coordinator, because it stayed open longer than "
            f"{_TIMED_OUT} ({max(now.transaction_timeout_ms, 0)} ms): {seen}"
        )
    return f"no longer open at the producer id and epoch its task reported: {seen}"


def _brokers_now(
    seen: Mapping[str, TransactionListing | None], driver_wall_ms: int, tasks_after_wall_ms: int
) -> int | None:
    """The brokers' "now" as far as their answers show it (None: no start time shown).

    The coordinator counts a transaction's age from ``transaction_start_time_ms`` on its own
    clock. The newest start time among the batch's transactions is a moment the brokers have
    already reached: a driver clock behind the brokers' is corrected up to it. Every
    transaction began after ``tasks_after_wall_ms`` (the planning, on the driver's clock), so
    when the oldest start time lies before that moment the driver's clock is ahead of the
    brokers' by at least the difference, and is corrected down by it: a driver clock ahead
    would otherwise make fresh transactions look old and fail every batch. The correction is
    only what is proven, so an age is never underestimated; a skew the planning's time cannot
    show (a plan without it) still makes the check stricter, and its message names the clock.
    """
    starts = [
        now.transaction_start_time_ms
        for now in seen.values()
        if now is not None and now.transaction_start_time_ms >= 0
    ]
    if not starts:
        return None
    ahead = max(tasks_after_wall_ms - min(starts), 0) if tasks_after_wall_ms >= 0 else 0
    return max(driver_wall_ms - ahead, *starts)


def _expiring(
    tasks: Sequence[TaskTransaction],
    seen: Mapping[str, TransactionListing | None],
    broker_now: int | None,
) -> list[tuple[TaskTransaction, str]]:
    """The open transactions too close to their ``transaction.timeout.ms`` to commit, and why
    (``broker_now``: :func:`_brokers_now`)."""
    if broker_now is None:
        return []
    out: list[tuple[TaskTransaction, str]] = []
    for task in tasks:
        now = seen.get(task.transaction.transactional_id)
        if now is None or now.transaction_start_time_ms < 0 or now.transaction_timeout_ms <= 0:
            continue
        margin = min(_EXPIRY_MARGIN_MS, now.transaction_timeout_ms // 4)
        age = broker_now - now.transaction_start_time_ms
        if now.transaction_timeout_ms - age < margin:
            out.append(
                (
                    task,
                    f"about to be aborted by the coordinator: open for at least {age} ms of its "
                    f"{_TIMED_OUT} ({now.transaction_timeout_ms} ms), less than the {margin} "
                    "ms a commit needs (the coordinator aborts it at any moment once the "
                    "timeout has passed; its age is counted from its start time on the brokers' "
                    "clock to the driver's clock, so a driver clock ahead of the brokers' makes "
                    "it look older: check both clocks when the tasks were not that slow)",
                )
            )
    return out


def _intent_bound(
    tasks: Sequence[TaskTransaction],
    seen: Mapping[str, TransactionListing | None],
    broker_now: int | None,
) -> int | None:
    """How long the intent write may take: the smallest time any of the batch's transactions
    has left before its ``transaction.timeout.ms``, less a third of its expiry margin kept for
    its EndTxn (``_expiring`` let through only those with at least the margin left, so this is
    at least two thirds of it). None when no transaction shows its start time.
    """
    if broker_now is None:
        return None
    bounds = [
        now.transaction_timeout_ms
        - (broker_now - now.transaction_start_time_ms)
        - min(_EXPIRY_MARGIN_MS, now.transaction_timeout_ms // 4) // 3
        for task in tasks
        if (now := seen.get(task.transaction.transactional_id)) is not None
        and now.transaction_start_time_ms >= 0
        and now.transaction_timeout_ms > 0
    ]
    return max(min(bounds), 0) if bounds else None


def _same_record(found: BatchRecord | None, record: BatchRecord) -> bool:
    """Whether the store's ``found`` is ``record`` (its batch, state and transactions)."""
    return (
        found is not None
        and (found.batch_id, found.state) == (record.batch_id, record.state)
        and [_key(t) for t in found.transactions] == [_key(t) for t in record.transactions]
    )


def _spark_partitions(tasks: Sequence[TaskTransaction]) -> str:
    numbers = sorted(t.partition_id for t in tasks if t.partition_id >= 0)
    return f" (Spark partitions {numbers})" if numbers else ""


def _shown(tasks: Sequence[TaskTransaction]) -> str:
    partitions = sorted({tp for t in tasks for tp in t.transaction.partitions})
    shown = ", ".join(f"{topic}-{p}" for topic, p in partitions[:20]) or "none"
    if len(partitions) > 20:
        shown += f" and {len(partitions) - 20} more"
    return shown


def listing_ops(
    config: Mapping[str, object],
    timeout_s: float | None = None,
) -> TransactionOps:
    """The production :class:`TransactionOps`: ``admin.transactions`` against the cluster.

    One admin client, built on the first call, serves every call until ``close()`` (the driver
    builds the ops per planning, commit or abort); a batch's commits are sent at once
    (``complete_transactions``) and its verification is one DescribeTransactions per
    coordinator, each call bounded by ``timeout_s`` (None: ``max.block.ms``).
    """
    # Lazy: the driver's workers import this module for every write, and only an exactly-once
    # commit (or a planning with something to recover) needs the admin client and its stack.
    from kafka_sink.admin.transactions import OPEN_STATES, TransactionAdmin

    built: list[TransactionAdmin] = []

    def admin_client() -> TransactionAdmin:
        # Built on first use: planning a batch with nothing to recover needs no client.
        if not built:
            built.append(TransactionAdmin(config, timeout_s))
        return built[0]

    def close() -> None:
        if built:
            built.pop().close()

    def complete(prepared: PreparedTransaction, commit: bool) -> object:
        return admin_client().complete(prepared, commit)

    def complete_all(
        handles: Sequence[PreparedTransaction], commit: bool
    ) -> list[KafkaError | None]:
        return [c.error for c in admin_client().complete_all(handles, commit)]

    def list_open(prefix: str) -> list[PreparedTransaction]:
        return [t.prepared() for t in admin_client().list(prefix) if t.state in OPEN_STATES]

    def describe(ids: Sequence[str]) -> dict[str, TransactionListing | None]:
        return admin_client().describe(ids)

    def init(transactional_id: str, transaction_timeout_ms: int) -> tuple[int, int]:
        return admin_client().init_producer_id(transactional_id, transaction_timeout_ms)

    def producers(partitions: Sequence[TopicPartition]) -> dict[TopicPartition, PartitionProducers]:
        # Only a count for the abort's document waits on it: bounded shorter than the rest.
        bound_s = _COUNT_TIMEOUT_S if timeout_s is None else min(timeout_s, _COUNT_TIMEOUT_S)
        return admin_client().producers(partitions, bound_s)

    return TransactionOps(
        complete=complete,
        list_open=list_open,
        complete_all=complete_all,
        close=close,
        describe=describe,
        init=init,
        producers=producers,
        outcome=marker_reader(config, timeout_s),
    )


def _driver_fence(plan: EosPlan, config: dict[str, str], ops: TransactionOps) -> DriverFence | None:
    """A fenced plan's fence on this driver, after refusing a prefix another query claimed."""
    if not plan.fenced or not fault_hooks.safeguards.fence:  # only a test leaves it out
        return None
    init, describe = ops.init, ops.describe
    if init is None or describe is None:
        raise ValueError("a fenced plan needs TransactionOps with init and describe")

    def refuse_claimed() -> None:
        store = open_intent_store(plan, config)
        try:
            refuse_foreign_claim(store, plan.prefix, plan.query_key)
        finally:
            store.close()

    if plan.batch_job or plan.idempotency_key is not None:
        # A batch job: every job's planning takes the fence anew, its commit uses that.
        return job_fence(
            plan,
            init=lambda tid: init(tid, _FENCE_TRANSACTION_TIMEOUT_MS),
            describe=lambda tid: describe([tid]).get(tid),
            before_acquire=refuse_claimed,
        )
    refuse_claimed()  # every call, planning and commit: read-only

    def latest() -> BatchRecord | None:
        store = open_intent_store(plan, config)
        try:
            return store.last(plan.query_key)
        finally:
            store.close()

    def open_elsewhere(last: BatchRecord | None) -> list[str]:
        # A stale fence's planning: is another driver's batch in flight (fence.py)?
        named = set()
        if last is not None and EosCommitter._unfinished(last):
            named = {t.transactional_id for t in last.transactions}
        return [
            t.transactional_id
            for t in ops.list_open(plan.prefix + "-")
            if parse_transactional_id(plan.prefix, t.transactional_id) is not None
            and t.transactional_id not in named
        ]

    return open_fence(
        plan.prefix,
        plan.query_key,
        init=lambda tid: init(tid, _FENCE_TRANSACTION_TIMEOUT_MS),
        describe=lambda tid: describe([tid]).get(tid),
        latest=latest,
        open_elsewhere=open_elsewhere,
        planning_batch=plan.planned_batch,
    )
