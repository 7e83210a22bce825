"""A prepared transaction's outcome read from its markers, after its id moved on, on a real broker.

A child process (confluent-kafka) writes a transaction to two partitions after a plain record
in each, and dies with it open. The driver's side commits it (or not) with EndTxn and never looks
at the answer, as when the answer is lost; then another producer's InitProducerId on the same
id moves it on. The coordinator then shows the id Empty at the epoch after next in both cases,
and a retried commit is refused in both; :class:`ControlRecordReader` tells them apart from the
partitions, and an independent read_committed consumer (kafka-python) agrees.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable

import pytest

from kafka_sink.admin.control_records import ControlRecordReader, TransactionOutcomeUnknownError
from kafka_sink.admin.transactions import (
    complete_transaction,
    describe_transactions,
    list_transactions,
)
from kafka_sink.errors import TransactionLostError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.spark.driver.eos.committer import (
    COMMITTED,
    EosCommitter,
    TaskTransaction,
)
from kafka_sink.spark.driver.eos.intents import DONE, MemoryIntentStore
from kafka_sink.testing.oracle import import_kafka_python, read_all
from tests.broker.marker_scenarios import ops_answer_lost_once
from tests.txn_children import INIT_TRANSACTIONS, OPEN_AND_DIE

TopicFactory = Callable[..., str]

pytestmark = pytest.mark.broker


def _run(script: str, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-c", script, *args], check=True, timeout=60, capture_output=True
    )


def _prepared_then_moved_on(
    bootstrap: str, topic: str, *, commit_first: bool
) -> PreparedTransaction:
    config = {"bootstrap.servers": bootstrap}
    tid = f"markers-{uuid.uuid4().hex[:8]}"
    _run(OPEN_AND_DIE, bootstrap, tid, topic)
    (listing,) = list_transactions(config, tid, timeout=30)
    prepared = listing.prepared()
    assert listing.state == "Ongoing" and prepared.partitions == ((topic, 0), (topic, 1))
    if commit_first:
        complete_transaction(config, prepared, commit=True, timeout=30)  # its answer unread
    _run(INIT_TRANSACTIONS, bootstrap, tid)  # a stale attempt's InitProducerId on the same id
    now = describe_transactions(config, [tid], timeout=30)[tid]
    assert now is not None
    assert (now.state, now.producer_epoch) == ("Empty", prepared.producer_epoch + 2)
    with pytest.raises(TransactionLostError):  # what the coordinator says: the same both ways
        complete_transaction(config, prepared, commit=True, timeout=30)
    return prepared


def _outcome(
    bootstrap: str, prepared: PreparedTransaction, first: int = 1, timeout_s: float = 30
) -> bool:
    reader = ControlRecordReader.from_config({"bootstrap.servers": bootstrap}, timeout_s)
    assert isinstance(reader, ControlRecordReader)
    try:
        return reader.transaction_outcome(prepared, dict.fromkeys(prepared.partitions, first))
    finally:
        reader.close()


def _visible(bootstrap: str, topic: str) -> list[bytes]:
    kafka = import_kafka_python()
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    try:  # a record after the markers: reading it proves nothing is held back
        for partition in (0, 1):
            producer.send(topic, value=b"after", partition=partition).get(timeout=30)
    finally:
        producer.close()
    records = read_all(bootstrap, topic, isolation_level="read_committed")
    return sorted(r.value for r in records if r.value is not None)


def test_a_commit_applied_before_its_id_moved_on_reads_commit(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2)
    prepared = _prepared_then_moved_on(kafka_bootstrap, topic, commit_first=True)
    assert _outcome(kafka_bootstrap, prepared) is True
    rows = [b"after"] * 2 + [b"before"] * 2 + [f"txn-{i}".encode() for i in range(4)]
    assert _visible(kafka_bootstrap, topic) == sorted(rows)


def test_a_transaction_fenced_before_its_commit_reads_abort(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2)
    prepared = _prepared_then_moved_on(kafka_bootstrap, topic, commit_first=False)
    assert _outcome(kafka_bootstrap, prepared) is False
    assert _visible(kafka_bootstrap, topic) == [b"after"] * 2 + [b"before"] * 2


def test_a_marker_not_in_the_log_is_an_error_naming_the_id(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=2)
    prepared = _prepared_then_moved_on(kafka_bootstrap, topic, commit_first=True)
    # Read from past the marker: up to the high watermark nothing tells, and nothing is guessed.
    # As from a leader behind the marker, it is asked again until the deadline, then unknown.
    with pytest.raises(TransactionOutcomeUnknownError, match=prepared.transactional_id) as info:
        _outcome(kafka_bootstrap, prepared, first=4, timeout_s=3)
    assert "did not finish within 3000 ms" in str(info.value)
    assert sorted(info.value.causes) == sorted(prepared.partitions)


def test_the_committer_counts_a_commit_whose_answer_was_lost_as_committed(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    """The driver's commit on the real cluster: the first EndTxn is applied and its answer
    lost; before the retry a stale attempt's InitProducerId moves the id on. The retry is
    refused, the marker says COMMIT, and the batch is committed once."""
    topic = topic_factory(partitions=2)
    config = {"bootstrap.servers": kafka_bootstrap}
    tid = f"markers-{uuid.uuid4().hex[:8]}"
    prefix = tid.rsplit("-", 1)[0]
    _run(OPEN_AND_DIE, kafka_bootstrap, tid, topic)
    (listing,) = list_transactions(config, tid, timeout=30)
    ops, calls = ops_answer_lost_once(
        config, lambda: _run(INIT_TRANSACTIONS, kafka_bootstrap, tid), timeout_s=30
    )
    store = MemoryIntentStore()
    committer = EosCommitter(store, ops, query_key="q", prefix=prefix, sleep_ms=lambda ms: None)
    task = TaskTransaction(0, listing.prepared(), None, (((topic, 0), 1), ((topic, 1), 1)))
    try:
        assert committer.commit(1, [task]) == COMMITTED
    finally:
        committer.close()
    assert calls == [True, True]
    last = store.last("q")
    assert last is not None and last.state == DONE
    rows = [b"after"] * 2 + [b"before"] * 2 + [f"txn-{i}".encode() for i in range(4)]
    assert _visible(kafka_bootstrap, topic) == sorted(rows)
