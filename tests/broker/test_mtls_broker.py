"""Mutual TLS against a real broker: a listener with ``ssl.client.auth=required``.

One single-node broker for the module (``LocalKafka(mtls=True)``: PEM keystore and truststore on
an SSL listener that demands a client certificate signed by the test CA; topics are created and
read back over its PLAINTEXT listener or, independently, by kafka-python over the same mTLS
listener). The producer presents its key as a PEM file or inline PEM, plain or encrypted; a
certificate from an unknown CA, or none at all, must fail at once with an
:class:`~kafka_sink.errors.SslAuthenticationError` that names the broker and says the certificate
was rejected, without a secret in the message or the logs.
"""

from __future__ import annotations

import logging
import re
import ssl
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from kafka_sink import KafkaProducer
from kafka_sink.errors import SslAuthenticationError
from kafka_sink.net.tls import TlsConfig
from kafka_sink.testing.certs import TestPki
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, end_offsets, import_kafka_python, read_all
from tests.conftest import running

pytestmark = pytest.mark.broker

_ROGUE_KEY_PASSWORD = "rogue-key-pw-do-not-leak"
# A send that cannot authenticate must fail on the first handshake; these only bound the worst
# case so that a regression shows up as a failure, not as a hang.
_MAX_BLOCK_MS = 10_000
_FAIL_WITHIN_S = 8.0


@pytest.fixture(scope="module")
def mtls_kafka() -> Iterator[LocalKafka]:
    yield from running(LocalKafka(nodes=1, heap="256m", mtls=True), "mutual-TLS Kafka broker")


@pytest.fixture
def topic(mtls_kafka: LocalKafka) -> str:
    name = f"mtls-{uuid.uuid4().hex[:10]}"
    create_topic(mtls_kafka.bootstrap_servers, name)
    return name


def _config(kafka: LocalKafka, ssl_keys: Mapping[str, str]) -> dict[str, str]:
    config = {
        "bootstrap.servers": kafka.mtls_bootstrap_servers,
        "security.protocol": "SSL",
        "max.block.ms": str(_MAX_BLOCK_MS),
        "request.timeout.ms": "10000",
        "delivery.timeout.ms": "20000",
    }
    return {**config, **ssl_keys}


def _pem_blocks(path: Path) -> list[str]:
    text = path.read_text()
    return re.findall(r"-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----\n?", text, re.DOTALL)


def _encrypted(key_pem: str, password: str) -> str:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode()),
    ).decode()


def _key_body_lines(key_pem: str) -> list[str]:
    return [line for line in key_pem.splitlines() if line and not line.startswith("-----")]


def _produce(config: dict[str, str], topic: str, values: list[bytes]) -> list[int]:
    with KafkaProducer(config) as producer:
        futures = [producer.send(topic, value) for value in values]
        producer.flush(30)
    return [f.get(0).offset for f in futures]


def _read_over_mtls(kafka: LocalKafka, topic: str, expected: int) -> list[bytes]:
    """kafka-python over the mutual-TLS listener, with the trusted client certificate."""
    pki = kafka.pki
    kafka_python = import_kafka_python()
    consumer = kafka_python.KafkaConsumer(
        bootstrap_servers=kafka.mtls_bootstrap_servers,
        security_protocol="SSL",
        ssl_cafile=str(pki.ca),
        ssl_certfile=str(pki.client_cert),
        ssl_keyfile=str(pki.client_key),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    values: list[bytes] = []
    try:
        tp = kafka_python.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 30
        while len(values) < expected:
            assert time.monotonic() < deadline, f"read {len(values)} of {expected} over mTLS"
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
    finally:
        consumer.close()
    return values


# ------------------------------------------------------------------------- accepted clients


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain-key", "encrypted-key"])
def test_pem_files_keystore_produces_over_mutual_tls(
    mtls_kafka: LocalKafka, topic: str, tmp_path: Path, encrypted: bool
) -> None:
    pki = mtls_kafka.pki
    keys = {"ssl.truststore.location": str(pki.ca), "ssl.keystore.type": "PEM"}
    if encrypted:
        # One file with the encrypted key and its chain, opened with ssl.key.password.
        keystore = tmp_path / "client-keystore-encrypted.pem"
        keystore.write_text(pki.client_key_encrypted.read_text() + pki.client_cert.read_text())
        keys |= {"ssl.keystore.location": str(keystore), "ssl.key.password": pki.key_password}
    else:
        keys["ssl.keystore.location"] = str(pki.client_keystore)
    values = [b"pem-file-%d" % i for i in range(3)]
    assert _produce(_config(mtls_kafka, keys), topic, values) == [0, 1, 2]
    # An independent client, holding the same trusted certificate, reads them over mTLS.
    assert _read_over_mtls(mtls_kafka, topic, expected=3) == values


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain-key", "encrypted-key"])
def test_inline_pem_keystore_and_truststore_produce_over_mutual_tls(
    mtls_kafka: LocalKafka, topic: str, encrypted: bool
) -> None:
    pki = mtls_kafka.pki
    keys = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": pki.client_cert.read_text(),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": pki.ca.read_text(),
    }
    if encrypted:
        keys["ssl.keystore.key"] = pki.client_key_encrypted.read_text()
        keys["ssl.key.password"] = pki.key_password
    else:
        keys["ssl.keystore.key"] = pki.client_key.read_text()
    values = [b"inline-%d" % i for i in range(3)]
    assert _produce(_config(mtls_kafka, keys), topic, values) == [0, 1, 2]
    got = read_all(mtls_kafka.bootstrap_servers, topic, expected=3)
    assert [r.value for r in got] == values


