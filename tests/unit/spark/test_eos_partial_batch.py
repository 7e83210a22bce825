"""A batch Kafka committed only in part, on the fake TV2 coordinator and the manual clock.

Some transactions of a batch committed and one was lost (the driver was down longer than
transaction.timeout.ms between two EndTxns, or Kafka aborted one between the check and its
EndTxn). The committer records the batch partial (the Spark partitions committed, with their
rows' fingerprints, and the ones lost); the re-run's tasks of the committed partitions write
nothing and hand back their rows' fingerprint. Equal fingerprints: the lost partitions are
written and the batch ends exactly once. Otherwise the query stops, naming the batch.
"""

from __future__ import annotations

import pytest

from kafka_sink.sink_errors import SinkPartlyCommittedError, SinkTransactionLostError
from kafka_sink.spark.driver.eos.committer import COMMITTED, TaskTransaction
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, PARTIAL, BatchRecord
from kafka_sink.spark.fingerprint import Fingerprint
from tests.fakes.coordinator import NONE, FakeCoordinator, coordinator_ops
from tests.unit.spark.eos_support import (
    PREFIX,
    TIMEOUT_MS,
    FaultyStore,
    committer,
    expected_rows,
    fingerprint,
    rerun_tasks,
    rows,
    run_tasks,
    visible_counts,
)

BATCH = 4


def _time_out(coord: FakeCoordinator, partition: int) -> None:
    meta = coord.txns[f"{PREFIX}-{partition}-0"]
    meta.start_ms = coord.clock.now_ms() - TIMEOUT_MS - 1
    coord.expire()


def _partly_committed(coord: FakeCoordinator, store: FaultyStore) -> BatchRecord:
    """Batch 4 of partitions 0..2 with partition 1's transaction aborted by Kafka between the
    check and its EndTxn: 0 and 2 committed."""
    coord.script("end_txn", NONE, lambda: _time_out(coord, 1))
    with pytest.raises(SinkTransactionLostError) as info:
        committer(coord, store).commit(BATCH, run_tasks(coord, BATCH))
    text = str(info.value)
    assert f"batch {BATCH}" in text and "Spark partitions [0, 2]" in text
    assert "lost: Spark partitions [1]" in text
    record = store.last("q1")
    assert record is not None
    return record


def test_a_partly_committed_batch_records_what_is_visible_with_its_fingerprints() -> None:
    coord, store = FakeCoordinator(), FaultyStore()
    record = _partly_committed(coord, store)
    assert record.state == PARTIAL and record.batch_id == BATCH and record.lost == (1,)
    assert record.committed == {p: fingerprint(rows(BATCH, p)) for p in (0, 2)}
    intent = store.history[0]
    assert intent.state == INTENT
    assert intent.fingerprints == {
        f"{PREFIX}-{p}-0": fingerprint(rows(BATCH, p)) for p in (0, 1, 2)
    }
    assert coord.open_transactions() == []


def test_a_rerun_given_the_same_rows_writes_only_the_lost_partitions() -> None:
    coord, store = FakeCoordinator(), FaultyStore()
    _partly_committed(coord, store)
    c = committer(coord, store)
    rerun, skipped = rerun_tasks(coord, BATCH, c.recover())
    assert sorted(skipped) == [0, 2] and [t.partition_id for t in rerun] == [1]
    assert c.commit(BATCH, rerun, skipped) == COMMITTED
    assert visible_counts(coord) == expected_rows([BATCH])
    assert store.last("q1") is not None and store.last("q1").state == DONE
    assert coord.open_transactions() == []


def test_a_driver_down_past_the_timeout_between_two_end_txns_completes_once() -> None:
    coord, store = FakeCoordinator(), FaultyStore()
    tasks = run_tasks(coord, BATCH)
    intent = BatchRecord(
        "q1",
        BATCH,
        INTENT,
        tuple(t.transaction for t in tasks),
        fingerprints={
            t.transaction.transactional_id: t.fingerprint for t in tasks if t.fingerprint
        },
        first_offsets={t.transaction.transactional_id: t.first_offsets for t in tasks},
    )
    store.write(intent)
    first = tasks[0].transaction
    coord.end_txn(first.transactional_id, first.producer_id, first.producer_epoch, True)
    coord.advance(TIMEOUT_MS + 1)  # the driver is gone; Kafka aborts partitions 1 and 2

    c = committer(coord, store)  # the restarted driver plans the batch again
    last = c.recover()
    assert last is not None and last.state == PARTIAL
    assert last.committed == {0: fingerprint(rows(BATCH, 0))} and last.lost == (1, 2)
    rerun, skipped = rerun_tasks(coord, BATCH, last)
    assert c.commit(BATCH, rerun, skipped) == COMMITTED
    assert visible_counts(coord) == expected_rows([BATCH])
    assert coord.open_transactions() == []


