"""The floor of a Python streaming sink, for ``bench_microbatch.py``: an Arrow stream writer that
discards its batches. It lives in an importable module (the benchmark puts the repository on the
workers' PYTHONPATH) so that Spark pickles it by reference, as it does pykafka's writer: a class
defined in ``__main__`` is pickled by value and rebuilt in every worker at every micro-batch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, WriterCommitMessage

from kafka_sink.spark.spark_api import StreamWriterBase


@dataclass
class NoopCount(WriterCommitMessage):
    rows: int


class NoopStreamWriter(StreamWriterBase):
    def write(self, iterator: Iterator[Any]) -> NoopCount:
        return NoopCount(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


class NoopStreamDataSource(DataSource):
    """Receives every Arrow batch of every micro-batch and keeps nothing."""

    @classmethod
    def name(cls) -> str:
        return "bench_noop_stream"

    def streamWriter(self, schema: Any, overwrite: bool) -> NoopStreamWriter:
        return NoopStreamWriter()
