"""KafkaIntentStore's reading strategy over a fake topic log (the real topic: tests/broker)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark.eos import kafka_intents
from kafka_sink.spark.eos.intents import DONE, INTENT, BatchRecord
from kafka_sink.spark.eos.kafka_intents import IntentStoreError, KafkaIntentStore, topic_settings


@dataclass
class _Rec:
    offset: int
    key: bytes | None
    value: bytes | None


class FakeTopicLog:
    """One partition in memory; ``compact()`` drops superseded records (leaving holes)."""

    def __init__(self) -> None:
        self.records: list[_Rec] = []
        self.next_offset = 0
        self.reads: list[tuple[int, int]] = []

    def end_offset(self, topic: str, partition: int) -> int:
        return self.next_offset

    def read(self, topic: str, partition: int, start: int, end: int) -> Iterator[_Rec]:
        self.reads.append((start, end))
        return iter([r for r in self.records if start <= r.offset < end])

    def append(self, topic: str, partition: int, key: bytes, value: bytes | None) -> int:
        self.records.append(_Rec(self.next_offset, key, value))
        self.next_offset += 1
        return self.next_offset - 1

    def compact(self) -> None:
        latest = {r.key: r.offset for r in self.records}
        self.records = [r for r in self.records if latest[r.key] == r.offset]

    def close(self) -> None:
        pass

    def read_count(self) -> int:
        return sum(end - start for start, end in self.reads)


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    kafka_intents._POSITIONS.clear()
    yield
    kafka_intents._POSITIONS.clear()


def _store(log: FakeTopicLog) -> KafkaIntentStore:
    return KafkaIntentStore(log, "intents", cluster="c:9092", partitions=1)  # type: ignore[arg-type]


def _record(key: str, batch_id: int, state: str = DONE) -> BatchRecord:
    txn = PreparedTransaction(f"pykafka-{key}-0-0", 7, batch_id, (("orders", 0),))
    return BatchRecord(key, batch_id, state, (txn,))


def _others(log: FakeTopicLog, count: int) -> None:
    value = json.dumps({"format": 1, "query_key": "other"}).encode()
    for i in range(count):
        log.append("intents", 0, f"other-{i % 7}".encode(), value)


def test_last_is_the_newest_record_of_the_key() -> None:
    log = FakeTopicLog()
    store = _store(log)
    store.write(_record("q1", 0, INTENT))
    store.write(_record("q2", 0, INTENT))
    store.write(_record("q1", 0, DONE))
    store.write(_record("q2", 0, DONE))
    store.write(_record("q1", 1, INTENT))
    kafka_intents._POSITIONS.clear()  # a new driver process
    assert _store(log).last("q1") == _record("q1", 1, INTENT)
    assert _store(log).last("q2") == _record("q2", 0, DONE)
    assert _store(log).last("q3") is None


def test_a_new_process_finds_a_recent_record_without_reading_the_whole_log() -> None:
    log = FakeTopicLog()
    _others(log, 100_000)
    store = _store(log)
    store.write(_record("q", 41))
    _others(log, 20)  # other queries went on writing
    kafka_intents._POSITIONS.clear()
    log.reads.clear()
    assert _store(log).last("q") == _record("q", 41)
    assert log.read_count() <= 32  # the first backward window


def test_an_old_record_is_found_behind_many_newer_ones_of_other_keys() -> None:
    log = FakeTopicLog()
    store = _store(log)
    store.write(_record("q", 3))
    _others(log, 5_000)
    kafka_intents._POSITIONS.clear()
    log.reads.clear()
    assert _store(log).last("q") == _record("q", 3)
    assert log.read_count() == log.next_offset  # every offset once, no window read twice


def test_a_missing_key_reads_the_log_once_then_only_what_is_new() -> None:
    log = FakeTopicLog()
    _others(log, 1_000)
    store = _store(log)
    assert store.last("q") is None
    assert log.read_count() == 1_000
    log.reads.clear()
    _others(log, 5)
    assert store.last("q") is None
    assert log.reads == [(1_000, 1_005)]


def test_the_same_process_reads_only_what_was_appended_since() -> None:
    log = FakeTopicLog()
    store = _store(log)
    store.write(_record("q", 0, INTENT))
    log.reads.clear()
    assert store.last("q") == _record("q", 0, INTENT)
    assert log.reads == []  # nothing appended since its own write
    # Another writer of the key (a second driver of the query) is seen, not hidden.
    log.append("intents", 0, b"q", _encoded(_record("q", 9)))
    assert store.last("q") == _record("q", 9)


def test_compaction_holes_and_a_moved_log_start_are_read_over() -> None:
    log = FakeTopicLog()
    store = _store(log)
    for batch in range(50):
        store.write(_record("q", batch, INTENT))
        store.write(_record("q", batch, DONE))
        _others(log, 3)
    log.compact()
    kafka_intents._POSITIONS.clear()
    assert _store(log).last("q") == _record("q", 49, DONE)


def test_a_deleted_key_reads_as_none() -> None:
    log = FakeTopicLog()
    store = _store(log)
    store.write(_record("job", 0))
    store.delete("job")
    assert store.last("job") is None
    kafka_intents._POSITIONS.clear()
    assert _store(log).last("job") is None


def test_a_record_of_an_unknown_format_is_refused() -> None:
    log = FakeTopicLog()
    log.append("intents", 0, b"q", json.dumps({"format": 2}).encode())
    with pytest.raises(IntentStoreError, match="format 2, which this version"):
        _store(log).last("q")


def test_new_topic_settings_follow_the_cluster_size() -> None:
    assert topic_settings(1) == (
        1,
        {"cleanup.policy": "compact", "min.insync.replicas": "1", "segment.ms": "600000"},
    )
    assert topic_settings(2)[0:1] == (2,) and topic_settings(2)[1]["min.insync.replicas"] == "1"
    assert topic_settings(5)[0] == 3 and topic_settings(5)[1]["min.insync.replicas"] == "2"


def _encoded(record: BatchRecord) -> bytes:
    from kafka_sink.spark.eos.intents import record_to_json

    return json.dumps({"format": 1, **record_to_json(record)}).encode()


class _RefusingLog(FakeTopicLog):
    def __init__(self, error: Exception, policy: str = "compact") -> None:
        super().__init__()
        self.error = error
        self.policy = policy

    def partition_count(self, topic: str) -> int | None:
        raise self.error

    def topic_config(self, topic: str, keys: list[str]) -> dict[str, str]:
        return {"cleanup.policy": self.policy}


def test_a_missing_acl_names_the_topic_the_acls_and_the_options() -> None:
    from kafka_sink.errors import TopicAuthorizationFailedError

    log = _RefusingLog(TopicAuthorizationFailedError("not authorized"))
    with pytest.raises(IntentStoreError) as caught:
        kafka_intents._prepare_topic(log, "pykafka-commit-intents")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "TOPIC_AUTHORIZATION_FAILED" in message and "'pykafka-commit-intents'" in message
    assert "READ, WRITE and DESCRIBE" in message and "CREATE" in message
    assert "'intentTopic'" in message and "intentStore=checkpoint" in message


def test_a_topic_that_is_not_compacted_is_refused() -> None:
    class Existing(_RefusingLog):
        def partition_count(self, topic: str) -> int | None:
            return 1

    with pytest.raises(IntentStoreError, match=r"cleanup.policy='delete'.*Fix: kafka-configs"):
        kafka_intents._prepare_topic(Existing(RuntimeError(), "delete"), "t")  # type: ignore[arg-type]
    assert kafka_intents._prepare_topic(Existing(RuntimeError(), "compact,delete"), "t") == 1  # type: ignore[arg-type]


def test_a_process_reuses_its_client_unless_a_call_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_sink.errors import KafkaTimeoutError

    built: list[FakeTopicLog] = []
    closed: list[FakeTopicLog] = []

    class Log(FakeTopicLog):
        def close(self) -> None:
            closed.append(self)

    def from_config(config: object, timeout_s: float | None = None) -> Log:
        built.append(Log())
        return built[-1]

    monkeypatch.setattr(kafka_intents.TopicLog, "from_config", from_config)
    monkeypatch.setattr(kafka_intents, "_prepare_topic", lambda log, topic: 1)
    config = {"bootstrap.servers": "b:9092"}
    try:
        first = KafkaIntentStore.open(config, "intents")
        first.close()
        second = KafkaIntentStore.open(config, "intents")
        assert second.log is first.log and len(built) == 1  # warm: no new connection
        other = KafkaIntentStore.open(config, "intents")  # the first is in use: a second client
        assert other.log is not second.log
        other.close()
        second.close()
        assert closed == [other.log]  # one idle client per config is kept

        def failing(*args: object) -> None:
            raise KafkaTimeoutError("no answer")

        failed = KafkaIntentStore.open(config, "intents")
        monkeypatch.setattr(failed.log, "append", failing)
        with pytest.raises(IntentStoreError, match="no answer"):
            failed.write(_record("q", 1))
        failed.close()
        assert closed[-1] is failed.log  # a client that failed is not kept
        assert KafkaIntentStore.open(config, "intents").log is not failed.log
    finally:
        kafka_intents.close_idle()
