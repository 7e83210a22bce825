"""Transactions of KafkaProducer against the session broker (Transactions V2, Kafka 4.x), read
back by kafka-python with read_committed and read_uncommitted. Transactions V1 and the broker's
timeout abort run on dedicated clusters in ``test_producer_transactions_slow``."""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa
import pytest
from txn_scenarios import (
    commit_and_abort_across_partitions_and_topics,
    fencing,
    new_id,
    topic_maker,
    values,
)

from kafka_sink import KafkaProducer
from kafka_sink.errors import InvalidTxnStateError, TransactionAbortedError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.wire import messages as m
from tests.fakes.wire_client import Client

TopicFactory = Callable[..., str]


def test_commit_and_abort_across_partitions_and_topics(kafka_bootstrap: str) -> None:
    commit_and_abort_across_partitions_and_topics(
        kafka_bootstrap, topic_maker(kafka_bootstrap), expected_transaction_version=2
    )


def test_a_second_producer_with_the_same_id_fences_the_first(kafka_bootstrap: str) -> None:
    fencing(kafka_bootstrap, topic_maker(kafka_bootstrap))


def test_send_columns_inside_a_transaction(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=3)
    config = {"bootstrap.servers": kafka_bootstrap, "transactional.id": new_id()}
    with KafkaProducer(config) as producer:
        producer.init_transactions(timeout=60)
        with pytest.raises(InvalidTxnStateError, match=r"begin_transaction\(\) first"):
            producer.send_columns(topic, pa.array([b"outside"]))
        producer.begin_transaction()
        kept = producer.send_columns(
            topic,
            pa.array([b"kept-%d" % i for i in range(300)]),
            partitions=pa.array([i % 3 for i in range(300)], pa.int32()),
        )
        producer.commit_transaction(timeout=30)
        assert sum(p.record_count for p in kept.get(0).values()) == 300
        producer.begin_transaction()
        dropped = producer.send_columns(topic, pa.array([b"dropped-%d" % i for i in range(50)]))
        producer.flush(30)
        producer.abort_transaction(timeout=30)
        assert dropped.exception(0) is None  # written, then aborted
        producer.begin_transaction()
        producer.send_columns(topic, pa.array([b"last"]), partitions=pa.array([0], pa.int32()))
        producer.commit_transaction(timeout=30)
    committed = values(kafka_bootstrap, topic, "read_committed")
    assert committed == {b"kept-%d" % i for i in range(300)} | {b"last"}
    assert len(values(kafka_bootstrap, topic, "read_uncommitted")) == 351


def test_abort_fails_records_still_queued(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=1)
    config = {
        "bootstrap.servers": kafka_bootstrap,
        "transactional.id": new_id(),
        "linger.ms": "60000",  # nothing leaves before the abort
    }
    with KafkaProducer(config) as producer:
        producer.init_transactions(timeout=60)
        producer.begin_transaction()
        futures = [producer.send(topic, b"never-%d" % i) for i in range(5)]
        producer.abort_transaction(timeout=30)
        for future in futures:
            assert isinstance(future.exception(5), TransactionAbortedError)
        producer.begin_transaction()
        producer.send(topic, b"after")
        producer.commit_transaction(timeout=30)
    assert values(kafka_bootstrap, topic, "read_uncommitted") == {b"after"}


def test_prepare_returns_the_open_transaction_as_the_coordinator_sees_it(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    a, b = topic_factory(partitions=2), topic_factory(partitions=1)
    tid = new_id()
    config = {"bootstrap.servers": kafka_bootstrap, "transactional.id": tid}
    with KafkaProducer(config) as producer:
        producer.init_transactions(timeout=60)
        producer.begin_transaction()
        producer.send(a, b"p0", partition=1)
        producer.send(b, b"p1", partition=0)
        prepared = producer.prepare_transaction(timeout=30)
        assert isinstance(prepared, PreparedTransaction)
        assert prepared.transactional_id == tid
        assert prepared.partitions == tuple(sorted([(a, 1), (b, 0)]))
        with pytest.raises(InvalidTxnStateError, match=r"init_transactions\(\)"):
            producer.send(a, b"refused")
        with pytest.raises(InvalidTxnStateError, match=r"init_transactions\(\)"):
            producer.commit_transaction(timeout=5)
    # close() did not end it: the coordinator still holds it open, with that pid and epoch.
    client = Client(kafka_bootstrap)
    try:
        (state,) = client.call(m.DescribeTransactionsRequest([tid]), 0).transaction_states
    finally:
        client.close()
    assert state.transaction_state == "Ongoing"
    assert (state.producer_id, state.producer_epoch) == (
        prepared.producer_id,
        prepared.producer_epoch,
    )
    assert sorted((t.topic, p) for t in state.topics for p in t.partitions) == list(
        prepared.partitions
    )
    assert values(kafka_bootstrap, a, "read_committed") == set()
    assert values(kafka_bootstrap, a, "read_uncommitted") == {b"p0"}
    # Re-initialising the id aborts what was prepared (the documented caveat).
    with KafkaProducer(config) as again:
        again.init_transactions(timeout=60)
    deadline = time.monotonic() + 30
    while values(kafka_bootstrap, b, "read_committed") or not _stable(kafka_bootstrap, b):
        assert time.monotonic() < deadline, "the prepared transaction was not aborted"
        time.sleep(0.2)


def _stable(bootstrap: str, topic: str) -> bool:
    from kafka_sink.testing.oracle import end_offsets

    # Once the abort marker is written the last stable offset reaches the end of the log.
    committed_end = _read_committed_end(bootstrap, topic)
    return committed_end == end_offsets(bootstrap, topic)[0]


def _read_committed_end(bootstrap: str, topic: str) -> int:
    from kafka_sink.testing.oracle import import_kafka_python

    kafka = import_kafka_python()
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    try:
        tp = kafka.TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()
