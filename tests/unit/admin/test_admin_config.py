"""The config an admin client reads: a producer's, with the shared keys checked as the producer
checks them and the producer's own keys left to the producer."""

from __future__ import annotations

import pytest

from kafka_sink.admin.client import AdminClient, AdminConfig
from kafka_sink.errors import ConfigError
from kafka_sink.producer.config import ProducerConfig

BOOT = {"bootstrap.servers": "127.0.0.1:9"}


@pytest.mark.parametrize(
    "mapping",
    [
        {},
        {"bootstrap.servers": "nohost"},
        {**BOOT, "request.timeout.ms": "soon"},
        {**BOOT, "retry.backoff.ms": -1},
        {**BOOT, "security.protocol": "TLS"},
        {**BOOT, "ssl.truststore.type": "JKS", "security.protocol": "SSL"},
        {**BOOT, "ssl.protocol": "TLSv1.3"},
        {**BOOT, "sasl.mechanism": "PLAIN"},
        {**BOOT, "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"},
        {**BOOT, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"},
        {**BOOT, "ssl.keymanager.algorithm": "IbmX509"},
        {**BOOT, "ssl.key.password": 3},
        {**BOOT, "ssl.unknown.key": "x"},
        {**BOOT, "max.block.ms": -1},
        {**BOOT, "metadata.max.idle.ms": 10},
        {**BOOT, "max.in.flight.requests.per.connection": 0},
    ],
)
def test_refuses_what_the_producer_refuses_with_the_same_words(
    mapping: dict[str, object],
) -> None:
    with pytest.raises(ConfigError) as producer:
        ProducerConfig.from_mapping(mapping)
    with pytest.raises(ConfigError) as admin:
        AdminClient.from_config(mapping)
    expected = str(producer.value).replace(
        "unknown producer config key", "unknown admin config key"
    )
    assert str(admin.value) == expected


def test_reads_a_producer_config_and_leaves_the_producer_keys_to_the_producer() -> None:
    producer_config = {
        **BOOT,
        "acks": "all",
        "transactional.id": "sink-q-0-0",
        "linger.ms": "20",
        "partitioner.adaptive.partitioning.enable": "false",
        "max.block.ms": "1500",
        "metadata.max.idle.ms": "60000",
        "max.in.flight.requests.per.connection": "2",
        "request.timeout.ms": "4000",
        "client.id": "driver",
    }
    cfg = AdminConfig.from_mapping(producer_config)
    producer = ProducerConfig.from_mapping(producer_config)
    for attr in ("max_block_ms", "metadata_max_idle_ms", "max_in_flight", "request_timeout_ms"):
        assert getattr(cfg, attr) == getattr(producer, attr)
    assert not hasattr(cfg, "acks")
    client, returned = AdminClient.from_config(producer_config)
    try:
        assert returned == cfg
        assert client.request_timeout_ms == 4000
        assert client.network.config.client_id == "driver"
        assert client.network.config.max_in_flight == 2
        assert client.network.config.allow_auto_topic_creation is False
    finally:
        client.close()


def test_secrets_stay_out_of_repr() -> None:
    cfg = AdminConfig.from_mapping(
        {
            **BOOT,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "pw-admin-secret",
        }
    )
    assert "pw-admin-secret" not in repr(cfg)
    assert repr(cfg).startswith("AdminConfig(") and "secrets_set=['sasl.password']" in repr(cfg)


def test_defaults_match_the_producers() -> None:
    cfg = AdminConfig.from_mapping(BOOT)
    producer = ProducerConfig.from_mapping(BOOT)
    assert (cfg.max_block_ms, cfg.metadata_max_idle_ms, cfg.max_in_flight) == (60000, 300000, 5)
    client, _ = AdminClient.from_config(BOOT)
    try:
        assert client.network.config.client_id == "kafka-sink-admin"
        assert client.network.config == producer.network_config(
            "kafka-sink-admin", max_in_flight=producer.max_in_flight
        )
    finally:
        client.close()
