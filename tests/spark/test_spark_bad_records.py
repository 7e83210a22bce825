"""``onRecordError``: rows Kafka cannot take, failed, dead-lettered or skipped, through real Spark.

A real SparkSession, a real Kafka (and, where a case needs it, a real Schema Registry or a broker
with an authorizer); every topic is read back by an independent consumer (kafka-python;
read_committed under exactly-once, where an aborted record would otherwise count).

- One batch job per (guarantee x policy) holds every kind of bad row the sink detects itself or
  learns from the topic: records larger than the topic's ``max.message.bytes`` (the client's
  ``max.request.size`` is large enough: the sink reads the topic's limit and takes them out
  before sending), a null ``topic`` column and a ``partition`` the topic does not have, among
  good rows of mixed sizes. ``deadLetter``: the good rows land once, each bad row lands once in the
  dead-letter topic with the bytes the sink would have written, the row's headers and the error
  headers. ``skip``: the dead-letter topic gets nothing. Either way the commit document counts
  the bad rows by reason. ``fail`` (the default): the same input fails the job as it always did.
- Exactly-once to a compacted topic: rows without a key, and a row timestamped two hours ahead
  (past the topic's ``message.timestamp.after.max.ms``), are dead letters found before sending,
  so the transaction holds the good rows and the dead letters, each once.
- A registry format (Avro, a registered schema): rows whose struct does not bind (a null in a
  non-null field, a string that is no enum symbol) are dead letters of reason ``serialization``
  at ``VALUE_CONVERTER`` holding the column's value as JSON; the good rows decode.
- A ``topic`` column naming topics the principal may not write (StandardAuthorizer): those rows
  are dead letters of reason ``topic_authorization``, the others land in their topic.
- ``deadLetterMaxRatio`` or ``deadLetterMaxRecords`` exceeded: the job fails naming the option
  (and the ratio) and the first reason; under exactly-once nothing of it is visible in either
  topic.
- Exactly-once, a task failing after its dead letters were sent and before it returned: none of
  that attempt's dead letters is visible, and after Spark's retry each bad row is, once.
- A streaming query under exactly-once: each dead letter names its micro-batch.

Row positions are known: ``spark.range(0, n, 1, p)`` gives task ``t`` the ids
``[t * n / p, (t + 1) * n / p)`` in order, so a row's position in its task is ``id - t * n / p``.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sparkutil import (
    KAFKA_OPTIONS,
    assert_nothing_left_open,
    commit_docs,
    id_stream,
    write_available_now,
)

from kafka_sink.testing.local_kafka import KafkaSetupError, KafkaStartError, LocalKafka
from kafka_sink.testing.oracle import ConsumedRecord, create_topic, import_kafka_python, read_all

TopicFactory = Callable[..., str]

# The dead letters' error headers (Kafka Connect's names, and the sink's own).
TOPIC_H = "__connect.errors.topic"
PARTITION_H = "__connect.errors.partition"
CLASS_H = "__connect.errors.exception.class.name"
MESSAGE_H = "__connect.errors.exception.message"
STAGE_H = "__connect.errors.stage"
REASON_H = "pykafka.errors.reason"
BATCH_H = "pykafka.batch.id"
TASK_PARTITION_H = "pykafka.task.partition"
ATTEMPT_H = "pykafka.task.attempt"
ROW_H = "pykafka.row"
ERROR_HEADERS = (
    TOPIC_H,
    PARTITION_H,
    CLASS_H,
    MESSAGE_H,
    STAGE_H,
    REASON_H,
    TASK_PARTITION_H,
    ATTEMPT_H,
    ROW_H,
)
# Where each failure is met: a format's encoding is the converter's, the rest is the producer's
# (a row that names no usable topic or partition never reaches a converter's error).
STAGE = {
    "record_too_large": "KAFKA_PRODUCE",
    "null_topic": "KAFKA_PRODUCE",
    "partition_out_of_range": "KAFKA_PRODUCE",
    "topic_authorization": "KAFKA_PRODUCE",
    "serialization": "VALUE_CONVERTER",
}

# The mixed batch: 40 rows in 2 tasks of 20 (ids 0-19, 20-39).
ROWS, TASKS = 40, 2
PER_TASK = ROWS // TASKS
OVERSIZE = frozenset({3, 21, 34})  # 10 KB values, the topic takes 4000 bytes
NULL_TOPIC = frozenset({7, 25})
BAD_PARTITION = frozenset({11, 30})  # partition 7 of a 3-partition topic
REASON_OF = {
    **dict.fromkeys(OVERSIZE, "record_too_large"),
    **dict.fromkeys(NULL_TOPIC, "null_topic"),
    **dict.fromkeys(BAD_PARTITION, "partition_out_of_range"),
}
GOOD = frozenset(range(ROWS)) - set(REASON_OF)


def _value(i: int) -> bytes:
    """Row ``i``'s value: its id in 4 digits, then 10 KB when oversize, else 0 to 1.5 KB."""
    return f"{i:04d}-".encode() + (b"x" * 10_000 if i in OVERSIZE else b"y" * (i * 40))


