"""The ``event-hubs`` preset against a broker configured with Event Hubs' limits
(``socket.request.max.bytes=1046528``, ``connections.max.idle.ms=240000``).

- The limit is real: a producer left at Java's ``max.request.size`` (1048576) sends a request
  the broker will not read, and its batch fails; with the preset the same record is refused by
  the producer itself, naming the size, and nothing reaches the broker.
- A write within the limits goes through and is read back by kafka-python.
- README's PLAIN recipes (Confluent Cloud with an API key, Event Hubs with a connection string)
  write through this broker's SASL listener as the sink parses them; a wrong secret is refused.
- At the preset's allowed maximum (``max.request.size=1046528``, the broker's own limit) no
  request is cut off: forty batches adding up to exactly that size go in two requests, because
  the request's framing counts too, and the largest record whose batch alone fits is refused
  by the producer, as the request carrying it would not (retries off, so a cut would show).
- The driver's question "does this cluster support transactions" gets a yes from this broker:
  the sink's exactly-once preflight passes with the preset, and a transaction commits. (The "no"
  answer is ``tests/unit/spark/test_preflight_transactions.py``, against brokers without the
  transaction APIs.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_sink import KafkaProducer
from kafka_sink.errors import KafkaError, RecordTooLargeError, SaslAuthenticationError
from kafka_sink.records.batch import BATCH_HEADER_SIZE, RecordBatchBuilder, estimate_record_size
from kafka_sink.spark.driver import preflight
from kafka_sink.spark.options import SinkOptions
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.testing.oracle import create_topic, read_all
from tests.conftest import running
from tests.readme_recipes import recipe_sink_options

EVENT_HUBS_REQUEST_LIMIT = 1_046_528
EVENT_HUBS_LIMITS = {
    "socket.request.max.bytes": str(EVENT_HUBS_REQUEST_LIMIT),
    "connections.max.idle.ms": "240000",
}


#: The PLAIN users of README's recipes: Event Hubs' fixed user name with a connection string
#: (a token here: the fixture's JAAS line and SCRAM setup take no ';' or '='), and a Confluent
#: Cloud API key with its secret.
CONNECTION_STRING = "eh-connection-string-secret"
API_KEY = ("CFLTAPIKEY0001", "cflt-api-secret-0001")
PLAIN_USERS = {"$ConnectionString": CONNECTION_STRING, API_KEY[0]: API_KEY[1]}


@pytest.fixture(scope="module")
def event_hubs_like() -> Iterator[LocalKafka]:
    yield from running(
        LocalKafka(nodes=1, broker_config=EVENT_HUBS_LIMITS, sasl_users=PLAIN_USERS),
        "Kafka with Event Hubs' limits",
    )


def _topic(kafka: LocalKafka, name: str) -> str:
    create_topic(kafka.bootstrap_servers, name, 1, 1, {"max.message.bytes": "2000000"})
    return name


def _plain(kafka: LocalKafka) -> dict[str, object]:
    # The preset's SASL is the service's; this broker listens in PLAINTEXT, which the user sets.
    return {"bootstrap.servers": kafka.bootstrap_servers, "security.protocol": "PLAINTEXT"}


def test_a_request_above_the_limit_fails_without_the_preset_and_is_refused_with_it(
    event_hubs_like: LocalKafka,
) -> None:
    topic = _topic(event_hubs_like, "eh-limit")
    big = b"x" * 1_040_000  # under Java's max.request.size, its request above 1046528 bytes
    plain = KafkaProducer(
        {
            **_plain(event_hubs_like),
            "request.timeout.ms": "3000",
            "delivery.timeout.ms": "8000",
            "enable.idempotence": "false",
            "acks": "1",
        }
    )
    try:
        future = plain.send(topic, b"x" * 20_000)
        future.get(30)  # the connection itself works
        with pytest.raises(KafkaError):
            plain.send(topic, big + b"x" * 7_000).get(30)
    finally:
        plain.close(5)
    with_preset = KafkaProducer(_plain(event_hubs_like), preset="event-hubs")
    try:
        assert with_preset.config.max_request_size == 1_000_000
        with pytest.raises(RecordTooLargeError, match="1000000"):
            with_preset.send(topic, big).get(30)
        with_preset.send(topic, b"fits", key=b"k").get(30)
    finally:
        with_preset.close(5)
    values = [r.value for r in read_all(event_hubs_like.bootstrap_servers, topic)]
    assert values == [b"x" * 20_000, b"fits"]


def test_exactly_once_preflight_finds_transactions_and_a_transaction_commits(
    event_hubs_like: LocalKafka,
) -> None:
    topic = _topic(event_hubs_like, "eh-txn")
    options = SinkOptions.from_options(
        {
            "kafka.bootstrap.servers": event_hubs_like.bootstrap_servers,
            "kafka.security.protocol": "PLAINTEXT",
            "preset": "event-hubs",
            "deliveryGuarantee": "exactly-once",
            "topic": topic,
        }
    )
    config = options.producer_config
    assert config["connections.max.idle.ms"] == "180000"
    preflight.check_write(
        config,
        topic=topic,
        timeout_ms=15_000,
        idempotent=False,
        streaming=False,
        exactly_once=True,
        preset=options.preset,
    )
    producer = KafkaProducer({**config, "transactional.id": "eh-txn-0"}, preset=options.preset)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"once", key=b"k")
        producer.commit_transaction()
    finally:
        producer.close(5)
    records = read_all(event_hubs_like.bootstrap_servers, topic, isolation_level="read_committed")
    assert [r.value for r in records] == [b"once"]


def _value_for_batch(size: int) -> bytes:
    """A value whose one-record batch (no key, no headers) is exactly ``size`` bytes."""
    length = size - BATCH_HEADER_SIZE
    while length > 0:
        builder = RecordBatchBuilder(batch_size=size + 1024)
        builder.append(0, None, b"v" * length)
        if builder.estimated_size_bytes == size:
            return b"v" * length
        length -= 1
    raise AssertionError(f"no one-record batch is {size} bytes")


def _at_the_ceiling(kafka: LocalKafka) -> dict[str, object]:
    return {
        **_plain(kafka),
        "max.request.size": str(EVENT_HUBS_REQUEST_LIMIT),  # the preset's allowed maximum
        "client.id": "eh-ceiling",
        # Nothing leaves before flush() (no batch fills, none lingers long enough): then every
        # partition's batch drains at once.
        "batch.size": "65536",
        "linger.ms": "10000",
        "request.timeout.ms": "5000",
        "delivery.timeout.ms": "20000",
        # A request the broker cuts off fails its records rather than being retried in smaller
        # requests (which would hide the cut).
        "retries": "0",
        "enable.idempotence": "false",
        "acks": "1",
    }


def test_batches_filling_the_allowed_maximum_across_many_partitions_are_not_cut_off(
    event_hubs_like: LocalKafka,
) -> None:
    # Forty one-record batches whose bytes add up to exactly max.request.size=1046528: the
    # request framing them (header, topic, forty partition entries) must be counted too, or
    # the request exceeds the broker's socket.request.max.bytes and it closes the connection.
    partitions = 40
    topic = "eh-ceiling-partitions"
    create_topic(event_hubs_like.bootstrap_servers, topic, partitions, 1)
    each = EVENT_HUBS_REQUEST_LIMIT // partitions
    sizes = [each] * (partitions - 1) + [EVENT_HUBS_REQUEST_LIMIT - each * (partitions - 1)]
    values = [b"%02d" % p + _value_for_batch(size)[2:] for p, size in enumerate(sizes)]
    assert sum(sizes) == EVENT_HUBS_REQUEST_LIMIT
    with KafkaProducer(_at_the_ceiling(event_hubs_like), preset="event-hubs") as producer:
        futures = [producer.send(topic, v, partition=p) for p, v in enumerate(values)]
        producer.flush(30)
        assert [f.get(30).partition for f in futures] == list(range(partitions))
    records = read_all(event_hubs_like.bootstrap_servers, topic, expected=partitions)
    assert [r.value for r in records] == values


def test_a_record_whose_batch_alone_fills_the_ceiling_is_refused_and_a_smaller_one_arrives(
    event_hubs_like: LocalKafka,
) -> None:
    topic = _topic(event_hubs_like, "eh-ceiling-record")
    with KafkaProducer(_at_the_ceiling(event_hubs_like), preset="event-hubs") as producer:
        # The largest record whose batch alone is within max.request.size leaves no room for
        # the request around it.
        value = b"v" * (EVENT_HUBS_REQUEST_LIMIT - BATCH_HEADER_SIZE)
        while estimate_record_size(None, value) + BATCH_HEADER_SIZE > EVENT_HUBS_REQUEST_LIMIT:
            value = value[:-1]
        with pytest.raises(RecordTooLargeError, match="1046528"):
            producer.send(topic, value).get(30)
        largest = value[:-200]
        producer.send(topic, largest).get(30)
    assert [r.value for r in read_all(event_hubs_like.bootstrap_servers, topic)] == [largest]


def test_the_plain_recipes_of_readme_write_through_a_sasl_listener(
    event_hubs_like: LocalKafka,
) -> None:
    # README's Confluent Cloud API-key and Event Hubs connection-string recipes as the sink
    # parses them (their presets fill in PLAIN, and $ConnectionString as the Event Hubs user),
    # with only the host, the secrets and the protocol (no TLS here) put in.
    servers = event_hubs_like.sasl_bootstrap_servers
    confluent = recipe_sink_options(
        "Confluent Cloud with an API key",
        {
            "kafka.bootstrap.servers": servers,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.username": API_KEY[0],
            "kafka.sasl.password": API_KEY[1],
        },
    )
    event_hubs = recipe_sink_options(
        "Azure Event Hubs with a connection string",
        {
            "kafka.bootstrap.servers": servers,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.password": CONNECTION_STRING,
        },
    )
    assert confluent.producer_config["sasl.mechanism"] == "PLAIN"
    assert event_hubs.producer_config["sasl.mechanism"] == "PLAIN"
    assert event_hubs.producer_config["sasl.username"] == "$ConnectionString"
    assert confluent.topic == event_hubs.topic
    topic = _topic(event_hubs_like, confluent.topic)
    for options, value in (
        (confluent, b"with an api key"),
        (event_hubs, b"with a connection string"),
    ):
        with KafkaProducer(options.producer_config) as producer:
            producer.send(topic, value).get(30)
    values = [r.value for r in read_all(event_hubs_like.bootstrap_servers, topic, expected=2)]
    assert values == [b"with an api key", b"with a connection string"]
    wrong = recipe_sink_options(
        "Azure Event Hubs with a connection string",
        {
            "kafka.bootstrap.servers": servers,
            "kafka.security.protocol": "SASL_PLAINTEXT",
            "kafka.sasl.password": "not-the-connection-string",
        },
    )
    with KafkaProducer(wrong.producer_config) as producer, pytest.raises(SaslAuthenticationError):
        producer.send(topic, b"refused").get(30)
