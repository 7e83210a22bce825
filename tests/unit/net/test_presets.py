"""The managed services' presets: what each fills in, what it never replaces, which values it
refuses and in which words (no secret quoted)."""

from __future__ import annotations

import pytest

from kafka_sink.errors import ConfigError
from kafka_sink.net.presets import PRESET_NAMES, apply_preset
from kafka_sink.producer.config import ProducerConfig
from kafka_sink.producer.producer import KafkaProducer

CONNECTION_STRING = (
    "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKeyName=send;"
    "SharedAccessKey=c2VjcmV0LWtleS12YWx1ZQ=="
)


def test_the_four_presets_are_named_as_documented() -> None:
    assert PRESET_NAMES == ("msk-iam", "confluent-cloud", "event-hubs", "google")


def test_msk_iam_sets_tls_oauthbearer_the_provider_and_the_iam_port() -> None:
    out = apply_preset("msk-iam", {"bootstrap.servers": "b-1.c.kafka.us-east-1.amazonaws.com"})
    assert out == {
        "bootstrap.servers": "b-1.c.kafka.us-east-1.amazonaws.com:9098",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.provider": "msk-iam",
        "sasl.oauthbearer.msk.region": "us-east-1",
        "reconnect.backoff.ms": "1000",
    }


def test_msk_iam_takes_the_region_from_a_serverless_host_and_keeps_a_given_one() -> None:
    host = "boot-abc.c1.kafka-serverless.eu-west-2.amazonaws.com:9098"
    out = apply_preset("msk-iam", {"bootstrap.servers": host})
    assert out["sasl.oauthbearer.msk.region"] == "eu-west-2"
    given = {"bootstrap.servers": host, "sasl.oauthbearer.msk.region": "us-west-2"}
    out = apply_preset("msk-iam", given)
    assert out["sasl.oauthbearer.msk.region"] == "us-west-2"
    # A region key alone names no token source: the preset's provider still applies.
    assert out["sasl.oauthbearer.token.provider"] == "msk-iam"
    assert "sasl.oauthbearer.msk.region" not in apply_preset(
        "msk-iam", {"bootstrap.servers": "localhost:9098"}
    )


def test_msk_iam_refuses_another_mechanism() -> None:
    with pytest.raises(
        ConfigError, match=r"'sasl.mechanism' is 'SCRAM-SHA-512'.*takes OAUTHBEARER"
    ):
        apply_preset("msk-iam", {"bootstrap.servers": "b:9096", "sasl.mechanism": "SCRAM-SHA-512"})


def test_a_preset_never_replaces_what_the_user_set() -> None:
    given = {
        "bootstrap.servers": "b-1:9198",
        "reconnect.backoff.ms": "50",
        "sasl.oauthbearer.token.provider": "my_module:token",
    }
    out = apply_preset("MSK-IAM ", given)
    assert out["bootstrap.servers"] == "b-1:9198"
    assert out["reconnect.backoff.ms"] == "50"
    assert out["sasl.oauthbearer.token.provider"] == "my_module:token"


def test_an_unknown_preset_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"'eventhubs' is not a preset; known presets: msk-iam"):
        apply_preset("eventhubs", {"bootstrap.servers": "b:9093"})


def test_confluent_cloud_with_an_api_key_is_plain_over_tls() -> None:
    out = apply_preset(
        "confluent-cloud",
        {
            "bootstrap.servers": "pkc-1.us-east-1.aws.confluent.cloud",
            "sasl.username": "KEY",
            "sasl.password": "SECRET",
        },
    )
    assert out["bootstrap.servers"] == "pkc-1.us-east-1.aws.confluent.cloud:9092"
    assert (out["security.protocol"], out["sasl.mechanism"]) == ("SASL_SSL", "PLAIN")
    ProducerConfig.from_mapping(out)


def test_confluent_cloud_without_credentials_says_which_to_give() -> None:
    with pytest.raises(ConfigError, match=r"needs credentials.*'kafka.sasl.username'"):
        apply_preset("confluent-cloud", {"bootstrap.servers": "pkc-1:9092"}, key_prefix="kafka.")


def test_confluent_cloud_oauth_needs_the_logical_cluster_extension() -> None:
    oauth = {
        "bootstrap.servers": "pkc-1:9092",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
        "sasl.oauthbearer.client.credentials.client.id": "app",
        "sasl.oauthbearer.client.credentials.client.secret": "s3cr3t-value",
    }
    with pytest.raises(ConfigError, match="logicalCluster") as refused:
        apply_preset("confluent-cloud", oauth)
    assert "s3cr3t-value" not in str(refused.value)
    out = apply_preset(
        "confluent-cloud",
        {**oauth, "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2"},
    )
    assert out["sasl.mechanism"] == "OAUTHBEARER"
    assert "sasl.oauthbearer.token.provider" not in out


