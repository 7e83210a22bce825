"""Ending transactions from another process, against a real broker.

A child process opens a transaction with confluent-kafka (records on two partitions), flushes and
dies without ending it. The test finds it with ``list_transactions``, ends it with
``complete_transaction`` from the handle built from the description, and checks with an
independent read_committed consumer (kafka-python) what became visible. After each end a plain
record is written to every partition, so a read_committed read that reaches it proves the
transaction's markers are written (an open transaction would hold it back).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from kafka_sink.admin.transactions import (
    TransactionListing,
    abort_transactions,
    complete_transaction,
    describe_transactions,
    list_transactions,
)
from kafka_sink.errors import (
    InvalidTxnStateError,
    ProducerFencedError,
    SaslAuthenticationError,
    TransactionLostError,
)
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.testing.local_kafka import KafkaSetupError, KafkaStartError, LocalKafka
from kafka_sink.testing.oracle import create_topic, import_kafka_python, read_all

TopicFactory = Callable[..., str]

pytestmark = pytest.mark.broker

_OPEN_AND_DIE = """
import os, sys
from confluent_kafka import Producer
bootstrap, transactional_id, topic = sys.argv[1:4]
count, timeout_ms = int(sys.argv[4]), int(sys.argv[5])
producer = Producer(
    {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": timeout_ms,
    }
)
producer.init_transactions(30)
producer.begin_transaction()
for i in range(count):
    producer.produce(topic, value=f"{transactional_id}-{i}".encode(), partition=i % 2)
if producer.flush(30) != 0:
    sys.exit("records not acknowledged")
