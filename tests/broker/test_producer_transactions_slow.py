"""Transactions on dedicated single-node clusters: one formatted with ``transaction.version=1``
(Transactions V1: AddPartitionsToTxn, Produce <= v11, EndTxn <= v4) and one with the default
(V2), both with the coordinator's timed-out-transaction reaper running every 500 ms, so a
transaction left open past ``transaction.timeout.ms`` is aborted by the broker within seconds.
Each cluster costs a broker start, hence ``slow``.

A transaction prepared by KafkaProducer in a separate process is committed here with
``complete_transaction`` (EndTxn v4 under V1, v5 under V2), and one the coordinator timed out
is reported lost."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from txn_scenarios import (
    commit_and_abort_across_partitions_and_topics,
    commit_prepared_in_another_process,
    describe,
    fencing,
    new_id,
    prepare_in_another_process,
    read_records,
    topic_maker,
    values,
    write_after,
)

from kafka_sink import KafkaProducer
from kafka_sink.admin.transactions import complete_transaction
from kafka_sink.errors import (
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
    TransactionLostError,
)
from kafka_sink.testing.local_kafka import LocalKafka
from kafka_sink.wire import messages as m
from tests.fakes.wire_client import Client

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
        assert "The transaction was aborted and its records are lost" in message
        assert "begin again: close this producer, create a new one" in message
        with pytest.raises(expected):
            producer.send(topic, b"more")
    assert values(bootstrap, topic, "read_committed") == set()
    assert values(bootstrap, topic, "read_uncommitted") == {b"late-%d" % i for i in range(4)}


def test_prepared_in_another_process_committed_here_then_again(
    txn_cluster: tuple[str, int],
) -> None:
    bootstrap, version = txn_cluster
    commit_prepared_in_another_process(
        bootstrap, topic_maker(bootstrap), expected_transaction_version=version
    )


def test_prepared_in_another_process_then_timed_out_by_the_broker_is_lost(
    txn_cluster: tuple[str, int],
) -> None:
    bootstrap, version = txn_cluster
    make = topic_maker(bootstrap)
    a, b = make(3), make(2)
    tid = new_id("txn-xproc-late")
    prepared, written = prepare_in_another_process(bootstrap, tid, a, b, count=3, timeout_ms=2000)
    deadline = time.monotonic() + 30
    while (state := describe(bootstrap, tid))[0] != "CompleteAbort":
        assert time.monotonic() < deadline, f"the broker did not time the transaction out: {state}"
        time.sleep(0.2)
    # The coordinator's abort fenced the epoch: V1 answers PRODUCER_FENCED, V2 (a retry of the
    # bumped epoch) INVALID_TXN_STATE; the message says the data is lost, and why.
    with pytest.raises(TransactionLostError) as caught:
        complete_transaction({"bootstrap.servers": bootstrap}, prepared, commit=True, timeout=30)
    text = str(caught.value)
    assert "cannot be committed: the data it wrote is lost" in text
    assert "transaction.timeout.ms" in text and "now shows state CompleteAbort" in text
    expected: type[KafkaError] = ProducerFencedError if version == 1 else InvalidTxnStateError
    assert isinstance(caught.value.__cause__, expected)
    after = write_after(bootstrap, a, 3) + write_after(bootstrap, b, 2)
    assert read_records(bootstrap, [a, b], "read_committed", after) == sorted(after)
    everything = sorted(written + after)
    assert read_records(bootstrap, [a, b], "read_uncommitted", everything) == everything
