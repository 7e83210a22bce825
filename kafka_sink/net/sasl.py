"""SASL client mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) as pure token
exchanges (OAUTHBEARER's is :mod:`kafka_sink.net.oauth.mechanism`).

A mechanism turns the broker's challenge bytes into the client's next response bytes; it knows
nothing of sockets or Kafka framing (the connection carries the tokens inside SaslAuthenticate
requests). :meth:`SaslMechanism.initial_response` gives the first client token;
:meth:`SaslMechanism.evaluate` takes each server token and returns the next client token, or None
once the exchange is complete (after which :attr:`complete` is true).

Invariants:

- The password (and an OAUTHBEARER token) never appears in ``repr``, in logs or in exception
  text; only the user name, the token's source and the mechanism name may be shown.
- SCRAM verifies the server's signature before declaring success, rejects a server nonce that does
  not extend the client nonce, and only runs PBKDF2 for 4096..16384 iterations (Kafka's
  ``ScramMechanism`` minimum and maximum: brokers refuse to store credentials outside that range,
  so a server asking for more is hostile or broken). The cap bounds the work a server can make
  the I/O thread do: 16384 rounds of PBKDF2-HMAC-SHA-512 take milliseconds, far below
  ``socket.connection.setup.timeout.ms``, whereas an unchecked count (up to 2**31) would block
  the thread for minutes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from kafka_sink.errors import ConfigError, SaslAuthenticationError
from kafka_sink.net.oauth.mechanism import MECHANISM as OAUTHBEARER
from kafka_sink.net.oauth.mechanism import OAuthBearerMechanism, TokenHolder

__all__ = [
    "SCRAM_MAX_ITERATIONS",
    "SUPPORTED_MECHANISMS",
    "PlainMechanism",
    "SaslConfig",
    "SaslMechanism",
    "ScramMechanism",
    "create_mechanism",
]

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER)

# Kafka's ScramMechanism bounds; a server asking for fewer or more is misconfigured or hostile.
_SCRAM_MIN_ITERATIONS = 4096
SCRAM_MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class SaslConfig:
    """Credentials for one SASL mechanism. ``repr`` hides the password.

    OAUTHBEARER takes no user name or password: ``oauth`` is the login that holds its token
    (one per process and configuration, shared by every connection of every client)."""

    mechanism: str
    username: str = ""
    password: str = field(default="", repr=False)
    oauth: TokenHolder | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                f"sasl.mechanism {self.mechanism!r} is not supported "
                f"(supported: {', '.join(SUPPORTED_MECHANISMS)})"
            )
        if self.mechanism == OAUTHBEARER:
            if self.oauth is None:
                raise ConfigError("sasl.mechanism=OAUTHBEARER needs a token source")
            return
        if not self.username:
            raise ConfigError("SASL needs a non-empty user name")
        if not self.password:
            raise ConfigError("SASL needs a non-empty password")


class SaslMechanism(Protocol):
    name: str

    @property
    def complete(self) -> bool: ...

    def failure_detail(self, broker_message: str) -> str | None:
        """What to add to a failed exchange's message (never a secret), or None."""
        ...

    def initial_response(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None: ...


class PlainMechanism:
    """RFC 4616: one token ``authzid NUL authcid NUL password`` (empty authzid)."""

    name = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        return b"\x00" + self._username.encode() + b"\x00" + self._password.encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        # The broker answers a successful PLAIN token with empty bytes; failures arrive as
        # error codes in SaslAuthenticate, handled by the connection.
        self._complete = True
        return None

    def failure_detail(self, broker_message: str) -> str | None:
        return None

    def __repr__(self) -> str:
        return f"PlainMechanism(username={self._username!r})"


def _escape_username(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _parse_attributes(message: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslAuthenticationError(f"malformed SCRAM message attribute {part[:16]!r}")
        attrs.setdefault(part[0], part[2:])
    return attrs


class ScramMechanism:
    """RFC 5802 / RFC 7677 SCRAM client without channel binding (``n,,`` GS2 header)."""

    _HASHES: ClassVar[Mapping[str, str]] = {
        "SCRAM-SHA-256": "sha256",
        "SCRAM-SHA-512": "sha512",
        "SCRAM-SHA-1": "sha1",
    }

    def __init__(
        self,
        name: str,
        username: str,
        password: str,
        *,
        client_nonce: str | None = None,
        min_iterations: int = _SCRAM_MIN_ITERATIONS,
        max_iterations: int = SCRAM_MAX_ITERATIONS,
    ) -> None:
        if name not in self._HASHES:
            raise ConfigError(f"unknown SCRAM mechanism {name!r}")
        self.name = name
        self._hash = self._HASHES[name]
        self._username = username
        self._password = password
        # A nonce with no ',' (url-safe base64 never has one); tests pass a fixed nonce.
        self._client_nonce = client_nonce or secrets.token_urlsafe(24)
        self._min_iterations = min_iterations
        self._max_iterations = max_iterations
        self._client_first_bare = f"n={_escape_username(username)},r={self._client_nonce}"
        self._server_signature: bytes | None = None
        self._step = 0
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        self._step = 1
        return ("n,," + self._client_first_bare).encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._step == 1:
            self._step = 2
            return self._client_final(challenge)
        if self._step == 2:
            self._verify_server_final(challenge)
            self._step = 3
            self._complete = True
            return None
        raise SaslAuthenticationError(f"{self.name}: unexpected server message after completion")

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self._hash).digest()

    def _client_final(self, challenge: bytes) -> bytes:
        try:
            server_first = challenge.decode()
        except UnicodeDecodeError as exc:
            raise SaslAuthenticationError(
                f"{self.name}: server-first message is not UTF-8"
            ) from exc
        attrs = _parse_attributes(server_first)
        if "e" in attrs:
            raise SaslAuthenticationError(f"{self.name}: server error {attrs['e']!r}")
        try:
            nonce, salt_b64, iterations_text = attrs["r"], attrs["s"], attrs["i"]
        except KeyError as exc:
            raise SaslAuthenticationError(
                f"{self.name}: server-first message lacks attribute {exc.args[0]!r}"
            ) from None
        if not nonce.startswith(self._client_nonce) or len(nonce) == len(self._client_nonce):
            raise SaslAuthenticationError(f"{self.name}: server nonce does not extend ours")
        try:
            iterations = int(iterations_text)
            salt = base64.b64decode(salt_b64, validate=True)
        except ValueError as exc:
            raise SaslAuthenticationError(f"{self.name}: bad salt or iteration count") from exc
        if iterations < self._min_iterations:
            raise SaslAuthenticationError(
                f"{self.name}: server asked for {iterations} iterations, "
                f"fewer than the minimum {self._min_iterations}"
            )
        if iterations > self._max_iterations:
            raise SaslAuthenticationError(
                f"{self.name}: server asked for {iterations} iterations, more than the "
                f"maximum {self._max_iterations} Kafka allows (refusing to spend that much "
                "CPU on a hostile or misconfigured server)"
            )
        salted = hashlib.pbkdf2_hmac(self._hash, self._password.encode(), salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        final_without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{final_without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = self._hmac(salted, b"Server Key")
        self._server_signature = self._hmac(server_key, auth_message)
        return f"{final_without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, challenge: bytes) -> None:
        attrs = _parse_attributes(challenge.decode(errors="replace"))
        if "e" in attrs:
            raise SaslAuthenticationError(f"{self.name}: server error {attrs['e']!r}")
        try:
            received = base64.b64decode(attrs["v"], validate=True)
        except (KeyError, ValueError):
            raise SaslAuthenticationError(
                f"{self.name}: server-final message has no valid signature"
            ) from None
        assert self._server_signature is not None
        if not hmac.compare_digest(received, self._server_signature):
            raise SaslAuthenticationError(f"{self.name}: server signature does not match")

    def failure_detail(self, broker_message: str) -> str | None:
        return None

    def __repr__(self) -> str:
        return f"ScramMechanism({self.name!r}, username={self._username!r})"


def create_mechanism(config: SaslConfig) -> SaslMechanism:
    """A fresh mechanism state for one authentication exchange."""
    if config.mechanism == "PLAIN":
        return PlainMechanism(config.username, config.password)
    if config.mechanism == OAUTHBEARER:
        assert config.oauth is not None  # checked at construction
        return OAuthBearerMechanism(config.oauth)
    return ScramMechanism(config.mechanism, config.username, config.password)
