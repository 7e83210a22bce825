"""TLS client settings (Kafka's ``ssl.*`` keys) and the ``ssl.SSLContext`` they describe.

Role: turn the Java client's TLS settings into an OpenSSL context with the same effect, or refuse
them with a :class:`~kafka_sink.errors.ConfigError` that names the key. Nothing here is accepted
and then ignored:

- ``ssl.truststore.*``: PEM file (``location``), inline PEM (``certificates``) or a PKCS#12 file
  (``type=PKCS12``, read with the ``cryptography`` package); none means the system CAs.
- ``ssl.keystore.*``: a PEM file holding the private key and its chain (``location``), inline PEM
  (``key`` + ``certificate.chain``) or a PKCS#12 file; an encrypted key is opened with
  ``ssl.key.password`` (PEM) or ``ssl.keystore.password`` (PKCS#12). ``ssl.key.password`` with
  a PEM key that is not encrypted is refused, as Java does (inline: at construction; a file:
  when the context is built, where files are read). JKS is refused.
- ``ssl.protocol`` caps the version (``TLSv1.2`` never negotiates 1.3, as in Java);
  ``ssl.enabled.protocols`` sets the range (``minimum_version``/``maximum_version``). Only TLSv1.2
  and TLSv1.3 exist here; older names are refused.
- ``ssl.cipher.suites`` takes Java's IANA names. TLS 1.2 suites map to OpenSSL names through
  :data:`IANA_TO_OPENSSL` and go to ``set_ciphers`` in the given order. Python's ``ssl`` cannot
  restrict TLS 1.3 suites, so a list naming TLS 1.3 suites must name every suite the local
  OpenSSL offers for 1.3; a list naming none disables TLS 1.3 (as Java does when no enabled suite
  belongs to a protocol), and one naming no TLS 1.2 suite disables TLS 1.2.
- ``ssl.endpoint.identification.algorithm``: ``https`` checks the broker's host name, ``""`` does
  not; the certificate chain is always verified.

Invariants: key material and passwords never appear in ``repr``, logs or exception text. Inline
private keys (and PKCS#12 keys) reach OpenSSL through a file created 0600 in a fresh 0700
temporary directory, removed as soon as ``load_cert_chain`` returns; a PKCS#12 key is written
re-encrypted under a one-time password.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_sink.errors import ConfigError

__all__ = [
    "IANA_TO_OPENSSL",
    "TLS13_SUITES",
    "UNENCRYPTED_KEY",
    "TlsConfig",
    "describe_tls_failure",
    "is_tls_failure",
    "pem_key_is_encrypted",
]

# Java's IANA names of the common TLS 1.2 suites -> OpenSSL names (checked against
# ``openssl ciphers -stdname``). Python's ssl module has no such mapping.
IANA_TO_OPENSSL: dict[str, str] = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}

# TLS 1.3 suites (RFC 8446 names, identical in Java and OpenSSL).
TLS13_SUITES = frozenset(
    {
        "TLS_AES_128_GCM_SHA256",
        "TLS_AES_256_GCM_SHA384",
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS_AES_128_CCM_SHA256",
        "TLS_AES_128_CCM_8_SHA256",
    }
)

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_STORE_TYPES = ("PEM", "PKCS12")
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def _normalize_pem(text: str) -> str:
    """Re-wrap PEM blocks whose line breaks were lost (Java accepts them on one line)."""
    blocks = []
    for label, body in _PEM_BLOCK.findall(text):
        if ":" in body:  # RFC 1421 headers (legacy encrypted keys): keep the block as given
            blocks.append(f"-----BEGIN {label}-----{body}-----END {label}-----\n")
            continue
        data = "".join(body.split())
        lines = [data[i : i + 64] for i in range(0, len(data), 64)]
        blocks.append(
            f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"
        )
    return "".join(blocks)


def _pem_labels(text: str) -> list[str]:
    return [label for label, _body in _PEM_BLOCK.findall(text)]


def pem_key_is_encrypted(text: str) -> bool | None:
    """Whether the PEM private key in ``text`` is encrypted (PKCS#8 ``ENCRYPTED PRIVATE KEY``,
    or a legacy key with a ``Proc-Type: 4,ENCRYPTED`` header); None when it holds no key."""
    for label, body in _PEM_BLOCK.findall(text):
        if label.endswith("PRIVATE KEY"):
            return label == "ENCRYPTED PRIVATE KEY" or "ENCRYPTED" in body.split("\n\n")[0]
    return None


UNENCRYPTED_KEY = (
    "ssl.key.password: set, but the private key in {where} is not encrypted, so the password "
    "would not be used (Java refuses this too); remove ssl.key.password, or give an encrypted "
    "key (-----BEGIN ENCRYPTED PRIVATE KEY-----)"
)


@dataclass(frozen=True)
class TlsConfig:
    """The ``ssl.*`` settings of one client (Kafka key in each comment). ``repr`` hides secrets."""

    truststore_type: str = "PEM"  # ssl.truststore.type
    truststore_location: str | None = None  # ssl.truststore.location
    truststore_certificates: str | None = field(default=None, repr=False)  # ...certificates
    truststore_password: str | None = field(default=None, repr=False)  # ...truststore.password
    keystore_type: str = "PEM"  # ssl.keystore.type
    keystore_location: str | None = None  # ssl.keystore.location
    keystore_key: str | None = field(default=None, repr=False)  # ssl.keystore.key
    keystore_certificate_chain: str | None = field(default=None, repr=False)  # ...chain
    keystore_password: str | None = field(default=None, repr=False)  # ssl.keystore.password
    key_password: str | None = field(default=None, repr=False)  # ssl.key.password
    endpoint_identification_algorithm: str = "https"  # ssl.endpoint.identification.algorithm
    protocol: str = "TLSv1.3"  # ssl.protocol
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")  # ssl.enabled.protocols
    cipher_suites: tuple[str, ...] = ()  # ssl.cipher.suites (empty: OpenSSL's defaults)

    def __post_init__(self) -> None:
        self._check_stores()
        if self.endpoint_identification_algorithm.lower() not in ("https", ""):
            raise ConfigError(
                "ssl.endpoint.identification.algorithm: expected 'https' or '' (disabled), "
                f"got {self.endpoint_identification_algorithm!r}"
            )
        self.version_range()  # validates ssl.protocol, ssl.enabled.protocols, ssl.cipher.suites

    # ------------------------------------------------------------------ validation

    def _check_stores(self) -> None:
        for key, value in (
            ("ssl.truststore.type", self.truststore_type),
            ("ssl.keystore.type", self.keystore_type),
        ):
            if value.upper() == "JKS":
                raise ConfigError(
                    f"{key}: JKS stores cannot be read by this client; convert the store to "
                    "PKCS12 (keytool -importkeystore -deststoretype PKCS12) or use PEM"
                )
            if value.upper() not in _STORE_TYPES:
                raise ConfigError(f"{key}: {value!r} is not supported (use PEM or PKCS12)")
        key_type = self.keystore_type.upper()
        trust_type = self.truststore_type.upper()
        if self.keystore_key is not None or self.keystore_certificate_chain is not None:
            if self.keystore_key is None or self.keystore_certificate_chain is None:
                raise ConfigError(
                    "ssl.keystore.key and ssl.keystore.certificate.chain must be set together"
                )
            if key_type != "PEM":
                raise ConfigError(
                    f"ssl.keystore.key: inline keys need ssl.keystore.type=PEM, not {key_type}"
                )
            if self.keystore_location is not None:
                raise ConfigError(
                    "ssl.keystore.location: cannot be combined with ssl.keystore.key "
                    "(give the key either inline or as a file)"
                )
            if not any(label.endswith("PRIVATE KEY") for label in _pem_labels(self.keystore_key)):
                raise ConfigError(
                    "ssl.keystore.key: expected a PEM private key "
                    "(-----BEGIN PRIVATE KEY----- or -----BEGIN ENCRYPTED PRIVATE KEY-----)"
                )
            if self.key_password is not None and not pem_key_is_encrypted(self.keystore_key):
                raise ConfigError(UNENCRYPTED_KEY.format(where="ssl.keystore.key"))
            if "CERTIFICATE" not in _pem_labels(self.keystore_certificate_chain):
                raise ConfigError(
                    "ssl.keystore.certificate.chain: expected PEM certificates "
                    "(-----BEGIN CERTIFICATE-----)"
                )
        if key_type == "PEM" and self.keystore_password is not None:
            raise ConfigError(
                "ssl.keystore.password: not used with ssl.keystore.type=PEM (as in Java); "
                "an encrypted PEM key takes ssl.key.password"
            )
        if key_type == "PKCS12":
            if self.keystore_location is None:
                raise ConfigError("ssl.keystore.location: required with ssl.keystore.type=PKCS12")
            if self.keystore_password is None:
                raise ConfigError("ssl.keystore.password: required with ssl.keystore.type=PKCS12")
            if self.key_password is not None and self.key_password != self.keystore_password:
                raise ConfigError(
                    "ssl.key.password: a PKCS12 keystore has one password for the store and its "
                    "key; it must equal ssl.keystore.password (or be left unset)"
                )
        if (
            self.key_password is not None
            and key_type == "PEM"
            and self.keystore_key is None
            and self.keystore_location is None
        ):
            raise ConfigError("ssl.key.password: set, but no keystore is configured")
        if self.truststore_certificates is not None:
            if trust_type != "PEM":
                raise ConfigError(
                    "ssl.truststore.certificates: inline certificates need "
                    f"ssl.truststore.type=PEM, not {trust_type}"
                )
            if self.truststore_location is not None:
                raise ConfigError(
                    "ssl.truststore.location: cannot be combined with ssl.truststore.certificates"
                )
            if "CERTIFICATE" not in _pem_labels(self.truststore_certificates):
                raise ConfigError(
                    "ssl.truststore.certificates: expected PEM certificates "
                    "(-----BEGIN CERTIFICATE-----)"
                )
        if trust_type == "PEM" and self.truststore_password is not None:
            raise ConfigError(
                "ssl.truststore.password: not used with ssl.truststore.type=PEM (as in Java)"
            )
        if trust_type == "PKCS12" and self.truststore_location is None:
            raise ConfigError("ssl.truststore.location: required with ssl.truststore.type=PKCS12")

    def version_range(self) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
        """(minimum, maximum) TLS version after ssl.protocol, enabled protocols and suites."""
        # "TLS" means the highest version the platform has, as in Java.
        cap = "TLSv1.3" if self.protocol == "TLS" else self.protocol
        if cap not in _VERSIONS:
            raise ConfigError(
                f"ssl.protocol: {self.protocol!r} is not supported (use TLSv1.2, TLSv1.3 or TLS)"
            )
        if not self.enabled_protocols:
            raise ConfigError("ssl.enabled.protocols: empty (use TLSv1.2, TLSv1.3 or both)")
        unsupported = [p for p in self.enabled_protocols if p not in _VERSIONS]
        if unsupported:
            raise ConfigError(
                f"ssl.enabled.protocols: {', '.join(unsupported)} not supported "
                "(this client speaks TLSv1.2 and TLSv1.3)"
            )
        enabled = {_VERSIONS[p] for p in self.enabled_protocols}
        # ssl.protocol is the highest version the client will negotiate (Java's SSLContext).
        enabled = {v for v in enabled if v <= _VERSIONS[cap]}
        if not enabled:
            raise ConfigError(
                f"ssl.enabled.protocols: {', '.join(self.enabled_protocols)} are all above "
                f"ssl.protocol={self.protocol}; no TLS version is left"
            )
        if self.cipher_suites:
            names12, names13 = self._split_suites()
            if not names12:
                enabled.discard(ssl.TLSVersion.TLSv1_2)
            if ssl.TLSVersion.TLSv1_3 in enabled:
                if not names13:
                    enabled.discard(ssl.TLSVersion.TLSv1_3)
                else:
                    missing = sorted(_offered_tls13_suites() - set(names13))
                    if missing:
                        raise ConfigError(
                            "ssl.cipher.suites: Python's ssl module cannot restrict TLS 1.3 "
                            f"cipher suites and OpenSSL here also offers {', '.join(missing)}; "
                            "list every TLS 1.3 suite, none (TLS 1.3 is then off, as in Java), "
                            "or leave TLSv1.3 out of ssl.enabled.protocols"
                        )
            if not enabled:
                raise ConfigError(
                    "ssl.cipher.suites: no listed suite belongs to an enabled protocol "
                    f"({', '.join(self.enabled_protocols)} up to ssl.protocol={self.protocol})"
                )
        return min(enabled), max(enabled)

    def _split_suites(self) -> tuple[list[str], list[str]]:
        names12: list[str] = []
        names13: list[str] = []
        unknown: list[str] = []
        for name in self.cipher_suites:
            if name in TLS13_SUITES:
                names13.append(name)
            elif name in IANA_TO_OPENSSL:
                names12.append(IANA_TO_OPENSSL[name])
            else:
                unknown.append(name)
        if unknown:
            raise ConfigError(
                f"ssl.cipher.suites: cannot map {', '.join(unknown)} to an OpenSSL suite; use "
                "IANA names such as TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 (ECDHE/DHE/RSA with "
                "AES-GCM, AES-CBC or ChaCha20-Poly1305 for TLS 1.2, or TLS 1.3 suite names)"
            )
        return names12, names13

    # ------------------------------------------------------------------ the context

    def create_context(self) -> ssl.SSLContext:
        """The client context; a file or store that cannot be loaded is a ConfigError."""
        minimum, maximum = self.version_range()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED + host name check
        context.minimum_version = minimum
        context.maximum_version = maximum
        context.check_hostname = self.endpoint_identification_algorithm.lower() == "https"
        if self.cipher_suites:
            names12, _names13 = self._split_suites()
            if names12:
                try:
                    context.set_ciphers(":".join(names12))
                except ssl.SSLError:
                    raise ConfigError(
                        "ssl.cipher.suites: the local OpenSSL supports none of the listed "
                        "TLS 1.2 suites"
                    ) from None
        self._load_truststore(context)
        self._load_keystore(context)
        return context

    def _load_truststore(self, context: ssl.SSLContext) -> None:
        try:
            if self.truststore_certificates is not None:
                context.load_verify_locations(cadata=_normalize_pem(self.truststore_certificates))
            elif self.truststore_location is None:
                context.load_default_certs(ssl.Purpose.SERVER_AUTH)
            elif self.truststore_type.upper() == "PKCS12":
                context.load_verify_locations(cadata=self._pkcs12_trusted_pem())
            else:
                context.load_verify_locations(cafile=self.truststore_location)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            where = self.truststore_location or "ssl.truststore.certificates"
            raise ConfigError(
                f"ssl.truststore: cannot load trusted certificates from {where}: "
                f"{_safe_reason(exc)}"
            ) from None

    def _load_keystore(self, context: ssl.SSLContext) -> None:
        try:
            if self.keystore_key is not None:
                assert self.keystore_certificate_chain is not None
                pem = _normalize_pem(self.keystore_key) + _normalize_pem(
                    self.keystore_certificate_chain
                )
                with _private_file(pem) as path:
                    context.load_cert_chain(path, password=self._key_password_callback())
            elif self.keystore_location is None:
                return
            elif self.keystore_type.upper() == "PKCS12":
                pem, one_time_password = self._pkcs12_key_pem()
                with _private_file(pem) as path:
                    context.load_cert_chain(path, password=lambda: one_time_password)
            else:
                if self.key_password is not None:
                    with open(self.keystore_location, encoding="ascii", errors="replace") as f:
                        encrypted = pem_key_is_encrypted(f.read())
                    if encrypted is False:
                        raise ConfigError(UNENCRYPTED_KEY.format(where=self.keystore_location))
                context.load_cert_chain(
                    self.keystore_location, password=self._key_password_callback()
                )
        except ConfigError:
            raise
        except (OSError, ValueError) as exc:
            where = self.keystore_location or "ssl.keystore.key/ssl.keystore.certificate.chain"
            raise ConfigError(
                f"ssl.keystore: cannot load the client key and certificate from {where} "
                f"(wrong ssl.key.password, key not matching the certificate, or not PEM?): "
                f"{_safe_reason(exc)}"
            ) from None

    def _key_password_callback(self) -> str:
        # A callback rather than None: OpenSSL would otherwise prompt on the terminal for an
        # encrypted key. An empty password makes it fail cleanly instead.
        return self.key_password or ""

    def _pkcs12_key_pem(self) -> tuple[str, bytes]:
        pkcs12, serialization = _cryptography("ssl.keystore.type=PKCS12")
        assert self.keystore_location is not None and self.keystore_password is not None
        data = Path(self.keystore_location).read_bytes()
        key, cert, extra = pkcs12.load_key_and_certificates(data, self.keystore_password.encode())
        if key is None or cert is None:
            raise ValueError("the PKCS12 keystore holds no private key with a certificate")
        one_time = secrets.token_urlsafe(24).encode()
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(one_time),
        )
        chain = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *extra])
        return (key_pem + chain).decode("ascii"), one_time

    def _pkcs12_trusted_pem(self) -> str:
        pkcs12, serialization = _cryptography("ssl.truststore.type=PKCS12")
        assert self.truststore_location is not None
        data = Path(self.truststore_location).read_bytes()
        password = self.truststore_password.encode() if self.truststore_password else None
        store = pkcs12.load_pkcs12(data, password)
        certs = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certs.insert(0, store.cert.certificate)
        if not certs:
            raise ValueError("the PKCS12 truststore holds no certificate")
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs).decode("ascii")


def _cryptography(what: str) -> tuple[Any, Any]:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(
            f"{what} needs the 'cryptography' package (pip install 'pykafka-sink[pkcs12]'); "
            "or convert the store to PEM"
        ) from None
    return pkcs12, serialization


def _safe_reason(exc: BaseException) -> str:
    """An exception's reason without anything it may quote from the input."""
    if isinstance(exc, ssl.SSLError):
        return f"{exc.library or 'SSL'}: {exc.reason or type(exc).__name__}"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    # ValueError from cryptography names the problem ("Invalid password or PKCS12 data").
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    """A file only this user can read, holding ``text``; deleted with its directory on exit."""
    directory = tempfile.mkdtemp(prefix="kafka-sink-tls-")  # mode 0700
    path = os.path.join(directory, "keystore.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


_offered_cache: frozenset[str] | None = None


def _offered_tls13_suites() -> frozenset[str]:
    """The TLS 1.3 suites the local OpenSSL offers by default (Python cannot change them)."""
    global _offered_cache  # noqa: PLW0603 - computed once per process
    if _offered_cache is None:
        probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        _offered_cache = frozenset(
            c["name"] for c in probe.get_ciphers() if c.get("protocol") == "TLSv1.3"
        )
    return _offered_cache


# ---------------------------------------------------------------------- failures on the wire

_ALERT_HINTS = (
    (
        ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_REQUIRED", "CERTIFICATE_UNKNOWN",
         "UNSUPPORTED_CERTIFICATE", "CERTIFICATE_REVOKED", "CERTIFICATE_EXPIRED",
         "ACCESS_DENIED"),
        "the broker rejected the client certificate (check ssl.keystore.* and that the "
        "listener's truststore trusts the client's CA)",
    ),
    (
        ("HANDSHAKE_FAILURE", "INSUFFICIENT_SECURITY", "NO_SHARED_CIPHER"),
        "no TLS version and cipher suite in common (check ssl.cipher.suites, "
        "ssl.enabled.protocols and ssl.protocol)",
    ),
    (
        ("PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL"),
        "no TLS version in common (check ssl.enabled.protocols and ssl.protocol)",
    ),
)  # fmt: skip


def is_tls_failure(exc: BaseException | None) -> bool:
    """Whether a connection error came from TLS (handshake, certificate, alert)."""
    return isinstance(exc, ssl.SSLError)


def describe_tls_failure(exc: ssl.SSLError) -> str:
    """A one-line reason for a failed TLS handshake, with the setting to check."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        detail = exc.verify_message or exc.reason or "verification failed"
        return (
            f"TLS handshake failed: the broker's certificate was not accepted "
            f"(CERTIFICATE_VERIFY_FAILED: {detail}; check ssl.truststore.* and "
            "ssl.endpoint.identification.algorithm)"
        )
    reason = exc.reason or type(exc).__name__
    for markers, hint in _ALERT_HINTS:
        if any(marker in reason for marker in markers):
            return f"TLS handshake failed: {hint} [{reason}]"
    return f"TLS handshake failed [{reason}]"
