"""The driver's preflight against a scripted cluster on the manual clock: what it refuses, in
which words, and within which bound.

The fake network client answers Metadata, DescribeConfigs, InitProducerId, FindCoordinator and
EndTxn as a broker with an authorizer would; a poll with nothing to deliver advances the manual
clock by its timeout, so the preflight's deadline runs in simulated time.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from kafka_sink.admin.client import AdminClient, AdminConfig
from kafka_sink.clock import ManualClock
from kafka_sink.errors import KafkaConnectionError
from kafka_sink.net.network_client import ClientRequest
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark import datasource, logs
from kafka_sink.spark.datasource import PyKafkaDataSource
from kafka_sink.spark.driver import preflight
from kafka_sink.spark.options import SinkOptions
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka_sink.wire.messages.metadata import INT32_MIN
from tests.fakes.producer import FakeMetadata, FakeNetworkClient
from tests.fakes.spark import spark_checkpoint

SERVERS = "b0:9092,b1:9092"
CONFIG = {"bootstrap.servers": SERVERS}
SASL = {
    **CONFIG,
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "alice",
    "sasl.password": "alice-secret",
}
READ, WRITE, DESCRIBE, IDEMPOTENT_WRITE = 3, 4, 8, 12
TOPIC_AUTHORIZATION_FAILED = 29
UNKNOWN_TOPIC_OR_PARTITION = 3
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_PRODUCER_ID_MAPPING = 49


def ops(*codes: int) -> int:
    return sum(1 << c for c in codes)


class _Metadata(FakeMetadata):
    """The admin client's metadata: the broker list arrives only when ``reachable``."""

    def __init__(self, reachable: bool) -> None:
        super().__init__({})
        self.reachable = reachable

    def fetch(self) -> Any:
        if self.reachable:
            return self.cluster
        return type(self.cluster)(brokers=self.cluster.brokers, is_bootstrap=True)

    def last_error(self) -> KafkaConnectionError | None:
        if self.reachable:
            return None
        return KafkaConnectionError(
            "connection to node -1 (b0:9092) could not be established: ECONNREFUSED"
        )

    def close(self) -> None:
        pass


@dataclass
class Cluster(FakeNetworkClient):
    """What an authorizing broker answers the preflight's requests."""

    topics: dict[str, int] = field(default_factory=dict)  # topic -> its authorized operations
    hidden: set[str] = field(default_factory=set)  # topics answered TOPIC_AUTHORIZATION_FAILED
    cluster_ops: int = ops(IDEMPOTENT_WRITE)
    auto_create: str | None = "false"
    producer_id_refused: bool = False
    transactional_ops: set[int] = field(default_factory=lambda: {WRITE, DESCRIBE})
    metadata_max: int | None = 12
    missing_apis: set[ApiKey] = field(default_factory=set)  # what the brokers do not speak

    def api_version(self, node_id: int, api_key: Any) -> int | None:
        if api_key in self.missing_apis:
            return None
        return {ApiKey.METADATA: self.metadata_max}.get(api_key, 4)

    def send(self, request: ClientRequest, now_ms: int) -> None:
        request.api_version = request.version or self.api_version(0, request.api_key) or 0
        super().send(request, now_ms)
        sent = self.sent[-1]
        self.respond(sent, self._answer(sent.body, request.api_version))

    def poll(self, timeout_ms: int, now_ms: int) -> Any:
        if not self._due:
            self.clock.advance(max(timeout_ms, 1))
        return super().poll(timeout_ms, now_ms)

    def least_loaded_node(self, now_ms: int) -> int | None:
        return min((n for n in (0, 1) if n not in self.not_ready), default=0)

    def bodies(self, kind: type) -> list[Any]:
        return [s.body for s in self.sent if isinstance(s.body, kind)]

    def _answer(self, body: Any, version: int) -> Any:
        if isinstance(body, MetadataRequest):
            assert body.allow_auto_topic_creation is False
            topics = []
            for wanted in body.topics or []:
                name = wanted.name
                code = 0
                if name in self.hidden:
                    code = TOPIC_AUTHORIZATION_FAILED
                elif name not in self.topics:
                    code = UNKNOWN_TOPIC_OR_PARTITION
                topics.append(
                    MetadataResponse.MetadataResponseTopic(
                        error_code=code,
                        name=name,
                        topic_id=uuid.UUID(int=0),
                        is_internal=False,
                        partitions=[],
                        topic_authorized_operations=self.topics.get(name, INT32_MIN),
                    )
                )
            cluster_ops = self.cluster_ops if 8 <= version <= 10 else INT32_MIN
            return MetadataResponse(0, [], "c", 0, topics, cluster_ops)
        if isinstance(body, DescribeConfigsRequest):
            values = {"num.partitions": "3", "default.replication.factor": "2"}
            if self.auto_create is not None:
                values["auto.create.topics.enable"] = self.auto_create
            configs = [
                DescribeConfigsResponse.DescribeConfigsResourceResult(
                    name=k, value=v, read_only=False, is_sensitive=False, synonyms=[], config_type=0
                )
                for k, v in values.items()
            ]
            result = DescribeConfigsResponse.DescribeConfigsResult(0, None, 4, "0", configs)
            return DescribeConfigsResponse(0, [result])
        if isinstance(body, InitProducerIdRequest):
            assert body.transactional_id is None
            code = CLUSTER_AUTHORIZATION_FAILED if self.producer_id_refused else 0
            return InitProducerIdResponse(0, code, 7, 0)
        if isinstance(body, FindCoordinatorRequest):
            code = (
                0 if DESCRIBE in self.transactional_ops else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            )
            entry = FindCoordinatorResponse.Coordinator(
                key=body.coordinator_keys[0], node_id=1, host="b1", port=9092, error_code=code
            )
            return FindCoordinatorResponse(coordinators=[entry])
        if isinstance(body, EndTxnRequest):
            assert (body.producer_id, body.committed) == (-1, False)
            allowed = WRITE in self.transactional_ops
            return EndTxnResponse(
                0, INVALID_PRODUCER_ID_MAPPING if allowed else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            )
        raise AssertionError(f"unexpected request {body!r}")