def _partition(i: int) -> int | None:
    if i in NULL_TOPIC:
        return None
    return 7 if i in BAD_PARTITION else i % 3


def _mixed(spark: Any, topic: str) -> Any:
    """The mixed batch, with a ``topic`` and a ``partition`` column (no ``topic`` option)."""
    null_topic = ", ".join(str(i) for i in sorted(NULL_TOPIC))
    oversize = ", ".join(str(i) for i in sorted(OVERSIZE))
    bad_partition = ", ".join(str(i) for i in sorted(BAD_PARTITION))
    return spark.range(0, ROWS, 1, TASKS).selectExpr(
        f"IF(id IN ({null_topic}), CAST(NULL AS STRING), '{topic}') AS topic",
        "concat('k', id) AS key",
        "CAST(concat(lpad(CAST(id AS STRING), 4, '0'), '-', "
        f"IF(id IN ({oversize}), repeat('x', 10000), repeat('y', CAST(id * 40 AS INT)))) "
        "AS BINARY) AS value",
        f"CAST(IF(id IN ({null_topic}), NULL, IF(id IN ({bad_partition}), 7, id % 3)) AS INT) "
        "AS partition",
        "array(named_struct('key', 'src', 'value', CAST(concat('h', id) AS BINARY))) AS headers",
    )


def _row_id(record: ConsumedRecord) -> int:
    assert record.value is not None
    return int(record.value[:4])


def _headers(record: ConsumedRecord) -> dict[str, str]:
    """A dead letter's headers as text, each error header present exactly once."""
    names = [k for k, _ in record.headers]
    for name in ERROR_HEADERS:
        assert names.count(name) == 1, (name, record.headers)
    return {k: (v or b"").decode("utf-8") for k, v in record.headers}


def _once(ids: list[int], expected: frozenset[int] | set[int]) -> None:
    counts = Counter(ids)
    assert set(counts) == set(expected), sorted(set(counts) ^ set(expected))
    assert [i for i, c in counts.items() if c > 1] == []


def _isolation(guarantee: str) -> str:
    return "read_committed" if guarantee == "exactly-once" else "read_uncommitted"


def _guarantee_options(guarantee: str, prefix: str) -> dict[str, str]:
    options = {"deliveryGuarantee": guarantee}
    if guarantee == "exactly-once":
        options["transactionalIdPrefix"] = prefix
    return options


