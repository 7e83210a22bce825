"""OAUTHBEARER against a real broker validating signed JWTs with tokens from a real endpoint.

The producer and the admin client's topic log write and read through the OAUTHBEARER listener;
an independent consumer (kafka-python, on the PLAINTEXT listener) reads back. Refused tokens and
refused credentials fail within seconds with the broker's or the endpoint's words and no secret.
README's Confluent Cloud OAuth recipe, parsed by the sink, writes through a broker that requires
its SASL extensions and records them; its Event Hubs Entra ID recipe (app secret form) writes
through the listener with the namespace's default scope. The slow test runs 20 s tokens under a
broker granting 10 s sessions (KIP-368) for five token lifetimes, with an idle gap longer than a
lifetime, re-authenticating in-band on the one connection it opened (the same TCP connection from
start to end, seen from the operating system).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator

import psutil
import pytest

from kafka_sink import KafkaProducer
from kafka_sink.admin.topic_log import TopicLog
from kafka_sink.errors import KafkaError, SaslAuthenticationError
from kafka_sink.net.oauth.login import live_logins
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oidc import LocalOidc
from kafka_sink.testing.oracle import create_topic, read_all
from tests.conftest import OAUTH_CLIENT, running
from tests.oauth_support import ClientCredentials, FixedToken
from tests.readme_recipes import recipe_options, recipe_sink_options

pytestmark = pytest.mark.broker


def _settings(bootstrap: str, source: object, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.provider": source,
        **extra,
    }


@pytest.fixture(autouse=True)
def _no_leaked_logins() -> Iterator[None]:
    yield
    assert live_logins() == []


def test_the_producer_writes_through_the_oauthbearer_listener(
    oidc: LocalOidc, oauth_kafka: LocalKafka
) -> None:
    topic = "oauth-producer"
    create_topic(oauth_kafka.bootstrap_servers, topic, partitions=2)
    source = ClientCredentials(oidc.token_endpoint_url, *OAUTH_CLIENT)
    config = {
        **_settings(oauth_kafka.oauth_bootstrap_servers, source),
        "linger.ms": "5",
    }
    with KafkaProducer(config) as producer:
        futures = [producer.send(topic, b"v%d" % i, b"k%d" % i) for i in range(20)]
        producer.flush(30)
        assert all(f.get(10).offset >= 0 for f in futures)
    # One token for the producer, shared by every connection (bootstrap and both brokers' ids).
    assert source.fetches == 1
    values = sorted(r.value for r in read_all(oauth_kafka.bootstrap_servers, topic, expected=20))
    assert values == sorted(b"v%d" % i for i in range(20))


def test_the_admin_clients_topic_log_writes_and_reads_through_it(
    oidc: LocalOidc, oauth_kafka: LocalKafka
) -> None:
    source = ClientCredentials(oidc.token_endpoint_url, *OAUTH_CLIENT)
    log = TopicLog.from_config(_settings(oauth_kafka.oauth_bootstrap_servers, source), 30)
    try:
        assert log.ensure_topic("oauth-admin", partitions=1, replication_factor=1, configs={}) == 1
        first = log.append("oauth-admin", 0, b"k", b"one")
        log.append("oauth-admin", 0, b"k", b"two")
        end = log.end_offset("oauth-admin", 0, at_least=first + 2)
        assert [r.value for r in log.read("oauth-admin", 0, first, end)] == [b"one", b"two"]
    finally:
        log.close()
    records = read_all(oauth_kafka.bootstrap_servers, "oauth-admin", expected=2)
    assert [r.value for r in records] == [b"one", b"two"]


def test_a_token_the_broker_refuses_fails_in_seconds_with_its_reason(
    oidc: LocalOidc, oauth_kafka: LocalKafka, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(oauth_kafka.bootstrap_servers, "oauth-refused")
    token = oidc.issue("mallory", audience="another-cluster")
    source = FixedToken(token, int(time.time() * 1000) + 3_600_000)
    caplog.set_level(logging.DEBUG, logger="kafka_sink")
    began = time.monotonic()
    with (
        KafkaProducer(
            _settings(oauth_kafka.oauth_bootstrap_servers, source, **{"max.block.ms": "30000"})
        ) as producer,
        pytest.raises(SaslAuthenticationError) as info,
    ):
        producer.send("oauth-refused", b"x").get(30)
    assert time.monotonic() - began < 10
    text = str(info.value)
    assert '{"status":"invalid_token"}' in text  # the broker's error JSON
    assert "a fixed test token" in text  # where the token came from
    assert token not in text
    assert token not in caplog.text
    assert token.split(".")[2] not in caplog.text


def test_a_wrong_secret_fails_in_seconds_naming_the_endpoint_not_the_secret(
    oidc: LocalOidc, oauth_kafka: LocalKafka, caplog: pytest.LogCaptureFixture
) -> None:
    source = ClientCredentials(oidc.token_endpoint_url, OAUTH_CLIENT[0], "wrong-secret-42")
    caplog.set_level(logging.DEBUG, logger="kafka_sink")
    began = time.monotonic()
    settings = _settings(oauth_kafka.oauth_bootstrap_servers, source)
    with KafkaProducer(settings) as producer, pytest.raises(KafkaError) as info:
        producer.send("oauth-refused", b"x").get(30)
    assert time.monotonic() - began < 10
    assert oidc.token_endpoint_url in str(info.value)
    assert "401" in str(info.value)
    assert "wrong-secret-42" not in str(info.value) + caplog.text
    assert source.fetches == 1  # a refusal is not retried


@pytest.fixture(scope="module")
def short_tokens() -> Iterator[LocalOidc]:
    yield from running(
        LocalOidc({OAUTH_CLIENT[0]: OAUTH_CLIENT[1]}, lifetime_s=20), "OIDC token endpoint"
    )


@pytest.fixture(scope="module")
def reauth_kafka(short_tokens: LocalOidc) -> Iterator[LocalKafka]:
    listener = short_tokens.broker_listener(reauth_ms=10_000)
    yield from running(LocalKafka(oauth=listener), "Kafka re-authenticating every 10 s")


@pytest.mark.slow
def test_twenty_second_tokens_under_ten_second_sessions_keep_working_for_five_lifetimes(
    short_tokens: LocalOidc, reauth_kafka: LocalKafka, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kafka_sink.net")
    topic = "oauth-reauth"
    create_topic(reauth_kafka.bootstrap_servers, topic)
    source = ClientCredentials(short_tokens.token_endpoint_url, *OAUTH_CLIENT)
    sent: list[bytes] = []
    began = time.monotonic()
    with KafkaProducer(
        {
            **_settings(reauth_kafka.oauth_bootstrap_servers, source),
            "acks": "all",
            "delivery.timeout.ms": "30000",
            "request.timeout.ms": "10000",
        }
    ) as producer:
        oauth_port = int(reauth_kafka.oauth_bootstrap_servers.rsplit(":", 1)[1])
        producer.send(topic, b"first").get(15)
        sent.append(b"first")
        first_stats = producer._network.connection_stats()
        first_ports = _local_ports_to(oauth_port)

        # 50 s of a record every 3 s, then 25 s idle (past a whole token lifetime and two
        # sessions), then 25 s more of sends: five token lifetimes in all.
        def send_for(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                value = b"r%03d" % len(sent)
                producer.send(topic, value).get(15)
                sent.append(value)
                time.sleep(3)

        send_for(50)
        time.sleep(25)
        send_for(25)
        stats = producer._network.connection_stats()
        last_ports = _local_ports_to(oauth_port)
    print(
        f"connections created: {first_stats.created} after the first send, {stats.created} at "
        f"the end; re-authentications: {stats.reauthentications} "
        f"(failed {stats.failed_reauthentications}, max {stats.reauthentication_ms_max} ms, "
        f"avg {stats.reauthentication_ms_avg:.1f} ms); sockets to the listener: "
        f"{sorted(first_ports)} then {sorted(last_ports)}"
    )
    assert time.monotonic() - began >= 100
    values = [r.value for r in read_all(reauth_kafka.bootstrap_servers, topic, expected=len(sent))]
    assert values == sent
    # Refreshed on the login's own timer (about every 16-17 s), idle gap included.
    assert source.fetches >= 5
    # Sessions were renewed in-band (KIP-368) before the broker's 10 s ran out, never cut by
    # the broker, on the connection opened for the first send: no connection was created
    # after it, and the one socket to the listener at the end is one that was there then.
    # A renewal comes 8.5-9.5 s into each session, idle gap included: at least 10 in 100 s.
    messages = [r.getMessage() for r in caplog.records]
    renewals = [m for m in messages if "re-authenticated (SASL OAUTHBEARER)" in m]
    assert len(renewals) >= 10, messages
    assert stats.reauthentications == len(renewals)
    assert stats.failed_reauthentications == 0
    assert stats.created == first_stats.created
    assert len(last_ports) == 1 and last_ports <= first_ports
    assert not [m for m in messages if "was lost" in m or ("SASL" in m and "fail" in m)]


def _local_ports_to(port: int) -> set[int]:
    """This process's local ports of established TCP connections to 127.0.0.1:``port``."""
    return {
        c.laddr.port
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED
    }


