"""``PyKafkaDataSource``: the ``format("pykafka")`` Spark data source (write only).

Role: Spark calls ``writer()`` (batch) or ``streamWriter()`` (streaming, twice per micro-batch:
once to plan, once to commit) on the driver. Both parse the options, check the DataFrame schema
against the Kafka sink's input contract, build the producer config (all without network) and
check that the commit-log directory is writable, then return a small picklable writer. Every
mistake therefore fails before any task runs.

Exactly-once (``deliveryGuarantee=exactly-once``) adds driver work while planning, before any
task runs (``_exactly_once_plan``): ``transaction.timeout.ms`` is settled against the brokers'
maximum (``transaction_timeout``), the transactional-id prefix and the intent store's key are
fixed (streaming: the query id, read from the checkpoint's ``metadata`` file, which Spark writes
when the query starts; batch: the write id), and a streaming query's unfinished intent is
finished (``EosCommitter.recover``) so that the batch's tasks never re-initialise an id whose
transaction an intent still names. Intents are kept under ``<checkpointLocation>/pykafka-intents``
(streaming) or ``<commitLog>/pykafka-intents`` (batch, local ``commitLog``), else in the commit
process only.

Invariants:
- ``name()`` is a classmethod returning ``"pykafka"`` (``"kafka"`` belongs to Spark's own sink).
- ``streamWriter`` keeps Spark's parameter names ``schema`` and ``overwrite``: the commit path
  calls it with keywords.
- Batch ``overwrite`` is refused (a Kafka topic cannot be truncated); streaming ``complete`` mode
  (which Spark signals with overwrite=True) is allowed and re-sends the whole result table.
- At-least-once: nothing here opens a connection, starts a thread or holds a producer.
  Exactly-once: the connections above are opened and closed within the call.
"""

from __future__ import annotations

import json
import os
import time
import uuid

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from kafka_sink.spark.commit_store import as_local_path, display_location
from kafka_sink.spark.errors import SinkOptionError
from kafka_sink.spark.exactly_once import default_prefix
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import validate_schema
from kafka_sink.spark.writer import EosPlan, PyKafkaBatchWriter, PyKafkaStreamWriter

INTENTS_DIRNAME = "pykafka-intents"

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
        write_id = _new_write_id()
        options, eos = _exactly_once_plan(options, streaming=False, write_id=write_id)
        return PyKafkaBatchWriter(
            options, layout, streaming=False, overwrite=False, write_id=write_id, eos=eos
        )

    def streamWriter(self, schema: StructType, overwrite: bool) -> PyKafkaStreamWriter:
        options = SinkOptions.from_options(self.options)
        layout = validate_schema(schema, options.topic)
        options.validate_producer_config()
        options.check_commit_dir(streaming=True)
        write_id = _new_write_id()
        options, eos = _exactly_once_plan(options, streaming=True, write_id=write_id)
        return PyKafkaStreamWriter(
            options, layout, streaming=True, overwrite=overwrite, write_id=write_id, eos=eos
        )


def _exactly_once_plan(
    options: SinkOptions, *, streaming: bool, write_id: str
) -> tuple[SinkOptions, EosPlan | None]:
    """Settle an exactly-once write on the driver (see the module docstring)."""
    if not options.exactly_once:
        return options, None
    # Exactly-once only: the admin client (and the producer stack under it) stays out of the
    # driver-side workers of an at-least-once write.
    from kafka_sink.spark.transaction_timeout import resolve_transaction_timeout_ms

    timeout_ms = resolve_transaction_timeout_ms(options.producer_config)
    options = options.with_producer_setting("transaction.timeout.ms", str(timeout_ms))
    if streaming:
        checkpoint = _local_checkpoint(options)
        query_key = _query_id(checkpoint)
        intent_dir: str | None = os.path.join(checkpoint, INTENTS_DIRNAME)
    else:
        query_key = write_id
        local_log = as_local_path(options.commit_log) if options.commit_log else None
        intent_dir = os.path.join(local_log, INTENTS_DIRNAME) if local_log else None
    prefix = options.transactional_id_prefix or default_prefix(query_key)
    eos = EosPlan(prefix=prefix, query_key=query_key, intent_dir=intent_dir)
    if streaming:
        committer = eos.committer(options.producer_config)
        try:
            committer.recover()
        finally:
            committer.store.close()
    return options, eos


def _local_checkpoint(options: SinkOptions) -> str:
    location = options.checkpoint_location
    local = as_local_path(location) if location else None
    if local is None:
        where = f" ({display_location(location)})" if location else ""
        raise SinkOptionError(
            "deliveryGuarantee=exactly-once for a streaming query needs option "
            f"'checkpointLocation' on a local or mounted directory{where}: the sink keeps its "
            "commit intents there and reads the query id from it. Fix: "
            ".option('checkpointLocation', '/path') on writeStream (a store URI is not "
            "supported yet in this mode)"
        )
    return local


def _query_id(checkpoint: str) -> str:
    """The streaming query's id, from the ``metadata`` file Spark writes in its checkpoint."""
    path = os.path.join(checkpoint, "metadata")
    try:
        with open(path, encoding="utf-8") as f:
            query_id = json.loads(f.readline())["id"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SinkOptionError(
            f"deliveryGuarantee=exactly-once could not read the query id from {path} ({exc}); "
            "Spark writes that file when the query starts. Fix: check that "
            "'checkpointLocation' is the query's checkpoint and readable by the driver"
        ) from None
    if not isinstance(query_id, str) or not query_id:
        raise SinkOptionError(f"no query id in {path}")
    return query_id
