"""``PyKafkaDataSource``: the ``format("pykafka")`` Spark data source (write only).

Role: Spark calls ``writer()`` (batch) or ``streamWriter()`` (streaming, twice per micro-batch:
once to plan, once to commit) on the driver. Both parse the options, check the DataFrame schema
against the Kafka sink's input contract, build the producer config (all without network) and
check that the commit-log directory is writable, then return a small picklable writer. Every
mistake therefore fails before any task runs.

Invariants:
- ``name()`` is a classmethod returning ``"pykafka"`` (``"kafka"`` belongs to Spark's own sink).
- ``streamWriter`` keeps Spark's parameter names ``schema`` and ``overwrite``: the commit path
  calls it with keywords.
- Batch ``overwrite`` is refused (a Kafka topic cannot be truncated); streaming ``complete`` mode
  (which Spark signals with overwrite=True) is allowed and re-sends the whole result table.
- Nothing here opens a connection, starts a thread or holds a producer.
"""

from __future__ import annotations

import time
import uuid

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from kafka_sink.spark.errors import SinkOptionError
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import validate_schema
from kafka_sink.spark.writer import PyKafkaBatchWriter, PyKafkaStreamWriter

__all__ = ["PyKafkaDataSource"]


def _new_write_id() -> str:
    """Sortable by time, unique across drivers: names a batch job's commit file."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:12]


class PyKafkaDataSource(DataSource):
    """Write DataFrames to Kafka: ``df.write.format("pykafka")`` / ``writeStream.format(...)``.

    Input columns and options mirror Spark's built-in Kafka sink (see the README's options
    table); switching from ``format("kafka")`` means changing the format name and, for batch
    writes, naming the save mode: ``.mode("append")``.
    """

    @classmethod
    def name(cls) -> str:
        return "pykafka"

    def writer(self, schema: StructType, overwrite: bool) -> PyKafkaBatchWriter:
        if overwrite:
            raise SinkOptionError(
                "save mode 'overwrite' is not supported: a Kafka topic cannot be truncated or "
                "replaced, records are only appended. Fix: .mode('append')."
            )
        options = SinkOptions.from_options(self.options)
        layout = validate_schema(schema, options.topic)
        options.validate_producer_config()
        options.check_commit_dir(streaming=False)
        return PyKafkaBatchWriter(
            options, layout, streaming=False, overwrite=False, write_id=_new_write_id()
        )

    def streamWriter(self, schema: StructType, overwrite: bool) -> PyKafkaStreamWriter:
        options = SinkOptions.from_options(self.options)
        layout = validate_schema(schema, options.topic)
        options.validate_producer_config()
        options.check_commit_dir(streaming=True)
        return PyKafkaStreamWriter(
            options, layout, streaming=True, overwrite=overwrite, write_id=_new_write_id()
        )
