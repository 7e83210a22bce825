"""Tokens from an OAuth/OIDC token endpoint: the client credentials and jwt-bearer grants.

Role: the :class:`~kafka_sink.net.oauth.token.TokenSource` implementations behind Java's
``sasl.oauthbearer.token.endpoint.url``:

- :class:`ClientCredentialsSource`: RFC 6749's ``client_credentials`` grant, the client id and
  secret sent as HTTP basic auth (``Authorization: Basic``), ``scope`` in the form body, as
  Java's ``ClientCredentialsJwtRetriever`` sends them (URL-encoded first when
  ``sasl.oauthbearer.header.urlencode=true``, as RFC 6749 section 2.3.1 asks; Java's default
  ``false`` sends them as they are);
- :class:`ClientAssertionSource`: the same grant with a signed client assertion (RFC 7523
  section 2.2, KIP-1258's private-key JWT) in place of the secret;
- :class:`JwtBearerSource`: KIP-1139's ``urn:ietf:params:oauth:grant-type:jwt-bearer`` grant,
  a client assertion (RFC 7523) signed here with a private key (RS256 or ES256, through
  ``joserfc``) or read pre-signed from a file, instead of a secret;
- :class:`FileTokenSource`: a ``file:`` endpoint URL, a file holding a token (Java's
  ``FileJwtRetriever``), read again on every fetch so a rotated file is picked up.

:func:`token_from_jwt` and :func:`parse_token_response` turn what an endpoint answered into an
:class:`~kafka_sink.net.oauth.token.OAuthBearerToken`: the JWT's ``exp``, ``iat`` and subject
claim (``sasl.oauthbearer.sub.claim.name``) are read without verifying the signature (the client
has no key for it: the broker verifies), and its scope claim (``sasl.oauthbearer.scope.claim.name``)
must be a string or a list of strings, as Java's ``ClientJwtValidator`` checks.

Invariants:
- An endpoint's answer is untrusted: the body is capped (:data:`MAX_RESPONSE_BYTES`), must be a
  JSON object whose ``access_token`` is a string of RFC 6750 token characters no longer than
  :data:`MAX_TOKEN_CHARS`, ``expires_in`` (when given) a positive number of seconds up to
  :data:`MAX_EXPIRES_IN_S`, and the token must not have expired already; anything else is a
  :class:`~kafka_sink.net.oauth.token.TokenSourceError`. Nothing the endpoint sent is quoted in
  a message except an RFC 6749 ``error`` code made of code characters.
- Every fetch is one HTTP exchange through :func:`kafka_sink.net.http.exchange`, bounded by
  ``sasl.login.connect.timeout.ms`` + ``sasl.login.read.timeout.ms`` in all; retrying is the
  login's (``sasl.login.retry.backoff.*``), never this module's.
- A refusal (400, 401, 403 and other 4xx but 408/429) raises ``TokenSourceError`` with
  ``may_clear=False``; an unreachable endpoint, a timeout, 408, 429 and 5xx ``may_clear=True``.
  Messages name the endpoint (user info masked) and never the secret, the assertion, the private
  key's passphrase or a token; ``repr`` of a source shows none of them either.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_sink.errors import ConfigError
from kafka_sink.net.http import HttpTransportError, exchange
from kafka_sink.net.oauth.token import OAuthBearerToken, TokenSourceError
from kafka_sink.net.user_info import mask_url

__all__ = [
    "CLIENT_ASSERTION_TYPE",
    "GRANT_CLIENT_CREDENTIALS",
    "GRANT_JWT_BEARER",
    "MAX_EXPIRES_IN_S",
    "MAX_RESPONSE_BYTES",
    "MAX_TOKEN_CHARS",
    "AssertionSettings",
    "ClientAssertionSource",
    "ClientCredentialsSource",
    "FileTokenSource",
    "JwtBearerSource",
    "TokenChecks",
    "jwt_claims",
    "parse_token_response",
    "token_from_jwt",
]

GRANT_CLIENT_CREDENTIALS = "client_credentials"
GRANT_JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: The most of a token endpoint's answer that is read.
MAX_RESPONSE_BYTES = 256 * 1024
#: The longest token accepted (a SASL frame carries it to every broker).
MAX_TOKEN_CHARS = 64 * 1024
#: The longest lifetime an endpoint may announce (ten years): more is no sane ``expires_in``.
MAX_EXPIRES_IN_S = 10 * 365 * 24 * 3600
#: The largest file read as a token, an assertion, an assertion template or a private key.
MAX_FILE_BYTES = 256 * 1024

# RFC 6750 section 2.1's b64token: the characters a bearer token may hold.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# An RFC 6749 section 5.2 error code as it may be shown (codes are NQSCHAR; shown only if tame).
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
# Epoch seconds beyond this are no date a token expires at (year 2286).
_MAX_EPOCH_S = 10**10


@dataclass(frozen=True)
class TokenChecks:
    """What a fetched token is read and checked for, and the SASL extensions sent with it.

    ``expected_audience`` / ``expected_issuer`` (``sasl.oauthbearer.expected.*``) are the
    broker's checks; when set on a client they are applied to the token before it is sent, so a
    wrong audience fails on the client with the endpoint named instead of at the broker.
    """

    sub_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)


def _b64url_decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def jwt_claims(token: str) -> dict[str, Any] | None:
    """The payload of ``token`` if it is a JWS compact serialization with a JSON object payload
    (unverified), else None."""
    parts = token.split(".")
    if len(parts) != 3 or not parts[1]:
        return None
    try:
        payload = json.loads(_b64url_decode(parts[1]))
    except (binascii.Error, ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


def _epoch_ms(value: object) -> int | None:
    """A NumericDate claim as epoch milliseconds; None when it is no sane date."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not 0 < value < _MAX_EPOCH_S:
        return None
    return int(value * 1000)


