"""The SASL/OAUTHBEARER client mechanism (RFC 7628) as Kafka's brokers speak it.

Role: turns a bearer token and its SASL extensions into the client's first message
``n,,\\x01auth=Bearer <token>\\x01<key>=<value>\\x01...\\x01\\x01`` and reads the broker's
answer. A broker that accepts the token answers with empty bytes; one that refuses it answers
with a JSON error (``{"status":"invalid_token",...}``) to which the client must reply with a
single ``\\x01`` before the broker fails the exchange; that JSON is kept in
:attr:`OAuthBearerMechanism.server_error` so the connection's error shows the broker's reason.

Invariants:
- The token is never in ``repr`` or exception text; only the token holder's description (the
  endpoint or provider) and extension names are.
- Extensions follow Kafka's rules (``OAuthBearerClientInitialResponse``): keys are
  ``[A-Za-z]+`` and never ``auth``; values are ``[\\x21-\\x7E \\t\\r\\n]+``. A token holds only
  visible ASCII (RFC 6750's b64token is a subset), so it cannot break the message's framing.
  Anything else is refused before a byte is sent.
- A mechanism object serves one exchange; the token is taken when it is made (on the
  SaslHandshake answer), so every new connection and every in-band re-authentication (KIP-368)
  sends the login's current token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Protocol

from kafka_sink.errors import ConfigError, SaslAuthenticationError
from kafka_sink.net.oauth.token import OAuthBearerToken

__all__ = [
    "MECHANISM",
    "OAuthBearerMechanism",
    "TokenHolder",
    "check_extensions",
    "client_first_message",
]

MECHANISM = "OAUTHBEARER"

_SEPARATOR = "\x01"
_KEY = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_TOKEN = re.compile(r"[\x21-\x7E]+")
# A broker's error JSON is short; more would be a broken or hostile peer, and it ends up in logs.
_MAX_SHOWN_ERROR = 512


class TokenHolder(Protocol):
    """What the mechanism asks for a token: a login that keeps one valid."""

    def token(self) -> OAuthBearerToken:
        """A token that has not expired, or :class:`TokenSourceError` naming the source."""
        ...

    def describe(self) -> str: ...


def check_extensions(extensions: Mapping[str, str], where: str = "SASL extensions") -> None:
    """Refuse extensions Kafka's broker would refuse (names the key, never the value)."""
    for key, value in extensions.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ConfigError(
                f"{where}: extension name {key!r} is not valid (letters A-Z and a-z only)"
            )
        if key == "auth":
            raise ConfigError(f"{where}: 'auth' is reserved and cannot be an extension name")
        if not isinstance(value, str) or not _VALUE.fullmatch(value):
            raise ConfigError(
                f"{where}: the value of extension {key!r} is not valid (printable ASCII, "
                "spaces, tabs and line breaks only, and not empty)"
            )


def client_first_message(token: str, extensions: Mapping[str, str] | None = None) -> bytes:
    """RFC 7628's client initial response: GS2 header, ``auth``, the extensions, two ^A."""
    if not _TOKEN.fullmatch(token):
        raise SaslAuthenticationError(
            "OAUTHBEARER: the token holds characters a bearer token cannot have "
            "(only visible ASCII is allowed)"
        )
    extensions = extensions or {}
    check_extensions(extensions)
    parts = [f"auth=Bearer {token}", *(f"{k}={v}" for k, v in extensions.items())]
    return ("n,," + _SEPARATOR + _SEPARATOR.join(parts) + _SEPARATOR + _SEPARATOR).encode()


class OAuthBearerMechanism:
    """One OAUTHBEARER exchange with the holder's current token."""

    name = MECHANISM

    def __init__(self, holder: TokenHolder) -> None:
        self._holder = holder
        self._token: OAuthBearerToken | None = None
        self._complete = False
        self._answered_error = False
        #: The broker's error JSON (capped), once it refused the token.
        self.server_error: str | None = None

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        self._token = self._holder.token()
        return client_first_message(self._token.value, self._token.extensions)

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._answered_error:
            raise SaslAuthenticationError(
                f"OAUTHBEARER: the broker sent more after refusing the token from "
                f"{self._holder.describe()}"
            )
        if not challenge:
            self._complete = True
            return None
        # RFC 7628 section 3.2.2: the server's error, answered with a lone ^A so that the
        # server can end the exchange with its failure.
        text = challenge.decode("utf-8", errors="replace")
        if len(text) > _MAX_SHOWN_ERROR:
            text = text[:_MAX_SHOWN_ERROR] + "..."
        self.server_error = text
        self._answered_error = True
        return _SEPARATOR.encode()

    def failure_detail(self, broker_message: str) -> str:
        """What to add to the broker's failure message: the source, and the broker's JSON
        unless the message already holds it."""
        detail = f"token from {self._holder.describe()}"
        if self.server_error is not None and self.server_error not in broker_message:
            detail += f"; the broker answered {self.server_error}"
        return detail

    def __repr__(self) -> str:
        return f"OAuthBearerMechanism(source={self._holder.describe()!r})"