def _prefix() -> str:
    return f"bad-rows-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize(
    "case",
    [
        "at-least-once/deadLetter",
        "exactly-once/deadLetter",
        # The same rows and checks under skip: part of the full run, not of the quick one.
        pytest.param("at-least-once/skip", marks=pytest.mark.slow),
        pytest.param("exactly-once/skip", marks=pytest.mark.slow),
    ],
)
def test_bad_rows_of_every_kind_are_dead_lettered_or_skipped_and_counted(
    spark: Any, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, case: str
) -> None:
    guarantee, policy = case.split("/")
    topic = topic_factory(partitions=3, configs={"max.message.bytes": "4000"})
    dlq = topic_factory(partitions=1)
    prefix = _prefix()
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        **KAFKA_OPTIONS,
        # Above the 10 KB rows: the client lets them go and the broker refuses them.
        "kafka.max.request.size": "1048576",
        "commitLog": str(tmp_path / "log"),
        "onRecordError": policy,
        **_guarantee_options(guarantee, prefix),
    }
    if policy == "deadLetter":
        options["deadLetterTopic"] = dlq
    _mixed(spark, topic).write.format("pykafka").mode("append").options(**options).save()

    isolation = _isolation(guarantee)
    # At-least-once: everything was acknowledged before the tasks reported success, so it is all
    # there now. Exactly-once: the commit markers may still be on their way.
    wait = isolation == "read_committed"
    good = read_all(
        kafka_bootstrap, topic, expected=len(GOOD) if wait else None, isolation_level=isolation
    )
    _once([_row_id(r) for r in good], GOOD)
    for r in good:
        i = _row_id(r)
        assert (r.key, r.value, r.partition) == (f"k{i}".encode(), _value(i), i % 3)
        assert r.headers == [("src", f"h{i}".encode())]

    [doc] = commit_docs(tmp_path / "log")
    assert doc["bad_records"]["action"] == policy
    assert doc["bad_records"]["rows_read"] == ROWS
    assert doc["bad_records"]["bad_records"] == len(REASON_OF)
    assert doc["bad_records"]["by_reason"] == dict(Counter(REASON_OF.values()))
    # The first bad rows, in (task, row) order: task 0's three, one of each reason.
    assert [
        (f["spark_partition"], f["row"], f["topic"], f["reason"])
        for f in doc["bad_records"]["first"]
    ] == [
        (0, 3, topic, "record_too_large"),
        (0, 7, None, "null_topic"),
        (0, 11, topic, "partition_out_of_range"),
    ]

    if guarantee == "exactly-once":
        assert_nothing_left_open(kafka_bootstrap, topic, prefix)
    if policy == "skip":
        # skip takes no dead-letter topic (the option is refused with it): the good rows are
        # all that was written.
        assert doc["record_count"] == len(GOOD)
        assert read_all(kafka_bootstrap, dlq) == []
        return
    letters = read_all(
        kafka_bootstrap, dlq, expected=len(REASON_OF) if wait else None, isolation_level=isolation
    )
    _once([_row_id(r) for r in letters], set(REASON_OF))
    for r in letters:
        i = _row_id(r)
        reason = REASON_OF[i]
        h = _headers(r)
        assert (r.key, r.value) == (f"k{i}".encode(), _value(i)), i
        assert ("src", f"h{i}".encode()) in r.headers  # the row's own headers come along
        assert h[REASON_H] == reason
        assert h[TOPIC_H] == ("" if reason == "null_topic" else topic)
        named = _partition(i)
        assert h[PARTITION_H] == str(-1 if named is None else named)
        assert h[STAGE_H] == STAGE[reason]
        assert h[CLASS_H] and h[MESSAGE_H]
        assert (h[TASK_PARTITION_H], h[ROW_H], h[ATTEMPT_H]) == (
            str(i // PER_TASK),
            str(i % PER_TASK),
            "0",
        )
        assert BATCH_H not in h  # a batch job has no batch id
    by_id = {_row_id(r): _headers(r)[MESSAGE_H] for r in letters}
    assert "partition 7" in by_id[min(BAD_PARTITION)]
    assert "topic" in by_id[min(NULL_TOPIC)]
    if guarantee == "exactly-once":
        assert_nothing_left_open(kafka_bootstrap, dlq, prefix)


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_by_default_a_bad_row_fails_the_job_as_before(
    spark: Any,
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    guarantee: str,
) -> None:
    topic = topic_factory(partitions=3, configs={"max.message.bytes": "4000"})
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        **KAFKA_OPTIONS,
        "kafka.max.request.size": "1048576",
        "commitLog": str(tmp_path / "log"),
        **_guarantee_options(guarantee, _prefix()),
    }
    with pytest.raises(Exception) as info:
        _mixed(spark, topic).write.format("pykafka").mode("append").options(**options).save()
    message = str(info.value)
    # A task's error, naming the row: not a refusal while planning.
    assert "PYTHON_DATA_SOURCE_ERROR" not in message
    lines = [line for line in message.splitlines() if "SinkDataError: row " in line]
    assert lines, message[-3000:]
    if guarantee == "exactly-once":
        assert read_all(kafka_bootstrap, topic, isolation_level="read_committed") == []
    docs = commit_docs(tmp_path / "log")
    assert docs and all(d["kind"] == "abort" for d in docs), docs  # no commit file