def _expires_in_ms(value: object) -> int | None:
    """``expires_in`` as milliseconds; None when it is no positive number of seconds up to
    :data:`MAX_EXPIRES_IN_S`. Digit strings are read too (some providers send "3599")."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 12:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if not 0 < value <= MAX_EXPIRES_IN_S:
        return None
    return int(value * 1000)


def token_from_jwt(
    token: str,
    *,
    source: str,
    checks: TokenChecks,
    expires_in_ms: int | None = None,
    now_ms: int | None = None,
    require_jwt: bool = False,
) -> OAuthBearerToken:
    """``token`` read into an :class:`OAuthBearerToken`, or a ``TokenSourceError`` naming
    ``source`` (``may_clear=False``: the same source would answer the same).

    A JWT's ``exp`` (and ``now + expires_in`` when that comes earlier) is the expiry and its
    subject claim the principal. A token that is no JWT needs ``expires_in_ms`` and has no
    principal; with ``require_jwt`` (a file token, as Java reads it) it is refused.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms

    def refuse(why: str) -> TokenSourceError:
        return TokenSourceError(f"{source}: {why}", may_clear=False)

    if not token or len(token) > MAX_TOKEN_CHARS or not _B64TOKEN.fullmatch(token):
        raise refuse(
            f"the token is not a bearer token (1 to {MAX_TOKEN_CHARS} characters of RFC 6750's "
            "token alphabet)"
        )
    claims = jwt_claims(token)
    principal: str | None = None
    issued_at: int | None = None
    expires_at = None if expires_in_ms is None else now + expires_in_ms
    if claims is None:
        if require_jwt:
            raise refuse("the token is not a JWT (three base64url parts, a JSON payload)")
        if checks.expected_audience or checks.expected_issuer is not None:
            raise refuse(
                "the token is not a JWT, so sasl.oauthbearer.expected.audience / "
                ".expected.issuer cannot be checked; remove them for opaque tokens"
            )
        if expires_at is None:
            raise refuse("the token is not a JWT and the answer has no expires_in")
    else:
        exp = _epoch_ms(claims.get("exp"))
        if exp is None:
            raise refuse("the token has no valid 'exp' claim (epoch seconds)")
        expires_at = exp if expires_at is None else min(exp, expires_at)
        if "iat" in claims:
            issued_at = _epoch_ms(claims["iat"])
            if issued_at is None:
                raise refuse("the token's 'iat' claim is no date (epoch seconds)")
        subject = claims.get(checks.sub_claim_name)
        if not isinstance(subject, str) or not subject.strip():
            raise refuse(
                f"the token has no {checks.sub_claim_name!r} claim naming its principal "
                "(sasl.oauthbearer.sub.claim.name names the claim the provider uses)"
            )
        principal = subject.strip()
        scope = claims.get(checks.scope_claim_name)
        if scope is not None and not (
            isinstance(scope, str)
            or (isinstance(scope, list) and all(isinstance(s, str) and s.strip() for s in scope))
        ):
            raise refuse(
                f"the token's {checks.scope_claim_name!r} claim is neither a string nor a list "
                "of strings (sasl.oauthbearer.scope.claim.name names the claim)"
            )
        _check_audience_issuer(claims, checks, refuse)
    if expires_at <= now:
        raise refuse("the token has already expired (check the clocks of this host and the IdP)")
    return OAuthBearerToken(
        token,
        expires_at,
        principal=principal,
        issued_at_ms=issued_at,
        extensions=dict(checks.extensions),
    )


