"""The OIDC sources against a real token endpoint (kafka_sink.testing.oidc's LocalOidc on
127.0.0.1, issuing RS256 tokens): the right secret gets a token; a wrong secret, a wrong scope, a
wrong audience and an unreachable endpoint each fail within seconds, naming the endpoint and
never the secret; the jwt-bearer grant's signed assertion is verified by the endpoint."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from joserfc import jwt as jose_jwt
from joserfc.jwk import KeySet

from kafka_sink.errors import ConfigError
from kafka_sink.net.oauth.sources import token_source
from kafka_sink.net.oauth.token import TokenSourceError
from kafka_sink.testing.oidc import LocalOidc
from tests.unit.net.oauth.tokens import RSA_KEY, write_pem

P = "sasl.oauthbearer."
SECRET = "Writer-Secret-42"
PKG = "org.apache.kafka.common.security.oauthbearer."


@pytest.fixture(scope="module")
def endpoint() -> Iterator[LocalOidc]:
    server = LocalOidc({"writer": SECRET}, scopes={"writer": ["kafka.write"]}, lifetime_s=120)
    server.start()
    try:
        yield server
    finally:
        server.close()


def settings(endpoint: LocalOidc, **extra: object) -> dict[str, object]:
    return {
        P + "token.endpoint.url": endpoint.token_endpoint_url,
        P + "client.credentials.client.id": "writer",
        P + "client.credentials.client.secret": SECRET,
        P + "scope": "kafka.write",
        P + "expected.audience": "kafka",
        "sasl.login.connect.timeout.ms": 2000,
        "sasl.login.read.timeout.ms": 2000,
        **extra,
    }


def test_the_right_secret_gets_a_verifiable_token(endpoint: LocalOidc) -> None:
    token = token_source(settings(endpoint)).fetch()
    assert token.principal == "writer"
    assert abs(token.expires_at_ms - (time.time() + 120) * 1000) < 5_000
    verified = jose_jwt.decode(token.value, KeySet.import_key_set(endpoint.jwks()))
    assert verified.claims["aud"] == "kafka"
    assert verified.claims["scope"] == "kafka.write"
    assert endpoint.requests[-1].auth == "basic"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {P + "client.credentials.client.secret": "Not-The-Secret-7"},
            r"refused \(HTTP 401, error 'invalid_client'\): check the client id and secret",
        ),
        ({P + "scope": "kafka.admin"}, r"refused \(HTTP 400, error 'invalid_scope'\)"),
        ({P + "expected.audience": "another-cluster"}, r"'aud' claim holds none"),
    ],
)
def test_refusals_fail_in_seconds_naming_the_endpoint_not_the_secret(
    endpoint: LocalOidc, change: dict[str, object], message: str
) -> None:
    given = settings(endpoint, **change)
    started = time.monotonic()
    with pytest.raises(TokenSourceError, match=message) as info:
        token_source(given).fetch()
    assert time.monotonic() - started < 3
    assert info.value.may_clear is False
    assert endpoint.token_endpoint_url in str(info.value)
    for secret in (SECRET, "Not-The-Secret-7"):
        assert secret not in str(info.value)


def test_an_unreachable_endpoint_fails_in_seconds_and_may_clear(endpoint: LocalOidc) -> None:
    source = token_source(settings(endpoint))
    endpoint.down()
    try:
        started = time.monotonic()
        with pytest.raises(TokenSourceError, match=r"unreachable") as info:
            source.fetch()
        assert time.monotonic() - started < 3
        assert info.value.may_clear is True
        assert endpoint.token_endpoint_url in str(info.value)
        assert SECRET not in str(info.value)
    finally:
        endpoint.up()
    assert source.fetch().principal == "writer"


def test_a_5xx_answer_may_clear(endpoint: LocalOidc) -> None:
    endpoint.fail_with = 503
    try:
        with pytest.raises(TokenSourceError, match=r"HTTP 503") as info:
            token_source(settings(endpoint)).fetch()
    finally:
        endpoint.fail_with = None
    assert info.value.may_clear is True


# RS256 only: the endpoint's add_assertion_client reads RSA public keys (ES256 signing is
# checked against joserfc's verification in test_oauth_oidc).
@pytest.mark.parametrize(("algorithm", "key"), [("RS256", RSA_KEY)])
def test_the_jwt_bearer_grant_with_a_signed_assertion(
    endpoint: LocalOidc, tmp_path: Path, algorithm: str, key: object
) -> None:
    public = key.public_key().public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    issuer = f"signer-{algorithm}"
    endpoint.add_assertion_client(issuer, public, subject="svc-signed", scopes=["kafka.write"])
    source = token_source(
        {
            P + "token.endpoint.url": endpoint.token_endpoint_url,
            P + "jwt.retriever.class": PKG + "JwtBearerJwtRetriever",
            P + "assertion.private.key.file": write_pem(tmp_path / "k.pem", key, b"pass-1"),
            P + "assertion.private.key.passphrase": "pass-1",
            P + "assertion.algorithm": algorithm,
            P + "assertion.claim.iss": issuer,
            P + "assertion.claim.sub": "svc-signed",
            P + "assertion.claim.aud": endpoint.token_endpoint_url,
            P + "assertion.claim.jti.include": "true",
            P + "scope": "kafka.write",
        }
    )
    token = source.fetch()
    assert token.principal == "svc-signed"
    assert endpoint.requests[-1].auth == "assertion"
    # The same settings with another subject: the endpoint refuses the assertion.
    wrong = token_source(
        {
            P + "token.endpoint.url": endpoint.token_endpoint_url,
            P + "jwt.retriever.class": "JwtBearerJwtRetriever",
            P + "assertion.private.key.file": write_pem(tmp_path / "k2.pem", key),
            P + "assertion.algorithm": algorithm,
            P + "assertion.claim.iss": issuer,
            P + "assertion.claim.sub": "someone-else",
            P + "assertion.claim.aud": endpoint.token_endpoint_url,
        }
    )
    with pytest.raises(TokenSourceError, match=r"HTTP 400, error 'invalid_grant'") as info:
        wrong.fetch()
    assert info.value.may_clear is False


def test_a_client_assertion_in_place_of_the_secret(endpoint: LocalOidc, tmp_path: Path) -> None:
    public = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    endpoint.add_assertion_client("entra-app", public, subject="entra-app", scopes=["kafka.write"])
    base = {
        P + "token.endpoint.url": endpoint.token_endpoint_url,
        P + "client.credentials.client.id": "entra-app",
        P + "assertion.private.key.file": write_pem(tmp_path / "k.pem", RSA_KEY),
        P + "assertion.claim.iss": "entra-app",
        P + "assertion.claim.sub": "entra-app",
        P + "assertion.claim.aud": endpoint.token_endpoint_url,
        P + "scope": "kafka.write",
    }
    source = token_source(base)
    assert "client assertion" in source.describe()
    assert source.fetch().principal == "entra-app"
    last = endpoint.requests[-1]
    assert (last.grant_type, last.auth, last.status) == (
        "client_credentials",
        "client_assertion",
        200,
    )
    with pytest.raises(ConfigError, match=r"assertion.private.key.file and the client secret"):
        token_source({**base, P + "client.credentials.client.secret": SECRET})
