"""A partly committed batch's re-run, from the task to the driver's commit, with fakes.

The planning finds the query's last batch partial and carries it in the plan; the re-run's task
of a committed Spark partition (same batch id) writes nothing and returns the fingerprint of the
rows it was given; the driver's commit compares it with the recorded one.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.sink_errors import SinkPartlyCommittedError
from kafka_sink.spark.commit_log.document import PyKafkaCommitMessage
from kafka_sink.spark.driver.eos.intents import DONE, PARTIAL, BatchRecord, FileIntentStore
from kafka_sink.spark.eos_plan import EosPlan, PartialBatch
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.fingerprint import Fingerprint
from kafka_sink.spark.writer import PyKafkaStreamWriter
from tests.fakes.spark import FakeTxnProducer
from tests.unit.spark import test_sink_writer_eos as writer_eos
from tests.unit.spark.test_sink_writer_eos import _fake_ops, _layout, _options, _streaming_plan

# The exactly-once writer tests' fakes: fake producers, and planning without a broker.
fakes = writer_eos.fakes
no_broker = writer_eos.no_broker

BATCH = 7


def _rows(start: int, n: int) -> pa.RecordBatch:
    return pa.record_batch({"value": [f"row-{i}".encode() for i in range(start, start + n)]})


def _as_task(monkeypatch: pytest.MonkeyPatch, partition: int, batch_id: int) -> None:
    info = task_module._TaskInfo(partition, 0, 100 + partition, batch_id)
    monkeypatch.setattr(task_module, "_task_info", lambda: info)


def _writer(eos: EosPlan) -> PyKafkaStreamWriter:
    return PyKafkaStreamWriter(
        _options(), _layout(), streaming=True, overwrite=False, write_id="s", eos=eos
    )


def _fingerprint_of_a_write(
    monkeypatch: pytest.MonkeyPatch, *batches: pa.RecordBatch
) -> Fingerprint:
    _as_task(monkeypatch, 5, BATCH)
    message = _writer(EosPlan("pykafka-q", "q", None)).write(iter(batches))
    assert isinstance(message, PyKafkaCommitMessage) and message.fingerprint is not None
    assert not message.skipped
    return message.fingerprint


def test_the_task_of_a_committed_partition_writes_nothing_and_returns_its_fingerprint(
    fakes: list[FakeTxnProducer], monkeypatch: pytest.MonkeyPatch
) -> None:
    written = _fingerprint_of_a_write(monkeypatch, _rows(0, 3), _rows(3, 2))
    fakes.clear()
    plan = EosPlan("pykafka-q", "q", None, partial=PartialBatch(BATCH, {0: written}))
    consumed: list[int] = []

    def given() -> object:
        for batch in (_rows(3, 2), _rows(0, 3)):  # the same rows, in another order
            consumed.append(batch.num_rows)
            yield batch

    _as_task(monkeypatch, 0, BATCH)
    message = _writer(plan).write(given())
    assert fakes == []  # no producer, no transaction, no InitProducerId on any id
    assert consumed == [2, 3]  # the whole input read: Spark reuses the worker only then
    assert isinstance(message, PyKafkaCommitMessage)
    assert message.skipped and message.transaction is None and message.ranges == ()
    assert message.fingerprint == written == Fingerprint(5, written.digest)
    assert message.to_json()["skipped"] is True


def test_other_partitions_and_other_batches_write_as_usual(
    fakes: list[FakeTxnProducer], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = EosPlan("pykafka-q", "q", None, partial=PartialBatch(BATCH, {0: Fingerprint(1, 1)}))
    for partition, batch_id in ((1, BATCH), (0, BATCH + 1)):
        _as_task(monkeypatch, partition, batch_id)
        message = _writer(plan).write(iter([_rows(0, 2)]))
        assert not message.skipped and message.transaction is not None
        assert message.fingerprint is not None and message.fingerprint.rows == 2
    assert len(fakes) == 2


def test_the_planning_carries_a_partial_batch_to_the_tasks(no_broker, tmp_path: Path) -> None:
    store = FileIntentStore(str(tmp_path / "pykafka-intents"))
    committed = {0: Fingerprint(3, 12345)}
    store.write(BatchRecord("q9", BATCH, PARTIAL, (), committed=committed, lost=(1,)))
    eos = _streaming_plan(tmp_path, "q9", intentStore="checkpoint")
    assert eos is not None and eos.partial == PartialBatch(BATCH, committed)
    assert eos.committed_partition(BATCH, 0) and not eos.committed_partition(BATCH, 1)
    assert not eos.committed_partition(BATCH + 1, 0)
    store.write(BatchRecord("q9", BATCH, DONE, ()))
    assert _streaming_plan(tmp_path, "q9", intentStore="checkpoint").partial is None


def _partial_rerun(
    fakes: list[FakeTxnProducer],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    recorded: Fingerprint,
) -> tuple[PyKafkaStreamWriter, list[PyKafkaCommitMessage], list[tuple[str, str]]]:
    """Batch 7 recorded partial (partition 0 committed as ``recorded``, 1 lost), re-run."""
    FileIntentStore(str(tmp_path)).write(
        BatchRecord("q", BATCH, PARTIAL, (), committed={0: recorded}, lost=(1,))
    )
    writer = _writer(
        EosPlan("pykafka-q", "q", str(tmp_path), partial=PartialBatch(BATCH, {0: recorded}))
    )
    messages = []
    for partition in (0, 1):
        _as_task(monkeypatch, partition, BATCH)
        messages.append(writer.write(iter([_rows(10 * partition, 3)])))
    open_now: list[PreparedTransaction] = [m.transaction for m in messages if m.transaction]
    return writer, messages, _fake_ops(monkeypatch, open_now)


def test_the_driver_commits_a_rerun_given_the_same_rows(
    fakes: list[FakeTxnProducer], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    same = _fingerprint_of_a_write(monkeypatch, _rows(0, 3))
    writer, messages, calls = _partial_rerun(fakes, monkeypatch, tmp_path, same)
    writer.commit(messages, BATCH)
    assert calls[0] == ("commit", "pykafka-q-1-0")  # only the lost partition was written
    record = FileIntentStore(str(tmp_path)).last("q")
    assert record is not None and (record.batch_id, record.state) == (BATCH, DONE)


def test_the_driver_stops_a_rerun_given_other_rows(
    fakes: list[FakeTxnProducer], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = _fingerprint_of_a_write(monkeypatch, _rows(100, 3))
    writer, messages, calls = _partial_rerun(fakes, monkeypatch, tmp_path, other)
    with pytest.raises(SinkPartlyCommittedError, match=r"batch 7 .*Spark partitions \[0\] are"):
        writer.commit(messages, BATCH)
    assert ("commit", "pykafka-q-1-0") not in calls
    assert ("abort", "pykafka-q-1-0") in calls
    record = FileIntentStore(str(tmp_path)).last("q")
    assert record is not None and record.state == PARTIAL
