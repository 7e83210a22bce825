"""A task whose send_columns call fails part-way reports what it had written before failing."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa
import pytest

from kafka_sink.errors import BufferExhaustedError
from kafka_sink.producer.futures import BulkSendFuture, ProduceRequestResult
from kafka_sink.spark.executor import producer_cache
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.writer import PyKafkaBatchWriter


class PartlyFailingProducer:
    """send_columns queues its first 5 rows to partition 0 (offsets 100..104), then raises."""

    instances: list[PartlyFailingProducer] = []  # noqa: RUF012

    def __init__(self, config: Any) -> None:
        self.closed = False
        self.results: list[ProduceRequestResult] = []
        PartlyFailingProducer.instances.append(self)

    def send_columns(self, topic: str, values: Any, keys: Any = None, **_: Any) -> BulkSendFuture:
        queued = BulkSendFuture(topic)
        result = ProduceRequestResult(topic, 0)
        queued._add(0, 5, 4, result)
        queued._seal()
        self.results.append(result)
        error = BufferExhaustedError("failed to allocate ... within max.block.ms=60000")
        error.queued_future = queued  # type: ignore[attr-defined]
        raise error

    def close(self, timeout: float | None = None) -> None:
        # Closing delivers what was queued.
        for result in self.results:
            result.complete(100, -1, None)
        self.closed = True

    def flush(self, timeout: float | None = None) -> None:
        pass

    def partitions_for(self, topic: str) -> list[int]:
        return [0]


@pytest.fixture(autouse=True)
def partly_failing(monkeypatch: pytest.MonkeyPatch) -> Any:
    PartlyFailingProducer.instances = []
    producer_cache.close_all()
    monkeypatch.setattr(producer_cache, "_create", PartlyFailingProducer)
    yield PartlyFailingProducer.instances
    producer_cache.close_all()


def test_failed_call_reports_the_rows_it_queued(caplog: pytest.LogCaptureFixture) -> None:
    writer = PyKafkaBatchWriter(
        SinkOptions.from_options({"kafka.bootstrap.servers": "h:1", "topic": "t"}),
        InputLayout(
            topic_column=False,
            key_column=False,
            partition_column=False,
            headers_column=False,
            timestamp=None,
        ),
        streaming=False,
        overwrite=False,
        write_id="w1",
    )
    batch = pa.record_batch({"value": [b"%d" % i for i in range(8)]})
    with (
        caplog.at_level(logging.ERROR, logger="kafka_sink.spark"),
        pytest.raises(BufferExhaustedError),
    ):
        writer.write(iter([batch]))
    [producer] = PartlyFailingProducer.instances
    assert producer.closed
    assert "failed after these records were acknowledged: t-0 100..104 (5)" in caplog.text
