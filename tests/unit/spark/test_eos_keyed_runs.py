"""Two runs of one ``idempotencyKey`` at the same time (an orchestrator that triggers a job twice)
write every row once, and at most one of them reports success; a keyed job never sweeps a prefix
another write claimed.

Each run is the data source's own path on one driver (``PyKafkaDataSource.writer()``, its writer
pickled as Spark ships it, then ``commit()`` with the tasks' messages) over the coordinator model
(``tests/fakes/coordinator.py``) and the Kafka intent store on it (``tests/fakes/topic_log.py``).
The runs are interleaved at the points where the race used to harm: a run planned after the
other's tasks prepared, a run committed whole while the other stood between its check and its
intent, a run planned while the other's recorded commit was under way. After both, a third run
of the key writes nothing.

Batch jobs without the key given ``transactionalIdPrefix`` share their prefix (and its fence)
with every other write given it: the newest fences the older, whose commit fails before anything
of it is visible, and none of them claims the prefix.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from kafka_sink.clock import ManualClock
from kafka_sink.sink_errors import (
    SinkError,
    SinkFencedError,
    SinkIdempotencyError,
    SinkOptionError,
)
from kafka_sink.spark.commit_log.document import PyKafkaCommitMessage
from kafka_sink.spark.datasource import PyKafkaDataSource
from kafka_sink.spark.driver.eos import committer as committer_module
from kafka_sink.spark.driver.eos import kafka_intents
from kafka_sink.spark.driver.eos import timeout as eos_timeout
from kafka_sink.spark.driver.eos.committer import EosCommitter
from kafka_sink.spark.driver.eos.idempotency import job_identity
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, BatchRecord, FileIntentStore
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from kafka_sink.spark.eos_plan import EosPlan, transactional_id
from kafka_sink.spark.writer import PyKafkaBatchWriter
from tests.fakes.coordinator import ONGOING, FakeCoordinator, coordinator_ops
from tests.fakes.topic_log import CoordinatedTopicLog
from tests.unit.spark.eos_support import fingerprint, rows

SCHEMA = StructType([StructField("value", BinaryType())])
TOPIC = "orders"
INTENT_TOPIC = "intents"
KEY = "nightly-2026-11-25"
TIMEOUT_MS = 60_000
PARTITIONS = (0, 1, 2)


class _Cluster:
    """The model behind every client a run's driver opens; ``before_intent`` runs once, right
    before the next intent record is written (a run between its check and its intent)."""

    def __init__(self, intents: str, commit_log: Path) -> None:
        # The drivers' committers read the system clock: the model's wall clock starts there.
        self.coordinator = FakeCoordinator(ManualClock(wall_ms=int(time.time() * 1000)))
        self.log = CoordinatedTopicLog(self.coordinator)
        self.before_intent: Callable[[], None] | None = None
        #: The intent store the runs use: the Kafka topic, or files under a local commitLog.
        self.intents = intents
        self.commit_log = commit_log

    def open_store(self, config: Any, topic: str, timeout_s: Any = None, fence: Any = None) -> Any:
        return KafkaIntentStore(self.log, topic, cluster="fake", fence=fence)

    def hooked(self, write: Callable[..., None]) -> Any:
        """A store's ``write`` (or ``write_within``, which the commit calls where a store has
        it), running ``before_intent`` before the next intent record."""

        def hooked_write(store: Any, record: BatchRecord, *bound: Any) -> None:
            hook, self.before_intent = self.before_intent, None
            if hook is not None and record.state == INTENT:
                hook()
            elif hook is not None:
                self.before_intent = hook
            write(store, record, *bound)

        return hooked_write

    def options(self) -> dict[str, str]:
        if self.intents == "kafka":
            return {"intentTopic": INTENT_TOPIC}
        return {"intentStore": "checkpoint", "commitLog": str(self.commit_log)}

    def record(self) -> BatchRecord | None:
        """The key's record, as a driver of another process reads it."""
        identity = job_identity(KEY, topic=TOPIC, prefix=None)
        if self.intents == "kafka":
            kafka_intents._POSITIONS.clear()
            return KafkaIntentStore(self.log, INTENT_TOPIC, cluster="reader").last(
                identity.query_key
            )
        return FileIntentStore(str(self.commit_log / "pykafka-intents")).last(identity.query_key)

    def visible(self) -> Counter[object]:
        return Counter(
            row
            for (topic, _), values in self.coordinator.read_committed().items()
            if topic == TOPIC
            for row in values
        )

    def open_transactions(self) -> list[str]:
        return [
            tid
            for tid, meta in self.coordinator.txns.items()
            if meta.state == ONGOING and not tid.endswith(".fence")
        ]