def _check_audience_issuer(
    claims: Mapping[str, Any], checks: TokenChecks, refuse: Callable[[str], TokenSourceError]
) -> None:
    if checks.expected_audience:
        aud = claims.get("aud")
        auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(a in checks.expected_audience for a in auds if isinstance(a, str)):
            raise refuse(
                "the token's 'aud' claim holds none of sasl.oauthbearer.expected.audience: "
                "the endpoint issued it for another audience (check sasl.oauthbearer.scope)"
            )
    if checks.expected_issuer is not None and claims.get("iss") != checks.expected_issuer:
        raise refuse("the token's 'iss' claim is not sasl.oauthbearer.expected.issuer")


def parse_token_response(
    body: bytes, *, source: str, checks: TokenChecks, now_ms: int | None = None
) -> OAuthBearerToken:
    """A token endpoint's 2xx answer (RFC 6749 section 5.1) read into a token, or a
    ``TokenSourceError`` naming ``source`` that quotes nothing of the answer."""

    def refuse(why: str) -> TokenSourceError:
        return TokenSourceError(f"{source}: {why}", may_clear=False)

    try:
        answer = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise refuse("the token endpoint's answer is not JSON") from None
    if not isinstance(answer, dict):
        raise refuse("the token endpoint's answer is not a JSON object")
    # Java reads access_token, and id_token when there is none.
    token = answer.get("access_token")
    if token is None:
        token = answer.get("id_token")
    if not isinstance(token, str):
        raise refuse("the token endpoint's answer has no access_token string")
    expires_in_ms: int | None = None
    if answer.get("expires_in") is not None:
        expires_in_ms = _expires_in_ms(answer["expires_in"])
        if expires_in_ms is None:
            raise refuse(
                f"the token endpoint's expires_in is not a number of seconds in "
                f"(0, {MAX_EXPIRES_IN_S}]"
            )
    return token_from_jwt(
        token.strip(), source=source, checks=checks, expires_in_ms=expires_in_ms, now_ms=now_ms
    )


def _error_code(body: bytes) -> str | None:
    """RFC 6749's ``error`` code of an error answer, when it is one that may be shown."""
    try:
        answer = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    code = answer.get("error") if isinstance(answer, dict) else None
    return code if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else None


_REFUSAL_HINTS = {
    "invalid_client": "check the client id and secret",
    "unauthorized_client": "the client may not use this grant",
    "invalid_scope": "check sasl.oauthbearer.scope",
    "invalid_grant": "the assertion was not accepted (check its claims, key and algorithm)",
    "invalid_request": "the endpoint did not accept the request",
    "unsupported_grant_type": "the endpoint does not offer this grant",
}


