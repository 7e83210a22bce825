"""The token sources as users configure them (the Java client's keys, no Python objects) against
a broker validating signed JWTs, with tokens from the local token endpoint: the JAAS form with
Confluent Cloud's extensions, Java 4.x's client credentials keys, the jwt-bearer grant; a wrong
secret fails in seconds naming the endpoint and never the secret. An independent consumer
(kafka-python, on the PLAINTEXT listener) reads back."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kafka_sink import KafkaProducer
from kafka_sink.errors import KafkaError
from kafka_sink.net.oauth.login import live_logins
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oidc import LocalOidc
from kafka_sink.testing.oracle import create_topic, read_all
from tests.conftest import OAUTH_CLIENT

pytestmark = pytest.mark.broker

P = "sasl.oauthbearer."
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(autouse=True)
def _no_leaked_logins() -> Iterator[None]:
    yield
    assert live_logins() == []


def _write(bootstrap: str, topic: str, settings: dict[str, object], n: int = 5) -> None:
    config = {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        **settings,
    }
    with KafkaProducer(config) as producer:
        for i in range(n):
            producer.send(topic, b"v%d" % i).get(30)


def test_the_jaas_form_with_extensions_writes_through_the_listener(
    oidc: LocalOidc, oauth_kafka: LocalKafka
) -> None:
    client, secret = OAUTH_CLIENT
    create_topic(oauth_kafka.bootstrap_servers, "oauth-jaas")
    _write(
        oauth_kafka.oauth_bootstrap_servers,
        "oauth-jaas",
        {
            "sasl.login.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
            ),
            P + "token.endpoint.url": oidc.token_endpoint_url,
            "sasl.jaas.config": (
                f'{MODULE} required clientId="{client}" clientSecret="{secret}" '
                'extension_logicalCluster="lkc-abc123" extension_identityPoolId="pool-Xy1";'
            ),
            P + "expected.audience": "kafka",
        },
    )
    values = [r.value for r in read_all(oauth_kafka.bootstrap_servers, "oauth-jaas", expected=5)]
    assert values == [b"v%d" % i for i in range(5)]


def test_the_jwt_bearer_grant_writes_through_the_listener(
    oidc: LocalOidc, oauth_kafka: LocalKafka, tmp_path: Path
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file = tmp_path / "signer.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    oidc.add_assertion_client("spark-writer", public, subject="spark-writer")
    create_topic(oauth_kafka.bootstrap_servers, "oauth-jwt-bearer")
    _write(
        oauth_kafka.oauth_bootstrap_servers,
        "oauth-jwt-bearer",
        {
            P + "token.endpoint.url": oidc.token_endpoint_url,
            P + "jwt.retriever.class": (
                "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever"
            ),
            P + "assertion.private.key.file": str(key_file),
            P + "assertion.claim.iss": "spark-writer",
            P + "assertion.claim.sub": "spark-writer",
            P + "assertion.claim.aud": oidc.token_endpoint_url,
        },
    )
    read_all(oauth_kafka.bootstrap_servers, "oauth-jwt-bearer", expected=5)
    assert any(r.auth == "assertion" and r.status == 200 for r in oidc.requests)


def test_a_wrong_secret_in_the_keys_fails_in_seconds_naming_the_endpoint(
    oidc: LocalOidc, oauth_kafka: LocalKafka
) -> None:
    began = time.monotonic()
    with pytest.raises(KafkaError) as info:
        _write(
            oauth_kafka.oauth_bootstrap_servers,
            "oauth-wrong-secret",
            {
                P + "token.endpoint.url": oidc.token_endpoint_url,
                P + "client.credentials.client.id": OAUTH_CLIENT[0],
                P + "client.credentials.client.secret": "Not-The-Secret-31",
            },
        )
    assert time.monotonic() - began < 10
    assert oidc.token_endpoint_url in str(info.value)
    assert "invalid_client" in str(info.value)
    assert "Not-The-Secret-31" not in str(info.value)
