"""The exactly-once write path of a task, and the driver's commit wiring, with fakes."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink.errors import NotLeaderOrFollowerError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark import writer as writer_module
from kafka_sink.spark.commit_log.document import PyKafkaCommitMessage
from kafka_sink.spark.driver.eos import committer
from kafka_sink.spark.driver.eos.committer import TransactionOps
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, FileIntentStore, MemoryIntentStore
from kafka_sink.spark.eos_plan import EosPlan
from kafka_sink.spark.executor import producer_cache, slots
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaBatchWriter, PyKafkaStreamWriter
from tests.fakes.coordinator import FakeCoordinator, coordinator_ops
from tests.fakes.spark import FakeFuture, FakeProducer, FakeTxnProducer


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> list[FakeTxnProducer]:
    FakeTxnProducer.txn_instances = []
    producer_cache.close_all()
    monkeypatch.setattr(producer_cache, "_create", FakeProducer)
    monkeypatch.setattr(task_module, "_create_transactional", FakeTxnProducer)
    # No other attempt holds any id open (tests/unit/spark/test_eos_slots_task.py: when one does).
    monkeypatch.setattr(slots, "describe_states", lambda config, ids: [None] * len(ids))
    yield FakeTxnProducer.txn_instances
    producer_cache.close_all()


def _options(**extra: str) -> SinkOptions:
    return SinkOptions.from_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "topic": "t",
            "deliveryGuarantee": "exactly-once",
            **extra,
        }
    )


def _layout() -> InputLayout:
    return InputLayout(
        topic_column=False,
        key_column=False,
        partition_column=False,
        headers_column=False,
        timestamp=None,
    )


def _writer(tmp_path: Path | None = None, **kw: Any) -> PyKafkaBatchWriter:
    eos = EosPlan("pykafka-w1", "w1", str(tmp_path) if tmp_path else None)
    return PyKafkaBatchWriter(
        _options(), _layout(), streaming=False, overwrite=False, write_id="w1", eos=eos, **kw
    )


def _batch(n: int) -> pa.RecordBatch:
    return pa.record_batch({"value": [str(i).encode() for i in range(n)]})


def test_a_task_writes_in_its_own_transaction_and_returns_it_prepared(fakes) -> None:
    message = _writer().write(iter([_batch(3), _batch(2)]))
    [producer] = fakes
    assert producer.config["transactional.id"] == "pykafka-w1-0-0"
    assert producer.config["acks"] == "all" and producer.config["enable.idempotence"] == "true"
    assert producer.events == ["init", "begin", "prepare"]  # never a commit, kept warm
    assert isinstance(message, PyKafkaCommitMessage)
    assert message.transaction == PreparedTransaction("pykafka-w1-0-0", 42, 3, (("t", 0), ("t", 1)))
    assert message.record_count == 5
    assert pickle.loads(pickle.dumps(message)) == message
    # Cached under its own transactional id, never as the shared at-least-once producer.
    assert producer_cache.cached_count() == 1


def test_the_next_batch_reuses_the_warm_producer_and_re_initialises_it(fakes) -> None:
    _writer().write(iter([_batch(2)]))
    _writer().write(iter([_batch(1)]))
    [producer] = fakes  # one producer for the same partition and attempt slot
    assert producer.events == ["init", "begin", "prepare", "init", "begin", "prepare"]


def test_a_cached_producer_that_cannot_re_initialise_is_replaced(
    fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_sink.errors import ProducerFencedError

    _writer().write(iter([_batch(2)]))
    first = fakes[0]

    def fenced(timeout: float | None = None) -> None:
        first.events.append("init-fenced")
        raise ProducerFencedError("fenced")

    monkeypatch.setattr(first, "init_transactions", fenced)
    message = _writer().write(iter([_batch(1)]))
    assert len(fakes) == 2
    assert first.events[-2:] == ["init-fenced", "close"]
    assert fakes[1].events == ["init", "begin", "prepare"]
    assert message.transaction is not None
    assert producer_cache.cached_count() == 1


def test_each_attempt_gets_its_own_id(fakes, monkeypatch: pytest.MonkeyPatch) -> None:
    for attempt in (0, 1):
        info = task_module._TaskInfo(5, attempt, 100 + attempt, None)
        monkeypatch.setattr(task_module, "_task_info", lambda info=info: info)
        _writer().write(iter([_batch(1)]))
    assert [p.config["transactional.id"] for p in fakes] == ["pykafka-w1-5-0", "pykafka-w1-5-1"]


def test_a_task_that_writes_nothing_opens_no_transaction(fakes) -> None:
    message = _writer().write(iter([_batch(0)]))
    assert fakes == [] and message.transaction is None


def test_a_failing_task_aborts_its_transaction(fakes) -> None:
    def batches():
        yield _batch(2)
        raise RuntimeError("upstream UDF failed")

    with pytest.raises(RuntimeError, match="upstream"):
        _writer().write(batches())
    [producer] = fakes
    assert producer.events == ["init", "begin", "abort", "close"]
    assert producer_cache.cached_count() == 0  # a failed producer is never reused


def test_a_delivery_failure_aborts_too(fakes, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(self, topic, values, keys=None, **kw):
        return FakeFuture(None, NotLeaderOrFollowerError())

    monkeypatch.setattr(FakeTxnProducer, "send_columns", failing)
    with pytest.raises(NotLeaderOrFollowerError):
        _writer().write(iter([_batch(1)]))
    assert fakes[0].events[-2:] == ["abort", "close"]


def _fake_ops(monkeypatch: pytest.MonkeyPatch, open_now: list[PreparedTransaction]) -> list:
    calls: list[tuple[str, str]] = []

    def complete(t: PreparedTransaction, commit: bool) -> None:
        calls.append(("commit" if commit else "abort", t.transactional_id))
        if t in open_now:
            open_now.remove(t)

    monkeypatch.setattr(
        committer,
        "listing_ops",
        lambda config, timeout_s=None: TransactionOps(complete, lambda prefix: list(open_now)),
    )
    assert committer  # the module the ops come from
    return calls


def test_driver_commit_commits_every_prepared_transaction_then_logs(
    fakes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog
) -> None:
    writer = _writer(tmp_path)
    m0 = writer.write(iter([_batch(2)]))
    open_now = [m0.transaction]
    calls = _fake_ops(monkeypatch, open_now)
    written: list[str] = []
    real_write = FileIntentStore.write

    def recording_write(self: FileIntentStore, record: Any) -> None:
        written.append(record.state)
        real_write(self, record)

    monkeypatch.setattr(FileIntentStore, "write", recording_write)
    with caplog.at_level("INFO", logger="kafka_sink.spark"):
        writer.commit([m0])
    assert calls == [("commit", "pykafka-w1-0-0")]
    assert written == [INTENT, DONE]
    # A batch job's record is dropped once its commit is over: Spark never repeats it.
    assert FileIntentStore(str(tmp_path)).last("w1") is None
    assert any("exactly-once" in r.getMessage() for r in caplog.records)


def test_a_batch_over_its_bad_record_bound_commits_no_transaction_and_records_no_intent(
    fakes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kafka_sink.sink_errors import BadRecordsLimitError
    from kafka_sink.spark.bad_records import BadRecordCounts

    writer = _writer(tmp_path)
    writer.options = replace(
        writer.options,
        on_record_error="skip",
        dead_letter_max_records=1,
    )
    m0 = replace(
        writer.write(iter([_batch(2)])),
        bad_records=BadRecordCounts("skip", 4, (("serialization", 2),)),
    )
    open_now = [m0.transaction]
    calls = _fake_ops(monkeypatch, open_now)
    written: list[str] = []
    real_write = FileIntentStore.write

    def recording_write(self: FileIntentStore, record: Any) -> None:
        written.append(record.state)
        real_write(self, record)

    monkeypatch.setattr(FileIntentStore, "write", recording_write)
    with pytest.raises(BadRecordsLimitError, match="deadLetterMaxRecords=1"):
        writer.commit([m0])
    assert calls == [("abort", "pykafka-w1-0-0")]  # aborted by the commit itself
    assert written == [] and open_now == []
    writer.abort([m0])  # what Spark calls next: nothing is left to commit
    assert ("commit", "pykafka-w1-0-0") not in calls


def test_driver_abort_aborts_what_the_tasks_prepared(
    fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = _writer()
    m0 = writer.write(iter([_batch(2)]))
    calls = _fake_ops(monkeypatch, [m0.transaction])
    writer.abort([m0, None])
    assert calls == [("abort", "pykafka-w1-0-0")]


def test_driver_abort_with_an_unreadable_intent_store_ends_only_a_batch_never_committed(
    fakes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    writer = _writer(tmp_path)
    m0 = writer.write(iter([_batch(2)]))
    calls = _fake_ops(monkeypatch, [m0.transaction])

    def unreadable(self: FileIntentStore, query_key: str) -> None:
        raise OSError("the intent store cannot be read (scripted)")

    monkeypatch.setattr(FileIntentStore, "last", unreadable)
    writer.abort([m0])  # every task succeeded: the failed commit may have recorded an intent
    assert calls == []
    writer.abort([m0, None])  # a task failed: Spark never called commit()
    assert calls == [("abort", "pykafka-w1-0-0")]


def test_a_committed_job_succeeds_when_its_commit_file_cannot_be_written(
    fakes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog
) -> None:
    commit_log = str(tmp_path / "log")
    writer = PyKafkaBatchWriter(
        _options(commitLog=commit_log),
        _layout(),
        streaming=False,
        overwrite=False,
        write_id="w1",
        eos=EosPlan("pykafka-w1", "w1", str(tmp_path / "intents")),
    )
    m0 = writer.write(iter([_batch(2)]))
    calls = _fake_ops(monkeypatch, [m0.transaction])

    def store_down(*args: object, **kwargs: object) -> str:
        raise OSError("the commit-log store answered 503 (scripted)")

    monkeypatch.setattr(writer_module, "write_document", store_down)
    with caplog.at_level("ERROR", logger="kafka_sink.spark"):
        writer.commit([m0])  # failing now would fail a job whose rows are all visible
    assert calls == [("commit", "pykafka-w1-0-0")]
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert any("ARE visible" in e and commit_log in e for e in errors), errors


def test_stream_writer_commits_by_batch_id(
    fakes, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    eos = EosPlan("pykafka-q", "q", str(tmp_path))
    writer = PyKafkaStreamWriter(
        _options(), _layout(), streaming=True, overwrite=False, write_id="s", eos=eos
    )
    m0 = writer.write(iter([_batch(1)]))
    calls = _fake_ops(monkeypatch, [m0.transaction])
    writer.commit([m0], 4)
    writer.commit([m0], 4)  # a second commit of a done batch changes nothing visible
    assert calls[0] == ("commit", m0.transaction.transactional_id)
    record = FileIntentStore(str(tmp_path)).last("q")
    assert (record.batch_id, record.state) == (4, DONE)


def _plan_options(**extra: str) -> SinkOptions:
    return SinkOptions.from_options(
        {"kafka.bootstrap.servers": "h:1", "deliveryGuarantee": "exactly-once", **extra}
    )


@pytest.fixture
def no_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_sink.spark.driver.eos import timeout as eos_timeout

    monkeypatch.setattr(
        eos_timeout,
        "resolve_transaction_timeout_ms",
        lambda config: int(config.get("transaction.timeout.ms", 600_000)),
    )
    coordinator = FakeCoordinator()
    monkeypatch.setattr(
        committer, "listing_ops", lambda config, timeout_s=None: coordinator_ops(coordinator)
    )
    from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore

    opened: list[str] = []

    def open_topic(
        config: Any, topic: str, timeout_s: float | None = None, fence: Any = None
    ) -> MemoryIntentStore:
        opened.append(topic)
        return MemoryIntentStore()

    monkeypatch.setattr(KafkaIntentStore, "open", open_topic)
    return opened


def test_streaming_plan_reads_the_query_id_from_the_checkpoint(no_broker, tmp_path: Path) -> None:
    from kafka_sink.spark.datasource import _exactly_once_plan

    (tmp_path / "metadata").write_text('{"id":"5f0c-query"}\n')
    options, eos = _exactly_once_plan(
        _plan_options(checkpointLocation=str(tmp_path)), streaming=True, write_id="w"
    )
    # The default store: the compacted topic, opened (created or checked) while planning.
    assert eos == EosPlan(
        "pykafka-5f0c-query", "5f0c-query", None, "pykafka-commit-intents", fenced=True
    )
    # Opened to refuse a prefix another query claimed, then with the driver's fence.
    assert set(no_broker) == {"pykafka-commit-intents"}
    assert options.producer_config["transaction.timeout.ms"] == "600000"


def _streaming_plan(checkpoint: Path, query_id: str, **options: str) -> EosPlan | None:
    from kafka_sink.spark.datasource import _exactly_once_plan

    (checkpoint / "metadata").write_text(f'{{"id":"{query_id}"}}\n')
    _, eos = _exactly_once_plan(
        _plan_options(checkpointLocation=str(checkpoint), **options), streaming=True, write_id="w"
    )
    return eos


def test_streaming_plan_with_the_checkpoint_store(no_broker, tmp_path: Path) -> None:
    eos = _streaming_plan(tmp_path, "5f0c-query", intentStore="Checkpoint")
    assert eos == EosPlan(
        "pykafka-5f0c-query", "5f0c-query", str(tmp_path / "pykafka-intents"), fenced=True
    )
    assert no_broker == []


def test_the_checkpoint_store_needs_a_local_checkpoint(no_broker) -> None:
    from kafka_sink.sink_errors import SinkOptionError
    from kafka_sink.spark.datasource import _exactly_once_plan

    options = _plan_options(checkpointLocation="s3a://bucket/ck", intentStore="checkpoint")
    with pytest.raises(SinkOptionError, match="Fix: use intentStore=kafka"):
        _exactly_once_plan(options, streaming=True, write_id="w")


def test_a_remote_checkpoint_is_read_through_its_store(
    no_broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_sink.spark import datasource

    class Remote:
        def read(self, name: str) -> bytes | None:
            assert name == "metadata"
            return b'{"id":"remote-q"}\n'

    monkeypatch.setattr(datasource, "open_store", lambda location: Remote())
    _, eos = datasource._exactly_once_plan(
        _plan_options(checkpointLocation="s3a://bucket/ck"), streaming=True, write_id="w"
    )
    assert eos is not None and eos.query_key == "remote-q"
    assert eos.intent_topic == "pykafka-commit-intents"


def test_streaming_plan_keeps_a_given_prefix(no_broker, tmp_path: Path) -> None:
    eos = _streaming_plan(tmp_path, "q9", transactionalIdPrefix="orders")
    assert eos is not None and (eos.prefix, eos.query_key) == ("orders", "q9")


def test_streaming_plan_needs_a_local_checkpoint(no_broker) -> None:
    from kafka_sink.sink_errors import SinkOptionError
    from kafka_sink.spark.datasource import _exactly_once_plan

    with pytest.raises(SinkOptionError, match="needs option 'checkpointLocation'"):
        _exactly_once_plan(_plan_options(), streaming=True, write_id="w")


def test_batch_plan_uses_the_write_id(no_broker) -> None:
    from kafka_sink.spark.datasource import _exactly_once_plan

    _, eos = _exactly_once_plan(_plan_options(), streaming=False, write_id="20261122-ab")
    assert eos == EosPlan(
        "pykafka-20261122-ab", "20261122-ab", None, "pykafka-commit-intents", batch_job=True
    )
    assert not eos.fenced  # its prefix is its own
    assert no_broker == ["pykafka-commit-intents"]
    _, eos = _exactly_once_plan(
        _plan_options(intentStore="checkpoint"), streaming=False, write_id="20261122-ab"
    )
    assert eos == EosPlan("pykafka-20261122-ab", "20261122-ab", None, batch_job=True)


def test_at_least_once_has_no_plan() -> None:
    from kafka_sink.spark.datasource import _exactly_once_plan

    opts = SinkOptions.from_options({"kafka.bootstrap.servers": "h:1"})
    assert _exactly_once_plan(opts, streaming=True, write_id="w") == (opts, None)


# -- idempotencyKey -----------------------------------------------------------------------------


def _keyed_writer(tmp_path: Path, completed: Any = None) -> PyKafkaBatchWriter:
    from kafka_sink.spark.driver.eos.idempotency import job_identity

    identity = job_identity("k1", topic="t", prefix=None)
    eos = EosPlan(
        identity.prefix,
        identity.query_key,
        str(tmp_path),
        idempotency_key="k1",
        completed=completed,
    )
    return PyKafkaBatchWriter(
        _options(), _layout(), streaming=False, overwrite=False, write_id="w2", eos=eos
    )


def test_a_keyed_job_keeps_its_record_stamped_with_the_run(
    fakes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    writer = _keyed_writer(tmp_path)
    m0 = writer.write(iter([_batch(2)]))
    calls = _fake_ops(monkeypatch, [m0.transaction])
    writer.commit([m0])
    assert calls == [("commit", m0.transaction.transactional_id)]
    record = FileIntentStore(str(tmp_path)).last(writer.eos.query_key)
    assert record is not None and record.state == DONE
    assert (record.extra["idempotency_key"], record.extra["write_id"]) == ("k1", "w2")


def test_a_job_whose_key_was_completed_produces_nothing_and_commits_nothing(
    fakes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog
) -> None:
    from kafka_sink.spark.driver.eos.idempotency import CompletedJob

    done = CompletedJob("k1", "w1", 1_764_000_000_000)
    writer = _keyed_writer(tmp_path, done)
    read: list[int] = []

    def batches():
        read.append(1)
        yield _batch(2)

    message = writer.write(batches())
    assert fakes == [] and read == []  # no producer, input not even read
    assert isinstance(message, PyKafkaCommitMessage) and message.transaction is None
    calls = _fake_ops(monkeypatch, [])
    logs = tmp_path / "log"
    writer.options = _plan_options(topic="t", commitLog=str(logs))
    with caplog.at_level("INFO", logger="kafka_sink.spark"):
        writer.commit([message])
    assert calls == []  # nothing sent to Kafka
    line = "idempotencyKey 'k1' was already completed by write w1 at 2025-11-24T16:00:00Z"
    assert any(line in r.getMessage() and "wrote nothing" in r.getMessage() for r in caplog.records)
    [doc] = [json.loads(p.read_text()) for p in logs.glob("*.json")]
    assert doc["idempotency_key"] == "k1" and line in doc["already_completed"]


def test_a_keyed_batch_plan_is_the_same_on_every_run(no_broker) -> None:
    from kafka_sink.spark.datasource import _exactly_once_plan

    plans = [
        _exactly_once_plan(
            _plan_options(topic="t", idempotencyKey="k1"), streaming=False, write_id=w
        )[1]
        for w in ("w1", "w2")
    ]
    assert plans[0] is not None and plans[1] is not None
    # The same names on every run; each run takes the key's fence anew, fencing the earlier.
    first, second = plans[0].fence_token, plans[1].fence_token
    assert first is not None and second is not None
    assert (second.producer_id, second.producer_epoch) > (first.producer_id, first.producer_epoch)
    assert replace(plans[0], fence_token=None) == replace(plans[1], fence_token=None)
    assert plans[0].prefix.startswith("pykafka-job-")
    assert plans[0].idempotency_key == "k1" and plans[0].completed is None


def test_a_keyed_batch_job_refuses_intents_kept_in_memory(no_broker) -> None:
    from kafka_sink.sink_errors import SinkOptionError
    from kafka_sink.spark.datasource import _exactly_once_plan

    with pytest.raises(SinkOptionError, match=r"'idempotencyKey' needs a record.*Fix: use"):
        _exactly_once_plan(
            _plan_options(idempotencyKey="k1", intentStore="checkpoint"),
            streaming=False,
            write_id="w1",
        )


def test_the_commit_document_says_how_long_the_drivers_commit_took(
    fakes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    commit_log = tmp_path / "log"
    eos = EosPlan("pykafka-q", "q", str(tmp_path / "intents"))
    writer = PyKafkaStreamWriter(
        _options(commitLog=str(commit_log)),
        _layout(),
        streaming=True,
        overwrite=False,
        write_id="s",
        eos=eos,
    )
    m0 = writer.write(iter([_batch(1)]))
    _fake_ops(monkeypatch, [m0.transaction])
    writer.commit([m0], 0)
    doc = json.loads((commit_log / "0.json").read_text())
    assert isinstance(doc["end_transactions_ms"], int) and doc["end_transactions_ms"] >= 0
