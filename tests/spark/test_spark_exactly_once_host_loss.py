"""Exactly-once when the driver's host is lost mid-commit: the intent store must outlive it.

The driver dies between two EndTxns of micro-batch 0 (one task's transaction committed, the
other still open), and a driver on another host takes over: nothing of the old host's disk
survives, only the checkpoint (in S3 here: a real S3-compatible server) and Kafka. It plans the
next run of the query as Spark does (``streamWriter`` on the driver), and Spark re-runs batch 0,
whose new tasks write the same rows again in new transactions of the same ids.

- ``intentStore=kafka`` (the default): the new driver finds the intent in the compacted topic,
  commits the transaction left open, and the re-run's transactions are aborted. A read_committed
  consumer reads every row once.
- ``intentStore=checkpoint`` with its files lost with the host: the new driver knows nothing, the
  re-run commits its own transactions, and the rows of the transaction committed before the
  crash are read twice (the test's contrast, so it can fail).

Spark writes its checkpoint through Hadoop, which has no s3a client here, so the driver-side
calls are made as Spark makes them (plan, then commit with the tasks' messages, from a frame of
pyspark's commit worker's file as Spark's commit call runs), and the tasks' transactions are
prepared by real transactional producers, each writing its own partition.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sparkutil import assert_nothing_left_open

from kafka_sink.producer.producer import KafkaProducer
from kafka_sink.spark.commit_log.document import PyKafkaCommitMessage
from kafka_sink.spark.datasource import INTENTS_DIRNAME, PyKafkaDataSource
from kafka_sink.spark.driver.eos import committer, kafka_intents
from kafka_sink.spark.driver.eos.committer import TransactionOps, listing_ops
from kafka_sink.spark.eos_plan import transactional_id
from kafka_sink.spark.writer import PyKafkaStreamWriter
from kafka_sink.testing.oracle import read_all
from kafka_sink.testing.s3 import LocalS3
from tests.conftest import TopicFactory
from tests.fakes.spark import from_commit_worker

ROWS = 5


def _commit_call(options: dict[str, str]) -> PyKafkaStreamWriter:
    """The writer Spark's commit worker builds to commit the batch (no start work there)."""
    return from_commit_worker(lambda: PyKafkaDataSource(options).streamWriter(_schema(), False))


class _DriverDied(BaseException):
    """The driver process ends here (nothing after it in that process runs)."""


def _forget_everything_in_memory() -> None:
    """A driver on a new host: no cached store positions, no cached checks."""
    kafka_intents._POSITIONS.clear()
    kafka_intents._CHECKED.clear()
    kafka_intents.close_idle()


@pytest.fixture(autouse=True)
def _isolated() -> Iterator[None]:
    _forget_everything_in_memory()
    yield
    _forget_everything_in_memory()


def _schema() -> Any:
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([StructField("value", StringType())])


def _prepare_tasks(
    bootstrap: str, topic: str, prefix: str, producers: list[KafkaProducer]
) -> list[PyKafkaCommitMessage]:
    """Two tasks (Spark partitions 0 and 1, attempt 0) write their rows and prepare."""
    messages = []
    for partition in (0, 1):
        producer = KafkaProducer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": transactional_id(prefix, partition, 0),
                "transaction.timeout.ms": "120000",
            }
        )
        producers.append(producer)
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(ROWS):
            producer.send(topic, f"p{partition}-row{i}".encode(), partition=partition)
        prepared = producer.prepare_transaction(30)
        messages.append(
            PyKafkaCommitMessage(partition, 0, len(producers), 0, (), transaction=prepared)
        )
    return messages


def _die_after_the_first_end_txn(monkeypatch: pytest.MonkeyPatch) -> None:
    def dying_ops(config: Any, timeout_s: float | None = None) -> TransactionOps:
        real = listing_ops(config, timeout_s)

        def complete_all(handles: Any, commit: bool) -> list[Any]:
            real.complete(handles[0], commit)
            raise _DriverDied

        return dataclasses.replace(real, complete_all=complete_all)

    monkeypatch.setattr(committer, "listing_ops", dying_ops)


@pytest.mark.parametrize("store", ["kafka", "checkpoint"])
def test_the_driver_host_is_lost_between_two_end_txns(
    store: str,
    *,
    aws: LocalS3,
    bucket: str,
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = topic_factory(partitions=2)
    query_id = str(uuid.uuid4())
    run = uuid.uuid4().hex[:8]
    if store == "kafka":
        checkpoint = f"s3a://{bucket}/{run}/ck"
        on_disk = aws.basedir / bucket / run / "ck"
    else:
        checkpoint = str(tmp_path / "ck")
        on_disk = tmp_path / "ck"
    on_disk.mkdir(parents=True)
    (on_disk / "metadata").write_text(json.dumps({"id": query_id}) + "\n")  # as Spark writes it
    (on_disk / "offsets").mkdir()  # Spark writes a batch's offsets before it plans the batch
    (on_disk / "offsets" / "0").write_text("v1\n")
    options = {
        "kafka.bootstrap.servers": kafka_bootstrap,
        "topic": topic,
        "checkpointLocation": checkpoint,
        "deliveryGuarantee": "exactly-once",
        "intentStore": store,
        "commitLog": "none",
    }
    if store == "kafka":
        options["intentTopic"] = f"intents-{run}"
    producers: list[KafkaProducer] = []
    try:
        # The first driver plans batch 0; its tasks write and prepare; its commit dies midway.
        writer = PyKafkaDataSource(options).streamWriter(_schema(), False)
        assert writer.eos is not None and writer.eos.query_key == query_id
        prefix = writer.eos.prefix
        first = _prepare_tasks(kafka_bootstrap, topic, prefix, producers)
        with monkeypatch.context() as patch:
            _die_after_the_first_end_txn(patch)
            with pytest.raises(_DriverDied):
                _commit_call(options).commit(first, 0)

        # The host is gone: nothing in memory, and its local files with it.
        _forget_everything_in_memory()
        shutil.rmtree(on_disk / INTENTS_DIRNAME, ignore_errors=True)

        # A new driver plans the restarted query; Spark re-runs batch 0 and commits it.
        writer = PyKafkaDataSource(options).streamWriter(_schema(), False)
        rerun = _prepare_tasks(kafka_bootstrap, topic, prefix, producers)
        _commit_call(options).commit(rerun, 0)
    finally:
        for producer in producers:
            producer.close(5)

    records = read_all(
        kafka_bootstrap, topic, expected=2 * ROWS, isolation_level="read_committed", timeout_s=30
    )
    values = sorted(r.value.decode() for r in records if r.value is not None)
    expected = sorted(f"p{p}-row{i}" for p in (0, 1) for i in range(ROWS))
    if store == "kafka":
        assert values == expected  # every row once
    else:
        # The transaction committed before the crash, then the re-run's: partition 0 twice.
        assert values == sorted(expected + [f"p0-row{i}" for i in range(ROWS)])
    assert_nothing_left_open(kafka_bootstrap, topic, prefix)
