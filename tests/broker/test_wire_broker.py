"""The wire layer against a real Kafka broker, over a plain blocking socket.

The library's network layer is not involved: each test frames requests with
``encode_request_frame``, reads frames with ``FrameDecoder`` and parses them with
``decode_response``. Records produced this way are read back by kafka-python.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import cramjam
import kafka.codec
import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition

from kafka_sink.records.batch import RecordBatchBuilder
from kafka_sink.records.columnar import seal_columns
from kafka_sink.records.compression import CompressionType
from kafka_sink.testing.oracle import read_all
from kafka_sink.wire import messages as m
from kafka_sink.wire.api import ApiKey, negotiate
from kafka_sink.wire.protocol import decode_response
from tests.fakes.wire_client import TIMESTAMP_MS, Client, call_until_ready


@pytest.fixture
def client(kafka_bootstrap: str) -> Iterator[Client]:
    c = Client(kafka_bootstrap)
    try:
        yield c
    finally:
        c.close()


def negotiated(client: Client) -> dict[ApiKey, int]:
    response = client.call(m.ApiVersionsRequest("kafka-sink-tests", "1.0"), 4)
    assert response.error_code == 0
    return negotiate(response.version_ranges())


def test_api_versions_round_trip(client: Client) -> None:
    response = client.call(m.ApiVersionsRequest("kafka-sink-tests", "1.0"), 4)
    assert response.error_code == 0
    ranges = response.version_ranges()
    produce_min, produce_max = ranges[ApiKey.PRODUCE]
    assert produce_min <= 3
    assert produce_max >= 12
    assert ranges[ApiKey.METADATA][0] <= 1
    assert ranges[ApiKey.METADATA][1] >= 12
    assert ranges[ApiKey.API_VERSIONS][1] >= 4
    chosen = negotiate(ranges)
    assert chosen[ApiKey.PRODUCE] == 12
    assert chosen[ApiKey.METADATA] == 12
    assert chosen[ApiKey.INIT_PRODUCER_ID] == 5
    features = {f.name: f.max_version_level for f in response.finalized_features}
    assert "metadata.version" in features


def test_api_versions_from_the_future_gets_the_v0_fallback_answer(client: Client) -> None:
    # A version no broker knows: the answer is UNSUPPORTED_VERSION in the v0 body layout.
    header = struct.pack(">hhih", int(ApiKey.API_VERSIONS), 999, 77, 1) + b"x" + b"\x00"
    payload = client.send_raw(struct.pack(">i", len(header)) + header)
    correlation_id, response = decode_response(m.ApiVersionsRequest, 999, payload)
    assert correlation_id == 77
    assert response.error_code == 35
    low, high = response.version_ranges()[ApiKey.API_VERSIONS]
    assert low == 0
    assert high >= 4
    # The connection stays usable at the version the broker named.
    assert client.call(m.ApiVersionsRequest(), 0).error_code == 0


def test_metadata_round_trip_at_every_version(
    client: Client, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=3)
    for version in range(1, 13):
        response = client.call(m.MetadataRequest.for_topics([topic]), version)
        assert [t.name for t in response.topics] == [topic], version
        (found,) = response.topics
        assert found.error_code == 0
        assert sorted(p.partition_index for p in found.partitions) == [0, 1, 2]
        node_ids = {b.node_id for b in response.brokers}
        assert all(p.leader_id in node_ids for p in found.partitions), version
        if version >= 2:
            assert response.cluster_id
        if version >= 10:
            assert found.topic_id.int != 0
    # v1+: null asks for every topic, an empty list for none.
    assert topic in {t.name for t in client.call(m.MetadataRequest(None), 12).topics}
    assert client.call(m.MetadataRequest([]), 12).topics == []


def build_batch(codec: CompressionType, count: int, prefix: bytes = b"") -> bytes:
    builder = RecordBatchBuilder(compression_type=codec, batch_size=1 << 20)
    for i in range(count):
        headers = [("h", b"%d" % i)] if i % 2 else []
        key = None if i == 0 else prefix + b"k%d" % i
        assert builder.append(TIMESTAMP_MS + i, key, prefix + b"v%d" % i * 50, headers) == i
    return builder.seal().encode()


def produce(client: Client, topic: str, batch: bytes, version: int, **kw: Any) -> Any:
    request = m.ProduceRequest(
        kw.pop("transactional_id", None),
        -1,
        30000,
        [
            m.ProduceRequest.TopicProduceData(
                topic, [m.ProduceRequest.PartitionProduceData(0, batch)]
            )
        ],
    )
    response = client.call(request, version)
    ((topic_response,),) = [response.responses]
    assert topic_response.name == topic
    (partition,) = topic_response.partition_responses
    return partition


class _CramjamSnappy:
    """The two python-snappy calls kafka-python's decoder makes, backed by cramjam's raw blocks."""

    @staticmethod
    def compress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.compress_raw(data))

    @staticmethod
    def decompress(data: bytes) -> bytes:
        return bytes(cramjam.snappy.decompress_raw(data))


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
def test_produce_each_codec_and_read_back(
    client: Client,
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    codec: CompressionType,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if codec is CompressionType.SNAPPY:
        # kafka-python reads snappy through python-snappy, which is not a dependency here; it
        # still parses the xerial framing itself.
        monkeypatch.setattr(kafka.codec, "snappy", _CramjamSnappy)
    topic = topic_factory()
    version = negotiated(client)[ApiKey.PRODUCE]
    partition = produce(client, topic, build_batch(codec, 5), version)
    assert (partition.index, partition.error_code, partition.base_offset) == (0, 0, 0)
    records = read_all(kafka_bootstrap, topic, expected=5)
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in records] == [
        (
            i,
            None if i == 0 else b"k%d" % i,
            b"v%d" % i * 50,
            [("h", b"%d" % i)] if i % 2 else [],
            TIMESTAMP_MS + i,
        )
        for i in range(5)
    ]


def test_produce_at_every_version(
    client: Client, kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory()
    expected = []
    for offset, version in enumerate(range(3, 13)):
        prefix = b"v%d-" % version
        partition = produce(client, topic, build_batch(CompressionType.NONE, 1, prefix), version)
        assert (partition.error_code, partition.base_offset) == (0, offset), version
        if version >= 5:
            assert partition.log_start_offset == 0
        expected.append(prefix + b"v0" * 50)
    assert [r.value for r in read_all(kafka_bootstrap, topic, expected=10)] == expected


def test_idempotent_produce_with_init_producer_id(
    client: Client, kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory()
    versions = negotiated(client)
    deadline = time.monotonic() + 30
    while True:
        init = client.call(m.InitProducerIdRequest(None), versions[ApiKey.INIT_PRODUCER_ID])
        # A fresh broker answers COORDINATOR_LOAD_IN_PROGRESS (retriable) until the producer-id
        # manager is ready.
        if init.error_code != 14 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert init.error_code == 0
    assert init.producer_id >= 0
    builder = RecordBatchBuilder(compression_type=CompressionType.LZ4)
    for i in range(3):
        builder.append(TIMESTAMP_MS, None, b"idem-%d" % i)
    batch = builder.seal().encode(
        producer_id=init.producer_id, producer_epoch=init.producer_epoch, base_sequence=0
    )
    first = produce(client, topic, batch, versions[ApiKey.PRODUCE])
    assert (first.error_code, first.base_offset) == (0, 0)
    # The identical bytes again (a retry): acknowledged with the same offset, not written twice.
    again = produce(client, topic, batch, versions[ApiKey.PRODUCE])
    assert (again.error_code, again.base_offset) == (0, 0)
    assert [r.value for r in read_all(kafka_bootstrap, topic, expected=3)] == [
        b"idem-0",
        b"idem-1",
        b"idem-2",
    ]


def test_produce_errors_are_reported_per_partition(
    client: Client, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(configs={"max.message.bytes": "2000"})
    builder = RecordBatchBuilder(batch_size=1 << 20)
    builder.append(TIMESTAMP_MS, None, bytes(5000))
    partition = produce(client, topic, builder.seal().encode(), 12)
    assert partition.error_code == 10  # MESSAGE_TOO_LARGE
    assert partition.base_offset == -1


def test_create_topics_then_metadata(client: Client, kafka_bootstrap: str) -> None:
    name = "wire-created-topic"
    request = m.CreateTopicsRequest(
        [
            m.CreateTopicsRequest.CreatableTopic(
                name,
                2,
                1,
                configs=[m.CreateTopicsRequest.CreatableTopicConfig("retention.ms", "60000")],
            )
        ],
        timeout_ms=30000,
    )
    created = client.call(request, negotiated(client)[ApiKey.CREATE_TOPICS])
    (result,) = created.topics
    assert (result.name, result.error_code, result.num_partitions) == (name, 0, 2)
    assert result.topic_id.int != 0
    again = client.call(request, 7)
    assert again.topics[0].error_code == 36  # TOPIC_ALREADY_EXISTS
    metadata = client.call(m.MetadataRequest.for_topics([name]), 12)
    assert metadata.topics[0].topic_id == result.topic_id


def test_transaction_v1_flow_commits(
    client: Client, kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory()
    txid = f"wire-txn-{topic}"
    versions = negotiated(client)
    found = call_until_ready(
        client,
        m.FindCoordinatorRequest(key_type=m.KEY_TYPE_TRANSACTION, coordinator_keys=[txid]),
        versions[ApiKey.FIND_COORDINATOR],
        lambda r: r.coordinators[0].error_code,
    )
    (coordinator,) = found.coordinators
    assert (coordinator.key, coordinator.error_code) == (txid, 0)
    # Single node: the coordinator is the broker this connection talks to.
    init = call_until_ready(
        client,
        m.InitProducerIdRequest(txid, 60000),
        versions[ApiKey.INIT_PRODUCER_ID],
        lambda r: r.error_code,
    )
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    added = call_until_ready(
        client,
        m.AddPartitionsToTxnRequest(
            txid, pid, epoch, [m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(topic, [0])]
        ),
        versions[ApiKey.ADD_PARTITIONS_TO_TXN],
        lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
    )
    (result,) = added.results_by_topic_v3_and_below
    assert [(p.partition_index, p.partition_error_code) for p in result.results_by_partition] == [
        (0, 0)
    ]
    builder = RecordBatchBuilder(compression_type=CompressionType.ZSTD)
    builder.append(TIMESTAMP_MS, b"k", b"in-txn")
    batch = builder.seal().encode(
        producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True
    )
    # Transactions V1: Produce capped at v11.
    partition = produce(
        client, topic, batch, min(11, versions[ApiKey.PRODUCE]), transactional_id=txid
    )
    assert (partition.error_code, partition.base_offset) == (0, 0)
    ended = call_until_ready(
        client,
        m.EndTxnRequest(txid, pid, epoch, True),
        versions[ApiKey.END_TXN],
        lambda r: r.error_code,
    )
    assert ended.error_code == 0
    records = read_all(kafka_bootstrap, topic, expected=1, isolation_level="read_committed")
    assert [(r.key, r.value) for r in records] == [(b"k", b"in-txn")]


def _confluent_read(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes, bytes]]:
    """Key and value of the first ``expected`` records of partition 0, read by librdkafka."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while len(out) < expected:
            assert time.monotonic() < deadline, f"librdkafka read {len(out)} of {expected}"
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.key(), msg.value()))
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD], ids=["lz4", "zstd"])
def test_columnar_multi_block_batch_read_back_by_kafka_python_and_librdkafka(
    client: Client,
    kafka_bootstrap: str,
    topic_factory: Callable[..., str],
    codec: CompressionType,
) -> None:
    # One batch of ~300 KB (several 64 KiB LZ4 blocks), sealed by the columnar encoder the Spark
    # sink uses: noise rows (blocks LZ4 stores raw) then text rows (blocks it compresses). The
    # broker validates the batch, then two independent decoders read it back.
    values = [os.urandom(1000) for _ in range(100)] + [b"order %d " % i * 100 for i in range(200)]
    keys = [b"key-%d" % i for i in range(300)]
    (sealed,) = seal_columns(
        pa.array(values, pa.binary()),
        pa.array(keys, pa.binary()),
        timestamps_ms=TIMESTAMP_MS,
        compression_type=codec,
        batch_size=1 << 20,
    )
    assert sealed.record_count == 300
    version = negotiated(client)[ApiKey.PRODUCE]
    topic = topic_factory()
    partition = produce(client, topic, sealed.encode(), version)
    assert (partition.error_code, partition.base_offset) == (0, 0)
    records = read_all(kafka_bootstrap, topic, expected=300)
    assert [(r.key, r.value) for r in records] == list(zip(keys, values, strict=True))
    assert _confluent_read(kafka_bootstrap, topic, 300) == list(zip(keys, values, strict=True))
