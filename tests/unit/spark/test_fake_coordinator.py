"""The fake transaction coordinator answers as Kafka's TransactionCoordinator (TV2) does."""

from __future__ import annotations

import pytest

from kafka_sink.errors import (
    ConcurrentTransactionsError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionLostError,
)
from tests.fakes.coordinator import (
    CONCURRENT_TRANSACTIONS,
    LOST_ANSWER,
    TIMEOUT,
    FakeCoordinator,
    coordinator_ops,
)

TP = ("t", 0)


def test_a_committed_transaction_is_visible_and_its_epoch_bumped() -> None:
    c = FakeCoordinator()
    t = c.begin("a", {TP: ["x", "y"]})
    assert c.read_committed() == {TP: []}
    assert c.open_transactions() == ["a"]
    assert c.end_txn("a", t.producer_id, t.producer_epoch, True) == (
        t.producer_id,
        t.producer_epoch + 1,
    )
    assert c.read_committed() == {TP: ["x", "y"]} and c.open_transactions() == []
    described = c.describe("a")
    assert described is not None and described.state == "CompleteCommit"


def test_a_retried_end_answers_none_and_a_commit_after_an_abort_is_invalid() -> None:
    c = FakeCoordinator()
    t = c.begin("a", {TP: ["x"]})
    c.end_txn("a", t.producer_id, t.producer_epoch, True)
    c.end_txn("a", t.producer_id, t.producer_epoch, True)  # the retry: NONE
    with pytest.raises(InvalidTxnStateError):
        c.end_txn("a", t.producer_id, t.producer_epoch + 1, True)  # nothing open: Empty-like
    u = c.begin("a", {TP: ["z"]})
    c.end_txn("a", u.producer_id, u.producer_epoch, False)
    with pytest.raises(InvalidTxnStateError):
        c.end_txn("a", u.producer_id, u.producer_epoch, True)
    assert c.read_committed() == {TP: ["x"]}


def test_a_retried_end_after_the_epoch_rolled_over_to_a_new_producer_id_answers_none() -> None:
    c = FakeCoordinator()
    c.init_producer_id("a")
    c.txns["a"].producer_epoch = 32765  # the next InitProducerId gives the last epoch, 32766
    t = c.begin("a", {TP: ["x"]})
    assert t.producer_epoch == 32766
    moved = c.end_txn("a", t.producer_id, t.producer_epoch, True)
    assert moved[0] != t.producer_id and moved[1] == 0  # the commit rolled over
    assert c.end_txn("a", t.producer_id, t.producer_epoch, True) == moved  # Kafka's retryOnOverflow
    with pytest.raises(InvalidProducerIdMappingError):
        c.end_txn("a", t.producer_id, 5, True)  # not a retry of that end
    assert c.read_committed() == {TP: ["x"]}


def test_init_producer_id_fences_an_ongoing_transaction() -> None:
    c = FakeCoordinator()
    t = c.begin("a", {TP: ["x"]})
    pid, epoch = c.init_producer_id("a")
    assert (pid, epoch) == (t.producer_id, t.producer_epoch + 2)  # abort at +1, then +2
    assert c.describe("a").state == "Empty"  # type: ignore[union-attr]
    with pytest.raises(ProducerFencedError):
        c.end_txn("a", t.producer_id, t.producer_epoch, True)
    assert c.read_committed() == {TP: []} and c.open_transactions() == []


def test_a_wrong_producer_id_and_an_unknown_id() -> None:
    c = FakeCoordinator()
    t = c.begin("a", {TP: ["x"]})
    with pytest.raises(InvalidProducerIdMappingError):
        c.end_txn("a", t.producer_id + 1, t.producer_epoch, True)
    assert c.describe("nope") is None


def test_the_reaper_aborts_a_transaction_older_than_its_timeout() -> None:
    c = FakeCoordinator()
    t = c.begin("a", {TP: ["x"]}, timeout_ms=1000)
    c.advance(1000)
    assert c.open_transactions() == ["a"]
    c.advance(1)
    described = c.describe("a")
    assert described is not None
    assert (described.state, described.producer_epoch) == ("CompleteAbort", t.producer_epoch + 1)
    with pytest.raises(InvalidTxnStateError):
        c.end_txn("a", t.producer_id, t.producer_epoch, True)


def test_scripted_answers_errors_lost_answers_and_timeouts() -> None:
    c = FakeCoordinator()
    t = c.begin("a", {TP: ["x"]})
    c.script("end_txn", CONCURRENT_TRANSACTIONS, TIMEOUT, LOST_ANSWER)
    with pytest.raises(ConcurrentTransactionsError):
        c.end_txn("a", t.producer_id, t.producer_epoch, True)
    with pytest.raises(KafkaTimeoutError):
        c.end_txn("a", t.producer_id, t.producer_epoch, True)
    assert c.open_transactions() == ["a"]  # neither was applied
    with pytest.raises(KafkaConnectionError):
        c.end_txn("a", t.producer_id, t.producer_epoch, True)
    assert c.read_committed() == {TP: ["x"]}  # applied, only the answer was lost
    c.end_txn("a", t.producer_id, t.producer_epoch, True)  # the retry: NONE


def test_a_listing_can_miss_an_id_a_description_never_does() -> None:
    c = FakeCoordinator()
    c.begin("p-0", {TP: ["x"]})
    c.begin("p-1", {("t", 1): ["y"]})
    c.listing_misses.add("p-1")
    assert [t.transactional_id for t in c.list_transactions("p-", frozenset({"Ongoing"}))] == [
        "p-0"
    ]
    ops = coordinator_ops(c)
    assert ops.describe is not None
    assert ops.describe(["p-1"])["p-1"].state == "Ongoing"  # type: ignore[union-attr]


def test_the_ops_report_a_lost_commit_and_accept_aborting_an_aborted_one() -> None:
    c = FakeCoordinator()
    t = c.begin("a", {TP: ["x"]}, timeout_ms=10)
    c.advance(11)
    ops = coordinator_ops(c)
    with pytest.raises(TransactionLostError, match="INVALID_TXN_STATE"):
        ops.complete(t, True)
    ops.complete(t, False)  # already aborted: done
    assert ops.complete_all is not None
    [outcome] = ops.complete_all([t], True)
    assert isinstance(outcome, TransactionLostError)


def test_a_describe_round_answers_each_ids_state_and_the_reaper_fences_one_id() -> None:
    c = FakeCoordinator()
    c.begin("a", {TP: ["x"]})
    c.init_producer_id("b")
    assert c.describe_states({}, ["a", "b", "c"]) == ["Ongoing", "Empty", None]
    c.time_out("a")
    assert c.describe_states({}, ["a"]) == ["CompleteAbort"]
    assert c.describes == [("a", "b", "c"), ("a",)]
    assert c.ever_used == {"a", "b"} and c.read_committed() == {TP: []}
