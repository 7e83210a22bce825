"""A zombie driver is fenced: an earlier driver of a query that wakes up after a newer one took
over cannot write an intent, sweep the newer driver's transactions or report its commits as lost;
and a second query given the same transactionalIdPrefix is refused at start.

Every case runs on the coordinator model (``tests/fakes/coordinator.py``) with the Kafka intent
store over it (``tests/fakes/topic_log.py``), on the manual clock; each fencing case also runs
without the fence, to show the harm the fence prevents.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from kafka_sink.sink_errors import (
    IntentStoreError,
    SinkCommitOutcomeUnknownError,
    SinkFencedError,
    SinkOptionError,
    SinkTransactionLostError,
)
from kafka_sink.spark.driver.eos import committer as committer_module
from kafka_sink.spark.driver.eos import fence
from kafka_sink.spark.driver.eos.claims import refuse_foreign_claim
from kafka_sink.spark.driver.eos.committer import COMMITTED, EosCommitter, TaskTransaction
from kafka_sink.spark.driver.eos.fence import FencedStore, fence_id, open_fence
from kafka_sink.spark.driver.eos.intents import (
    INTENT,
    BatchRecord,
    FileIntentStore,
)
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from kafka_sink.spark.eos_plan import EosPlan, parse_transactional_id
from tests.fakes.coordinator import ONGOING, FakeCoordinator, coordinator_ops
from tests.fakes.topic_log import CoordinatedTopicLog

PREFIX = "orders"
KEY = "query-1"
TOPIC = "intents"


def _driver(coordinator: FakeCoordinator, name: str, *, fenced: bool) -> EosCommitter:
    """A driver process (its own store cache, named ``name``) of query KEY."""
    fence._HELD.clear()  # a new process: it holds no token yet
    held = None
    if fenced:
        held = open_fence(
            PREFIX, KEY, init=coordinator.init_producer_id, describe=coordinator.describe
        )
    store = KafkaIntentStore(CoordinatedTopicLog(coordinator), TOPIC, cluster=name, fence=held)
    return EosCommitter(
        store,
        coordinator_ops(coordinator),
        query_key=KEY,
        prefix=PREFIX,
        clock=coordinator.clock,
        sleep_ms=coordinator.advance,
        fence=held,
    )


def _tasks(coordinator: FakeCoordinator, batch: int) -> list[TaskTransaction]:
    """Two task attempts of ``batch``, prepared on slot 0 of partitions 0 and 1."""
    return [
        TaskTransaction(p, coordinator.begin(f"{PREFIX}-{p}-0", {("out", p): [f"b{batch}-p{p}"]}))
        for p in range(2)
    ]


def _visible(coordinator: FakeCoordinator) -> list[object]:
    """What a read_committed reader of the sink's topic reads (not the intent topic)."""
    return sorted(
        row
        for (topic, _), rows in coordinator.read_committed().items()
        if topic == "out"
        for row in rows
    )


def _rows(*batches: int) -> list[str]:
    return sorted(f"b{b}-p{p}" for b in batches for p in range(2))


def test_the_fence_id_is_never_a_task_id() -> None:
    assert parse_transactional_id(PREFIX, fence_id(PREFIX)) is None


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_a_resumed_old_driver_neither_commits_nor_sweeps_the_new_drivers_transactions(
    fenced: bool,
) -> None:
    coordinator = FakeCoordinator()
    old = _driver(coordinator, "old", fenced=fenced)
    old_tasks = _tasks(coordinator, 5)  # the old driver stops here (SIGSTOP)
    new = _driver(coordinator, "new", fenced=fenced)
    new.recover()
    new.sweep_leftovers()  # the new driver's start: the old batch's transactions are leftovers
    assert new.commit(5, _tasks(coordinator, 5)) == COMMITTED
    batch6 = _tasks(coordinator, 6)  # prepared, not committed yet, when the old one resumes

    if not fenced:
        # The old driver finds batch 5 done and sweeps the prefix on its way out: the new
        # driver's batch 6 is aborted, and a healthy batch fails.
        old.commit(5, old_tasks)
        with pytest.raises(SinkTransactionLostError, match="no longer open"):
            new.commit(6, batch6)
        assert _visible(coordinator) == _rows(5)
        return
    with pytest.raises(SinkFencedError, match="transactionalIdPrefix 'orders'"):
        old.commit(5, old_tasks)
    assert [coordinator.txns[t.transaction.transactional_id].state for t in batch6] == [
        ONGOING,
        ONGOING,
    ]
    assert new.commit(6, batch6) == COMMITTED
    assert _visible(coordinator) == _rows(5, 6)
    assert coordinator.open_transactions() == []


