"""The setup of the unreadable-marker broker tests: a commit whose EndTxn was applied but whose
answer was lost, then its id moved on by a stale attempt's InitProducerId, so that the retry is
refused and only the partition's marker can tell what happened.

A child process (confluent-kafka) writes a transaction to two partitions of ``topic`` ("before"
on each, then two rows each) and dies with it open; :func:`commit_answer_lost` records the
batch's intent in a memory store and commits it through the real admin client, dropping the
first EndTxn's answer and running ``after_applied`` there (the stale InitProducerId, and what
else the test makes the brokers forget). :func:`visible` is what an independent read_committed
consumer (kafka-python) reads afterwards.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

import pytest

from kafka_sink.admin.transactions import list_transactions
from kafka_sink.errors import KafkaConnectionError, KafkaError
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.sink_errors import SinkCommitOutcomeUnknownError
from kafka_sink.spark.driver.eos.committer import (
    EosCommitter,
    TaskTransaction,
    TransactionOps,
    listing_ops,
)
from kafka_sink.spark.driver.eos.intents import MemoryIntentStore
from kafka_sink.testing.oracle import import_kafka_python, read_all
from tests.txn_children import INIT_TRANSACTIONS, OPEN_AND_DIE

__all__ = [
    "INIT_TRANSACTIONS",
    "commit_answer_lost",
    "open_and_die",
    "ops_answer_lost_once",
    "run_child",
    "visible",
]


def run_child(script: str, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-c", script, *args], check=True, timeout=60, capture_output=True
    )


def open_and_die(bootstrap: str, tid: str, topic: str) -> None:
    """A child writes ``tid``'s transaction to partitions 0 and 1 of ``topic`` and dies."""
    run_child(OPEN_AND_DIE, bootstrap, tid, topic)


def ops_answer_lost_once(
    config: Mapping[str, str], after_applied: Callable[[], None], timeout_s: float = 10
) -> tuple[TransactionOps, list[bool]]:
    """The real admin client's ops, whose first EndTxn round is applied but answered with a lost
    connection, ``after_applied`` run in between; and the list of the rounds' commit flags."""
    real = listing_ops(config, timeout_s)
    calls: list[bool] = []

    def answer_lost_once(
        handles: Sequence[PreparedTransaction], commit: bool
    ) -> list[KafkaError | None]:
        assert real.complete_all is not None
        out = list(real.complete_all(handles, commit))
        if not calls:  # applied; the answer never heard
            after_applied()
            out = [KafkaConnectionError("the connection was lost (scripted)")] * len(out)
        calls.append(commit)
        return out

    return dataclasses.replace(real, complete_all=answer_lost_once), calls


def commit_answer_lost(
    config: Mapping[str, str],
    store: MemoryIntentStore,
    prefix: str,
    written: tuple[str, str],
    after_applied: Callable[[], None],
) -> SinkCommitOutcomeUnknownError:
    """Commit the transaction ``written`` (its transactional id and topic) as batch 1 of query
    ``q``; the first EndTxn is applied, its answer dropped and ``after_applied`` run. The commit
    must fail as unknown: its error."""
    tid, topic = written
    (listing,) = list_transactions(config, tid, timeout=30)
    task = TaskTransaction(0, listing.prepared(), None, (((topic, 0), 1), ((topic, 1), 1)))
    ops, _ = ops_answer_lost_once(config, after_applied)
    committer = EosCommitter(
        store,
        ops,
        query_key="q",
        prefix=prefix,
        sleep_ms=lambda ms: None,
    )
    try:
        with pytest.raises(SinkCommitOutcomeUnknownError) as info:
            committer.commit(1, [task])
    finally:
        committer.close()
    return info.value


def visible(bootstrap: str, topic: str) -> list[bytes]:
    """The values a read_committed consumer reads, after one more record per partition (reading
    it proves nothing holds the partitions back)."""
    kafka = import_kafka_python()
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for partition in (0, 1):
            producer.send(topic, value=b"after", partition=partition).get(timeout=30)
    finally:
        producer.close()
    records = read_all(bootstrap, topic, isolation_level="read_committed")
    return sorted(r.value for r in records if r.value is not None)
