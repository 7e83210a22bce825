"""The local Kafka harness against itself: real brokers, checked with kafka-python.

Single node: a produce/consume round trip and the oracle's read-back. Three nodes: a replicated
topic survives the kill of its leader (new leader, data intact, the node rejoins the ISR) and a
graceful stop moves leadership away first. Lifecycle: after the context exits no JVM of ours runs
and the temporary directory is gone; a missing classpath is a clear setup error, not a hang.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_sink.testing import local_kafka
from kafka_sink.testing.local_kafka import KafkaSetupError, LocalKafka
from kafka_sink.testing.oracle import create_topic, end_offsets, read_all
from kafka_sink.testing.probe import fetch_metadata

TopicFactory = Callable[..., str]


def _produce(bootstrap: str, topic: str, values: list[bytes], **config: object) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **config)
    try:
        for i, value in enumerate(values):
            producer.send(topic, key=b"k%d" % i, value=value, headers=[("n", b"%d" % i)])
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout_s:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)
    return time.monotonic() - began


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_single_node_round_trip(kafka_bootstrap: str, topic_factory: TopicFactory) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = topic_factory(partitions=2)
    values = [b"value-%d" % i for i in range(20)]
    _produce(kafka_bootstrap, topic, values)

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000
    )
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got = [next(consumer) for _ in values]
    finally:
        consumer.close()
    assert sorted(r.value for r in got) == sorted(values)

    records = read_all(kafka_bootstrap, topic, expected=len(values))
    assert sorted(r.value for r in records) == sorted(values)
    assert [(r.partition, r.offset) for r in records] == sorted(
        (r.partition, r.offset) for r in records
    )
    assert all(r.headers == [("n", r.key[1:])] for r in records if r.key is not None)
    assert sum(end_offsets(kafka_bootstrap, topic).values()) == len(values)


def test_read_all_reports_missing_records(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory()
    _produce(kafka_bootstrap, topic, [b"only"])
    with pytest.raises(TimeoutError, match="read 1 records"):
        read_all(kafka_bootstrap, topic, expected=2, timeout_s=2)


def test_killing_the_leader_elects_a_new_one_and_keeps_the_data(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory
) -> None:
    topic = cluster_topic_factory(1, 3, {"min.insync.replicas": "2"})
    before = [b"before-%d" % i for i in range(50)]
    _produce(kafka_cluster.bootstrap_servers, topic, before)
    leader = kafka_cluster.leader_of(topic)
    assert leader in kafka_cluster.node_ids

    kafka_cluster.kill_node(leader)
    assert kafka_cluster.returncode(leader) == -9
    _wait_for(
        lambda: kafka_cluster.leader_of(topic) not in (-1, leader), 30, "a new partition leader"
    )
    assert [
        r.value for r in read_all(kafka_cluster.bootstrap_servers, topic, expected=50)
    ] == before

    # Two replicas left: acks=all still meets min.insync.replicas=2.
    after = [b"after-%d" % i for i in range(10)]
    _produce(kafka_cluster.bootstrap_servers, topic, after)

    kafka_cluster.start_node(leader)

    def back_in_isr() -> bool:
        partition = kafka_cluster.metadata([topic]).topics[topic].partitions[0]
        return leader in partition.isr_nodes

    _wait_for(back_in_isr, 30, f"node {leader} back in the ISR")
    records = read_all(kafka_cluster.bootstrap_servers, topic, expected=60)
    assert [r.value for r in records] == before + after
    assert [r.offset for r in records] == list(range(60))


def test_graceful_stop_moves_leadership_first(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory
) -> None:
    topic = cluster_topic_factory(1, 3)
    _produce(kafka_cluster.bootstrap_servers, topic, [b"x"])
    leader = kafka_cluster.leader_of(topic)

    kafka_cluster.stop_node(leader)
    # Controlled shutdown hands leadership over before the process exits.
    assert kafka_cluster.returncode(leader) in (0, 143)
    assert kafka_cluster.leader_of(topic) not in (-1, leader)
    assert leader not in kafka_cluster.running_node_ids
    assert [r.value for r in read_all(kafka_cluster.bootstrap_servers, topic, expected=1)] == [b"x"]

    kafka_cluster.start_node(leader)
    assert sorted(kafka_cluster.metadata().brokers) == kafka_cluster.node_ids


def test_nothing_outlives_the_context() -> None:
    with LocalKafka(nodes=1) as kafka:
        pids = [kafka.pid_of(i) for i in kafka.node_ids]
        workdir = kafka.workdir
        assert workdir is not None
        assert workdir.is_dir()
        assert all(pid is not None and _alive(pid) for pid in pids)
    assert workdir is not None
    assert not workdir.exists()
    assert not any(pid is not None and _alive(pid) for pid in pids)
    assert kafka.running_node_ids == []


def test_proxied_listener_keeps_clients_behind_the_proxy() -> None:
    with LocalKafka(nodes=1, proxied=True) as kafka:
        proxy = kafka.proxy(1)
        assert kafka.proxied_bootstrap_servers == proxy.address
        # Metadata fetched through the proxy advertises the proxy, so clients never bypass it.
        view = fetch_metadata(proxy.host, proxy.port)
        assert view.brokers == {1: (proxy.host, proxy.port)}

        bootstrap = kafka.proxied_bootstrap_servers
        create_topic(bootstrap, "through-proxy")
        _produce(bootstrap, "through-proxy", [b"a", b"b"])
        assert proxy.accepted_count >= 2
        assert [r.value for r in read_all(kafka.bootstrap_servers, "through-proxy")] == [b"a", b"b"]

        proxy.pause()
        with pytest.raises(OSError):
            fetch_metadata(proxy.host, proxy.port, timeout_s=0.5)
        proxy.resume()
        assert fetch_metadata(proxy.host, proxy.port).brokers == view.brokers


def test_sasl_listener_accepts_plain_and_scram_users() -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    def producer(bootstrap: str, mechanism: str, password: str) -> KafkaProducer:
        return KafkaProducer(
            bootstrap_servers=bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username="alice",
            sasl_plain_password=password,
            acks="all",
            max_block_ms=5000,
        )

    with LocalKafka(nodes=1, sasl_users={"alice": "alice-secret"}) as kafka:
        bootstrap = kafka.sasl_bootstrap_servers
        assert "alice-secret" not in repr(kafka)
        create_topic(kafka.bootstrap_servers, "sasl")
        mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        for mechanism in mechanisms:
            client = producer(bootstrap, mechanism, "alice-secret")
            try:
                client.send("sasl", mechanism.encode()).get(timeout=30)
            finally:
                client.close(timeout=10)
        # kafka-python retries a failed authentication until max_block_ms; pinning api_version
        # skips its 30 s version probe in the constructor.
        rejected = KafkaProducer(
            bootstrap_servers=bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="alice",
            sasl_plain_password="wrong",
            api_version=(2, 8),
            max_block_ms=3000,
        )
        try:
            with pytest.raises(KafkaError):
                rejected.send("sasl", b"x").get(timeout=10)
        finally:
            rejected.close(timeout=5)
        values = [r.value for r in read_all(kafka.bootstrap_servers, "sasl", expected=3)]
        assert values == [m.encode() for m in mechanisms]


def test_a_lost_port_race_is_retried_with_fresh_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    real_free_ports = local_kafka.free_ports
    picked: list[list[int]] = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)

        def free_ports(count: int) -> list[int]:
            ports = real_free_ports(count)
            if not picked:
                ports[0] = taken.getsockname()[1]  # someone else got there first
            picked.append(ports)
            return ports

        monkeypatch.setattr(local_kafka, "free_ports", free_ports)
        with LocalKafka(nodes=1) as kafka:
            assert len(picked) == 2
            assert kafka.bootstrap_servers == f"127.0.0.1:{picked[1][0]}"
            assert kafka.metadata().brokers == {1: ("127.0.0.1", picked[1][0])}


def test_missing_jars_is_a_setup_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaSetupError, match="make setup"):
        LocalKafka(jars_dir=tmp_path).start()


def test_missing_java_is_a_setup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(KafkaSetupError, match=r"`java` not found.*JDK 17"):
        LocalKafka().start()
