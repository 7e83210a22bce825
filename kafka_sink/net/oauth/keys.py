"""The OAUTHBEARER settings' keys: which dotted keys a client reads with
``sasl.mechanism=OAUTHBEARER`` only, and which of them are secrets.

Role: the client config checks every config's keys against these (``net/config.py``, through
``login.oauth_keys``), with or without OAUTHBEARER; they live apart from ``sources.py`` (which
builds the token sources, and imports the OIDC and HTTP machinery to do it) so that a client
that uses no OAUTHBEARER never imports that machinery.

Invariants: constants only; no import beyond the standard library.
"""

from __future__ import annotations

__all__ = [
    "ASSERTION_KEYS",
    "AZURE_KEYS",
    "BROKER_ONLY",
    "MSK_KEYS",
    "OAUTH_SECRET_KEYS",
    "OAUTH_SOURCE_KEYS",
    "PREFIX",
    "PROVIDER_NAMES",
]

PREFIX = "sasl.oauthbearer."
ENDPOINT_URL = PREFIX + "token.endpoint.url"
CLIENT_ID = PREFIX + "client.credentials.client.id"
CLIENT_SECRET = PREFIX + "client.credentials.client.secret"
SCOPE = PREFIX + "scope"
PROVIDER = PREFIX + "token.provider"
EXTENSIONS = PREFIX + "extensions"
RETRIEVER = PREFIX + "jwt.retriever.class"
CONNECT_TIMEOUT = "sasl.login.connect.timeout.ms"
READ_TIMEOUT = "sasl.login.read.timeout.ms"

#: Keys the broker reads to validate tokens: a client has no use for them (Java's client
#: accepts and ignores them; here they are refused with the reason).
BROKER_ONLY = frozenset(
    {
        PREFIX + "jwks.endpoint.url",
        PREFIX + "jwks.endpoint.refresh.ms",
        PREFIX + "jwks.endpoint.retry.backoff.ms",
        PREFIX + "jwks.endpoint.retry.backoff.max.ms",
        PREFIX + "clock.skew.seconds",
    }
)

ASSERTION_KEYS = (
    PREFIX + "assertion.algorithm",
    PREFIX + "assertion.claim.aud",
    PREFIX + "assertion.claim.exp.seconds",
    PREFIX + "assertion.claim.iss",
    PREFIX + "assertion.claim.jti.include",
    PREFIX + "assertion.claim.nbf.seconds",
    PREFIX + "assertion.claim.sub",
    PREFIX + "assertion.file",
    PREFIX + "assertion.private.key.file",
    PREFIX + "assertion.private.key.passphrase",
    PREFIX + "assertion.template.file",
)

MSK_KEYS = (
    PREFIX + "msk.region",
    PREFIX + "msk.profile",
    PREFIX + "msk.role.arn",
    PREFIX + "msk.role.session.name",
)
AZURE_KEYS = (
    PREFIX + "azure.tenant.id",
    PREFIX + "azure.certificate.file",
    PREFIX + "azure.certificate.password",
)

#: Every dotted key :func:`token_source` reads (the client config accepts them with
#: ``sasl.mechanism=OAUTHBEARER`` only, and refuses them otherwise). ``sasl.jaas.config`` is
#: read too, but it is every mechanism's key.
OAUTH_SOURCE_KEYS: frozenset[str] = frozenset(
    {
        ENDPOINT_URL,
        CLIENT_ID,
        CLIENT_SECRET,
        SCOPE,
        PROVIDER,
        EXTENSIONS,
        RETRIEVER,
        CONNECT_TIMEOUT,
        READ_TIMEOUT,
        PREFIX + "header.urlencode",
        PREFIX + "jwt.validator.class",
        PREFIX + "sub.claim.name",
        PREFIX + "scope.claim.name",
        PREFIX + "expected.audience",
        PREFIX + "expected.issuer",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        *ASSERTION_KEYS,
        *MSK_KEYS,
        *AZURE_KEYS,
        *BROKER_ONLY,
    }
)

#: The keys of :data:`OAUTH_SOURCE_KEYS` whose values are secrets (never shown anywhere).
OAUTH_SECRET_KEYS: frozenset[str] = frozenset(
    {
        CLIENT_SECRET,
        PREFIX + "assertion.private.key.passphrase",
        PREFIX + "azure.certificate.password",
    }
)

#: The providers ``sasl.oauthbearer.token.provider`` names by a short name.
PROVIDER_NAMES = ("msk-iam", "azure", "google")
