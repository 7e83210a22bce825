"""A streaming exactly-once query's start aborts what a killed driver left open, on the fake
coordinator: run explicitly by ``streamWriter()`` in its planning call, never in the commit call
(the commit worker's), never by pickling the writer, once per driver, keeping what an unfinished
intent names."""

from __future__ import annotations

import importlib.util
import logging
import pickle
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from kafka_sink.errors import KafkaConnectionError
from kafka_sink.spark import logs
from kafka_sink.spark.commit_log.document import PyKafkaCommitMessage
from kafka_sink.spark.datasource import PyKafkaDataSource
from kafka_sink.spark.driver.eos import fence
from kafka_sink.spark.driver.eos import start as start_module
from kafka_sink.spark.driver.eos import timeout as eos_timeout
from kafka_sink.spark.driver.eos.committer import EosCommitter, TaskTransaction
from kafka_sink.spark.driver.eos.intents import INTENT, BatchRecord, MemoryIntentStore
from kafka_sink.spark.driver.eos.start import QueryStart
from kafka_sink.spark.eos_plan import EosPlan
from kafka_sink.spark.writer import PyKafkaStreamWriter
from tests.fakes.coordinator import FakeCoordinator
from tests.fakes.spark import COMMIT_WORKER_FILE, from_commit_worker, spark_checkpoint
from tests.unit.spark.eos_support import PREFIX, committer, expected_rows, run_tasks, visible_counts

SCHEMA = StructType([StructField("value", BinaryType())])


class _Driver:
    """The fake coordinator and intent store behind every committer a driver's worker builds."""

    def __init__(self, tmp_path: Path) -> None:
        self.coordinator = FakeCoordinator()
        self.store = MemoryIntentStore()
        self.checkpoint = spark_checkpoint(tmp_path / "checkpoint")
        self.opened = 0

    def for_plan(self, plan: EosPlan, producer_config: Any) -> EosCommitter:
        self.opened += 1
        return committer(self.coordinator, self.store)

    def stream_writer(self) -> PyKafkaStreamWriter:
        """What each of Spark's two driver workers builds for a micro-batch."""
        options = {
            "kafka.bootstrap.servers": "h:1",
            "topic": "t",
            "deliveryGuarantee": "exactly-once",
            "transactionalIdPrefix": PREFIX,
            "checkpointLocation": str(self.checkpoint),
        }
        return PyKafkaDataSource(options).streamWriter(SCHEMA, False)

    def plan(self) -> PyKafkaStreamWriter:
        """The planning worker: build the writer (its start work run) and pickle it for the
        tasks."""
        writer = self.stream_writer()
        pickle.loads(pickle.dumps(writer))
        return writer

    def commit_writer(self) -> PyKafkaStreamWriter:
        """The commit worker's writer, built the same way from its own file."""
        return from_commit_worker(self.stream_writer)

    def commit(self, batch_id: int, tasks: Sequence[TaskTransaction]) -> None:
        """The commit worker: build the writer again and commit the tasks' messages."""
        messages = [
            PyKafkaCommitMessage(t.partition_id, 0, t.partition_id, batch_id, (), t.transaction)
            for t in tasks
        ]
        self.commit_writer().commit(list(messages), batch_id)

    def list_calls(self) -> int:
        return sum(1 for operation, _ in self.coordinator.calls if operation == "list")


@pytest.fixture
def driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Driver]:
    model = _Driver(tmp_path)
    monkeypatch.setattr(EosCommitter, "for_plan", model.for_plan)
    monkeypatch.setattr(
        eos_timeout,
        "resolve_transaction_timeout_ms",
        lambda config: int(config.get("transaction.timeout.ms", 600_000)),
    )
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    monkeypatch.setattr(logs, "_WARNED", set())  # a fresh driver process
    yield model


def _start_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "query start" in r.getMessage()]


def test_a_restart_aborts_what_the_killed_driver_left_open_before_the_first_batch_runs(
    driver: _Driver, caplog: pytest.LogCaptureFixture
) -> None:
    # The first run commits batch 0; its tasks of batch 1 prepare, then the driver is killed.
    driver.plan()
    driver.commit(0, run_tasks(driver.coordinator, 0))
    run_tasks(driver.coordinator, 1)
    assert len(driver.coordinator.open_transactions()) == 3
    # A new driver process on the same checkpoint plans batch 1 again.
    logs._WARNED.clear()  # its once-per-driver marks are the dead driver's
    caplog.set_level(logging.INFO, logger="kafka_sink.spark")
    driver.plan()
    assert driver.coordinator.open_transactions() == []  # readers are not held back
    assert _start_lines(caplog) == [
        f"pykafka exactly-once: query start: aborted 3 open transaction(s) of prefix "
        f"{PREFIX!r} that no unfinished intent names"
    ]
    assert [r.levelno for r in caplog.records if "query start" in r.getMessage()] == [logging.INFO]
    # The re-run writes batch 1 again and commits it: every row once, nothing open.
    driver.commit(1, run_tasks(driver.coordinator, 1))
    assert visible_counts(driver.coordinator) == expected_rows([0, 1])
    assert driver.coordinator.open_transactions() == []


