"""A commit whose answer was lost, then its id moved on, and its marker unreadable: real Spark, a
real broker with an authorizer, an independent read_committed consumer (kafka-python).

A batch job with ``idempotencyKey`` runs as ``alice`` (SASL) with the ACLs an exactly-once write
needs. The driver pauses once the job's intent is durable (the test-only hook in the
committer). Meanwhile the test revokes alice's READ on the topic (an ACL changed while the job
runs; or a principal given only the ACLs the README listed before READ), commits one of the
job's transactions with an EndTxn of its own (the driver's first EndTxn, applied, its answer
never heard) and calls InitProducerId on its id (a stale task attempt would), which moves the id
on. The driver's EndTxn for it is refused, and reading its marker is refused too
(TOPIC_AUTHORIZATION_FAILED).

Before, the transaction was taken as lost: the job failed saying so, the batch was recorded
partial, and the key's re-run wrote that partition again, every one of its rows read twice.
Now the job fails as incomplete naming the transaction, its partitions and the READ ACL; a
re-run without READ is refused before any task; once READ is granted the re-run's planning
reads COMMIT, finishes the recorded commit and writes nothing: every row read once.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sparkutil import assert_nothing_left_open

from kafka_sink.admin.transactions import complete_transaction, list_transactions
from kafka_sink.testing.local_kafka import KafkaSetupError, KafkaStartError, LocalKafka
from kafka_sink.testing.oracle import create_topic, import_kafka_python, read_all
from tests.txn_children import INIT_TRANSACTIONS

# A fault proof: `-m "not slow"` leaves it out, CI runs it.
pytestmark = pytest.mark.slow

ROWS = 3000
PARTITIONS = 3
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


def _acls(kafka: LocalKafka, kind: str, name: str, *ops: str, prefixed: bool = False) -> list[Any]:
    admin_module = import_kafka_python().admin
    pattern = admin_module.ResourcePattern(
        admin_module.ResourceType[kind],
        name,
        admin_module.ACLResourcePatternType.PREFIXED
        if prefixed
        else admin_module.ACLResourcePatternType.LITERAL,
    )
    return [
        admin_module.ACL(
            principal="User:alice",
            host="*",
            operation=admin_module.ACLOperation[op],
            permission_type=admin_module.ACLPermissionType.ALLOW,
            resource_pattern=pattern,
        )
        for op in ops
    ]


def _admin(kafka: LocalKafka) -> Any:
    return import_kafka_python().admin.KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)


def _grant(kafka: LocalKafka, kind: str, name: str, *ops: str, prefixed: bool = False) -> None:
    admin = _admin(kafka)
    try:
        result = admin.create_acls(_acls(kafka, kind, name, *ops, prefixed=prefixed))
        assert not result["failed"], result["failed"]
    finally:
        admin.close()


def _revoke_read(kafka: LocalKafka, topic: str) -> None:
    admin_module = import_kafka_python().admin
    (acl,) = _acls(kafka, "TOPIC", topic, "READ")
    wanted = admin_module.ACLFilter(
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
        resource_pattern=admin_module.ResourcePatternFilter(
            acl.resource_pattern.resource_type,
            acl.resource_pattern.resource_name,
            acl.resource_pattern.pattern_type,
        ),
    )
    admin = _admin(kafka)
    try:
        [(_, deleted, error)] = admin.delete_acls([wanted])
        assert error.errno == 0 and len(deleted) == 1, (error, deleted)
    finally:
        admin.close()


def _wait_for(what: str, check: Any, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def test_a_refused_commit_whose_marker_cannot_be_read_is_never_written_twice(
    spark: Any, spark_env: Any, acl_kafka: LocalKafka, tmp_path: Path
) -> None:
    direct = acl_kafka.bootstrap_servers  # the super user
    config = {"bootstrap.servers": direct}
    topic = f"eos-unknown-{uuid.uuid4().hex[:8]}"
    prefix = f"eos-unknown-{uuid.uuid4().hex[:8]}"
    create_topic(direct, topic, partitions=PARTITIONS)
    _grant(acl_kafka, "TOPIC", topic, "WRITE", "READ")
    _grant(acl_kafka, "TRANSACTIONAL_ID", prefix, "WRITE", "DESCRIBE", prefixed=True)
    pause_dir = tmp_path / "pause"
    pause_dir.mkdir()
    df = spark.range(0, ROWS, numPartitions=PARTITIONS).selectExpr("CAST(id AS STRING) AS value")
    options = {
        "kafka.bootstrap.servers": acl_kafka.sasl_bootstrap_servers,
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.username": "alice",
        "kafka.sasl.password": USERS["alice"],
        "topic": topic,
        "deliveryGuarantee": "exactly-once",
        "transactionalIdPrefix": prefix,
        "idempotencyKey": f"nightly-{uuid.uuid4().hex[:6]}",
        "intentStore": "checkpoint",
        "commitLog": str(tmp_path / "log"),
        "kafka.transaction.timeout.ms": "60000",
        "kafka.request.timeout.ms": "2000",
        "kafka.max.block.ms": "4000",
    }

    def save() -> None:
        df.write.format("pykafka").mode("append").options(**options).save()

    staged: list[str] = []

    def move_one_id_on() -> None:
        try:
            _wait_for("the commit's pause", (pause_dir / "paused-0").exists, 180)
            _revoke_read(acl_kafka, topic)
            listing = sorted(list_transactions(config, prefix), key=lambda t: t.transactional_id)
            victim = listing[0].prepared()
            complete_transaction(config, victim, commit=True, timeout=30)  # answer unheard
            subprocess.run(
                [sys.executable, "-c", INIT_TRANSACTIONS, direct, victim.transactional_id],
                check=True,
                timeout=60,
                capture_output=True,
            )
            staged.append(victim.transactional_id)
        except Exception as exc:
            staged.append(f"staging failed: {exc}")
        finally:
            (pause_dir / "resume-0").touch()

    stager = threading.Thread(target=move_one_id_on, daemon=True)
    with spark_env({"PYKAFKA_TEST_COMMIT_PAUSE_DIR": str(pause_dir)}):
        stager.start()
        try:
            with pytest.raises(Exception) as failed:
                save()
        finally:
            stager.join(300)
    assert len(staged) == 1 and staged[0].startswith(prefix), staged

    # The key's re-run, as an orchestrator retries the failed job: while READ is still missing
    # it is refused before any task (before, it wrote the partition "lost" again).
    refused: Exception | None = None
    try:
        save()
    except Exception as exc:
        refused = exc
    _assert_each_row_once(direct, topic)
    assert refused is not None and f"User:alice may not read topic '{topic}'" in str(refused)

    text = str(failed.value)
    assert "SinkCommitOutcomeUnknownError" in text and repr(staged[0]) in text, text
    assert "TOPIC_AUTHORIZATION_FAILED" in text and f"--operation Read --topic {topic}" in text
    assert "Nothing is recorded lost" in text

    # READ granted: the re-run's planning reads COMMIT, finishes the recorded commit, and its
    # tasks write nothing.
    _grant(acl_kafka, "TOPIC", topic, "READ")
    save()
    _assert_each_row_once(direct, topic)
    assert_nothing_left_open(direct, topic, prefix)


def _assert_each_row_once(bootstrap: str, topic: str) -> None:
    rows = read_all(bootstrap, topic, expected=ROWS, isolation_level="read_committed")
    counts = Counter(int(r.value) for r in rows)
    assert set(counts) == set(range(ROWS))
    twice = sum(1 for c in counts.values() if c > 1)
    assert twice == 0, f"{twice} rows read twice by a read_committed consumer"
