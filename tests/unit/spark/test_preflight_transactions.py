"""Whether the cluster offers transactions, asked of the broker before an exactly-once write:
a broker whose ApiVersions lack the transaction APIs, or that answers FindCoordinator for a
transactional id as an unknown request, is refused with the reason; one that has them passes
with no extra request.

The real broker's side (a LocalKafka with Event Hubs' limits, which offers transactions) is
``tests/broker/test_presets_broker.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.driver import preflight
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import FindCoordinatorRequest, FindCoordinatorResponse
from tests.unit.spark.test_preflight import (
    CONFIG,
    DESCRIBE,
    READ,
    SERVERS,
    WRITE,
    Cluster,
    connect,
    ops,
)

INVALID_REQUEST = 42


@dataclass
class NoTxnCluster(Cluster):
    """A cluster whose brokers do not speak some APIs, or answer FindCoordinator oddly."""

    missing: set[ApiKey] = field(default_factory=set)
    coordinator_error: int = 0

    def api_version(self, node_id: int, api_key: Any) -> int | None:
        if api_key in self.missing:
            return None
        return super().api_version(node_id, api_key)

    def _answer(self, body: Any, version: int) -> Any:
        if isinstance(body, FindCoordinatorRequest) and self.coordinator_error:
            entry = FindCoordinatorResponse.Coordinator(
                key=body.coordinator_keys[0],
                node_id=-1,
                host="",
                port=-1,
                error_code=self.coordinator_error,
            )
            return FindCoordinatorResponse(coordinators=[entry])
        return super()._answer(body, version)


@pytest.fixture(autouse=True)
def _fresh_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "_PASSED", set())
    monkeypatch.setattr(preflight, "_TRANSACTIONAL_PASSED_MS", {})


def new_cluster(**kwargs: Any) -> NoTxnCluster:
    from kafka_sink.clock import ManualClock

    return NoTxnCluster(
        clock=ManualClock(), topics={"events": ops(READ, WRITE, DESCRIBE)}, **kwargs
    )


def check(cluster: NoTxnCluster, *, transactional: bool, preset: str | None = None) -> None:
    preflight.check_write(
        CONFIG,
        topic="events",
        timeout_ms=15_000,
        idempotent=False,
        streaming=False,
        exactly_once=transactional,
        preset=preset,
        client_factory=connect(cluster),
    )


def test_brokers_without_the_transaction_apis_refuse_exactly_once_with_the_reason() -> None:
    cluster = new_cluster(missing={ApiKey.END_TXN, ApiKey.ADD_PARTITIONS_TO_TXN})
    with pytest.raises(SinkOptionError) as refused:
        check(cluster, transactional=True, preset="event-hubs")
    message = str(refused.value)
    assert message.startswith(
        "deliveryGuarantee=exactly-once needs Kafka transactions, but the cluster at "
        f"kafka.bootstrap.servers={SERVERS} does not offer them: broker 0 answers ApiVersions "
        "without AddPartitionsToTxn, EndTxn"
    )
    assert "Event Hubs offers Kafka transactions only on some tiers" in message
    assert "deliveryGuarantee=at-least-once" in message
    assert cluster.closed


def test_without_a_preset_the_refusal_says_no_service_words() -> None:
    with pytest.raises(SinkOptionError) as refused:
        check(new_cluster(missing={ApiKey.INIT_PRODUCER_ID}), transactional=True)
    assert "without InitProducerId" in str(refused.value)
    assert "Event Hubs" not in str(refused.value)


def test_an_at_least_once_write_does_not_ask() -> None:
    check(new_cluster(missing={ApiKey.END_TXN}), transactional=False)


def test_brokers_with_the_transaction_apis_pass_without_another_request() -> None:
    cluster = new_cluster()
    check(cluster, transactional=True)
    assert not cluster.bodies(FindCoordinatorRequest)


def test_find_coordinator_answered_invalid_request_refuses_the_transactional_ids() -> None:
    cluster = new_cluster(coordinator_error=INVALID_REQUEST)
    with pytest.raises(SinkOptionError) as refused:
        preflight.check_transactional_ids(
            CONFIG,
            prefix="p",
            transactional_id="p-0-0",
            timeout_ms=15_000,
            streaming=False,
            client_factory=connect(cluster),
            clock=cluster.clock,
        )
    message = str(refused.value)
    assert "does not offer them: FindCoordinator for transactional id 'p-0-0' is answered" in (
        message
    )
    assert "InvalidRequestError" in message
