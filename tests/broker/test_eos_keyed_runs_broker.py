"""Two runs of one ``idempotencyKey`` at the same time, a keyed job given a streaming query's
prefix, and two batch jobs without the key given one ``transactionalIdPrefix``, on a real broker.

Each run is the data source's own driver path (``PyKafkaDataSource.writer()`` against the
broker: preflight, intent topic, claim, fence; then ``commit()``), its tasks real transactional
KafkaProducers that prepare and hand their transactions over, as Spark's tasks do. An
independent read_committed consumer (kafka-python) reads every row once, and a plain record
written after proves no transaction was left open before it.
"""

from __future__ import annotations

import pickle
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from kafka_sink import KafkaProducer
from kafka_sink.admin.transactions import describe_transactions
from kafka_sink.sink_errors import SinkError, SinkFencedError, SinkOptionError
from kafka_sink.spark.commit_log.document import PyKafkaCommitMessage
from kafka_sink.spark.datasource import PyKafkaDataSource
from kafka_sink.spark.driver.eos import fence, kafka_intents
from kafka_sink.spark.driver.eos.committer import COMMITTED, EosCommitter, TaskTransaction
from kafka_sink.spark.driver.eos.intents import INTENT, BatchRecord
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from kafka_sink.spark.eos_plan import EosPlan, transactional_id
from kafka_sink.spark.writer import PyKafkaBatchWriter
from kafka_sink.testing.oracle import create_topic, read_all
from tests.broker.txn_scenarios import write_after

pytestmark = pytest.mark.broker

SCHEMA = StructType([StructField("value", BinaryType())])
PARTITIONS = 3
ROWS_PER_PARTITION = 20


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    kafka_intents._POSITIONS.clear()
    kafka_intents.close_idle()
    yield
    fence._HELD.clear()
    kafka_intents._POSITIONS.clear()
    kafka_intents.close_idle()


class _Job:
    """The names the runs of one test share."""

    def __init__(self, bootstrap: str) -> None:
        tag = uuid.uuid4().hex[:8]
        self.bootstrap = bootstrap
        self.topic = f"keyed-{tag}"
        self.intent_topic = f"keyed-intents-{tag}"
        self.key = f"nightly-{tag}"
        self.afters = 0  # plain records written after the rows (see visible)
        create_topic(bootstrap, self.topic, PARTITIONS, 1, None)

    def rows(self, tag: str = "") -> Counter[bytes]:
        return Counter(
            f"{tag}row-{p}-{i}".encode()
            for p in range(PARTITIONS)
            for i in range(ROWS_PER_PARTITION)
        )

    def visible(self) -> Counter[bytes]:
        """Every row a read_committed reader reads, once it reached a plain record written after
        them all (so nothing before them is still open)."""
        self.afters += len(write_after(self.bootstrap, self.topic, PARTITIONS))
        records = read_all(
            self.bootstrap,
            self.topic,
            expected=self.afters,
            isolation_level="read_committed",
            timeout_s=60,
        )
        values = [r.value or b"" for r in records]
        assert values.count(b"after") == self.afters, "a transaction was left open before them"
        return Counter(v for v in values if v != b"after")