def test_event_hubs_connection_string_gets_its_user_name_and_the_limits() -> None:
    out = apply_preset(
        "event-hubs", {"bootstrap.servers": "ns1.servicebus.windows.net", "sasl.password": "x"}
    )
    assert out == {
        "bootstrap.servers": "ns1.servicebus.windows.net:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "$ConnectionString",
        "sasl.password": "x",
        "max.request.size": "1000000",
        "connections.max.idle.ms": "180000",
        "metadata.max.age.ms": "180000",
    }
    cfg = ProducerConfig.from_mapping({**out, "sasl.password": CONNECTION_STRING})
    assert (cfg.max_request_size, cfg.connections_max_idle_ms, cfg.metadata_max_age_ms) == (
        1_000_000,
        180_000,
        180_000,
    )


def test_event_hubs_entra_id_uses_the_azure_provider_and_the_namespace_scope() -> None:
    out = apply_preset("event-hubs", {"bootstrap.servers": "ns1.servicebus.windows.net:9093"})
    assert out["sasl.mechanism"] == "OAUTHBEARER"
    assert out["sasl.oauthbearer.token.provider"] == "azure"
    assert out["sasl.oauthbearer.scope"] == "https://ns1.servicebus.windows.net/.default"


@pytest.mark.parametrize(
    ("key", "value", "limit"),
    [
        ("max.request.size", "1046529", "at most 1046528"),
        ("max.request.size", "1048576", "at most 1046528"),
        ("connections.max.idle.ms", "240000", "at most 239999"),
        ("connections.max.idle.ms", "-1", "at most 239999"),
        ("metadata.max.age.ms", "300000", "at most 239999"),
    ],
)
def test_event_hubs_refuses_a_value_beyond_its_limits(key: str, value: str, limit: str) -> None:
    with pytest.raises(ConfigError) as refused:
        apply_preset(
            "event-hubs",
            {"bootstrap.servers": "ns1:9093", "sasl.password": CONNECTION_STRING, key: value},
            key_prefix="kafka.",
            origin="option 'preset'",
        )
    message = str(refused.value)
    assert message.startswith(f"'kafka.{key}' is {value}, outside what Azure Event Hubs allows")
    assert limit in message and "option 'preset' 'event-hubs'" in message
    assert "SharedAccessKey" not in message


def test_event_hubs_keeps_a_value_within_its_limits() -> None:
    out = apply_preset(
        "event-hubs",
        {
            "bootstrap.servers": "ns1:9093",
            "security.protocol": "PLAINTEXT",
            "max.request.size": "1046528",
            "connections.max.idle.ms": "60000",
        },
    )
    # No SASL on a listener the user chose without it; the limits still hold.
    assert not any(k.startswith("sasl.") for k in out)
    assert (out["max.request.size"], out["connections.max.idle.ms"]) == ("1046528", "60000")
    ProducerConfig.from_mapping(out)


def test_google_uses_the_google_provider_or_a_service_account_key() -> None:
    out = apply_preset(
        "google", {"bootstrap.servers": "bootstrap.c1.us-central1.managedkafka.p.cloud.goog"}
    )
    assert out["bootstrap.servers"].endswith(".cloud.goog:9092")
    assert (out["sasl.mechanism"], out["sasl.oauthbearer.token.provider"]) == (
        "OAUTHBEARER",
        "google",
    )
    plain = apply_preset(
        "google", {"bootstrap.servers": "b:9092", "sasl.username": "sa@p.iam", "sasl.password": "k"}
    )
    assert plain["sasl.mechanism"] == "PLAIN"


def test_the_producer_takes_a_preset_and_refuses_a_value_beyond_its_limit() -> None:
    with pytest.raises(ConfigError, match=r"'max.request.size' is 2000000.*at most 1046528"):
        KafkaProducer(
            {"bootstrap.servers": "127.0.0.1:1", "max.request.size": "2000000"},
            preset="event-hubs",
        )
    producer = KafkaProducer(
        {"bootstrap.servers": "127.0.0.1:1", "security.protocol": "PLAINTEXT"},
        preset="event-hubs",
    )
    try:
        assert producer.config.max_request_size == 1_000_000
        assert producer.config.connections_max_idle_ms == 180_000
    finally:
        producer.close(0)
