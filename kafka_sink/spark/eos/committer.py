"""The driver's exactly-once commit: a roll-forward log over an intent store (``intents.py``).

Role: Spark calls ``commit(messages, batchId)`` on the driver once the tasks of a batch are done;
each message carries the :class:`PreparedTransaction` its task attempt left open. This module
commits them all so that a read_committed reader sees the batch exactly once, whatever fails:

1. the store says the batch is done (a re-run after a restart): abort the re-run's transactions;
2. the store holds an intent for the batch that is not done (the driver died, or a commit failed,
   between the intent and done): commit the recorded transactions, write done, then abort the
   re-run's;
3. otherwise: check every transaction is still open at its producer id and epoch (one that the
   coordinator already aborted, after ``transaction.timeout.ms``, fails the batch before anything
   becomes visible, so the re-run writes the whole batch again), write the intent durably
   **before** the first EndTxn, commit each, write done.

Every commit and abort then sweeps: the ongoing transactions of the write's prefix that neither
the batch nor an unfinished intent names (failed or speculative attempts, earlier runs) are
aborted, so nothing lingers to hold back read_committed readers. :meth:`EosCommitter.recover`
(run while Spark plans a batch, before its tasks start) finishes an unfinished intent, so a
re-run's tasks never re-initialise (and so abort) an id whose transaction an intent names.

A write's committer is built from its :class:`~kafka_sink.spark.eos.plan.EosPlan`
(:meth:`EosCommitter.for_plan`: the plan's intent store, :func:`listing_ops` on the cluster) by
``datasource.py`` while planning and by ``writer.py`` in ``commit()`` / ``abort()``.

Invariants:
- An intent is durable before the first EndTxn of its batch; a transaction named by an intent is
  only ever committed, never aborted, and ``done`` is written only after all of them committed.
- A transaction is aborted only when no message being committed and no unfinished intent names
  it (compared by transactional id, producer id and epoch).
- A transaction lost between the check and its EndTxn (the broker aborted it meanwhile) fails
  the batch naming the partitions and the fix; the intent is then marked lost, so the re-run
  writes and commits the batch again (rows of the batch's other transactions, already visible,
  are then written twice: the check above makes this window small).
- Kafka is reached only through the injected :class:`TransactionOps`, so the state machine is
  tested with fakes.
- The test-only fault hook (``fault_hooks.pause_commit``) sits between the durable intent and
  the first EndTxn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafka_sink.errors import KafkaError, TransactionLostError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark.eos.intents import DONE, INTENT, BatchRecord, IntentStore
from kafka_sink.spark.eos.plan import EosPlan, parse_transactional_id
from kafka_sink.spark.errors import SinkError
from kafka_sink.spark.fault_hooks import pause_commit

__all__ = [
    "ALREADY_DONE",
    "COMMITTED",
    "ROLLED_FORWARD",
    "EosCommitter",
    "SinkTransactionLostError",
    "TaskTransaction",
    "TransactionOps",
]

log = logging.getLogger("kafka_sink.spark")

COMMITTED = "committed"
ALREADY_DONE = "already-done"
ROLLED_FORWARD = "rolled-forward"
_LOST_KEY = "lost"


class SinkTransactionLostError(SinkError):
    """A batch's transaction was aborted by Kafka before the driver could commit it."""


@dataclass(frozen=True)
class TaskTransaction:
    """The transaction one task's commit message names, with the Spark partition it wrote."""

    partition_id: int
    transaction: PreparedTransaction


@dataclass(frozen=True)
class TransactionOps:
    """How the committer reaches Kafka (``admin.transactions`` in production, fakes in tests).

    ``complete(prepared, commit)`` ends one transaction (raises ``TransactionLostError`` when a
    commit finds it gone); ``list_open(prefix)`` returns the transactions whose id starts with
    ``prefix`` and that are open (Ongoing), as handles. ``complete_all(handles, commit)``, when
    given, ends them all at once: per handle None (ended) or the ``TransactionLostError`` of a
    commit Kafka refused; any other failure raises, naming what was and was not ended.
    ``close()`` releases what the ops hold (called once the commit or abort is over).
    """

    complete: Callable[[PreparedTransaction, bool], object]
    list_open: Callable[[str], list[PreparedTransaction]]
    complete_all: (
        Callable[[Sequence[PreparedTransaction], bool], list[TransactionLostError | None]] | None
    ) = None
    close: Callable[[], None] = lambda: None