def test_an_unreachable_endpoint_fails_after_bounded_retries_naming_it(
    oauth_kafka: LocalKafka,
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/oauth2/token"
    source = ClientCredentials(url, *OAUTH_CLIENT)
    began = time.monotonic()
    settings = _settings(
        oauth_kafka.oauth_bootstrap_servers,
        source,
        **{
            "sasl.login.retry.backoff.ms": "100",
            "sasl.login.retry.backoff.max.ms": "1500",
            # The connection is retried after the failed login (as in Java), and that retry logs
            # in again: keep it a second away so one login's attempts can be counted.
            "reconnect.backoff.ms": "1000",
            "reconnect.backoff.max.ms": "1000",
        },
    )
    with KafkaProducer(settings) as producer:
        with pytest.raises(KafkaError) as info:
            producer.send("oauth-refused", b"x").get(30)
        fetched_by_the_failed_login = source.fetches
    assert time.monotonic() - began < 10
    assert url in str(info.value)
    assert "unreachable" in str(info.value)
    # 0, 100, 300, 700 ms and then the rest of the 1.5 s budget: five attempts, no more.
    assert fetched_by_the_failed_login == 5


CONFLUENT_OAUTH = "Confluent Cloud with OAuth"
#: The extensions README's Confluent Cloud OAuth recipe sends: what the broker below requires.
CONFLUENT_EXTENSIONS = dict(
    pair.split("=", 1)
    for pair in str(
        dict(recipe_options(CONFLUENT_OAUTH))["kafka.sasl.oauthbearer.extensions"]
    ).split(",")
)


@pytest.fixture(scope="module")
def extension_kafka(oidc: LocalOidc) -> Iterator[LocalKafka]:
    listener = oidc.broker_listener(required_extensions=CONFLUENT_EXTENSIONS)
    yield from running(LocalKafka(oauth=listener), "Kafka checking SASL extensions")


def test_sasl_extensions_reach_the_broker_and_wrong_ones_are_refused(
    oidc: LocalOidc, extension_kafka: LocalKafka
) -> None:
    create_topic(extension_kafka.bootstrap_servers, "oauth-extensions")
    wanted = dict(CONFLUENT_EXTENSIONS)
    source = ClientCredentials(oidc.token_endpoint_url, *OAUTH_CLIENT, extensions=wanted)
    before = len(extension_kafka.received_extensions())
    with KafkaProducer(_settings(extension_kafka.oauth_bootstrap_servers, source)) as producer:
        producer.send("oauth-extensions", b"with extensions").get(30)
    assert extension_kafka.received_extensions()[before] == wanted
    wrong = ClientCredentials(
        oidc.token_endpoint_url, *OAUTH_CLIENT, extensions={**wanted, "logicalCluster": "lkc-0"}
    )
    settings = _settings(extension_kafka.oauth_bootstrap_servers, wrong)
    with KafkaProducer(settings) as producer, pytest.raises(SaslAuthenticationError) as info:
        producer.send("oauth-extensions", b"refused").get(30)
    assert "invalid_token" in str(info.value) or "extension" in str(info.value).lower()
    assert extension_kafka.received_extensions()[-1]["logicalCluster"] == "lkc-0"
    records = read_all(extension_kafka.bootstrap_servers, "oauth-extensions", expected=1)
    assert [r.value for r in records] == [b"with extensions"]


def test_the_confluent_cloud_oauth_recipe_carries_its_extensions_to_the_broker(
    oidc: LocalOidc, extension_kafka: LocalKafka
) -> None:
    # README's recipe as the sink parses it (preset confluent-cloud, its extensions list), with
    # only the addresses, the client and its secret put in (and no TLS on this listener).
    options = recipe_sink_options(
        CONFLUENT_OAUTH,
        {
            "kafka.bootstrap.servers": extension_kafka.oauth_bootstrap_servers,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.oauthbearer.token.endpoint.url": oidc.token_endpoint_url,
            "kafka.sasl.oauthbearer.client.credentials.client.id": OAUTH_CLIENT[0],
            "kafka.sasl.oauthbearer.client.credentials.client.secret": OAUTH_CLIENT[1],
        },
    )
    assert options.producer_config["sasl.mechanism"] == "OAUTHBEARER"
    create_topic(extension_kafka.bootstrap_servers, options.topic)
    before = len(extension_kafka.received_extensions())
    with KafkaProducer(options.producer_config) as producer:
        producer.send(options.topic, b"from the recipe").get(30)
    received = extension_kafka.received_extensions()[before:]
    assert received
    assert all(extensions == CONFLUENT_EXTENSIONS for extensions in received)
    records = read_all(extension_kafka.bootstrap_servers, options.topic, expected=1)
    assert [r.value for r in records] == [b"from the recipe"]


def test_the_event_hubs_entra_id_recipe_with_an_app_secret_writes_through_the_listener(
    oidc: LocalOidc, oauth_kafka: LocalKafka
) -> None:
    # README's Entra ID recipe in its app-registration form (a token endpoint, the app's id and
    # secret): the event-hubs preset asks for the namespace's .default scope. The other form,
    # the azure provider, needs Azure's identity and is proven with its library's test doubles.
    options = recipe_sink_options(
        "Azure Event Hubs with Entra ID",
        {
            "kafka.bootstrap.servers": oauth_kafka.oauth_bootstrap_servers,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.oauthbearer.token.endpoint.url": oidc.token_endpoint_url,
            "kafka.sasl.oauthbearer.client.credentials.client.id": OAUTH_CLIENT[0],
            "kafka.sasl.oauthbearer.client.credentials.client.secret": OAUTH_CLIENT[1],
        },
    )
    create_topic(oauth_kafka.bootstrap_servers, "eh-entra-recipe")
    asked = len(oidc.requests)
    with KafkaProducer(options.producer_config) as producer:
        producer.send("eh-entra-recipe", b"from the recipe").get(30)
    scopes = {request.scope for request in oidc.requests[asked:]}
    assert scopes == {"https://127.0.0.1/.default"}
    records = read_all(oauth_kafka.bootstrap_servers, "eh-entra-recipe", expected=1)
    assert [r.value for r in records] == [b"from the recipe"]


def test_java_style_client_credentials_settings_write_through_the_listener(
    oidc: LocalOidc, oauth_kafka: LocalKafka, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(oauth_kafka.bootstrap_servers, "oauth-java-keys")
    settings: dict[str, object] = {
        "bootstrap.servers": oauth_kafka.oauth_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": oidc.token_endpoint_url,
        "sasl.oauthbearer.client.credentials.client.id": OAUTH_CLIENT[0],
        "sasl.oauthbearer.client.credentials.client.secret": OAUTH_CLIENT[1],
        "sasl.oauthbearer.scope": "kafka",
    }
    with KafkaProducer(settings) as producer:
        producer.send("oauth-java-keys", b"from java keys").get(30)
    records = read_all(oauth_kafka.bootstrap_servers, "oauth-java-keys", expected=1)
    assert [r.value for r in records] == [b"from java keys"]
    caplog.set_level(logging.DEBUG, logger="kafka_sink")
    wrong = {**settings, "sasl.oauthbearer.client.credentials.client.secret": "wrong-secret-7"}
    began = time.monotonic()
    with KafkaProducer(wrong) as producer, pytest.raises(KafkaError) as info:
        producer.send("oauth-java-keys", b"refused").get(30)
    assert time.monotonic() - began < 10
    assert oidc.token_endpoint_url in str(info.value)
    assert "wrong-secret-7" not in str(info.value) + caplog.text + repr(producer)
    assert OAUTH_CLIENT[1] not in caplog.text


@pytest.mark.slow
def test_an_endpoint_down_for_a_token_lifetime_fails_clearly_then_recovers(
    short_tokens: LocalOidc, reauth_kafka: LocalKafka, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kafka_sink")
    topic = "oauth-endpoint-down"
    create_topic(reauth_kafka.bootstrap_servers, topic)
    source = ClientCredentials(short_tokens.token_endpoint_url, *OAUTH_CLIENT)
    delivered: list[bytes] = []
    failures: list[str] = []
    settings = {
        **_settings(
            reauth_kafka.oauth_bootstrap_servers,
            source,
            **{"sasl.login.retry.backoff.max.ms": "2000"},
        ),
        "acks": "all",
        "delivery.timeout.ms": "8000",
        "request.timeout.ms": "4000",
        "max.block.ms": "8000",
    }
    with KafkaProducer(settings) as producer:

        def send_one() -> None:
            value = b"r%03d" % (len(delivered) + len(failures))
            began = time.monotonic()
            try:
                producer.send(topic, value).get(20)
                delivered.append(value)
            except KafkaError as exc:
                failures.append(str(exc))
            assert time.monotonic() - began < 20  # never a silent stall

        send_one()
        short_tokens.down()
        try:
            end = time.monotonic() + 30  # longer than a token's 20 s life
            while time.monotonic() < end:
                send_one()
                time.sleep(2)
        finally:
            short_tokens.up()
        # Back: the next token is fetched and sends work again within a refresher retry.
        deadline = time.monotonic() + 30
        before = len(delivered)
        while time.monotonic() < deadline and len(delivered) < before + 3:
            send_one()
            time.sleep(1)
        assert len(delivered) >= before + 3
    assert failures, "a token that lapsed with its endpoint down must fail sends"
    assert all(short_tokens.token_endpoint_url in text for text in failures), failures
    warnings = [r.getMessage() for r in caplog.records if "refresh failed" in r.getMessage()]
    assert warnings and all(short_tokens.token_endpoint_url in w for w in warnings)
    values = [r.value for r in read_all(reauth_kafka.bootstrap_servers, topic)]
    assert sorted(values) == sorted(delivered)
