"""Prepare in one process, complete in another, against the session broker (Transactions V2).

A separate Python process writes a transaction with our KafkaProducer (``send()`` and
``send_columns()``, two topics), prepares it, prints the pickled ``PreparedTransaction`` and exits
with the transaction open; this process ends it with ``complete_transaction`` and an independent
kafka-python consumer checks what became visible. The same on the Transactions V1 cluster, and the
coordinator's timeout, are in ``test_producer_transactions_slow``.
"""

from __future__ import annotations

from txn_scenarios import (
    commit_prepared_in_another_process,
    describe,
    new_id,
    prepare_in_another_process,
    read_records,
    topic_maker,
    write_after,
)

from kafka_sink.admin.transactions import complete_transaction


def test_prepared_in_another_process_committed_here_then_again(kafka_bootstrap: str) -> None:
    commit_prepared_in_another_process(
        kafka_bootstrap, topic_maker(kafka_bootstrap), expected_transaction_version=2
    )


def test_prepared_in_another_process_aborted_here(kafka_bootstrap: str) -> None:
    make = topic_maker(kafka_bootstrap)
    a, b = make(3), make(2)
    tid = new_id("txn-xproc")
    prepared, written = prepare_in_another_process(kafka_bootstrap, tid, a, b, count=6)
    config = {"bootstrap.servers": kafka_bootstrap}
    bumped = (prepared.producer_id, prepared.producer_epoch + 1)
    assert complete_transaction(config, prepared, commit=False, timeout=30) == bumped
    assert complete_transaction(config, prepared, commit=False, timeout=30) == bumped
    after = write_after(kafka_bootstrap, a, 3) + write_after(kafka_bootstrap, b, 2)
    # read_committed reaches the records written after it (the abort markers are in), and
    # none of the transaction's; read_uncommitted sees all of them.
    assert read_records(kafka_bootstrap, [a, b], "read_committed", after) == sorted(after)
    everything = sorted(written + after)
    assert read_records(kafka_bootstrap, [a, b], "read_uncommitted", everything) == everything
    assert describe(kafka_bootstrap, tid)[0] == "CompleteAbort"


def test_a_prepared_transaction_that_wrote_nothing_completes_without_error(
    kafka_bootstrap: str,
) -> None:
    make = topic_maker(kafka_bootstrap)
    a, b = make(3), make(2)
    tid = new_id("txn-xproc-empty")
    prepared, written = prepare_in_another_process(kafka_bootstrap, tid, a, b, count=0)
    assert written == [] and prepared.partitions == ()
    # The coordinator never started it: an EndTxn would get INVALID_TXN_STATE.
    assert describe(kafka_bootstrap, tid) == (
        "Empty",
        prepared.producer_id,
        prepared.producer_epoch,
    )
    config = {"bootstrap.servers": kafka_bootstrap}
    assert complete_transaction(config, prepared, commit=True, timeout=30) is None
    assert complete_transaction(config, prepared, commit=False, timeout=30) is None
    # Nothing was sent to end it: the id is where the producer left it.
    assert describe(kafka_bootstrap, tid) == (
        "Empty",
        prepared.producer_id,
        prepared.producer_epoch,
    )
