"""The driver's exactly-once commit state machine, with a fake intent store and fake Kafka."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from kafka_sink.admin.transactions import TransactionListing
from kafka_sink.errors import KafkaError, TransactionLostError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.sink_errors import SinkCommitIncompleteError, SinkTransactionLostError
from kafka_sink.spark.driver.eos.committer import (
    ALREADY_DONE,
    COMMITTED,
    ROLLED_FORWARD,
    EosCommitter,
    TaskTransaction,
    TransactionOps,
)
from kafka_sink.spark.driver.eos.intents import (
    DONE,
    INTENT,
    PARTIAL,
    BatchRecord,
    MemoryIntentStore,
)

PREFIX = "pykafka-q1"


def txn(partition: int, slot: int = 0, pid: int = 100, epoch: int = 0) -> PreparedTransaction:
    return PreparedTransaction(
        f"{PREFIX}-{partition}-{slot}", pid + partition, epoch, (("t", partition),)
    )


@dataclass
class FakeKafka:
    """The coordinator as far as the committer sees it: open transactions, and a call log."""

    store: MemoryIntentStore
    open: dict[tuple[str, int, int], PreparedTransaction] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    lost: set[str] = field(default_factory=set)
    # Each call sees how many records the store held then (to check "intent before EndTxn").
    store_len_at: list[int] = field(default_factory=list)

    # The last transaction begun on each id (what DescribeTransactions reports once it ended).
    begun: dict[str, PreparedTransaction] = field(default_factory=dict)

    def begin(self, t: PreparedTransaction) -> PreparedTransaction:
        self.open[(t.transactional_id, t.producer_id, t.producer_epoch)] = t
        self.begun[t.transactional_id] = t
        return t

    def complete(self, t: PreparedTransaction, commit: bool) -> None:
        self.calls.append(("commit" if commit else "abort", t.transactional_id))
        self.store_len_at.append(len(self.store.history))
        key = (t.transactional_id, t.producer_id, t.producer_epoch)
        if commit and t.transactional_id in self.lost:
            raise TransactionLostError(f"{t.transactional_id} was aborted by the coordinator")
        self.open.pop(key, None)

    def list_open(self, prefix: str) -> list[PreparedTransaction]:
        assert prefix == PREFIX + "-"
        return [t for t in self.open.values() if t.transactional_id.startswith(prefix)]

    def describe(self, ids: Sequence[str]) -> dict[str, TransactionListing | None]:
        """An open transaction is Ongoing; one that is not was aborted by the coordinator."""
        out: dict[str, TransactionListing | None] = {}
        for tid in ids:
            t = self.begun[tid]
            ongoing = (tid, t.producer_id, t.producer_epoch) in self.open
            out[tid] = TransactionListing(
                tid,
                t.producer_id,
                t.producer_epoch + (0 if ongoing else 1),
                "Ongoing" if ongoing else "CompleteAbort",
                t.partitions if ongoing else (),
                0,
                transaction_timeout_ms=60000,
            )
        return out

    def ops(self) -> TransactionOps:
        return TransactionOps(
            complete=self.complete, list_open=self.list_open, describe=self.describe
        )


@pytest.fixture
def kafka() -> FakeKafka:
    return FakeKafka(MemoryIntentStore())


def committer(kafka: FakeKafka) -> EosCommitter:
    return EosCommitter(kafka.store, kafka.ops(), query_key="q1", prefix=PREFIX)


def tasks(kafka: FakeKafka, *txns: PreparedTransaction) -> list[TaskTransaction]:
    return [TaskTransaction(int(t.transactional_id.split("-")[-2]), kafka.begin(t)) for t in txns]


def test_commit_writes_the_intent_before_the_first_endtxn_then_done(kafka: FakeKafka) -> None:
    batch = tasks(kafka, txn(0), txn(1))
    assert committer(kafka).commit(5, batch) == COMMITTED
    assert kafka.calls == [("commit", f"{PREFIX}-0-0"), ("commit", f"{PREFIX}-1-0")]
    intent, done = kafka.store.history
    assert (intent.batch_id, intent.state, intent.transactions) == (5, INTENT, (txn(0), txn(1)))
    assert (done.batch_id, done.state) == (5, DONE)
    assert kafka.store_len_at == [1, 1]  # the intent, and only it, was stored before each EndTxn
    assert kafka.open == {}


def test_commit_sweeps_failed_attempts_but_not_other_prefixes(kafka: FakeKafka) -> None:
    failed_attempt = kafka.begin(txn(0, slot=0, pid=900))  # attempt 0 failed, left it open
    other_query = kafka.begin(PreparedTransaction(f"{PREFIX}-x-0-0", 5, 0))  # not one of our ids
    batch = tasks(kafka, txn(0, slot=1), txn(1))
    assert committer(kafka).commit(0, batch) == COMMITTED
    assert ("abort", failed_attempt.transactional_id) in kafka.calls
    assert list(kafka.open.values()) == [other_query]


def test_rerun_of_a_done_batch_aborts_its_transactions(kafka: FakeKafka) -> None:
    c = committer(kafka)
    c.commit(3, tasks(kafka, txn(0), txn(1)))
    kafka.calls.clear()
    rerun = tasks(kafka, txn(0, epoch=2), txn(1, epoch=2))
    assert c.commit(3, rerun) == ALREADY_DONE
    assert sorted(kafka.calls) == [("abort", f"{PREFIX}-0-0"), ("abort", f"{PREFIX}-1-0")]
    assert kafka.open == {}
    assert kafka.store.last("q1").state == DONE


def test_an_unfinished_intent_is_committed_first_then_the_rerun_aborted(kafka: FakeKafka) -> None:
    first = tasks(kafka, txn(0), txn(1))
    # The driver died after the intent and one EndTxn.
    kafka.store.write(BatchRecord("q1", 7, INTENT, tuple(t.transaction for t in first)))
    kafka.complete(first[0].transaction, True)
    kafka.calls.clear()
    rerun = tasks(kafka, txn(0, slot=0, pid=500), txn(1, slot=0, pid=500))
    assert committer(kafka).commit(7, rerun) == ROLLED_FORWARD
    assert kafka.calls[:2] == [("commit", f"{PREFIX}-0-0"), ("commit", f"{PREFIX}-1-0")]
    assert sorted(kafka.calls[2:]) == [("abort", f"{PREFIX}-0-0"), ("abort", f"{PREFIX}-1-0")]
    assert [k[1] for k, _ in [(k, v) for k, v in kafka.open.items()]] == []
    assert kafka.store.last("q1") == BatchRecord("q1", 7, DONE, tuple(t.transaction for t in first))


def test_recover_finishes_an_intent_before_tasks_run(kafka: FakeKafka) -> None:
    first = tasks(kafka, txn(0), txn(1))
    kafka.store.write(BatchRecord("q1", 2, INTENT, tuple(t.transaction for t in first)))
    record = committer(kafka).recover()
    assert record is not None and record.state == DONE
    assert kafka.calls == [("commit", f"{PREFIX}-0-0"), ("commit", f"{PREFIX}-1-0")]
    # Then the re-run's commit of batch 2 aborts what it wrote.
    kafka.calls.clear()
    assert committer(kafka).commit(2, tasks(kafka, txn(0, pid=700))) == ALREADY_DONE
    assert kafka.calls == [("abort", f"{PREFIX}-0-0")]


def test_recover_without_an_intent_does_nothing(kafka: FakeKafka) -> None:
    assert committer(kafka).recover() is None
    assert kafka.calls == []


def test_a_transaction_lost_before_the_commit_fails_the_batch_with_nothing_visible(
    kafka: FakeKafka,
) -> None:
    batch = tasks(kafka, txn(0), txn(1))
    del kafka.open[(f"{PREFIX}-1-0", 101, 0)]  # the broker aborted it (timeout)
    with pytest.raises(SinkTransactionLostError) as info:
        committer(kafka).commit(4, batch)
    text = str(info.value)
    assert "batch 4" in text and "t-1" in text and "Spark partitions [1]" in text
    assert "transaction.timeout.ms" in text and "before anything became visible" in text
    assert kafka.store.history == []  # no intent: the re-run starts afresh
    assert ("commit", f"{PREFIX}-0-0") not in kafka.calls
    assert kafka.open == {}
    # The re-run writes and commits again.
    assert committer(kafka).commit(4, tasks(kafka, txn(0, epoch=3), txn(1, epoch=3))) == COMMITTED


def test_a_transaction_lost_during_the_commit_records_the_batch_partial(
    kafka: FakeKafka,
) -> None:
    batch = tasks(kafka, txn(0), txn(1))
    kafka.lost.add(f"{PREFIX}-1-0")  # aborted between the check and its EndTxn
    with pytest.raises(SinkTransactionLostError, match=r"batch 6.*1 other transaction"):
        committer(kafka).commit(6, batch)
    marked = kafka.store.last("q1")
    assert marked is not None and marked.state == PARTIAL
    assert marked.committed == {0: None} and marked.lost == (1,)
    kafka.calls.clear()
    # recover() leaves a partial batch alone: nothing of it is open to commit.
    assert committer(kafka).recover() == marked
    assert kafka.calls == []


def test_abort_never_aborts_what_an_unfinished_intent_names(kafka: FakeKafka) -> None:
    recorded = tasks(kafka, txn(0))
    kafka.store.write(BatchRecord("q1", 1, INTENT, (recorded[0].transaction,)))
    stray = kafka.begin(txn(1, pid=300))
    committer(kafka).abort(1, [])
    assert ("commit", f"{PREFIX}-0-0") in kafka.calls
    assert ("abort", f"{PREFIX}-0-0") not in kafka.calls
    assert ("abort", stray.transactional_id) in kafka.calls
    assert kafka.open == {}


def test_abort_of_a_failed_batch_aborts_everything_it_wrote(kafka: FakeKafka) -> None:
    ok = tasks(kafka, txn(0))
    kafka.begin(txn(1, slot=2))  # a failed task's attempt: no message names it
    committer(kafka).abort(0, ok)
    assert sorted(kafka.calls) == [("abort", f"{PREFIX}-0-0"), ("abort", f"{PREFIX}-1-2")]
    assert kafka.open == {} and kafka.store.history == []


def test_abort_after_a_commit_that_wrote_done_keeps_the_committed(kafka: FakeKafka) -> None:
    batch = tasks(kafka, txn(0))
    c = committer(kafka)
    c.commit(9, batch)
    kafka.calls.clear()
    c.abort(9, batch)  # Spark calls abort when commit() raised after done (e.g. the log file)
    assert kafka.calls == []


def test_a_sweep_that_cannot_list_does_not_fail_the_commit(kafka: FakeKafka) -> None:
    c = committer(kafka)
    batch = tasks(kafka, txn(0))
    c.commit(0, batch)
    rerun = tasks(kafka, txn(0, epoch=1))

    def broken(prefix: str) -> list[PreparedTransaction]:
        raise KafkaError("no broker answered")

    c.ops = TransactionOps(complete=kafka.complete, list_open=broken)
    assert c.commit(0, rerun) == ALREADY_DONE


def test_an_empty_batch_commits_with_an_empty_intent(kafka: FakeKafka) -> None:
    assert committer(kafka).commit(0, []) == COMMITTED
    assert [r.state for r in kafka.store.history] == [INTENT, DONE]


def _batched(kafka: FakeKafka) -> tuple[EosCommitter, list[list[str]]]:
    """A committer whose ops end a batch's transactions in one ``complete_all`` call."""
    rounds: list[list[str]] = []

    def complete_all(handles, commit: bool) -> list[TransactionLostError | None]:
        rounds.append([h.transactional_id for h in handles])
        out: list[TransactionLostError | None] = []
        for h in handles:
            try:
                kafka.complete(h, commit)
            except TransactionLostError as exc:
                out.append(exc)
            else:
                out.append(None)
        return out

    ops = TransactionOps(kafka.complete, kafka.list_open, complete_all=complete_all)
    return EosCommitter(kafka.store, ops, query_key="q1", prefix=PREFIX), rounds


