"""An OAuth bearer token and the interface of everything that fetches one.

Role: the OAUTHBEARER mechanism sends a token; a login (the refresher that keeps one valid per
process and configuration) asks a :class:`TokenSource` for a new one ahead of expiry. Every way
of getting a token (an OIDC token endpoint with client credentials or a signed assertion, AWS
MSK IAM, Azure Entra ID, Google, a user's callable) is a :class:`TokenSource`.

Invariants:
- A token's value never appears in ``repr``, logs, errors or metrics; ``describe()`` of a
  source names where tokens come from (an endpoint URL without user info, a provider's short
  name) and never a secret.
- ``expires_at_ms`` is wall-clock epoch milliseconds (tokens' ``exp`` claims are), so a
  refresher compares it with ``time.time()``, not with a monotonic clock.
- ``fetch()`` is bounded in time (its source's connect/read timeouts) and raises
  :class:`TokenSourceError` naming the source, never returning a token that has expired.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kafka_sink.errors import SaslAuthenticationError

__all__ = ["OAuthBearerToken", "TokenSource", "TokenSourceError"]


@dataclass(frozen=True)
class OAuthBearerToken:
    """A bearer token: its value (hidden from ``repr``), its expiry and what the client knows
    of it. ``extensions`` are the SASL extensions (RFC 7628 ``key=value`` pairs) sent with it."""

    value: str = field(repr=False)
    expires_at_ms: int
    principal: str | None = None
    issued_at_ms: int | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)


class TokenSource(Protocol):
    """Fetches a fresh token each time it is called; the caller caches and refreshes."""

    def fetch(self) -> OAuthBearerToken: ...

    def describe(self) -> str:
        """Where tokens come from, for messages: never a secret."""
        ...


class TokenSourceError(SaslAuthenticationError):
    """A token could not be had: the endpoint or provider refused, was unreachable, or answered
    something that is no token. The message names the source, never a secret;
    ``may_clear`` says whether asking again later may succeed (unreachable, a 5xx answer) or not
    (a bad secret, a wrong scope), so a login retries only the former."""

    def __init__(self, message: str, *, may_clear: bool) -> None:
        super().__init__(message)
        self.may_clear = may_clear
