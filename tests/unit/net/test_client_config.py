"""ClientConfig: the keys every client shares, parsed as the producer parses them."""

from __future__ import annotations

import pytest

from kafka_sink.errors import ConfigError
from kafka_sink.net.config import CLIENT_KEYS, ClientConfig, NetworkConfig

BOOT = {"bootstrap.servers": "h1:9092, h2:9093"}


def test_defaults_are_javas() -> None:
    c = ClientConfig.from_mapping(BOOT)
    assert c.bootstrap_servers == ("h1:9092", "h2:9093")
    assert c.client_id == ""
    assert c.request_timeout_ms == 30000
    assert (c.retry_backoff_ms, c.retry_backoff_max_ms) == (100, 1000)
    assert (c.reconnect_backoff_ms, c.reconnect_backoff_max_ms) == (50, 1000)
    assert c.metadata_max_age_ms == 300000
    assert c.connections_max_idle_ms == 540000
    assert (c.send_buffer_bytes, c.receive_buffer_bytes) == (131072, 32768)
    assert c.security_protocol == "PLAINTEXT" and c.tls_config() is None
    assert c.explicitly_set == frozenset({"bootstrap.servers"})


def test_strings_are_parsed_and_backoffs_capped_by_their_max() -> None:
    c = ClientConfig.from_mapping(
        {**BOOT, "retry.backoff.ms": "5000", "reconnect.backoff.max.ms": "20"}
    )
    assert c.retry_backoff_ms == 1000  # lowered to retry.backoff.max.ms, as Java does
    assert c.reconnect_backoff_ms == 20


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({}, r"bootstrap\.servers: required"),
        ({"bootstrap.servers": "nohost"}, r"bootstrap\.servers: 'nohost' is not host:port"),
        ({**BOOT, "request.timeout.ms": "soon"}, r"request\.timeout\.ms: expected an integer"),
        ({**BOOT, "send.buffer.bytes": -2}, r"send\.buffer\.bytes: -2 is out of range"),
        ({**BOOT, "security.protocol": "TLS"}, r"security\.protocol: expected one of"),
        ({**BOOT, "ssl.protocol": "TLSv1.3"}, r"ssl\.protocol: set, but security\.protocol"),
        ({**BOOT, "sasl.username": "u"}, r"sasl\.username: set, but security\.protocol"),
        ({**BOOT, "ssl.provider": "SunJSSE"}, r"ssl\.provider: 'SunJSSE' is not supported"),
        ({**BOOT, "sasl.password": 7}, r"sasl\.password: invalid value \(not shown: secret\)"),
        ({**BOOT, "linger.ms": 5}, r"linger\.ms: unknown client config key"),
    ],
)
def test_refusals_name_the_key(mapping: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ClientConfig.from_mapping(mapping)


def test_jvm_only_keys_with_no_effect_are_accepted() -> None:
    c = ClientConfig.from_mapping({**BOOT, "client.dns.lookup": "use_all_dns_ips"})
    assert "client.dns.lookup" not in c.explicitly_set


def test_sasl_credentials_come_from_the_jaas_config_and_stay_out_of_repr() -> None:
    c = ClientConfig.from_mapping(
        {
            **BOOT,
            "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "scram-sha-256",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            'required username="alice" password="pw-secret";',
        }
    )
    assert (c.sasl_username, c.sasl_password) == ("alice", "pw-secret")
    assert "pw-secret" not in repr(c)
    assert "secrets_set=['sasl.jaas.config', 'sasl.password']" in repr(c)
    network = c.network_config("c1")
    assert "pw-secret" not in repr(network)
    sasl = network.sasl_config()
    assert sasl is not None and sasl.mechanism == "SCRAM-SHA-256"


def test_network_config_carries_every_shared_setting() -> None:
    c = ClientConfig.from_mapping(
        {
            **BOOT,
            "client.id": "ignored-here",
            "request.timeout.ms": 1234,
            "reconnect.backoff.ms": 7,
            "reconnect.backoff.max.ms": 70,
            "retry.backoff.ms": 8,
            "retry.backoff.max.ms": 80,
            "socket.connection.setup.timeout.ms": 9,
            "socket.connection.setup.timeout.max.ms": 90,
            "connections.max.idle.ms": -1,
            "send.buffer.bytes": -1,
            "receive.buffer.bytes": 1000,
            "metadata.max.age.ms": 6000,
        }
    )
    network = c.network_config("given", max_in_flight=2, allow_auto_topic_creation=True)
    assert network == NetworkConfig(
        bootstrap_servers=["h1:9092", "h2:9093"],
        client_id="given",
        request_timeout_ms=1234,
        reconnect_backoff_ms=7,
        reconnect_backoff_max_ms=70,
        max_in_flight=2,
        send_buffer_bytes=-1,
        receive_buffer_bytes=1000,
        connections_max_idle_ms=-1,
        socket_connection_setup_timeout_ms=9,
        socket_connection_setup_timeout_max_ms=90,
        security_protocol="PLAINTEXT",
        sasl_mechanism=None,
        metadata_max_age_ms=6000,
        retry_backoff_ms=8,
        retry_backoff_max_ms=80,
        allow_auto_topic_creation=True,
    )
    defaults = c.network_config("given")
    assert (defaults.max_in_flight, defaults.allow_auto_topic_creation) == (5, False)


def test_every_key_has_an_attribute() -> None:
    c = ClientConfig.from_mapping(BOOT)
    for key, spec in CLIENT_KEYS.items():
        assert hasattr(c, spec.attr), key


JAAS_ALICE = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="jaas-pw-1";'
)


@pytest.mark.parametrize(
    "extra",
    [
        {"sasl.username": "bob"},
        {"sasl.password": "plain-pw-2"},
        {"sasl.username": "alice", "sasl.password": "plain-pw-2"},
    ],
)
def test_sasl_username_or_password_with_a_jaas_config_is_refused(extra: dict[str, str]) -> None:
    # Taken together, the token sent would mix one's user with the other's password.
    with pytest.raises(
        ConfigError, match=r"sasl\.jaas\.config .* sasl\.(username|password)"
    ) as info:
        ClientConfig.from_mapping(
            {
                **BOOT,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": JAAS_ALICE,
                **extra,
            }
        )
    text = str(info.value)
    assert "jaas-pw-1" not in text and "plain-pw-2" not in text and "bob" not in text
