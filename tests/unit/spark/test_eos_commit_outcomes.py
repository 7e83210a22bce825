"""The driver's exactly-once commit where an outcome is uncertain, on the fake TV2 coordinator.

An intent write whose answer was lost, a transaction that shows Ongoing past its timeout,
brokers without DescribeTransactions, an abort whose intent store cannot be read, and a commit
whose answer was lost (as its epoch rolled over, or before its id moved on), read from its
marker, or unknown when the marker cannot be read (the intent then stays unfinished and nothing
is written twice). Each ends with what read_committed readers see (the commit file of a visible
batch: ``test_sink_writer_eos.py``).
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from kafka_sink.errors import UnsupportedVersionError
from kafka_sink.sink_errors import (
    SinkCommitIncompleteError,
    SinkCommitOutcomeUnknownError,
    SinkTransactionLostError,
)
from kafka_sink.spark.driver.eos.committer import ALREADY_DONE, COMMITTED, TransactionOps
from kafka_sink.spark.driver.eos.intents import (
    DONE,
    INTENT,
    PARTIAL,
    BatchRecord,
    record_from_json,
    record_to_json,
)
from tests.fakes.coordinator import (
    COORDINATOR_NOT_AVAILABLE,
    LOST_ANSWER,
    NONE,
    TOPIC_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    FakeCoordinator,
    coordinator_ops,
)
from tests.unit.spark.eos_support import (
    PREFIX,
    TIMEOUT_MS,
    FaultyStore,
    committer,
    expected_rows,
    rerun_tasks,
    run_tasks,
    visible_counts,
)

BATCH = 1


# -- an intent write whose outcome is unknown -------------------------------------------------


def test_an_intent_that_landed_although_its_write_failed_is_committed_not_aborted() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tasks = run_tasks(coord, BATCH)
    store.fail_writes.append("after")  # durable, but the driver hears an error
    # Were the batch aborted now, partition 1's abort would fail and a later roll-forward of the
    # intent would commit it alone: a half-visible batch, written twice by the re-run.
    coord.script("end_txn", NONE, COORDINATOR_NOT_AVAILABLE)
    coord.script("list", COORDINATOR_NOT_AVAILABLE)

    assert c.commit(BATCH, tasks) == COMMITTED

    assert visible_counts(coord) == expected_rows([BATCH])
    assert coord.open_transactions() == []


def test_an_intent_write_of_unknown_outcome_aborts_nothing_and_is_rolled_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tasks = run_tasks(coord, BATCH)
    store.fail_writes.append("after")
    reads: list[str] = []
    read = store.last

    def second_read_fails(query_key: str) -> BatchRecord | None:
        reads.append(query_key)
        if len(reads) == 2:  # the read back that would tell whether the intent landed
            raise OSError("the intent store did not answer (scripted)")
        return read(query_key)

    monkeypatch.setattr(store, "last", second_read_fails)

    with pytest.raises(SinkCommitIncompleteError, match="may be recorded"):
        c.commit(BATCH, tasks)
    assert visible_counts(coord) == Counter()
    assert sorted(coord.open_transactions()) == [f"{PREFIX}-{p}-0" for p in range(3)]

    c.abort(BATCH, tasks)  # Spark's abort finds the intent and rolls it forward
    assert visible_counts(coord) == expected_rows([BATCH])
    assert coord.open_transactions() == []


def test_an_intent_write_proven_absent_aborts_the_batch() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    store.fail_writes.append("before")
    with pytest.raises(Exception, match="refused the write"):
        c.commit(BATCH, run_tasks(coord, BATCH))
    assert coord.open_transactions() == []
    assert visible_counts(coord) == Counter()


# -- a transaction past its timeout that still shows Ongoing ----------------------------------


def test_a_transaction_past_its_timeout_fails_the_batch_before_the_intent() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tasks = run_tasks(coord, BATCH)
    # Kafka's reaper runs every 10 s: an expired transaction shows Ongoing until it does.
    coord.txns[f"{PREFIX}-1-0"].start_ms = coord.clock.wall_ms() - TIMEOUT_MS - 1
    listing = coord.describe(f"{PREFIX}-1-0")
    assert listing is not None and listing.state == "Ongoing"
    coord.script("end_txn", NONE, coord.expire)  # the reaper's tick after the check

    with pytest.raises(SinkTransactionLostError, match="about to be aborted") as failed:
        c.commit(BATCH, tasks)

    assert "transaction.timeout.ms" in str(failed.value)
    assert store.last("q1") is None  # failed before the intent
    assert visible_counts(coord) == Counter()
    assert coord.open_transactions() == []


def test_a_transaction_with_time_left_is_committed() -> None:
    coord = FakeCoordinator()
    c = committer(coord, FaultyStore())
    tasks = run_tasks(coord, BATCH)
    coord.advance(TIMEOUT_MS // 2)
    assert c.commit(BATCH, tasks) == COMMITTED
    assert visible_counts(coord) == expected_rows([BATCH])


def test_the_newest_start_bounds_the_broker_s_time_when_the_driver_s_clock_is_behind() -> None:
    coord = FakeCoordinator()
    c = committer(coord, FaultyStore())
    tasks = run_tasks(coord, BATCH)
    # The broker's clock runs ahead of the driver's: partition 2 started "in the future" for the
    # driver, partition 0 a timeout before that.
    now = coord.clock.wall_ms()
    coord.txns[f"{PREFIX}-2-0"].start_ms = now + TIMEOUT_MS
    coord.txns[f"{PREFIX}-0-0"].start_ms = now
    with pytest.raises(SinkTransactionLostError, match="about to be aborted"):
        c.commit(BATCH, tasks)


# -- brokers without DescribeTransactions ------------------------------------------------------


def test_brokers_without_describe_transactions_commit_without_the_check(
    caplog: pytest.LogCaptureFixture,
) -> None:
    coord = FakeCoordinator()
    base = coordinator_ops(coord)

    def no_describe(ids: object) -> dict[str, None]:
        raise UnsupportedVersionError("DescribeTransactions: no version this client speaks")

    ops = TransactionOps(
        complete=base.complete,
        list_open=base.list_open,
        complete_all=base.complete_all,
        describe=no_describe,
    )
    c = committer(coord, FaultyStore(), ops)
    with caplog.at_level(logging.WARNING, logger="kafka_sink.spark"):
        assert c.commit(BATCH, run_tasks(coord, BATCH)) == COMMITTED
        assert c.commit(BATCH + 1, run_tasks(coord, BATCH + 1)) == COMMITTED
    assert visible_counts(coord) == expected_rows([BATCH, BATCH + 1])
    warned = [r for r in caplog.records if "DescribeTransactions" in r.getMessage()]
    assert len(warned) <= 1


# -- abort() with an intent store that cannot be read ------------------------------------------


def test_abort_of_a_batch_never_committed_ends_its_transactions_without_the_store() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    # A job whose partition 2 task failed: Spark never called commit(), so no intent exists.
    tasks = run_tasks(coord, BATCH, partitions=(0, 1))
    store.fail_reads = 1
    c.abort(BATCH, tasks, intent_possible=False)
    assert coord.open_transactions() == []
    assert visible_counts(coord) == Counter()


def test_abort_after_a_commit_keeps_what_an_unreadable_store_may_name() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tasks = run_tasks(coord, BATCH)
    # The commit wrote its intent, then every EndTxn was refused for a cause that does not clear.
    coord.script("end_txn", *[TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * 3)
    with pytest.raises(SinkCommitIncompleteError):
        c.commit(BATCH, tasks)
    store.fail_reads = 1
    c.abort(BATCH, tasks)  # aborting now could leave some aborted, the rest rolled forward
    last = store.last("q1")
    assert last is not None and last.state == INTENT
    assert len(coord.open_transactions()) == 3
    c.recover()
    assert visible_counts(coord) == expected_rows([BATCH])
    assert coord.open_transactions() == []


# -- a commit applied whose answer was lost ----------------------------------------------------


def test_a_commit_whose_answer_was_lost_as_its_epoch_rolled_over_is_committed_once() -> None:
    coord = FakeCoordinator()
    c = committer(coord, FaultyStore())
    coord.init_producer_id(f"{PREFIX}-1-0")
    coord.txns[f"{PREFIX}-1-0"].producer_epoch = 32765  # the task gets the last epoch, 32766
    tasks = run_tasks(coord, BATCH)
    coord.script("end_txn", NONE, LOST_ANSWER)  # applied: a new producer id; answer lost
    assert c.commit(BATCH, tasks) == COMMITTED
    assert visible_counts(coord) == expected_rows([BATCH])


def test_a_commit_whose_answer_was_lost_before_the_id_moved_on_is_not_written_twice() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tasks = run_tasks(coord, BATCH)
    tid = f"{PREFIX}-1-0"
    # Partition 1's commit is applied, its answer lost; before the retry a stale InitProducerId
    # on that id (an attempt that described the slot long ago) bumps the epoch.
    coord.script("end_txn", NONE, LOST_ANSWER, NONE, lambda: coord.init_producer_id(tid))
    try:
        c.commit(BATCH, tasks)
    except Exception:
        c.abort(BATCH, tasks)
        c.recover()
        c.commit(BATCH, run_tasks(coord, BATCH))  # the re-run the error message announces
    assert visible_counts(coord) == expected_rows([BATCH]), sorted(visible_counts(coord).items())


def test_a_transaction_fenced_before_its_commit_stays_lost_when_its_marker_says_abort() -> None:
    coord = FakeCoordinator()
    c = committer(coord, FaultyStore())
    tasks = run_tasks(coord, BATCH)
    tid = f"{PREFIX}-1-0"
    # The stale InitProducerId comes first: partition 1 is aborted (an ABORT marker), never
    # committed, and the coordinator shows it Empty at the same epoch as in the lost-answer case.
    coord.script("end_txn", NONE, lambda: coord.init_producer_id(tid))
    with pytest.raises(SinkTransactionLostError, match=r"Spark partitions \[0, 2\]"):
        c.commit(BATCH, tasks)
    assert [call for call in coord.calls if call[0] == "outcome"] == [("outcome", tid)]
    assert visible_counts(coord) == expected_rows([BATCH], (0, 2))


def _answer_lost_then_moved_on(coord: FakeCoordinator, tid: str) -> None:
    """Partition 1's commit is applied, its answer lost; before the retry a stale attempt's
    InitProducerId moves its id on: the retry is refused and only the marker tells."""
    coord.script("end_txn", NONE, LOST_ANSWER, NONE, lambda: coord.init_producer_id(tid))


def test_a_refused_commit_whose_marker_cannot_be_read_is_unknown_not_lost() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tasks = run_tasks(coord, BATCH)
    tid = f"{PREFIX}-1-0"
    _answer_lost_then_moved_on(coord, tid)
    # The principal lacks READ on the topic: the Fetch of the marker is refused.
    coord.script("outcome", TOPIC_AUTHORIZATION_FAILED)

    with pytest.raises(SinkCommitOutcomeUnknownError) as info:
        c.commit(BATCH, tasks)

    text = str(info.value)
    assert isinstance(info.value, SinkCommitIncompleteError)  # incomplete, never "lost"
    assert f"batch {BATCH}" in text and repr(tid) in text and "t-1" in text
    assert "Spark partitions [1]" in text and "TOPIC_AUTHORIZATION_FAILED" in text
    assert "--operation Read --topic t" in text and "next planning" in text
    # Nothing is recorded lost: the intent stays, naming the batch's transactions.
    last = store.last("q1")
    assert last is not None and last.state == INTENT and "lost" not in last.extra
    assert [t.transactional_id for t in last.transactions] == [f"{PREFIX}-{p}-0" for p in (0, 1, 2)]
    assert visible_counts(coord) == expected_rows([BATCH])


def test_an_unknown_outcome_is_read_again_by_the_next_planning_and_nothing_is_written_twice() -> (
    None
):
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tasks = run_tasks(coord, BATCH)
    tid = f"{PREFIX}-1-0"
    _answer_lost_then_moved_on(coord, tid)
    # Unreadable for the commit, Spark's abort after it and the first restart's planning.
    coord.script("outcome", *[TOPIC_AUTHORIZATION_FAILED] * 3)
    with pytest.raises(SinkCommitOutcomeUnknownError):
        c.commit(BATCH, tasks)
    c.abort(BATCH, tasks)  # Spark aborts the failed batch: the intent stays unfinished
    last = store.last("q1")
    assert last is not None and last.state == INTENT

    # The query's restart: its planning reads the marker again before any task runs, and
    # refuses to go on while it cannot.
    with pytest.raises(SinkCommitOutcomeUnknownError):
        committer(coord, store).recover()
    last = store.last("q1")
    assert last is not None and last.state == INTENT

    # READ granted: the next planning reads COMMIT and finishes the batch.
    restarted = committer(coord, store)
    done = restarted.recover()
    assert done is not None and done.state == DONE
    rerun, skipped = rerun_tasks(coord, BATCH, done)
    assert restarted.commit(BATCH, rerun, skipped) == ALREADY_DONE
    assert visible_counts(coord) == expected_rows([BATCH]), sorted(visible_counts(coord).items())
    assert coord.open_transactions() == []


def test_the_next_batch_is_not_committed_while_an_earlier_outcome_is_unknown() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tid = f"{PREFIX}-1-0"
    _answer_lost_then_moved_on(coord, tid)
    coord.script("outcome", *[TOPIC_AUTHORIZATION_FAILED] * 2)
    with pytest.raises(SinkCommitOutcomeUnknownError):
        c.commit(BATCH, run_tasks(coord, BATCH))
    # A driver that goes on to the next batch (its planning did not finish the intent) rolls
    # the earlier batch forward first, and stops while its outcome is unknown.
    with pytest.raises(SinkCommitOutcomeUnknownError):
        c.commit(BATCH + 1, run_tasks(coord, BATCH + 1, slot=1))
    assert visible_counts(coord) == expected_rows([BATCH])
    assert coord.open_transactions() == []


def test_an_unknown_outcome_waits_for_the_lost_ones_of_the_batch_too() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tasks = run_tasks(coord, BATCH)
    # Partition 1's commit applied unheard, then its id moved on (its marker unreadable once);
    # partition 2 fenced before its commit (an ABORT marker).
    coord.script(
        "end_txn",
        NONE,
        LOST_ANSWER,
        lambda: coord.init_producer_id(f"{PREFIX}-2-0"),
        lambda: coord.init_producer_id(f"{PREFIX}-1-0"),
    )
    # The refused commits are read in the order they were refused: partition 2's, then 1's.
    coord.script("outcome", NONE, TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(SinkCommitOutcomeUnknownError, match=r"Spark partitions \[1\]"):
        c.commit(BATCH, tasks)
    last = store.last("q1")
    assert last is not None and last.state == INTENT  # not partial while one is unknown

    partial = committer(coord, store).recover()
    assert partial is not None and partial.state == PARTIAL
    assert sorted(partial.committed) == [0, 1] and partial.lost == (2,)
    restarted = committer(coord, store)
    rerun, skipped = rerun_tasks(coord, BATCH, partial)
    assert [t.partition_id for t in rerun] == [2]
    assert restarted.commit(BATCH, rerun, skipped) == COMMITTED
    assert visible_counts(coord) == expected_rows([BATCH])


def test_a_refused_commit_of_an_intent_without_first_offsets_is_unknown_not_lost() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    tasks = run_tasks(coord, BATCH)
    # An intent recorded before intents kept where each transaction's records start: a driver
    # that died after it; then a stale attempt moved partition 1's id on (its transaction
    # aborted, but nothing here can read that).
    store.write(BatchRecord("q1", BATCH, INTENT, tuple(t.transaction for t in tasks)))
    coord.init_producer_id(f"{PREFIX}-1-0")
    with pytest.raises(SinkCommitOutcomeUnknownError, match="first offsets") as info:
        committer(coord, store).recover()
    assert "fresh intent store" in str(info.value)
    last = store.last("q1")
    assert last is not None and last.state == INTENT
    assert visible_counts(coord) == expected_rows([BATCH], (0, 2))


def test_only_refused_commits_are_read_from_their_partitions() -> None:
    coord = FakeCoordinator()
    c = committer(coord, FaultyStore())
    assert c.commit(BATCH, run_tasks(coord, BATCH)) == COMMITTED
    assert not [call for call in coord.calls if call[0] == "outcome"]


def test_a_recorded_commit_finished_after_its_id_moved_on_reads_the_marker_too() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    tasks = run_tasks(coord, BATCH)
    tid = f"{PREFIX}-1-0"
    # Partition 1's commit is applied, its answer lost, and its retry refused for a cause that
    # does not clear: the intent stays unfinished. Then a stale attempt moves the id on, and the
    # next planning (a restarted driver) finishes the intent.
    coord.script("end_txn", NONE, LOST_ANSWER, NONE, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    with pytest.raises(SinkCommitIncompleteError):
        c.commit(BATCH, tasks)
    coord.init_producer_id(tid)
    intent = store.last("q1")
    assert intent is not None and record_from_json(record_to_json(intent)) == intent

    done = committer(coord, store).recover()

    assert done is not None and done.state == DONE
    assert visible_counts(coord) == expected_rows([BATCH])
