"""The floor of a Python batch sink's first write, for ``bench_first_row.py``: a data source whose
writer counts its rows and keeps nothing. It imports PySpark's data source API alone (no
kafka_sink module), so that what a fresh session's first ``df.write`` costs with it is Spark's
Python plumbing (the data source lookup, a planning worker, the task workers, a commit worker)
and nothing of a sink's own. It lives in an importable module (the benchmark puts this directory
on the workers' PYTHONPATH) so that Spark pickles it by reference, as it does pykafka's writer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage


@dataclass
class DiscardCount(WriterCommitMessage):
    rows: int


class DiscardWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[Any]) -> DiscardCount:
        return DiscardCount(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


class DiscardDataSource(DataSource):
    """Receives every Arrow batch of a batch write and keeps nothing."""

    @classmethod
    def name(cls) -> str:
        return "bench_first_row_discard"

    def writer(self, schema: Any, overwrite: bool) -> DiscardWriter:
        return DiscardWriter()
