"""The committer's fault matrix: every step of a commit crossed with every answer Kafka (or the
intent store) can give there, followed by what Spark does next, on the fake TV2 coordinator.

Each case commits batch 1 of three tasks (and a failed attempt's transaction left open), injects
one fault, and then plays Spark: a commit that raised is aborted (``abort``) and the batch is run
again (planning's ``recover``, new tasks given the same rows, of which those of partitions Kafka
already committed write nothing, ``commit``); then batch 2 is
planned, written and committed (its sweep ends leftovers). Invariants at the end: every row of
both batches visible to read_committed readers exactly once, the failed attempt's never, no
transaction left open, and a failed commit's error names the true cause.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from kafka_sink.spark.driver.eos.committer import COMMITTED
from tests.fakes.coordinator import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    LOST_ANSWER,
    NONE,
    NOT_COORDINATOR,
    TIMEOUT,
    Answer,
    FakeCoordinator,
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
STRAY = f"{PREFIX}-0-1"  # attempt 1 of partition 0 failed after it wrote


# -- the faults: what the coordinator answers, and the state that makes it answer so -------------


def _fence(coord: FakeCoordinator, tid: str) -> None:
    coord.init_producer_id(tid)  # another attempt of the task: PRODUCER_FENCED from then on


def _time_out(coord: FakeCoordinator, tid: str) -> None:
    meta = coord.txns[tid]
    meta.start_ms = coord.clock.wall_ms() - TIMEOUT_MS - 1
    coord.expire()  # the reaper aborted it: INVALID_TXN_STATE on commit


def _new_producer_id(coord: FakeCoordinator, tid: str) -> None:
    _expire_id(coord, tid)
    coord.init_producer_id(tid)  # the id expired and was taken again: INVALID_PRODUCER_ID_MAPPING


def _expire_id(coord: FakeCoordinator, tid: str) -> None:
    # Kafka expires only an id with nothing open: the reaper aborted its transaction first (an
    # ABORT marker in its partitions), then transactional.id.expiration.ms passed.
    coord.time_out(tid)
    del coord.txns[tid]  # TRANSACTIONAL_ID_NOT_FOUND


@dataclass(frozen=True)
class Fault:
    name: str
    answer: Answer | None = None  # scripted as is
    state: Callable[[FakeCoordinator, str], None] | None = None  # applied just before the call
    cause: str = ""  # what the error of a batch failed at the verification must say
    end_cause: str = ""  # ... at an EndTxn


KAFKA_FAULTS = [
    Fault("NONE", NONE),
    Fault("COORDINATOR_LOAD_IN_PROGRESS", COORDINATOR_LOAD_IN_PROGRESS),
    Fault("COORDINATOR_NOT_AVAILABLE", COORDINATOR_NOT_AVAILABLE),
    Fault("NOT_COORDINATOR", NOT_COORDINATOR),
    Fault("CONCURRENT_TRANSACTIONS", CONCURRENT_TRANSACTIONS),
    Fault("lost answer", LOST_ANSWER),
    Fault("timeout", TIMEOUT),
    Fault("PRODUCER_FENCED", state=_fence, cause="fenced by another", end_cause="PRODUCER_FENCED"),
    Fault(
        "INVALID_TXN_STATE",
        state=_time_out,
        cause="stayed open longer than transaction.timeout.ms",
        end_cause="INVALID_TXN_STATE",
    ),
    Fault(
        "INVALID_PRODUCER_ID_MAPPING",
        state=_new_producer_id,
        cause="fenced by another",
        end_cause="INVALID_PRODUCER_ID_MAPPING",
    ),
    Fault(
        "TRANSACTIONAL_ID_NOT_FOUND",
        state=_expire_id,
        cause="unknown to the coordinator (TRANSACTIONAL_ID_NOT_FOUND)",
        end_cause="INVALID_PRODUCER_ID_MAPPING",  # EndTxn's answer for an id it does not know
    ),
]
STORE_FAULTS = [
    Fault("store fails", cause="refused the write", end_cause="refused the write"),
    Fault("store applies, answer lost", cause="answer was lost", end_cause="answer was lost"),
]
KAFKA_STEPS = ["describe", "end_txn first", "end_txn middle", "end_txn last", "sweep"]
STORE_STEPS = ["intent", "done"]


def _cases() -> list[object]:
    cases: list[object] = []
    for step in KAFKA_STEPS:
        for fault in KAFKA_FAULTS:
            if step == "sweep" and fault.state is not None:
                continue  # the sweep lists; a lost transaction is no answer of ListTransactions
            cases.append(pytest.param(step, fault, id=f"{step}-{fault.name}"))
    cases.extend(
        pytest.param(step, fault, id=f"{step}-{fault.name}")
        for step in STORE_STEPS
        for fault in STORE_FAULTS
    )
    return cases


def _inject(coord: FakeCoordinator, store: FaultyStore, step: str, fault: Fault) -> None:
    if step in STORE_STEPS:
        when = "before" if fault.name == "store fails" else "after"
        store.fail_writes.extend([when] if step == "intent" else [None, when])
        return
    index = {"end_txn first": 0, "end_txn middle": 1, "end_txn last": 2}.get(step, 0)
    target = f"{PREFIX}-{index}-0"
    operation = {"describe": "describe", "sweep": "list"}.get(step, "end_txn")
    answer: Answer
    if fault.state is not None:
        state = fault.state
        answer = lambda: state(coord, target)  # noqa: E731
    else:
        assert fault.answer is not None
        answer = fault.answer
    # The describe and EndTxn calls go through the batch's ids in order; the sweep lists once.
    coord.script(operation, *([NONE] * (index if operation != "list" else 0)), answer)


@pytest.mark.parametrize(("step", "fault"), _cases())
def test_a_fault_at_any_step_ends_with_every_row_once_and_nothing_open(
    step: str, fault: Fault
) -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    c = committer(coord, store)
    coord.begin(STRAY, {("t", 0): ["stray"]}, TIMEOUT_MS)
    tasks = run_tasks(coord, BATCH)
    _inject(coord, store, step, fault)

    failed: Exception | None = None
    try:
        assert c.commit(BATCH, tasks) == COMMITTED
    except Exception as exc:  # Spark aborts the batch, then runs it again
        failed = exc
        c.abort(BATCH, tasks)
        rerun, skipped = rerun_tasks(coord, BATCH, c.recover())
        assert c.commit(BATCH, rerun, skipped) == COMMITTED
    c.recover()
    assert c.commit(BATCH + 1, run_tasks(coord, BATCH + 1)) == COMMITTED

    if failed is not None:
        cause = fault.end_cause if step.startswith("end_txn") else fault.cause
        assert cause, f"a healthy batch failed: {failed!r}"
        assert cause in f"{failed} {failed.__cause__}", failed
    assert visible_counts(coord) == expected_rows([BATCH, BATCH + 1])
    assert coord.open_transactions() == []


def test_a_partly_committed_batch_says_which_partitions_are_visible() -> None:
    coord = FakeCoordinator()
    store = FaultyStore()
    tasks = run_tasks(coord, BATCH)
    coord.script("end_txn", NONE, lambda: _time_out(coord, f"{PREFIX}-1-0"))
    with pytest.raises(Exception) as info:
        committer(coord, store).commit(BATCH, tasks)
    text = str(info.value)
    assert "Spark partitions [1]" in text and "partitions t-1" in text
    assert "2 other transaction(s) of the batch were committed and are visible" in text
    assert coord.open_transactions() == []