class _EndpointSource:
    """What the HTTP grants share: the endpoint, the time bounds, the answer's handling."""

    grant = ""
    #: How :meth:`describe` names the grant.
    shown_grant = ""

    def __init__(
        self,
        url: str,
        *,
        scope: str | None,
        checks: TokenChecks,
        connect_timeout_ms: int,
        read_timeout_ms: int,
    ) -> None:
        self._url = url
        self._scope = scope
        self._checks = checks
        self._timeout_ms = connect_timeout_ms + read_timeout_ms

    def _form(self, fields: dict[str, str]) -> bytes:
        """The request's form: the grant, ``fields``, and the scope when one is set."""
        form = {"grant_type": self.grant, **fields}
        if self._scope:
            form["scope"] = self._scope
        return urllib.parse.urlencode(form).encode()

    def describe(self) -> str:
        return f"token endpoint {mask_url(self._url)} ({self.shown_grant})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()!r})"

    def _request(self) -> tuple[bytes, dict[str, str]]:
        """The form body and the secret headers of one request."""
        raise NotImplementedError

    def fetch(self) -> OAuthBearerToken:
        body, secret_headers = self._request()
        where = self.describe()
        try:
            response = exchange(
                "POST",
                self._url,
                body=body,
                headers={
                    "Accept": "application/json",
                    "Cache-Control": "no-cache",
                    "Content-Type": "application/x-www-form-urlencoded",
                },
                secret_headers=secret_headers,
                timeout_ms=self._timeout_ms,
                max_body_bytes=MAX_RESPONSE_BYTES,
            )
        except HttpTransportError as exc:
            raise TokenSourceError(f"{where}: unreachable ({exc.reason})", may_clear=True) from None
        status = response.status
        if 200 <= status < 300:
            return parse_token_response(response.body, source=where, checks=self._checks)
        code = _error_code(response.body)
        shown = f"HTTP {status}" + (f", error {code!r}" if code else "")
        if status in (408, 429) or status >= 500:
            raise TokenSourceError(f"{where}: answered {shown}; will retry", may_clear=True)
        hint = _REFUSAL_HINTS.get(code or "")
        if hint is None:
            hint = {
                401: "check the client credentials",
                403: "the client may not have a token",
            }.get(status, "the endpoint refused the request")
        raise TokenSourceError(f"{where}: refused ({shown}): {hint}", may_clear=False)


class ClientCredentialsSource(_EndpointSource):
    """RFC 6749 section 4.4: a token for the client's own id and secret."""

    grant = GRANT_CLIENT_CREDENTIALS
    shown_grant = "client credentials grant"

    def __init__(
        self,
        url: str,
        *,
        client_id: str,
        client_secret: str,
        scope: str | None,
        urlencode: bool,
        checks: TokenChecks,
        connect_timeout_ms: int,
        read_timeout_ms: int,
    ) -> None:
        super().__init__(
            url,
            scope=scope,
            checks=checks,
            connect_timeout_ms=connect_timeout_ms,
            read_timeout_ms=read_timeout_ms,
        )
        if urlencode:
            # RFC 6749 section 2.3.1: form-encode both before joining them with ':'.
            client_id = urllib.parse.quote_plus(client_id)
            client_secret = urllib.parse.quote_plus(client_secret)
        basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode("ascii")
        self._authorization = f"Basic {basic}"

    def _request(self) -> tuple[bytes, dict[str, str]]:
        return self._form({}), {"Authorization": self._authorization}


