"""The driver's commit against the fake TV2 coordinator: verify before the first commit, and
finish a recorded commit (what readers see is what Spark is told)."""

from __future__ import annotations

import pytest

from kafka_sink.sink_errors import SinkCommitIncompleteError, SinkTransactionLostError
from kafka_sink.spark.driver.eos.committer import COMMITTED
from kafka_sink.spark.driver.eos.intents import DONE, INTENT
from tests.fakes.coordinator import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    LOST_ANSWER,
    NOT_COORDINATOR,
    TIMEOUT,
    FakeCoordinator,
)
from tests.unit.spark.eos_support import (
    PREFIX,
    TIMEOUT_MS,
    FaultyStore,
    StoreUnavailableError,
    committer,
    expected_rows,
    run_tasks,
    visible_counts,
)


def _rerun_commits_once(coord: FakeCoordinator, store: FaultyStore, batch_id: int) -> None:
    c = committer(coord, store)
    c.recover()
    assert c.commit(batch_id, run_tasks(coord, batch_id)) == COMMITTED
    assert visible_counts(coord) == expected_rows([batch_id])
    assert coord.open_transactions() == []


# -- verify before the first commit -------------------------------------------------------------


def test_a_transaction_one_listing_misses_is_committed_not_aborted(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    # The coordinator of partition 1's id is loading: ListTransactions leaves it out.
    tasks = run_tasks(coord, 4)
    coord.listing_misses.add(f"{PREFIX}-1-0")
    assert committer(coord, store).commit(4, tasks) == COMMITTED
    assert visible_counts(coord) == expected_rows([4])
    assert coord.open_transactions() == []
    assert ("describe", f"{PREFIX}-1-0") in coord.calls


def test_a_transaction_fenced_by_another_attempt_fails_the_batch_naming_it(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 2)
    coord.init_producer_id(f"{PREFIX}-1-0")  # a zombie attempt of partition 1 re-initialises
    with pytest.raises(SinkTransactionLostError) as info:
        committer(coord, store).commit(2, tasks)
    text = str(info.value)
    assert "batch 2 failed before anything became visible" in text
    assert "fenced by another producer of the same transactional id" in text
    assert "Spark partitions [1]" in text and "t-1" in text
    assert "timeout" not in text.split("Fix:")[1]
    assert visible_counts(coord) == {} and coord.open_transactions() == []
    assert store.history == []  # no intent
    _rerun_commits_once(coord, store, 2)


def test_a_transaction_the_coordinator_timed_out_fails_the_batch_naming_the_timeout(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    [slow] = run_tasks(coord, 3, partitions=[0])
    coord.advance(TIMEOUT_MS - 10)
    tasks = [slow, *run_tasks(coord, 3, partitions=[1, 2])]
    coord.advance(20)  # the reaper aborts partition 0's transaction
    with pytest.raises(SinkTransactionLostError) as info:
        committer(coord, store).commit(3, tasks)
    text = str(info.value)
    assert "aborted by the coordinator, because it stayed open longer than " in text
    assert "transaction.timeout.ms (60000 ms)" in text and "Spark partitions [0]" in text
    assert "raise kafka.transaction.timeout.ms" in text
    assert visible_counts(coord) == {} and coord.open_transactions() == []
    _rerun_commits_once(coord, store, 3)


def test_a_transaction_unknown_to_the_coordinator_fails_the_batch_saying_so(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 1)
    del coord.txns[f"{PREFIX}-2-0"]  # expired (transactional.id.expiration.ms)
    with pytest.raises(SinkTransactionLostError, match="TRANSACTIONAL_ID_NOT_FOUND"):
        committer(coord, store).commit(1, tasks)
    assert visible_counts(coord) == {} and coord.open_transactions() == []
    _rerun_commits_once(coord, store, 1)


def test_a_description_answered_with_retriable_errors_is_asked_again(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 0)
    coord.script("describe", COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, TIMEOUT)
    assert committer(coord, store).commit(0, tasks) == COMMITTED
    assert visible_counts(coord) == expected_rows([0])


def test_a_coordinator_that_never_describes_fails_the_batch_with_nothing_open(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 0)
    coord.script("describe", *[COORDINATOR_NOT_AVAILABLE] * 10_000)
    start = coord.clock.now_ms()
    with pytest.raises(Exception, match="COORDINATOR_NOT_AVAILABLE"):
        committer(coord, store).commit(0, tasks)
    assert coord.clock.now_ms() - start <= TIMEOUT_MS + 1_000  # bounded
    assert store.history == [] and visible_counts(coord) == {}
    assert coord.open_transactions() == []


# -- a recorded commit is finished ---------------------------------------------------------------


def test_end_txn_answers_that_may_clear_are_retried_after_the_intent(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 5)
    coord.script(
        "end_txn",
        CONCURRENT_TRANSACTIONS,
        COORDINATOR_NOT_AVAILABLE,
        LOST_ANSWER,  # partition 2's commit applied, its answer lost
        TIMEOUT,
        NOT_COORDINATOR,
    )
    assert committer(coord, store).commit(5, tasks) == COMMITTED
    assert visible_counts(coord) == expected_rows([5])
    assert [r.state for r in store.history] == [INTENT, DONE]
    assert coord.open_transactions() == []


def test_a_coordinator_down_past_the_timeout_ends_the_wait_and_the_rerun_is_exactly_once(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 6)
    coord.script("end_txn", *[TIMEOUT] * 10_000)
    c = committer(coord, store)
    with pytest.raises(SinkCommitIncompleteError) as info:
        c.commit(6, tasks)
    assert "is recorded (its intent is durable)" in str(info.value)
    assert "3 of its 3 transaction(s)" in str(info.value)
    assert coord.clock.now_ms() <= TIMEOUT_MS + 1_000  # waited transaction.timeout.ms, no more
    c.abort(6, tasks)  # what Spark does next: one more round, still unanswered
    assert store.last("q1").state == INTENT  # type: ignore[union-attr]
    coord._scripts.clear()  # the coordinator is back; Kafka aborted the transactions meanwhile
    _rerun_commits_once(coord, store, 6)


def test_an_intent_store_that_fails_the_intent_leaves_nothing_open(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 7)
    stray = coord.begin(f"{PREFIX}-0-1", {("t", 0): ["stray"]})  # a failed attempt
    store.fail_writes.append("before")
    with pytest.raises(StoreUnavailableError):
        committer(coord, store).commit(7, tasks)
    assert visible_counts(coord) == {}
    assert coord.open_transactions() == []  # the batch's and the stray, aborted
    assert ("end_txn", stray.transactional_id) in coord.calls
    _rerun_commits_once(coord, store, 7)


def test_an_intent_store_that_cannot_be_read_leaves_nothing_open(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 8)
    store.fail_reads = 1
    with pytest.raises(StoreUnavailableError):
        committer(coord, store).commit(8, tasks)
    assert visible_counts(coord) == {} and coord.open_transactions() == []
    _rerun_commits_once(coord, store, 8)


def test_a_done_record_that_cannot_be_written_does_not_fail_a_committed_batch(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    tasks = run_tasks(coord, 9)
    store.fail_writes.extend([None, "before"])
    assert committer(coord, store).commit(9, tasks) == COMMITTED
    assert visible_counts(coord) == expected_rows([9])
    assert store.last("q1").state == INTENT  # type: ignore[union-attr]
    # The next planning finishes the intent: its EndTxns are retries, answered NONE.
    record = committer(coord, store).recover()
    assert record is not None and record.state == DONE
    assert visible_counts(coord) == expected_rows([9])


def test_the_write_s_transaction_timeout_bounds_the_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kafka_sink.spark.driver.eos import committer as committer_module
    from kafka_sink.spark.driver.eos.committer import EosCommitter, TransactionOps
    from kafka_sink.spark.eos_plan import EosPlan

    monkeypatch.setattr(
        committer_module,
        "listing_ops",
        lambda config, timeout_s=None: TransactionOps(lambda t, c: None, lambda p: []),
    )
    plan = EosPlan("pykafka-w9", "w9", None)
    built = EosCommitter.for_plan(plan, {"transaction.timeout.ms": "123456"})
    assert built.transaction_timeout_ms == 123456