os._exit(0)  # dies with the transaction open
"""

RECORDS = 4


def _open_and_die(
    bootstrap: str, transactional_id: str, topic: str, timeout_ms: int = 60_000
) -> list[bytes]:
    subprocess.run(
        [
            sys.executable,
            "-c",
            _OPEN_AND_DIE,
            bootstrap,
            transactional_id,
            topic,
            str(RECORDS),
            str(timeout_ms),
        ],
        check=True,
        timeout=60,
        capture_output=True,
    )
    return [f"{transactional_id}-{i}".encode() for i in range(RECORDS)]


def _write_after(bootstrap: str, topic: str) -> list[bytes]:
    """A plain record on partitions 0 and 1, after the transaction."""
    kafka = import_kafka_python()
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for partition in (0, 1):
            producer.send(topic, value=b"after", partition=partition).get(timeout=30)
    finally:
        producer.close()
    return [b"after", b"after"]


def _committed_values(bootstrap: str, topic: str, expected: int) -> list[bytes | None]:
    records = read_all(bootstrap, topic, expected=expected, isolation_level="read_committed")
    return sorted(r.value for r in records if r.value is not None)


def _only(config: dict[str, str], prefix: str) -> TransactionListing:
    (listing,) = list_transactions(config, prefix, timeout=30)
    return listing


@pytest.fixture
def prefix() -> str:
    return f"txn-admin-{uuid.uuid4().hex[:8]}"


def test_commit_from_another_process_and_again(
    kafka_bootstrap: str, topic_factory: TopicFactory, prefix: str
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    topic = topic_factory(partitions=2)
    values = _open_and_die(kafka_bootstrap, f"{prefix}-1", topic)
    listing = _only(config, prefix)
    assert (listing.transactional_id, listing.state) == (f"{prefix}-1", "Ongoing")
    assert listing.partitions == ((topic, 0), (topic, 1))
    prepared = listing.prepared()
    assert prepared == PreparedTransaction(
        f"{prefix}-1", listing.producer_id, listing.producer_epoch, [(topic, 0), (topic, 1)]
    )

    # Transactions V2 (a 4.3 cluster): EndTxn v5 bumps the epoch and returns it.
    bumped = (prepared.producer_id, prepared.producer_epoch + 1)
    assert complete_transaction(config, prepared, commit=True, timeout=30) == bumped
    # A retried commit after the success: the coordinator answers NONE again.
    assert complete_transaction(config, prepared, commit=True, timeout=30) == bumped
    after = _write_after(kafka_bootstrap, topic)
    assert _committed_values(kafka_bootstrap, topic, RECORDS + 2) == sorted(values + after)
    assert _only(config, prefix).state == "CompleteCommit"

    # Aborting it now is an error: it is committed.
    with pytest.raises(InvalidTxnStateError, match="it was committed"):
        complete_transaction(config, prepared, commit=False, timeout=30)


def test_abort_from_another_process_and_again(
    kafka_bootstrap: str, topic_factory: TopicFactory, prefix: str
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    topic = topic_factory(partitions=2)
    values = _open_and_die(kafka_bootstrap, f"{prefix}-1", topic)
    prepared = _only(config, prefix).prepared()

    bumped = (prepared.producer_id, prepared.producer_epoch + 1)
    assert complete_transaction(config, prepared, commit=False, timeout=30) == bumped
    assert complete_transaction(config, prepared, commit=False, timeout=30) == bumped
    after = _write_after(kafka_bootstrap, topic)
    assert _committed_values(kafka_bootstrap, topic, 2) == after
    uncommitted = read_all(kafka_bootstrap, topic, expected=RECORDS + 2)
    assert sorted(r.value for r in uncommitted if r.value) == sorted(values + after)

    # Committing it now: the coordinator answers INVALID_TXN_STATE; the data is lost.
    with pytest.raises(
        TransactionLostError, match="cannot be committed: the data it wrote is lost"
    ):
        complete_transaction(config, prepared, commit=True, timeout=30)


def test_a_wrong_epoch_is_fenced_and_reported_lost(
    kafka_bootstrap: str, topic_factory: TopicFactory, prefix: str
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    topic = topic_factory(partitions=2)
    _open_and_die(kafka_bootstrap, f"{prefix}-1", topic)
    prepared = _only(config, prefix).prepared()
    stale = PreparedTransaction(
        prepared.transactional_id,
        prepared.producer_id,
        prepared.producer_epoch + 1,
        prepared.partitions,
    )
    with pytest.raises(TransactionLostError) as caught:
        complete_transaction(config, stale, commit=True, timeout=30)
    assert isinstance(caught.value.__cause__, ProducerFencedError)
    assert "another producer initialised it" in str(caught.value)
    assert "the coordinator now shows state Ongoing" in str(caught.value)
    # The transaction itself is untouched, and still ours to end.
    assert _only(config, prefix).state == "Ongoing"
    assert complete_transaction(config, prepared, commit=False, timeout=30) is not None


def test_abort_transactions_by_prefix_leaves_other_ids_alone(
    kafka_bootstrap: str, topic_factory: TopicFactory, prefix: str
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    topic = topic_factory(partitions=2)
    mine = f"{prefix}-sweep-1"
    other = f"x{prefix}-sweep-2"  # contains the prefix, does not start with it
    _open_and_die(kafka_bootstrap, mine, topic)
    _open_and_die(kafka_bootstrap, other, topic)
    try:
        aborted = abort_transactions(config, f"{prefix}-sweep-", timeout=30)
        assert [(t.transactional_id, t.state) for t in aborted] == [(mine, "Ongoing")]
        assert _only(config, mine).state == "CompleteAbort"
        assert _only(config, other).state == "Ongoing"
        # Nothing left to abort under the prefix.
        assert abort_transactions(config, f"{prefix}-sweep-", timeout=30) == []
    finally:
        assert [t.transactional_id for t in abort_transactions(config, other, timeout=30)] == [
            other
        ]
    after = _write_after(kafka_bootstrap, topic)
    assert _committed_values(kafka_bootstrap, topic, 2) == after


def test_a_transaction_the_broker_timed_out_is_reported_lost(
    kafka_bootstrap: str, topic_factory: TopicFactory, prefix: str
) -> None:
    config = {"bootstrap.servers": kafka_bootstrap}
    topic = topic_factory(partitions=2)
    _open_and_die(kafka_bootstrap, f"{prefix}-1", topic, timeout_ms=1000)
    prepared = _only(config, prefix).prepared()
    # The coordinator's reaper looks for expired transactions every 10 s.
    deadline = time.monotonic() + 40
    while (state := _only(config, prefix).state) != "CompleteAbort":
        assert time.monotonic() < deadline, f"still {state} 40 s after it expired"
        time.sleep(0.5)
    # What the driver's check before the first commit makes of it.
    from kafka_sink.spark.driver.eos.committer import _why_gone

    why = _why_gone(
        prepared, describe_transactions(config, [f"{prefix}-1"], timeout=30)[f"{prefix}-1"]
    )
    assert why is not None and why.startswith("aborted by the coordinator, because it stayed"), why
    with pytest.raises(TransactionLostError) as caught:
        complete_transaction(config, prepared, commit=True, timeout=30)
    text = str(caught.value)
    assert "cannot be committed: the data it wrote is lost" in text
    assert "transaction.timeout.ms" in text and "now shows state CompleteAbort" in text
    assert isinstance(caught.value.__cause__, InvalidTxnStateError)
    # Aborting it is a success: the coordinator answers NONE (its abort bumped the epoch).
    bumped = (prepared.producer_id, prepared.producer_epoch + 1)
    assert complete_transaction(config, prepared, commit=False, timeout=30) == bumped


_INIT_ONLY = """
import sys
from confluent_kafka import Producer
bootstrap, transactional_id = sys.argv[1:3]
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
producer.init_transactions(30)
"""


def test_describe_shows_an_open_transaction_then_the_fence_of_another_producer(
    kafka_bootstrap: str, topic_factory: TopicFactory, prefix: str
) -> None:
    """What the driver's check before the first commit reads: a prepared transaction is Ongoing
    at its producer id and epoch; once another producer initialised the same id (a zombie
    attempt) it is Empty at a higher epoch; an id the coordinator never saw is None."""
    from kafka_sink.spark.driver.eos.committer import _why_gone

    config = {"bootstrap.servers": kafka_bootstrap}
    topic = topic_factory(partitions=2)
    mine = f"{prefix}-1"
    _open_and_die(kafka_bootstrap, mine, topic)
    described = describe_transactions(config, [mine, f"{prefix}-never"], timeout=30)
    assert described[f"{prefix}-never"] is None
    now = described[mine]
    assert now is not None and now.state == "Ongoing"
    assert now.partitions == ((topic, 0), (topic, 1))
    prepared = now.prepared()
    assert _why_gone(prepared, now) is None
    subprocess.run(
        [sys.executable, "-c", _INIT_ONLY, kafka_bootstrap, mine],
        check=True,
        timeout=60,
        capture_output=True,
    )
    after = describe_transactions(config, [mine], timeout=30)[mine]
    assert after is not None and after.producer_id == prepared.producer_id
    assert (after.state, after.producer_epoch > prepared.producer_epoch) == ("Empty", True)
    why = _why_gone(prepared, after)
    assert why is not None and why.startswith("fenced by another producer"), why
    assert read_all(kafka_bootstrap, topic, isolation_level="read_committed") == []


@pytest.fixture(scope="module")
def sasl_kafka() -> Iterator[LocalKafka]:
    """A broker with a SASL_PLAINTEXT listener (SCRAM users) beside its PLAINTEXT one."""
    try:
        kafka = LocalKafka(sasl_users={"alice": "alice-secret"})
        kafka.__enter__()
    except (KafkaSetupError, KafkaStartError) as exc:
        pytest.fail(f"no SASL Kafka broker for the tests: {exc}", pytrace=False)
    try:
        yield kafka
    finally:
        kafka.__exit__(None, None, None)


def test_a_sasl_cluster_works_and_a_wrong_password_fails_at_once(
    sasl_kafka: LocalKafka, prefix: str
) -> None:
    plaintext = sasl_kafka.bootstrap_servers
    topic = f"{prefix}-topic"
    create_topic(plaintext, topic, 2)
    values = _open_and_die(plaintext, f"{prefix}-1", topic)
    config = {
        "bootstrap.servers": sasl_kafka.sasl_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    prepared = _only(config, prefix).prepared()
    assert complete_transaction(config, prepared, timeout=30) is not None
    after = _write_after(plaintext, topic)
    assert _committed_values(plaintext, topic, RECORDS + 2) == sorted(values + after)

    start = time.monotonic()
    with pytest.raises(SaslAuthenticationError) as caught:
        complete_transaction({**config, "sasl.password": "not-the-password"}, prepared, timeout=30)
    assert time.monotonic() - start < 15  # fatal at once, not after the timeout
    assert "not-the-password" not in str(caught.value)


def test_commit_survives_the_loss_of_the_coordinator(
    kafka_cluster: LocalKafka, cluster_topic_factory: TopicFactory, prefix: str
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    config = {"bootstrap.servers": bootstrap}
    topic = cluster_topic_factory(partitions=2, replication_factor=3)
    values = _open_and_die(bootstrap, f"{prefix}-1", topic)
    listing = _only(config, prefix)
    kafka_cluster.kill_node(listing.coordinator_id)
    # The coordinator's log moves to another node, which loads it and takes over: the commit
    # rides through NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / lost connections.
    assert complete_transaction(config, listing.prepared(), timeout=60) is not None
    # The decision is durable when EndTxn answers; the markers may still be on their way.
    moved = _only(config, prefix)
    assert moved.state in ("PrepareCommit", "CompleteCommit")
    assert moved.coordinator_id != listing.coordinator_id
    after = _write_after(bootstrap, topic)
    assert _committed_values(bootstrap, topic, RECORDS + 2) == sorted(values + after)
    assert _only(config, prefix).state == "CompleteCommit"


def test_complete_transactions_commits_more_than_a_connection_takes_at_once(
    kafka_bootstrap: str, topic_factory: TopicFactory, prefix: str
) -> None:
    from kafka_sink.admin.transactions import complete_transactions
    from kafka_sink.producer.producer import KafkaProducer

    # Seven transactions on one coordinator: more than max.in.flight.requests.per.connection.
    topic = topic_factory(partitions=2)
    config = {"bootstrap.servers": kafka_bootstrap}
    handles = []
    for i in range(7):
        producer = KafkaProducer({**config, "transactional.id": f"{prefix}-{i}"})
        try:
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.send(topic, f"v{i}".encode(), partition=i % 2).get(30)
            handles.append(producer.prepare_transaction(30))
        finally:
            producer.close(30)
    results = complete_transactions(config, handles, timeout=60)
    assert [r.error for r in results] == [None] * 7
    assert [r.prepared for r in results] == handles
    expected = sorted(f"v{i}".encode() for i in range(7))
    assert _committed_values(kafka_bootstrap, topic, 7) == expected
    assert all(t.state == "CompleteCommit" for t in list_transactions(config, prefix, timeout=30))
