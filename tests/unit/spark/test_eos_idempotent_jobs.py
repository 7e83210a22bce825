"""A batch job with ``idempotencyKey`` planned against the fake TV2 coordinator: a key already
done writes nothing, a recorded commit is finished, a new key writes everything, and the prefix's
lingering transactions are aborted before any task runs."""

from __future__ import annotations

import logging

import pytest

from kafka_sink.spark.driver.eos.committer import COMMITTED, EosCommitter
from kafka_sink.spark.driver.eos.idempotency import (
    CompletedJob,
    job_identity,
    plan_job,
    record_completion,
)
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, PARTIAL, BatchRecord
from kafka_sink.spark.driver.eos.plan_store import with_last_record
from kafka_sink.spark.eos_plan import EosPlan
from tests.fakes.coordinator import FakeCoordinator, coordinator_ops
from tests.unit.spark.eos_support import (
    PREFIX,
    TIMEOUT_MS,
    FaultyStore,
    expected_rows,
    run_tasks,
    visible_counts,
)

IDENTITY = job_identity("nightly-2026-11-25", topic="t", prefix=PREFIX)


def _committer(coord: FakeCoordinator, store: FaultyStore) -> EosCommitter:
    return EosCommitter(
        store,
        coordinator_ops(coord),
        query_key=IDENTITY.query_key,
        prefix=IDENTITY.prefix,
        transaction_timeout_ms=TIMEOUT_MS,
        clock=coord.clock,
        sleep_ms=coord.advance,
    )


def _run_job(coord: FakeCoordinator, store: FaultyStore, write_id: str) -> CompletedJob | None:
    """One run of the job: planning, then (unless already done) its tasks and its commit."""
    c = _committer(coord, store)
    completed = plan_job(c, IDENTITY, write_id=write_id)
    if completed is None:
        assert c.commit(0, run_tasks(coord, 0)) == COMMITTED
        record_completion(
            c.store,
            IDENTITY.query_key,
            IDENTITY.idempotency_key,
            write_id=write_id,
            wall_ms=coord.clock.wall_ms(),
        )
    return completed


def _died_after_intent(coord: FakeCoordinator, store: FaultyStore, *, committed: int) -> None:
    """A first run recorded its intent and ended ``committed`` transactions, then died."""
    tasks = run_tasks(coord, 0)
    offsets = {t.transaction.transactional_id: t.first_offsets for t in tasks}
    transactions = tuple(t.transaction for t in tasks)
    store.write(BatchRecord(IDENTITY.query_key, 0, INTENT, transactions, first_offsets=offsets))
    for task in tasks[:committed]:
        t = task.transaction
        coord.end_txn(t.transactional_id, t.producer_id, t.producer_epoch, True)


def test_a_new_key_writes_everything_and_its_record_is_kept(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    assert _run_job(coord, store, "w1") is None
    assert visible_counts(coord) == expected_rows([0])
    record = store.last(IDENTITY.query_key)
    assert record is not None and record.state == DONE
    assert record.extra["idempotency_key"] == "nightly-2026-11-25"
    assert record.extra["write_id"] == "w1"


def test_a_key_already_done_writes_nothing_and_says_so(
    coord: FakeCoordinator, store: FaultyStore, caplog: pytest.LogCaptureFixture
) -> None:
    _run_job(coord, store, "w1")
    calls = len(coord.calls)
    with caplog.at_level(logging.INFO, logger="kafka_sink.spark"):
        completed = _run_job(coord, store, "w2")
    assert completed is not None
    assert (completed.idempotency_key, completed.write_id) == ("nightly-2026-11-25", "w1")
    assert completed.completed_at_ms == coord.clock.wall_ms()
    assert visible_counts(coord) == expected_rows([0])  # once, not twice
    # Nothing was ended or written on the re-run: only the sweep's listing.
    assert {op for op, _ in coord.calls[calls:]} <= {"list"}
    assert coord.open_transactions() == []


def test_a_recorded_but_unfinished_commit_is_finished_and_nothing_new_is_written(
    coord: FakeCoordinator, store: FaultyStore, caplog: pytest.LogCaptureFixture
) -> None:
    _died_after_intent(coord, store, committed=0)
    assert visible_counts(coord) == {}
    with caplog.at_level(logging.INFO, logger="kafka_sink.spark"):
        completed = _run_job(coord, store, "w2")
    assert completed is not None and completed.write_id == "w2"
    assert visible_counts(coord) == expected_rows([0])
    assert coord.open_transactions() == []
    record = store.last(IDENTITY.query_key)
    assert record is not None and record.state == DONE and record.extra["write_id"] == "w2"


def test_a_recorded_commit_cut_between_two_end_txns_is_finished_once(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    _died_after_intent(coord, store, committed=1)
    assert _run_job(coord, store, "w2") is not None
    assert visible_counts(coord) == expected_rows([0])
    assert coord.open_transactions() == []


def test_lingering_transactions_of_the_prefix_are_aborted_before_any_task_runs(
    coord: FakeCoordinator, store: FaultyStore, caplog: pytest.LogCaptureFixture
) -> None:
    # The first run died before its intent: its tasks' transactions stay open.
    run_tasks(coord, 0)
    assert len(coord.open_transactions()) == 3
    with caplog.at_level(logging.INFO, logger="kafka_sink.spark"):
        completed = plan_job(_committer(coord, store), IDENTITY, write_id="w2")
    assert completed is None
    assert coord.open_transactions() == []
    assert visible_counts(coord) == {}
    assert "aborted 3 open transaction(s)" in caplog.text
    # The re-run then writes everything, once.
    assert _committer(coord, store).commit(0, run_tasks(coord, 0)) == COMMITTED
    assert visible_counts(coord) == expected_rows([0])


def test_a_recorded_commit_kafka_lost_part_of_is_rerun_as_a_partial_batch(
    coord: FakeCoordinator, store: FaultyStore
) -> None:
    _died_after_intent(coord, store, committed=1)
    coord.advance(TIMEOUT_MS + 10_000)  # the driver was away: the coordinator aborted the rest
    # The run writes again, but only what Kafka lost: the record names the committed partitions.
    assert plan_job(_committer(coord, store), IDENTITY, write_id="w2") is None
    record = store.last(IDENTITY.query_key)
    assert record is not None and record.state == PARTIAL
    assert set(record.committed) == {0} and record.lost == (1, 2)
    plan = with_last_record(EosPlan(IDENTITY.prefix, IDENTITY.query_key, None), record)
    assert [plan.committed_partition(0, p) for p in range(3)] == [True, False, False]
    # Nothing more became visible and nothing is written again.
    assert visible_counts(coord) == expected_rows([0], partitions=[0])