@pytest.mark.parametrize("fenced", [True, False], ids=["fenced", "unfenced"])
def test_an_old_driver_fenced_after_its_intent_reports_fenced_not_lost(fenced: bool) -> None:
    coordinator = FakeCoordinator()
    old = _driver(coordinator, "old", fenced=fenced)
    old_tasks = _tasks(coordinator, 5)
    drivers: list[EosCommitter] = []

    def take_over() -> None:
        # The old driver stopped between its durable intent and its first EndTxn; a new one
        # starts, finishes the recorded intent and has its next batch's tasks re-initialise
        # the same ids.
        new = _driver(coordinator, "new", fenced=fenced)
        new.recover()
        drivers.append(new)
        batch6.extend(_tasks(coordinator, 6))

    batch6: list[TaskTransaction] = []
    # The first EndTxn is the intent's (through the fence), the next the first task's.
    coordinator.script("end_txn", *([0] if fenced else []), take_over)
    if not fenced:
        # Without the fence the intent is a plain write: the first EndTxn is the first task's.
        with pytest.raises(SinkCommitOutcomeUnknownError, match="cannot be read"):
            old.commit(5, old_tasks)
        # Batch 5 is committed and visible. The old driver's commits were refused and these
        # tasks carry no first offsets, so their markers cannot be read: it reports the outcome
        # unknown and records nothing over the new driver's done record (it used to record the
        # batch lost).
        assert _visible(coordinator) == _rows(5)
        last = drivers[0].store.last(KEY)
        assert last is not None and (last.batch_id, last.state) == (5, "done")
        return
    with pytest.raises(SinkFencedError, match="newer run of the query"):
        old.commit(5, old_tasks)
    new = drivers[0]
    last = new.store.last(KEY)
    assert last is not None and (last.batch_id, last.state, dict(last.extra)) == (5, "done", {})
    assert new.commit(6, batch6) == COMMITTED
    assert _visible(coordinator) == _rows(5, 6)
    assert coordinator.open_transactions() == []


# Transactions V1 and V2: the fence's epoch moves on each write under V2, its sequence under V1.
VERSIONS = pytest.mark.parametrize("version", [1, 2], ids=["tv1", "tv2"])


@VERSIONS
def test_an_old_driver_cannot_write_an_intent_once_fenced(version: int) -> None:
    coordinator = FakeCoordinator(transaction_version=version)
    old = _driver(coordinator, "old", fenced=True)
    old.store.write(BatchRecord(KEY, 1, INTENT, ()))  # under V1 its sequence moved on
    new = _driver(coordinator, "new", fenced=True)
    with pytest.raises(SinkFencedError) as fenced:
        old.store.write(BatchRecord(KEY, 2, INTENT, ()))
    assert "PRODUCER_FENCED" in str(fenced.value) or "ProducerFenced" in repr(
        fenced.value.__cause__
    )
    new.store.write(BatchRecord(KEY, 3, INTENT, ()))
    new.store.write(BatchRecord(KEY, 4, INTENT, ()))
    assert new.fence is not None
    new.fence.check("after its writes")
    assert _intents(coordinator) == [1, 3, 4]  # the fenced write never became visible
    assert coordinator.open_transactions() == []


@VERSIONS
def test_an_old_driver_fenced_between_its_intent_and_the_end_writes_nothing(version: int) -> None:
    coordinator = FakeCoordinator(transaction_version=version)
    old = _driver(coordinator, "old", fenced=True)
    old.store.write(BatchRecord(KEY, 1, INTENT, ()))
    # The old driver's record lands; the new driver's InitProducerId comes before its EndTxn.
    coordinator.script("end_txn", lambda: _driver(coordinator, "new", fenced=True) and None)
    with pytest.raises(SinkFencedError):
        old.store.write(BatchRecord(KEY, 2, INTENT, ()))
    assert _intents(coordinator) == [1]  # the fence aborted the record: never visible
    assert coordinator.open_transactions() == []


