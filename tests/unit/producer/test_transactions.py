"""Transactions, stepped: the TransactionManager state machine and the coordinator requests the
sender sends for it (fake network client, manual clock)."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any

import pytest

from kafka_sink.clock import ManualClock
from kafka_sink.errors import (
    AbortableTransactionError,
    IllegalStateError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaTimeoutError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionAbortedError,
)
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.producer.accumulator import RecordAccumulator
from kafka_sink.producer.sender import Sender
from kafka_sink.producer.txn.manager import TransactionManager, TransactionState
from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages import (
    KEY_TYPE_TRANSACTION,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
)
from tests.fakes.producer import FakeMetadata, FakeNetworkClient, Sent, produce_response

NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
COORDINATOR_LOAD_IN_PROGRESS = 14
CONCURRENT_TRANSACTIONS = 51
PRODUCER_FENCED = 90
INVALID_TXN_STATE = 48
TOPIC_AUTHORIZATION_FAILED = 29
INVALID_TRANSACTION_TIMEOUT = 50


@dataclass
class Txn:
    clock: ManualClock
    network: FakeNetworkClient
    accumulator: RecordAccumulator
    sender: Sender
    tm: TransactionManager

    def run(self, advance_ms: int = 0) -> None:
        if advance_ms:
            self.clock.advance(advance_ms)
        self.sender.run_once(self.clock.now_ms())

    def settle(self) -> None:
        """Deliver the answers given (one poll), then let the sender act on them."""
        self.run()
        self.run()

    def send(self, topic: str = "t", partition: int = 0, value: bytes = b"v") -> Any:
        self.tm.ensure_can_send()
        return self.accumulator.append(
            topic, partition, self.clock.wall_ms(), None, value, (), None, 0, self.clock.now_ms()
        )[0]

    def pending(self, kind: type) -> Sent:
        found = [s for s in self.network.pending() if isinstance(s.body, kind)]
        assert len(found) == 1, f"expected one pending {kind.__name__}, got {self.network.sent}"
        return found[0]

    def requests(self, kind: type) -> list[Sent]:
        return [s for s in self.network.sent if isinstance(s.body, kind)]

    def answer_find_coordinator(self, node_id: int = 1, error: int = 0) -> Sent:
        sent = self.pending(FindCoordinatorRequest)
        self.network.respond(
            sent, FindCoordinatorResponse(error_code=error, node_id=node_id, host="b", port=9092)
        )
        self.settle()
        return sent

    def answer_init(self, pid: int = 4000, epoch: int = 0, error: int = 0) -> Sent:
        sent = self.pending(InitProducerIdRequest)
        self.network.respond(
            sent, InitProducerIdResponse(error_code=error, producer_id=pid, producer_epoch=epoch)
        )
        self.settle()
        return sent

    def answer_end(self, error: int = 0, pid: int = -1, epoch: int = -1) -> Sent:
        sent = self.pending(EndTxnRequest)
        self.network.respond(
            sent, EndTxnResponse(error_code=error, producer_id=pid, producer_epoch=epoch)
        )
        self.settle()
        return sent

    def answer_produce(self, errors: dict[tuple[str, int], int] | None = None) -> Sent:
        sent = self.pending(ProduceRequest)
        self.network.respond(sent, produce_response(sent, errors=errors))
        self.settle()
        return sent

    def initialized(self, pid: int = 4000, epoch: int = 0) -> None:
        result = self.tm.initialize_transactions()
        self.run()
        self.answer_find_coordinator()
        self.answer_init(pid, epoch)
        result.wait(0, "")  # what init_transactions() does: acknowledges the result
        assert self.tm.state is TransactionState.READY


def make_txn(
    *, transaction_version: int | None = 2, linger_ms: int = 0, timeout_ms: int = 60000
) -> Txn:
    clock = ManualClock()
    network = FakeNetworkClient(clock)
    network.api_versions = {ApiKey.PRODUCE: 12, ApiKey.END_TXN: 5}
    if transaction_version is not None:
        network.features = {"transaction.version": transaction_version}
    acc = RecordAccumulator(
        clock=clock,
        batch_size=16384,
        linger_ms=linger_ms,
        buffer_memory=1 << 20,
        delivery_timeout_ms=120000,
    )
    tm = TransactionManager("tx-1", transaction_timeout_ms=timeout_ms)
    sender = Sender(
        accumulator=acc,
        metadata=FakeMetadata({"t": [0, 0], "u": [0]}),
        network=network,
        clock=clock,
        transaction_manager=tm,
        rng=random.Random(3),
    )
    return Txn(clock, network, acc, sender, tm)


# -- init -------------------------------------------------------------------------------------


def test_init_finds_the_transaction_coordinator_then_sends_init_producer_id_to_it() -> None:
    h = make_txn(timeout_ms=12345)
    result = h.tm.initialize_transactions()
    h.run()
    find = h.pending(FindCoordinatorRequest)
    assert find.request.node_id == 0  # the least loaded node
    assert (find.body.key, find.body.key_type) == ("tx-1", KEY_TYPE_TRANSACTION)
    h.answer_find_coordinator(node_id=1)
    init = h.pending(InitProducerIdRequest)
    assert init.request.node_id == 1
    assert init.body.transactional_id == "tx-1"
    assert init.body.transaction_timeout_ms == 12345
    assert (init.body.producer_id, init.body.producer_epoch) == (-1, -1)
    assert not result.is_completed()
    h.answer_init(pid=77, epoch=3)
    assert result.is_completed() and result.error is None
    assert (h.tm.producer_id, h.tm.producer_epoch, h.tm.state) == (77, 3, TransactionState.READY)
    assert h.tm.transaction_version == 2


def test_find_coordinator_v4_uses_the_batched_keys() -> None:
    h = make_txn()
    h.network.api_versions[ApiKey.FIND_COORDINATOR] = 6
    h.tm.initialize_transactions()
    h.run()
    find = h.pending(FindCoordinatorRequest)
    assert find.body.coordinator_keys == ["tx-1"] and find.body.key_type == KEY_TYPE_TRANSACTION
    h.network.respond(
        find,
        FindCoordinatorResponse(
            coordinators=[FindCoordinatorResponse.Coordinator("tx-1", 1, "b", 9092, 0)]
        ),
    )
    h.settle()
    assert h.pending(InitProducerIdRequest).request.node_id == 1


@pytest.mark.parametrize("code", [COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS])
def test_init_retries_after_a_backoff_on_busy_coordinator(code: int) -> None:
    h = make_txn()
    result = h.tm.initialize_transactions()
    h.run()
    h.answer_find_coordinator()
    h.answer_init(error=code)
    assert not result.is_completed()
    assert not [s for s in h.network.pending() if isinstance(s.body, InitProducerIdRequest)]
    h.run(advance_ms=10)  # inside retry.backoff.ms (100 ms, -20% jitter)
    assert len(h.requests(InitProducerIdRequest)) == 1
    h.run(advance_ms=200)
    assert len(h.requests(InitProducerIdRequest)) == 2
    assert len(h.requests(FindCoordinatorRequest)) == 1  # the same coordinator
    h.answer_init(pid=5)
    assert result.is_completed() and result.error is None


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE])
def test_init_finds_the_coordinator_again_when_it_moved(code: int) -> None:
    h = make_txn()
    result = h.tm.initialize_transactions()
    h.run()
    h.answer_find_coordinator(node_id=1)
    h.answer_init(error=code)
    h.run(advance_ms=200)
    assert len(h.requests(FindCoordinatorRequest)) == 2
    h.answer_find_coordinator(node_id=0)
    h.run(advance_ms=200)
    assert h.pending(InitProducerIdRequest).request.node_id == 0
    h.answer_init(pid=9)
    assert result.error is None and h.tm.producer_id == 9


def test_a_lost_connection_to_the_coordinator_looks_it_up_again() -> None:
    h = make_txn()
    h.tm.initialize_transactions()
    h.run()
    h.answer_find_coordinator(node_id=1)
    h.network.disconnect(h.pending(InitProducerIdRequest))
    h.run()
    h.run(advance_ms=200)
    assert len(h.requests(FindCoordinatorRequest)) == 2


def test_find_coordinator_retries_while_not_available() -> None:
    h = make_txn()
    h.tm.initialize_transactions()
    h.run()
    h.answer_find_coordinator(error=COORDINATOR_NOT_AVAILABLE)
    h.run(advance_ms=200)
    assert len(h.requests(FindCoordinatorRequest)) == 2
    h.answer_find_coordinator(node_id=1)
    assert h.pending(InitProducerIdRequest).request.node_id == 1


def test_init_timeout_says_what_it_waited_for_and_a_second_call_resumes() -> None:
    h = make_txn()
    result = h.tm.initialize_transactions()
    h.run()
    with pytest.raises(KafkaTimeoutError, match="FindCoordinator") as info:
        result.wait(0, h.tm.describe_wait)
    assert "init_transactions() again" in str(info.value)
    assert h.tm.initialize_transactions() is result  # resumes, no second InitProducerId
    h.answer_find_coordinator()
    with pytest.raises(KafkaTimeoutError, match="InitProducerId"):
        result.wait(0, h.tm.describe_wait)
    h.answer_init()
    result.wait(0, h.tm.describe_wait)
    assert len(h.requests(InitProducerIdRequest)) == 1


def test_init_with_a_timeout_above_the_broker_maximum_is_fatal_and_says_so() -> None:
    h = make_txn(timeout_ms=3_600_000)
    result = h.tm.initialize_transactions()
    h.run()
    h.answer_find_coordinator()
    h.answer_init(error=INVALID_TRANSACTION_TIMEOUT)
    assert isinstance(result.error, InvalidTransactionTimeoutError)
    assert "transaction.timeout.ms=3600000" in str(result.error)
    assert h.tm.state is TransactionState.FATAL_ERROR


# -- state machine ----------------------------------------------------------------------------


def test_operations_in_the_wrong_state_are_refused_with_a_hint() -> None:
    h = make_txn()
    with pytest.raises(InvalidTxnStateError, match=r"init_transactions\(\) first"):
        h.tm.begin_transaction(0)
    with pytest.raises(InvalidTxnStateError, match=r"init_transactions\(\) first"):
        h.send()
    h.initialized()
    with pytest.raises(InvalidTxnStateError, match=r"begin_transaction\(\) first"):
        h.send()
    with pytest.raises(InvalidTxnStateError, match="ready"):
        h.tm.begin_commit()
    with pytest.raises(InvalidTxnStateError, match="ready"):
        h.tm.initialize_transactions()
    h.tm.begin_transaction(0)
    with pytest.raises(InvalidTxnStateError, match="in transaction"):
        h.tm.begin_transaction(0)


def test_a_transaction_without_records_ends_without_end_txn() -> None:
    h = make_txn()
    h.initialized()
    h.tm.begin_transaction(0)
    result = h.tm.begin_commit()
    h.run()
    assert result.is_completed() and result.error is None
    assert not h.requests(EndTxnRequest)
    assert h.tm.state is TransactionState.READY


# -- Transactions V2 --------------------------------------------------------------------------


def test_tv2_produce_v12_adds_partitions_and_end_txn_v5_bumps_the_epoch() -> None:
    h = make_txn(transaction_version=2)
    h.initialized(pid=4000, epoch=7)
    h.tm.begin_transaction(0)
    f0 = h.send("t", 0, b"a")
    f1 = h.send("u", 0, b"b")
    h.run()
    assert not h.requests(AddPartitionsToTxnRequest)
    produce = h.pending(ProduceRequest)
    assert produce.request.version is None  # the highest negotiated: v12
    assert produce.body.transactional_id == "tx-1"
    batches = produce.batches()
    assert all(b.is_transactional and b.producer_epoch == 7 for b in batches.values())
    h.answer_produce()
    assert f0.get(0).offset == 0 and f1.get(0).offset == 0
    result = h.tm.begin_commit()
    h.run()
    end = h.pending(EndTxnRequest)
    assert end.request.version == 5 and end.request.node_id == 1
    assert (end.body.producer_id, end.body.producer_epoch, end.body.committed) == (4000, 7, True)
    h.answer_end(pid=4000, epoch=8)
    assert result.is_completed() and result.error is None
    assert (h.tm.producer_id, h.tm.producer_epoch) == (4000, 8)
    # The next transaction writes under the new epoch, sequences from 0.
    h.tm.begin_transaction(0)
    h.send("t", 0, b"c")
    h.run()
    batch = h.pending(ProduceRequest).batches()[("t", 0)]
    assert (batch.producer_epoch, batch.base_sequence) == (8, 0)


def test_commit_sends_queued_batches_without_waiting_for_linger() -> None:
    h = make_txn(linger_ms=60_000)
    h.initialized()
    h.tm.begin_transaction(0)
    h.send()
    h.run()
    assert not h.requests(ProduceRequest)  # lingering
    h.tm.begin_commit()
    h.run()
    h.answer_produce()
    assert h.pending(EndTxnRequest).body.committed


# -- Transactions V1 --------------------------------------------------------------------------


def test_tv1_adds_partitions_before_producing_and_caps_versions() -> None:
    h = make_txn(transaction_version=1)
    h.initialized(pid=4000, epoch=2)
    assert h.tm.transaction_version == 1
    h.tm.begin_transaction(0)
    h.send("t", 0)
    h.send("t", 1)
    h.run()
    assert not h.requests(ProduceRequest)  # held until the partitions are added
    h.run()
    add = h.pending(AddPartitionsToTxnRequest)
    assert add.request.node_id == 1
    assert add.body.v3_and_below_transactional_id == "tx-1"
    assert (add.body.v3_and_below_producer_id, add.body.v3_and_below_producer_epoch) == (4000, 2)
    assert [(t.name, sorted(t.partitions)) for t in add.body.v3_and_below_topics] == [("t", [0, 1])]
    h.network.respond(
        add,
        AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=[
                AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
                    "t",
                    [
                        AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(0, 0),
                        AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(1, 0),
                    ],
                )
            ]
        ),
    )
    h.settle()
    produce = h.pending(ProduceRequest)
    assert produce.request.version == 11
    assert set(produce.partitions()) == {("t", 0), ("t", 1)}
    h.answer_produce()
    # A partition already added goes straight out.
    h.send("t", 0)
    h.run()
    assert len(h.requests(AddPartitionsToTxnRequest)) == 1
    h.answer_produce()
    h.tm.begin_commit()
    h.run()
    end = h.pending(EndTxnRequest)
    assert end.request.version == 4
    h.answer_end()
    assert (h.tm.producer_epoch, h.tm.state) == (2, TransactionState.READY)
    # The next transaction adds its partitions again.
    h.tm.begin_transaction(0)
    h.send("t", 0)
    h.run()
    h.run()
    assert len(h.requests(AddPartitionsToTxnRequest)) == 2


def test_tv1_add_partitions_retries_concurrent_transactions() -> None:
    h = make_txn(transaction_version=1)
    h.initialized()
    h.tm.begin_transaction(0)
    h.send("t", 0)
    h.run()
    h.run()
    add = h.pending(AddPartitionsToTxnRequest)
    part = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
    topic = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    h.network.respond(
        add,
        AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=[topic("t", [part(0, CONCURRENT_TRANSACTIONS)])]
        ),
    )
    h.run()
    h.run(advance_ms=200)
    again = h.pending(AddPartitionsToTxnRequest)
    h.network.respond(
        again, AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[topic("t", [part(0, 0)])])
    )
    h.settle()
    assert h.pending(ProduceRequest).request.version == 11


def test_tv1_refused_partition_is_an_abortable_error() -> None:
    h = make_txn(transaction_version=1)
    h.initialized()
    h.tm.begin_transaction(0)
    future = h.send("t", 0)
    h.run()
    h.run()
    part = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
    topic = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    h.network.respond(
        h.pending(AddPartitionsToTxnRequest),
        AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=[topic("t", [part(0, TOPIC_AUTHORIZATION_FAILED)])]
        ),
    )
    h.settle()
    assert h.tm.state is TransactionState.ABORTABLE_ERROR
    # The held batch is dropped, never sent.
    assert isinstance(future.exception(0), TransactionAbortedError)
    assert not h.requests(ProduceRequest)
    with pytest.raises(AbortableTransactionError, match="abort_transaction"):
        h.tm.begin_commit()
    result = h.tm.begin_abort()
    h.run()
    assert result.is_completed() and result.error is None  # nothing reached the broker
    assert h.tm.state is TransactionState.READY


# -- abort ------------------------------------------------------------------------------------


def test_abort_drops_queued_batches_and_waits_for_those_in_flight() -> None:
    h = make_txn(linger_ms=60_000)
    h.initialized()
    h.tm.begin_transaction(0)
    in_flight = h.send("t", 0, b"sent")
    h.tm.begin_commit  # noqa: B018 - (no commit: just make the batch sendable below)
    h.accumulator.begin_flush()
    h.run()
    h.accumulator.end_flush()
    produce = h.pending(ProduceRequest)
    queued = h.send("t", 1, b"queued")
    result = h.tm.begin_abort()
    h.run()
    err = queued.exception(0)
    assert isinstance(err, TransactionAbortedError)
    assert "t-1" in str(err) and "aborted" in str(err)
    assert not h.requests(EndTxnRequest)  # the batch in flight is not answered yet
    assert not in_flight._result.done()
    h.network.respond(produce, produce_response(produce))
    h.settle()
    assert in_flight.get(0).offset == 0
    end = h.pending(EndTxnRequest)
    assert end.body.committed is False
    assert len(h.requests(ProduceRequest)) == 1
    h.answer_end(pid=4000, epoch=1)
    assert result.is_completed() and result.error is None


def test_produce_failure_makes_the_transaction_abortable_then_abort_recovers() -> None:
    h = make_txn()
    h.initialized()
    h.tm.begin_transaction(0)
    future = h.send("t", 0)
    h.run()
    h.answer_produce(errors={("t", 0): TOPIC_AUTHORIZATION_FAILED})
    assert isinstance(future.exception(0), TopicAuthorizationFailedError)
    assert h.tm.state is TransactionState.ABORTABLE_ERROR
    with pytest.raises(AbortableTransactionError) as info:
        h.send("t", 0)
    assert isinstance(info.value.__cause__, TopicAuthorizationFailedError)
    with pytest.raises(AbortableTransactionError):
        h.tm.begin_commit()
    result = h.tm.begin_abort()
    h.run()
    h.answer_end(pid=4000, epoch=1)
    assert result.error is None and h.tm.state is TransactionState.READY
    h.tm.begin_transaction(0)
    h.send("t", 0)  # usable again


# -- fencing and lost transactions ------------------------------------------------------------


def test_producer_fenced_on_commit_is_fatal() -> None:
    h = make_txn()
    h.initialized()
    h.tm.begin_transaction(0)
    h.send()
    h.run()
    h.answer_produce()
    result = h.tm.begin_commit()
    h.run()
    h.answer_end(error=PRODUCER_FENCED)
    assert isinstance(result.error, ProducerFencedError)
    assert "another producer" in str(result.error)
    assert h.tm.state is TransactionState.FATAL_ERROR
    with pytest.raises(ProducerFencedError):
        h.send()
    with pytest.raises(ProducerFencedError):
        h.tm.begin_abort()
    assert h.sender.fatal_error is result.error


def test_fatal_error_fails_every_incomplete_batch() -> None:
    h = make_txn(linger_ms=60_000)
    h.initialized()
    h.tm.begin_transaction(0)
    future = h.send()
    h.tm.transition_to_fatal_error(ProducerFencedError("fenced"))
    h.run()
    assert isinstance(future.exception(0), ProducerFencedError)
    assert not h.accumulator.has_incomplete()


def test_commit_of_a_transaction_the_coordinator_aborted_says_the_data_is_lost() -> None:
    h = make_txn(timeout_ms=2000)
    h.initialized()
    h.tm.begin_transaction(h.clock.now_ms())
    h.send()
    h.run()
    h.answer_produce()
    h.clock.advance(5000)
    result = h.tm.begin_commit()
    h.run()
    h.answer_end(error=INVALID_TXN_STATE)
    assert isinstance(result.error, InvalidTxnStateError)
    message = str(result.error)
    assert "aborted" in message and "transaction.timeout.ms=2000" in message
    assert "5000 ms ago (longer than" in message


@pytest.mark.parametrize(
    ("transaction_version", "code", "raised"),
    [(1, PRODUCER_FENCED, ProducerFencedError), (2, INVALID_TXN_STATE, InvalidTxnStateError)],
    ids=["tv1-fenced", "tv2-invalid-txn-state"],
)
def test_a_commit_the_broker_aborted_says_the_records_are_lost_and_to_begin_again(
    transaction_version: int, code: int, raised: type[Exception]
) -> None:
    # What commit_transaction() gets after the coordinator timed the transaction out: V1 fenced
    # the epoch (PRODUCER_FENCED), V2 no longer holds the transaction (INVALID_TXN_STATE).
    h = make_txn(transaction_version=transaction_version, timeout_ms=2000)
    h.initialized()
    h.tm.begin_transaction(h.clock.now_ms())
    h.send()
    h.run()
    if transaction_version == 1:
        h.run()
        h.network.respond(
            h.pending(AddPartitionsToTxnRequest),
            AddPartitionsToTxnResponse(
                results_by_topic_v3_and_below=[
                    AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
                        "t", [AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(0, 0)]
                    )
                ]
            ),
        )
        h.settle()
    h.answer_produce()
    h.clock.advance(5000)
    result = h.tm.begin_commit()
    h.run()
    h.answer_end(error=code)
    assert type(result.error) is raised
    message = str(result.error)
    assert "5000 ms ago (longer than transaction.timeout.ms=2000)" in message
    assert "The transaction was aborted and its records are lost" in message
    assert "none of them will become visible to read_committed consumers" in message
    assert "begin again: close this producer, create a new one, call init_transactions()" in (
        message
    )
    assert h.tm.state is TransactionState.FATAL_ERROR


def test_end_txn_follows_the_coordinator_when_it_moves() -> None:
    h = make_txn()
    h.initialized()
    h.tm.begin_transaction(0)
    h.send()
    h.run()
    h.answer_produce()
    result = h.tm.begin_commit()
    h.run()
    h.answer_end(error=NOT_COORDINATOR)
    h.run(advance_ms=200)
    h.answer_find_coordinator(node_id=0)
    h.run(advance_ms=200)
    end = h.pending(EndTxnRequest)
    assert end.request.node_id == 0
    h.answer_end(error=CONCURRENT_TRANSACTIONS)
    h.run(advance_ms=300)  # the second retry backs off twice as long
    h.answer_end(pid=4000, epoch=1)
    assert result.error is None
    assert len(h.requests(EndTxnRequest)) == 3


def test_commit_timeout_resumes_the_same_commit() -> None:
    h = make_txn()
    h.initialized()
    h.tm.begin_transaction(0)
    h.send()
    h.run()
    result = h.tm.begin_commit()
    with pytest.raises(KafkaTimeoutError, match="acknowledged before EndTxn"):
        result.wait(0, lambda: h.tm.describe_wait(h.accumulator.has_incomplete()))
    assert h.tm.begin_commit() is result
    h.answer_produce()
    with pytest.raises(KafkaTimeoutError, match="EndTxn"):
        result.wait(0, h.tm.describe_wait)
    h.answer_end(pid=4000, epoch=1)
    result.wait(0, h.tm.describe_wait)
    assert len(h.requests(EndTxnRequest)) == 1


# -- prepare ----------------------------------------------------------------------------------


def test_prepare_returns_the_handle_and_keeps_the_transaction_open() -> None:
    h = make_txn()
    h.initialized(pid=4000, epoch=7)
    h.tm.begin_transaction(0)
    h.send("t", 1)
    h.send("u", 0)
    h.run()
    h.answer_produce()
    prepared = h.tm.prepare()
    assert prepared == PreparedTransaction("tx-1", 4000, 7, (("t", 1), ("u", 0)))
    assert h.tm.state is TransactionState.PREPARED_TRANSACTION
    assert not h.requests(EndTxnRequest)
    for call in (h.send, h.tm.begin_commit, h.tm.begin_abort):
        with pytest.raises(InvalidTxnStateError, match=r"init_transactions\(\)"):
            call()
    h.run()
    assert not h.requests(EndTxnRequest)  # nothing ends it from here, not even close
    h.sender._txn.abort_open_transaction_on_close()  # type: ignore[union-attr]
    h.run()
    assert not h.requests(EndTxnRequest)
    result = h.tm.initialize_transactions()
    h.run()
    assert h.pending(InitProducerIdRequest).body.transactional_id == "tx-1"
    h.answer_init(pid=4000, epoch=9)
    assert result.error is None and h.tm.state is TransactionState.READY


def test_prepare_after_a_failed_record_raises_the_abortable_error() -> None:
    h = make_txn()
    h.initialized()
    h.tm.begin_transaction(0)
    h.send()
    h.run()
    h.answer_produce(errors={("t", 0): TOPIC_AUTHORIZATION_FAILED})
    with pytest.raises(AbortableTransactionError):
        h.tm.prepare()


def test_producer_without_transactional_id_refuses_transaction_calls() -> None:
    from kafka_sink import KafkaProducer

    with (
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1"}) as producer,
        pytest.raises(IllegalStateError, match=r"transactional\.id"),
    ):
        producer.begin_transaction()


def test_producer_api_timeouts_are_seconds_and_refuse_sends_outside_a_transaction() -> None:
    from kafka_sink import KafkaProducer

    producer = KafkaProducer(
        {"bootstrap.servers": "127.0.0.1:1", "transactional.id": "tx-z", "max.block.ms": 60000}
    )
    try:
        assert producer.client_id == "producer-tx-z"
        with pytest.raises(InvalidTxnStateError, match=r"init_transactions\(\) first"):
            producer.send("t", b"v")
        with pytest.raises(KafkaTimeoutError, match="FindCoordinator") as info:
            producer.init_transactions(timeout=0.2)
        assert "200 ms" in str(info.value)
        with pytest.raises(KafkaTimeoutError):
            producer.init_transactions(timeout=0.1)  # resumes the same wait
    finally:
        producer.close(0)


def test_close_does_not_wait_for_an_init_that_cannot_reach_the_coordinator() -> None:
    import time

    from kafka_sink import KafkaProducer

    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "tx-c"})
    with pytest.raises(KafkaTimeoutError):
        producer.init_transactions(timeout=0.1)
    start = time.monotonic()
    producer.close()
    assert time.monotonic() - start < 10


def _add_all(h: Txn) -> None:
    add = h.pending(AddPartitionsToTxnRequest)
    part = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
    topic = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    h.network.respond(
        add,
        AddPartitionsToTxnResponse(
            results_by_topic_v3_and_below=[
                topic(t.name, [part(p, 0) for p in t.partitions])
                for t in add.body.v3_and_below_topics
            ]
        ),
    )
    h.settle()


def test_tv1_abort_after_a_sequence_gap_bumps_the_epoch_with_init_producer_id() -> None:
    h = make_txn(transaction_version=1)
    h.initialized(pid=4000, epoch=0)
    h.tm.begin_transaction(0)
    future = h.send("t", 0)
    h.run()
    h.run()
    _add_all(h)
    h.answer_produce(errors={("t", 0): TOPIC_AUTHORIZATION_FAILED})
    assert future.exception(0) is not None
    result = h.tm.begin_abort()
    h.run()
    end = h.answer_end()
    assert end.request.version == 4 and end.body.committed is False
    # The failed batch may or may not be in the log: its sequence range is a gap, so the
    # coordinator is asked for a bumped epoch (KIP-360) before the next transaction.
    bump = h.pending(InitProducerIdRequest)
    assert (bump.body.producer_id, bump.body.producer_epoch) == (4000, 0)
    assert not result.is_completed()
    h.answer_init(pid=4000, epoch=1)
    assert result.is_completed() and result.error is None
    assert (h.tm.producer_epoch, h.tm.state) == (1, TransactionState.READY)
    h.tm.begin_transaction(0)
    h.send("t", 0)
    h.run()
    h.run()
    _add_all(h)
    batch = h.pending(ProduceRequest).batches()[("t", 0)]
    assert (batch.producer_epoch, batch.base_sequence) == (1, 0)


def test_a_new_producer_id_is_logged_at_info_the_epoch_bump_of_a_warm_producer_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = make_txn()
    with caplog.at_level(logging.DEBUG, logger="kafka_sink.producer.txn"):
        h.initialized(pid=4000, epoch=0)
        h.tm.begin_transaction(0)
        h.send("t", 1)
        h.run()
        h.answer_produce()
        h.tm.prepare()  # handed to the driver, which ends it
        result = h.tm.initialize_transactions()  # the warm producer's next task
        h.run()
        h.answer_init(4000, 2)
        result.wait(0, "")
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if "producer id" in r.getMessage()]
    assert lines == [
        (logging.INFO, "transactional.id 'tx-1': producer id 4000 epoch 0 (transaction.version 2)"),
        (
            logging.DEBUG,
            "transactional.id 'tx-1': producer id 4000 epoch 2 (transaction.version 2)",
        ),
    ]