def test_the_commit_call_never_sweeps_the_batch_it_commits(
    driver: _Driver, caplog: pytest.LogCaptureFixture
) -> None:
    # The commit worker builds the writer (start work attached, not run) and commits.
    tasks = run_tasks(driver.coordinator, 0)
    writer = driver.commit_writer()
    assert writer.start is not None
    assert len(driver.coordinator.open_transactions()) == 3
    driver.commit(0, tasks)
    assert visible_counts(driver.coordinator) == expected_rows([0])
    assert _start_lines(caplog) == []


def test_pickling_the_writer_does_no_start_work_the_explicit_step_does(
    driver: _Driver, caplog: pytest.LogCaptureFixture
) -> None:
    # A killed run left batch 0's transactions open; a writer carries the query's start work.
    run_tasks(driver.coordinator, 0)
    writer = driver.commit_writer()
    assert writer.start is not None
    caplog.set_level(logging.INFO, logger="kafka_sink.spark")
    # Pickled as often as anything likes (here outside the commit worker): nothing is swept,
    # the start work stays with the driver's writer and no copy carries it.
    for _ in range(3):
        assert pickle.loads(pickle.dumps(writer)).start is None
    assert writer.start is not None
    assert driver.list_calls() == 0 and len(driver.coordinator.open_transactions()) == 3
    assert _start_lines(caplog) == []
    # The named step, as streamWriter() runs it in the planning call, does the work.
    writer.run_query_start()
    assert driver.list_calls() == 1 and driver.coordinator.open_transactions() == []
    assert len(_start_lines(caplog)) == 1


def test_the_planning_call_of_stream_writer_runs_the_start_before_anything_is_pickled(
    driver: _Driver,
) -> None:
    run_tasks(driver.coordinator, 0)
    writer = driver.stream_writer()  # the planning worker, before it pickles the writer
    assert driver.list_calls() == 1 and driver.coordinator.open_transactions() == []
    assert writer.start is not None


def test_the_commit_worker_is_the_installed_pyspark_file_that_builds_the_writer_to_commit() -> None:
    # What the start work tells the commit call by: the file Spark's commit call runs from, and
    # not the planning worker's.
    commit = importlib.util.find_spec("pyspark.sql.worker.python_streaming_sink_runner")
    planning = importlib.util.find_spec("pyspark.sql.worker.write_into_data_source")
    assert commit is not None and commit.origin is not None
    assert planning is not None and planning.origin is not None
    assert fence._COMMIT_WORKER in commit.origin and fence._COMMIT_WORKER not in planning.origin
    assert COMMIT_WORKER_FILE.endswith(Path(commit.origin).name)
    source = Path(commit.origin).read_text(encoding="utf-8")
    assert ".streamWriter(" in source and ".commit(" in source and ".abort(" in source
    assert ".streamWriter(" in Path(planning.origin).read_text(encoding="utf-8")


def test_the_sweep_keeps_what_an_unfinished_intent_names(driver: _Driver) -> None:
    # An intent recovery could not finish (its coordinator did not answer in time): the start
    # must not abort what it names, only the attempt nothing names.
    named = run_tasks(driver.coordinator, 4, partitions=(0,))
    leftover = run_tasks(driver.coordinator, 4, partitions=(1,))
    driver.store.write(BatchRecord("q1", 4, INTENT, (named[0].transaction,)))
    QueryStart(EosPlan(PREFIX, "q1", None), {}).run()
    assert driver.coordinator.open_transactions() == [named[0].transaction.transactional_id]
    assert leftover[0].transaction.transactional_id not in driver.coordinator.open_transactions()


def test_once_per_driver_and_query_though_each_batch_is_planned_and_pickled_twice(
    driver: _Driver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_dir = tmp_path / "spark-local"
    local_dir.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(local_dir))
    writer = driver.plan()
    pickle.dumps(writer)  # the planning pickles the writer twice (alone, in the write function)
    assert driver.list_calls() == 1
    # The batch ends in the commit worker (its commit or abort).
    driver.commit_writer()._batch_ended()
    # Another planning worker of the same driver (the markers in the local dir) does not sweep.
    logs._WARNED.clear()
    run_tasks(driver.coordinator, 2)
    driver.plan()
    assert driver.list_calls() == 1
    assert len(driver.coordinator.open_transactions()) == 3
    # The restored writer (what a task runs) carries no start work.
    assert pickle.loads(pickle.dumps(driver.commit_writer())).start is None


