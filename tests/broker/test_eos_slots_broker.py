"""Two task attempts of one Spark partition that run at the same time (real broker).

A stage re-attempt restarts Spark's attempt numbers at 0 while a task of the earlier stage
attempt may still run: both are "partition 0, attempt 0". Each runs in a Python worker of its
own, so here each ``acquire`` gets a producer of its own (not the worker cache's shared entry).
The re-run's attempt writes and prepares its transaction; then the zombie acquires. The zombie
must not abort the prepared transaction: the driver commits it, aborts the zombie's, and an
independent read_committed consumer (kafka-python) reads exactly the re-run's rows. With the
slot choice disabled (every slot looks free, so both take the attempt number's slot) the
zombie's InitProducerId aborts the prepared transaction and the commit finds it lost.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_sink.admin.transactions import TransactionAdmin
from kafka_sink.errors import TransactionLostError
from kafka_sink.spark.executor import producer_cache, slots
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.options import SinkOptions
from kafka_sink.testing.oracle import read_all
from tests.spark.sparkutil import assert_nothing_left_open

pytestmark = pytest.mark.broker

TopicFactory = Callable[..., str]


@pytest.fixture
def own_worker_each(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every acquire builds a new producer, as two Python workers would."""
    made: list[Any] = []

    def acquire(items: Any, create: Any, *, idle_timeout_ms: int = 0) -> tuple[Any, bool]:
        producer = create(dict(items))
        made.append(producer)
        return producer, False

    monkeypatch.setattr(producer_cache, "acquire_transactional", acquire)
    yield made
    for producer in made:
        producer.close(10)


def _options(bootstrap: str, topic: str) -> SinkOptions:
    return SinkOptions.from_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": topic,
            "deliveryGuarantee": "exactly-once",
            "kafka.transaction.timeout.ms": "60000",
        }
    )


def _write(producer: Any, topic: str, rows: list[bytes]) -> None:
    import pyarrow as pa

    producer.send_columns(topic, pa.array(rows, pa.binary())).get(30)


def _commit_first_abort_second(
    bootstrap: str, topic: str, own_worker_each: list[Any], prefix: str
) -> tuple[list[bytes], list[bytes]]:
    """The scenario: returns (the re-run's rows, the zombie's rows); the commit may raise."""
    strategy = task_module._ExactlyOnce(_options(bootstrap, topic), prefix)
    rerun = task_module._TaskInfo(0, 0, 200, 1)
    zombie = task_module._TaskInfo(0, 0, 100, 1)  # the earlier stage attempt's task
    rerun_rows = [f"rerun-{i}".encode() for i in range(10)]
    zombie_rows = [f"zombie-{i}".encode() for i in range(7)]
    first = strategy.acquire(rerun)
    _write(first, topic, rerun_rows)
    prepared = first.prepare_transaction(30)
    second = strategy.acquire(zombie)
    _write(second, topic, zombie_rows)
    zombie_prepared = second.prepare_transaction(30)
    with TransactionAdmin({"bootstrap.servers": bootstrap}, 30) as admin:
        try:
            admin.complete(prepared, commit=True)
        finally:
            admin.complete(zombie_prepared, commit=False)
    return rerun_rows, zombie_rows


def _read_committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    records = read_all(bootstrap, topic, expected=expected, isolation_level="read_committed")
    return sorted(r.value for r in records if r.value is not None)


def test_a_zombie_of_an_earlier_stage_attempt_does_not_abort_the_re_runs_prepared_transaction(
    kafka_bootstrap: str, topic_factory: TopicFactory, own_worker_each: list[Any]
) -> None:
    topic = topic_factory(partitions=1)
    prefix = f"slots-{uuid.uuid4().hex[:8]}"
    rerun_rows, _zombie_rows = _commit_first_abort_second(
        kafka_bootstrap, topic, own_worker_each, prefix
    )
    ids = [p.config.transactional_id for p in own_worker_each]
    assert ids == [f"{prefix}-0-0", f"{prefix}-0-1"]  # the zombie took the next free slot
    assert _read_committed(kafka_bootstrap, topic, len(rerun_rows)) == sorted(rerun_rows)
    assert_nothing_left_open(kafka_bootstrap, topic, prefix, timeout_s=30)


def test_without_the_slot_choice_the_zombie_aborts_the_prepared_transaction(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    own_worker_each: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every slot looks free: both attempts take slot 0, as ids built from the attempt number do.
    monkeypatch.setattr(slots, "describe_states", lambda config, ids: [None] * len(ids))
    topic = topic_factory(partitions=1)
    prefix = f"noslots-{uuid.uuid4().hex[:8]}"
    with pytest.raises(TransactionLostError, match="PRODUCER_FENCED"):
        _commit_first_abort_second(kafka_bootstrap, topic, own_worker_each, prefix)
    assert [p.config.transactional_id for p in own_worker_each] == [f"{prefix}-0-0"] * 2
    assert _read_committed(kafka_bootstrap, topic, 0) == []  # the re-run's rows are lost
    assert_nothing_left_open(kafka_bootstrap, topic, prefix, timeout_s=30)
