"""PreparedTransaction: the handle a task hands to the driver must survive pickling intact."""

from __future__ import annotations

import pickle

import pytest

from kafka_sink.prepared import PreparedTransaction


def test_a_prepared_transaction_pickles_and_compares_by_value() -> None:
    prepared = PreparedTransaction("sink-q1-3", 4001, 7, [("t2", 1), ("t1", 0), ("t2", 1)])
    assert prepared.partitions == (("t1", 0), ("t2", 1))
    copy = pickle.loads(pickle.dumps(prepared))
    assert copy == prepared and hash(copy) == hash(prepared)
    assert copy.transactional_id == "sink-q1-3"
    assert (copy.producer_id, copy.producer_epoch) == (4001, 7)


@pytest.mark.parametrize(
    ("transactional_id", "producer_id", "producer_epoch"),
    [("", 1, 0), ("t", -1, 0), ("t", 1, -1), ("t", 1, 32768)],
)
def test_a_prepared_transaction_refuses_an_impossible_handle(
    transactional_id: str, producer_id: int, producer_epoch: int
) -> None:
    with pytest.raises(ValueError, match="PreparedTransaction"):
        PreparedTransaction(transactional_id, producer_id, producer_epoch)


def test_the_transaction_api_is_importable_from_the_package() -> None:
    import kafka_sink
    from kafka_sink.admin import transactions as admin_transactions

    assert kafka_sink.PreparedTransaction is PreparedTransaction
    assert kafka_sink.complete_transaction is admin_transactions.complete_transaction
    assert kafka_sink.list_transactions is admin_transactions.list_transactions
    assert kafka_sink.abort_transactions is admin_transactions.abort_transactions
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = kafka_sink.nope
