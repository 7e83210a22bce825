"""TopicLog reads across a leader change, against a scripted three-replica partition.

The fake cluster keeps one log and one high watermark per replica of partition 0, a leader and a
leader epoch; the client's metadata is a snapshot of them taken when it refreshes. A poll with
nothing to deliver advances the manual clock by its timeout, so backoff and deadlines run in
simulated time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pytest

from kafka_sink.admin.client import AdminClient
from kafka_sink.admin.topic_log import TopicLog
from kafka_sink.clock import ManualClock
from kafka_sink.errors import KafkaTimeoutError
from kafka_sink.net.metadata import Cluster, Node, PartitionInfo
from kafka_sink.net.network_client import ClientRequest, ClientResponse
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.records.batch import RecordBatchBuilder
from kafka_sink.sink_errors import IntentStoreError
from kafka_sink.spark.driver.eos import kafka_intents
from kafka_sink.spark.driver.eos.intents import INTENT, BatchRecord, record_to_json
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ProduceRequest,
)
from tests.fakes.producer import FakeNetworkClient, Sent

TOPIC = "intents"
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


@dataclass
class Replica:
    log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    high_watermark: int = 0


class ClusterMetadata:
    """The client's view: the cluster's leadership as of its last refresh."""

    def __init__(self, cluster: LeaderChangeCluster) -> None:
        self.cluster = cluster
        self.version = 0
        self.pending = False
        self.snapshot = self._take()

    def _take(self) -> Cluster:
        truth = self.cluster
        brokers = {n: Node(n, f"b{n}", 9092) for n in truth.replicas}
        info = PartitionInfo(TOPIC, 0, truth.leader, truth.epoch, replicas=tuple(truth.replicas))
        return Cluster(
            brokers=MappingProxyType(brokers), partitions=MappingProxyType({TOPIC: (info,)})
        )

    def refresh(self) -> None:
        if self.pending:
            self.pending = False
            self.snapshot = self._take()
            self.version += 1

    def fetch(self) -> Cluster:
        return self.snapshot

    def add_topic(self, topic: str, now_ms: int | None = None) -> bool:
        return True

    def partitions_for(self, topic: str) -> list[PartitionInfo] | None:
        parts = self.snapshot.partitions.get(topic)
        return None if parts is None else list(parts)

    def leader_for(self, topic: str, partition: int) -> Node | None:
        return self.snapshot.leader_for(topic, partition)

    def topic_error(self, topic: str) -> None:
        return None

    def request_update(self) -> int:
        self.pending = True
        return self.version

    def last_error(self) -> None:
        return None

    def close(self) -> None:
        pass


@dataclass
class LeaderChangeCluster(FakeNetworkClient):
    """Partition 0 of ``intents`` on replicas 0, 1 and 2; node 0 leads at epoch 1."""

    replicas: dict[int, Replica] = field(default_factory=lambda: {n: Replica() for n in range(3)})
    leader: int = 0
    epoch: int = 1
    fetch_version: int = 12
    # Run after each answer to a request of that type (the test's moment to move the leader).
    after: dict[type, Callable[[], None]] = field(default_factory=dict)
    # The moment the leader's high watermark reaches its log end (None: never).
    catch_up_at_ms: int | None = None
    metadata: ClusterMetadata | None = None

    def api_version(self, node_id: int, api_key: Any) -> int | None:
        return {ApiKey.FETCH: self.fetch_version, ApiKey.LIST_OFFSETS: 9, ApiKey.PRODUCE: 11}.get(
            api_key
        )

    def send(self, request: ClientRequest, now_ms: int) -> None:
        api = request.version if request.version is not None else None
        request.api_version = api if api is not None else self.api_version(0, request.api_key) or 0
        super().send(request, now_ms)
        sent = self.sent[-1]
        self.respond(sent, self._answer(sent))
        hook = self.after.get(type(sent.body))
        if hook is not None:
            hook()

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        if self.metadata is not None:
            self.metadata.refresh()
        if not self._due:
            self.clock.advance(max(timeout_ms, 1))
        if self.catch_up_at_ms is not None and self.clock.now_ms() >= self.catch_up_at_ms:
            lead = self.replicas[self.leader]
            lead.high_watermark = len(lead.log)
        return super().poll(timeout_ms, now_ms)

    # -- scripting ------------------------------------------------------------------------

    def append(self, key: bytes, value: bytes | None, *, on: tuple[int, ...] = (0, 1, 2)) -> None:
        """A record replicated to ``on``; the high watermark of each moves past it."""
        for node in on:
            replica = self.replicas[node]
            replica.log.append((key, value))
            replica.high_watermark = len(replica.log)

    def elect(self, node: int, *, high_watermark: int | None = None) -> None:
        """``node`` leads from now on, one epoch later, its high watermark still at the given
        offset (a follower learns the leader's high watermark one fetch late)."""
        self.leader, self.epoch = node, self.epoch + 1
        if high_watermark is not None:
            self.replicas[node].high_watermark = high_watermark

    def requests(self, kind: type) -> list[Sent]:
        return [s for s in self.sent if isinstance(s.body, kind)]

    def _refusal(self, node: int, epoch: int) -> int:
        if node != self.leader:
            return NOT_LEADER_OR_FOLLOWER
        if 0 <= epoch < self.epoch:
            return FENCED_LEADER_EPOCH
        if epoch > self.epoch:
            return UNKNOWN_LEADER_EPOCH
        return 0

    def _answer(self, sent: Sent) -> Any:
        body, node = sent.body, sent.request.node_id
        replica = self.replicas[node]
        if isinstance(body, ListOffsetsRequest):
            asked = body.topics[0].partitions[0]
            error = self._refusal(node, asked.current_leader_epoch)
            offset = -1 if error else replica.high_watermark
            answer = ListOffsetsResponse.ListOffsetsPartitionResponse(0, error, -1, offset)
            return ListOffsetsResponse(
                0, [ListOffsetsResponse.ListOffsetsTopicResponse(TOPIC, [answer])]
            )
        if isinstance(body, FetchRequest):
            asked_part = body.topics[0].partitions[0]
            error = self._refusal(node, asked_part.current_leader_epoch)
            start = asked_part.fetch_offset
            records = b"" if error else self._batch(replica, start)
            data = FetchResponse.PartitionData(
                partition_index=0,
                error_code=error,
                high_watermark=-1 if error else replica.high_watermark,
                log_start_offset=0,
                records=records,
            )
            topic = FetchResponse.FetchableTopicResponse(topic=TOPIC, partitions=[data])
            return FetchResponse(error_code=0, session_id=0, responses=[topic])
        if isinstance(body, ProduceRequest):
            raise AssertionError("the scenario writes through append()")
        raise AssertionError(f"unexpected request {body!r}")

    @staticmethod
    def _batch(replica: Replica, start: int) -> bytes:
        """The replica's records from ``start`` up to its high watermark, as one batch."""
        visible = replica.log[start : replica.high_watermark]
        if not visible:
            return b""
        builder = RecordBatchBuilder(batch_size=1 << 20)
        for key, value in visible:
            builder.append(0, key, value)
        return builder.seal().encode(base_offset=start)


def _record(batch_id: int) -> BatchRecord:
    txn = PreparedTransaction(f"pykafka-q-0-{batch_id}", 7, batch_id, (("orders", 0),))
    return BatchRecord("q", batch_id, INTENT, (txn,))


def _encoded(batch_id: int) -> bytes:
    return json.dumps({"format": 1, **record_to_json(_record(batch_id))}).encode()


@pytest.fixture
def cluster() -> LeaderChangeCluster:
    """Ten records on every replica: the query's intents at offsets 7 (batch 7) and 9 (batch 9),
    another query's records elsewhere."""
    scripted = LeaderChangeCluster(ManualClock())
    for offset in range(10):
        key, value = (b"q", _encoded(offset)) if offset in (7, 9) else (b"other", b"{}")
        scripted.append(key, value)
    scripted.metadata = ClusterMetadata(scripted)
    return scripted


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    kafka_intents._POSITIONS.clear()
    yield
    kafka_intents._POSITIONS.clear()


def _log(cluster: LeaderChangeCluster, timeout_ms: int = 5_000) -> TopicLog:
    client = AdminClient(
        cluster,
        cluster.metadata,
        cluster.clock,
        request_timeout_ms=1_000,
        retry_backoff_ms=100,
        retry_backoff_max_ms=1_000,
    )
    return TopicLog(client, timeout_ms=timeout_ms)


def _store(cluster: LeaderChangeCluster, timeout_ms: int = 5_000) -> KafkaIntentStore:
    return KafkaIntentStore(_log(cluster, timeout_ms), TOPIC, cluster="c:9092")


def test_a_new_leader_behind_the_listed_end_is_waited_for_not_read_short(
    cluster: LeaderChangeCluster,
) -> None:
    # ListOffsets answers 10 from node 0; then node 1 is elected with its high watermark still
    # at 8 (it catches up 300 ms later): the first Fetch goes to node 0, is refused, the
    # metadata names node 1, and node 1's first answer ends at 8, before the latest intent.
    def move_leader() -> None:
        cluster.elect(1, high_watermark=8)
        cluster.catch_up_at_ms = cluster.clock.now_ms() + 300

    cluster.after[ListOffsetsRequest] = move_leader
    assert _store(cluster).last("q") == _record(9)
    caught_up = cluster.catch_up_at_ms
    assert caught_up is not None
    early = [s for s in cluster.requests(FetchRequest) if s.request.node_id == 1]
    assert early[0].now_ms < caught_up  # node 1 was asked while its high watermark was 8


def test_a_leader_that_never_catches_up_times_out_instead_of_answering_older(
    cluster: LeaderChangeCluster,
) -> None:
    cluster.after[ListOffsetsRequest] = lambda: cluster.elect(1, high_watermark=8)
    with pytest.raises(IntentStoreError, match="did not finish within 2000 ms") as caught:
        _store(cluster, timeout_ms=2_000).last("q")
    assert "offset 8, below offset 10" in str(caught.value)
    assert cluster.clock.now_ms() <= 2_000 + 1_000  # bounded by the deadline (and one backoff)


def test_a_listing_below_what_this_process_has_seen_is_retried(
    cluster: LeaderChangeCluster,
) -> None:
    store = _store(cluster)
    assert store.last("q") == _record(9)  # this process has seen the log up to offset 10
    # Node 2 leads now, its high watermark at 8 until 300 ms later: a listing of 8 must not be
    # read backwards from 8 (which finds batch 7).
    cluster.elect(2, high_watermark=8)
    cluster.catch_up_at_ms = cluster.clock.now_ms() + 300
    assert cluster.metadata is not None
    cluster.metadata.request_update()
    cluster.metadata.refresh()
    assert store.last("q") == _record(9)


def test_list_offsets_and_fetch_carry_the_leader_epoch_and_a_fenced_one_refreshes(
    cluster: LeaderChangeCluster,
) -> None:
    # The cluster moves on to epoch 2 on the same leader without the client's metadata knowing:
    # its requests carry epoch 1, node 0 refuses them, the refreshed metadata says 2.
    cluster.epoch = 2
    assert _store(cluster).last("q") == _record(9)
    listed = [
        s.body.topics[0].partitions[0].current_leader_epoch
        for s in cluster.requests(ListOffsetsRequest)
    ]
    fetched = [
        s.body.topics[0].partitions[0].current_leader_epoch for s in cluster.requests(FetchRequest)
    ]
    assert listed[0] == 1 and listed[-1] == 2
    assert fetched and set(fetched) == {2}


def test_a_fetch_below_version_9_is_still_checked_against_the_listed_end(
    cluster: LeaderChangeCluster,
) -> None:
    # Without leader epochs on the wire (Fetch v8), the high-watermark check alone keeps a
    # lagging leader from ending the read short.
    cluster.fetch_version = 8

    def move_leader() -> None:
        cluster.elect(1, high_watermark=8)
        cluster.catch_up_at_ms = cluster.clock.now_ms() + 300

    cluster.after[ListOffsetsRequest] = move_leader
    assert _store(cluster).last("q") == _record(9)


def test_read_raises_the_deadline_naming_the_short_leader(cluster: LeaderChangeCluster) -> None:
    cluster.elect(1, high_watermark=8)
    assert cluster.metadata is not None
    cluster.metadata.request_update()
    cluster.metadata.refresh()
    with pytest.raises(KafkaTimeoutError, match="node 1 answered for intents-0"):
        list(_log(cluster, timeout_ms=1_000).read(TOPIC, 0, 0, 10))


def test_replicas_come_from_the_metadata(cluster: LeaderChangeCluster) -> None:
    assert _log(cluster).replicas(TOPIC, 0) == (0, 1, 2)