@pytest.fixture(params=["kafka", "checkpoint"])
def cluster(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[_Cluster]:
    """Both stores: the Kafka topic (written through the fence) and a local commitLog's files
    (the fence checked before each write)."""
    model = _Cluster(request.param, tmp_path / "log")
    monkeypatch.setattr(
        KafkaIntentStore, "write_within", model.hooked(KafkaIntentStore.write_within)
    )
    monkeypatch.setattr(FileIntentStore, "write", model.hooked(FileIntentStore.write))
    monkeypatch.setattr(
        committer_module,
        "listing_ops",
        lambda config, timeout_s=None: coordinator_ops(model.coordinator),
    )
    monkeypatch.setattr(KafkaIntentStore, "open", model.open_store)
    monkeypatch.setattr(eos_timeout, "resolve_transaction_timeout_ms", lambda config: TIMEOUT_MS)
    yield model


# Claims are kept in the Kafka store only (a local commitLog sees no other write).
KAFKA_ONLY = pytest.mark.parametrize("cluster", ["kafka"], indirect=True)


class _Run:
    """One run of the job: a driver of its own planning, its tasks and its commit."""

    def __init__(
        self, cluster: _Cluster, name: str, *, prefix: str | None = None, key: str | None = KEY
    ) -> None:
        self.cluster = cluster
        self.key = key
        self.name = name
        self.prefix = prefix
        self.writer: PyKafkaBatchWriter | None = None
        self.messages: list[PyKafkaCommitMessage] = []
        self.error: SinkError | None = None
        self.succeeded = False

    def plan(self) -> None:
        options = {
            "kafka.bootstrap.servers": "h:1",
            "topic": TOPIC,
            "deliveryGuarantee": "exactly-once",
            **self.cluster.options(),
        }
        if self.key is not None:
            options["idempotencyKey"] = self.key
        if self.prefix is not None:
            options["transactionalIdPrefix"] = self.prefix
        try:
            writer = PyKafkaDataSource(options).writer(SCHEMA, False)
        except SinkError as exc:
            self.error = exc
            return
        self.writer = pickle.loads(pickle.dumps(writer))  # as Spark ships it to the commit

    @property
    def plan_of(self) -> EosPlan:
        assert self.writer is not None and self.writer.eos is not None
        return self.writer.eos

    def tasks(self, slot: int) -> None:
        """Each Spark partition's task writes the job's rows on ``slot`` and prepares (none
        when the key was completed: the tasks return at once)."""
        if self.writer is None or self.plan_of.completed is not None:
            return
        for p in PARTITIONS:
            values = rows(0, p) if self.key is not None else [f"{self.name}-{p}"]
            tid = transactional_id(self.plan_of.prefix, p, slot)
            prepared = self.cluster.coordinator.begin(tid, {(TOPIC, p): values}, TIMEOUT_MS)
            self.messages.append(
                PyKafkaCommitMessage(p, 0, p, None, (), prepared, fingerprint(values))
            )

    def commit(self) -> None:
        if self.writer is None or self.error is not None:
            return
        try:
            self.writer.commit(list(self.messages))
        except SinkError as exc:
            self.error = exc
            return
        self.succeeded = True


def _job_rows() -> Counter[object]:
    return Counter(r for p in PARTITIONS for r in rows(0, p))


def _assert_once_and_one_success(cluster: _Cluster, first: _Run, second: _Run) -> None:
    assert cluster.visible() == _job_rows(), [(r.succeeded, r.error) for r in (first, second)]
    winners = [run for run in (first, second) if run.succeeded]
    assert len(winners) == 1, [run.error for run in (first, second)]
    [loser] = [run for run in (first, second) if not run.succeeded]
    assert loser.error is not None
    message = str(loser.error)
    assert f"another run of idempotencyKey {KEY!r}" in message, message
    assert "Fix:" in message
    # A third run finds the key done and writes nothing; nothing stays open.
    third = _Run(cluster, "third")
    third.plan()
    assert third.error is None and third.plan_of.completed is not None
    third.tasks(slot=2)
    third.commit()
    assert third.succeeded and cluster.visible() == _job_rows()
    assert cluster.open_transactions() == []
    last = cluster.record()
    assert last is not None and last.state == DONE


def test_a_run_planned_after_the_others_tasks_prepared(cluster: _Cluster) -> None:
    first, second = _Run(cluster, "first"), _Run(cluster, "second")
    first.plan()
    first.tasks(slot=0)
    second.plan()  # its planning takes the key over: the first run's transactions are ended
    second.tasks(slot=1)
    first.commit()
    second.commit()
    assert second.succeeded and not first.succeeded
    _assert_once_and_one_success(cluster, first, second)


def test_both_planned_then_the_first_commits_first(cluster: _Cluster) -> None:
    first, second = _Run(cluster, "first"), _Run(cluster, "second")
    first.plan()
    second.plan()
    first.tasks(slot=0)
    second.tasks(slot=1)
    first.commit()
    second.commit()
    _assert_once_and_one_success(cluster, first, second)


def test_a_run_committed_whole_while_the_other_stood_before_its_intent(
    cluster: _Cluster,
) -> None:
    first, second = _Run(cluster, "first"), _Run(cluster, "second")
    first.plan()
    second.plan()
    first.tasks(slot=0)
    second.tasks(slot=1)
    # The first run has read the store (no record) and checked its transactions; the second
    # commits all of its own, records done and sweeps; then the first writes its intent.
    cluster.before_intent = second.commit
    first.commit()
    if cluster.before_intent is not None:
        # The checkpoint store checks the fence before the write: the first run was refused
        # there, before it came to write (the fence the second run took at planning).
        assert cluster.intents == "checkpoint"
        cluster.before_intent = None
        second.commit()
    assert second.succeeded, second.error
    _assert_once_and_one_success(cluster, first, second)


def test_a_run_planned_while_the_others_recorded_commit_was_under_way(
    cluster: _Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = _Run(cluster, "first"), _Run(cluster, "second")
    first.plan()
    first.tasks(slot=0)
    planned: list[None] = []

    def second_plans(batch_id: int, *args: Any, **kwargs: Any) -> None:
        if not planned:  # between the first run's durable intent and its first EndTxn
            planned.append(None)
            second.plan()  # finds the intent and finishes it: the key is done
            second.tasks(slot=1)

    monkeypatch.setattr(committer_module, "pause_commit", second_plans)
    first.commit()
    second.commit()
    assert second.plan_of.completed is not None  # the second run wrote nothing
    _assert_once_and_one_success(cluster, first, second)


@KAFKA_ONLY
def test_a_keyed_job_never_sweeps_a_prefix_a_streaming_query_claimed(cluster: _Cluster) -> None:
    # A streaming query owns the prefix and has a batch prepared and recorded.
    query = EosCommitter.for_plan(
        EosPlan("shared", "query-1", None, INTENT_TOPIC, fenced=True), {"bootstrap.servers": "h:1"}
    )
    prepared = [
        cluster.coordinator.begin(f"shared-{p}-0", {(TOPIC, p): [f"q-{p}"]}, TIMEOUT_MS)
        for p in PARTITIONS
    ]
    query.close()
    job = _Run(cluster, "job", prefix="shared")
    job.plan()
    assert isinstance(job.error, SinkOptionError)
    message = str(job.error)
    assert "'shared'" in message and "'query-1'" in message and "Fix:" in message
    # The query's prepared transactions are untouched: it commits them.
    assert [cluster.coordinator.txns[t.transactional_id].state for t in prepared] == [ONGOING] * 3
    query = EosCommitter.for_plan(
        EosPlan("shared", "query-1", None, INTENT_TOPIC, fenced=True), {"bootstrap.servers": "h:1"}
    )
    tasks = [
        committer_module.TaskTransaction(p, t) for p, t in zip(PARTITIONS, prepared, strict=True)
    ]
    assert query.commit(0, tasks) == committer_module.COMMITTED
    assert sorted(cluster.visible()) == [f"q-{p}" for p in PARTITIONS]


@KAFKA_ONLY
def test_a_second_key_given_the_same_prefix_is_refused_without_sweeping_the_first(
    cluster: _Cluster,
) -> None:
    first = _Run(cluster, "first", prefix="nightly")
    first.plan()
    first.tasks(slot=0)
    other = _Run(cluster, "other", prefix="nightly", key="nightly-2026-11-26")
    other.plan()
    assert isinstance(other.error, SinkOptionError)
    message = str(other.error)
    assert "'nightly'" in message and "another transactionalIdPrefix" in message
    first.commit()
    assert first.succeeded, first.error
    assert cluster.visible() == _job_rows()
    assert cluster.open_transactions() == []


@KAFKA_ONLY
def test_a_run_fenced_before_its_claim_landed_says_another_run_took_the_key(
    cluster: _Cluster,
) -> None:
    first, second = _Run(cluster, "first"), _Run(cluster, "second")
    # The first run's claim is the first write through its fence: the second run plans (and
    # takes the fence) right before it.
    cluster.coordinator.script("write", second.plan)
    first.plan()
    assert second.error is None and first.writer is None
    assert isinstance(first.error, SinkFencedError)
    assert f"another run of idempotencyKey {KEY!r}" in str(first.error)
    second.tasks(slot=0)
    second.commit()
    assert second.succeeded and cluster.visible() == _job_rows()


def test_a_run_whose_intent_the_others_fence_aborted_half_way_says_another_run_took_the_key(
    cluster: _Cluster,
) -> None:
    """The second run's InitProducerId on the key's fence finds the first run's intent write
    open, aborts it and is answered CONCURRENT_TRANSACTIONS; the first run's EndTxn comes before
    the retry (Transactions V2 answers INVALID_TXN_STATE). Seen on PySpark 4.0's timing with a
    real broker: the first run failed with an intent-store error instead of saying why."""
    first, second = _Run(cluster, "first"), _Run(cluster, "second")
    first.plan()
    second_fence: list[None] = []

    def second_plans_half_way() -> None:
        token = first.plan_of.fence_token
        assert token is not None
        cluster.coordinator.begin_fence(token.transactional_id)
        second_fence.append(None)

    first.tasks(slot=0)
    if cluster.intents == "kafka":  # the checkpoint store writes no transaction of the fence
        cluster.coordinator.script("end_txn", second_plans_half_way)
        first.commit()
        assert second_fence
    second.plan()  # the retry of its InitProducerId
    if cluster.intents != "kafka":
        first.commit()
    second.tasks(slot=1)
    second.commit()
    assert second.succeeded, second.error
    _assert_once_and_one_success(cluster, first, second)


# -- batch jobs without idempotencyKey given a transactionalIdPrefix ---------------------------
#
# Such a job writes rows of its own (its name in them) under a write id of its own; two of them
# (or one beside a keyed job) share only the prefix, and so its fence.


def _rows_of(run: _Run) -> Counter[object]:
    return Counter(f"{run.name}-{p}" for p in PARTITIONS)


def _assert_prefix_taken_over(run: _Run, prefix: str) -> None:
    """``run`` failed, fenced, with a message about the prefix (it has no key to talk of)."""
    assert not run.succeeded and isinstance(run.error, SinkFencedError), run.error
    message = str(run.error)
    assert f"transactionalIdPrefix {prefix!r}" in message and "took the prefix over" in message
    assert "idempotencyKey" not in message and "Fix:" in message


def test_a_job_with_a_prefix_is_fenced_by_a_later_one_before_anything_of_it_is_visible(
    cluster: _Cluster,
) -> None:
    older = _Run(cluster, "older", prefix="shared", key=None)
    newer = _Run(cluster, "newer", prefix="shared", key=None)
    older.plan()
    older.tasks(slot=0)
    newer.plan()  # takes the prefix over: the older job's commit is refused
    newer.tasks(slot=1)
    older.commit()
    newer.commit()
    _assert_prefix_taken_over(older, "shared")
    assert newer.succeeded, newer.error
    # The newer job's rows once, nothing of the older one; nothing left open.
    assert cluster.visible() == _rows_of(newer)
    assert cluster.open_transactions() == []


def test_a_job_with_a_prefix_committed_after_a_later_one_committed_is_refused(
    cluster: _Cluster,
) -> None:
    older = _Run(cluster, "older", prefix="shared", key=None)
    newer = _Run(cluster, "newer", prefix="shared", key=None)
    older.plan()
    newer.plan()
    older.tasks(slot=0)
    newer.tasks(slot=1)
    newer.commit()  # its sweep must not abort the older job's transactions
    assert newer.succeeded, newer.error
    older.commit()
    _assert_prefix_taken_over(older, "shared")
    assert cluster.visible() == _rows_of(newer)
    assert cluster.open_transactions() == []


def test_the_first_job_with_a_prefix_commits_when_it_finishes_before_the_next_plans(
    cluster: _Cluster,
) -> None:
    for name in ("monday", "tuesday"):
        job = _Run(cluster, name, prefix="shared", key=None)
        job.plan()
        job.tasks(slot=0)
        job.commit()
        assert job.succeeded, job.error
    assert cluster.visible() == _rows_of(_Run(cluster, "monday")) + _rows_of(
        _Run(cluster, "tuesday")
    )
    assert cluster.open_transactions() == []


@KAFKA_ONLY
def test_a_keyed_job_planned_after_a_job_with_its_prefix_fences_that_job(
    cluster: _Cluster,
) -> None:
    job = _Run(cluster, "job", prefix="nightly", key=None)
    job.plan()
    job.tasks(slot=0)
    keyed = _Run(cluster, "keyed", prefix="nightly")
    keyed.plan()  # takes the fence and claims the prefix; its sweep ends the job's leftovers
    assert keyed.error is None, keyed.error
    keyed.tasks(slot=1)
    job.commit()
    keyed.commit()
    _assert_prefix_taken_over(job, "nightly")
    assert keyed.succeeded, keyed.error
    assert cluster.visible() == _job_rows()
    assert cluster.open_transactions() == []


@KAFKA_ONLY
def test_a_job_with_a_prefix_killed_after_its_tasks_leaves_the_prefix_free(
    cluster: _Cluster,
) -> None:
    # The job takes no claim: a claim of its write id, which no later write has, would lock
    # the prefix until released by hand once the job was killed.
    killed = _Run(cluster, "killed", prefix="nightly", key=None)
    killed.plan()
    killed.tasks(slot=0)  # then its driver dies: no commit, no abort
    keyed = _Run(cluster, "keyed", prefix="nightly")
    keyed.plan()
    assert keyed.error is None, keyed.error
    keyed.tasks(slot=1)
    keyed.commit()
    assert keyed.succeeded, keyed.error
    assert cluster.visible() == _job_rows()
    assert cluster.open_transactions() == []


@KAFKA_ONLY
def test_a_job_with_a_prefix_a_streaming_query_claimed_is_refused_before_any_fence(
    cluster: _Cluster,
) -> None:
    query = EosCommitter.for_plan(
        EosPlan("shared", "query-1", None, INTENT_TOPIC, fenced=True), {"bootstrap.servers": "h:1"}
    )
    fence = query.fence
    query.close()
    assert fence is not None
    job = _Run(cluster, "job", prefix="shared", key=None)
    job.plan()
    assert isinstance(job.error, SinkOptionError)
    assert "'query-1'" in str(job.error) and "Fix:" in str(job.error)
    fence.check("checking that the refused job fenced nothing")


def test_a_job_with_a_prefix_whose_commit_was_recorded_before_the_next_planned_succeeds(
    cluster: _Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    older = _Run(cluster, "older", prefix="shared", key=None)
    newer = _Run(cluster, "newer", prefix="shared", key=None)
    older.plan()
    older.tasks(slot=0)
    planned: list[None] = []

    def newer_plans(batch_id: int, *args: Any, **kwargs: Any) -> None:
        if not planned:  # between the older job's durable intent and its first EndTxn
            planned.append(None)
            newer.plan()
            newer.tasks(slot=1)

    monkeypatch.setattr(committer_module, "pause_commit", newer_plans)
    older.commit()
    # Its transactions are committed: it succeeds (failing it would have it run again), though
    # its done record was refused through the fence.
    assert older.succeeded, older.error
    newer.commit()
    assert newer.succeeded, newer.error
    assert cluster.visible() == _rows_of(older) + _rows_of(newer)
    assert cluster.open_transactions() == []


@KAFKA_ONLY
def test_a_streaming_query_started_after_a_job_with_its_prefix_fences_that_job(
    cluster: _Cluster,
) -> None:
    job = _Run(cluster, "job", prefix="shared", key=None)
    job.plan()
    job.tasks(slot=0)
    # The query's first planning takes the fence and claims the prefix; its batch prepares.
    plan = EosPlan("shared", "query-1", None, INTENT_TOPIC, fenced=True)
    EosCommitter.for_plan(plan, {"bootstrap.servers": "h:1"}).close()
    prepared = [
        cluster.coordinator.begin(f"shared-{p}-1", {(TOPIC, p): [f"q-{p}"]}, TIMEOUT_MS)
        for p in PARTITIONS
    ]
    job.commit()  # refused: its sweep leaves the query's batch alone
    _assert_prefix_taken_over(job, "shared")
    assert [cluster.coordinator.txns[t.transactional_id].state for t in prepared] == [ONGOING] * 3
    query = EosCommitter.for_plan(plan, {"bootstrap.servers": "h:1"})
    try:
        tasks = [
            committer_module.TaskTransaction(p, t)
            for p, t in zip(PARTITIONS, prepared, strict=True)
        ]
        assert query.commit(0, tasks) == committer_module.COMMITTED
    finally:
        query.close()
    assert sorted(cluster.visible()) == [f"q-{p}" for p in PARTITIONS]


@KAFKA_ONLY
@pytest.mark.parametrize("version", [1, 2], ids=["tv1", "tv2"])
def test_a_keyed_jobs_abort_continues_the_fence_where_its_commit_left_it(
    cluster: _Cluster, version: int, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.fakes.coordinator import TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    # Transactions V1: each write through the fence moves its sequence (the epoch stays); V2:
    # each write's EndTxn moves the epoch. The abort is rebuilt from the planning's token.
    cluster.coordinator = FakeCoordinator(cluster.coordinator.clock, transaction_version=version)
    cluster.log = CoordinatedTopicLog(cluster.coordinator)
    run = _Run(cluster, "only")
    run.plan()
    run.tasks(slot=0)
    assert run.writer is not None
    # The intent is recorded, then the first task's EndTxn is refused for good: the commit fails
    # past its intent, and Spark calls abort() on a writer unpickled from the planning's.
    cluster.coordinator.script("end_txn", 0, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    run.commit()
    assert run.error is not None and "is recorded" in str(run.error), run.error
    caplog.clear()
    pickle.loads(pickle.dumps(run.writer)).abort(list(run.messages))
    assert not [r for r in caplog.records if "took the key over" in r.getMessage()]
    assert cluster.visible() == _job_rows()
    # The abort's done record landed (under V1 a stale sequence would be taken by the leader
    # for a retry of the intent's, and appended nothing): another process reads it.
    record = cluster.record()
    assert record is not None and record.state == DONE, record
    assert cluster.open_transactions() == []


# -- a key whose commit an earlier release recorded lost ---------------------------------------


def _lost_by_an_earlier_release(cluster: _Cluster) -> None:
    """A run of the key as a release before partial records left it: Spark partitions 0 and 2
    committed, partition 1 aborted by Kafka, and the intent marked lost (state INTENT, its
    transactions dropped, the lost id in ``extra``)."""
    identity = job_identity(KEY, topic=TOPIC, prefix=None)
    prepared = {
        p: cluster.coordinator.begin(
            transactional_id(identity.prefix, p, 0), {(TOPIC, p): rows(0, p)}, TIMEOUT_MS
        )
        for p in PARTITIONS
    }
    cluster.coordinator.time_out(prepared[1].transactional_id)
    ops = coordinator_ops(cluster.coordinator)
    for p in (0, 2):
        ops.complete(prepared[p], True)
    record = BatchRecord(identity.query_key, 0, INTENT, (), {"lost": prepared[1].transactional_id})
    if cluster.intents == "kafka":
        KafkaIntentStore(cluster.log, INTENT_TOPIC, cluster="earlier").write(record)
    else:
        FileIntentStore(str(cluster.commit_log / "pykafka-intents")).write(record)


def test_a_key_an_earlier_release_recorded_lost_is_never_written_twice(
    cluster: _Cluster,
) -> None:
    _lost_by_an_earlier_release(cluster)
    committed = Counter(r for p in (0, 2) for r in rows(0, p))
    assert cluster.visible() == committed
    for name in ("rerun", "again"):  # refused each time, not only the first
        run = _Run(cluster, name)
        run.plan()
        assert isinstance(run.error, SinkIdempotencyError), run.error
        assert run.writer is None  # no task runs
        message = str(run.error)
        assert f"idempotencyKey {KEY!r}" in message and "Spark partitions [1]" in message
        assert "this run writes nothing" in message and "Fix:" in message
        assert "new idempotencyKey" in message and "delete the key's intent record" in message
        # Where that record is, in either store.
        query_key = job_identity(KEY, topic=TOPIC, prefix=None).query_key
        assert f"the file {query_key}.json under <commitLog>/pykafka-intents" in message
        assert "a tombstone (a record with a null value) of that key in the intentTopic" in message
        # The partitions the earlier release committed are read once; nothing is left open.
        assert cluster.visible() == committed
        assert cluster.open_transactions() == []
    last = cluster.record()
    assert last is not None and last.state == INTENT and last.extra.get("lost")


CHECKPOINT_ONLY = pytest.mark.parametrize("cluster", ["checkpoint"], indirect=True)


@CHECKPOINT_ONLY
def test_without_claims_a_keyed_job_given_a_querys_prefix_fences_it_and_aborts_its_batch(
    cluster: _Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Not covered, shown: with intentStore=checkpoint there are no claims, so a keyed job
    given a streaming query's ``transactionalIdPrefix`` is not refused. Its planning takes the
    prefix's fence (fencing the query) and sweeps the prefix, aborting the transactions the
    query's tasks prepared; the query's commit fails fenced, before anything of its batch is
    visible, and its restart writes the batch again."""
    plan = EosPlan("shared", "query-1", str(tmp_path / "query-intents"), fenced=True)
    query = EosCommitter.for_plan(plan, {"bootstrap.servers": "h:1"})
    prepared = [
        cluster.coordinator.begin(f"shared-{p}-0", {(TOPIC, p): [f"q-{p}"]}, TIMEOUT_MS)
        for p in PARTITIONS
    ]
    job = _Run(cluster, "job", prefix="shared")
    caplog.set_level(logging.INFO, logger="kafka_sink.spark")
    job.plan()
    assert job.error is None  # not refused: nothing recorded the query's claim
    assert "aborted 3 open transaction(s) of prefix 'shared'" in caplog.text
    assert [cluster.coordinator.txns[t.transactional_id].state for t in prepared] != [ONGOING] * 3
    assert cluster.open_transactions() == []  # the job's planning swept the query's batch
    tasks = [
        committer_module.TaskTransaction(p, t) for p, t in zip(PARTITIONS, prepared, strict=True)
    ]
    with pytest.raises(SinkFencedError):
        query.commit(0, tasks)
    assert not any(str(row).startswith("q-") for row in cluster.visible())
    # The job itself writes once.
    job.tasks(slot=1)
    job.commit()
    assert job.succeeded, job.error
    assert cluster.visible() == _job_rows()
    # The query started again takes the fence back and writes its batch again: once.
    query = EosCommitter.for_plan(plan, {"bootstrap.servers": "h:1"})
    again = [
        committer_module.TaskTransaction(
            p, cluster.coordinator.begin(f"shared-{p}-0", {(TOPIC, p): [f"q-{p}"]}, TIMEOUT_MS)
        )
        for p in PARTITIONS
    ]
    assert query.commit(0, again) == committer_module.COMMITTED
    assert sorted(r for r in cluster.visible().elements() if str(r).startswith("q-")) == [
        f"q-{p}" for p in PARTITIONS
    ]
