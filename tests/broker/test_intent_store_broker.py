"""The exactly-once intent store on a real topic: created compacted, read back, durable.

Records are also read by an independent client (kafka-python), and the topic's settings and
partitions come from kafka-python's admin client, not from the code under test.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator

import pytest

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.sink_errors import IntentStoreError
from kafka_sink.spark.driver.eos import kafka_intents
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, BatchRecord
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import import_kafka_python, read_all, wait_for_leaders
from tests.conftest import TopicFactory


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    kafka_intents._POSITIONS.clear()
    kafka_intents._CHECKED.clear()
    kafka_intents.close_idle()
    yield
    kafka_intents._POSITIONS.clear()
    kafka_intents._CHECKED.clear()
    kafka_intents.close_idle()


def _new_process() -> None:
    """What a restarted driver knows: nothing cached."""
    kafka_intents._POSITIONS.clear()
    kafka_intents._CHECKED.clear()
    kafka_intents.close_idle()


def _record(key: str, batch_id: int, state: str) -> BatchRecord:
    txns = tuple(
        PreparedTransaction(f"pykafka-{key}-{p}-0", 1000 + p, batch_id, (("orders", p),))
        for p in range(3)
    )
    return BatchRecord(key, batch_id, state, txns)


def _topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    kafka = import_kafka_python()
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
        )
    finally:
        admin.close()
    found: dict[str, str] = {}

    def walk(node: object) -> None:
        # kafka-python nests {type: {name: {key: {value: ...}}}}; keep each key's value.
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, dict) and "value" in value:
                    found[str(key)] = str(value["value"])
                else:
                    walk(value)

    walk(result)
    return found


def test_the_store_creates_a_compacted_topic_and_reads_the_latest_back(
    kafka_bootstrap: str,
) -> None:
    topic = f"intents-{uuid.uuid4().hex[:10]}"
    config = {"bootstrap.servers": kafka_bootstrap}
    store = KafkaIntentStore.open(config, topic)
    try:
        store.write(_record("q1", 0, INTENT))
        store.write(_record("q2", 5, INTENT))
        store.write(_record("q1", 0, DONE))
        store.write(_record("q1", 1, INTENT))
    finally:
        store.close()

    settings = _topic_config(kafka_bootstrap, topic)
    assert settings["cleanup.policy"] == "compact"
    assert settings["min.insync.replicas"] == "1"  # one broker: replication 1
    # An independent consumer sees one JSON record per step, keyed by the query.
    seen = read_all(kafka_bootstrap, topic, expected=4)
    assert [r.key for r in seen] == [b"q1", b"q2", b"q1", b"q1"]
    assert [(json.loads(r.value)["batch_id"], json.loads(r.value)["state"]) for r in seen] == [
        (0, INTENT),
        (5, INTENT),
        (0, DONE),
        (1, INTENT),
    ]

    _new_process()
    store = KafkaIntentStore.open(config, topic)
    try:
        assert store.last("q1") == _record("q1", 1, INTENT)
        assert store.last("q2") == _record("q2", 5, INTENT)
        assert store.last("q3") is None
        store.delete("q2")
        _new_process()
        assert store.last("q2") is None
    finally:
        store.close()


def test_a_recent_record_is_found_behind_thousands_of_others(kafka_bootstrap: str) -> None:
    topic = f"intents-{uuid.uuid4().hex[:10]}"
    config = {"bootstrap.servers": kafka_bootstrap}
    store = KafkaIntentStore.open(config, topic)
    store.write(_record("old", 3, DONE))
    kafka = import_kafka_python()
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap, linger_ms=5)
    other = json.dumps({"format": 1, "query_key": "x"}).encode()
    for i in range(5000):
        producer.send(topic, key=f"other-{i % 50}".encode(), value=other, partition=0)
    producer.flush()
    producer.close()
    store.write(_record("new", 9, INTENT))
    store.close()

    _new_process()
    store = KafkaIntentStore.open(config, topic)
    try:
        assert store.last("new") == _record("new", 9, INTENT)
        assert store.last("old") == _record("old", 3, DONE)  # across many fetches
    finally:
        store.close()


def test_an_existing_topic_that_deletes_old_records_is_refused(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory()  # cleanup.policy=delete, the broker's default
    with pytest.raises(IntentStoreError, match=r"cleanup.policy='delete'.*compact alone"):
        KafkaIntentStore.open({"bootstrap.servers": kafka_bootstrap}, topic)


def test_an_existing_topic_that_compacts_and_deletes_is_refused(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(configs={"cleanup.policy": "compact,delete"})
    with pytest.raises(IntentStoreError) as caught:
        KafkaIntentStore.open({"bootstrap.servers": kafka_bootstrap}, topic)
    message = str(caught.value)
    assert f"topic {topic!r} has cleanup.policy='compact,delete'" in message
    assert "--add-config cleanup.policy=compact" in message and "'intentTopic'" in message


def test_one_broker_is_warned_about_once(
    kafka_bootstrap: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka_intents, "_WARNED_SINGLE_BROKER", False)
    caplog.set_level(logging.WARNING, logger=kafka_intents.__name__)
    config = {"bootstrap.servers": kafka_bootstrap}
    for topic in (f"intents-{uuid.uuid4().hex[:10]}", f"intents-{uuid.uuid4().hex[:10]}"):
        KafkaIntentStore.open(config, topic).close()
        _new_process()
    warned = [r.getMessage() for r in caplog.records if r.name == kafka_intents.__name__]
    assert len(warned) == 1 and "cluster of 1 broker" in warned[0]


def test_added_partitions_do_not_move_a_query_s_records(kafka_bootstrap: str) -> None:
    topic = f"intents-{uuid.uuid4().hex[:10]}"
    config = {"bootstrap.servers": kafka_bootstrap}
    store = KafkaIntentStore.open(config, topic)
    try:
        store.write(_record("q", 1, INTENT))
    finally:
        store.close()
    _add_partitions(kafka_bootstrap, topic, 5)

    _new_process()  # a restarted driver sees five partitions
    store = KafkaIntentStore.open(config, topic)
    try:
        assert store.last("q") == _record("q", 1, INTENT)
        store.write(_record("q", 1, DONE))
        _new_process()
        assert store.last("q") == _record("q", 1, DONE)
    finally:
        store.close()
    seen = read_all(kafka_bootstrap, topic, expected=2)
    assert [(r.partition, r.key, json.loads(r.value)["state"]) for r in seen] == [
        (0, b"q", INTENT),
        (0, b"q", DONE),
    ]


def _add_partitions(bootstrap: str, topic: str, total: int) -> None:
    kafka = import_kafka_python()
    admin = kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_partitions({topic: kafka.admin.NewPartitions(total_count=total)})
    finally:
        admin.close()
    wait_for_leaders(bootstrap, topic, total)


def test_an_unreachable_cluster_fails_in_bounded_time_naming_the_topic() -> None:
    with pytest.raises(IntentStoreError, match=r"'pykafka-commit-intents'.*reachable"):
        KafkaIntentStore.open(
            {"bootstrap.servers": "127.0.0.1:1", "max.block.ms": "2000"}, "pykafka-commit-intents"
        )


def test_a_written_intent_survives_the_loss_of_its_leader(kafka_cluster: LocalKafka) -> None:
    topic = f"intents-{uuid.uuid4().hex[:10]}"
    config = {"bootstrap.servers": kafka_cluster.bootstrap_servers}
    store = KafkaIntentStore.open(config, topic)
    try:
        store.write(_record("q", 7, INTENT))
    finally:
        store.close()
    settings = _topic_config(kafka_cluster.bootstrap_servers, topic)
    assert settings["min.insync.replicas"] == "2"  # three brokers: replication 3
    leader = kafka_cluster.leader_of(topic)
    kafka_cluster.kill_node(leader)

    _new_process()
    store = KafkaIntentStore.open(config, topic)
    try:
        assert store.last("q") == _record("q", 7, INTENT)
        store.write(_record("q", 7, DONE))  # two in-sync replicas left: still writable
        _new_process()
        assert store.last("q") == _record("q", 7, DONE)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("replication", "min_isr"), [(1, "1"), (3, "1"), (1, "2")], ids=["rf1", "isr1", "rf1-isr2"]
)
def test_a_topic_that_one_broker_loss_could_empty_is_refused(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory, replication: int, min_isr: str
) -> None:
    topic = cluster_topic_factory(
        replication_factor=replication,
        configs={"cleanup.policy": "compact", "min.insync.replicas": min_isr},
    )
    with pytest.raises(IntentStoreError) as caught:
        KafkaIntentStore.open({"bootstrap.servers": kafka_cluster.bootstrap_servers}, topic)
    message = str(caught.value)
    assert (
        f"topic {topic!r} has replication factor {replication} and min.insync.replicas={min_isr}"
        " on a cluster of 3 brokers"
    ) in message
    assert "kafka-reassign-partitions" in message and "min.insync.replicas=2" in message


@pytest.mark.slow
def test_the_latest_intent_comes_back_right_after_its_leader_dies(
    kafka_cluster: LocalKafka,
) -> None:
    """Each round writes an intent, kills the partition's leader at once and reads back from a
    new process: a new leader that has not caught up yet must be waited for, not read short.
    (Whether a read meets such a leader is a matter of timing, so this round trip proves the
    outcome; tests/unit/admin/test_topic_log.py stages the lagging leader deterministically.)"""
    topic = f"intents-{uuid.uuid4().hex[:10]}"
    config = {"bootstrap.servers": kafka_cluster.bootstrap_servers, "max.block.ms": "60000"}
    for batch in range(3):
        store = KafkaIntentStore.open(config, topic)
        try:
            store.write(_record("q", batch, INTENT))
            leader = kafka_cluster.leader_of(topic)
            kafka_cluster.kill_node(leader)
            _new_process()
            for _ in range(5):
                assert store.last("q") == _record("q", batch, INTENT)
                _new_process()
        finally:
            store.close()
        kafka_cluster.start_node(leader)
