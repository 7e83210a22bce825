"""Leader failure on a 3-node cluster (replication 3, acks=all, idempotence on by default).

A leader is killed (or restarted) while records stream in. Every future must resolve, and what
kafka-python reads back must be exactly the acknowledged records, each once, at the offsets the
futures reported, in send order per partition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kafka_sink import KafkaProducer
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import read_all

TopicFactory = Callable[..., str]

RECORDS = 500_000
PARTITIONS = 3


def _run_with_fault(kafka_cluster: LocalKafka, topic: str, fault: Callable[[int], None]) -> None:
    leader = kafka_cluster.leader_of(topic, 0)
    producer = KafkaProducer(
        {
            "bootstrap.servers": kafka_cluster.bootstrap_servers,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 65536,
            "request.timeout.ms": 10000,
        }
    )
    futures = []
    fault_done = threading.Event()
    went_down = threading.Event()
    down_at: list[int] = []

    def mark_down() -> None:
        down_at.append(len(futures))
        went_down.set()

    padding = b"." * 88
    start = time.monotonic()
    with producer:
        for i in range(RECORDS):
            futures.append(producer.send(topic, b"%08d" % i + padding, key=b"k%d" % (i % 1000)))
            if i == RECORDS // 3:
                threading.Thread(
                    target=lambda: (fault(leader, mark_down), fault_done.set())
                ).start()
            elif i == 2 * RECORDS // 3:
                # send() only queues, so without this pause a fast run can queue every record
                # before a graceful stop finishes: the last third goes out after the leader left.
                assert went_down.wait(120), "the leader did not go down"
        producer.flush(180)
        assert fault_done.wait(120)
    elapsed = time.monotonic() - start
    # The leader really went down while records were still being sent.
    assert down_at and down_at[0] < RECORDS, down_at
    assert all(f.done() for f in futures)
    failed = [f.exception(0) for f in futures if f.failed()]
    assert failed == [], f"{len(failed)} failed, first: {failed[:1]}"
    acked = {}
    for i, f in enumerate(futures):
        md = f.get(0)
        acked[(md.partition, md.offset)] = i
    assert len(acked) == RECORDS  # distinct offsets

    records = read_all(kafka_cluster.bootstrap_servers, topic, expected=RECORDS, timeout_s=120)
    assert len(records) == RECORDS, f"read {len(records)} records, {RECORDS} acknowledged"
    read_ids = [int(r.value[:8]) for r in records]
    assert len(set(read_ids)) == RECORDS  # once each
    for r, i in zip(records, read_ids, strict=True):
        assert acked[(r.partition, r.offset)] == i
    last: dict[int, int] = {}
    for r, i in zip(records, read_ids, strict=True):
        assert i > last.get(r.partition, -1)
        last[r.partition] = i
    print(f"{RECORDS} records through a leader fault in {elapsed:.1f} s (down at {down_at[0]})")


def test_kill_leader_mid_run(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory
) -> None:
    topic = cluster_topic_factory(
        partitions=PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"}
    )

    def kill(node_id: int, mark_down: Callable[[], None]) -> None:
        kafka_cluster.kill_node(node_id)
        mark_down()

    _run_with_fault(kafka_cluster, topic, kill)


def test_restart_leader_mid_run(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory
) -> None:
    topic = cluster_topic_factory(
        partitions=PARTITIONS, replication_factor=3, configs={"min.insync.replicas": "2"}
    )

    def restart(node_id: int, mark_down: Callable[[], None]) -> None:
        kafka_cluster.stop_node(node_id)
        mark_down()
        time.sleep(1)
        kafka_cluster.start_node(node_id)

    _run_with_fault(kafka_cluster, topic, restart)
