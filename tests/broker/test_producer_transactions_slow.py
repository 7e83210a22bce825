"""Transactions on dedicated single-node clusters: one formatted with ``transaction.version=1``
(Transactions V1: AddPartitionsToTxn, Produce <= v11, EndTxn <= v4) and one with the default
(V2), both with the coordinator's timed-out-transaction reaper running every 500 ms, so a
transaction left open past ``transaction.timeout.ms`` is aborted by the broker within seconds.
Each cluster costs a broker start, hence ``slow``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from test_wire_broker import Client
from txn_scenarios import (
    commit_and_abort_across_partitions_and_topics,
    fencing,
    new_id,
    topic_maker,
    values,
)

from kafka_sink import KafkaProducer
from kafka_sink.errors import InvalidTxnStateError, KafkaError, ProducerFencedError
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.wire import messages as m

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=[1, 2], ids=["tv1", "tv2"])
def txn_cluster(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    version: int = request.param
    kafka = LocalKafka(
        nodes=1,
        transaction_version=version,
        broker_config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"},
    )
    kafka.start()
    try:
        yield kafka.bootstrap_servers, version
    finally:
        kafka.close()


def test_commit_and_abort_across_partitions_and_topics(txn_cluster: tuple[str, int]) -> None:
    bootstrap, version = txn_cluster
    commit_and_abort_across_partitions_and_topics(
        bootstrap, topic_maker(bootstrap), expected_transaction_version=version
    )


def test_fencing(txn_cluster: tuple[str, int]) -> None:
    bootstrap, _version = txn_cluster
    fencing(bootstrap, topic_maker(bootstrap))


def _state(bootstrap: str, transactional_id: str) -> str:
    client = Client(bootstrap)
    try:
        (state,) = client.call(
            m.DescribeTransactionsRequest([transactional_id]), 0
        ).transaction_states
    finally:
        client.close()
    return str(state.transaction_state)


def test_commit_after_the_broker_timed_the_transaction_out_says_it_was_aborted(
    txn_cluster: tuple[str, int],
) -> None:
    bootstrap, version = txn_cluster
    topic = topic_maker(bootstrap)(2)
    tid = new_id()
    config = {
        "bootstrap.servers": bootstrap,
        "transactional.id": tid,
        "transaction.timeout.ms": "2000",
    }
    with KafkaProducer(config) as producer:
        producer.init_transactions(timeout=60)
        producer.begin_transaction()
        for i in range(4):
            producer.send(topic, b"late-%d" % i, partition=i % 2)
        producer.flush(30)
        deadline = time.monotonic() + 30
        while _state(bootstrap, tid) == "Ongoing":
            assert time.monotonic() < deadline, "the broker did not time the transaction out"
            time.sleep(0.2)
        # TV1: the abort fenced the epoch (PRODUCER_FENCED); TV2: the coordinator no longer
        # holds the transaction (INVALID_TXN_STATE). Either way the message says what happened.
        expected: type[KafkaError] = ProducerFencedError if version == 1 else InvalidTxnStateError
        with pytest.raises(expected) as info:
            producer.commit_transaction(timeout=30)
        message = str(info.value)
        assert "aborted" in message and "transaction.timeout.ms" in message
        assert "longer than transaction.timeout.ms=2000" in message
        with pytest.raises(expected):
            producer.send(topic, b"more")
    assert values(bootstrap, topic, "read_committed") == set()
    assert values(bootstrap, topic, "read_uncommitted") == {b"late-%d" % i for i in range(4)}
