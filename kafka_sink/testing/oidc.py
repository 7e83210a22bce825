"""A real OAuth 2.0 token endpoint and JWKS on 127.0.0.1, issuing RS256 JWTs, for tests and demos.

``LocalOidc`` serves two HTTP endpoints, each on its own port of 127.0.0.1:

- ``.jwks_url``: the JSON Web Key Set a broker's ``OAuthBearerValidatorCallbackHandler``
  verifies signatures with (``sasl.oauthbearer.jwks.endpoint.url``);
- ``.token_endpoint_url``: a token endpoint (RFC 6749 section 4.4, the client credentials
  grant) that authenticates registered clients by HTTP basic auth (as Kafka's Java client sends
  them) or by ``client_id``/``client_secret`` form fields, and also takes the JWT bearer grant
  of RFC 7523 section 2.1 (``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` with an
  ``assertion``: Kafka's KIP-1139) and private-key JWT client authentication (RFC 7523 section
  2.2: ``client_assertion``), both verified against public keys registered with
  :meth:`LocalOidc.add_assertion_client`.

Tokens are JWTs signed RS256 with a key made per start, carrying ``iss``, ``sub`` (the client id,
or the assertion's subject), ``aud``, ``iat``, ``nbf``, ``exp`` (``lifetime_s`` after issue),
``jti`` and ``scope`` (the requested scope, when the client may have it). :meth:`LocalOidc.issue`
signs a token by hand (any claims, e.g. an expired one or another audience) for tests that talk
to the broker directly.

Failures answer as RFC 6749 section 5.2 says: a wrong secret or an unknown client is ``401
invalid_client``, a scope the client may not have is ``400 invalid_scope``, a bad assertion is
``400 invalid_grant``. :meth:`LocalOidc.down` closes the token endpoint's socket (connections are
refused; the JWKS stays up, so tokens issued before still validate) and :meth:`LocalOidc.up`
opens it again on the same port; ``fail_with`` makes it answer an HTTP status instead.

Invariants:
- Nothing listens beyond 127.0.0.1; ``close()`` stops both servers and is idempotent.
- Every token request is recorded (:attr:`LocalOidc.requests`, without secrets or assertions),
  so tests can count fetches and see which grant and scope arrived.
- Secrets never appear in ``repr`` or in an error body.

The signing is done with joserfc (a test dependency), imported when the server starts.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Self

from kafka_sink.testing.jvm import Service
from kafka_sink.testing.local_kafka import OAuthListener

if TYPE_CHECKING:
    from joserfc.jwk import RSAKey

__all__ = ["JWT_BEARER_GRANT", "LocalOidc", "TokenRequest"]

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_MAX_BODY = 64 * 1024


@dataclass(frozen=True)
class TokenRequest:
    """One request the token endpoint answered (no secret, no assertion)."""

    grant_type: str
    client: str | None
    scope: str | None
    auth: str  # "basic", "form", "assertion", "client_assertion" or "none"
    status: int


@dataclass
class _AssertionClient:
    subject: str | None
    public_jwk: Any  # a joserfc key
    audiences: frozenset[str]


@dataclass
class _State:
    clients: dict[str, str] = field(default_factory=dict)
    scopes: dict[str, frozenset[str] | None] = field(default_factory=dict)
    assertion_clients: dict[str, _AssertionClient] = field(default_factory=dict)
    requests: list[TokenRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class LocalOidc(Service):
    """An OAuth token endpoint and JWKS on 127.0.0.1 (see the module docstring).

    ``clients`` maps client ids to secrets; ``scopes`` optionally limits a client to some scopes
    (absent: any scope). ``audience`` is the ``aud`` claim of issued tokens, ``lifetime_s`` their
    lifetime, ``issuer`` their ``iss`` (default: the token endpoint's base URL).
    """

    def __init__(
        self,
        clients: Mapping[str, str] | None = None,
        *,
        scopes: Mapping[str, Sequence[str]] | None = None,
        audience: str = "kafka",
        lifetime_s: float = 3600.0,
        issuer: str | None = None,
        kid: str = "local-oidc-1",
    ) -> None:
        self.audience = audience
        self.lifetime_s = lifetime_s
        self._issuer_arg = issuer
        self.kid = kid
        self._state = _State(clients=dict(clients or {}))
        for client, allowed in (scopes or {}).items():
            self._state.scopes[client] = frozenset(allowed)
        #: An HTTP status the token endpoint answers every request with (None: serve normally).
        self.fail_with: int | None = None
        self._key: RSAKey | None = None
        self._jwks_server: ThreadingHTTPServer | None = None
        self._token_server: ThreadingHTTPServer | None = None
        self._token_port = 0
        self._threads: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> Self:
        from joserfc.jwk import RSAKey

        if self._jwks_server is not None:
            raise RuntimeError("LocalOidc already started")
        self._key = RSAKey.generate_key(2048, parameters={"kid": self.kid, "use": "sig"})
        self._jwks_server = self._serve(0, _JwksHandler)
        self.up()
        return self

    def close(self) -> None:
        self.down()
        if self._jwks_server is not None:
            self._jwks_server.shutdown()
            self._jwks_server.server_close()
            self._jwks_server = None
        for thread in self._threads:
            thread.join(timeout=5.0)
        self._threads = []

    def down(self) -> None:
        """Close the token endpoint: connections to it are refused until :meth:`up`."""
        server, self._token_server = self._token_server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def up(self) -> None:
        """Open the token endpoint (again, on the same port)."""
        if self._jwks_server is None:
            raise RuntimeError("LocalOidc must be started first")
        if self._token_server is None:
            self._token_server = self._serve(self._token_port, _TokenHandler)
            self._token_port = self._token_server.server_address[1]

    def __repr__(self) -> str:
        url = self.token_endpoint_url if self._token_port else None
        return f"LocalOidc(token_endpoint_url={url!r}, clients={list(self._state.clients)!r})"

    # -- addresses ------------------------------------------------------------------------------
    @property
    def jwks_url(self) -> str:
        if self._jwks_server is None:
            raise RuntimeError("LocalOidc must be started first")
        return f"http://127.0.0.1:{self._jwks_server.server_address[1]}/jwks"

    @property
    def token_endpoint_url(self) -> str:
        if not self._token_port:
            raise RuntimeError("LocalOidc must be started first")
        return f"http://127.0.0.1:{self._token_port}/oauth2/token"

    @property
    def issuer(self) -> str:
        if self._issuer_arg is not None:
            return self._issuer_arg
        return f"http://127.0.0.1:{self._token_port}"

    @property
    def allowed_urls(self) -> str:
        """Both URLs, as Kafka's ``org.apache.kafka.sasl.oauthbearer.allowed.urls`` lists them."""
        return f"{self.jwks_url},{self.token_endpoint_url}"

    def broker_listener(self, *, reauth_ms: int | None = None, **kwargs: Any) -> OAuthListener:
        """The :class:`~kafka_sink.testing.local_kafka.OAuthListener` validating these tokens
        (this JWKS, this audience; both URLs allowed); ``kwargs`` go to it as they are."""
        kwargs.setdefault("expected_audience", self.audience)
        kwargs.setdefault("allowed_urls", self.allowed_urls)
        return OAuthListener(jwks_url=self.jwks_url, reauth_ms=reauth_ms, **kwargs)

    # -- clients and tokens ---------------------------------------------------------------------
    def add_client(self, client_id: str, secret: str, scopes: Sequence[str] | None = None) -> None:
        with self._state.lock:
            self._state.clients[client_id] = secret
            self._state.scopes[client_id] = None if scopes is None else frozenset(scopes)

    def add_assertion_client(
        self,
        issuer: str,
        public_key_pem: bytes | str,
        *,
        subject: str | None = None,
        audiences: Sequence[str] = (),
        scopes: Sequence[str] | None = None,
    ) -> None:
        """Accept assertions whose ``iss`` is ``issuer``, signed by the key (RSA or EC PEM).

        ``audiences``: the ``aud`` values accepted (empty: the token endpoint URL or the
        issuer); ``subject``: the ``sub`` required (None: any).
        """
        from joserfc.jwk import ECKey, RSAKey

        pem = public_key_pem.encode() if isinstance(public_key_pem, str) else public_key_pem
        key: Any
        try:
            key = RSAKey.import_key(pem)
        except (ValueError, TypeError):
            key = ECKey.import_key(pem)
        with self._state.lock:
            self._state.assertion_clients[issuer] = _AssertionClient(
                subject, key, frozenset(audiences)
            )
            self._state.scopes[issuer] = None if scopes is None else frozenset(scopes)

    @property
    def requests(self) -> list[TokenRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def issue(
        self,
        subject: str = "alice",
        *,
        lifetime_s: float | None = None,
        audience: str | None = None,
        scope: str | None = None,
        claims: Mapping[str, object] | None = None,
    ) -> str:
        """A signed token, as the endpoint would issue (``claims`` added or overriding)."""
        from joserfc import jwt

        if self._key is None:
            raise RuntimeError("LocalOidc must be started first")
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.issuer,
            "sub": subject,
            "aud": self.audience if audience is None else audience,
            "iat": now,
            "nbf": now,
            "exp": now + round(self.lifetime_s if lifetime_s is None else lifetime_s),
            "jti": uuid.uuid4().hex,
        }
        if scope:
            body["scope"] = scope
        body.update(claims or {})
        return jwt.encode({"alg": "RS256", "kid": self.kid, "typ": "JWT"}, body, self._key)

    def jwks(self) -> dict[str, Any]:
        if self._key is None:
            raise RuntimeError("LocalOidc must be started first")
        public = self._key.as_dict(private=False)
        public["alg"] = "RS256"
        return {"keys": [public]}

    # -- the token endpoint's logic ------------------------------------------------------------
    def _token_response(self, headers: Mapping[str, str], body: bytes) -> tuple[int, object]:
        if self.fail_with is not None:
            return self.fail_with, {"error": "temporarily_unavailable"}
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(body.decode("utf-8", "replace")).items()}
        grant = form.get("grant_type", "")
        scope = form.get("scope") or None
        if grant == JWT_BEARER_GRANT:
            issuer, result = self._check_assertion(form.get("assertion", ""))
            return self._answer(grant, issuer, scope, "assertion", result)
        if grant != "client_credentials":
            return self._record(grant, None, scope, "none", 400, "unsupported_grant_type")
        if form.get("client_assertion_type") == _CLIENT_ASSERTION_TYPE:
            issuer, result = self._check_assertion(form.get("client_assertion", ""))
            return self._answer(grant, issuer, scope, "client_assertion", result)
        client, secret, auth = _client_credentials(headers, form)
        with self._state.lock:
            known = self._state.clients.get(client or "")
        if client is None or known is None or secret != known:
            return self._record(grant, client, scope, auth, 401, "invalid_client")
        return self._answer(grant, client, scope, auth, (True, client))

    def _check_assertion(self, assertion: str) -> tuple[str | None, tuple[bool, str]]:
        """(issuer, (True, subject)) for a valid assertion, else (issuer, (False, reason))."""
        from joserfc import jwt
        from joserfc.errors import JoseError

        try:
            unverified = json.loads(_b64(assertion.split(".")[1]))
            issuer = str(unverified.get("iss", ""))
        except (ValueError, IndexError, AttributeError):
            return None, (False, "the assertion is not a JWT")
        with self._state.lock:
            registered = self._state.assertion_clients.get(issuer)
        if registered is None:
            return issuer, (False, "unknown assertion issuer")
        try:
            token = jwt.decode(assertion, registered.public_jwk, algorithms=["RS256", "ES256"])
        except (JoseError, ValueError):
            return issuer, (False, "bad assertion signature")
        claims = token.claims
        now = time.time()
        if not isinstance(claims.get("exp"), int | float) or claims["exp"] <= now:
            return issuer, (False, "the assertion has expired or has no exp")
        if isinstance(claims.get("nbf"), int | float) and claims["nbf"] > now + 30:
            return issuer, (False, "the assertion is not valid yet")
        audiences = registered.audiences or {self.token_endpoint_url, self.issuer}
        aud = claims.get("aud")
        given = set(aud) if isinstance(aud, list) else {aud}
        if not given & audiences:
            return issuer, (False, "the assertion's aud is not this endpoint")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            return issuer, (False, "the assertion has no sub")
        if registered.subject is not None and subject != registered.subject:
            return issuer, (False, "the assertion's sub is not the registered one")
        return issuer, (True, subject)

    def _answer(
        self,
        grant: str,
        client: str | None,
        scope: str | None,
        auth: str,
        result: tuple[bool, str],
    ) -> tuple[int, object]:
        ok, subject_or_error = result
        if not ok or client is None:
            return self._record(
                grant, client, scope, auth, 400, "invalid_grant", description=subject_or_error
            )
        with self._state.lock:
            allowed = self._state.scopes.get(client)
        if scope is not None and allowed is not None and not set(scope.split()) <= allowed:
            return self._record(grant, client, scope, auth, 400, "invalid_scope")
        self._record(grant, client, scope, auth, 200, "")
        token = self.issue(subject_or_error, scope=scope)
        return 200, {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": round(self.lifetime_s),
            **({"scope": scope} if scope else {}),
        }

    def _record(  # noqa: PLR0917 - one row of the request log
        self,
        grant: str,
        client: str | None,
        scope: str | None,
        auth: str,
        status: int,
        error: str,
        *,
        description: str | None = None,
    ) -> tuple[int, object]:
        with self._state.lock:
            self._state.requests.append(TokenRequest(grant, client, scope, auth, status))
        if status == 200:
            return 200, {}
        body = {"error": error}
        if description:
            body["error_description"] = description
        return status, body

    def _serve(self, port: int, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        server.daemon_threads = True
        server.oidc = self  # type: ignore[attr-defined]
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        thread.start()
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        return server


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _client_credentials(
    headers: Mapping[str, str], form: Mapping[str, str]
) -> tuple[str | None, str | None, str]:
    authorization = headers.get("Authorization", "")
    if authorization.lower().startswith("basic "):
        try:
            decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            return None, None, "basic"
        client, _, secret = decoded.partition(":")
        # RFC 6749 section 2.3.1: both parts are form-urlencoded before the basic encoding.
        return urllib.parse.unquote_plus(client), urllib.parse.unquote_plus(secret), "basic"
    if "client_id" in form:
        return form["client_id"], form.get("client_secret"), "form"
    return None, None, "none"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    @property
    def oidc(self) -> LocalOidc:
        return self.server.oidc  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: Any) -> None:
        return  # requests are recorded in LocalOidc.requests, not printed

    def _reply(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)


class _JwksHandler(_Handler):
    def do_GET(self) -> None:
        if self.path.split("?")[0] != "/jwks":
            self._reply(404, {"error": "not_found"})
            return
        self._reply(200, self.oidc.jwks())


class _TokenHandler(_Handler):
    def do_POST(self) -> None:
        if self.path.split("?")[0] != "/oauth2/token":
            self._reply(404, {"error": "not_found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            self._reply(413, {"error": "invalid_request"})
            return
        body = self.rfile.read(length)
        status, answer = self.oidc._token_response(dict(self.headers.items()), body)
        self._reply(status, answer)
