"""Transaction administration and the read path of the wire layer against a real broker.

Over the blocking socket client of ``tests.fakes.wire_client`` (no network layer): the finalized
``transaction.version`` from ApiVersions, the broker's ``transaction.max.timeout.ms`` from
DescribeConfigs, ListTransactions / DescribeTransactions / DescribeProducers on a transaction left
open with the raw Transactions V1 messages, and reading the log back with ListOffsets (last
stable offset below the high watermark while it is open, equal once it ends) and Fetch (control
batches, abort markers, the aborted-transactions list, ``fetched_records``). kafka-python reads the
same records as an independent consumer.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kafka_sink.records.batch import RecordBatch, RecordBatchBuilder, read_batches
from kafka_sink.records.compression import CompressionType
from kafka_sink.records.fetched import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    complete_batches_size,
    control_type,
    fetched_records,
)
from kafka_sink.testing.oracle import read_all
from kafka_sink.wire import messages as m
from kafka_sink.wire.api import ApiKey, negotiate
from kafka_sink.wire.messages.describe_configs import (
    CONFIG_SOURCE_DEFAULT_CONFIG,
    CONFIG_SOURCE_STATIC_BROKER_CONFIG,
    RESOURCE_TYPE_BROKER,
)
from kafka_sink.wire.messages.fetch import uses_topic_ids
from kafka_sink.wire.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
)
from kafka_sink.wire.messages.transaction_admin import TRANSACTION_STATES
from tests.fakes.wire_client import TIMESTAMP_MS, Client, call_until_ready

TRANSACTIONAL_ID_NOT_FOUND = 105
TIMEOUT_MS = 60000


@pytest.fixture
def client(kafka_bootstrap: str) -> Iterator[Client]:
    c = Client(kafka_bootstrap)
    try:
        yield c
    finally:
        c.close()


def api_versions(client: Client) -> Any:
    response = client.call(m.ApiVersionsRequest("kafka-sink-tests", "1.0"), 4)
    assert response.error_code == 0
    return response


def negotiated(client: Client) -> dict[ApiKey, int]:
    return negotiate(api_versions(client).version_ranges())


def test_api_versions_reports_the_finalized_transaction_version(client: Client) -> None:
    response = api_versions(client)
    finalized = {
        f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features
    }
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    # A cluster formatted by a 4.x release finalizes Transactions V2.
    assert finalized["transaction.version"] == (2, 2)
    assert supported["transaction.version"][0] <= 2 <= supported["transaction.version"][1]
    assert response.finalized_features_epoch >= 0
    # Every version of the new APIs this client speaks is one the broker accepts.
    ranges = response.version_ranges()
    chosen = negotiate(ranges)
    for key, version in [
        (ApiKey.FETCH, 18),
        (ApiKey.LIST_OFFSETS, 11),
        (ApiKey.DESCRIBE_CONFIGS, 4),
        (ApiKey.LIST_TRANSACTIONS, 2),
        (ApiKey.DESCRIBE_TRANSACTIONS, 0),
        (ApiKey.DESCRIBE_PRODUCERS, 0),
    ]:
        assert chosen[key] == version, key
    assert ranges[ApiKey.FETCH][0] == 4
    assert ranges[ApiKey.LIST_OFFSETS][0] == 1


def broker_id(client: Client) -> int:
    (broker,) = client.call(m.MetadataRequest([]), 12).brokers
    return int(broker.node_id)


def test_describe_configs_reads_the_broker_transaction_max_timeout(client: Client) -> None:
    name = str(broker_id(client))
    key = "transaction.max.timeout.ms"
    for version in range(1, 5):
        request = m.DescribeConfigsRequest(
            [m.DescribeConfigsRequest.DescribeConfigsResource(RESOURCE_TYPE_BROKER, name, [key])],
            include_synonyms=True,
            include_documentation=version >= 3,
        )
        response = client.call(request, version)
        (result,) = response.results
        assert (result.error_code, result.resource_type, result.resource_name) == (0, 4, name)
        (config,) = result.configs
        assert (config.name, config.value, config.is_sensitive) == (key, "900000", False)
        assert config.config_source in (
            CONFIG_SOURCE_DEFAULT_CONFIG,
            CONFIG_SOURCE_STATIC_BROKER_CONFIG,
        )
        assert config.synonyms, version
        assert response.config_values() == {(RESOURCE_TYPE_BROKER, name): {key: "900000"}}
        if version >= 3:
            assert config.config_type == 3  # INT
            assert config.documentation
    # A null key list asks for every key.
    every = client.call(
        m.DescribeConfigsRequest(
            [m.DescribeConfigsRequest.DescribeConfigsResource(RESOURCE_TYPE_BROKER, name, None)]
        ),
        4,
    )
    assert every.config_values()[(RESOURCE_TYPE_BROKER, name)][key] == "900000"


def list_transactions(client: Client, version: int, **kw: Any) -> Any:
    response = client.call(m.ListTransactionsRequest(**kw), version)
    assert response.error_code == 0
    return response


@dataclass
class Txn:
    """One Transactions V1 producer session driven with the raw messages."""

    client: Client
    transactional_id: str
    topic: str
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = 0

    def init(self) -> None:
        found = call_until_ready(
            self.client,
            m.FindCoordinatorRequest(
                key_type=m.KEY_TYPE_TRANSACTION, coordinator_keys=[self.transactional_id]
            ),
            6,
            lambda r: r.coordinators[0].error_code,
        )
        assert found.coordinators[0].error_code == 0
        init = call_until_ready(
            self.client,
            m.InitProducerIdRequest(self.transactional_id, TIMEOUT_MS),
            5,
            lambda r: r.error_code,
        )
        assert init.error_code == 0
        self.producer_id, self.producer_epoch = init.producer_id, init.producer_epoch

    def send(self, values: list[bytes]) -> int:
        """AddPartitionsToTxn v3, then Produce v11 of ``values``; returns their base offset."""
        added = call_until_ready(
            self.client,
            m.AddPartitionsToTxnRequest(
                self.transactional_id,
                self.producer_id,
                self.producer_epoch,
                [m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(self.topic, [0])],
            ),
            3,
            lambda r: (
                r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
            ),
        )
        assert (
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        )
        builder = RecordBatchBuilder(compression_type=CompressionType.LZ4)
        for value in values:
            builder.append(
                TIMESTAMP_MS, b"k-" + value, value, [("txn", self.transactional_id.encode())]
            )
        batch = builder.seal().encode(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.sequence,
            is_transactional=True,
        )
        self.sequence += len(values)
        return produce(self.client, self.topic, batch, self.transactional_id)

    def end(self, commit: bool) -> None:
        ended = call_until_ready(
            self.client,
            m.EndTxnRequest(self.transactional_id, self.producer_id, self.producer_epoch, commit),
            4,
            lambda r: r.error_code,
        )
        assert ended.error_code == 0
        # Transactions V1 answers before the markers are written: wait for them, so the next
        # writes land after them.
        final = "CompleteCommit" if commit else "CompleteAbort"
        wait_for(
            f"{self.transactional_id} to reach {final}",
            lambda: (
                self.client.call(m.DescribeTransactionsRequest([self.transactional_id]), 0)
                .transaction_states[0]
                .transaction_state
                == final
            ),
        )


def produce(client: Client, topic: str, batch: bytes, transactional_id: str | None = None) -> int:
    request = m.ProduceRequest(
        transactional_id,
        -1,
        30000,
        [
            m.ProduceRequest.TopicProduceData(
                topic, [m.ProduceRequest.PartitionProduceData(0, batch)]
            )
        ],
    )
    (partition,) = client.call(request, 11).responses[0].partition_responses
    assert partition.error_code == 0
    return int(partition.base_offset)


def plain_batch(values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(TIMESTAMP_MS, None, value)
    return builder.seal().encode()


def list_offset(client: Client, topic: str, version: int, timestamp: int, isolation: int) -> int:
    request = m.ListOffsetsRequest(
        isolation_level=isolation,
        topics=[
            m.ListOffsetsRequest.ListOffsetsTopic(
                topic, [m.ListOffsetsRequest.ListOffsetsPartition(0, timestamp=timestamp)]
            )
        ],
    )
    response = client.call(request, version)
    (partition,) = response.topics[0].partitions
    assert partition.error_code == 0, (version, partition)
    return int(partition.offset)


def fetch(
    client: Client,
    topic: str,
    topic_id: uuid.UUID,
    version: int,
    *,
    offset: int,
    isolation: int,
    partition_max_bytes: int = 1 << 20,
) -> Any:
    wanted = m.FetchRequest.FetchPartition(
        0, fetch_offset=offset, partition_max_bytes=partition_max_bytes
    )
    if uses_topic_ids(version):
        fetch_topic = m.FetchRequest.FetchTopic(topic_id=topic_id, partitions=[wanted])
    else:
        fetch_topic = m.FetchRequest.FetchTopic(topic, partitions=[wanted])
    request = m.FetchRequest(max_wait_ms=0, isolation_level=isolation, topics=[fetch_topic])
    response = client.call(request, version)
    assert response.error_code == 0
    (found,) = response.responses
    assert (found.topic_id if uses_topic_ids(version) else found.topic) == (
        topic_id if uses_topic_ids(version) else topic
    )
    (partition,) = found.partitions
    assert partition.error_code == 0, (version, partition.error_code)
    return partition


def new_topic(client: Client, topic_factory: Callable[..., str]) -> str:
    """A fresh one-partition topic whose leader already serves it: metadata names the leader a
    moment before the broker hosts the partition, and a raw Produce in that gap gets
    NOT_LEADER_OR_FOLLOWER (there is no client retry here)."""
    topic = topic_factory()

    def served() -> bool:
        request = m.ListOffsetsRequest(
            topics=[
                m.ListOffsetsRequest.ListOffsetsTopic(
                    topic, [m.ListOffsetsRequest.ListOffsetsPartition(0)]
                )
            ]
        )
        return bool(client.call(request, 11).topics[0].partitions[0].error_code == 0)

    wait_for(f"the leader of {topic}-0 to serve it", served)
    return topic


def topic_id_of(client: Client, topic: str) -> uuid.UUID:
    (found,) = client.call(m.MetadataRequest.for_topics([topic]), 12).topics
    return found.topic_id  # type: ignore[no-any-return]


@dataclass
class LogRead:
    batches: list[RecordBatch]
    records: list[tuple[int, bytes | None]]
    aborted: list[tuple[int, int]]
    cut_tails: int = 0


def read_log(
    client: Client,
    topic: str,
    topic_id: uuid.UUID,
    isolation: int,
    *,
    end: int,
    start: int = 0,
    version: int = 18,
    partition_max_bytes: int = 1 << 20,
) -> LogRead:
    """Fetch from ``start`` until ``end`` the way a reader loops: each fetch from the previous
    one's ``next_offset``. A broker may answer a fetch with fewer batches than lie below its high
    watermark, so one fetch is not "everything"."""
    out = LogRead([], [], [])
    offset = start
    for _ in range(50):
        partition = fetch(
            client,
            topic,
            topic_id,
            version,
            offset=offset,
            isolation=isolation,
            partition_max_bytes=partition_max_bytes,
        )
        got = fetched_records(partition, offset, read_committed=isolation == READ_COMMITTED)
        assert got.next_offset > offset, f"no progress at offset {offset}"
        data = partition.records or b""
        whole = complete_batches_size(data)
        out.cut_tails += whole < len(data)
        out.batches += read_batches(memoryview(data)[:whole])
        out.records += [(r.offset, r.value) for r in got.records]
        out.aborted += [
            (a.producer_id, a.first_offset) for a in partition.aborted_transactions or []
        ]
        offset = got.next_offset
        if offset >= end:
            return out
    raise AssertionError(f"{topic}: offset {end} not reached in 50 fetches (at {offset})")


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def test_an_open_transaction_is_listed_described_and_holds_back_read_committed(
    client: Client, kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = new_topic(client, topic_factory)
    topic_id = topic_id_of(client, topic)
    prefix = f"txn-admin-{uuid.uuid4().hex[:8]}-"
    txn = Txn(client, prefix + "0", topic)
    pattern = "^" + re.escape(prefix) + ".*"

    # Nothing under the prefix yet: filtered by the broker (v2) and by us (v0).
    assert list_transactions(client, 2, transactional_id_pattern=pattern).transaction_states == []
    assert txn.transactional_id not in {
        t.transactional_id for t in list_transactions(client, 0).transaction_states
    }

    assert produce(client, topic, plain_batch([b"p0", b"p1"])) == 0
    txn.init()
    assert txn.send([b"t0", b"t1", b"t2"]) == 2

    # ListTransactions: every version, the state filter, the duration filter, the pattern.
    mine = ("txn", txn.transactional_id, txn.producer_id, "Ongoing")
    for version in range(3):
        listed = list_transactions(client, version, state_filters=["Ongoing"])
        assert mine[1:] in {
            (t.transactional_id, t.producer_id, t.transaction_state)
            for t in listed.transaction_states
        }, version
    assert txn.transactional_id not in {
        t.transactional_id
        for t in list_transactions(client, 2, state_filters=["CompleteCommit"]).transaction_states
    }
    assert txn.transactional_id not in {
        t.transactional_id
        for t in list_transactions(client, 1, duration_filter=3_600_000).transaction_states
    }
    by_pattern = list_transactions(client, 2, transactional_id_pattern=pattern)
    assert [(t.transactional_id, t.transaction_state) for t in by_pattern.transaction_states] == [
        (txn.transactional_id, "Ongoing")
    ]
    assert (
        list_transactions(
            client, 2, transactional_id_pattern="^no-such-prefix-.*"
        ).transaction_states
        == []
    )
    unknown = list_transactions(client, 2, state_filters=["Bogus", *TRANSACTION_STATES])
    assert unknown.unknown_state_filters == ["Bogus"]

    # DescribeTransactions: pid, epoch, state, timeout, partitions; an unknown id is an error.
    described = client.call(
        m.DescribeTransactionsRequest([txn.transactional_id, prefix + "never-used"]), 0
    )
    state, missing = described.transaction_states
    assert (state.error_code, state.transactional_id, state.transaction_state) == (
        0,
        txn.transactional_id,
        "Ongoing",
    )
    assert (state.producer_id, state.producer_epoch) == (txn.producer_id, txn.producer_epoch)
    assert state.transaction_timeout_ms == TIMEOUT_MS
    assert state.transaction_start_time_ms > 0
    assert [(t.topic, t.partitions) for t in state.topics] == [(topic, [0])]
    assert (missing.transactional_id, missing.error_code) == (
        prefix + "never-used",
        TRANSACTIONAL_ID_NOT_FOUND,
    )

    # DescribeProducers: the partition leader sees the open transaction starting at offset 2.
    producers = client.call(
        m.DescribeProducersRequest([m.DescribeProducersRequest.TopicRequest(topic, [0])]), 0
    )
    (partition,) = producers.topics[0].partitions
    assert partition.error_code == 0
    (active,) = partition.active_producers
    assert (active.producer_id, active.producer_epoch) == (txn.producer_id, txn.producer_epoch)
    assert (active.last_sequence, active.current_txn_start_offset) == (2, 2)

    # ListOffsets: HW 5, but the last stable offset stops at the open transaction's first offset.
    for version in range(1, 12):
        assert list_offset(client, topic, version, EARLIEST_TIMESTAMP, READ_UNCOMMITTED) == 0
        assert list_offset(client, topic, version, LATEST_TIMESTAMP, READ_UNCOMMITTED) == 5
        if version >= 2:
            assert list_offset(client, topic, version, LATEST_TIMESTAMP, READ_COMMITTED) == 2

    # Fetch, every version: read_committed stops at the LSO, read_uncommitted sees the open data.
    for version in range(4, 19):
        committed = fetch(client, topic, topic_id, version, offset=0, isolation=READ_COMMITTED)
        assert (committed.high_watermark, committed.last_stable_offset) == (5, 2), version
        got = fetched_records(committed, 0, read_committed=True)
        assert [(r.offset, r.value) for r in got.records] == [(0, b"p0"), (1, b"p1")], version
        assert got.next_offset == 2
        assert not committed.aborted_transactions
        uncommitted = fetch(client, topic, topic_id, version, offset=0, isolation=READ_UNCOMMITTED)
        values = [r.value for r in fetched_records(uncommitted, 0, read_committed=False).records]
        assert values == [b"p0", b"p1", b"t0", b"t1", b"t2"], version
        if version >= 5:
            assert committed.log_start_offset == 0

    # Abort: the marker lands at offset 5 and the LSO catches up with the HW.
    txn.end(commit=False)
    wait_for(
        "the last stable offset to reach the high watermark after EndTxn",
        lambda: list_offset(client, topic, 11, LATEST_TIMESTAMP, READ_COMMITTED) == 6,
    )
    assert list_offset(client, topic, 11, LATEST_TIMESTAMP, READ_UNCOMMITTED) == 6
    wait_for(
        "the coordinator to complete the abort",
        lambda: (
            [
                t.transaction_state
                for t in list_transactions(
                    client, 2, transactional_id_pattern=pattern
                ).transaction_states
            ]
            == ["CompleteAbort"]
        ),
    )
    done = client.call(m.DescribeTransactionsRequest([txn.transactional_id]), 0)
    assert done.transaction_states[0].transaction_state == "CompleteAbort"
    assert done.transaction_states[0].topics == []

    partition = fetch(client, topic, topic_id, 18, offset=0, isolation=READ_COMMITTED)
    assert (partition.high_watermark, partition.last_stable_offset) == (6, 6)
    assert [(a.producer_id, a.first_offset) for a in partition.aborted_transactions] == [
        (txn.producer_id, 2)
    ]
    committed = read_log(client, topic, topic_id, READ_COMMITTED, end=6)
    assert committed.records == [(0, b"p0"), (1, b"p1")]
    plain, data, abort = committed.batches
    assert (plain.is_transactional, data.is_transactional, data.is_control) == (False, True, False)
    assert (abort.base_offset, abort.is_control, abort.producer_id) == (5, True, txn.producer_id)
    assert control_type(abort) == CONTROL_TYPE_ABORT
    # Read uncommitted: no aborted list; the aborted data is there, the marker is not.
    uncommitted = read_log(client, topic, topic_id, READ_UNCOMMITTED, end=6)
    assert uncommitted.aborted == []
    assert [v for _, v in uncommitted.records] == [b"p0", b"p1", b"t0", b"t1", b"t2"]
    # An independent consumer agrees.
    oracle = read_all(kafka_bootstrap, topic, isolation_level="read_committed")
    assert [(r.offset, r.value) for r in oracle] == [(0, b"p0"), (1, b"p1")]


def test_fetched_records_matches_a_java_style_consumer_on_a_mixed_log(
    client: Client, kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = new_topic(client, topic_factory)
    topic_id = topic_id_of(client, topic)
    first = Txn(client, f"txn-mixed-{uuid.uuid4().hex[:8]}-a", topic)
    second = Txn(client, f"txn-mixed-{uuid.uuid4().hex[:8]}-b", topic)
    first.init()
    second.init()
    # Interleaved: a's aborted records straddle b's committed ones, then a commits a second one.
    first.send([b"a-aborted-0"])
    second.send([b"b-committed-0"])
    first.send([b"a-aborted-1"])
    produce(client, topic, plain_batch([b"plain"]))
    second.end(commit=True)
    first.end(commit=False)
    first.send([b"a-committed"])
    first.end(commit=True)
    # Log: 0 a, 1 b, 2 a, 3 plain, 4 commit(b), 5 abort(a), 6 a, 7 commit(a).
    wait_for(
        "the last stable offset to reach the high watermark",
        lambda: list_offset(client, topic, 11, LATEST_TIMESTAMP, READ_COMMITTED) == 8,
    )
    expected_committed = [(1, b"b-committed-0"), (3, b"plain"), (6, b"a-committed")]
    # From every start offset, at the first topic-id version and the last name one.
    for version in (12, 13):
        for start in range(8):
            log = read_log(
                client, topic, topic_id, READ_COMMITTED, start=start, end=8, version=version
            )
            assert log.records == [rec for rec in expected_committed if rec[0] >= start], start
    # A few bytes at a time: the broker cuts batches short (KIP-74 still gives the first one
    # whole), the cut tail is fetched again, and the reader ends with the same records.
    small = read_log(client, topic, topic_id, READ_COMMITTED, end=8, partition_max_bytes=100)
    assert small.records == expected_committed
    assert small.cut_tails > 0
    everything = read_log(client, topic, topic_id, READ_UNCOMMITTED, end=8)
    markers = [(b.base_offset, control_type(b)) for b in everything.batches if b.is_control]
    assert markers == [(4, CONTROL_TYPE_COMMIT), (5, CONTROL_TYPE_ABORT), (7, CONTROL_TYPE_COMMIT)]
    # Every fetch that overlaps the aborted transaction lists it.
    assert set(read_log(client, topic, topic_id, READ_COMMITTED, end=8).aborted) == {
        (first.producer_id, 0)
    }
    oracle = read_all(kafka_bootstrap, topic, isolation_level="read_committed")
    assert [(r.offset, r.value) for r in oracle] == expected_committed
    assert [(r.offset, r.value) for r in read_all(kafka_bootstrap, topic)] == [
        (0, b"a-aborted-0"),
        (1, b"b-committed-0"),
        (2, b"a-aborted-1"),
        (3, b"plain"),
        (6, b"a-committed"),
    ]
