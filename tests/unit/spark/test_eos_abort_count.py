"""An aborted exactly-once batch counts what its unfinished tasks wrote (fake coordinator).

When a query is stopped mid-batch, Spark kills the running tasks and ``abort()`` gets None for
each. Their transactions are still open, and the partition leaders know what each wrote (its
first offset and last sequence, ``tests/fakes/coordinator.py`` models Kafka's producer state):
the driver counts it before aborting them, and says precisely when it cannot.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark.commit_log.document import (
    PartitionRange,
    PyKafkaCommitMessage,
    UnfinishedWrites,
)
from kafka_sink.spark.driver.eos import committer as committer_module
from kafka_sink.spark.driver.eos.aborted import count_unfinished
from kafka_sink.spark.driver.eos.intents import MemoryIntentStore
from kafka_sink.spark.eos_plan import EosPlan
from kafka_sink.spark.executor import producer_cache
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.writer import PyKafkaStreamWriter
from tests.fakes.coordinator import (
    TIMEOUT,
    TOPIC_AUTHORIZATION_FAILED,
    FakeCoordinator,
    coordinator_ops,
    install_coordinated_tasks,
)
from tests.unit.spark.eos_support import PREFIX, TOPIC, committer, rows, run_tasks
from tests.unit.spark.test_sink_writer_eos import _layout

# -- the driver's abort() of a stopped micro-batch ------------------------------------------------


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCoordinator]:
    coordinator = FakeCoordinator()
    install_coordinated_tasks(monkeypatch, coordinator)
    monkeypatch.setattr(
        committer_module,
        "listing_ops",
        lambda config, timeout_s=None: coordinator_ops(coordinator),
    )
    yield coordinator
    producer_cache.close_all()


def _stream_writer(tmp_path: Path) -> PyKafkaStreamWriter:
    options = SinkOptions.from_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "topic": TOPIC,
            "deliveryGuarantee": "exactly-once",
            "commitLog": str(tmp_path / "commits"),
        }
    )
    eos = EosPlan(PREFIX, "q1", str(tmp_path / "intents"))
    return PyKafkaStreamWriter(
        options, _layout(), streaming=True, overwrite=False, write_id="s", eos=eos
    )


def _task(
    monkeypatch: pytest.MonkeyPatch, writer: PyKafkaStreamWriter, partition: int, n: int
) -> PyKafkaCommitMessage:
    """Spark partition ``partition``'s task of batch 3 writing ``n`` rows."""
    monkeypatch.setattr(
        task_module, "_task_info", lambda: task_module._TaskInfo(partition, 0, partition, 3)
    )
    batch = pa.record_batch({"value": [f"p{partition}-{i}".encode() for i in range(n)]})
    message = writer.write(iter([batch]))
    assert isinstance(message, PyKafkaCommitMessage)
    return message


