"""The driver's preflight through real Spark writes: mistakes refused before any task, in seconds.

``acl_kafka`` (module): one broker with an authorizer (KRaft's StandardAuthorizer), topic
auto-creation off, and a SASL listener for the users ``alice`` and ``bob``, who start with no
ACL at all. Its PLAINTEXT listener is the super user (``User:ANONYMOUS``, which the broker's own
listeners use too): the tests create topics, grant ACLs (kafka-python's admin client) and read
back through it. Each wall time from the mistake to its error is measured against what the
same mistake cost before the preflight (64 s for unreachable brokers, 73 s for a missing topic,
each before Spark's task retry): it must fail before the old wait would have ended.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from kafka_sink.testing.local_kafka import KafkaSetupError, KafkaStartError, LocalKafka
from kafka_sink.testing.oracle import create_topic, import_kafka_python, read_all

SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
ROWS = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(20)]
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
# What the fastest of these mistakes cost before (an unreachable broker, at-least-once: 64 s, then
# a task retry): each must now fail before that, not within a tight bound on a loaded machine.
OLD_WAIT_S = 64


@pytest.fixture(scope="module")
def acl_kafka() -> Iterator[LocalKafka]:
    kafka = LocalKafka(
        heap="384m",
        sasl_users=USERS,
        broker_config={
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
            "auto.create.topics.enable": "false",
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


def _as_user(kafka: LocalKafka, user: str) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": kafka.sasl_bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.username": user,
        "kafka.sasl.password": USERS[user],
    }


def _grant(kafka: LocalKafka, user: str, resource: tuple[str, str], *operations: str) -> None:
    """ALLOW ``operations`` to ``User:<user>`` on ``(type, name)``; a name ending in '*' is a
    prefix."""
    admin_module = import_kafka_python().admin
    kind, name = resource
    prefixed = name.endswith("*")
    pattern = admin_module.ResourcePattern(
        admin_module.ResourceType[kind],
        name.rstrip("*"),
        admin_module.ACLResourcePatternType.PREFIXED
        if prefixed
        else admin_module.ACLResourcePatternType.LITERAL,
    )
    acls = [
        admin_module.ACL(
            principal=f"User:{user}",
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


def _write(spark: Any, options: dict[str, str]) -> None:
    df = spark.createDataFrame(ROWS, SCHEMA).repartition(2)
    df.write.format("pykafka").options(**options).mode("append").save()


def _refused(spark: Any, options: dict[str, str]) -> tuple[str, float]:
    """The error a batch write fails with and the seconds from the save call to it."""
    writer = spark.createDataFrame(ROWS, SCHEMA).repartition(2).write.format("pykafka")
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        writer.options(**options).mode("append").save()
    return str(info.value), time.monotonic() - started


def _values(kafka: LocalKafka, topic: str, *, isolation_level: str) -> list[bytes]:
    records = read_all(kafka.bootstrap_servers, topic, isolation_level=isolation_level)
    return sorted(r.value or b"" for r in records)


def _nothing_listening() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_unreachable_brokers_are_refused_on_the_driver_in_seconds(
    spark: Any, guarantee: str
) -> None:
    servers = _nothing_listening()
    options = {"kafka.bootstrap.servers": servers, "topic": "t", "deliveryGuarantee": guarantee}
    message, elapsed_s = _refused(spark, options)
    assert f"no broker answered at kafka.bootstrap.servers={servers} within 15000 ms" in message
    assert "ECONNREFUSED" in message
    assert "pykafka-commit-intents" not in message  # not an internal topic's timeout
    assert elapsed_s < OLD_WAIT_S, elapsed_s


def test_a_missing_topic_is_refused_naming_auto_creation(spark: Any, acl_kafka: LocalKafka) -> None:
    topic = f"missing-{uuid.uuid4().hex[:8]}"
    options = {"kafka.bootstrap.servers": acl_kafka.bootstrap_servers, "topic": topic}
    message, elapsed_s = _refused(spark, options)
    assert f"topic '{topic}' (option 'topic') does not exist" in message
    assert "auto.create.topics.enable=false" in message
    assert elapsed_s < OLD_WAIT_S, elapsed_s
    assert topic not in acl_kafka.metadata().topics  # asking did not create it


def test_a_principal_without_write_is_refused_then_writes_once_granted(
    spark: Any, acl_kafka: LocalKafka
) -> None:
    topic = f"acl-{uuid.uuid4().hex[:8]}"
    create_topic(acl_kafka.bootstrap_servers, topic, 2)
    options = {**_as_user(acl_kafka, "alice"), "topic": topic}
    message, elapsed_s = _refused(spark, options)
    assert f"User:alice may not write to topic '{topic}'" in message
    assert (
        f"kafka-acls --bootstrap-server {acl_kafka.sasl_bootstrap_servers} --command-config "
        f"<admin.properties> --add --allow-principal User:alice --operation Write --topic {topic}"
    ) in message
    assert "alice-secret" not in message
    assert elapsed_s < OLD_WAIT_S, elapsed_s
    # WRITE on the topic is all the broker asks of the idempotent producer (Kafka 3.0+):
    # alice has no IDEMPOTENT_WRITE on the cluster and the preflight must not refuse her.
    _grant(acl_kafka, "alice", ("TOPIC", topic), "WRITE")
    _write(spark, options)
    assert _values(acl_kafka, topic, isolation_level="read_committed") == sorted(v for _, v in ROWS)


def test_a_missing_or_unwritable_dead_letter_topic_is_refused_before_any_task(
    spark: Any, acl_kafka: LocalKafka
) -> None:
    topic = f"good-{uuid.uuid4().hex[:8]}"
    dead_letters = f"{topic}-dlq"
    create_topic(acl_kafka.bootstrap_servers, topic, 2)
    bad_records = {"topic": topic, "onRecordError": "deadLetter", "deadLetterTopic": dead_letters}
    options = {"kafka.bootstrap.servers": acl_kafka.bootstrap_servers, **bad_records}
    message, elapsed_s = _refused(spark, options)
    assert f"topic '{dead_letters}' (option 'deadLetterTopic') does not exist" in message
    assert "auto.create.topics.enable=false" in message
    assert elapsed_s < OLD_WAIT_S, elapsed_s
    assert dead_letters not in acl_kafka.metadata().topics  # asking did not create it
    # Present, but alice may write only the topic option's topic.
    create_topic(acl_kafka.bootstrap_servers, dead_letters, 1)
    _grant(acl_kafka, "alice", ("TOPIC", topic), "WRITE")
    message, _ = _refused(spark, {**_as_user(acl_kafka, "alice"), **bad_records})
    assert (
        f"User:alice may not write to topic '{dead_letters}' (option 'deadLetterTopic')"
    ) in message
    assert f"--allow-principal User:alice --operation Write --topic {dead_letters}" in message
    assert _values(acl_kafka, topic, isolation_level="read_uncommitted") == []


def test_a_topic_column_write_without_idempotent_write_is_refused(
    spark: Any, acl_kafka: LocalKafka
) -> None:
    topic = f"column-{uuid.uuid4().hex[:8]}"
    create_topic(acl_kafka.bootstrap_servers, topic, 1)
    schema = StructType([StructField("topic", StringType()), StructField("value", BinaryType())])
    df = spark.createDataFrame([(topic, b"v")], schema)
    with pytest.raises(Exception) as info:
        df.write.format("pykafka").options(**_as_user(acl_kafka, "bob")).mode("append").save()
    message = str(info.value)
    assert "User:bob may not use the idempotent producer" in message
    assert "--allow-principal User:bob --operation IdempotentWrite --cluster" in message
    assert _values(acl_kafka, topic, isolation_level="read_uncommitted") == []


def test_exactly_once_without_read_or_transactional_id_acls_is_refused_then_commits_once_granted(
    spark: Any, acl_kafka: LocalKafka, tmp_path: Any
) -> None:
    topic = f"eos-{uuid.uuid4().hex[:8]}"
    prefix = f"alice-etl-{uuid.uuid4().hex[:6]}"
    create_topic(acl_kafka.bootstrap_servers, topic, 2)
    _grant(acl_kafka, "alice", ("TOPIC", topic), "WRITE")
    options = {
        **_as_user(acl_kafka, "alice"),
        "topic": topic,
        "deliveryGuarantee": "exactly-once",
        "transactionalIdPrefix": prefix,
        "intentStore": "checkpoint",
        "commitLog": str(tmp_path / "commits"),
    }
    # Exactly-once reads the topic too (a refused commit's marker): READ is asked first.
    message, _ = _refused(spark, options)
    assert f"User:alice may not read topic '{topic}'" in message
    assert f"--allow-principal User:alice --operation Read --topic {topic}" in message
    _grant(acl_kafka, "alice", ("TOPIC", topic), "READ")
    message, _ = _refused(spark, options)
    assert f"User:alice may not use the transactional ids '{prefix}-*'" in message
    assert (
        "--allow-principal User:alice --operation Write --operation Describe "
        f"--transactional-id {prefix} --resource-pattern-type prefixed"
    ) in message
    assert _values(acl_kafka, topic, isolation_level="read_uncommitted") == []
    # DESCRIBE alone finds the coordinator; the EndTxn probe finds WRITE missing.
    _grant(acl_kafka, "alice", ("TRANSACTIONAL_ID", f"{prefix}*"), "DESCRIBE")
    message, _ = _refused(spark, options)
    assert f"User:alice may not use the transactional ids '{prefix}-*'" in message
    _grant(acl_kafka, "alice", ("TRANSACTIONAL_ID", f"{prefix}*"), "WRITE")
    _write(spark, options)
    assert _values(acl_kafka, topic, isolation_level="read_committed") == sorted(v for _, v in ROWS)
