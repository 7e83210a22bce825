"""``PyKafkaDataSource``: the ``format("pykafka")`` Spark data source (write only).

Role: Spark calls ``writer()`` (batch) or ``streamWriter()`` (streaming, twice per micro-batch:
once to plan, once to commit) on the driver. Both parse the options, check the DataFrame schema
against the Kafka sink's input contract, build the producer config (all without network) and
check that the commit-log directory is writable, then return a small picklable writer. Every
mistake therefore fails before any task runs.

With ``valueFormat`` / ``keyFormat`` (``formats/options.py``), the registry work is done here
too, after the commit-log check and before the cluster's preflight: the schema derived or
parsed and bound to the column's Spark type, its subject registered or looked up and its
compatibility checked (``formats/plan.py``); the writer carries the resulting
:class:`~kafka_sink.formats.plan.FormatPlan` (schema JSON and ids), so tasks never call
the registry. A streaming query does it every time Spark asks for a writer; the plan's cache
keeps the registry calls to one per subject and schema per driver process.

Exactly-once (``deliveryGuarantee=exactly-once``) adds driver work while planning, before any
task runs (``_exactly_once_plan``): ``transaction.timeout.ms`` is settled against the brokers'
maximum (``eos/timeout.py``; the preflight has proved by then that the brokers answer), the
transactional-id prefix and the intent store's key are fixed
in the write's :class:`~kafka_sink.spark.eos_plan.EosPlan` (streaming: the query id, read from
the checkpoint's ``metadata`` file, which Spark writes when the query starts; batch: the write
id), and a streaming query's unfinished intent is finished (``EosCommitter.recover``) so that
the batch's tasks never re-initialise an id whose transaction an intent still names; when the
last batch ended partly committed, the plan tells its re-run's tasks which Spark partitions
Kafka already committed (``EosPlan.partial``). Then, when the planning starts the query on this
driver (its first planning, or one that took the fence anew), the open transactions of the
query's prefix that no unfinished intent names are aborted before the batch's tasks run
(``eos/start.py``; ``streamWriter()`` runs the step explicitly,
``PyKafkaStreamWriter.run_query_start``, and it works only in the planning call, never in the
commit worker's). A streaming query's planning first checks the prefix's fence, and takes it when
this driver holds none or another driver took it since and went on with nothing since
(``eos/fence.py``: before the store is read; a planning refused so raises ``SinkFencedError``),
and claims the prefix; each planning then tells the fence which record it read
(``DriverFence.planning``: what a later stale planning compares against); a prefix another write
claimed is refused in every call, and in a batch job's ``writer()`` given that prefix explicitly
(``eos/claims.py``). A batch job without ``idempotencyKey`` given ``transactionalIdPrefix`` then
takes the prefix's fence (fencing every earlier write of the prefix, whose commit would else
sweep this job's transactions) and claims nothing, and its plan carries the fence to its commit
(``eos/job_fence.py``). A batch job with ``idempotencyKey`` is keyed by its identity instead of its
write id and planned by ``eos/idempotency.py``: like a streaming query's driver, every run
refuses a prefix another write claimed, takes the prefix's fence (fencing an earlier run of the
key still going) and claims the prefix, and its plan carries the fence to its commit; then a key
already completed writes nothing, its recorded commit is finished, and its prefix's lingering
transactions are aborted. A streaming write refuses the key. Intents are
kept in the compacted topic ``intentTopic`` (``intentStore=kafka``, the default; the topic is
created or checked here, so a missing ACL fails before any task runs; a batch job's plan also
carries the topic's end offset, below which its new write id has no record, so that its commit
reads only what follows: ``EosPlan.new_key_from``), or with
``intentStore=checkpoint`` under ``<checkpointLocation>/pykafka-intents`` (streaming, local
checkpoint only) or ``<commitLog>/pykafka-intents`` (batch, local ``commitLog``), else in the
commit process only. The checkpoint may be remote with the Kafka store: the query id is read
through ``commit_log/store.py``.

Invariants:
- ``name()`` is a classmethod returning ``"pykafka"`` (``"kafka"`` belongs to Spark's own sink).
- ``streamWriter`` keeps Spark's parameter names ``schema`` and ``overwrite``: the commit path
  calls it with keywords.
- A streaming writer asked for with no micro-batch pending in the checkpoint (a continuous
  trigger, under which PySpark hands the sink no rows) is refused (``triggers.py``).
- Batch ``overwrite`` is refused (a Kafka topic cannot be truncated); streaming ``complete`` mode
  (which Spark signals with overwrite=True) is allowed and re-sends the whole result table.
- Nothing here starts a thread or holds a producer; the connections of the preflight (and,
  exactly-once, of the planning) are opened and closed within the call.
- Importing this module loads neither exactly-once's driver side (the committer, the intent
  stores, the query start) nor the formats' plan (the catalog, the registry client): Spark
  imports it in every Python process of every write (the data source lookup, the planning, the
  commit), so each of those modules is imported where a write that needs it asks for it.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from kafka_sink.formats.options import FormatOptions
from kafka_sink.sink_errors import SinkOptionError
from kafka_sink.spark.commit_log.store import as_local_path, display_location, join, open_store
from kafka_sink.spark.driver.preflight import check_transactional_ids, check_write
from kafka_sink.spark.driver.triggers import planned_batch, refuse_without_pending_batch
from kafka_sink.spark.eos_plan import EosPlan, default_prefix, transactional_id
from kafka_sink.spark.logs import apply_level
from kafka_sink.spark.options import INTENT_STORE_KAFKA, SinkOptions
from kafka_sink.spark.schema import validate_schema
from kafka_sink.spark.writer import PyKafkaBatchWriter, PyKafkaStreamWriter

if TYPE_CHECKING:
    from kafka_sink.formats.plan import FormatPlan
    from kafka_sink.spark.driver.eos.intents import IntentStore

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
        apply_level(options.log_level)
        formats = FormatOptions.from_options(self.options)
        layout = validate_schema(schema, options.topic, _serialized(formats))
        options.validate_producer_config()
        options.check_commit_dir(streaming=False)
        plan = _format_plan(formats, schema, options)
        _preflight(options, streaming=False)
        write_id = _new_write_id()
        options, eos = _exactly_once_plan(options, streaming=False, write_id=write_id)
        return PyKafkaBatchWriter(
            options,
            layout,
            streaming=False,
            overwrite=False,
            write_id=write_id,
            eos=eos,
            formats=plan,
        )

    def streamWriter(self, schema: StructType, overwrite: bool) -> PyKafkaStreamWriter:
        options = SinkOptions.from_options(self.options)
        apply_level(options.log_level)
        refuse_without_pending_batch(options.checkpoint_location)
        if options.idempotency_key is not None:
            raise SinkOptionError(
                "option 'idempotencyKey' is for batch writes (df.write): a streaming query's "
                "checkpoint already makes its restarts exactly-once. Fix: remove "
                "'idempotencyKey' from writeStream"
            )
        formats = FormatOptions.from_options(self.options)
        layout = validate_schema(schema, options.topic, _serialized(formats))
        options.validate_producer_config()
        options.check_commit_dir(streaming=True)
        plan = _format_plan(formats, schema, options)
        _preflight(options, streaming=True)
        write_id = _new_write_id()
        options, eos = _exactly_once_plan(options, streaming=True, write_id=write_id)
        writer = PyKafkaStreamWriter(
            options,
            layout,
            streaming=True,
            overwrite=overwrite,
            write_id=write_id,
            eos=eos,
            formats=plan,
            input_schema=schema,
        )
        if eos is not None:
            from kafka_sink.spark.driver.eos.start import QueryStart

            writer.start = QueryStart(eos, options.producer_config)
            # The query's start work, before this batch's tasks: done only when this call is
            # the planning (never the commit worker's call), once per start (eos/start.py).
            writer.run_query_start()
        return writer


def _serialized(formats: FormatOptions) -> tuple[str, ...]:
    return tuple(side.side for side in formats.sides)


def _format_plan(
    formats: FormatOptions, schema: StructType, options: SinkOptions
) -> FormatPlan | None:
    """The registry work of a write with a format (``formats/plan.py``), before any task."""
    if not formats.sides:
        # No format: the plan's module (the catalog, the registry client) is never loaded.
        return None
    from kafka_sink.formats.plan import resolve_formats

    types = {f.name: f.dataType.jsonValue() for f in schema.fields}
    return resolve_formats(formats, types, options.topic)


def _preflight(options: SinkOptions, *, streaming: bool) -> None:
    """The cluster's checks that need no exactly-once plan (see ``preflight.py``)."""
    from kafka_sink.producer.config import ProducerConfig

    # Exactly-once tasks ask their producer id with a transactional id: the plan's ids are
    # checked instead (_exactly_once_plan).
    idempotent = (
        not options.exactly_once
        and ProducerConfig.from_mapping(options.producer_config).enable_idempotence
    )
    check_write(
        options.producer_config,
        topic=options.topic,
        timeout_ms=options.preflight_timeout_ms,
        idempotent=idempotent,
        streaming=streaming,
        exactly_once=options.exactly_once,
        preset=options.preset,
        dead_letter_topic=options.dead_letter_topic,
    )