def _key(t: PreparedTransaction) -> tuple[str, int, int]:
    return (t.transactional_id, t.producer_id, t.producer_epoch)


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
    ) -> None:
        self.store = store
        self.ops = ops
        self.query_key = query_key
        self.prefix = prefix
        self.timeout_hint = timeout_hint

    @classmethod
    def for_plan(cls, plan: EosPlan, producer_config: dict[str, str]) -> EosCommitter:
        """The committer of ``plan``'s write, its store opened; ``close()`` it when done."""
        store = plan.open_store(producer_config)
        try:
            ops = listing_ops(producer_config)
        except BaseException:
            store.close()
            raise
        return cls(store, ops, query_key=plan.query_key, prefix=plan.prefix)

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

    # -- commit ----------------------------------------------------------------------------

    def commit(self, batch_id: int, tasks: Sequence[TaskTransaction]) -> str:
        """Commit batch ``batch_id``; returns COMMITTED, ALREADY_DONE or ROLLED_FORWARD."""
        last = self.store.last(self.query_key)
        if last is not None and self._unfinished(last) and last.batch_id != batch_id:
            # An earlier batch's intent: recover() should have finished it while planning.
            last = self._roll_forward(last, raise_lost=False)
        if last is not None and self._already_done(last, batch_id):
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
        prepared = tuple(t.transaction for t in tasks)
        open_now = self.ops.list_open(self._list_prefix())
        open_keys = {_key(t) for t in open_now}
        gone = [t for t in tasks if _key(t.transaction) not in open_keys]
        if gone:
            # Nothing of the batch is visible yet: abort the rest, and the re-run writes it all.
            self._abort_named(tasks, keep=())
            self._sweep(keep=())
            raise SinkTransactionLostError(self._lost_message(batch_id, gone, committed=0))
        self.store.write(BatchRecord(self.query_key, batch_id, INTENT, prepared))
        pause_commit(batch_id)
        lost = self._commit_all(tasks)
        if lost:
            self.store.write(
                BatchRecord(
                    self.query_key,
                    batch_id,
                    INTENT,
                    (),
                    {_LOST_KEY: ",".join(t.transaction.transactional_id for t in lost)},
                )
            )
            self._sweep(keep=())
            raise SinkTransactionLostError(
                self._lost_message(batch_id, lost, committed=len(tasks) - len(lost))
            )
        self.store.write(BatchRecord(self.query_key, batch_id, DONE, prepared))
        self._sweep(keep=prepared, listed=open_now)
        return COMMITTED

    # -- abort -----------------------------------------------------------------------------

    def abort(self, batch_id: int, tasks: Sequence[TaskTransaction]) -> None:
        """End what must not survive a failed batch; never touches what an intent names."""
        last = self.store.last(self.query_key)
        keep: tuple[PreparedTransaction, ...] = ()
        if last is not None and self._unfinished(last):
            try:
                self._roll_forward(last)
            except (KafkaError, SinkError) as exc:
                log.error(
                    "pykafka exactly-once: could not finish the commit of batch %d recorded "
                    "before (it is finished when the query restarts): %s",
                    last.batch_id,
                    exc,
                )
            keep = last.transactions
        elif last is not None and last.batch_id == batch_id and last.state == DONE:
            keep = last.transactions
        self._abort_named(tasks, keep=keep)
        self._sweep(keep=keep)

    # -- steps -----------------------------------------------------------------------------

    @staticmethod
    def _unfinished(record: BatchRecord) -> bool:
        return record.state == INTENT and _LOST_KEY not in record.extra

    @staticmethod
    def _already_done(record: BatchRecord, batch_id: int) -> bool:
        if record.batch_id > batch_id:
            return True  # the store only moves forward: an older batch was done before it
        return record.batch_id == batch_id and record.state == DONE

    def _list_prefix(self) -> str:
        return self.prefix + "-"

    def _roll_forward(self, record: BatchRecord, *, raise_lost: bool = True) -> BatchRecord:
        """Commit what ``record`` names, then write done (or, when Kafka lost some, mark the
        intent lost so that the batch's re-run writes and commits it again)."""
        lost = self._commit_all([TaskTransaction(-1, t) for t in record.transactions])
        if lost:
            marked = BatchRecord(
                self.query_key,
                record.batch_id,
                INTENT,
                (),
                {_LOST_KEY: ",".join(t.transaction.transactional_id for t in lost)},
            )
            self.store.write(marked)
            message = self._lost_message(
                record.batch_id, lost, committed=len(record.transactions) - len(lost)
            )
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

    def _commit_all(self, tasks: Iterable[TaskTransaction]) -> list[TaskTransaction]:
        """Commit each; the ones Kafka had already aborted (other errors propagate)."""
        lost: list[TaskTransaction] = []
        if self.ops.complete_all is not None:
            tasks = list(tasks)
            outcomes = self.ops.complete_all([t.transaction for t in tasks], True)
            for task, outcome in zip(tasks, outcomes, strict=True):
                if outcome is not None:
                    log.error("pykafka exactly-once: %s", outcome)
                    lost.append(task)
            return lost
        for task in tasks:
            try:
                self.ops.complete(task.transaction, True)
            except TransactionLostError as exc:
                log.error("pykafka exactly-once: %s", exc)
                lost.append(task)
        return lost

    def _abort_named(
        self, tasks: Iterable[TaskTransaction], *, keep: Iterable[PreparedTransaction]
    ) -> None:
        kept = {_key(t) for t in keep}
        for task in tasks:
            if _key(task.transaction) in kept:
                continue
            self._abort_quietly(task.transaction)

    def _sweep(
        self,
        *,
        keep: Iterable[PreparedTransaction],
        listed: Sequence[PreparedTransaction] | None = None,
    ) -> None:
        """Abort the open transactions of this write's ids that ``keep`` does not name."""
        kept = {_key(t) for t in keep}
        try:
            found = self.ops.list_open(self._list_prefix()) if listed is None else listed
        except KafkaError as exc:
            log.warning(
                "pykafka exactly-once: could not list open transactions of prefix %r to end "
                "leftovers (the next commit tries again): %s",
                self.prefix,
                exc,
            )
            return
        for t in found:
            if _key(t) in kept or parse_transactional_id(self.prefix, t.transactional_id) is None:
                continue
            self._abort_quietly(t)

    def _abort_quietly(self, t: PreparedTransaction) -> None:
        try:
            self.ops.complete(t, False)
        except KafkaError as exc:
            log.warning(
                "pykafka exactly-once: could not abort transaction %r (producer id %d, epoch "
                "%d); the next commit's sweep tries again, and the broker aborts it after "
                "transaction.timeout.ms: %s",
                t.transactional_id,
                t.producer_id,
                t.producer_epoch,
                exc,
            )

    def _lost_message(self, batch_id: int, lost: Sequence[TaskTransaction], committed: int) -> str:
        partitions = sorted({tp for t in lost for tp in t.transaction.partitions})
        shown = ", ".join(f"{topic}-{p}" for topic, p in partitions[:20]) or "none"
        if len(partitions) > 20:
            shown += f" and {len(partitions) - 20} more"
        tasks = sorted(t.partition_id for t in lost if t.partition_id >= 0)
        spark = f" (Spark partitions {tasks})" if tasks else ""
        ids = ", ".join(t.transaction.transactional_id for t in lost)
        after = (
            "nothing of the batch became visible; the batch is run again and writes these rows "
            "again"
            if committed == 0
            else f"{committed} other transaction(s) of the batch were committed and are "
            "visible; the re-run writes the whole batch again, so their rows appear twice"
        )
        return (
            f"exactly-once commit of batch {batch_id} failed: Kafka aborted {len(lost)} "
            f"transaction(s){spark} before the driver could commit them ({ids}), most often "
            f"because they stayed open longer than transaction.timeout.ms; partitions "
            f"{shown}. {after}. Fix: raise {self.timeout_hint} (at most the brokers' "
            "transaction.max.timeout.ms) or make the tasks of a batch faster (smaller "
            "batches, more partitions)"
        )


