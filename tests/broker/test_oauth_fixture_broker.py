"""The OAuth fixtures themselves: the token endpoint's answers, and a broker taking its tokens.

Checked with independent clients (urllib for the endpoint, kafka-python for the broker), so the
fixtures the OAUTHBEARER tests of this client rely on are proven apart from it.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from joserfc import jwt
from joserfc.jwk import RSAKey

from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oidc import JWT_BEARER_GRANT, LocalOidc
from kafka_sink.testing.oracle import create_topic, import_kafka_python, read_all
from tests.conftest import OAUTH_CLIENT


def _post(url: str, form: dict[str, str], basic: tuple[str, str] | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if basic is not None:
        pair = f"{urllib.parse.quote_plus(basic[0])}:{urllib.parse.quote_plus(basic[1])}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(form).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def test_the_token_endpoint_grants_client_credentials_and_refuses_a_wrong_secret(
    oidc: LocalOidc,
) -> None:
    status, body = _post(
        oidc.token_endpoint_url,
        {"grant_type": "client_credentials", "scope": "kafka"},
        OAUTH_CLIENT,
    )
    assert status == 200, body
    claims = _claims(body["access_token"])
    assert claims["sub"] == OAUTH_CLIENT[0]
    assert claims["aud"] == "kafka"
    assert claims["scope"] == "kafka"
    assert body["expires_in"] == 3600
    assert claims["exp"] - claims["iat"] == 3600
    status, body = _post(
        oidc.token_endpoint_url,
        {"grant_type": "client_credentials"},
        (OAUTH_CLIENT[0], "not-the-secret"),
    )
    assert (status, body["error"]) == (401, "invalid_client")
    assert "not-the-secret" not in json.dumps(body)
    assert oidc.requests[-1].status == 401 and oidc.requests[-1].auth == "basic"


def test_the_token_endpoint_takes_a_signed_assertion_and_can_be_taken_down() -> None:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    with LocalOidc(lifetime_s=30) as server:
        server.add_assertion_client("workload", public_pem, scopes=["kafka"])
        key = RSAKey.import_key(
            private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        now = int(time.time())
        claims = {"iss": "workload", "sub": "svc", "aud": server.token_endpoint_url}
        assertion = jwt.encode({"alg": "RS256"}, {**claims, "iat": now, "exp": now + 60}, key)
        status, body = _post(
            server.token_endpoint_url,
            {"grant_type": JWT_BEARER_GRANT, "assertion": assertion, "scope": "kafka"},
        )
        assert status == 200, body
        assert _claims(body["access_token"])["sub"] == "svc"
        assert body["expires_in"] == 30
        expired = jwt.encode({"alg": "RS256"}, {**claims, "iat": now - 90, "exp": now - 30}, key)
        status, body = _post(
            server.token_endpoint_url, {"grant_type": JWT_BEARER_GRANT, "assertion": expired}
        )
        assert (status, body["error"]) == (400, "invalid_grant")
        status, body = _post(
            server.token_endpoint_url,
            {"grant_type": JWT_BEARER_GRANT, "assertion": assertion, "scope": "admin"},
        )
        assert (status, body["error"]) == (400, "invalid_scope")
        url = server.token_endpoint_url
        server.down()
        with pytest.raises(urllib.error.URLError):
            _post(url, {"grant_type": JWT_BEARER_GRANT, "assertion": assertion})
        server.up()
        assert server.token_endpoint_url == url
        assert _post(url, {"grant_type": JWT_BEARER_GRANT, "assertion": assertion})[0] == 200
        server.fail_with = 503
        assert _post(url, {"grant_type": JWT_BEARER_GRANT, "assertion": assertion})[0] == 503


def _producer(bootstrap: str, token: str, max_block_ms: int = 5000) -> Any:
    kafka = import_kafka_python()
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Tokens(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return token

    return kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Tokens(),
        api_version=(2, 8),
        max_block_ms=max_block_ms,
    )


def test_the_oauth_listener_takes_the_endpoints_tokens_and_refuses_others(
    oidc: LocalOidc, oauth_kafka: LocalKafka
) -> None:
    create_topic(oauth_kafka.bootstrap_servers, "oauth-fixture")
    good = _producer(oauth_kafka.oauth_bootstrap_servers, oidc.issue("alice"))
    try:
        good.send("oauth-fixture", b"signed").get(timeout=30)
    finally:
        good.close(timeout=10)
    kafka = import_kafka_python()
    for token in (
        oidc.issue("alice", audience="someone-else"),
        oidc.issue("alice", lifetime_s=-60),
        oidc.issue("alice")[:-8] + "AAAAAAAA",  # the signature no longer matches
    ):
        bad = _producer(oauth_kafka.oauth_bootstrap_servers, token, max_block_ms=2000)
        try:
            with pytest.raises(kafka.errors.KafkaError):
                bad.send("oauth-fixture", b"refused").get(timeout=10)
        finally:
            bad.close(timeout=5)
    values = [r.value for r in read_all(oauth_kafka.bootstrap_servers, "oauth-fixture", expected=1)]
    assert values == [b"signed"]