def test_a_start_that_cannot_reach_kafka_warns_and_the_planning_goes_on(
    driver: _Driver, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    class _Unreachable:
        @staticmethod
        def for_plan(plan: EosPlan, producer_config: Any) -> EosCommitter:
            raise KafkaConnectionError("no broker answered")

    # Only the start work's committer fails: the planning's own recovery reached Kafka.
    monkeypatch.setattr(start_module, "EosCommitter", _Unreachable)
    writer = driver.stream_writer()
    assert isinstance(pickle.loads(pickle.dumps(writer)), PyKafkaStreamWriter)
    [line] = [r for r in caplog.records if "query start" in r.getMessage()]
    assert line.levelno == logging.WARNING
    assert PREFIX in line.getMessage() and "no broker answered" in line.getMessage()


def test_the_start_runs_again_when_the_planning_took_the_fence_anew(driver: _Driver) -> None:
    # The query's first planning on this driver took the fence (take "a") and swept.
    key = f"{PREFIX}\0q1"
    fence._HELD[key] = fence.FenceToken(fence.fence_id(PREFIX), 7, 0, taken="a")
    plan = EosPlan(PREFIX, "q1", None, fenced=True)
    QueryStart(plan, {}).run()
    assert driver.list_calls() == 1
    QueryStart(plan, {}).batch_ended()  # its commit
    # Later plannings of the same run (the fence still held, written through) do not sweep.
    fence._HELD[key] = fence.FenceToken(fence.fence_id(PREFIX), 7, 3, taken="a")
    QueryStart(plan, {}).run()
    assert driver.list_calls() == 1
    QueryStart(plan, {}).batch_ended()
    # The query started again in the same application after another driver held the fence:
    # the planning took it anew (take "b"), and the start work ends what was left open.
    run_tasks(driver.coordinator, 2)
    fence._HELD[key] = fence.FenceToken(fence.fence_id(PREFIX), 7, 5, taken="b")
    QueryStart(plan, {}).run()
    assert driver.list_calls() == 2
    assert driver.coordinator.open_transactions() == []


def test_a_query_stopped_between_batches_and_started_again_in_one_application_sweeps_nothing(
    driver: _Driver, caplog: pytest.LogCaptureFixture
) -> None:
    """Not covered, shown: nothing tells this restart from the next batch of a run, so it does
    not sweep; what was opened after the stopped run's last commit stays open until the new
    run's first commit (or ``transaction.timeout.ms``)."""
    driver.plan()
    driver.commit(0, run_tasks(driver.coordinator, 0))
    # A stale attempt of batch 0 opens a transaction after commit 0's sweep; the query is
    # stopped there, between two batches (nothing of it is pending).
    run_tasks(driver.coordinator, 0, partitions=(1,), slot=1)
    assert driver.coordinator.open_transactions() == [f"{PREFIX}-1-1"]
    calls = driver.list_calls()
    caplog.set_level(logging.INFO, logger="kafka_sink.spark")
    driver.plan()  # the same application starts the query again
    assert driver.list_calls() == calls and _start_lines(caplog) == []
    assert driver.coordinator.open_transactions() == [f"{PREFIX}-1-1"]  # held open
    # The new run's first commit sweeps it: nothing left open, every row once.
    driver.commit(1, run_tasks(driver.coordinator, 1))
    assert driver.coordinator.open_transactions() == []
    assert visible_counts(driver.coordinator) == expected_rows([0, 1])


def test_a_query_stopped_mid_batch_and_started_again_in_one_application_sweeps(
    driver: _Driver, caplog: pytest.LogCaptureFixture
) -> None:
    # The first run plans and commits batch 0, then plans batch 1, whose tasks prepare; the
    # query is stopped there (no commit, no abort reaches the sink).
    driver.plan()
    driver.commit(0, run_tasks(driver.coordinator, 0))
    driver.plan()
    assert driver.list_calls() == 2  # the first planning's start sweep and commit 0's sweep
    run_tasks(driver.coordinator, 1)
    assert len(driver.coordinator.open_transactions()) == 3
    # The same application (same driver process, same markers) starts the query again: its
    # first planning ends what the stopped run left open, before the batch's tasks run.
    caplog.set_level(logging.INFO, logger="kafka_sink.spark")
    driver.plan()
    assert driver.coordinator.open_transactions() == []
    assert _start_lines(caplog) == [
        f"pykafka exactly-once: query start: aborted 3 open transaction(s) of prefix "
        f"{PREFIX!r} that no unfinished intent names"
    ]
    driver.commit(1, run_tasks(driver.coordinator, 1))
    assert visible_counts(driver.coordinator) == expected_rows([0, 1])
    # Within the run, a planning after a commit is no start: no sweep of its own.
    calls = driver.list_calls()
    driver.plan()
    assert driver.list_calls() == calls