class _Run:
    """One run of the job on a driver of its own: planning, tasks, commit."""

    def __init__(
        self,
        job: _Job,
        *,
        prefix: str | None = None,
        key: str | None = None,
        keyless: str | None = None,
    ) -> None:
        self.job = job
        self.prefix = prefix
        self.key = None if keyless is not None else key or job.key
        #: A job without the key: the tag its rows start with (they are its own).
        self.tag = keyless or ""
        self.writer: PyKafkaBatchWriter | None = None
        self.messages: list[PyKafkaCommitMessage] = []
        self.error: SinkError | None = None
        self.succeeded = False

    def plan(self) -> None:
        options = {
            "kafka.bootstrap.servers": self.job.bootstrap,
            "topic": self.job.topic,
            "deliveryGuarantee": "exactly-once",
            "intentTopic": self.job.intent_topic,
            "kafka.transaction.timeout.ms": "60000",
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
        self.writer = pickle.loads(pickle.dumps(writer))

    def tasks(self, slot: int) -> None:
        assert self.writer is not None and self.writer.eos is not None
        eos = self.writer.eos
        if eos.completed is not None:
            return
        for p in range(PARTITIONS):
            tid = transactional_id(eos.prefix, p, slot)
            config = {
                "bootstrap.servers": self.job.bootstrap,
                "transactional.id": tid,
                "transaction.timeout.ms": "60000",
            }
            with KafkaProducer(config) as producer:
                producer.init_transactions(timeout=60)
                producer.begin_transaction()
                for i in range(ROWS_PER_PARTITION):
                    producer.send(self.job.topic, f"{self.tag}row-{p}-{i}".encode(), partition=p)
                prepared = producer.prepare_transaction(timeout=60)
            self.messages.append(PyKafkaCommitMessage(p, 0, p, None, (), prepared))

    def commit(self) -> None:
        if self.writer is None:
            return
        try:
            self.writer.commit(list(self.messages))
        except SinkError as exc:
            self.error = exc
            return
        self.succeeded = True


def _assert_one_success_and_rows_once(job: _Job, first: _Run, second: _Run) -> None:
    assert job.visible() == job.rows()  # every row once
    assert [first.succeeded, second.succeeded].count(True) == 1, (first.error, second.error)
    [loser] = [run for run in (first, second) if not run.succeeded]
    assert isinstance(loser.error, SinkFencedError), loser.error
    assert f"another run of idempotencyKey {job.key!r}" in str(loser.error)
    third = _Run(job)
    third.plan()
    assert third.writer is not None and third.writer.eos is not None
    assert third.writer.eos.completed is not None  # the key is done: it writes nothing
    third.commit()
    assert third.succeeded and job.visible() == job.rows()


def test_a_run_planned_while_the_other_runs_its_tasks_fences_it(kafka_bootstrap: str) -> None:
    job = _Job(kafka_bootstrap)
    first, second = _Run(job), _Run(job)
    first.plan()
    first.tasks(slot=0)
    second.plan()  # takes the key over; its planning ends the first run's open transactions
    second.tasks(slot=1)
    first.commit()
    second.commit()
    assert second.succeeded
    _assert_one_success_and_rows_once(job, first, second)


def test_a_run_that_commits_while_the_other_stands_before_its_intent(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _Job(kafka_bootstrap)
    first, second = _Run(job), _Run(job)
    first.plan()
    second.plan()
    first.tasks(slot=0)
    second.tasks(slot=1)
    hooks: list[Callable[[], None]] = [second.commit]
    write = KafkaIntentStore.write_within  # what the commit calls, and ``write`` too

    def before_intent(store: KafkaIntentStore, record: BatchRecord, within: int | None) -> None:
        # The first run read the store (no record) and checked its transactions; the second
        # commits whole (intent, EndTxns, done, sweep) before the first writes its intent.
        if record.state == INTENT and hooks:
            hooks.pop()()
        write(store, record, within)

    monkeypatch.setattr(KafkaIntentStore, "write_within", before_intent)
    first.commit()
    assert second.succeeded
    _assert_one_success_and_rows_once(job, first, second)


def test_a_keyed_job_never_sweeps_a_prefix_a_streaming_query_claimed(
    kafka_bootstrap: str,
) -> None:
    job = _Job(kafka_bootstrap)
    prefix = f"query-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": kafka_bootstrap, "transaction.timeout.ms": "60000"}
    plan = EosPlan(prefix, "query-1", None, job.intent_topic, fenced=True)
    # The query claims the prefix on its driver; its batch's tasks prepare.
    EosCommitter.for_plan(plan, config).close()
    tasks: list[TaskTransaction] = []
    for p in range(PARTITIONS):
        tid = transactional_id(prefix, p, 0)
        with KafkaProducer({**config, "transactional.id": tid}) as producer:
            producer.init_transactions(timeout=60)
            producer.begin_transaction()
            for i in range(ROWS_PER_PARTITION):
                producer.send(job.topic, f"row-{p}-{i}".encode(), partition=p)
            tasks.append(TaskTransaction(p, producer.prepare_transaction(timeout=60)))
    keyed = _Run(job, prefix=prefix)
    keyed.plan()
    assert isinstance(keyed.error, SinkOptionError)
    message = str(keyed.error)
    assert repr(prefix) in message and "'query-1'" in message and "Fix:" in message
    ids = [t.transaction.transactional_id for t in tasks]
    seen = describe_transactions(config, ids, timeout=30)
    assert [seen[tid].state for tid in ids] == ["Ongoing"] * PARTITIONS  # type: ignore[union-attr]
    # The query commits its batch: every row once.
    committer = EosCommitter.for_plan(plan, config)
    try:
        assert committer.commit(0, tasks) == COMMITTED
    finally:
        committer.close()
    assert job.visible() == job.rows()


def _assert_prefix_taken_over(run: _Run, prefix: str) -> None:
    assert not run.succeeded and isinstance(run.error, SinkFencedError), run.error
    message = str(run.error)
    assert f"another write with transactionalIdPrefix {prefix!r}" in message, message
    assert "took the prefix over" in message and "Fix:" in message
    assert "idempotencyKey" not in message


def test_a_job_with_a_prefix_planned_while_another_runs_its_tasks_fences_it(
    kafka_bootstrap: str,
) -> None:
    job = _Job(kafka_bootstrap)
    prefix = f"shared-{uuid.uuid4().hex[:8]}"
    older, newer = _Run(job, prefix=prefix, keyless="a-"), _Run(job, prefix=prefix, keyless="b-")
    older.plan()
    older.tasks(slot=0)
    newer.plan()  # takes the prefix's fence: the older job's commit is refused
    newer.tasks(slot=1)
    older.commit()
    newer.commit()
    _assert_prefix_taken_over(older, prefix)
    assert newer.succeeded, newer.error
    # The newer job's rows once, nothing of the older one, nothing left open before them.
    assert job.visible() == job.rows("b-")


def test_a_job_with_a_prefix_never_sweeps_a_later_ones_transactions(
    kafka_bootstrap: str,
) -> None:
    job = _Job(kafka_bootstrap)
    prefix = f"shared-{uuid.uuid4().hex[:8]}"
    older, newer = _Run(job, prefix=prefix, keyless="a-"), _Run(job, prefix=prefix, keyless="b-")
    older.plan()
    newer.plan()
    older.tasks(slot=0)
    newer.tasks(slot=1)
    # The older job commits first: before, its sweep aborted the newer job's prepared
    # transactions, and the newer one then failed with its rows lost.
    older.commit()
    _assert_prefix_taken_over(older, prefix)
    newer.commit()
    assert newer.succeeded, newer.error
    assert job.visible() == job.rows("b-")