def test_a_rerun_that_loses_again_keeps_what_every_run_committed() -> None:
    coord, store = FakeCoordinator(), FaultyStore()
    _partly_committed(coord, store)
    c = committer(coord, store)
    rerun, skipped = rerun_tasks(coord, BATCH, c.recover())
    coord.script("end_txn", lambda: _time_out(coord, 1))
    with pytest.raises(SinkTransactionLostError):
        c.commit(BATCH, rerun, skipped)
    again = store.last("q1")
    assert again is not None and again.state == PARTIAL and again.lost == (1,)
    assert sorted(again.committed) == [0, 2]
    rerun, skipped = rerun_tasks(coord, BATCH, c.recover())
    assert c.commit(BATCH, rerun, skipped) == COMMITTED
    assert visible_counts(coord) == expected_rows([BATCH])


def _refused(
    coord: FakeCoordinator,
    store: FaultyStore,
    tasks: list[TaskTransaction],
    skipped: dict[int, Fingerprint],
) -> str:
    c = committer(coord, store)
    with pytest.raises(SinkPartlyCommittedError) as info:
        c.commit(BATCH, tasks, skipped)
    # Nothing of the refused run is visible or open, and the next start is refused again.
    assert visible_counts(coord) == expected_rows([BATCH], partitions=(0, 2))
    assert coord.open_transactions() == []
    record = store.last("q1")
    assert record is not None and record.state == PARTIAL
    text = str(info.value)
    assert f"batch {BATCH}" in text and "Spark partitions [0, 2] are visible" in text
    assert "Spark partitions [1] were lost" in text
    assert "deterministic" in text and "intentTopic" in text
    return text


def test_a_rerun_given_other_rows_for_a_committed_partition_stops_the_query() -> None:
    coord, store = FakeCoordinator(), FaultyStore()
    _partly_committed(coord, store)
    rerun, skipped = rerun_tasks(coord, BATCH, committer(coord, store).recover())
    skipped[2] = fingerprint(rows(BATCH, 1))  # e.g. a round-robin repartition moved rows
    text = _refused(coord, store, rerun, skipped)
    assert "Spark partition 2: 3 row(s)" in text


def test_a_rerun_that_writes_a_committed_partition_again_stops_the_query() -> None:
    coord, store = FakeCoordinator(), FaultyStore()
    _partly_committed(coord, store)
    text = _refused(coord, store, run_tasks(coord, BATCH), {})
    assert "Spark partition 0 wrote its rows again" in text


def test_a_committed_partition_without_a_recorded_fingerprint_is_not_taken_as_the_same() -> None:
    coord, store = FakeCoordinator(), FaultyStore()
    _partly_committed(coord, store)
    record = store.last("q1")
    assert record is not None
    store.write(BatchRecord("q1", BATCH, PARTIAL, (), committed={0: None, 2: None}, lost=(1,)))
    rerun, skipped = rerun_tasks(coord, BATCH, store.last("q1"))
    text = _refused(coord, store, rerun, skipped)
    assert "fingerprint is unknown" in text


# -- a batch an earlier release recorded lost ---------------------------------------------------


def _lost_by_an_earlier_release(coord: FakeCoordinator, store: FaultyStore) -> None:
    """Batch 4 as a release before partial records left it: partitions 0 and 2 committed,
    partition 1 aborted by Kafka, and the intent marked lost (state INTENT, no transactions,
    the lost ids in ``extra``), which that release's re-run wrote whole."""
    tasks = run_tasks(coord, BATCH)
    ops = coordinator_ops(coord)
    _time_out(coord, 1)
    for task in tasks:
        if task.partition_id != 1:
            ops.complete(task.transaction, True)
    store.write(BatchRecord("q1", BATCH, INTENT, (), {"lost": f"{PREFIX}-1-0"}))
    assert visible_counts(coord) == expected_rows([BATCH], (0, 2))


def test_a_batch_an_earlier_release_recorded_lost_is_not_written_whole_again() -> None:
    coord, store = FakeCoordinator(), FaultyStore()
    _lost_by_an_earlier_release(coord, store)
    c = committer(coord, store)
    rerun, skipped = rerun_tasks(coord, BATCH, c.recover())

    with pytest.raises(SinkPartlyCommittedError) as info:
        c.commit(BATCH, rerun, skipped)

    text = str(info.value)
    assert f"batch {BATCH}" in text and "earlier release" in text
    assert "Spark partitions [1] were lost" in text
    # The partitions that release committed are read once; nothing of the re-run is visible.
    assert visible_counts(coord) == expected_rows([BATCH], (0, 2))
    assert coord.open_transactions() == []


def test_a_later_batch_after_one_an_earlier_release_recorded_lost_commits() -> None:
    coord, store = FakeCoordinator(), FaultyStore()
    _lost_by_an_earlier_release(coord, store)
    # The record is of an older batch than this one: nothing of it is open, nothing to roll.
    assert committer(coord, store).commit(BATCH + 1, run_tasks(coord, BATCH + 1)) == COMMITTED
    assert visible_counts(coord) == expected_rows([BATCH], (0, 2)) + expected_rows([BATCH + 1])