def _exactly_once_plan(
    options: SinkOptions, *, streaming: bool, write_id: str
) -> tuple[SinkOptions, EosPlan | None]:
    """Settle an exactly-once write on the driver (see the module docstring)."""
    if not options.exactly_once:
        return options, None
    # Exactly-once only: the admin client (and the network stack under it) stays out of the
    # driver-side workers of an at-least-once write.
    from kafka_sink.spark.driver.eos.committer import EosCommitter
    from kafka_sink.spark.driver.eos.idempotency import job_identity, job_plan
    from kafka_sink.spark.driver.eos.plan_store import open_intent_store, with_last_record
    from kafka_sink.spark.driver.eos.timeout import resolve_transaction_timeout_ms

    timeout_ms = resolve_transaction_timeout_ms(options.producer_config)
    options = options.with_producer_setting("transaction.timeout.ms", str(timeout_ms))
    in_kafka = options.intent_store == INTENT_STORE_KAFKA
    intent_dir: str | None = None
    if streaming:
        checkpoint = _checkpoint(options, local_only=not in_kafka)
        query_key = _query_id(checkpoint)
        if not in_kafka:
            intent_dir = join(checkpoint, INTENTS_DIRNAME)
    else:
        query_key = write_id
        local_log = as_local_path(options.commit_log) if options.commit_log else None
        if local_log and not in_kafka:
            intent_dir = join(local_log, INTENTS_DIRNAME)
    key = options.idempotency_key
    identity = None
    if key is not None:
        if not in_kafka and intent_dir is None:
            raise SinkOptionError(
                "option 'idempotencyKey' needs a record of the job that outlives it, but "
                "intentStore=checkpoint keeps a batch job's intents in the driver's memory "
                "unless 'commitLog' is a local directory. Fix: use intentStore=kafka (the "
                "default), or set 'commitLog' to a local directory"
            )
        identity = job_identity(key, topic=options.topic, prefix=options.transactional_id_prefix)
        query_key = identity.query_key
    prefix = identity.prefix if identity else options.transactional_id_prefix
    # A keyed job's runs are serialised by the fence of its prefix (eos/idempotency.py), and so
    # is a job given a prefix another write may have too (eos/job_fence.py).
    fenced_job = not streaming and (identity is not None or bool(prefix))
    eos = EosPlan(
        prefix=prefix or default_prefix(query_key),
        query_key=query_key,
        intent_dir=intent_dir,
        intent_topic=options.intent_topic if in_kafka else None,
        idempotency_key=key,
        fenced=streaming or fenced_job,
        batch_job=not streaming,
        planned_wall_ms=int(time.time() * 1000),
        planned_batch=planned_batch(options.checkpoint_location) if streaming else None,
    )
    check_transactional_ids(
        options.producer_config,
        prefix=eos.prefix,
        transactional_id=transactional_id(eos.prefix, 0, 0),
        timeout_ms=options.preflight_timeout_ms,
        streaming=streaming,
        generated_prefix=identity is None and not options.transactional_id_prefix,
    )
    # Opening the store creates or checks the intent topic before any task runs.
    if streaming or identity is not None:
        committer = EosCommitter.for_plan(eos, options.producer_config)
        try:
            if identity is None:
                # A batch Kafka committed only in part: its re-run's tasks learn which partitions
                # to leave alone.
                last = committer.recover()
                if committer.fence is not None:
                    # What a later planning finds stale compares against (eos/fence.py).
                    committer.fence.planning(last)
                eos = with_last_record(eos, last)
            else:
                eos = job_plan(committer, identity, eos, write_id=write_id)
        finally:
            committer.close()
    elif fenced_job:
        # A job without a key given a prefix: refuses a prefix another write claimed, then takes
        # the prefix's fence (fencing every earlier write of the prefix) and claims nothing.
        committer = EosCommitter.for_plan(eos, options.producer_config)
        try:
            fence = committer.fence
            eos = replace(
                _new_key_from(eos, committer.store, query_key),
                fence_token=None if fence is None else fence.token,
            )
        finally:
            committer.close()
    elif in_kafka:
        store = open_intent_store(eos, options.producer_config)
        try:
            eos = _new_key_from(eos, store, query_key)
        finally:
            store.close()
    return options, eos