def test_a_stopped_batch_counts_the_records_its_killed_task_wrote(
    model: FakeCoordinator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    writer = _stream_writer(tmp_path)
    finished = _task(monkeypatch, writer, 0, 4)
    _task(monkeypatch, writer, 1, 7)  # wrote, then was killed: its message never reaches Spark
    writer.abort([finished, None], 3)

    doc = json.loads((tmp_path / "commits" / "3.aborted.json").read_text("utf-8"))
    assert doc["failed_tasks"] == [1]
    # Every record the batch appended: the finished task's 4 and the killed task's 7.
    assert len(model.log[(TOPIC, 0)]) == 11
    assert doc["acknowledged_record_count"] == 11
    assert doc["acknowledged_record_count_is_lower_bound"] is False
    assert doc["unfinished_tasks_record_count"] == 7
    assert doc["aborted_offsets"] == [
        {
            "topic": TOPIC,
            "partition": 0,
            "first_offset": 4,
            "last_offset": 10,
            "record_count": 7,
            "unknown_offset_count": 0,
        }
    ]
    assert doc["unfinished_tasks_records"].startswith("counted from their open transactions")
    # Counted first, then aborted: nothing of the batch is visible or left open.
    assert model.read_committed()[(TOPIC, 0)] == []
    assert model.open_transactions() == []


def test_a_stopped_at_least_once_batch_says_its_count_is_a_floor_and_why() -> None:
    from kafka_sink.spark.commit_log.document import build_document, log_line

    doc = build_document("abort", [None, None], mode="append", batch_id=0, now_ms=0)
    assert doc["acknowledged_record_count"] == 0
    assert doc["acknowledged_record_count_is_lower_bound"] is True
    assert "aborted_offsets" not in doc  # nothing was learned of them
    assert doc["unfinished_tasks_records"].startswith("not known: a task that did not finish")
    assert "stay in Kafka and are visible" in doc["unfinished_tasks_records"]
    assert "the unfinished ones" not in log_line(doc, None)


# -- the counting rule -----------------------------------------------------------------------


def _count(
    model: FakeCoordinator, unfinished: list[int], keep: Sequence[PreparedTransaction] = ()
) -> UnfinishedWrites:
    ops = coordinator_ops(model)
    return count_unfinished(
        unfinished, prefix=PREFIX, describe=ops.describe, producers=ops.producers, keep=keep
    )


def _sorted(ranges: Iterable[PartitionRange]) -> list[PartitionRange]:
    return sorted(ranges, key=lambda r: (r.topic, r.partition, r.first_offset))


@pytest.mark.parametrize("transaction_version", [1, 2])
def test_each_open_transaction_counts_last_sequence_plus_one_from_its_first_offset(
    transaction_version: int,
) -> None:
    model = FakeCoordinator(transaction_version=transaction_version)
    # Batch 0 commits on the same ids: the producers' sequences ran 0..2 at their epochs.
    c = committer(model, MemoryIntentStore())
    c.commit(0, run_tasks(model, 0))
    # Batch 1's tasks re-initialise (a new epoch: sequences restart at 0) and are killed.
    run_tasks(model, 1, partitions=(1, 2))
    written = _count(model, [1, 2])
    assert written.counted is True
    assert _sorted(written.ranges) == [
        PartitionRange(TOPIC, 1, 3, 5, 3),
        PartitionRange(TOPIC, 2, 3, 5, 3),
    ]
    assert [row for _, row in model.log[(TOPIC, 1)][3:]] == rows(1, 1)


def test_two_open_transactions_of_one_partition_are_both_counted() -> None:
    model = FakeCoordinator()
    # An attempt left slot 1 open (its own abort never landed), and its retry in slot 0 is killed.
    model.begin(f"{PREFIX}-0-1", {(TOPIC, 0): ["a", "b"]})
    model.begin(f"{PREFIX}-0-0", {(TOPIC, 0): ["c", "d", "e"], ("u", 4): ["f"]})
    written = _count(model, [0])
    assert written.counted is True
    assert _sorted(written.ranges) == [
        PartitionRange(TOPIC, 0, 0, 4, 2),
        PartitionRange(TOPIC, 0, 2, 4, 3),
        PartitionRange("u", 4, 0, 0, 1),
    ]


def test_a_partition_whose_task_opened_no_transaction_leaves_a_lower_bound() -> None:
    model = FakeCoordinator()
    model.begin(f"{PREFIX}-0-0", {(TOPIC, 0): ["a"]})
    model.init_producer_id(f"{PREFIX}-1-0")  # killed after InitProducerId, before any write
    written = _count(model, [0, 1])
    assert written.counted is False
    assert written.ranges == (PartitionRange(TOPIC, 0, 0, 0, 1),)
    assert "Spark partition(s) [1] had no open transaction" in written.note
    assert "the others' were counted from their open transactions" in written.note
    alone = _count(model, [1])
    assert alone.note.endswith("what they wrote, if anything, is not counted")


def test_a_partition_added_to_the_transaction_but_not_yet_written_counts_nothing() -> None:
    model = FakeCoordinator(transaction_version=1)
    prepared = model.begin(f"{PREFIX}-0-0", {(TOPIC, 0): ["a", "b"]})
    meta = model.txns[prepared.transactional_id]
    meta.partitions.add((TOPIC, 5))  # AddPartitionsToTxn answered; its Produce never landed
    written = _count(model, [0])
    assert written.counted is True
    assert written.ranges == (PartitionRange(TOPIC, 0, 0, 1, 2),)


def test_a_leader_showing_a_newer_epoch_cannot_be_read_and_says_so() -> None:
    model = FakeCoordinator()
    prepared = model.begin(f"{PREFIX}-0-0", {(TOPIC, 0): ["a", "b"]})
    model.leader_states[(TOPIC, 0)][prepared.producer_id].epoch += 1
    written = _count(model, [0])
    assert written.counted is False
    assert "does not show what they wrote" in written.note
    assert prepared.transactional_id in written.note


def test_records_without_an_open_transaction_at_its_epoch_cannot_be_read() -> None:
    model = FakeCoordinator()
    prepared = model.begin(f"{PREFIX}-0-0", {(TOPIC, 0): ["a", "b"]})
    model.leader_states[(TOPIC, 0)][prepared.producer_id].txn_start_offset = -1
    assert _count(model, [0]).counted is False


def test_transactions_an_unfinished_intent_names_are_not_counted() -> None:
    model = FakeCoordinator()
    kept = model.begin(f"{PREFIX}-0-1", {(TOPIC, 0): ["a", "b"]})
    model.begin(f"{PREFIX}-0-0", {(TOPIC, 0): ["c"]})
    written = _count(model, [0], keep=[kept])
    assert written.ranges == (PartitionRange(TOPIC, 0, 2, 2, 1),)


@pytest.mark.parametrize("operation", ["describe", "producers"])
def test_an_error_keeps_the_lower_bound_and_names_it(operation: str) -> None:
    model = FakeCoordinator()
    model.begin(f"{PREFIX}-0-0", {(TOPIC, 0): ["a"]})
    model.script(operation, TIMEOUT)
    written = _count(model, [0])
    assert written.counted is False
    assert written.ranges == ()
    assert written.note.startswith("not known: their transactions could not be described")
    assert "got no answer (scripted)" in written.note


def test_ops_that_cannot_describe_keep_the_lower_bound() -> None:
    written = count_unfinished([0], prefix=PREFIX, describe=None, producers=None)
    assert written.counted is False
    assert written.note.startswith("not known: this driver cannot describe")


def test_nothing_unfinished_asks_nothing() -> None:
    model = FakeCoordinator()
    written = _count(model, [])
    assert (written.counted, written.ranges) == (True, ())
    assert model.calls == []


def test_the_committer_counts_before_it_aborts_and_a_failure_still_aborts() -> None:
    model = FakeCoordinator()
    tasks = run_tasks(model, 0)
    model.script("producers", TIMEOUT)
    c = committer(model, MemoryIntentStore())
    written = c.abort(0, tasks[:1], intent_possible=False, unfinished=[1, 2])
    assert written.counted is False
    assert model.open_transactions() == []  # the failed count did not stop the aborts
    assert model.calls.index(("producers", "t-1,t-2")) < model.calls.index(
        ("end_txn", f"{PREFIX}-0-0")
    )


def test_an_authorization_failure_of_describe_producers_names_the_acl_missing() -> None:
    model = FakeCoordinator()
    model.begin(f"{PREFIX}-0-0", {(TOPIC, 0): ["a"]})
    model.script("producers", TOPIC_AUTHORIZATION_FAILED)
    written = _count(model, [0])
    assert written.counted is False
    assert "TOPIC_AUTHORIZATION_FAILED" in written.note


def test_an_unexpected_failure_of_the_count_still_lets_the_aborts_run(caplog) -> None:
    model = FakeCoordinator()
    tasks = run_tasks(model, 0)

    def broken(ids: Sequence[str]) -> dict[str, object]:
        raise RuntimeError("a bug")

    ops = coordinator_ops(model)
    c = committer(model, MemoryIntentStore(), replace(ops, describe=broken))
    with caplog.at_level("WARNING", logger="kafka_sink.spark"):
        written = c.abort(0, tasks[:1], intent_possible=False, unfinished=[1, 2])
    assert written.counted is False
    assert written.note.startswith("not known: counting them failed: RuntimeError: a bug")
    assert model.open_transactions() == []
    assert any("could not count" in r.getMessage() for r in caplog.records)