@pytest.fixture(autouse=True)
def _fresh_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "_PASSED", set())
    monkeypatch.setattr(preflight, "_TRANSACTIONAL_PASSED_MS", {})
    monkeypatch.setattr(logs, "_WARNED", set())


def connect(cluster: Cluster, *, reachable: bool = True) -> preflight.ClientFactory:
    def factory(config: Mapping[str, object]) -> tuple[AdminClient, AdminConfig]:
        cfg = AdminConfig.from_mapping(config)
        metadata = _Metadata(reachable)
        client = AdminClient(
            cluster,
            metadata,
            cluster.clock,
            request_timeout_ms=cfg.request_timeout_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        )
        return client, cfg

    return factory


def check(
    cluster: Cluster,
    *,
    config: Mapping[str, str] = CONFIG,
    topic: str | None = "events",
    idempotent: bool = True,
    streaming: bool = False,
    reachable: bool = True,
    timeout_ms: int = 15_000,
    exactly_once: bool = False,
    dead_letter_topic: str | None = None,
) -> None:
    preflight.check_write(
        config,
        topic=topic,
        timeout_ms=timeout_ms,
        idempotent=idempotent,
        streaming=streaming,
        exactly_once=exactly_once,
        dead_letter_topic=dead_letter_topic,
        client_factory=connect(cluster, reachable=reachable),
    )


def new_cluster(**kwargs: Any) -> Cluster:
    return Cluster(clock=ManualClock(), **kwargs)


def test_no_broker_answering_fails_within_the_bound_naming_the_servers_and_the_network_error() -> (
    None
):
    cluster = new_cluster()
    with pytest.raises(SinkOptionError) as info:
        check(cluster, reachable=False, timeout_ms=15_000)
    message = str(info.value)
    assert f"no broker answered at kafka.bootstrap.servers={SERVERS} within 15000 ms" in message
    assert "ECONNREFUSED" in message and "preflightTimeoutMs" in message
    # The bound holds in simulated time: the old path waited 64 s.
    assert 15_000 <= cluster.clock.now_ms() <= 15_000 + 200
    assert cluster.closed


def test_a_missing_topic_without_auto_creation_is_refused_naming_the_setting() -> None:
    cluster = new_cluster(auto_create="false")
    with pytest.raises(SinkOptionError) as info:
        check(cluster, topic="evnets")
    message = str(info.value)
    assert "topic 'evnets' (option 'topic') does not exist" in message
    assert "auto.create.topics.enable=false" in message
    assert "kafka-topics --bootstrap-server b0:9092,b1:9092 --create --topic evnets" in message


