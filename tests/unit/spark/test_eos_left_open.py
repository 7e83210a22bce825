"""What exactly-once leaves open, and for how long, on the coordinator model
(``tests/fakes/coordinator.py``): the bounds docs/exactly-once.md states under "What is not
covered". A transaction left open holds read_committed readers of its partitions back until it
ends; these cases are ended by the next commit of the query, or only by the coordinator after
``transaction.timeout.ms``.
"""

from __future__ import annotations

from kafka_sink.spark.driver.eos.committer import COMMITTED, EosCommitter, TaskTransaction
from kafka_sink.spark.driver.eos.intents import MemoryIntentStore
from tests.fakes.coordinator import FakeCoordinator, coordinator_ops
from tests.unit.spark.eos_support import (
    PREFIX,
    TIMEOUT_MS,
    committer,
    expected_rows,
    run_tasks,
    visible_counts,
)


def test_an_attempt_that_opens_after_the_commits_sweep_is_ended_by_the_next_commit(
    coord: FakeCoordinator,
) -> None:
    driver = committer(coord, MemoryIntentStore())
    assert driver.commit(0, run_tasks(coord, 0)) == COMMITTED
    # A speculative copy of partition 0's task, still running when batch 0 was committed, opens
    # its transaction (slot 1) after the commit's sweep: nothing of batch 0 names it.
    stray = run_tasks(coord, 0, partitions=(0,), slot=1)
    assert coord.open_transactions() == [f"{PREFIX}-0-1"]
    # It holds readers of partition 0 back until the query's next commit sweeps the prefix.
    assert driver.commit(1, run_tasks(coord, 1)) == COMMITTED
    assert coord.open_transactions() == []
    assert visible_counts(coord) == expected_rows([0, 1])  # the stray's rows never visible
    assert stray[0].transaction.transactional_id not in coord.open_transactions()


def test_a_keyless_batch_job_killed_before_its_intent_is_ended_only_by_the_timeout(
    coord: FakeCoordinator,
) -> None:
    # A batch job's prefix is new for each job: its tasks prepared, its driver killed.
    run_tasks(coord, 0)
    killed = sorted(coord.open_transactions())
    assert len(killed) == 3
    # The next job (its own prefix) commits and sweeps its own prefix only.
    other = EosCommitter(
        MemoryIntentStore(),
        coordinator_ops(coord),
        query_key="job-2",
        prefix="pykafka-job-2",
        transaction_timeout_ms=TIMEOUT_MS,
        clock=coord.clock,
        sleep_ms=coord.advance,
    )
    task = coord.begin("pykafka-job-2-0-0", {("t", 0): ["job-2"]}, TIMEOUT_MS)
    assert other.commit(0, [TaskTransaction(0, task)]) == COMMITTED
    assert coord.open_transactions() == killed
    # Until transaction.timeout.ms has passed since their start: the coordinator's reaper.
    coord.advance(TIMEOUT_MS - 1_000)
    assert coord.open_transactions() == killed
    coord.advance(2_000)
    assert coord.open_transactions() == []
    assert visible_counts(coord) == {"job-2": 1}
