"""Adversarial review of the exactly-once design (round 5): each test states a guarantee the
design claims and shows the sequence of events that breaks it, on the coordinator model.

Each finding was written here as ``xfail(strict=True)`` while it failed, and the mark dropped with
its fix; every one now passes except the one still marked, which docs/exactly-once.md lists under
"What is not covered". No production code is changed here.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import KafkaTimeoutError
from kafka_sink.sink_errors import SinkTransactionLostError
from kafka_sink.spark.driver.eos.committer import COMMITTED, EosCommitter, TaskTransaction
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from tests.fakes.coordinator import FakeCoordinator, coordinator_ops
from tests.fakes.topic_log import CoordinatedTopicLog
from tests.unit.spark.test_eos_fence import PREFIX, _driver, _visible
from tests.unit.spark.test_eos_fence import cluster as fence_cluster  # the fixture
from tests.unit.spark.test_eos_keyed_runs import _Cluster, _job_rows, _Run
from tests.unit.spark.test_eos_keyed_runs import cluster as keyed_cluster  # the fixture

# --------------------------------------------------------------------------------------------
# 1. The intent write's bound (change 5) does not cover the read the done-record guard
#    (change 2) does first: a slow intent-topic leader lets the batch end partly committed.
# --------------------------------------------------------------------------------------------


def _task(coordinator: FakeCoordinator, partition: int, row: str) -> TaskTransaction:
    first = len(coordinator.log.get(("out", partition), []))
    prepared = coordinator.begin(f"{PREFIX}-{partition}-0", {("out", partition): [row]})
    return TaskTransaction(partition, prepared, None, ((("out", partition), first),))


def test_a_slow_read_before_the_intent_append_escapes_the_intent_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    coordinator = FakeCoordinator()
    driver = _driver(coordinator, "driver", fenced=True)
    # As test_a_slow_intent_write_gives_up_while_the_batch_can_still_be_aborted: partition 0's
    # transaction has 16 s left at the check, so the intent write is bounded to 11 s.
    t0 = _task(coordinator, 0, "b1-p0")
    coordinator.advance(30_000)
    t1 = _task(coordinator, 1, "b1-p1")
    coordinator.advance(14_000)
    # The intent topic's leader is slow (a leader change, a broker under load): the guard's
    # read of the key inside write_within takes 20 s; the append itself is then quick.
    store = driver.store
    assert isinstance(store, KafkaIntentStore)
    reads = {"n": 0}
    real_last = KafkaIntentStore.last

    def slow_last(self: KafkaIntentStore, query_key: str) -> Any:
        reads["n"] += 1
        if reads["n"] == 2:  # the commit's own read first, then the guard's inside write_within
            coordinator.advance(20_000)
        return real_last(self, query_key)

    monkeypatch.setattr(KafkaIntentStore, "last", slow_last)
    with contextlib.suppress(Exception):  # what the design promises is checked below
        driver.commit(1, [t0, t1])
    # The promise of the intent-write bound: a slow intent write gives up while the batch can
    # still be aborted, so nothing of it is visible and its re-run writes it whole. Instead
    # partition 1 is visible and partition 0 was lost by Kafka: a partly committed batch.
    assert _visible(coordinator) in ([], ["b1-p0", "b1-p1"])


def test_the_kafka_stores_read_before_its_append_counts_against_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kafka_sink.spark.driver.eos import kafka_intents
    from kafka_sink.spark.driver.eos.intents import INTENT, BatchRecord

    coordinator = FakeCoordinator()
    log = CoordinatedTopicLog(coordinator)
    bounds: list[int | None] = []
    real_append = log.append

    def append(*args: Any, timeout_ms: int | None = None) -> int:
        bounds.append(timeout_ms)
        return real_append(*args, timeout_ms=timeout_ms)

    monkeypatch.setattr(log, "append", append)
    now = {"s": 100.0}
    monkeypatch.setattr(kafka_intents.time, "monotonic", lambda: now["s"])
    real_last = KafkaIntentStore.last

    def slow_last(self: KafkaIntentStore, query_key: str) -> Any:
        now["s"] += 4.0  # the leader of the intent topic answers the read in 4 s
        return real_last(self, query_key)

    monkeypatch.setattr(KafkaIntentStore, "last", slow_last)
    store = KafkaIntentStore(log, "intents", cluster="bound")
    record = BatchRecord("q-bound", 0, INTENT, ())
    # 3 s for the whole write: the read used them all, so nothing is appended.
    with pytest.raises(kafka_intents.IntentStoreError, match="reading its key took all"):
        store.write_within(record, 3_000)
    assert bounds == [] and coordinator.log.get(("intents", 0), []) == []
    # 10 s: the append gets what the read left.
    store.write_within(record, 10_000)
    assert bounds == [6_000]
    kafka_intents._POSITIONS.clear()
    assert real_last(KafkaIntentStore(log, "intents", cluster="reader"), "q-bound") == record


# --------------------------------------------------------------------------------------------
# 2. A driver clock ahead of the brokers' fails every batch as "about to be aborted", forever,
#    with a fix (raise the timeout, make tasks faster) that does not help.
# --------------------------------------------------------------------------------------------


def test_a_driver_clock_ahead_of_the_brokers_does_not_fail_every_batch() -> None:
    coordinator = FakeCoordinator()
    # The driver's wall clock runs 50 s ahead of the brokers' (a host without NTP, a VM
    # resumed); the query runs with kafka.transaction.timeout.ms=60000.
    driver_clock = ManualClock(wall_ms=coordinator.clock.wall_ms() + 50_000)
    from kafka_sink.spark.driver.eos.intents import MemoryIntentStore

    committer = EosCommitter(
        MemoryIntentStore(),
        coordinator_ops(coordinator),
        query_key="q1",
        prefix=PREFIX,
        transaction_timeout_ms=60_000,
        clock=driver_clock,
        sleep_ms=coordinator.advance,
    )
    errors: list[str] = []
    for attempt in range(3):  # the batch and two re-runs: each prepared just now
        tasks = [_task(coordinator, p, f"b0-p{p}-a{attempt}") for p in range(2)]
        try:
            assert committer.commit(0, tasks) == COMMITTED
            break
        except SinkTransactionLostError as exc:
            errors.append(str(exc))
    # Transactions opened a moment ago, with 60 s left by the brokers' clock, are committed.
    assert errors == [], errors[0]


def test_a_skew_the_planning_cannot_show_is_named_in_the_refusal() -> None:
    # Without the planning's time (a plan made before it was kept) nothing proves the driver's
    # clock ahead: the check stays strict, and its message points at the clocks.
    from kafka_sink.spark.driver.eos.intents import MemoryIntentStore

    coordinator = FakeCoordinator()
    committer = EosCommitter(
        MemoryIntentStore(),
        coordinator_ops(coordinator),
        query_key="q1",
        prefix=PREFIX,
        transaction_timeout_ms=60_000,
        clock=ManualClock(wall_ms=coordinator.clock.wall_ms() + 50_000),
        sleep_ms=coordinator.advance,
        tasks_after_wall_ms=-1,
    )
    tasks = [_task(coordinator, p, f"b0-p{p}") for p in range(2)]
    with pytest.raises(SinkTransactionLostError, match="a driver clock ahead of the brokers'"):
        committer.commit(0, tasks)
    assert _visible(coordinator) == []


# --------------------------------------------------------------------------------------------
# 3. A keyed job's Spark abort (after a commit that failed past its intent) uses the planning's
#    fence token: under Transactions V2 the intent write moved the fence's epoch, so the abort
#    reports "another run took the key over" and skips the round of EndTxns it promises.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keyed_cluster", ["kafka"], indirect=True)
def test_a_keyed_jobs_abort_after_its_intent_finishes_the_commit_it_recorded(
    keyed_cluster: _Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.fakes.coordinator import TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    cluster = keyed_cluster

    run = _Run(cluster, "only")
    run.plan()
    run.tasks(slot=0)
    assert run.writer is not None
    # The commit records its intent (through the fence: epoch e -> e+1 under TV2), then its
    # first round of EndTxns is refused for good (an ACL change on the transactional ids that
    # is reverted a moment later): the commit fails as incomplete, the intent recorded.
    # The first end_txn is the intent's (through the fence); the second is the first task's.
    cluster.coordinator.script("end_txn", 0, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    run.commit()
    assert run.error is not None and "is recorded" in str(run.error), run.error
    # Spark then calls abort() on the job: "Spark's abort of the job tries once more".
    caplog.clear()
    run.writer.abort(list(run.messages))
    fenced_logs = [r.getMessage() for r in caplog.records if "took the key over" in r.getMessage()]
    # No other run of the key exists: nothing may say one took it over ...
    assert fenced_logs == [], fenced_logs[0]
    # ... and the abort's round of EndTxns commits the recorded transactions.
    assert cluster.visible() == _job_rows()


__all__ = ["fence_cluster", "keyed_cluster"]


# --------------------------------------------------------------------------------------------
# 4. The fence re-take (change 4) lets an older run of the query, planning again after a newer
#    driver took over, fence the newer driver: the zombie commits its batch, the newer driver's
#    in-flight batch is refused and that driver stops, told "a newer run took over".
# --------------------------------------------------------------------------------------------


def _slot_tasks(
    coordinator: FakeCoordinator, batch: int, slot: int, tag: str
) -> list[TaskTransaction]:
    return [
        TaskTransaction(
            p,
            coordinator.begin(f"{PREFIX}-{p}-{slot}", {("out", p): [f"{tag}-b{batch}-p{p}"]}),
        )
        for p in range(2)
    ]


def test_an_older_run_planning_again_does_not_fence_the_newer_driver(
    fence_cluster: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from kafka_sink.sink_errors import SinkFencedError
    from tests.unit.spark.test_eos_fence import _in_driver, _planned

    cluster = fence_cluster
    # Driver A runs the query (batch 0), then is cut off between two batches (a long GC, a
    # network partition); driver B (the pod's replacement) starts the query and plans batch 1.
    _in_driver(monkeypatch, tmp_path / "a")
    assert _planned(cluster).commit(0, _slot_tasks(cluster, 0, 0, "A")) == COMMITTED
    _in_driver(monkeypatch, tmp_path / "b")
    newer = _planned(cluster)
    newer.recover()
    newer_tasks = _slot_tasks(cluster, 1, 0, "B")  # B's tasks prepared batch 1
    # A wakes up and its (older) run plans its next batch: its token is stale.
    _in_driver(monkeypatch, tmp_path / "a")
    refused = False
    try:
        zombie = _planned(cluster)
    except SinkFencedError:
        refused = True
    if not refused:
        zombie.recover()
        assert zombie.commit(1, _slot_tasks(cluster, 1, 1, "A")) == COMMITTED
    # The newer driver must not be the one stopped: its batch commits.
    _in_driver(monkeypatch, tmp_path / "b")
    try:
        outcome = newer.commit(1, newer_tasks)
    except SinkFencedError as exc:
        pytest.fail(
            f"the newer driver was fenced by the older run: {exc}; visible: {_visible(cluster)}"
        )
    assert outcome == COMMITTED
    assert refused


# --------------------------------------------------------------------------------------------
# 5. Brokers without DescribeTransactions (before Kafka 3.0): every step of a fenced committer
#    that checks the fence, and every sweep, needs it, so a streaming query on them would be
#    stuck at its first re-run of a done batch (and with intentStore=checkpoint at its first
#    intent). The preflight refuses exactly-once on them before any batch runs.
# --------------------------------------------------------------------------------------------


def _refused_without(api: Any, *, streaming: bool) -> str:
    from kafka_sink.sink_errors import SinkOptionError
    from kafka_sink.spark.driver import preflight
    from tests.unit.spark.test_preflight import SASL, connect, new_cluster

    cluster = new_cluster(missing_apis={api})  # the cluster's brokers predate Kafka 3.0
    with pytest.MonkeyPatch.context() as patch, pytest.raises(SinkOptionError) as info:
        patch.setattr(preflight, "_PASSED", set())  # a driver process that checked nothing yet
        patch.setattr(preflight, "_TRANSACTIONAL_PASSED_MS", {})
        preflight.check_transactional_ids(
            SASL,
            prefix=PREFIX,
            transactional_id=f"{PREFIX}-0-0",
            timeout_ms=15_000,
            streaming=streaming,
            client_factory=connect(cluster),
            clock=cluster.clock,
        )
    return str(info.value)


def test_without_describe_transactions_a_done_batchs_rerun_is_not_a_failure() -> None:
    # No query starts whose re-run of a done batch would fail on the fence check: it is refused
    # while planning, naming the missing API, the version needed and the fix.
    from kafka_sink.wire.api import ApiKey

    message = _refused_without(ApiKey.DESCRIBE_TRANSACTIONS, streaming=True)
    assert "needs the brokers' DescribeTransactions API (Kafka 3.0 or later" in message
    assert "upgrade the brokers to Kafka 3.0 or later" in message


def test_without_describe_transactions_the_checkpoint_store_records_intents() -> None:
    # The checkpoint store's fenced writes check the fence with DescribeTransactions: no query
    # starts whose every intent write would fail; a keyed batch job is refused the same way.
    from kafka_sink.wire.api import ApiKey

    for streaming in (True, False):
        message = _refused_without(ApiKey.DESCRIBE_TRANSACTIONS, streaming=streaming)
        assert "deliveryGuarantee=exactly-once needs the brokers' DescribeTransactions" in message


# --------------------------------------------------------------------------------------------
# 6. The intent store reads read_committed up to the last stable offset of partition 0, which
#    every query shares: another query's fence transaction left open (its driver killed between
#    its Produce and its EndTxn, open for up to 60 s) hides every later record of every query
#    from a driver that starts meanwhile. "Not readable yet" is taken for "not there".
# --------------------------------------------------------------------------------------------


class _DriverKilled(BaseException):
    """The driver process dies here (SIGKILL)."""


def test_another_querys_open_fence_write_does_not_hide_this_querys_intent() -> None:
    from kafka_sink.spark.driver.eos import kafka_intents

    coordinator = FakeCoordinator()
    first = _driver(coordinator, "first", fenced=True)
    assert first.commit(4, _slot_tasks(coordinator, 4, 0, "y")) == COMMITTED
    # Another query's driver (its own key and prefix, the same intent topic) is killed between
    # the Produce of a fence write and its EndTxn: its transaction stays open for up to 60 s.
    coordinator.begin("other-query.fence", {("intents", 0): [(b"other-query", b"{}")]})
    # This query's driver records batch 5's intent, commits partition 0, and is killed before
    # its second EndTxn.
    tasks = _slot_tasks(coordinator, 5, 0, "y")

    def killed() -> None:
        raise _DriverKilled

    coordinator.script("end_txn", 0, 0, killed)  # the intent's (fence), partition 0's, then
    with pytest.raises(_DriverKilled):
        first.commit(5, tasks)
    # A new driver starts the query (another process: nothing cached) a few seconds later.
    kafka_intents._POSITIONS.clear()
    coordinator.advance(5_000)
    second = _driver(coordinator, "second", fenced=True)
    recovered = second.recover()
    second.sweep_leftovers()
    # The re-run of batch 5 (its tasks on slot 1) commits.
    with contextlib.suppress(Exception):  # only what readers read matters here
        second.commit(5, _slot_tasks(coordinator, 5, 1, "y"))
    assert sorted(_visible(coordinator)) == sorted(["y-b4-p0", "y-b4-p1", "y-b5-p0", "y-b5-p1"]), (
        _visible(coordinator)
    )
    assert recovered is not None and recovered.batch_id == 5, recovered


# --------------------------------------------------------------------------------------------
# 7. Claims live in one intent topic: a keyed job (or a query) given a prefix another write
#    claimed in another intentTopic passes the check, fences the owner and sweeps its prefix.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("keyed_cluster", ["kafka"], indirect=True)
@pytest.mark.xfail(
    strict=True,
    reason="not covered (docs/exactly-once.md, 'What is not covered'): refuse_foreign_claim "
    "reads the claim in the write's own intentTopic only: an owner whose intents (and claim) "
    "are in another topic is invisible, so the keyed job fences it and its start sweep aborts "
    "the owner's prepared transactions",
)
def test_a_claim_in_another_intent_topic_still_protects_the_prefix(
    keyed_cluster: _Cluster,
) -> None:
    from kafka_sink.spark.driver.eos import committer as committer_module
    from kafka_sink.spark.eos_plan import EosPlan
    from tests.fakes.coordinator import ONGOING

    cluster = keyed_cluster
    query_plan = EosPlan("shared", "query-1", None, "query-intents", fenced=True)
    # A streaming query owns prefix 'shared' (its claim in its own intentTopic) and has a
    # batch prepared.
    query = EosCommitter.for_plan(query_plan, {"bootstrap.servers": "h:1"})
    query.close()
    prepared = [
        cluster.coordinator.begin(f"shared-{p}-0", {("orders", p): [f"q-{p}"]}, 60_000)
        for p in (0, 1, 2)
    ]
    job = _Run(cluster, "job", prefix="shared")  # the default intentTopic
    job.plan()
    # The query's prepared transactions must be untouched (the job refused, as with one topic).
    states = [cluster.coordinator.txns[t.transactional_id].state for t in prepared]
    assert states == [ONGOING] * 3, (states, job.error)
    query = EosCommitter.for_plan(query_plan, {"bootstrap.servers": "h:1"})
    tasks = [committer_module.TaskTransaction(p, t) for p, t in enumerate(prepared)]
    assert query.commit(0, tasks) == COMMITTED


class _StrictLog(CoordinatedTopicLog):
    """The model's intent topic, whose end offset (the last stable offset) is refused below what
    the caller saw, as ``TopicLog.end_offset(at_least=...)`` retries it until its deadline."""

    def end_offset(self, topic: str, partition: int, *, at_least: int = 0) -> int:
        end = super().end_offset(topic, partition)
        if end < at_least:
            raise KafkaTimeoutError(
                f"listing the end offset of {topic}-{partition} did not finish: the leader "
                f"answers {end}, below {at_least} already seen"
            )
        return end


def test_another_querys_open_fence_write_does_not_fail_this_querys_next_batch() -> None:
    from kafka_sink.spark.driver.eos import fence as fence_module

    coordinator = FakeCoordinator()
    fence_module._HELD.clear()
    held = fence_module.open_fence(
        PREFIX, "query-y", init=coordinator.init_producer_id, describe=coordinator.describe
    )
    store = KafkaIntentStore(_StrictLog(coordinator), "intents", cluster="y", fence=held)
    driver = EosCommitter(
        store,
        coordinator_ops(coordinator),
        query_key="query-y",
        prefix=PREFIX,
        clock=coordinator.clock,
        sleep_ms=coordinator.advance,
        fence=held,
    )
    assert driver.commit(4, _slot_tasks(coordinator, 4, 0, "y")) == COMMITTED
    # Another query's driver is killed between the Produce and the EndTxn of a fence write.
    coordinator.begin("other-query.fence", {("intents", 0): [(b"other-query", b"{}")]})
    assert driver.commit(5, _slot_tasks(coordinator, 5, 0, "y")) == COMMITTED
    coordinator.advance(1_000)
    # This query's next batch, a second later, well within the other transaction's 60 s.
    assert driver.commit(6, _slot_tasks(coordinator, 6, 0, "y")) == COMMITTED
