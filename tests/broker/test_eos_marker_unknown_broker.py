"""A refused commit whose marker the driver may not read is unknown, not lost: a real broker
with an authorizer.

The driver's principal (``alice``, over SASL) has the ACLs an exactly-once write needed before
READ on the data topic was added to them: WRITE on the topic, WRITE and DESCRIBE on the
transactional ids. A child process (confluent-kafka, the super user) writes a transaction to
two partitions and dies with it open. The driver records its intent and commits it; its first
EndTxn is applied but the answer dropped, and before the retry another producer's
InitProducerId moves the id on, so the retry is refused (PRODUCER_FENCED) and only the marker
can tell. Reading it is refused (TOPIC_AUTHORIZATION_FAILED).

Before, the transaction was recorded lost and the batch partial, and its re-run wrote those
partitions again: a read_committed consumer read the rows twice after an error saying they were
lost. Now the batch fails as incomplete naming the transaction, the partitions and the missing
ACL; its intent stays; the next planning reads again (refused while READ is missing, nothing
written), and once READ is granted finishes the batch. An independent read_committed consumer
(kafka-python) reads every row once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kafka_sink.sink_errors import SinkCommitOutcomeUnknownError
from kafka_sink.spark.driver.eos.committer import EosCommitter, listing_ops
from kafka_sink.spark.driver.eos.intents import DONE, INTENT, MemoryIntentStore
from kafka_sink.testing.local_kafka import KafkaSetupError, KafkaStartError, LocalKafka
from kafka_sink.testing.oracle import create_topic, import_kafka_python
from tests.broker.marker_scenarios import (
    INIT_TRANSACTIONS,
    commit_answer_lost,
    open_and_die,
    run_child,
    visible,
)

USERS = {"alice": "alice-secret"}


@pytest.fixture(scope="module")
def acl_kafka() -> Iterator[LocalKafka]:
    """One broker with an authorizer; its PLAINTEXT listener is the super user, its SASL one
    serves ``alice``, who starts with no ACL."""
    kafka = LocalKafka(
        heap="384m",
        sasl_users=USERS,
        broker_config={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    )
    try:
        kafka.start()
    except (KafkaSetupError, KafkaStartError) as exc:
        pytest.fail(f"no Kafka broker with an authorizer for the tests: {exc}", pytrace=False)
    try:
        yield kafka
    finally:
        kafka.close()


def _grant(
    kafka: LocalKafka, kind: str, name: str, *operations: str, prefixed: bool = False
) -> None:
    admin_module = import_kafka_python().admin
    pattern = admin_module.ResourcePattern(
        admin_module.ResourceType[kind],
        name,
        admin_module.ACLResourcePatternType.PREFIXED
        if prefixed
        else admin_module.ACLResourcePatternType.LITERAL,
    )
    acls = [
        admin_module.ACL(
            principal="User:alice",
            host="*",
            operation=admin_module.ACLOperation[op],
            permission_type=admin_module.ACLPermissionType.ALLOW,
            resource_pattern=pattern,
        )
        for op in operations
    ]
    admin = admin_module.KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        result = admin.create_acls(acls)
        assert not result["failed"], result["failed"]
    finally:
        admin.close()


def test_a_refused_commit_whose_marker_may_not_be_read_is_unknown_and_finished_once_granted(
    acl_kafka: LocalKafka,
) -> None:
    plaintext = acl_kafka.bootstrap_servers
    topic = f"unknown-{uuid.uuid4().hex[:8]}"
    prefix = f"acl-{uuid.uuid4().hex[:8]}"
    tid = f"{prefix}-0-0"
    create_topic(plaintext, topic, 2)
    # What README listed for exactly-once before READ was added: no READ on the topic.
    _grant(acl_kafka, "TOPIC", topic, "WRITE")
    _grant(acl_kafka, "TRANSACTIONAL_ID", prefix, "WRITE", "DESCRIBE", prefixed=True)
    alice = {
        "bootstrap.servers": acl_kafka.sasl_bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": USERS["alice"],
        "max.block.ms": "10000",
    }
    open_and_die(plaintext, tid, topic)
    store = MemoryIntentStore()

    def driver() -> EosCommitter:
        return EosCommitter(store, listing_ops(alice, 10), query_key="q", prefix=prefix)

    # A stale attempt moves the id on.
    error = commit_answer_lost(
        alice, store, prefix, (tid, topic), lambda: run_child(INIT_TRANSACTIONS, plaintext, tid)
    )
    text = str(error)
    assert repr(tid) in text and f"{topic}-0" in text and "TOPIC_AUTHORIZATION_FAILED" in text
    assert f"--operation Read --topic {topic}" in text
    last = store.last("q")
    assert last is not None and last.state == INTENT and "lost" not in last.extra

    # The next planning reads again: still refused, so it stops, writing nothing.
    restarted = driver()
    try:
        with pytest.raises(SinkCommitOutcomeUnknownError):
            restarted.recover()
    finally:
        restarted.close()
    last = store.last("q")
    assert last is not None and last.state == INTENT

    _grant(acl_kafka, "TOPIC", topic, "READ")
    restarted = driver()
    try:
        done = restarted.recover()
    finally:
        restarted.close()
    assert done is not None and done.state == DONE
    rows = [b"after"] * 2 + [b"before"] * 2 + [f"txn-{i}".encode() for i in range(4)]
    assert visible(plaintext, topic) == sorted(rows)