# ------------------------------------------------------------------------- rejected clients


def _assert_rejected(
    kafka: LocalKafka,
    config: dict[str, str],
    topic: str,
    caplog: pytest.LogCaptureFixture,
    secrets: list[str],
) -> SslAuthenticationError:
    caplog.set_level(logging.DEBUG, logger="kafka_sink")
    began = time.monotonic()
    with KafkaProducer(config) as producer, pytest.raises(SslAuthenticationError) as info:
        producer.send(topic, b"must-not-arrive").get(30)
    elapsed = time.monotonic() - began
    message = str(info.value)
    # Clear: which broker, that it refused our certificate, and what to check.
    assert f"({kafka.mtls_bootstrap_servers})" in message
    assert "over SSL" in message
    assert "the broker rejected the client certificate" in message
    assert "ssl.keystore" in message
    assert elapsed < _FAIL_WITHIN_S, f"failing took {elapsed:.1f}s: {message}"
    for secret in secrets:
        assert secret not in message
        assert secret not in repr(info.value)
        assert secret not in caplog.text
    # Nothing reached the log.
    assert end_offsets(kafka.bootstrap_servers, topic) == {0: 0}
    return info.value


@pytest.mark.parametrize("form", ["pem-file", "inline-encrypted"])
def test_certificate_from_an_unknown_ca_is_rejected_clearly(
    mtls_kafka: LocalKafka, topic: str, caplog: pytest.LogCaptureFixture, form: str
) -> None:
    pki = mtls_kafka.pki
    key_pem, cert_pem = _pem_blocks(pki.rogue_keystore)
    keys = {"ssl.truststore.location": str(pki.ca)}
    secrets: list[str] = _key_body_lines(key_pem)
    if form == "pem-file":
        keys["ssl.keystore.location"] = str(pki.rogue_keystore)
    else:
        encrypted = _encrypted(key_pem, _ROGUE_KEY_PASSWORD)
        keys |= {
            "ssl.keystore.key": encrypted,
            "ssl.keystore.certificate.chain": cert_pem,
            "ssl.key.password": _ROGUE_KEY_PASSWORD,
        }
        secrets += [_ROGUE_KEY_PASSWORD, *_key_body_lines(encrypted)]
    _assert_rejected(mtls_kafka, _config(mtls_kafka, keys), topic, caplog, secrets)


def test_no_client_certificate_is_rejected_clearly(
    mtls_kafka: LocalKafka, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(mtls_kafka, {"ssl.truststore.location": str(mtls_kafka.pki.ca)})
    _assert_rejected(mtls_kafka, config, topic, caplog, secrets=[])


def test_broker_certificate_not_trusted_is_a_clear_error(
    mtls_kafka: LocalKafka, topic: str
) -> None:
    # No truststore: the system CAs, which do not know the test CA that signed the broker.
    config = _config(mtls_kafka, {"ssl.keystore.location": str(mtls_kafka.pki.client_keystore)})
    began = time.monotonic()
    with KafkaProducer(config) as producer, pytest.raises(SslAuthenticationError) as info:
        producer.send(topic, b"must-not-arrive").get(30)
    assert time.monotonic() - began < _FAIL_WITHIN_S
    message = str(info.value)
    assert f"({mtls_kafka.mtls_bootstrap_servers})" in message
    assert "the broker's certificate was not accepted (CERTIFICATE_VERIFY_FAILED" in message
    assert "check ssl.truststore.*" in message
    assert end_offsets(mtls_kafka.bootstrap_servers, topic) == {0: 0}


# ------------------------------------------------------------------------- protocol versions


def _keylog_labels(path: Path) -> set[str]:
    lines = path.read_text().splitlines()
    return {line.split(" ", 1)[0] for line in lines if line and not line.startswith("#")}


@pytest.mark.parametrize("enabled", ["TLSv1.2", "TLSv1.2,TLSv1.3"])
def test_enabled_protocols_decide_the_version_negotiated_with_the_broker(
    mtls_kafka: LocalKafka,
    topic: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    enabled: str,
) -> None:
    pki: TestPki = mtls_kafka.pki
    keylog = tmp_path / "keys.log"
    create_context = TlsConfig.create_context

    def logged(self: TlsConfig) -> ssl.SSLContext:
        # The NSS key log tells the versions apart: TLS 1.2 writes CLIENT_RANDOM lines only,
        # TLS 1.3 writes per-stage traffic secrets instead.
        context = create_context(self)
        context.keylog_filename = str(keylog)
        return context

    monkeypatch.setattr(TlsConfig, "create_context", logged)
    keys = {
        "ssl.truststore.location": str(pki.ca),
        "ssl.keystore.location": str(pki.client_keystore),
        "ssl.enabled.protocols": enabled,
    }
    assert _produce(_config(mtls_kafka, keys), topic, [b"v"]) == [0]
    labels = _keylog_labels(keylog)
    if enabled == "TLSv1.2":
        assert labels == {"CLIENT_RANDOM"}
    else:  # both allowed: the broker (Java 17) picks TLS 1.3
        assert "CLIENT_TRAFFIC_SECRET_0" in labels and "CLIENT_RANDOM" not in labels
    assert [r.value for r in read_all(mtls_kafka.bootstrap_servers, topic, expected=1)] == [b"v"]