@VERSIONS
def test_an_old_driver_whose_intent_a_fence_in_progress_aborted_is_told_it_was_fenced(
    version: int,
) -> None:
    """A newer driver's InitProducerId finds the old driver's intent write open and aborts it
    (CompleteAbort at the next epoch), and its retry comes after the old driver's EndTxn: that
    commit is refused (V2: INVALID_TXN_STATE, as a retry of an aborted transaction; V1:
    PRODUCER_FENCED). The old driver was fenced, not failed: it must say so."""
    coordinator = FakeCoordinator(transaction_version=version)
    old = _driver(coordinator, "old", fenced=True)
    old.store.write(BatchRecord(KEY, 1, INTENT, ()))
    coordinator.script("end_txn", lambda: coordinator.begin_fence(fence_id(PREFIX)))
    with pytest.raises(SinkFencedError, match="took over"):
        old.store.write(BatchRecord(KEY, 2, INTENT, ()))
    new = _driver(coordinator, "new", fenced=True)  # its InitProducerId's retry
    new.store.write(BatchRecord(KEY, 3, INTENT, ()))
    assert new.fence is not None
    new.fence.check("after its write")
    assert _intents(coordinator) == [1, 3]  # the aborted write never became visible
    assert coordinator.open_transactions() == []


def _intents(coordinator: FakeCoordinator) -> list[int]:
    """The batch ids of the intent records a read_committed reader of the intent topic reads."""
    return [
        json.loads(value)["batch_id"]
        for (topic, _), rows in coordinator.read_committed().items()
        if topic == TOPIC
        for key, value in rows  # type: ignore[misc]
        if key == KEY.encode()
    ]


def _any_record() -> Any:
    return BatchRecord(KEY, 1, INTENT, ())


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCoordinator:
    """``for_plan``'s Kafka reached through the model: ops and the intent topic."""
    coordinator = FakeCoordinator()
    log = CoordinatedTopicLog(coordinator)
    monkeypatch.setattr(
        committer_module, "listing_ops", lambda config, timeout_s=None: coordinator_ops(coordinator)
    )

    def open_topic(config: Any, topic: str, timeout_s: Any = None, fence: Any = None) -> Any:
        return KafkaIntentStore(log, topic, cluster="fake", fence=fence)

    monkeypatch.setattr(KafkaIntentStore, "open", open_topic)
    return coordinator


def _plan(query_key: str, *, fenced: bool = True) -> EosPlan:
    return EosPlan(PREFIX, query_key, None, TOPIC, fenced=fenced)


def test_a_second_query_with_the_same_prefix_is_refused_without_fencing_the_first(
    cluster: FakeCoordinator,
) -> None:
    first = EosCommitter.for_plan(_plan("query-a"), {"bootstrap.servers": "h:1"})
    assert first.fence is not None
    fence._HELD.clear()  # the second query runs on another driver
    with pytest.raises(SinkOptionError) as refused:
        EosCommitter.for_plan(_plan("query-b"), {"bootstrap.servers": "h:1"})
    message = str(refused.value)
    assert "'orders'" in message and "'query-a'" in message
    assert "release_prefix" in message and "another transactionalIdPrefix" in message
    first.fence.check("still holding it")  # the refused query took nothing from the first
    # A batch job given that prefix is refused the same way (read-only: no fence).
    with pytest.raises(SinkOptionError, match="'query-a'"):
        refuse_foreign_claim(KafkaIntentStore.open({}, TOPIC), PREFIX, "job-1")
    # The same query on a new driver takes the fence over.
    fence._HELD.clear()
    again = EosCommitter.for_plan(_plan("query-a"), {"bootstrap.servers": "h:1"})
    with pytest.raises(SinkFencedError):
        first.fence.check("after the restart")
    assert again.fence is not None
    again.fence.check("the new driver")


def test_a_released_prefix_can_be_claimed_again(cluster: FakeCoordinator) -> None:
    from kafka_sink.spark.driver.eos.kafka_intents import claim_key

    EosCommitter.for_plan(_plan("query-a"), {"bootstrap.servers": "h:1"})
    fence._HELD.clear()
    KafkaIntentStore.open({}, TOPIC).delete(claim_key(PREFIX))  # what release_prefix does
    assert EosCommitter.for_plan(_plan("query-b"), {"bootstrap.servers": "h:1"}).fence is not None


