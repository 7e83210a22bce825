"""The network layer against a real Kafka broker: connect, negotiate, metadata, produce, errors.

The SASL/TLS tests start their own single-node broker (module scope) whose extra listener speaks
SASL_SSL with a throwaway CA, PLAIN users in the JAAS config and SCRAM users created through the
admin API.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafka_sink.clock import SYSTEM_CLOCK
from kafka_sink.errors import KafkaTimeoutError, SaslAuthenticationError
from kafka_sink.net.connection import ConnectionState
from kafka_sink.net.metadata import Metadata
from kafka_sink.net.network_client import (
    ClientRequest,
    ClientResponse,
    NetworkClient,
    NetworkConfig,
)
from kafka_sink.net.tls import TlsConfig
from kafka_sink.records.batch import RecordBatchBuilder
from kafka_sink.testing.local_kafka import KafkaSetupError, KafkaStartError, LocalKafka
from kafka_sink.testing.oracle import create_topic, read_all
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import MetadataRequest, ProduceRequest, ProduceResponse

TopicFactory = Callable[..., str]

pytestmark = pytest.mark.broker


def _client(bootstrap: str, **overrides: object) -> tuple[NetworkClient, Metadata]:
    metadata = Metadata(retry_backoff_ms=50)
    config = NetworkConfig(bootstrap_servers=bootstrap, client_id="net-broker-test", **overrides)  # type: ignore[arg-type]
    client = NetworkClient(config, metadata, SYSTEM_CLOCK)
    client.bootstrap(SYSTEM_CLOCK.now_ms())
    return client, metadata


@pytest.fixture
def net(kafka_bootstrap: str) -> Iterator[tuple[NetworkClient, Metadata]]:
    client, metadata = _client(kafka_bootstrap)
    yield client, metadata
    client.close()
    metadata.close()


def _poll_until(client: NetworkClient, done: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"condition not reached in {timeout_s}s: {client!r}"
        client.poll(100, SYSTEM_CLOCK.now_ms())


def _await_metadata(client: NetworkClient, metadata: Metadata, topic: str) -> None:
    metadata.add_topic(topic)
    metadata.request_update()
    _poll_until(client, lambda: metadata.partitions_for(topic) is not None)


def _ready(client: NetworkClient, node_id: int) -> None:
    _poll_until(client, lambda: client.ready(node_id, SYSTEM_CLOCK.now_ms()))


def test_connect_negotiates_versions_and_fetches_metadata(
    net: tuple[NetworkClient, Metadata], topic_factory: TopicFactory
) -> None:
    client, metadata = net
    topic = topic_factory(partitions=3)
    _await_metadata(client, metadata, topic)

    parts = metadata.partitions_for(topic)
    assert parts is not None
    assert [p.partition for p in parts] == [0, 1, 2]
    assert all(p.leader_id >= 0 and p.leader_epoch >= 0 for p in parts)
    leader = metadata.leader_for(topic, 0)
    assert leader is not None and leader.node_id >= 0
    assert metadata.topic_error(topic) is None
    assert not metadata.fetch().is_bootstrap

    _ready(client, leader.node_id)
    assert client.connection_state(leader.node_id) is ConnectionState.READY
    # Kafka 4.x speaks everything this client does at the client's highest version.
    assert client.api_version(leader.node_id, ApiKey.PRODUCE) == 12
    assert client.api_version(leader.node_id, ApiKey.METADATA) == 12
    assert client.api_version(leader.node_id, ApiKey.API_VERSIONS) == 4


def test_unknown_topic_is_reported_as_a_topic_error(net: tuple[NetworkClient, Metadata]) -> None:
    client, metadata = net
    topic = "net-missing-topic-never-created"
    metadata.add_topic(topic)
    version = metadata.request_update()
    _poll_until(client, lambda: metadata.version > version)
    error = metadata.topic_error(topic)
    assert error is not None
    assert type(error).__name__ == "UnknownTopicOrPartitionError"
    assert metadata.partitions_for(topic) is None


def _produce(
    client: NetworkClient,
    node_id: int,
    topic: str,
    partition: int,
    *,
    acks: int,
    values: list[bytes],
) -> ClientResponse:
    builder = RecordBatchBuilder()
    now_wall = SYSTEM_CLOCK.wall_ms()
    for i, value in enumerate(values):
        assert builder.append(now_wall, f"k{i}".encode(), value, [("h", b"v")]) is not None
    records = builder.seal().encode()
    request = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                topic, [ProduceRequest.PartitionProduceData(partition, records)]
            )
        ],
    )
    done: list[ClientResponse] = []
    client_request = ClientRequest(
        node_id, request, None, SYSTEM_CLOCK.now_ms(), done.append, expect_response=acks != 0
    )
    client.send(client_request, SYSTEM_CLOCK.now_ms())
    _poll_until(client, lambda: bool(done))
    return done[0]


def test_produce_record_batch_and_read_it_back(
    net: tuple[NetworkClient, Metadata], kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    client, metadata = net
    topic = topic_factory(partitions=2)
    _await_metadata(client, metadata, topic)
    leader = metadata.leader_for(topic, 1)
    assert leader is not None
    _ready(client, leader.node_id)

    values = [f"value-{i}".encode() for i in range(5)]
    result = _produce(client, leader.node_id, topic, 1, acks=-1, values=values)

    assert not result.disconnected and result.error is None
    response = result.response
    assert isinstance(response, ProduceResponse)
    partition_response = response.responses[0].partition_responses[0]
    assert partition_response.index == 1
    assert partition_response.error_code == 0
    assert partition_response.base_offset == 0
    assert result.request.api_version == 12

    records = read_all(kafka_bootstrap, topic, expected=5)
    assert [(r.partition, r.offset, r.key, r.value) for r in records] == [
        (1, i, f"k{i}".encode(), values[i]) for i in range(5)
    ]
    assert records[0].headers == [("h", b"v")]


def test_acks_zero_completes_on_write(
    net: tuple[NetworkClient, Metadata], kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    client, metadata = net
    topic = topic_factory()
    _await_metadata(client, metadata, topic)
    leader = metadata.leader_for(topic, 0)
    assert leader is not None
    _ready(client, leader.node_id)

    result = _produce(client, leader.node_id, topic, 0, acks=0, values=[b"fire", b"forget"])

    assert result.response is None and not result.disconnected and result.error is None
    assert client.in_flight_count(leader.node_id) == 0
    assert [r.value for r in read_all(kafka_bootstrap, topic, expected=2)] == [b"fire", b"forget"]


def test_pipelined_requests_complete_in_send_order(
    net: tuple[NetworkClient, Metadata], topic_factory: TopicFactory
) -> None:
    client, metadata = net
    topic = topic_factory()
    _await_metadata(client, metadata, topic)
    leader = metadata.leader_for(topic, 0)
    assert leader is not None
    _ready(client, leader.node_id)

    order: list[int] = []
    for i in range(5):
        assert client.can_send_request(leader.node_id, SYSTEM_CLOCK.now_ms())
        request = ClientRequest(
            leader.node_id,
            MetadataRequest.for_topics([topic], allow_auto_topic_creation=False),
            None,
            SYSTEM_CLOCK.now_ms(),
            lambda r, i=i: order.append(i),
        )
        client.send(request, SYSTEM_CLOCK.now_ms())
    # max.in.flight.requests.per.connection = 5: the sixth must wait.
    assert client.in_flight_count(leader.node_id) == 5
    assert not client.can_send_request(leader.node_id, SYSTEM_CLOCK.now_ms())
    _poll_until(client, lambda: len(order) == 5)
    assert order == [0, 1, 2, 3, 4]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_refused_bootstrap_is_an_error_not_a_hang() -> None:
    client, metadata = _client(f"127.0.0.1:{_closed_port()}", reconnect_backoff_max_ms=200)
    try:
        started = time.monotonic()
        deadline = started + 5
        while metadata.last_error() is None and time.monotonic() < deadline:
            client.poll(100, SYSTEM_CLOCK.now_ms())
        error = metadata.last_error()
        assert error is not None
        assert "could not be established" in str(error)
        assert client.is_connection_failed(-1)
        with pytest.raises(KafkaTimeoutError, match="could not be established"):
            metadata.await_update(0, 50)
    finally:
        client.close()


def test_unresponsive_bootstrap_times_out_within_setup_timeout() -> None:
    # A listening socket that never accepts: TCP completes (kernel backlog) but the broker never
    # answers ApiVersions, so only the connection-setup timeout can end the attempt.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        client, metadata = _client(
            f"127.0.0.1:{port}",
            socket_connection_setup_timeout_ms=300,
            socket_connection_setup_timeout_max_ms=300,
        )
        try:
            started = time.monotonic()
            while metadata.last_error() is None and time.monotonic() - started < 5:
                client.poll(1000, SYSTEM_CLOCK.now_ms())
            elapsed = time.monotonic() - started
            error = metadata.last_error()
            assert error is not None
            assert "was not ready within" in str(error)
            assert elapsed < 4
        finally:
            client.close()


# ------------------------------------------------------------------------- SASL and TLS

_JAAS_PLAIN = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'
)
_JAAS_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def _make_certs(directory: Path) -> tuple[Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1; returns (ca.pem, keystore.pem)."""
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make test certificates", pytrace=False)

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
        "-keyout", "ca.key", "-out", "ca.pem")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", "server.key", "-out", "server.csr")  # fmt: skip
    (directory / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem")  # fmt: skip
    keystore = directory / "keystore.pem"
    keystore.write_text(
        (directory / "server.key").read_text() + (directory / "server.pem").read_text()
    )
    return directory / "ca.pem", keystore


@dataclass
class SecureKafka:
    plaintext: str  # for the test's own admin/oracle clients
    sasl_ssl: str  # the listener under test (behind a TCP proxy, advertised as such)
    ca_file: Path


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    """A second broker whose extra listener speaks SASL_SSL (PLAIN, SCRAM-SHA-256/512)."""
    ca_file, keystore = _make_certs(tmp_path_factory.mktemp("certs"))
    config = {
        "listener.security.protocol.map": (
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:SASL_SSL"
        ),
        "listener.name.proxied.ssl.keystore.type": "PEM",
        "listener.name.proxied.ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.proxied.plain.sasl.jaas.config": _JAAS_PLAIN,
        "listener.name.proxied.scram-sha-256.sasl.jaas.config": _JAAS_SCRAM,
        "listener.name.proxied.scram-sha-512.sasl.jaas.config": _JAAS_SCRAM,
    }
    try:
        kafka = LocalKafka(proxied=True, broker_config=config)
        kafka.__enter__()
    except (KafkaSetupError, KafkaStartError) as exc:
        pytest.fail(f"no SASL_SSL Kafka broker for the tests: {exc}", pytrace=False)
    try:
        from kafka.admin import KafkaAdminClient
        from kafka.admin._users import UserScramCredentialUpsertion

        admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
        try:
            # One alteration per request: the broker refuses two for the same user at once.
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                result = admin.alter_user_scram_credentials(
                    [UserScramCredentialUpsertion("bob", mechanism, "bob-secret")]
                )
                assert result == {"bob": None}
        finally:
            admin.close()
        yield SecureKafka(kafka.bootstrap_servers, kafka.proxied_bootstrap_servers, ca_file)
    finally:
        kafka.__exit__(None, None, None)


def _secure_client(
    kafka: SecureKafka, mechanism: str, user: str, password: str, ca_file: Path | None = None
) -> tuple[NetworkClient, Metadata]:
    return _client(
        kafka.sasl_ssl,
        security_protocol="SASL_SSL",
        sasl_mechanism=mechanism,
        sasl_username=user,
        sasl_password=password,
        tls=TlsConfig(truststore_location=str(ca_file or kafka.ca_file)),
    )


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "bob", "bob-secret"),
        ("SCRAM-SHA-512", "bob", "bob-secret"),
    ],
)
def test_sasl_ssl_produce_and_read_back(
    secure_kafka: SecureKafka, mechanism: str, user: str, password: str
) -> None:
    topic = f"net-secure-{mechanism.lower()}"
    create_topic(secure_kafka.plaintext, topic)
    client, metadata = _secure_client(secure_kafka, mechanism, user, password)
    try:
        _await_metadata(client, metadata, topic)
        leader = metadata.leader_for(topic, 0)
        assert leader is not None
        assert leader.address == secure_kafka.sasl_ssl  # the SASL_SSL listener, not PLAINTEXT
        _ready(client, leader.node_id)
        result = _produce(client, leader.node_id, topic, 0, acks=-1, values=[b"secure"])
        assert result.error is None and not result.disconnected
        assert [r.value for r in read_all(secure_kafka.plaintext, topic, expected=1)] == [b"secure"]
    finally:
        client.close()


def test_sasl_wrong_password_is_a_fatal_metadata_error(secure_kafka: SecureKafka) -> None:
    client, metadata = _secure_client(secure_kafka, "SCRAM-SHA-256", "bob", "not-the-password")
    try:
        deadline = time.monotonic() + 20
        while metadata.last_error() is None and time.monotonic() < deadline:
            client.poll(100, SYSTEM_CLOCK.now_ms())
        with pytest.raises(SaslAuthenticationError, match="invalid credentials") as info:
            metadata.await_update(0, 1_000)
        assert "not-the-password" not in str(info.value)
    finally:
        client.close()


def test_tls_with_an_untrusted_certificate_fails_clearly(
    secure_kafka: SecureKafka, tmp_path: Path
) -> None:
    other_ca, _keystore = _make_certs(tmp_path)
    client, metadata = _secure_client(secure_kafka, "PLAIN", "alice", "alice-secret", other_ca)
    try:
        deadline = time.monotonic() + 20
        while metadata.last_error() is None and time.monotonic() < deadline:
            client.poll(100, SYSTEM_CLOCK.now_ms())
        assert "CERTIFICATE_VERIFY_FAILED" in str(metadata.last_error())
        assert metadata.version == 0
    finally:
        client.close()