def test_exactly_once_takes_out_what_a_compacted_topic_and_its_time_bounds_refuse(
    spark: Any, kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(
        partitions=1,
        configs={"cleanup.policy": "compact", "message.timestamp.after.max.ms": "3600000"},
    )
    dlq = topic_factory(partitions=1)
    prefix = _prefix()
    keyless, ahead = {2, 5}, {7}
    df = spark.range(0, 10, 1, 1).selectExpr(
        f"IF(id IN ({', '.join(map(str, sorted(keyless)))}), CAST(NULL AS BINARY), "
        "CAST(concat('k', id) AS BINARY)) AS key",
        "CAST(lpad(CAST(id AS STRING), 4, '0') AS BINARY) AS value",
        f"IF(id IN ({', '.join(map(str, sorted(ahead)))}), "
        "current_timestamp() + INTERVAL 2 HOURS, current_timestamp()) AS timestamp",
    )
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        **KAFKA_OPTIONS,
        "topic": topic,
        "onRecordError": "deadLetter",
        "deadLetterTopic": dlq,
        **_guarantee_options("exactly-once", prefix),
    }
    df.write.format("pykafka").mode("append").options(**options).save()
    bad = keyless | ahead
    good = read_all(
        kafka_bootstrap, topic, expected=10 - len(bad), isolation_level="read_committed"
    )
    _once([_row_id(r) for r in good], set(range(10)) - bad)
    letters = read_all(kafka_bootstrap, dlq, expected=len(bad), isolation_level="read_committed")
    _once([_row_id(r) for r in letters], bad)
    reasons = {_row_id(r): _headers(r)[REASON_H] for r in letters}
    assert reasons == {2: "invalid_record", 5: "invalid_record", 7: "invalid_timestamp"}
    # The row ahead of time is stamped now in the dead-letter topic (which would refuse its own
    # timestamp too); that timestamp rides in a header.
    [late] = [r for r in letters if _row_id(r) == 7]
    original = int(_headers(late)["pykafka.timestamp"])
    assert original - late.timestamp_ms > 3_600_000
    assert_nothing_left_open(kafka_bootstrap, dlq, prefix)


# The registry case: one task of 30 rows, 6 of which do not bind to the registered schema.
AVRO_ROWS = 30
NULL_NAME = frozenset({4, 14, 24})  # a null in the non-null string 'name'
NOT_A_SYMBOL = frozenset({7, 17, 27})  # 'PURPLE' is no symbol of the enum 'Color'
COLORS = ("RED", "GREEN", "BLUE")
PAINT_SCHEMA = {
    "type": "record",
    "name": "Paint",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": list(COLORS)}},
    ],
}


def _paint(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": None if i in NULL_NAME else f"n{i}",
        "color": "PURPLE" if i in NOT_A_SYMBOL else COLORS[i % 3],
    }