def _new_key_from(eos: EosPlan, store: IntentStore, query_key: str) -> EosPlan:
    """``eos`` telling its commit where the Kafka store's records of the new write id start."""
    if eos.intent_topic is None:
        return eos
    # Only the Kafka store loads the network stack (see EosPlan.open_store).
    from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore

    if isinstance(store, KafkaIntentStore):
        # The write id is new: its commit need not search the topic for a record of it.
        return replace(eos, new_key_from=store.new_key_from(query_key))
    return eos


def _checkpoint(options: SinkOptions, *, local_only: bool) -> str:
    location = options.checkpoint_location
    if location is None:
        raise SinkOptionError(
            "deliveryGuarantee=exactly-once for a streaming query needs option "
            "'checkpointLocation': the sink reads the query id from it. Fix: "
            ".option('checkpointLocation', '<directory or store URI>') on writeStream"
        )
    local = as_local_path(location)
    if local is not None:
        return local
    if local_only:
        raise SinkOptionError(
            "intentStore=checkpoint keeps exactly-once commit intents next to the checkpoint and "
            f"needs 'checkpointLocation' on a local or mounted directory, but it is "
            f"{display_location(location)}. Fix: use intentStore=kafka (the default), which "
            "keeps them in a compacted topic of the cluster and works with any checkpoint"
        )
    return location


def _query_id(checkpoint: str) -> str:
    """The streaming query's id, from the ``metadata`` file Spark writes in its checkpoint."""
    where = join(checkpoint, "metadata")
    try:
        data = open_store(checkpoint).read("metadata")
        if data is None:
            raise OSError("no such file")
        query_id = json.loads(data.decode("utf-8").splitlines()[0])["id"]
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise SinkOptionError(
            f"deliveryGuarantee=exactly-once could not read the query id from "
            f"{display_location(where)} ({exc}); Spark writes that file when the query starts. "
            "Fix: check that 'checkpointLocation' is the query's checkpoint and readable by the "
            "driver"
        ) from None
    if not isinstance(query_id, str) or not query_id:
        raise SinkOptionError(
            f"deliveryGuarantee=exactly-once found no query id in {display_location(where)}. "
            "Fix: check that 'checkpointLocation' is the query's checkpoint (Spark writes the "
            "id there when the query starts)"
        )
    return query_id