@VERSIONS
@pytest.mark.parametrize("failed_at", ["write", "end_txn"])
def test_a_failed_intent_write_is_aborted_and_the_fence_kept(version: int, failed_at: str) -> None:
    from tests.fakes.coordinator import TIMEOUT

    coordinator = FakeCoordinator(transaction_version=version)
    driver = _driver(coordinator, "driver", fenced=True)
    driver.store.write(BatchRecord(KEY, 0, INTENT, ()))  # under V1 its sequence moved on
    # The intent's Produce never lands, or it lands and its EndTxn gets no answer: the write
    # fails. Under V1 a next write at the landed batch's sequence would be lost as a duplicate.
    coordinator.script(failed_at, TIMEOUT)
    with pytest.raises(IntentStoreError):
        driver.store.write(BatchRecord(KEY, 1, INTENT, ()))
    assert coordinator.open_transactions() == []  # nothing holds the shared partition back
    assert driver.fence is not None
    driver.fence.check("after a failed write")  # the abort's epoch is the one kept
    driver.store.write(BatchRecord(KEY, 2, INTENT, ()))
    # Read by a store of another process, which knows only the log, not this driver's cache.
    reader = KafkaIntentStore(CoordinatedTopicLog(coordinator), TOPIC, cluster="reader")
    last = reader.last(KEY)
    assert last is not None and last.batch_id == 2
    assert _intents(coordinator) == [0, 2]  # the failed write never became visible


def test_the_checkpoint_store_checks_the_fence_before_each_write(tmp_path: Any) -> None:
    coordinator = FakeCoordinator()
    fence._HELD.clear()
    old = open_fence(PREFIX, KEY, init=coordinator.init_producer_id, describe=coordinator.describe)
    store = FencedStore(FileIntentStore(str(tmp_path)), old)
    store.write(BatchRecord(KEY, 1, INTENT, ()))
    fence._HELD.clear()
    open_fence(PREFIX, KEY, init=coordinator.init_producer_id, describe=coordinator.describe)
    with pytest.raises(SinkFencedError, match="batch 2"):
        store.write(BatchRecord(KEY, 2, INTENT, ()))
    with pytest.raises(SinkFencedError):
        store.delete(KEY)
    last = store.last(KEY)
    assert last is not None and last.batch_id == 1


@VERSIONS
def test_an_intent_write_whose_abort_fails_too_does_not_lose_the_next_write(version: int) -> None:
    from tests.fakes.coordinator import TIMEOUT

    coordinator = FakeCoordinator(transaction_version=version)
    driver = _driver(coordinator, "driver", fenced=True)
    driver.store.write(BatchRecord(KEY, 0, INTENT, ()))
    # The intent lands, its EndTxn gets no answer, and the abort's EndTxn none either: the
    # transaction stays open with the landed batch at the fence's sequence.
    coordinator.script("end_txn", TIMEOUT, TIMEOUT)
    with pytest.raises(IntentStoreError):
        driver.store.write(BatchRecord(KEY, 1, INTENT, ()))
    # The next write must not reuse that sequence (the leader would take it for a retry of the
    # landed batch and append nothing).
    driver.store.write(BatchRecord(KEY, 2, INTENT, ()))
    reader = KafkaIntentStore(CoordinatedTopicLog(coordinator), TOPIC, cluster="reader")
    last = reader.last(KEY)
    assert last is not None and last.batch_id == 2
    assert coordinator.open_transactions() == []


# -- a query started again, a fence found lost, an EndTxn answer lost, a slow intent write -----


def _in_driver(monkeypatch: pytest.MonkeyPatch, local_dir: Any) -> None:
    """Run the next calls as a worker of the driver whose Spark local directory is
    ``local_dir`` (where that driver keeps its fence token)."""
    local_dir.mkdir(exist_ok=True)
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(local_dir))


def _planned(
    cluster: FakeCoordinator, query_key: str = "query-a", *, batch: int | None = None
) -> EosCommitter:
    """A planning's committer (``for_plan``), on the model's clock; ``batch``: the batch the
    checkpoint says the planning is for (None: not known, as with a remote checkpoint)."""
    plan = dataclasses.replace(_plan(query_key), planned_batch=batch)
    committer = EosCommitter.for_plan(plan, {"bootstrap.servers": "h:1"})
    committer.clock, committer.sleep_ms = cluster.clock, cluster.advance
    return committer


