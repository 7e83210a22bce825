"""ProducerConfig: Java 4.x defaults, string values, validation and Java's idempotence rules."""

from __future__ import annotations

import ssl

import pytest

from kafka_sink.errors import ConfigError
from kafka_sink.net.config import parse_jaas_config
from kafka_sink.producer.config import ProducerConfig

BOOT = {"bootstrap.servers": "localhost:9092"}


def cfg(**kw: object) -> ProducerConfig:
    return ProducerConfig.from_mapping({**BOOT, **{k.replace("_", "."): v for k, v in kw.items()}})


def test_java_4_defaults() -> None:
    c = ProducerConfig.from_mapping(BOOT)
    assert c.bootstrap_servers == ("localhost:9092",)
    assert c.acks == -1
    assert c.linger_ms == 5
    assert c.batch_size == 16384
    assert c.buffer_memory == 32 * 1024 * 1024
    assert c.max_block_ms == 60000
    assert c.compression_type == "none"
    assert c.enable_idempotence is True
    assert c.delivery_timeout_ms == 120000
    assert c.request_timeout_ms == 30000
    assert c.retries == 2**31 - 1
    assert (c.retry_backoff_ms, c.retry_backoff_max_ms) == (100, 1000)
    assert c.max_in_flight == 5
    assert c.max_request_size == 1048576
    assert c.metadata_max_age_ms == 300000
    assert (c.reconnect_backoff_ms, c.reconnect_backoff_max_ms) == (50, 1000)
    assert c.compression_lz4_level == 9
    assert c.compression_zstd_level == 3
    assert c.security_protocol == "PLAINTEXT"


def test_string_values_like_spark_passes_them() -> None:
    c = ProducerConfig.from_mapping(
        {
            "bootstrap.servers": "a:1, b:2",
            "acks": "1",
            "linger.ms": "20",
            "enable.idempotence": "false",
            "compression.type": "LZ4",
            "compression.lz4.level": "3",
            "partitioner.ignore.keys": "TRUE",
        }
    )
    assert c.bootstrap_servers == ("a:1", "b:2")
    assert (c.acks, c.linger_ms, c.enable_idempotence) == (1, 20, False)
    assert (c.compression_type, c.compression_level) == ("lz4", 3)
    assert c.partitioner_ignore_keys is True


@pytest.mark.parametrize(("raw", "acks"), [("all", -1), ("-1", -1), ("0", 0), ("1", 1), (0, 0)])
def test_acks_values(raw: object, acks: int) -> None:
    assert (
        ProducerConfig.from_mapping({**BOOT, "acks": raw, "enable.idempotence": False}).acks == acks
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("linger.ms", "soon"),
        ("linger.ms", -1),
        ("batch.size", True),
        ("acks", "2"),
        ("compression.type", "brotli"),
        ("compression.lz4.level", 18),
        ("enable.idempotence", "yes"),
        ("max.in.flight.requests.per.connection", 0),
        ("security.protocol", "TLS"),
    ],
)
def test_invalid_values_name_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ProducerConfig.from_mapping({**BOOT, key: value})


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"lingerr\.ms: unknown"):
        ProducerConfig.from_mapping({**BOOT, "lingerr.ms": 5})


@pytest.mark.parametrize(
    "key", ["key.serializer", "value.serializer", "partitioner.class", "interceptor.classes"]
)
def test_plugin_paths_that_do_not_import_are_named(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"{key}: cannot import 'x'"):
        ProducerConfig.from_mapping({**BOOT, key: "x"})


def test_bootstrap_servers_required_and_checked() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        ProducerConfig.from_mapping({})
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        ProducerConfig.from_mapping({"bootstrap.servers": "nohost"})


def test_idempotence_silently_off_when_user_chose_conflicting_acks() -> None:
    assert ProducerConfig.from_mapping({**BOOT, "acks": "1"}).enable_idempotence is False
    assert ProducerConfig.from_mapping({**BOOT, "retries": 0}).enable_idempotence is False
    c = ProducerConfig.from_mapping({**BOOT, "max.in.flight.requests.per.connection": 6})
    assert c.enable_idempotence is False


@pytest.mark.parametrize(
    ("key", "value"),
    [("acks", "1"), ("retries", 0), ("max.in.flight.requests.per.connection", 6)],
)
def test_explicit_idempotence_conflicts_raise(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        ProducerConfig.from_mapping({**BOOT, "enable.idempotence": "true", key: value})


def test_transactional_id_needs_idempotence() -> None:
    with pytest.raises(ConfigError, match=r"transactional\.id"):
        ProducerConfig.from_mapping(
            {**BOOT, "transactional.id": "t", "enable.idempotence": "false"}
        )
    c = ProducerConfig.from_mapping({**BOOT, "transactional.id": "t"})
    assert c.transactional_id == "t" and c.enable_idempotence
    assert c.transaction_timeout_ms == 60000
    c = ProducerConfig.from_mapping(
        {**BOOT, "transactional.id": "t", "transaction.timeout.ms": "5000"}
    )
    assert c.transaction_timeout_ms == 5000


def test_transactional_id_makes_idempotence_conflicts_errors() -> None:
    # Without a transactional id acks=1 silently turns idempotence off; with one it cannot.
    with pytest.raises(ConfigError, match=r"acks: .*enable\.idempotence"):
        ProducerConfig.from_mapping({**BOOT, "transactional.id": "t", "acks": "1"})


def test_delivery_timeout_floor() -> None:
    with pytest.raises(ConfigError, match=r"delivery\.timeout\.ms"):
        ProducerConfig.from_mapping({**BOOT, "delivery.timeout.ms": 1000})
    c = ProducerConfig.from_mapping({**BOOT, "request.timeout.ms": 200000})
    assert c.delivery_timeout_ms == 200005


def test_sasl_plain_and_secrets_never_shown() -> None:
    c = ProducerConfig.from_mapping(
        {
            **BOOT,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "s3cr3t-pw",
        }
    )
    assert c.uses_sasl and c.sasl_password == "s3cr3t-pw"
    assert "s3cr3t-pw" not in repr(c)
    assert "secrets_set" in repr(c)


def test_sasl_jaas_config_scram() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="bob" password="p@ss\\"word";'
    )
    c = ProducerConfig.from_mapping(
        {
            **BOOT,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": jaas,
        }
    )
    assert (c.sasl_username, c.sasl_password) == ("bob", 'p@ss"word')
    assert "p@ss" not in repr(c)
    assert parse_jaas_config(jaas)[0] == "SCRAM"


