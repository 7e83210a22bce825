"""Google Cloud credentials in the token format of Google's Managed Service for Apache Kafka.

Role: :class:`GoogleSource` (``sasl.oauthbearer.token.provider=google``) takes Application
Default Credentials (``google.auth.default``, scope ``sasl.oauthbearer.scope``, default
``https://www.googleapis.com/auth/cloud-platform``), refreshes them, and wraps the Google access
token the way Google's own client libraries for the service do (its ``managedkafka`` login
handler and local auth server): three base64url parts without padding, joined by ``.``:

- a header ``{"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}``;
- claims ``{"exp": <expiry, epoch s>, "iss": "Google", "iat": <now, epoch s>, "scope":
  "kafka", "sub": <the service account's email>}``;
- the access token itself in place of a signature.

The broker reads the access token from the third part and checks it with Google; the first two
carry the principal and expiry for the Kafka side. The principal is the credentials' service
account email, so user credentials need a service account (impersonation or a key file).

Invariants:
- Refreshing is bounded: every HTTP call of ``google-auth`` gets
  ``sasl.login.connect.timeout.ms`` + ``.read.timeout.ms`` as its timeout.
- Errors name the provider and the exception type, never a token.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from datetime import UTC
from typing import Any

from kafka_sink.net.oauth.providers import missing_extra
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError

__all__ = ["DEFAULT_SCOPE", "GoogleSource", "managed_kafka_token"]

DEFAULT_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_HEADER = {"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}
_FINAL_ERRORS = frozenset({"DefaultCredentialsError", "RefreshError"})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def managed_kafka_token(
    access_token: str, *, subject: str, expires_at_s: float, now_s: float
) -> str:
    """The OAUTHBEARER token Google's Managed Kafka reads for ``access_token``."""
    claims = {"exp": expires_at_s, "iss": "Google", "iat": now_s, "scope": "kafka", "sub": subject}
    return ".".join(
        (
            _b64(json.dumps(_HEADER).encode()),
            _b64(json.dumps(claims).encode()),
            _b64(access_token.encode()),
        )
    )


def _google_auth() -> Any:
    try:
        import google.auth
        import google.auth.transport.requests
    except ImportError:
        raise missing_extra("google", "google", "google-auth (with requests)") from None
    return google.auth


class GoogleSource:
    def __init__(
        self,
        *,
        scope: str | None = None,
        extensions: Mapping[str, str] | None = None,
        connect_timeout_ms: int = 10_000,
        read_timeout_ms: int = 30_000,
        credentials: Any = None,
        request: Any = None,
    ) -> None:
        self._auth = _google_auth()
        self._scope = scope or DEFAULT_SCOPE
        self._extensions = dict(extensions or {})
        self._timeout_s = (connect_timeout_ms + read_timeout_ms) / 1000
        self._credentials = credentials
        self._request = request

    def describe(self) -> str:
        return f"token provider google (scope {self._scope})"

    def __repr__(self) -> str:
        return f"GoogleSource({self._scope!r})"

    def _bounded_request(self) -> Any:
        if self._request is None:
            import google.auth.transport.requests as transport

            timeout = self._timeout_s

            class _Bounded(transport.Request):
                def __call__(self, *args: Any, **kwargs: Any) -> Any:
                    kwargs["timeout"] = min(kwargs.get("timeout") or timeout, timeout)
                    return super().__call__(*args, **kwargs)  # type: ignore[no-untyped-call]

            self._request = _Bounded()
        return self._request

    def fetch(self) -> OAuthBearerToken:
        where = self.describe()
        try:
            request = self._bounded_request()
            if self._credentials is None:
                self._credentials, _project = self._auth.default(
                    scopes=[self._scope], request=request
                )
            credentials = self._credentials
            if not credentials.valid:
                credentials.refresh(request)
            access_token = credentials.token
            expiry = credentials.expiry
            subject = getattr(credentials, "service_account_email", None)
        except Exception as exc:
            kind = type(exc).__name__
            raise TokenSourceError(
                f"{where}: {kind} getting Google credentials", may_clear=kind not in _FINAL_ERRORS
            ) from None
        if not isinstance(access_token, str) or not access_token or expiry is None:
            raise TokenSourceError(f"{where}: the credentials hold no access token", may_clear=True)
        if not isinstance(subject, str) or "@" not in subject:
            raise TokenSourceError(
                f"{where}: the credentials name no service account email (Managed Kafka's "
                "principal); use a service account (impersonated or a key file)",
                may_clear=False,
            )
        # google-auth keeps expiry as a naive UTC datetime.
        expires_at_s = expiry.replace(tzinfo=UTC).timestamp()
        now_s = time.time()
        if expires_at_s <= now_s:
            raise TokenSourceError(f"{where}: the access token has expired", may_clear=True)
        token = managed_kafka_token(
            access_token, subject=subject, expires_at_s=expires_at_s, now_s=now_s
        )
        return OAuthBearerToken(
            token,
            int(expires_at_s * 1000),
            principal=subject,
            issued_at_ms=int(now_s * 1000),
            extensions=dict(self._extensions),
        )