def test_rows_that_do_not_bind_to_the_registered_schema_are_dead_letters_as_json(
    spark: Any,
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    schema_registry: Any,
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentRegistry
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    from kafka_sink.formats.registry import Schema, SchemaRegistryClient
    from kafka_sink.testing.registry_oracle import read_deserialized

    topic = topic_factory(partitions=1)
    dlq = topic_factory(partitions=1)
    client = SchemaRegistryClient.from_options({"schema.registry.url": schema_registry.url})
    client.register(f"{topic}-value", Schema(json.dumps(PAINT_SCHEMA)))
    null_name = ", ".join(str(i) for i in sorted(NULL_NAME))
    not_a_symbol = ", ".join(str(i) for i in sorted(NOT_A_SYMBOL))
    df = spark.range(0, AVRO_ROWS, 1, 1).selectExpr(
        "concat('k', id) AS key",
        "named_struct("
        "'id', id, "
        f"'name', IF(id IN ({null_name}), CAST(NULL AS STRING), concat('n', id)), "
        f"'color', IF(id IN ({not_a_symbol}), 'PURPLE', "
        "element_at(array('RED', 'GREEN', 'BLUE'), CAST(id % 3 AS INT) + 1))"
        ") AS value",
    )
    (
        df.write.format("pykafka")
        .mode("append")
        .options(**KAFKA_OPTIONS)
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("topic", topic)
        .option("valueFormat", "avro")
        .option("schema.registry.url", schema_registry.url)
        .option("auto.register.schemas", "false")
        .option("use.latest.version", "true")
        .option("onRecordError", "deadLetter")
        .option("deadLetterTopic", dlq)
        .save()
    )
    bad = NULL_NAME | NOT_A_SYMBOL
    good = sorted(set(range(AVRO_ROWS)) - bad)
    deserializer = AvroDeserializer(ConfluentRegistry({"url": schema_registry.url}))
    decoded = read_deserialized(kafka_bootstrap, topic, deserializer, len(good))
    assert sorted(decoded, key=lambda v: v["id"]) == [_paint(i) for i in good]
    assert len(read_all(kafka_bootstrap, topic)) == len(good)

    letters = read_all(kafka_bootstrap, dlq)  # at-least-once: acknowledged before save() ended
    assert len(letters) == len(bad)
    by_id: dict[int, ConsumedRecord] = {}
    for r in letters:
        assert r.value is not None
        value = json.loads(r.value.decode("utf-8"))  # the struct as JSON, as the row held it
        by_id[value["id"]] = r
        assert value == _paint(value["id"])
    assert set(by_id) == bad
    for i, r in by_id.items():
        h = _headers(r)
        assert r.key == f"k{i}".encode()
        assert (h[REASON_H], h[STAGE_H]) == ("serialization", "VALUE_CONVERTER")
        assert (h[TOPIC_H], h[PARTITION_H]) == (topic, "-1")
        assert (h[TASK_PARTITION_H], h[ROW_H], h[ATTEMPT_H]) == ("0", str(i), "0")
        assert ("name" if i in NULL_NAME else "PURPLE") in h[MESSAGE_H]


# The authorizer's broker, as in test_spark_preflight.py: alice has only what a test grants her.
USERS = {"alice": "alice-secret"}


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


def _grant(kafka: LocalKafka, user: str, kind: str, name: str, *operations: str) -> None:
    """ALLOW ``operations`` to ``User:<user>`` on the literal resource ``(kind, name)``."""
    admin_module = import_kafka_python().admin
    pattern = admin_module.ResourcePattern(
        admin_module.ResourceType[kind], name, admin_module.ACLResourcePatternType.LITERAL
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


def test_rows_for_a_topic_the_principal_may_not_write_are_dead_letters(
    spark: Any, acl_kafka: LocalKafka
) -> None:
    suffix = uuid.uuid4().hex[:8]
    allowed, dlq = f"allowed-{suffix}", f"dlq-{suffix}"
    hidden, read_only = f"hidden-{suffix}", f"read-only-{suffix}"
    for name in (dlq, hidden, read_only):
        create_topic(acl_kafka.bootstrap_servers, name, 1)
    # alice may not read this topic's configuration (no DESCRIBE_CONFIGS), so the sink cannot
    # find its oversize row before sending: the broker refuses its batch, and at-least-once
    # isolates the row by splitting and dead-letters it, the rows around it written once.
    create_topic(acl_kafka.bootstrap_servers, allowed, 1, configs={"max.message.bytes": "3000"})
    # A topic column needs the idempotent producer's cluster ACL; alice may write two topics,
    # may only read a third (the broker refuses her produce) and knows nothing of the fourth
    # (its metadata is refused).
    _grant(acl_kafka, "alice", "CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE")
    _grant(acl_kafka, "alice", "TOPIC", allowed, "WRITE")
    _grant(acl_kafka, "alice", "TOPIC", dlq, "WRITE")
    _grant(acl_kafka, "alice", "TOPIC", read_only, "READ")
    # 20 rows, 2 tasks: every fifth row names the hidden topic, every fifth from 2 the read-only.
    target = {i: hidden if i % 5 == 0 else read_only if i % 5 == 2 else allowed for i in range(20)}
    df = spark.range(0, 20, 1, 2).selectExpr(
        f"CASE WHEN id % 5 = 0 THEN '{hidden}' WHEN id % 5 = 2 THEN '{read_only}' "
        f"ELSE '{allowed}' END AS topic",
        # Row 19's value is "19" padded to 6 KB (int() of it is still 19).
        "IF(id = 19, concat('19', repeat(' ', 6000)), CAST(id AS STRING)) AS value",
    )
    (
        df.write.format("pykafka")
        .mode("append")
        .options(
            **{
                "kafka.bootstrap.servers": acl_kafka.sasl_bootstrap_servers,
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "SCRAM-SHA-256",
                "kafka.sasl.username": "alice",
                "kafka.sasl.password": USERS["alice"],
            }
        )
        .option("onRecordError", "deadLetter")
        .option("deadLetterTopic", dlq)
        .save()
    )
    denied = {i for i, t in target.items() if t != allowed}
    oversize = {19}
    written = read_all(acl_kafka.bootstrap_servers, allowed)
    _once([int(r.value or b"") for r in written], set(range(20)) - denied - oversize)
    for name in (hidden, read_only):
        assert read_all(acl_kafka.bootstrap_servers, name) == []
    letters = read_all(acl_kafka.bootstrap_servers, dlq)
    _once([int(r.value or b"") for r in letters], denied | oversize)
    for r in letters:
        i = int(r.value or b"")
        h = _headers(r)
        reason = "record_too_large" if i in oversize else "topic_authorization"
        assert (h[REASON_H], h[STAGE_H]) == (reason, "KAFKA_PRODUCE")
        assert (h[TOPIC_H], h[PARTITION_H]) == (target[i], "-1")
        assert (h[TASK_PARTITION_H], h[ROW_H]) == (str(i // 10), str(i % 10))
        assert "alice-secret" not in h[MESSAGE_H]


@pytest.mark.parametrize(
    "case",
    [
        "exactly-once/deadLetterMaxRatio=0.1",
        pytest.param("at-least-once/deadLetterMaxRecords=5", marks=pytest.mark.slow),
    ],
)
def test_a_batch_above_a_dead_letter_bound_fails_naming_it(
    spark: Any, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path, case: str
) -> None:
    """6 bad rows of 20 (30%, in both tasks): above either bound, the batch fails; exactly-once
    leaves nothing of it visible (at-least-once's rows, acknowledged before the driver counted,
    stay, as a failed at-least-once batch's always have)."""
    guarantee, bound = case.split("/")
    option, limit = bound.split("=")
    topic = topic_factory(partitions=2)
    dlq = topic_factory(partitions=1)
    prefix = _prefix()
    bad = (1, 4, 8, 12, 15, 18)
    df = spark.range(0, 20, 1, 2).selectExpr(
        "CAST(id AS STRING) AS value",
        f"CAST(IF(id IN ({', '.join(map(str, bad))}), 9, NULL) AS INT) AS partition",
    )
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        **KAFKA_OPTIONS,
        "topic": topic,
        "onRecordError": "deadLetter",
        "deadLetterTopic": dlq,
        option: limit,
        "commitLog": str(tmp_path / "log"),
        **_guarantee_options(guarantee, prefix),
    }
    with pytest.raises(Exception) as info:
        df.write.format("pykafka").mode("append").options(**options).save()
    message = str(info.value)
    # BadRecordsLimitError, a SinkDataError: one line naming the bound, the share, the first rows.
    lines = [line for line in message.splitlines() if "BadRecordsLimitError: " in line]
    assert lines, message[-3000:]
    line = lines[0]
    assert option in line and "30.0%" in line, line
    assert "partition_out_of_range" in line, line  # the first rows' reason
    assert all(d["kind"] != "commit" for d in commit_docs(tmp_path / "log"))
    if guarantee == "exactly-once":
        for name in (topic, dlq):
            assert read_all(kafka_bootstrap, name, isolation_level="read_committed") == []
            assert_nothing_left_open(kafka_bootstrap, name, prefix)


# The retried task: 1200 rows of 1 KB in 2 tasks of 600; task 0's first attempt fails on id 500,
# once the rows before it (4 of its dead letters among them) went out.
RETRY_ROWS, RETRY_FAIL_AT = 1200, 500
RETRY_BAD = frozenset(range(7, RETRY_ROWS, 100))  # partition 5 of a 2-partition topic


def test_exactly_once_a_failed_attempts_dead_letters_are_never_visible(
    spark: Any, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    from pyspark.sql import functions as sf
    from pyspark.sql.types import StringType

    topic = topic_factory(partitions=2)
    dlq = topic_factory(partitions=1)
    prefix = _prefix()

    @sf.udf(returnType=StringType(), useArrow=False)
    def fail_first_attempt(i: int) -> str:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.attemptNumber() == 0 and i == RETRY_FAIL_AT:
            import time

            # Let the writer send (and Kafka acknowledge) the rows before this one first.
            time.sleep(5)
            raise RuntimeError("injected failure on the first attempt")
        # 1 KB values: the UDF's Python worker buffers its output in 64 KiB, and the rows before
        # the failure must flow on to the writer.
        return str(i).zfill(1000)

    bad_sql = f"id % 100 = {min(RETRY_BAD)}"
    df = spark.range(0, RETRY_ROWS, 1, 2).select(
        fail_first_attempt(sf.col("id")).alias("value"),
        sf.expr(f"CAST(IF({bad_sql}, 5, NULL) AS INT)").alias("partition"),
    )
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        "topic": topic,
        "onRecordError": "deadLetter",
        "deadLetterTopic": dlq,
        "commitLog": str(tmp_path / "log"),
        **_guarantee_options("exactly-once", prefix),
    }
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        df.write.format("pykafka").mode("append").options(**options).save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")

    per_task = RETRY_ROWS // 2
    # The failed attempt's dead letters reached the log (else the scenario proves nothing).
    everything = read_all(kafka_bootstrap, dlq)
    attempts = Counter((_headers(r)[TASK_PARTITION_H], _headers(r)[ATTEMPT_H]) for r in everything)
    assert attempts[("0", "0")] > 0, "task 0's first attempt wrote no dead letter before it failed"
    letters = read_all(
        kafka_bootstrap, dlq, expected=len(RETRY_BAD), isolation_level="read_committed"
    )
    _once([int(r.value or b"") for r in letters], RETRY_BAD)
    for r in letters:
        i, h = int(r.value or b""), _headers(r)
        assert h[REASON_H] == "partition_out_of_range"
        assert (h[TASK_PARTITION_H], h[ROW_H]) == (str(i // per_task), str(i % per_task))
        assert h[ATTEMPT_H] == ("1" if i < per_task else "0")  # the committed attempts only
    good = read_all(
        kafka_bootstrap,
        topic,
        expected=RETRY_ROWS - len(RETRY_BAD),
        isolation_level="read_committed",
    )
    _once([int(r.value or b"") for r in good], set(range(RETRY_ROWS)) - RETRY_BAD)
    [doc] = commit_docs(tmp_path / "log")
    assert {t["partition_id"]: t["attempt_number"] for t in doc["tasks"]} == {0: 1, 1: 0}
    # The failed attempt's bad rows are not counted again.
    assert doc["bad_records"]["bad_records"] == len(RETRY_BAD)
    assert_nothing_left_open(kafka_bootstrap, dlq, prefix)


@pytest.mark.slow
def test_a_streaming_querys_dead_letters_carry_their_batch_id(
    spark: Any, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    topic = topic_factory(partitions=2)
    dlq = topic_factory(partitions=1)
    prefix = _prefix()
    batches = {"a": range(0, 30), "b": range(30, 50)}  # one micro-batch (and task) per file
    bad = {i for i in range(50) if i % 10 == 3}
    stream = id_stream(spark, tmp_path / "in", batches).selectExpr(
        "CAST(id AS STRING) AS value",
        "CAST(IF(id % 10 = 3, 4, NULL) AS INT) AS partition",
    )
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        **KAFKA_OPTIONS,
        "topic": topic,
        "onRecordError": "deadLetter",
        "deadLetterTopic": dlq,
        **_guarantee_options("exactly-once", prefix),
    }
    write_available_now(stream, options, tmp_path / "ck")
    good = read_all(
        kafka_bootstrap, topic, expected=50 - len(bad), isolation_level="read_committed"
    )
    _once([int(r.value or b"") for r in good], set(range(50)) - bad)
    letters = read_all(kafka_bootstrap, dlq, expected=len(bad), isolation_level="read_committed")
    _once([int(r.value or b"") for r in letters], bad)
    for r in letters:
        i, h = int(r.value or b""), _headers(r)
        batch_id, start = (0, 0) if i < 30 else (1, 30)
        assert h[BATCH_H] == str(batch_id)
        assert h[REASON_H] == "partition_out_of_range"
        assert (h[TOPIC_H], h[PARTITION_H], h[ROW_H]) == (topic, "4", str(i - start))
    docs = commit_docs(tmp_path / "ck" / "pykafka-commits")
    assert [d["batch_id"] for d in docs] == [0, 1]
    assert [d["bad_records"]["bad_records"] for d in docs] == [3, 2]
    assert_nothing_left_open(kafka_bootstrap, dlq, prefix)
