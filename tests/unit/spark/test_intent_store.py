"""KafkaIntentStore's reading strategy over a fake topic log (the real topic: tests/broker)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kafka_sink.admin.topic_log import Tail, TopicLog
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.sink_errors import IntentStoreError
from kafka_sink.spark.driver.eos import kafka_intents
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, BatchRecord
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore, topic_settings
from kafka_sink.spark.driver.eos.plan_store import open_intent_store
from kafka_sink.spark.eos_plan import EosPlan


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

    def end_offset(self, topic: str, partition: int, *, at_least: int = 0) -> int:
        assert self.next_offset >= at_least
        return self.next_offset

    def tail(
        self, topic: str, partition: int, key: bytes, **bounds: Any
    ) -> Tail:  # no transactions: the last stable offset is the end
        end = self.end_offset(topic, partition, at_least=bounds.get("stable_at_least", 0))
        assert end >= bounds.get("at_least", 0)
        return Tail(end, end, None)

    def read(
        self, topic: str, partition: int, start: int, end: int, *, on_corrupt: object = None
    ) -> Iterator[_Rec]:
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
    return KafkaIntentStore(log, "intents", cluster="c:9092")  # type: ignore[arg-type]


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


def test_new_topic_settings_survive_the_loss_of_a_broker() -> None:
    assert topic_settings(1) == (
        1,
        {"cleanup.policy": "compact", "min.insync.replicas": "1", "segment.ms": "600000"},
    )
    # Two brokers: both copies must acknowledge (min ISR 1 would let an intent live on one).
    assert topic_settings(2)[0:1] == (2,) and topic_settings(2)[1]["min.insync.replicas"] == "2"
    assert topic_settings(3)[0] == 3 and topic_settings(3)[1]["min.insync.replicas"] == "2"
    assert topic_settings(5)[0] == 3 and topic_settings(5)[1]["min.insync.replicas"] == "2"


def _encoded(record: BatchRecord) -> bytes:
    from kafka_sink.spark.driver.eos.intents import record_to_json

    return json.dumps({"format": 1, **record_to_json(record)}).encode()


class ClusterLog(FakeTopicLog):
    """A cluster of ``brokers`` brokers holding topic ``intents`` (or none), whose partitions
    each keep their own records; ``add_partitions`` grows the topic as CreatePartitions would."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        partitions: int | None = None,
        replicas: int = 3,
        configs: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.broker_count = brokers
        self.count = partitions
        self.replica_count = replicas
        self.configs = configs or {"cleanup.policy": "compact", "min.insync.replicas": "2"}
        self.created: list[tuple[int, int, dict[str, str]]] = []
        self.by_partition: dict[int, FakeTopicLog] = {}

    def brokers(self) -> list[int]:
        return list(range(self.broker_count))

    def partition_count(self, topic: str) -> int | None:
        return self.count

    def ensure_topic(
        self, topic: str, *, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> int:
        self.created.append((partitions, replication_factor, dict(configs)))
        self.count, self.replica_count, self.configs = partitions, replication_factor, dict(configs)
        return partitions

    def topic_config(self, topic: str, keys: list[str]) -> dict[str, str]:
        return {k: v for k, v in self.configs.items() if k in keys}

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        return tuple(range(self.replica_count))

    def add_partitions(self, count: int) -> None:
        assert self.count is not None and count > self.count
        self.count = count

    def _part(self, partition: int) -> FakeTopicLog:
        assert self.count is not None and 0 <= partition < self.count
        return self.by_partition.setdefault(partition, FakeTopicLog())

    def end_offset(self, topic: str, partition: int, *, at_least: int = 0) -> int:
        return self._part(partition).end_offset(topic, partition, at_least=at_least)

    def tail(self, topic: str, partition: int, key: bytes, **bounds: Any) -> Tail:
        return self._part(partition).tail(topic, partition, key, **bounds)

    def read(
        self, topic: str, partition: int, start: int, end: int, *, on_corrupt: object = None
    ) -> Iterator[_Rec]:
        return self._part(partition).read(topic, partition, start, end)

    def append(self, topic: str, partition: int, key: bytes, value: bytes | None) -> int:
        return self._part(partition).append(topic, partition, key, value)


def _open(monkeypatch: pytest.MonkeyPatch, log: ClusterLog) -> KafkaIntentStore:
    """The store a new driver process opens on ``log``'s cluster."""
    kafka_intents._POSITIONS.clear()
    kafka_intents._CHECKED.clear()
    kafka_intents._IDLE.clear()
    monkeypatch.setattr(TopicLog, "from_config", lambda config, timeout_s=None: log)
    return KafkaIntentStore.open({"bootstrap.servers": "c:9092"}, "intents")


@pytest.mark.parametrize("query", ["q", "query-2", "5f0c-query", "orders-eos"])
def test_records_stay_on_partition_0_when_partitions_are_added(
    monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    log = ClusterLog(partitions=1)
    _open(monkeypatch, log).write(_record(query, 1, INTENT))
    log.add_partitions(5)
    # A restarted driver finds the intent where it was written, and writes after it there.
    store = _open(monkeypatch, log)
    assert store.last(query) == _record(query, 1, INTENT)
    store.write(_record(query, 1, DONE))
    log.add_partitions(12)
    assert _open(monkeypatch, log).last(query) == _record(query, 1, DONE)
    assert set(log.by_partition) == {0}


def test_a_created_topic_is_replicated_to_survive_a_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    log = ClusterLog(brokers=2)
    _open(monkeypatch, log)
    assert log.created == [
        (1, 2, {"cleanup.policy": "compact", "min.insync.replicas": "2", "segment.ms": "600000"})
    ]


class _RefusingLog(ClusterLog):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def brokers(self) -> list[int]:
        raise self.error


def test_a_missing_acl_names_the_topic_the_acls_and_the_options() -> None:
    from kafka_sink.errors import TopicAuthorizationFailedError

    log = _RefusingLog(TopicAuthorizationFailedError("not authorized"))
    with pytest.raises(IntentStoreError) as caught:
        kafka_intents._prepare_topic(log, "pykafka-commit-intents")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "TOPIC_AUTHORIZATION_FAILED" in message and "'pykafka-commit-intents'" in message
    assert "READ, WRITE and DESCRIBE" in message and "CREATE" in message
    assert "'intentTopic'" in message and "intentStore=checkpoint" in message


@pytest.mark.parametrize("policy", ["delete", "compact,delete", "delete, compact", ""])
def test_a_topic_that_deletes_records_is_refused(policy: str) -> None:
    log = ClusterLog(partitions=1, configs={"cleanup.policy": policy, "min.insync.replicas": "2"})
    with pytest.raises(IntentStoreError) as caught:
        kafka_intents._prepare_topic(log, "t")  # type: ignore[arg-type]
    message = str(caught.value)
    assert f"topic 't' has cleanup.policy={policy!r}" in message
    assert "Fix: kafka-configs --alter --entity-type topics --entity-name t" in message
    assert "--add-config cleanup.policy=compact" in message and "'intentTopic'" in message


def test_a_compacted_replicated_topic_is_accepted() -> None:
    log = ClusterLog(
        partitions=1, configs={"cleanup.policy": "compact", "min.insync.replicas": "2"}
    )
    kafka_intents._prepare_topic(log, "t")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("brokers", "replicas", "min_isr"), [(3, 1, "1"), (3, 3, "1"), (2, 2, "1"), (3, 1, "2")]
)
def test_a_topic_one_broker_loss_could_empty_is_refused(
    brokers: int, replicas: int, min_isr: str
) -> None:
    log = ClusterLog(
        brokers,
        partitions=1,
        replicas=replicas,
        configs={"cleanup.policy": "compact", "min.insync.replicas": min_isr},
    )
    with pytest.raises(IntentStoreError) as caught:
        kafka_intents._prepare_topic(log, "t")  # type: ignore[arg-type]
    message = str(caught.value)
    assert (
        f"topic 't' has replication factor {replicas} and min.insync.replicas={min_isr} on a "
        f"cluster of {brokers} brokers"
    ) in message
    assert "kafka-reassign-partitions" in message
    assert "--add-config min.insync.replicas=2" in message and "'intentTopic'" in message


def test_one_broker_is_accepted_with_one_warning_per_process(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(kafka_intents, "_WARNED_SINGLE_BROKER", False, raising=False)
    caplog.set_level("WARNING", logger=kafka_intents.__name__)
    for topic in ("t1", "t2", "t1"):
        log = ClusterLog(1, partitions=1, replicas=1, configs={"cleanup.policy": "compact"})
        kafka_intents._prepare_topic(log, topic)  # type: ignore[arg-type]
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "'t1'" in warnings[0].getMessage() and "1 broker" in warnings[0].getMessage()


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


def test_a_batch_jobs_new_key_is_read_only_from_where_its_planning_found_the_end() -> None:
    log = FakeTopicLog()
    _others(log, 1_000)
    planned_at = _store(log).new_key_from("job-1")
    assert planned_at == 1_000 and log.reads == []
    _others(log, 3)  # other writes between the planning and the commit
    kafka_intents._POSITIONS.clear()  # the commit runs in another process
    store = _store(log)
    store.known_new_from("job-1", planned_at)
    assert store.last("job-1") is None
    assert log.reads == [(1_000, 1_003)]
    store.write(_record("job-1", 0))
    assert store.last("job-1") == _record("job-1", 0)


def test_what_a_process_knows_of_a_key_stands_over_a_planned_offset() -> None:
    log = FakeTopicLog()
    store = _store(log)
    store.write(_record("job-1", 0))
    store.known_new_from("job-1", 1)  # a stale hint never hides a record this process saw
    log.reads.clear()
    assert store.last("job-1") == _record("job-1", 0)
    assert log.reads == []


def test_the_plan_carries_the_offset_to_the_commits_store(monkeypatch: pytest.MonkeyPatch) -> None:
    log = FakeTopicLog()
    _others(log, 1_000)
    monkeypatch.setattr(
        KafkaIntentStore, "open", classmethod(lambda cls, config, topic, **_: _store(log))
    )
    plan = EosPlan("pykafka-job-1", "job-1", None, "intents", new_key_from=1_000)
    store = open_intent_store(plan, {"bootstrap.servers": "c:9092"})
    assert store.last("job-1") is None
    assert log.reads == []  # nothing appended since the planning: not one record read
