"""The harness's pure parts, without a JVM: backend choice, rendering, the Metadata probe codec."""

from __future__ import annotations

import struct
from pathlib import Path
from string import Template

import pytest

from kafka_sink.testing import backends, local_kafka
from kafka_sink.testing.local_kafka import KafkaSetupError, LocalKafka, find_conf_dir
from kafka_sink.testing.probe import _decode, _request, parse_bootstrap


def test_external_bootstrap_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka-a:9092,kafka-b:9092")
    monkeypatch.delenv("KAFKA_TEST_BACKEND", raising=False)
    with backends.single_node_kafka() as (backend, bootstrap):
        assert (backend, bootstrap) == ("external", "kafka-a:9092,kafka-b:9092")


def test_unknown_forced_backend_is_a_setup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_TEST_BACKEND", "zookeeper")
    with pytest.raises(KafkaSetupError, match="KAFKA_TEST_BACKEND"), backends.single_node_kafka():
        pass


def test_docker_detection_is_false_when_the_engine_does_not_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import docker

    def unreachable(**_: object) -> object:
        raise docker.errors.DockerException("no engine")

    monkeypatch.setattr(docker, "from_env", unreachable)
    assert backends.docker_engine_available("any/image:1") is False


@pytest.mark.parametrize("template", ["broker-single.properties", "broker-cluster.properties"])
def test_templates_render_every_placeholder(template: str) -> None:
    text = Template((find_conf_dir() / template).read_text(encoding="utf-8")).substitute(
        node_id=2,
        port=1001,
        controller_port=1002,
        quorum_voters="1@127.0.0.1:1,2@127.0.0.1:1002",
        log_dir="/data",
        extra_listeners="",
        extra_advertised="",
        extra_protocol_map="",
    )
    props = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#")
    )
    assert props["node.id"] == "2"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:1001,CONTROLLER://127.0.0.1:1002"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:1,2@127.0.0.1:1002"
    assert props["log.cleaner.dedupe.buffer.size"] == "8388608"
    assert props["offsets.topic.num.partitions"] == "1"
    assert "$" not in text


def test_jvm_flags_per_profile() -> None:
    test = LocalKafka(nodes=3)
    assert test.heap == "384m"
    assert test._jvm_flags()[:2] == ["-Xms192m", "-Xmx384m"]
    assert "-XX:TieredStopAtLevel=1" in test._jvm_flags()
    bench = LocalKafka(jvm_profile="bench")
    assert bench._jvm_flags()[:2] == ["-Xms1g", "-Xmx1g"]
    assert "-XX:+UseG1GC" in bench._jvm_flags()
    assert "-XX:TieredStopAtLevel=1" not in bench._jvm_flags()


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="nodes"):
        LocalKafka(nodes=2)
    with pytest.raises(ValueError, match="plain tokens"):
        LocalKafka(sasl_users={"alice": 'pass"word'})


def test_mtls_listener_needs_the_flag_and_a_start() -> None:
    with pytest.raises(RuntimeError, match=r"mtls=True"):
        _ = LocalKafka().mtls_bootstrap_servers
    with pytest.raises(RuntimeError, match="must be started"):
        _ = LocalKafka(mtls=True).pki


def test_jars_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "kafka_2.13-4.3.1.jar").write_bytes(b"")
    monkeypatch.setenv("KAFKA_JARS_DIR", str(tmp_path))
    assert local_kafka.find_jars_dir() == tmp_path.resolve()
    monkeypatch.setenv("KAFKA_JARS_DIR", str(tmp_path / "missing"))
    with pytest.raises(KafkaSetupError, match="make setup"):
        local_kafka.find_jars_dir()


def test_kafka_uuids_never_start_with_a_dash() -> None:
    ids = {local_kafka._kafka_uuid() for _ in range(500)}
    assert len(ids) == 500
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)


def test_parse_bootstrap() -> None:
    assert parse_bootstrap(" a:1, b:2 ,") == [("a", 1), ("b", 2)]
    with pytest.raises(ValueError):
        parse_bootstrap(",")


def _str(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text)) + text.encode()


def test_probe_request_and_response_codec() -> None:
    request = _request(7, ["t"])
    # size, api_key=3 (Metadata), version 4, correlation id 7
    assert struct.unpack_from(">ihhi", request) == (len(request) - 4, 3, 4, 7)
    assert request.endswith(_str("t") + b"\x00")

    body = struct.pack(">ii", 7, 0)  # correlation id, throttle_time_ms
    body += (
        struct.pack(">i", 1) + struct.pack(">i", 1) + _str("h") + struct.pack(">i", 9) + _str(None)
    )
    body += _str("cid") + struct.pack(">i", 1)  # cluster id, controller id
    body += struct.pack(">i", 1) + struct.pack(">h", 0) + _str("t") + b"\x00"
    body += struct.pack(">i", 1) + struct.pack(">hii", 0, 0, 1)
    body += struct.pack(">iii", 2, 1, 2) + struct.pack(">ii", 1, 1)
    view = _decode(body, 7)
    assert view.brokers == {1: ("h", 9)}
    assert view.controller_id == 1
    partition = view.topics["t"].partitions[0]
    assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (1, (1, 2), (1,))
    with pytest.raises(ValueError):
        _decode(body[:-3], 7)