def _read_capped(path: str, key: str) -> bytes:
    """A file's bytes, at most :data:`MAX_FILE_BYTES`; ``TokenSourceError`` naming ``key`` and
    the path (may clear: a file being rotated may be back soon)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise TokenSourceError(
            f"{key} {path!r} could not be read ({exc.strerror or type(exc).__name__})",
            may_clear=True,
        ) from None
    if len(data) > MAX_FILE_BYTES:
        raise TokenSourceError(
            f"{key} {path!r} is larger than {MAX_FILE_BYTES} bytes", may_clear=False
        )
    return data


@dataclass(frozen=True)
class AssertionSettings:
    """How the jwt-bearer grant's assertion is made: read from ``assertion_file``, or signed
    here with ``private_key_file`` (Java's ``sasl.oauthbearer.assertion.*`` keys).

    The header and claims are layered as Java layers them: the template file's, then ``iss`` /
    ``sub`` / ``aud`` from the settings, then ``alg``, ``typ``, ``iat``, ``exp``, ``nbf`` and
    (with ``include_jti``) ``jti``. Files are read on every fetch, so a rotated key or template
    is used from the next token on.
    """

    assertion_file: str | None = None
    private_key_file: str | None = None
    private_key_passphrase: str | None = field(default=None, repr=False)
    algorithm: str = "RS256"
    template_file: str | None = None
    claim_iss: str | None = None
    claim_sub: str | None = None
    claim_aud: str | None = None
    exp_seconds: int = 300
    nbf_seconds: int = 60
    include_jti: bool = False


def _joserfc() -> Any:
    try:
        import joserfc.jwk
        import joserfc.jwt
    except ImportError:
        raise ConfigError(
            "sasl.oauthbearer.assertion.private.key.file: signing a jwt-bearer assertion needs "
            "joserfc: pip install 'pykafka-sink[oauth-jwt]'"
        ) from None
    return joserfc


def check_private_key(settings: AssertionSettings) -> None:
    """Load and check the signing key now, so a bad key or passphrase is a ConfigError at
    construction rather than a failing refresh later (the message quotes no key material)."""
    if settings.private_key_file is None:
        return
    try:
        _load_key(settings)
    except TokenSourceError as exc:
        raise ConfigError(str(exc)) from None


def _load_key(settings: AssertionSettings) -> Any:
    jose = _joserfc()
    key_name = "sasl.oauthbearer.assertion.private.key.file"
    assert settings.private_key_file is not None
    pem = _read_capped(settings.private_key_file, key_name)
    key_type = "RSA" if settings.algorithm == "RS256" else "EC"
    key_class = jose.jwk.RSAKey if key_type == "RSA" else jose.jwk.ECKey
    passphrase = settings.private_key_passphrase
    try:
        key = key_class.import_key(pem, password=passphrase.encode() if passphrase else None)
    except Exception as exc:
        # The library's text could echo key bytes: only the kind of failure is shown.
        raise TokenSourceError(
            f"{key_name} {settings.private_key_file!r} did not load as a PEM {key_type} private "
            f"key for {settings.algorithm} ({type(exc).__name__}; an encrypted key needs "
            "sasl.oauthbearer.assertion.private.key.passphrase)",
            may_clear=False,
        ) from None
    if not key.is_private:
        raise TokenSourceError(
            f"{key_name} {settings.private_key_file!r} holds a public key, not a private key",
            may_clear=False,
        )
    return key


def _template(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    key = "sasl.oauthbearer.assertion.template.file"
    try:
        template = json.loads(_read_capped(path, key).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise TokenSourceError(f"{key} {path!r} is not JSON", may_clear=False) from None
    header = template.get("header", {}) if isinstance(template, dict) else None
    payload = template.get("payload", {}) if isinstance(template, dict) else None
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise TokenSourceError(
            f"{key} {path!r}: expected a JSON object with optional 'header' and 'payload' objects",
            may_clear=False,
        )
    return header, payload


def make_assertion(settings: AssertionSettings, *, now_s: float | None = None) -> str:
    """The client assertion of one jwt-bearer request."""
    if settings.assertion_file is not None:
        text = _read_capped(settings.assertion_file, "sasl.oauthbearer.assertion.file")
        assertion = text.decode("utf-8", "replace").strip()
        if jwt_claims(assertion) is None:
            raise TokenSourceError(
                f"sasl.oauthbearer.assertion.file {settings.assertion_file!r} does not hold a "
                "JWT (three base64url parts)",
                may_clear=False,
            )
        return assertion
    jose = _joserfc()
    key = _load_key(settings)
    header: dict[str, Any] = {}
    claims: dict[str, Any] = {}
    if settings.template_file is not None:
        header, claims = _template(settings.template_file)
    for name, value in (
        ("iss", settings.claim_iss),
        ("sub", settings.claim_sub),
        ("aud", settings.claim_aud),
    ):
        if value is not None:
            claims[name] = value
    now = int(time.time() if now_s is None else now_s)
    header.update(alg=settings.algorithm, typ="JWT")
    claims.update(iat=now, exp=now + settings.exp_seconds, nbf=now - settings.nbf_seconds)
    if settings.include_jti:
        claims["jti"] = str(uuid.uuid4())
    return str(jose.jwt.encode(header, claims, key, algorithms=[settings.algorithm]))


class JwtBearerSource(_EndpointSource):
    """KIP-1139: a token for a signed client assertion (RFC 7523 section 2.1)."""

    grant = GRANT_JWT_BEARER
    shown_grant = "jwt-bearer grant"

    def __init__(
        self,
        url: str,
        *,
        assertion: AssertionSettings,
        scope: str | None,
        checks: TokenChecks,
        connect_timeout_ms: int,
        read_timeout_ms: int,
    ) -> None:
        super().__init__(
            url,
            scope=scope,
            checks=checks,
            connect_timeout_ms=connect_timeout_ms,
            read_timeout_ms=read_timeout_ms,
        )
        self._assertion = assertion

    def _request(self) -> tuple[bytes, dict[str, str]]:
        return self._form({"assertion": make_assertion(self._assertion)}), {}


class FileTokenSource:
    """Java's ``FileJwtRetriever``: a ``file:`` token endpoint URL names a file holding a JWT."""

    def __init__(self, path: str, *, checks: TokenChecks) -> None:
        self._path = path
        self._checks = checks

    def describe(self) -> str:
        return f"token file {self._path!r}"

    def __repr__(self) -> str:
        return f"FileTokenSource({self._path!r})"

    def fetch(self) -> OAuthBearerToken:
        data = _read_capped(self._path, "sasl.oauthbearer.token.endpoint.url")
        token = data.decode("utf-8", "replace").strip()
        return token_from_jwt(token, source=self.describe(), checks=self._checks, require_jwt=True)


def file_url_path(url: str) -> str:
    """The local path of a ``file:`` URL (``file:/p``, ``file:///p``, ``file://localhost/p``)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.netloc not in ("", "localhost"):
        raise ConfigError(
            f"sasl.oauthbearer.token.endpoint.url: a file URL names a local file "
            f"(file:///path), not a host ({parsed.netloc!r})"
        )
    return str(Path(urllib.parse.unquote(parsed.path)))


class ClientAssertionSource(_EndpointSource):
    """The client credentials grant with a client assertion instead of a secret (RFC 7523
    section 2.2; Java's ``ClientCredentialsJwtRetriever`` since KIP-1258): private-key JWT, as
    secretless Entra ID applications authenticate."""

    grant = GRANT_CLIENT_CREDENTIALS
    shown_grant = "client credentials grant, client assertion"

    def __init__(
        self,
        url: str,
        *,
        client_id: str | None,
        assertion: AssertionSettings,
        scope: str | None,
        checks: TokenChecks,
        connect_timeout_ms: int,
        read_timeout_ms: int,
    ) -> None:
        super().__init__(
            url,
            scope=scope,
            checks=checks,
            connect_timeout_ms=connect_timeout_ms,
            read_timeout_ms=read_timeout_ms,
        )
        self._client_id = client_id
        self._assertion = assertion

    def _request(self) -> tuple[bytes, dict[str, str]]:
        fields = {
            "client_assertion_type": CLIENT_ASSERTION_TYPE,
            "client_assertion": make_assertion(self._assertion),
        }
        if self._client_id:
            fields["client_id"] = self._client_id
        return self._form(fields), {}