def test_a_batch_is_committed_in_one_complete_all_after_its_intent(kafka: FakeKafka) -> None:
    c, rounds = _batched(kafka)
    assert c.commit(5, tasks(kafka, txn(0), txn(1), txn(2))) == COMMITTED
    assert rounds == [[f"{PREFIX}-0-0", f"{PREFIX}-1-0", f"{PREFIX}-2-0"]]
    assert kafka.store_len_at == [1, 1, 1]  # the intent was durable before any EndTxn
    assert kafka.store.last("q1").state == DONE


def test_a_transaction_lost_in_complete_all_marks_the_intent_lost(kafka: FakeKafka) -> None:
    c, _rounds = _batched(kafka)
    kafka.lost.add(f"{PREFIX}-1-0")
    with pytest.raises(SinkTransactionLostError, match=r"batch 6.*1 other transaction"):
        c.commit(6, tasks(kafka, txn(0), txn(1)))
    marked = kafka.store.last("q1")
    assert marked is not None and marked.state == PARTIAL and marked.lost == (1,)
    assert marked.extra["lost"] == f"{PREFIX}-1-0"


def test_a_complete_all_failure_leaves_the_intent_to_roll_forward(kafka: FakeKafka) -> None:
    def failing(handles, commit: bool) -> list[TransactionLostError | None]:
        raise KafkaError("could not commit 1 of 2 transaction(s): ... Done: [...]")

    ops = TransactionOps(kafka.complete, kafka.list_open, complete_all=failing)
    c = EosCommitter(kafka.store, ops, query_key="q1", prefix=PREFIX)
    with pytest.raises(SinkCommitIncompleteError, match="is recorded") as info:
        c.commit(7, tasks(kafka, txn(0), txn(1)))
    assert "could not commit" in str(info.value.__cause__)
    intent = kafka.store.last("q1")
    assert intent is not None and intent.state == INTENT and "lost" not in intent.extra
    # The re-run (same batch) finishes the recorded commits first.
    assert committer(kafka).commit(7, tasks(kafka, txn(0, epoch=5), txn(1, epoch=5))) == (
        ROLLED_FORWARD
    )
