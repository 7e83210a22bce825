"""Exactly-once tasks keep their transactional producer warm across micro-batches (real broker).

The streaming writer's task path (``write()``) and driver path (``commit()``) run in this process
against a real broker, two micro-batches in a row for the same Spark partition and attempt: the
second must reuse the cached producer (re-initialised, not rebuilt), and one fenced in between
by another producer of the same transactional id must be replaced. An independent
read_committed consumer (kafka-python) checks every row is visible exactly once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink.producer.producer import KafkaProducer
from kafka_sink.spark.eos_plan import EosPlan
from kafka_sink.spark.executor import producer_cache
from kafka_sink.spark.executor import task as task_module
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaStreamWriter
from kafka_sink.testing.oracle import read_all

pytestmark = pytest.mark.broker

TopicFactory = Callable[..., str]


@pytest.fixture
def created(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    producer_cache.close_all()
    made: list[Any] = []
    real = task_module._create_transactional

    def create(config: dict[str, str]) -> Any:
        producer = real(config)
        made.append(producer)
        return producer

    monkeypatch.setattr(task_module, "_create_transactional", create)
    yield made
    producer_cache.close_all()


def _stream_writer(bootstrap: str, topic: str, tmp_path: Path, prefix: str) -> PyKafkaStreamWriter:
    options = SinkOptions.from_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": topic,
            "deliveryGuarantee": "exactly-once",
            "kafka.transaction.timeout.ms": "60000",
        }
    )
    layout = InputLayout(
        topic_column=False,
        key_column=False,
        partition_column=False,
        headers_column=False,
        timestamp=None,
    )
    eos = EosPlan(prefix, f"q-{prefix}", str(tmp_path / "intents"))
    return PyKafkaStreamWriter(
        options, layout, streaming=True, overwrite=False, write_id=prefix, eos=eos
    )


def _run_batch(
    writer: PyKafkaStreamWriter, batch_id: int, rows: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    info = task_module._TaskInfo(0, 0, batch_id, batch_id)
    monkeypatch.setattr(task_module, "_task_info", lambda: info)
    message = writer.write(iter([pa.record_batch({"value": rows})]))
    writer.commit([message], batch_id)


def _committed(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    records = read_all(bootstrap, topic, expected=expected, isolation_level="read_committed")
    return sorted(r.value for r in records if r.value is not None)


def test_the_next_micro_batch_reuses_the_warm_transactional_producer(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    created: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = topic_factory(partitions=2)
    prefix = f"reuse-{uuid.uuid4().hex[:8]}"
    writer = _stream_writer(kafka_bootstrap, topic, tmp_path, prefix)
    rows = [[f"b{b}-{i}".encode() for i in range(20)] for b in range(3)]
    for batch_id, batch in enumerate(rows):
        _run_batch(writer, batch_id, batch, monkeypatch)
    assert len(created) == 1  # one producer for the three batches
    assert producer_cache.cached_count() == 1
    expected = sorted(v for batch in rows for v in batch)
    assert _committed(kafka_bootstrap, topic, len(expected)) == expected


def _fence(bootstrap: str, topic: str, transactional_id: str) -> None:
    """Another producer takes the id (its InitProducerId fences the older epoch) and commits."""
    other = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    try:
        other.init_transactions(30)
        other.begin_transaction()
        other.send(topic, b"other").get(30)
        other.commit_transaction(30)
    finally:
        other.close(30)


def test_a_producer_fenced_during_its_task_is_never_reused(
    kafka_bootstrap: str,
    topic_factory: TopicFactory,
    tmp_path: Path,
    created: list[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = topic_factory(partitions=2)
    prefix = f"fence-{uuid.uuid4().hex[:8]}"
    writer = _stream_writer(kafka_bootstrap, topic, tmp_path, prefix)
    first = [f"first-{i}".encode() for i in range(10)]
    _run_batch(writer, 0, first, monkeypatch)
    [cached] = created
    begin = cached.begin_transaction

    def begin_then_fenced() -> None:
        begin()
        _fence(kafka_bootstrap, topic, f"{prefix}-0-0")

    monkeypatch.setattr(cached, "begin_transaction", begin_then_fenced)
    second = [f"second-{i}".encode() for i in range(10)]
    with pytest.raises(Exception, match=r"(?i)fenc|epoch"):
        _run_batch(writer, 1, second, monkeypatch)
    assert producer_cache.cached_count() == 0  # evicted: a fenced producer is never reused
    _run_batch(writer, 1, second, monkeypatch)  # the task's retry
    third = [f"third-{i}".encode() for i in range(10)]
    _run_batch(writer, 2, third, monkeypatch)
    assert len(created) == 2  # replaced once, then the new one reused
    expected = sorted([*first, b"other", *second, *third])
    assert _committed(kafka_bootstrap, topic, len(expected)) == expected
