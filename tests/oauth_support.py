"""A client credentials token source for the broker tests, independent of the package's own.

It speaks just enough OAuth (RFC 6749 section 4.4, the client id and secret as HTTP basic auth)
to feed :class:`~kafka_sink.net.oauth.login.OAuthBearerLogin` real tokens from
:class:`~kafka_sink.testing.oidc.LocalOidc`, so the mechanism, the login and re-authentication
are tested against real tokens whatever source a client is configured with.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.parse
import urllib.request

from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError


class ClientCredentials:
    """A :class:`~kafka_sink.net.oauth.token.TokenSource` for ``url`` (counts its fetches)."""

    def __init__(
        self,
        url: str,
        client_id: str,
        secret: str,
        *,
        timeout_s: float = 5.0,
        extensions: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self._extensions = dict(extensions or {})
        self._client_id = client_id
        self._secret = secret
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self.fetches = 0

    def describe(self) -> str:
        return self.url

    def fetch(self) -> OAuthBearerToken:
        with self._lock:
            self.fetches += 1
        pair = f"{urllib.parse.quote_plus(self._client_id)}:{urllib.parse.quote_plus(self._secret)}"
        request = urllib.request.Request(
            self.url,
            data=b"grant_type=client_credentials&scope=kafka",
            headers={
                "Authorization": "Basic " + base64.b64encode(pair.encode()).decode(),
                "Content-Type": "application/x-www-form-urlencoded",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise TokenSourceError(
                f"{self.url} refused the token request (HTTP {exc.code})",
                may_clear=exc.code >= 500,
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            raise TokenSourceError(f"{self.url} is unreachable: {exc}", may_clear=True) from None
        token = body["access_token"]
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return OAuthBearerToken(
            token,
            expires_at_ms=int(claims["exp"]) * 1000,
            principal=claims.get("sub"),
            issued_at_ms=int(claims["iat"]) * 1000,
            extensions=self._extensions,
        )


class FixedToken:
    """A source that always answers one token (e.g. one the broker must refuse)."""

    def __init__(self, token: str, expires_at_ms: int) -> None:
        self._token = OAuthBearerToken(token, expires_at_ms=expires_at_ms)

    def describe(self) -> str:
        return "a fixed test token"

    def fetch(self) -> OAuthBearerToken:
        return self._token
