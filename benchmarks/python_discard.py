"""The floor of a Python batch sink's first write, for ``bench_first_row.py``: a data source whose
writer counts its rows and keeps nothing. It imports PySpark's data source API alone (no
kafka_sink module), so that what a fresh session's first ``df.write`` costs with it is Spark's
Python plumbing (the data source lookup, a planning worker, the task workers, a commit worker)
and nothing of a sink's own. It lives in an importable module (the benchmark puts this directory
on the workers' PYTHONPATH) so that Spark pickles it by reference, as it does pykafka's writer."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import datasource as _datasource
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


# The streaming floor: a stream writer on PySpark's Arrow base when it has one (4.1 and later),
# else its row-based one; it notes when its first rows arrived (option ``markFile``), what the
# benchmark compares with a consumer's first record from a Kafka sink.
_StreamBase = getattr(
    _datasource, "DataSourceStreamArrowWriter", _datasource.DataSourceStreamWriter
)


class DiscardStreamWriter(_StreamBase):  # type: ignore[misc,valid-type]
    def __init__(self, mark_file: str | None) -> None:
        self.mark_file = mark_file

    def write(self, iterator: Iterator[Any]) -> DiscardCount:
        rows = 0
        for batch in iterator:
            rows += getattr(batch, "num_rows", 1)
            if rows and self.mark_file and not os.path.exists(self.mark_file):
                with open(self.mark_file + ".tmp", "w") as f:
                    f.write(repr(time.time()))
                os.replace(self.mark_file + ".tmp", self.mark_file)
        return DiscardCount(rows)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


class DiscardDataSource(DataSource):
    """Receives every Arrow batch of a batch write (or a micro-batch) and keeps nothing."""

    @classmethod
    def name(cls) -> str:
        return "bench_first_row_discard"

    def writer(self, schema: Any, overwrite: bool) -> DiscardWriter:
        return DiscardWriter()

    def streamWriter(self, schema: Any, overwrite: bool) -> DiscardStreamWriter:
        return DiscardStreamWriter(self.options.get("markFile"))
