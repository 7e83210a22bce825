"""The exactly-once intent store on a real topic: created compacted, read back, durable.

Records are also read by an independent client (kafka-python), and the topic's settings come
from kafka-python's DescribeConfigs, not from the code under test.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark.eos import kafka_intents
from kafka_sink.spark.eos.intents import DONE, INTENT, BatchRecord
from kafka_sink.spark.eos.kafka_intents import IntentStoreError, KafkaIntentStore
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import import_kafka_python, read_all
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
    with pytest.raises(IntentStoreError, match=r"cleanup.policy='delete'.*needs a compacted"):
        KafkaIntentStore.open({"bootstrap.servers": kafka_bootstrap}, topic)


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