def test_a_query_started_again_in_the_same_application_takes_the_fence_back(
    cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # Application A runs the query (batch 0), then stops it; application B runs it briefly.
    _in_driver(monkeypatch, tmp_path / "a")
    first = _planned(cluster)
    assert first.commit(0, _tasks(cluster, 0)) == COMMITTED
    _in_driver(monkeypatch, tmp_path / "b")
    other = _planned(cluster)
    assert other.fence is not None
    # A starts the query again in the same application: its token (in A's local directory) is
    # the one B fenced. The restart must take the fence back and commit once.
    _in_driver(monkeypatch, tmp_path / "a")
    again = _planned(cluster)
    assert again.commit(1, _tasks(cluster, 1)) == COMMITTED
    assert _visible(cluster) == _rows(0, 1)
    assert cluster.open_transactions() == []
    with pytest.raises(SinkFencedError):
        other.fence.check("after A took it back")
    assert again.fence is not None
    again.fence.check("the restarted query")


def test_a_restart_after_another_run_went_on_is_refused_once_then_takes_the_fence(
    cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # A runs batch 0 and stops; B (another application) takes the fence and commits batch 1.
    _in_driver(monkeypatch, tmp_path / "a")
    assert _planned(cluster).commit(0, _tasks(cluster, 0)) == COMMITTED
    _in_driver(monkeypatch, tmp_path / "b")
    other = _planned(cluster)
    assert other.commit(1, _tasks(cluster, 1)) == COMMITTED
    # A plans again: nothing tells a restart from A's older run going on, and B went on since,
    # so A is refused, takes nothing from B, and forgets its token.
    _in_driver(monkeypatch, tmp_path / "a")
    with pytest.raises(SinkFencedError) as refused:
        _planned(cluster)
    message = str(refused.value)
    assert "another run of the query took the fence" in message
    assert "batch 1, after batch 0" in message
    assert "start the query again" in message and "Fix:" in message
    assert other.fence is not None
    other.fence.check("B after A's refused planning")
    assert fence._load(PREFIX, "query-a") is None
    # Started again, A's planning takes the fence (it holds no token) and goes on once.
    again = _planned(cluster)
    assert again.recover() is not None
    assert again.commit(2, _tasks(cluster, 2)) == COMMITTED
    assert _visible(cluster) == _rows(0, 1, 2)
    with pytest.raises(SinkFencedError):
        other.fence.check("after A started again")


def test_a_restart_from_the_checkpoint_after_another_run_went_on_takes_the_fence_at_once(
    cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # A runs batch 0 and stops; B (another application) takes the fence and commits batch 1,
    # and stops. A starts the query again in the same application: its checkpoint says the
    # planning is for batch 2, after every batch the store recorded, so it is a start, not an
    # older run planning a batch B recorded already: it takes the fence at once.
    _in_driver(monkeypatch, tmp_path / "a")
    assert _planned(cluster, batch=0).commit(0, _tasks(cluster, 0)) == COMMITTED
    _in_driver(monkeypatch, tmp_path / "b")
    other = _planned(cluster, batch=1)
    assert other.commit(1, _tasks(cluster, 1)) == COMMITTED
    _in_driver(monkeypatch, tmp_path / "a")
    again = _planned(cluster, batch=2)
    assert again.commit(2, _tasks(cluster, 2)) == COMMITTED
    assert _visible(cluster) == _rows(0, 1, 2)
    assert other.fence is not None
    with pytest.raises(SinkFencedError):
        other.fence.check("after A started again")


def test_an_older_run_planning_a_batch_the_newer_driver_recorded_is_refused(
    cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # A committed batch 0; B took over and committed batch 1; A, cut off meanwhile, plans batch
    # 1 again (its own run going on): the store recorded batch 1 already, so A is refused.
    _in_driver(monkeypatch, tmp_path / "a")
    assert _planned(cluster, batch=0).commit(0, _tasks(cluster, 0)) == COMMITTED
    _in_driver(monkeypatch, tmp_path / "b")
    other = _planned(cluster, batch=1)
    assert other.commit(1, _tasks(cluster, 1)) == COMMITTED
    _in_driver(monkeypatch, tmp_path / "a")
    with pytest.raises(SinkFencedError, match="another run of the query took the fence"):
        _planned(cluster, batch=1)
    assert other.fence is not None
    other.fence.check("B after A's refused planning")


def test_a_planning_after_a_batch_stopped_midway_here_takes_the_fence_back(
    cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # A plans batch 1 (its pending marker set) and is stopped before its commit; B takes the
    # fence and leaves its own batch 1 prepared (B stopped too).
    _in_driver(monkeypatch, tmp_path / "a")
    assert _planned(cluster).commit(0, _tasks(cluster, 0)) == COMMITTED
    fence.PENDING.clear()
    open(fence.pending_path("query-a") or "", "w").close()  # as QueryStart.run sets it
    _in_driver(monkeypatch, tmp_path / "b")
    _planned(cluster)
    _tasks(cluster, 1)
    # A's next planning is a start (its batch never ended here): it takes the fence back even
    # though B's transactions are open, and its start sweep ends them.
    _in_driver(monkeypatch, tmp_path / "a")
    again = _planned(cluster)
    again.recover()
    again.sweep_leftovers()
    assert cluster.open_transactions() == []
    assert again.commit(1, _tasks(cluster, 1)) == COMMITTED
    assert _visible(cluster) == _rows(0, 1)


def test_each_planning_keeps_the_batch_it_planned_with_the_token(
    cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    _in_driver(monkeypatch, tmp_path / "a")
    first = _planned(cluster)
    assert fence._load(PREFIX, "query-a").planned == 0  # type: ignore[union-attr]
    for batch in range(3):
        assert first.fence is not None
        first.fence.planning(first.recover())  # as the planning of each batch does
        assert first.commit(batch, _tasks(cluster, batch)) == COMMITTED
    first.fence.planning(first.recover())
    kept = fence._load(PREFIX, "query-a")
    assert kept is not None and kept.planned == 3
    # B takes the fence and only plans; A, planning batch 3 again, takes it back.
    _in_driver(monkeypatch, tmp_path / "b")
    _planned(cluster)
    _in_driver(monkeypatch, tmp_path / "a")
    assert _planned(cluster).commit(3, _tasks(cluster, 3)) == COMMITTED
    assert _visible(cluster) == _rows(0, 1, 2, 3)


def test_a_commit_refused_by_the_fence_aborts_its_transactions_and_drops_the_token(
    cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    _in_driver(monkeypatch, tmp_path / "a")
    old = _planned(cluster)
    tasks = _tasks(cluster, 0)  # prepared; then another driver takes the fence
    _in_driver(monkeypatch, tmp_path / "b")
    _planned(cluster)
    _in_driver(monkeypatch, tmp_path / "a")
    with pytest.raises(SinkFencedError):
        old.commit(0, tasks)
    # Readers of the batch's partitions are not held back for transaction.timeout.ms.
    assert cluster.open_transactions() == []
    assert _visible(cluster) == []
    # The lost token is forgotten: the next planning on this driver takes the fence anew.
    assert fence._load(PREFIX, "query-a") is None
    assert _planned(cluster).commit(0, _tasks(cluster, 0)) == COMMITTED
    assert _visible(cluster) == _rows(0)


def test_an_intent_whose_end_txn_answer_was_lost_leaves_the_fence_at_its_new_epoch() -> None:
    from tests.fakes.coordinator import LOST_ANSWER

    coordinator = FakeCoordinator(transaction_version=2)
    driver = _driver(coordinator, "driver", fenced=True)
    # The intent's EndTxn (the first EndTxn of the commit) is applied, its answer lost: the
    # intent is recorded and the fence's epoch moved on without this driver hearing it.
    coordinator.script("end_txn", LOST_ANSWER)
    assert driver.commit(5, _tasks(coordinator, 5)) == COMMITTED
    assert _visible(coordinator) == _rows(5)
    last = driver.store.last(KEY)
    assert last is not None and (last.batch_id, last.state) == (5, "done")
    assert driver.fence is not None
    driver.fence.check("after the commit")
    assert coordinator.open_transactions() == []


def test_a_slow_intent_write_gives_up_while_the_batch_can_still_be_aborted() -> None:
    coordinator = FakeCoordinator()
    driver = _driver(coordinator, "driver", fenced=True)
    log = driver.store.log  # type: ignore[attr-defined]
    # Partition 0's transaction opens 30 s before partition 1's; at the check it has 16 s left
    # of its 60 s, more than the 15 s margin, so the check lets the batch through.
    t0 = TaskTransaction(0, coordinator.begin(f"{PREFIX}-0-0", {("out", 0): ["b1-p0"]}))
    coordinator.advance(30_000)
    t1 = TaskTransaction(1, coordinator.begin(f"{PREFIX}-1-0", {("out", 1): ["b1-p1"]}))
    coordinator.advance(14_000)
    log.write_delay_ms = 20_000  # the intent topic's leader answers in 20 s
    with pytest.raises(IntentStoreError, match="did not finish within"):
        driver.commit(1, [t0, t1])
    # The intent write gave up before partition 0's transaction could expire: nothing of the
    # batch is visible, nothing is open, and the re-run writes the whole batch.
    assert log.write_timeouts[-1] <= 16_000
    assert _visible(coordinator) == []
    assert coordinator.open_transactions() == []
    assert _intents(coordinator) == []


def test_two_queries_starting_together_with_one_prefix_write_nothing_twice(
    cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # Query b reads no claim yet; before its InitProducerId lands, query a (another driver)
    # plans entirely: it takes the fence and claims the prefix. Then b's InitProducerId fences a.
    started: list[EosCommitter] = []

    def query_a_plans() -> None:
        _in_driver(monkeypatch, tmp_path / "a")
        started.append(_planned(cluster, "query-a"))
        _in_driver(monkeypatch, tmp_path / "b")

    _in_driver(monkeypatch, tmp_path / "b")
    cluster.script("init", query_a_plans)
    with pytest.raises(SinkOptionError, match="'query-a'"):
        _planned(cluster, "query-b")  # the prefix is a's: b stops, refused
    # a's batch in flight is refused by the fence b took (both stopped once) ...
    _in_driver(monkeypatch, tmp_path / "a")
    with pytest.raises(SinkFencedError):
        started[0].commit(0, _tasks(cluster, 0))
    assert cluster.open_transactions() == []
    # ... and a's next planning takes the fence back and writes the batch once.
    assert _planned(cluster, "query-a").commit(0, _tasks(cluster, 0)) == COMMITTED
    assert _visible(cluster) == _rows(0)
    assert cluster.open_transactions() == []


def test_a_planning_that_cannot_ask_where_the_fence_stands_keeps_its_token(
    cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from tests.fakes.coordinator import COORDINATOR_NOT_AVAILABLE

    _in_driver(monkeypatch, tmp_path / "a")
    first = _planned(cluster)
    assert first.fence is not None
    held = first.fence.token
    # The planning's check gets no answer (a coordinator moving; brokers before Kafka 3.0 have
    # no DescribeTransactions at all): the planning goes on with the token, and fences nothing.
    cluster.script("describe", COORDINATOR_NOT_AVAILABLE)
    again = _planned(cluster)
    assert again.fence is not None and again.fence.token == held
    assert again.commit(0, _tasks(cluster, 0)) == COMMITTED
    assert _visible(cluster) == _rows(0)


def test_brokers_without_describe_transactions_warn_once_and_plan_on(
    cluster: FakeCoordinator,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from kafka_sink.errors import UnsupportedVersionError
    from kafka_sink.spark import logs

    monkeypatch.setattr(logs, "_WARNED", set())
    _in_driver(monkeypatch, tmp_path / "a")
    held = _planned(cluster).fence
    assert held is not None

    def unsupported(tid: str) -> None:
        raise UnsupportedVersionError("DescribeTransactions is not supported by the broker")

    monkeypatch.setattr(cluster, "describe", unsupported)
    for _ in range(3):
        fence_now = fence.open_fence(
            PREFIX, "query-a", init=cluster.init_producer_id, describe=cluster.describe
        )
        assert fence_now.token == held.token
    lines = [r for r in caplog.records if "could not check the fence" in r.getMessage()]
    assert len(lines) == 1 and "DescribeTransactions" in lines[0].getMessage()
