"""describe_producers: each partition leader's producers and log end offset (scripted cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_sink.admin.producers import ActiveProducer, PartitionProducers
from kafka_sink.admin.transactions import TransactionAdmin
from kafka_sink.errors import KafkaTimeoutError, TopicAuthorizationFailedError
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka_sink.wire.messages.list_offsets import LATEST_TIMESTAMP, READ_UNCOMMITTED
from tests.unit.admin.test_transactions import (
    CONFIG,
    SILENT,
    ScriptedCluster,
    _Metadata,
    install_scripted_cluster,
)

NOT_LEADER_OR_FOLLOWER = 6
TOPIC_AUTHORIZATION_FAILED = 29

# (topic, partition) -> (log end offset, [(pid, epoch, last sequence, txn start offset)])
STATE = {
    ("t", 0): (12, [(7, 3, 4, 7), (8, 0, 9, -1)]),
    ("t", 1): (5, []),
}


class LeaderCluster(ScriptedCluster):
    """Partition t-0 led by node 0, t-1 by node 1; leaders answer from :data:`STATE`."""

    errors: list[int]  # per DescribeProducers partition answer, in order, then none

    def api_version(self, node_id: int, api_key: ApiKey) -> int | None:
        extra = {ApiKey.DESCRIBE_PRODUCERS: 0, ApiKey.LIST_OFFSETS: 9}
        return extra.get(api_key, super().api_version(node_id, api_key))

    def _answer(self, sent: Any) -> Any:
        body = sent.body
        if isinstance(body, DescribeProducersRequest):
            return DescribeProducersResponse(
                topics=[
                    DescribeProducersResponse.TopicResponse(
                        t.name,
                        [self._producers(t.name, p) for p in t.partition_indexes],
                    )
                    for t in body.topics
                ]
            )
        if isinstance(body, ListOffsetsRequest):
            assert body.isolation_level == READ_UNCOMMITTED
            return ListOffsetsResponse(
                topics=[
                    ListOffsetsResponse.ListOffsetsTopicResponse(
                        t.name,
                        [
                            ListOffsetsResponse.ListOffsetsPartitionResponse(
                                p.partition_index, 0, -1, STATE[(t.name, p.partition_index)][0]
                            )
                            for p in t.partitions
                            if p.timestamp == LATEST_TIMESTAMP
                        ],
                    )
                    for t in body.topics
                ]
            )
        return super()._answer(sent)

    def _producers(self, topic: str, partition: int) -> Any:
        code = self.errors.pop(0) if self.errors else 0
        states = [
            DescribeProducersResponse.ProducerState(pid, epoch, seq, -1, 0, start)
            for pid, epoch, seq, start in STATE[(topic, partition)][1]
        ]
        return DescribeProducersResponse.PartitionResponse(
            partition, code, None, states if code == 0 else []
        )


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> LeaderCluster:
    scripted = install_scripted_cluster(monkeypatch)
    scripted.__class__ = LeaderCluster  # the installed cluster, answering leaders' requests too
    assert isinstance(scripted, LeaderCluster)
    scripted.errors = []
    scripted.metadata = _Metadata({"t": [0, 1]}, nodes=(0, 1))
    return scripted


def test_each_leader_is_asked_for_producers_then_its_log_end(cluster: LeaderCluster) -> None:
    with TransactionAdmin(CONFIG) as admin:
        found = admin.producers([("t", 1), ("t", 0)])
    assert found == {
        ("t", 0): PartitionProducers(
            "t", 0, 12, (ActiveProducer(7, 3, 4, 7), ActiveProducer(8, 0, 9, -1))
        ),
        ("t", 1): PartitionProducers("t", 1, 5, ()),
    }
    assert found[("t", 0)].producer(7) == ActiveProducer(7, 3, 4, 7)
    assert found[("t", 0)].producer(9) is None
    assert ActiveProducer(7, 3, 4, 7).open_records() == 5
    # Per leader: its partitions only, DescribeProducers first (the end is read after it).
    asked = [
        (s.request.node_id, type(s.body).__name__)
        for s in cluster.sent
        if isinstance(s.body, (DescribeProducersRequest, ListOffsetsRequest))
    ]
    assert asked == [
        (0, "DescribeProducersRequest"),
        (0, "ListOffsetsRequest"),
        (1, "DescribeProducersRequest"),
        (1, "ListOffsetsRequest"),
    ]


def test_a_moved_leader_is_asked_again_after_a_metadata_refresh(cluster: LeaderCluster) -> None:
    cluster.errors = [NOT_LEADER_OR_FOLLOWER]  # t-0's first answer
    with TransactionAdmin(CONFIG) as admin:
        found = admin.producers([("t", 0), ("t", 1)])
    assert found[("t", 0)].log_end_offset == 12
    assert cluster.metadata.update_requests >= 1
    again = [
        [(t.name, t.partition_indexes) for t in s.body.topics]
        for s in cluster.requests(DescribeProducersRequest)
    ]
    assert again[-1] == [("t", [0])]  # only the partition that was not answered


def test_an_authorization_failure_raises_at_once(cluster: LeaderCluster) -> None:
    cluster.errors = [TOPIC_AUTHORIZATION_FAILED]
    with TransactionAdmin(CONFIG) as admin, pytest.raises(TopicAuthorizationFailedError):
        admin.producers([("t", 0)])
    assert len(cluster.requests(DescribeProducersRequest)) == 1


def test_a_leader_that_never_answers_times_out_within_the_bound(cluster: LeaderCluster) -> None:
    original = cluster._answer
    cluster._answer = lambda sent: (  # type: ignore[method-assign]
        SILENT if isinstance(sent.body, DescribeProducersRequest) else original(sent)
    )
    started = cluster.clock.now_ms()
    with TransactionAdmin(CONFIG) as admin, pytest.raises(KafkaTimeoutError) as caught:
        admin.producers([("t", 0)], timeout=3.0)
    assert "describe_producers(1 partition(s)) did not finish within 3000 ms" in str(caught.value)
    assert cluster.clock.now_ms() - started <= 3_000 + 200


def test_a_partition_without_a_leader_times_out_naming_the_wait(cluster: LeaderCluster) -> None:
    cluster.metadata = _Metadata({"t": [0, -1]}, nodes=(0, 1))
    with TransactionAdmin(CONFIG) as admin, pytest.raises(KafkaTimeoutError) as caught:
        admin.producers([("t", 1)], timeout=1.0)
    assert "the leaders of 1 partition(s)" in str(caught.value)


def test_a_negative_timeout_is_refused(cluster: LeaderCluster) -> None:
    with TransactionAdmin(CONFIG) as admin, pytest.raises(ValueError, match="timeout"):
        admin.producers([("t", 0)], timeout=-1)
