"""TlsConfig against a loopback TLS server that requires a client certificate (mutual TLS).

The server is Python's own ``ssl`` module with the test CA as its truststore; the broker-level
proof of the same behaviour is in tests/broker/test_mtls_broker.py.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kafka_sink.errors import ConfigError
from kafka_sink.net import tls as tls_module
from kafka_sink.net.config import ClientConfig
from kafka_sink.net.tls import IANA_TO_OPENSSL, TlsConfig, describe_tls_failure
from kafka_sink.testing.certs import TestPki, make_test_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    return make_test_pki(tmp_path_factory.mktemp("pki"))


@dataclass
class MutualTlsServer:
    """Accepts TLS clients one at a time; records each client's certificate subject."""

    port: int
    peers: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def server(pki: TestPki) -> Iterator[MutualTlsServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_cert_chain(str(pki.broker_keystore))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    info = MutualTlsServer(listener.getsockname()[1])
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _addr = listener.accept()
            except TimeoutError:
                continue
            raw.settimeout(10)
            try:
                with context.wrap_socket(raw, server_side=True) as conn:
                    cert = conn.getpeercert() or {}
                    subject = dict(x[0] for x in cert.get("subject", ()))
                    info.peers.append(str(subject.get("commonName")))
                    conn.sendall(conn.recv(100).upper())
            except (OSError, ssl.SSLError) as exc:
                info.errors.append(str(exc))
                raw.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield info
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def _talk(context: ssl.SSLContext, port: int) -> tuple[str | None, str | None, bytes]:
    """(TLS version, cipher, echoed bytes) of one exchange with the server."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as conn,
    ):
        conn.sendall(b"ping")
        reply = conn.recv(100)
        cipher = conn.cipher()
        return conn.version(), cipher[0] if cipher else None, reply


def _pem(path: Path) -> str:
    return path.read_text()


# ------------------------------------------------------------------------- keystores


def test_inline_pem_keystore_from_producer_config_is_presented(
    pki: TestPki, server: MutualTlsServer
) -> None:
    # The regression: ssl.keystore.key/ssl.keystore.certificate.chain used to be dropped, so a
    # broker requiring client certificates refused the connection.
    config = ClientConfig.from_mapping(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "security.protocol": "SSL",
            "ssl.truststore.location": str(pki.ca),
            "ssl.keystore.key": _pem(pki.client_key_encrypted),
            "ssl.keystore.certificate.chain": _pem(pki.client_cert),
            "ssl.key.password": pki.key_password,
        }
    )
    context = config.network_config("c").ssl_context()
    assert context is not None
    assert _talk(context, server.port)[2] == b"PING"
    assert server.peers == ["test-client"]


def test_inline_pem_on_one_line_as_java_accepts(pki: TestPki, server: MutualTlsServer) -> None:
    flat = TlsConfig(
        truststore_certificates=" ".join(_pem(pki.ca).split()),
        keystore_key=" ".join(_pem(pki.client_key).split()),
        keystore_certificate_chain=" ".join(_pem(pki.client_cert).split()),
    )
    assert _talk(flat.create_context(), server.port)[2] == b"PING"
    assert server.peers == ["test-client"]


def test_pem_keystore_file(pki: TestPki, server: MutualTlsServer) -> None:
    config = TlsConfig(truststore_location=str(pki.ca), keystore_location=str(pki.client_keystore))
    assert _talk(config.create_context(), server.port)[2] == b"PING"
    assert server.peers == ["test-client"]


def test_pkcs12_keystore_and_truststore(pki: TestPki, server: MutualTlsServer) -> None:
    config = TlsConfig(
        truststore_type="PKCS12",
        truststore_location=str(pki.truststore_pkcs12),
        truststore_password=pki.store_password,
        keystore_type="PKCS12",
        keystore_location=str(pki.client_pkcs12),
        keystore_password=pki.store_password,
    )
    assert _talk(config.create_context(), server.port)[2] == b"PING"
    assert server.peers == ["test-client"]


def test_without_a_keystore_the_server_refuses(pki: TestPki, server: MutualTlsServer) -> None:
    context = TlsConfig(truststore_location=str(pki.ca)).create_context()
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _talk(context, server.port)
    assert server.peers == []


def test_inline_key_goes_through_a_private_file_removed_at_once(
    pki: TestPki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    seen: list[tuple[int, int]] = []
    real = tls_module._private_file

    def spy(text: str):  # type: ignore[no-untyped-def]
        with real(text) as path:
            seen.append((os.stat(path).st_mode, os.stat(os.path.dirname(path)).st_mode))
            yield path

    monkeypatch.setattr(tls_module, "_private_file", tls_module.contextlib.contextmanager(spy))
    TlsConfig(
        truststore_location=str(pki.ca),
        keystore_key=_pem(pki.client_key),
        keystore_certificate_chain=_pem(pki.client_cert),
    ).create_context()
    [(file_mode, dir_mode)] = seen
    assert stat.S_IMODE(file_mode) == 0o600
    assert stat.S_IMODE(dir_mode) == 0o700
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------- protocols, suites


def test_enabled_protocols_tls12_only_negotiates_tls12(
    pki: TestPki, server: MutualTlsServer
) -> None:
    base = {"truststore_location": str(pki.ca), "keystore_location": str(pki.client_keystore)}
    assert _talk(TlsConfig(**base).create_context(), server.port)[0] == "TLSv1.3"
    only12 = TlsConfig(**base, enabled_protocols=("TLSv1.2",)).create_context()
    assert _talk(only12, server.port)[0] == "TLSv1.2"
    capped = TlsConfig(**base, protocol="TLSv1.2").create_context()
    assert _talk(capped, server.port)[0] == "TLSv1.2"


def test_cipher_suites_in_iana_names_are_applied(pki: TestPki, server: MutualTlsServer) -> None:
    base = {"truststore_location": str(pki.ca), "keystore_location": str(pki.client_keystore)}
    chosen = TlsConfig(**base, cipher_suites=("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",))
    version, cipher, _ = _talk(chosen.create_context(), server.port)
    # Only TLS 1.2 suites listed: TLS 1.3 is off, as in Java.
    assert (version, cipher) == ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256")
    # An ECDSA-only suite cannot be used with the server's RSA certificate: no common suite.
    ecdsa = TlsConfig(**base, cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",))
    with pytest.raises(ssl.SSLError) as info:
        _talk(ecdsa.create_context(), server.port)
    assert "no TLS version and cipher suite in common" in describe_tls_failure(info.value)
    every13 = TlsConfig(
        **base,
        enabled_protocols=("TLSv1.3",),
        cipher_suites=tuple(sorted(tls_module._offered_tls13_suites())),
    )
    assert _talk(every13.create_context(), server.port)[0] == "TLSv1.3"


def test_cipher_suite_table_matches_local_openssl() -> None:
    for iana, openssl_name in IANA_TO_OPENSSL.items():
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.set_ciphers(openssl_name)
        names = {c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"}
        assert names == {openssl_name}, iana


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"enabled_protocols": ("TLSv1.1", "TLSv1.2")}, r"ssl\.enabled\.protocols: TLSv1\.1"),
        ({"protocol": "SSLv3"}, r"ssl\.protocol: 'SSLv3'"),
        (
            {"protocol": "TLSv1.2", "enabled_protocols": ("TLSv1.3",)},
            r"ssl\.enabled\.protocols: .*above ssl\.protocol=TLSv1\.2",
        ),
        ({"cipher_suites": ("TLS_FOO_WITH_BAR",)}, r"ssl\.cipher\.suites: cannot map"),
        (
            {"cipher_suites": ("TLS_AES_128_GCM_SHA256",)},
            r"ssl\.cipher\.suites: Python's ssl module cannot restrict TLS 1\.3",
        ),
        (
            {"enabled_protocols": ("TLSv1.3",), "cipher_suites": ("TLS_RSA_WITH_AES_128_CBC_SHA",)},
            r"ssl\.cipher\.suites: no listed suite belongs to an enabled protocol",
        ),
        ({"keystore_type": "JKS"}, r"ssl\.keystore\.type: JKS .* PKCS12 .* PEM"),
        ({"truststore_type": "BCFKS"}, r"ssl\.truststore\.type: 'BCFKS' is not supported"),
        ({"keystore_key": "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----"},
         r"ssl\.keystore\.key and ssl\.keystore\.certificate\.chain must be set together"),
        ({"keystore_location": "/k.pem", "keystore_password": "pw-store"},
         r"ssl\.keystore\.password: not used with ssl\.keystore\.type=PEM"),
        ({"truststore_location": "/t.pem", "truststore_password": "pw-trust"},
         r"ssl\.truststore\.password: not used with ssl\.truststore\.type=PEM"),
        ({"endpoint_identification_algorithm": "ldaps"}, r"ssl\.endpoint\.identification"),
    ],
)  # fmt: skip
def test_settings_that_cannot_be_applied_are_refused(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        TlsConfig(**kwargs)  # type: ignore[arg-type]
    assert "pw-" not in str(info.value)


# ------------------------------------------------------------------------- secrets


def test_secrets_never_in_repr_errors_or_logs(
    pki: TestPki, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key_text = _pem(pki.client_key_encrypted)
    key_body = key_text.splitlines()[1]
    mapping = {
        "bootstrap.servers": "127.0.0.1:1",
        "security.protocol": "SSL",
        "ssl.truststore.location": str(pki.ca),
        "ssl.keystore.key": key_text,
        "ssl.keystore.certificate.chain": _pem(pki.client_cert),
        "ssl.key.password": "wrong-key-password",
    }
    config = ClientConfig.from_mapping(mapping)
    network = config.network_config("c")
    shown = [repr(config), repr(network), repr(network.tls)]
    with pytest.raises(ConfigError) as info:
        network.ssl_context()  # wrong password: the key cannot be opened
    shown.append(str(info.value))
    assert "ssl.keystore" in str(info.value)
    shown.extend(r.getMessage() for r in caplog.records)
    for text in shown:
        assert "wrong-key-password" not in text
        assert key_body not in text
        assert "PRIVATE KEY" not in text


def test_a_key_password_for_an_unencrypted_inline_key_is_refused(pki: TestPki) -> None:
    # Java's PEM keystore refuses it too (the key is not an EncryptedPrivateKeyInfo).
    with pytest.raises(ConfigError, match=r"ssl\.key\.password: set, but .* not encrypted") as info:
        ClientConfig.from_mapping(
            {
                "bootstrap.servers": "127.0.0.1:1",
                "security.protocol": "SSL",
                "ssl.keystore.key": _pem(pki.client_key),
                "ssl.keystore.certificate.chain": _pem(pki.client_cert),
                "ssl.key.password": "unused-pw-3",
            }
        )
    assert "unused-pw-3" not in str(info.value)


def test_a_key_password_for_an_unencrypted_key_file_is_refused(pki: TestPki) -> None:
    config = TlsConfig(keystore_location=str(pki.client_keystore), key_password="unused-pw-3")
    with pytest.raises(
        ConfigError, match=r"^ssl\.key\.password: set, but .* not encrypted"
    ) as info:
        config.create_context()
    assert "unused-pw-3" not in str(info.value) and str(pki.client_keystore) in str(info.value)


def test_a_key_password_for_an_encrypted_key_file_opens_it(
    pki: TestPki, server: MutualTlsServer, tmp_path: Path
) -> None:
    keystore = tmp_path / "encrypted-keystore.pem"
    keystore.write_text(_pem(pki.client_key_encrypted) + _pem(pki.client_cert))
    config = TlsConfig(
        truststore_location=str(pki.ca),
        keystore_location=str(keystore),
        key_password=pki.key_password,
    )
    assert _talk(config.create_context(), server.port)[2] == b"PING"