def listing_ops(
    config: Mapping[str, object],
    timeout_s: float | None = None,
) -> TransactionOps:
    """The production :class:`TransactionOps`: ``admin.transactions`` against the cluster.

    One admin client, built on the first call, serves every call until ``close()`` (the driver
    builds the ops per planning, commit or abort); a batch's commits are sent at once
    (``complete_transactions``), each bounded by ``timeout_s`` (None: ``max.block.ms``).
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
    ) -> list[TransactionLostError | None]:
        outcomes = admin_client().complete_all(handles, commit)
        failed = [
            c
            for c in outcomes
            if c.error is not None and not isinstance(c.error, TransactionLostError)
        ]
        if failed:
            what = "commit" if commit else "abort"
            ended = [c.prepared.transactional_id for c in outcomes if c.error is None]
            lost = [
                c.prepared.transactional_id
                for c in outcomes
                if isinstance(c.error, TransactionLostError)
            ]
            raise KafkaError(
                f"could not {what} {len(failed)} of {len(outcomes)} transaction(s): "
                + "; ".join(f"{c.prepared.transactional_id!r}: {c.error}" for c in failed)
                + f". Done: {ended or 'none'}"
                + (f"; lost (aborted by Kafka): {lost}" if lost else "")
            )
        return [c.error if isinstance(c.error, TransactionLostError) else None for c in outcomes]

    def list_open(prefix: str) -> list[PreparedTransaction]:
        return [t.prepared() for t in admin_client().list(prefix) if t.state in OPEN_STATES]

    return TransactionOps(
        complete=complete, list_open=list_open, complete_all=complete_all, close=close
    )
