"""TransactionAdmin.describe: many ids described in one round (scripted cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_sink.admin.transactions import TransactionAdmin
from kafka_sink.errors import KafkaTimeoutError
from kafka_sink.wire.messages import DescribeTransactionsRequest, FindCoordinatorRequest
from tests.unit.admin.test_transactions import (
    CONFIG,
    DROP,
    SILENT,
    ScriptedCluster,
    install_scripted_cluster,
)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> ScriptedCluster:
    return install_scripted_cluster(monkeypatch)


def _owned(cluster: ScriptedCluster) -> None:
    cluster.coordinator_of = {"p-0-0": 0, "p-0-1": 1, "p-0-2": 1, "p-0-3": 0}
    cluster.owned = {
        0: [("p-0-0", 10, 4, "CompleteCommit")],
        1: [("p-0-1", 11, 2, "Ongoing"), ("p-0-2", 12, 0, "Empty")],
    }


def test_one_lookup_and_one_describe_per_coordinator_sent_at_once(
    cluster: ScriptedCluster,
) -> None:
    _owned(cluster)
    with TransactionAdmin(CONFIG) as admin:
        found = admin.describe(["p-0-0", "p-0-1", "p-0-2", "p-0-3"])
    assert {
        t: (d.state, d.producer_id, d.producer_epoch) if d else None for t, d in found.items()
    } == {
        "p-0-0": ("CompleteCommit", 10, 4),
        "p-0-1": ("Ongoing", 11, 2),
        "p-0-2": ("Empty", 12, 0),
        "p-0-3": None,  # the coordinator does not know it
    }
    [lookup] = cluster.requests(FindCoordinatorRequest)
    assert sorted(lookup.body.coordinator_keys) == ["p-0-0", "p-0-1", "p-0-2", "p-0-3"]
    described = cluster.requests(DescribeTransactionsRequest)
    assert sorted((s.request.node_id, tuple(s.body.transactional_ids)) for s in described) == [
        (0, ("p-0-0", "p-0-3")),
        (1, ("p-0-1", "p-0-2")),
    ]


def test_an_answer_lost_on_the_way_is_asked_again_per_id(cluster: ScriptedCluster) -> None:
    _owned(cluster)
    original = cluster._answer
    dropped: list[int] = []

    def answer(sent: Any) -> Any:
        describe = isinstance(sent.body, DescribeTransactionsRequest)
        if describe and sent.request.node_id == 1 and not dropped:
            dropped.append(1)
            return DROP
        return original(sent)

    cluster._answer = answer  # type: ignore[method-assign]
    with TransactionAdmin(CONFIG) as admin:
        found = admin.describe(["p-0-1", "p-0-2"])
    assert {t: d.state if d else None for t, d in found.items()} == {
        "p-0-1": "Ongoing",
        "p-0-2": "Empty",
    }
    # Both ids the lost answer carried were asked again (the first request had them both).
    asked = [
        sorted(s.body.transactional_ids) for s in cluster.requests(DescribeTransactionsRequest)
    ]
    assert asked[0] == ["p-0-1", "p-0-2"]
    assert sorted(t for ids in asked[1:] for t in ids) == ["p-0-1", "p-0-2"]


def test_a_coordinator_that_never_answers_times_out_naming_the_wait(
    cluster: ScriptedCluster,
) -> None:
    _owned(cluster)
    original = cluster._answer
    cluster._answer = lambda sent: (  # type: ignore[method-assign]
        SILENT if isinstance(sent.body, DescribeTransactionsRequest) else original(sent)
    )
    with TransactionAdmin(CONFIG, timeout=2.0) as admin, pytest.raises(KafkaTimeoutError) as caught:
        admin.describe(["p-0-0", "p-0-1"])
    assert "descri" in str(caught.value)


def test_bad_arguments_are_refused(cluster: ScriptedCluster) -> None:
    with TransactionAdmin(CONFIG) as admin:
        with pytest.raises(ValueError, match="transactional ids"):
            admin.describe([""])
        assert admin.describe([]) == {}
    assert cluster.sent == []