def test_sasl_errors_do_not_leak_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_mapping(
            {
                **BOOT,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'com.example.Weird required password="topsecret";',
            }
        )
    assert "topsecret" not in str(info.value)
    with pytest.raises(ConfigError, match=r"sasl\.mechanism"):
        ProducerConfig.from_mapping(
            {
                **BOOT,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.username": "a",
                "sasl.password": "b",
            }
        )
    with pytest.raises(ConfigError) as info2:
        ProducerConfig.from_mapping({**BOOT, "sasl.password": 12345})
    assert "12345" not in str(info2.value)


def test_ssl_only_pem() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.type"):
        ProducerConfig.from_mapping(
            {**BOOT, "security.protocol": "SSL", "ssl.truststore.type": "JKS"}
        )
    c = ProducerConfig.from_mapping(
        {**BOOT, "security.protocol": "ssl", "ssl.truststore.location": "/ca.pem"}
    )
    assert c.uses_ssl and c.ssl_truststore_location == "/ca.pem"


def test_producer_refuses_bad_config_before_starting() -> None:
    from kafka_sink import KafkaProducer

    with pytest.raises(ConfigError, match=r"transactional\.id.*enable\.idempotence=false"):
        KafkaProducer({**BOOT, "transactional.id": "tx-1", "enable.idempotence": "false"})
    with pytest.raises(ConfigError, match=r"value\.serializer: cannot import"):
        KafkaProducer({**BOOT, "value.serializer": "StringSerializer"})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # A security key the protocol does not use would be silently ignored.
        ({"ssl.keystore.location": "/k.pem"}, r"ssl\.keystore\.location: set, but .*PLAINTEXT"),
        ({"ssl.cipher.suites": "TLS_AES_128_GCM_SHA256"}, r"ssl\.cipher\.suites: set, but"),
        ({"sasl.mechanism": "PLAIN"}, r"sasl\.mechanism: set, but .*uses no SASL"),
        # JVM-only plumbing with a non-default value cannot be honoured.
        ({"ssl.provider": "BC"}, r"ssl\.provider: 'BC' is not supported"),
        ({"ssl.engine.factory.class": "x.Y"}, r"ssl\.engine\.factory\.class"),
        ({"security.providers": "x.Creator"}, r"security\.providers"),
        ({"ssl.secure.random.implementation": "SHA1PRNG"}, r"ssl\.secure\.random"),
        ({"ssl.keymanager.algorithm": "PKIX"}, r"ssl\.keymanager\.algorithm: 'PKIX'"),
        ({"ssl.trustmanager.algorithm": "SunX509"}, r"ssl\.trustmanager\.algorithm"),
    ],
)
def test_security_keys_are_applied_or_refused_never_ignored(
    extra: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        ProducerConfig.from_mapping({**BOOT, **extra})


def test_ssl_settings_are_checked_at_construction() -> None:
    ssl_boot = {**BOOT, "security.protocol": "SSL"}
    with pytest.raises(ConfigError, match=r"ssl\.enabled\.protocols: TLSv1\.1"):
        ProducerConfig.from_mapping({**ssl_boot, "ssl.enabled.protocols": "TLSv1.1"})
    with pytest.raises(ConfigError, match=r"ssl\.cipher\.suites: cannot map"):
        ProducerConfig.from_mapping({**ssl_boot, "ssl.cipher.suites": "SSL_RSA_WITH_RC4_128_MD5"})
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.password: not used") as info:
        ProducerConfig.from_mapping(
            {**ssl_boot, "ssl.keystore.location": "/k.pem", "ssl.keystore.password": "pw-5"}
        )
    assert "pw-5" not in str(info.value)
    c = ProducerConfig.from_mapping(
        {
            **ssl_boot,
            "ssl.protocol": "TLSv1.2",
            "ssl.enabled.protocols": "TLSv1.2",
            "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "ssl.endpoint.identification.algorithm": "",
            # Java's defaults for the JVM plumbing keys describe what OpenSSL does: accepted.
            "ssl.keymanager.algorithm": "SunX509",
            "ssl.trustmanager.algorithm": "PKIX",
        }
    )
    tls = c.tls_config()
    assert tls is not None
    assert tls.cipher_suites == ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",)
    assert tls.version_range() == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
    assert tls.endpoint_identification_algorithm == ""
    assert ProducerConfig.from_mapping(BOOT).tls_config() is None
