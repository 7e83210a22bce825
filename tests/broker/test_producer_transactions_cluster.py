"""Transactions through node failures on the session's 3-node cluster (replication 3,
min.insync.replicas 2; the transaction log is replicated the same way).

The transaction coordinator is killed between the last acknowledged record and the commit, and a
partition leader is killed while the transaction is being written: the commit must still
succeed (the producer finds the new coordinator, retries what it must), and a read_committed
consumer must then see every record of the transaction, and nothing of it before.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from txn_scenarios import new_id, values

from kafka_sink import KafkaProducer
from kafka_sink.admin.transactions import abort_transactions, list_transactions
from kafka_sink.testing.local_kafka import LocalKafka

TopicFactory = Callable[..., str]

pytestmark = pytest.mark.slow


def _producer(kafka_cluster: LocalKafka) -> KafkaProducer:
    return KafkaProducer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "transactional.id": new_id(),
            "request.timeout.ms": 10000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
        }
    )


def _topic(cluster_topic_factory: TopicFactory) -> str:
    return cluster_topic_factory(
        partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"}
    )


def test_commit_survives_the_loss_of_the_transaction_coordinator(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory
) -> None:
    topic = _topic(cluster_topic_factory)
    expected = {b"r-%d" % i for i in range(300)}
    with _producer(kafka_cluster) as producer:
        producer.init_transactions(timeout=60)
        tm = producer._txn
        assert tm is not None and tm.coordinator is not None
        producer.begin_transaction()
        for i in range(300):
            producer.send(topic, b"r-%d" % i, partition=i % 3)
        producer.flush(60)
        assert values(kafka_cluster.bootstrap_servers, topic, "read_committed") == set()
        coordinator = tm.coordinator
        kafka_cluster.kill_node(coordinator)
        producer.commit_transaction(timeout=120)
        assert tm.coordinator != coordinator  # it found the new one
    assert values(kafka_cluster.bootstrap_servers, topic, "read_committed") == expected


def test_commit_survives_the_loss_of_a_partition_leader_mid_transaction(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory
) -> None:
    topic = _topic(cluster_topic_factory)
    with _producer(kafka_cluster) as producer:
        producer.init_transactions(timeout=60)
        tm = producer._txn
        assert tm is not None
        # A partition whose leader is not the coordinator: only the data path fails over.
        partition = next(p for p in range(3) if kafka_cluster.leader_of(topic, p) != tm.coordinator)
        leader = kafka_cluster.leader_of(topic, partition)
        producer.begin_transaction()
        futures = [producer.send(topic, b"a-%d" % i, partition=partition) for i in range(200)]
        producer.flush(60)
        kafka_cluster.kill_node(leader)
        futures += [producer.send(topic, b"b-%d" % i, partition=partition) for i in range(200)]
        producer.commit_transaction(timeout=120)
        assert all(f.exception(0) is None for f in futures)
    expected = {b"a-%d" % i for i in range(200)} | {b"b-%d" % i for i in range(200)}
    assert values(kafka_cluster.bootstrap_servers, topic, "read_committed") == expected


def test_listing_and_sweeping_survive_the_loss_of_the_transaction_coordinator(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory
) -> None:
    # What the exactly-once sink's sweep does after a broker died: list the prefix's
    # transactions (every broker is asked; the dead one must not stall the listing until its
    # deadline) and abort the open one through its new coordinator.
    topic = _topic(cluster_topic_factory)
    prefix = new_id("sweep") + "-"
    config = {
        "bootstrap.servers": kafka_cluster.bootstrap_servers,
        "transactional.id": prefix + "0",
        "request.timeout.ms": 5000,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 500,
    }
    producer = KafkaProducer(config)
    try:
        producer.init_transactions(timeout=60)
        tm = producer._txn
        assert tm is not None and tm.coordinator is not None
        producer.begin_transaction()
        for i in range(50):
            producer.send(topic, b"open-%d" % i, partition=i % 3)
        producer.flush(60)
        kafka_cluster.kill_node(tm.coordinator)
        admin = {k: v for k, v in config.items() if k != "transactional.id"}
        # Until the new coordinator has loaded the transaction log partition, the live brokers
        # may answer without the transaction (the sweep then finds it next time); each listing
        # must still come back without waiting for the dead broker.
        deadline = time.monotonic() + 60
        while True:
            started = time.monotonic()
            listed = list_transactions(admin, prefix, timeout=60)
            assert time.monotonic() - started < 30, "the listing waited for the dead broker"
            if listed or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert [(t.transactional_id, t.state) for t in listed] == [(prefix + "0", "Ongoing")]
        assert listed[0].coordinator_id != tm.coordinator
        aborted = abort_transactions(admin, prefix, timeout=60)
        assert [t.transactional_id for t in aborted] == [prefix + "0"]
        # The abort is recorded at once; its markers land a moment later.
        deadline = time.monotonic() + 60
        after = list_transactions(admin, prefix, timeout=60)
        while [t.state for t in after] == ["PrepareAbort"] and time.monotonic() < deadline:
            time.sleep(0.5)
            after = list_transactions(admin, prefix, timeout=60)
        assert [t.state for t in after] == ["CompleteAbort"]
    finally:
        producer.close(0)
    assert values(kafka_cluster.bootstrap_servers, topic, "read_committed") == set()