def test_auto_creation_that_cannot_be_read_is_said_to_be_unknown() -> None:
    with pytest.raises(SinkOptionError, match=r"auto\.create\.topics\.enable=unknown"):
        check(new_cluster(auto_create=None), topic="evnets")


def test_a_missing_topic_the_brokers_create_is_logged_once_with_their_defaults(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kafka_sink.spark")
    for _ in range(2):
        check(new_cluster(auto_create="true"), topic="fresh")
    lines = [r.getMessage() for r in caplog.records if "does not exist" in r.getMessage()]
    assert lines == [
        "pykafka: topic 'fresh' does not exist; the brokers create it on the first write with "
        "their defaults (num.partitions=3, default.replication.factor=2)"
    ]


def test_a_topic_without_write_is_refused_naming_the_acl_and_the_command() -> None:
    cluster = new_cluster(topics={"events": ops(READ, DESCRIBE)})
    with pytest.raises(SinkOptionError) as info:
        check(cluster, config=SASL)
    message = str(info.value)
    assert "User:alice may not write to topic 'events'" in message
    assert (
        "kafka-acls --bootstrap-server b0:9092,b1:9092 --command-config <admin.properties> "
        "--add --allow-principal User:alice --operation Write --topic events"
    ) in message
    assert "alice-secret" not in message


def test_exactly_once_without_read_on_the_topic_is_refused_naming_the_acl() -> None:
    cluster = new_cluster(topics={"events": ops(WRITE, DESCRIBE)})
    with pytest.raises(SinkOptionError) as info:
        check(cluster, config=SASL, idempotent=False, exactly_once=True)
    message = str(info.value)
    assert "deliveryGuarantee=exactly-once" in message
    assert "User:alice may not read topic 'events'" in message and "READ ACL" in message
    assert "COMMIT or ABORT marker" in message
    assert (
        "kafka-acls --bootstrap-server b0:9092,b1:9092 --command-config <admin.properties> "
        "--add --allow-principal User:alice --operation Read --topic events"
    ) in message
    assert "alice-secret" not in message


def test_read_on_the_topic_is_asked_of_exactly_once_only() -> None:
    written_only = {"events": ops(WRITE, DESCRIBE)}
    check(new_cluster(topics=written_only))  # at-least-once: WRITE is enough
    check(new_cluster(topics={"events": ops(READ, WRITE)}), idempotent=False, exactly_once=True)
    # Brokers that do not say (authorized operations not asked for): the write goes on.
    check(new_cluster(topics={"events": INT32_MIN}), idempotent=False, exactly_once=True)


def test_a_hidden_topic_is_refused_as_missing_write_with_a_placeholder_principal() -> None:
    cluster = new_cluster(hidden={"events"})
    with pytest.raises(SinkOptionError) as info:
        check(cluster)
    message = str(info.value)
    assert "TOPIC_AUTHORIZATION_FAILED" in message
    assert "kafka-acls --bootstrap-server b0:9092,b1:9092 --add --allow-principal " in message
    assert "User:<principal> --operation Write --topic events" in message


def test_the_metadata_is_asked_at_a_version_carrying_the_clusters_operations() -> None:
    cluster = new_cluster(topics={"events": ops(WRITE, DESCRIBE)})
    check(cluster)
    (request,) = [s for s in cluster.sent if isinstance(s.body, MetadataRequest)]
    assert request.request.api_version == 10
    assert request.body.include_topic_authorized_operations
    assert request.body.include_cluster_authorized_operations
    assert not cluster.bodies(InitProducerIdRequest)  # IDEMPOTENT_WRITE granted: no probe


def test_idempotence_refused_by_the_broker_names_idempotent_write() -> None:
    cluster = new_cluster(
        topics={"events": ops(WRITE, DESCRIBE)}, cluster_ops=0, producer_id_refused=True
    )
    with pytest.raises(SinkOptionError) as info:
        check(cluster, config=SASL)
    message = str(info.value)
    assert "CLUSTER_AUTHORIZATION_FAILED" in message
    assert "--allow-principal User:alice --operation IdempotentWrite --cluster" in message
    assert "kafka.enable.idempotence=false" in message


def test_idempotence_the_broker_allows_without_idempotent_write_passes() -> None:
    # Kafka 3.0+: WRITE on a topic is enough; the broker's own answer decides.
    cluster = new_cluster(topics={"events": ops(WRITE, DESCRIBE)}, cluster_ops=0)
    check(cluster)
    assert len(cluster.bodies(InitProducerIdRequest)) == 1


def test_without_idempotence_no_producer_id_is_asked() -> None:
    cluster = new_cluster(topics={"events": ops(WRITE)}, cluster_ops=0, producer_id_refused=True)
    check(cluster, idempotent=False)
    assert not cluster.bodies(InitProducerIdRequest)


def test_a_topic_column_write_checks_the_brokers_and_idempotence_only() -> None:
    cluster = new_cluster(cluster_ops=0, producer_id_refused=True)
    with pytest.raises(SinkOptionError, match="IdempotentWrite"):
        check(cluster, topic=None)
    (request,) = cluster.bodies(MetadataRequest)
    assert request.topics == []


def test_a_check_the_brokers_cannot_answer_warns_and_refuses_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = new_cluster(metadata_max=None)  # no Metadata version in common
    check(cluster)
    (line,) = [r for r in caplog.records if "stopped early" in r.getMessage()]
    assert line.levelno == logging.WARNING
    assert "METADATA" in line.getMessage()


def test_a_broker_that_cannot_be_reached_is_passed_over_for_one_that_can() -> None:
    cluster = new_cluster(topics={"events": ops(WRITE)})
    cluster.not_ready = {0}  # one broker of two down: the cluster is still writable
    check(cluster)
    assert {s.request.node_id for s in cluster.sent} == {1}


def test_brokers_answering_only_at_their_bootstrap_address_warn_within_the_bound(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = new_cluster(topics={"events": ops(WRITE)})
    cluster.not_ready = {0, 1}  # advertised addresses nobody can reach
    check(cluster, timeout_ms=5_000)
    (line,) = [r for r in caplog.records if "stopped early" in r.getMessage()]
    assert "did not finish within 5000 ms" in line.getMessage()
    assert cluster.clock.now_ms() <= 5_000 + 200


def test_a_streaming_query_is_checked_once_per_configuration() -> None:
    cluster = new_cluster(topics={"events": ops(WRITE)})
    for _ in range(3):
        check(cluster, streaming=True)
    assert len(cluster.bodies(MetadataRequest)) == 1
    for _ in range(2):
        check(cluster, streaming=False)  # a batch job: every writer() call
    assert len(cluster.bodies(MetadataRequest)) == 3


# -- the dead-letter topic (onRecordError=deadLetter): checked as the topic option's is ---------


def test_the_dead_letter_topic_is_asked_with_the_topic_in_one_metadata_request() -> None:
    cluster = new_cluster(topics={"events": ops(WRITE), "events-dlq": ops(WRITE)})
    check(cluster, dead_letter_topic="events-dlq")
    (request,) = cluster.bodies(MetadataRequest)
    assert [t.name for t in request.topics] == ["events", "events-dlq"]


def test_a_missing_dead_letter_topic_is_refused_naming_its_option() -> None:
    cluster = new_cluster(topics={"events": ops(WRITE)}, auto_create="false")
    with pytest.raises(SinkOptionError) as info:
        check(cluster, dead_letter_topic="events-dql")
    message = str(info.value)
    assert "topic 'events-dql' (option 'deadLetterTopic') does not exist" in message
    assert "auto.create.topics.enable=false" in message
    assert "kafka-topics --bootstrap-server b0:9092,b1:9092 --create --topic events-dql" in message


def test_a_missing_dead_letter_topic_the_brokers_create_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kafka_sink.spark")
    check(new_cluster(topics={"events": ops(WRITE)}, auto_create="true"), dead_letter_topic="dlq")
    lines = [r.getMessage() for r in caplog.records if "does not exist" in r.getMessage()]
    assert lines == [
        "pykafka: topic 'dlq' does not exist; the brokers create it on the first write with "
        "their defaults (num.partitions=3, default.replication.factor=2)"
    ]


@pytest.mark.parametrize("hidden", [False, True])
def test_a_dead_letter_topic_without_write_is_refused_naming_its_option_and_the_acl(
    hidden: bool,
) -> None:
    topics = {"events": ops(WRITE, READ)}
    if not hidden:
        topics["events-dlq"] = ops(READ, DESCRIBE)
    cluster = new_cluster(topics=topics, hidden={"events-dlq"} if hidden else set())
    with pytest.raises(SinkOptionError) as info:
        check(cluster, config=SASL, dead_letter_topic="events-dlq")
    message = str(info.value)
    assert (
        "User:alice may not write to topic 'events-dlq' (option 'deadLetterTopic'): it lacks "
        "the WRITE ACL"
    ) in message
    assert (
        "kafka-acls --bootstrap-server b0:9092,b1:9092 --command-config <admin.properties> "
        "--add --allow-principal User:alice --operation Write --topic events-dlq"
    ) in message
    assert "alice-secret" not in message


def test_exactly_once_without_read_on_the_dead_letter_topic_is_refused_naming_its_option() -> None:
    cluster = new_cluster(topics={"events": ops(READ, WRITE), "events-dlq": ops(WRITE)})
    with pytest.raises(SinkOptionError) as info:
        check(
            cluster,
            config=SASL,
            idempotent=False,
            exactly_once=True,
            dead_letter_topic="events-dlq",
        )
    message = str(info.value)
    assert "may not read topic 'events-dlq' (option 'deadLetterTopic')" in message
    assert "--allow-principal User:alice --operation Read --topic events-dlq" in message
    # At-least-once writes dead letters without reading them back: WRITE is enough.
    check(
        new_cluster(topics={"events": ops(WRITE), "events-dlq": ops(WRITE)}),
        dead_letter_topic="events-dlq",
    )


def test_a_topic_column_write_checks_its_dead_letter_topic_alone() -> None:
    cluster = new_cluster(topics={})
    with pytest.raises(SinkOptionError, match=r"topic 'dlq' \(option 'deadLetterTopic'\)"):
        check(cluster, topic=None, dead_letter_topic="dlq")
    (request,) = cluster.bodies(MetadataRequest)
    assert [t.name for t in request.topics] == ["dlq"]


def test_a_streaming_query_with_another_dead_letter_topic_is_checked_again() -> None:
    cluster = new_cluster(topics={"events": ops(WRITE), "a": ops(WRITE), "b": ops(WRITE)})
    for dead_letter_topic in ("a", "a", "b", None):
        check(cluster, streaming=True, dead_letter_topic=dead_letter_topic)
    assert len(cluster.bodies(MetadataRequest)) == 3


def test_the_data_source_hands_the_dead_letter_topic_to_the_preflight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[dict[str, Any]] = []

    class StopError(Exception):
        pass

    def recording(config: Mapping[str, str], **kwargs: Any) -> None:
        asked.append(kwargs)
        raise StopError

    monkeypatch.setattr(datasource, "check_write", recording)
    schema = StructType([StructField("value", BinaryType())])
    base = {"kafka.bootstrap.servers": "h:1", "topic": "events"}
    dead_letter = {"onrecorderror": "deadLetter", "deadlettertopic": "events-dlq"}
    for options in (base, {**base, **dead_letter}):
        with pytest.raises(StopError):
            PyKafkaDataSource(options).writer(schema, False)
    assert [a["dead_letter_topic"] for a in asked] == [None, "events-dlq"]


def check_ids(
    cluster: Cluster,
    config: Mapping[str, str] = SASL,
    *,
    prefix: str = "etl",
    generated_prefix: bool = False,
) -> None:
    preflight.check_transactional_ids(
        config,
        prefix=prefix,
        transactional_id=f"{prefix}-0-0",
        timeout_ms=15_000,
        streaming=False,
        generated_prefix=generated_prefix,
        client_factory=connect(cluster),
        clock=cluster.clock,
    )


def test_a_batch_jobs_passed_transactional_check_stands_for_a_bounded_age() -> None:
    cluster = new_cluster()
    check_ids(cluster, prefix="pykafka-job1", generated_prefix=True)
    cluster.clock.advance(preflight.TRANSACTIONAL_CHECK_MAX_AGE_MS - 1_000)
    # The next jobs of the process: a new generated prefix, and the same explicit one again.
    check_ids(cluster, prefix="pykafka-job2", generated_prefix=True)
    check_ids(cluster, prefix="etl")
    check_ids(cluster, prefix="etl")
    assert [p.transactional_id for p in cluster.bodies(EndTxnRequest)] == [
        "pykafka-job1-0-0",
        "etl-0-0",
    ]
    cluster.clock.advance(2_000)  # the first pass has aged out; the explicit prefix's has not
    check_ids(cluster, prefix="pykafka-job3", generated_prefix=True)
    check_ids(cluster, prefix="etl")
    check_ids(cluster, prefix="other")  # another explicit prefix is its own check
    assert [p.transactional_id for p in cluster.bodies(EndTxnRequest)][2:] == [
        "pykafka-job3-0-0",
        "other-0-0",
    ]


def test_a_refused_transactional_check_is_asked_again() -> None:
    cluster = new_cluster(transactional_ops=set())
    for _ in range(2):
        with pytest.raises(SinkOptionError):
            check_ids(cluster, prefix="pykafka-job", generated_prefix=True)
    assert len(cluster.bodies(FindCoordinatorRequest)) == 2


@pytest.mark.parametrize("granted", [set(), {DESCRIBE}])
def test_transactional_ids_without_write_or_describe_are_refused(granted: set[int]) -> None:
    cluster = new_cluster(transactional_ops=granted)
    with pytest.raises(SinkOptionError) as info:
        check_ids(cluster)
    message = str(info.value)
    assert "User:alice may not use the transactional ids 'etl-*'" in message
    assert (
        "--allow-principal User:alice --operation Write --operation Describe "
        "--transactional-id etl --resource-pattern-type prefixed"
    ) in message


def test_transactional_ids_granted_pass_without_touching_a_transaction() -> None:
    cluster = new_cluster()
    check_ids(cluster)
    (probe,) = cluster.bodies(EndTxnRequest)
    assert (probe.transactional_id, probe.producer_id, probe.committed) == ("etl-0-0", -1, False)


@pytest.mark.parametrize(
    ("missing", "name"),
    [
        (ApiKey.DESCRIBE_TRANSACTIONS, "DescribeTransactions"),
        (ApiKey.LIST_TRANSACTIONS, "ListTransactions"),
    ],
)
def test_exactly_once_on_brokers_before_3_0_is_refused_naming_the_api(
    missing: ApiKey, name: str
) -> None:
    cluster = new_cluster(missing_apis={missing})
    with pytest.raises(SinkOptionError) as info:
        check_ids(cluster)
    message = str(info.value)
    assert f"needs the brokers' {name} API (Kafka 3.0 or later" in message
    assert "broker 1, the transaction coordinator of 'etl-0-0'" in message
    assert "deliveryGuarantee=at-least-once" in message
    assert cluster.bodies(EndTxnRequest) == []  # refused before the probe


# -- the data source: the preflight runs while the write is planned ------------------------------


def _nothing_listening() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"  # closed again: connections are refused


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
@pytest.mark.parametrize("streaming", [False, True])
def test_the_data_source_refuses_unreachable_brokers_before_any_task(
    live_preflight: None, tmp_path: Any, guarantee: str, streaming: bool
) -> None:
    servers = _nothing_listening()
    checkpoint = spark_checkpoint(tmp_path / "checkpoint")
    source = PyKafkaDataSource(
        {
            "kafka.bootstrap.servers": servers,
            "topic": "events",
            "deliveryGuarantee": guarantee,
            "preflightTimeoutMs": "1500",
            "checkpointLocation": str(checkpoint),
        }
    )
    schema = StructType([StructField("value", BinaryType())])
    started = time.monotonic()
    with pytest.raises(SinkOptionError) as info:
        if streaming:
            source.streamWriter(schema, False)
        else:
            source.writer(schema, False)
    elapsed_s = time.monotonic() - started
    message = str(info.value)
    assert f"no broker answered at kafka.bootstrap.servers={servers} within 1500 ms" in message
    assert "ECONNREFUSED" in message
    # Bounded by the option, not by request.timeout.ms or max.block.ms (64 s before).
    assert elapsed_s < 30, elapsed_s


@pytest.mark.parametrize("value", ["0", "-1", "15s", "", "99999999999"])
def test_a_bad_preflight_timeout_is_refused_with_the_fix(value: str) -> None:
    with pytest.raises(SinkOptionError, match=r"option 'preflightTimeoutMs' must be a whole"):
        SinkOptions.from_options({"kafka.bootstrap.servers": "h:1", "preflightTimeoutMs": value})


def test_the_preflight_timeout_defaults_to_fifteen_seconds_and_is_parsed() -> None:
    base = {"kafka.bootstrap.servers": "h:1"}
    assert SinkOptions.from_options(base).preflight_timeout_ms == 15_000
    given = SinkOptions.from_options({**base, "PreflightTimeoutMs": " 2500 "})
    assert given.preflight_timeout_ms == 2500
    assert "preflightTimeoutMs=2500" in repr(given)
