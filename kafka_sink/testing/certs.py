"""Throwaway X.509 material for TLS tests, made with the ``openssl`` command-line tool.

:func:`make_test_pki` writes into a directory a CA, a broker certificate for 127.0.0.1 and
localhost, a client certificate signed by that CA (plain and encrypted PKCS#8 keys, a PKCS#12
keystore), a PKCS#12 truststore, and a client certificate from a second, unknown CA. Everything
is valid for two days and meant for loopback tests only.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TestPki", "make_test_pki"]

KEY_PASSWORD = "client-key-pw"
STORE_PASSWORD = "client-store-pw"


@dataclass(frozen=True)
class TestPki:
    ca: Path  # the CA certificate (PEM)
    broker_keystore: Path  # broker key + certificate (PEM), SAN 127.0.0.1 and localhost
    client_key: Path  # client key, PKCS#8 PEM, unencrypted
    client_key_encrypted: Path  # the same key, encrypted with KEY_PASSWORD
    client_cert: Path  # client certificate (PEM), CN=test-client, signed by the CA
    client_keystore: Path  # client key + certificate in one PEM file
    client_pkcs12: Path  # client keystore as PKCS#12, password STORE_PASSWORD
    truststore_pkcs12: Path  # the CA as a PKCS#12 truststore, password STORE_PASSWORD
    rogue_keystore: Path  # key + certificate from an unknown CA (PEM)
    key_password: str = KEY_PASSWORD
    store_password: str = STORE_PASSWORD

    __test__ = False  # not a pytest test class despite the name


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str) -> None:
    _openssl(directory, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", f"/CN={name}", "-keyout", f"{name}.key", "-out", f"{name}.pem")  # fmt: skip


def _signed(directory: Path, name: str, ca: str, extensions: str) -> None:
    _openssl(directory, "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.csr")  # fmt: skip
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
             "-CAkey", f"{ca}.key", "-CAcreateserial", "-days", "2",
             "-extfile", f"{name}.ext", "-out", f"{name}.pem")  # fmt: skip


def make_test_pki(directory: Path) -> TestPki:
    """Write the test CA, broker and client material into ``directory`` (which must exist)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl command is needed to make test certificates")
    d = directory
    _ca(d, "test-ca")
    _ca(d, "rogue-ca")
    _signed(d, "broker", "test-ca", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _signed(d, "test-client", "test-ca", "extendedKeyUsage=clientAuth\n")
    _signed(d, "rogue-client", "rogue-ca", "extendedKeyUsage=clientAuth\n")
    # PKCS#8 keys (openssl 3 writes PKCS#8 by default; -topk8 makes it explicit).
    _openssl(d, "pkcs8", "-topk8", "-nocrypt", "-in", "test-client.key",
             "-out", "client-key.pem")  # fmt: skip
    _openssl(d, "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", "test-client.key",
             "-passout", f"pass:{KEY_PASSWORD}", "-out", "client-key-encrypted.pem")  # fmt: skip
    _openssl(d, "pkcs12", "-export", "-in", "test-client.pem", "-inkey", "test-client.key",
             "-certfile", "test-ca.pem", "-passout", f"pass:{STORE_PASSWORD}",
             "-out", "client.p12")  # fmt: skip
    _openssl(d, "pkcs12", "-export", "-nokeys", "-in", "test-ca.pem",
             "-passout", f"pass:{STORE_PASSWORD}", "-out", "truststore.p12")  # fmt: skip

    def joined(name: str, *parts: str) -> Path:
        path = d / name
        path.write_text("".join((d / p).read_text() for p in parts))
        return path

    return TestPki(
        ca=d / "test-ca.pem",
        broker_keystore=joined("broker-keystore.pem", "broker.key", "broker.pem"),
        client_key=d / "client-key.pem",
        client_key_encrypted=d / "client-key-encrypted.pem",
        client_cert=d / "test-client.pem",
        client_keystore=joined("client-keystore.pem", "client-key.pem", "test-client.pem"),
        client_pkcs12=d / "client.p12",
        truststore_pkcs12=d / "truststore.p12",
        rogue_keystore=joined("rogue-keystore.pem", "rogue-client.key", "rogue-client.pem"),
    )
