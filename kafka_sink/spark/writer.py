"""The Arrow writers of ``format("pykafka")``: batch and streaming share one write path.

Role: ``write()`` runs once per Spark task on an executor. It acquires this worker's cached
producer for the config, turns each Arrow batch into per-topic columns, hands them to
``KafkaProducer.send_columns`` (the producer's bulk path), flushes, waits for every bulk future and
returns a :class:`~kafka_sink.spark.commit_log.document.PyKafkaCommitMessage` with the
acknowledged offsets.
``commit()`` / ``abort()`` run on the driver (in a Python worker Spark starts there) and record
the gathered offsets (``commit.py``).

Invariants:
- ``write()`` returns only after every record it sent is acknowledged; any delivery error raises
  and fails the task (Spark then retries it, re-sending the whole partition: at-least-once).
- Every wait in ``write()`` (flush and futures together) is bounded by delivery.timeout.ms +
  request.timeout.ms + 30 s. Records not acknowledged by then (or given up by the producer at
  its delivery timeout) fail the task with :class:`SinkDeliveryTimeoutError`, which lists them
  per topic-partition and names the bound's options; that producer is closed without waiting.
- ``write()`` consumes its whole iterator on success (Spark reuses the worker only then).
- The writers hold picklable configuration only (options, layout, ids); producers, threads and
  sockets exist only inside ``write()`` on the executor, through ``producer_cache``.
- A producer involved in a delivery failure is evicted from the cache and closed (which delivers
  or fails what it still holds, including rows a failed ``send_columns`` call had queued); the
  failed task then logs the ranges that were acknowledged, which a retry writes again.
- The producer is leased from the cache for the task and released when ``write()`` ends, on
  every path; from then on its idle time (``producerIdleTimeoutMs``) runs.
- No per-row Python on the send path except for headers (see ``columns.py``).

Exactly-once (``deliveryGuarantee=exactly-once``, ``EosPlan`` set on the driver while planning):
- A task attempt gets a transactional producer of its own id,
  ``exactly_once.transactional_id(prefix, partition id, attempt number)`` (never the shared
  at-least-once cache entry), leased lazily on its first record from the worker's cache keyed by
  config and id, so the same partition and attempt slot of the next micro-batch finds it warm;
  ``init_transactions()`` runs for every task (a cached producer it fails for is replaced).
  It begins one transaction, writes its rows as above,
  calls ``prepare_transaction()`` (every record acknowledged, nothing committed) and returns the
  ``PreparedTransaction`` in its commit message (None when it wrote nothing). It never commits.
- On any failure it aborts its transaction (best-effort, bounded) and evicts (closes) the
  producer, so a failed or fenced producer is never reused; what it could not abort the
  driver's sweep ends.
- The driver commits the batch through ``eos_commit.EosCommitter`` before it writes the commit
  file and the log line, which name the guarantee.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from kafka_sink.clock import SYSTEM_CLOCK
from kafka_sink.errors import KafkaTimeoutError
from kafka_sink.spark.commit_log.document import (
    PartitionRange,
    PyKafkaCommitMessage,
    build_document,
    log_line,
    merge_range,
    write_document,
)
from kafka_sink.spark.commit_log.store import CommitStoreUnavailableError
from kafka_sink.spark.eos.committer import EosCommitter, TaskTransaction, listing_ops
from kafka_sink.spark.eos.plan import (
    FileIntentStore,
    IntentStore,
    MemoryIntentStore,
    transactional_id,
)
from kafka_sink.spark.errors import SinkDeliveryTimeoutError, SinkError
from kafka_sink.spark.fault_hooks import pause_commit
from kafka_sink.spark.logs import ensure_logging, logger
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout

if TYPE_CHECKING:
    # The executor-side modules (pyarrow, numpy, the producer) are imported inside write():
    # the driver-side Python workers that plan and commit every micro-batch never load them.
    import pyarrow as pa

    from kafka_sink.prepared import PreparedTransaction
    from kafka_sink.producer.config import ProducerConfig
    from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets
    from kafka_sink.spark.columns import TopicColumns
    from kafka_sink.spark.producer_cache import BulkProducer

    class TransactionalProducer(BulkProducer, Protocol):
        """The part of a transactional ``KafkaProducer`` an exactly-once task uses."""

        def init_transactions(self, timeout: float | None = None) -> None: ...

        def begin_transaction(self) -> None: ...

        def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction: ...

        def abort_transaction(self, timeout: float | None = None) -> None: ...


__all__ = ["EosPlan", "PyKafkaBatchWriter", "PyKafkaStreamWriter"]

# How long a failing task waits for its transaction's abort before leaving it to the driver.
_ABORT_TIMEOUT_S = 10.0
# Processes without a durable place for intents (a batch job without a local commitLog) keep
# them here: enough for the one commit() call that uses them.
_MEMORY_STORES: dict[str, MemoryIntentStore] = {}


@dataclass(frozen=True)
class EosPlan:
    """What an exactly-once write settled on the driver while planning (picklable)."""

    #: The start of every transactional id of the write.
    prefix: str
    #: The intent store's key: the streaming query id, or the batch job's write id.
    query_key: str
    #: Local directory of the intent store (``intentStore=checkpoint``); None with neither this
    #: nor ``intent_topic``: in-process only (see ``_MEMORY_STORES``).
    intent_dir: str | None
    #: The intent topic (``intentStore=kafka``); takes precedence over ``intent_dir``.
    intent_topic: str | None = None

    def open_store(self, producer_config: dict[str, str]) -> IntentStore:
        if self.intent_topic is not None:
            from kafka_sink.spark.eos.kafka_intents import KafkaIntentStore

            return KafkaIntentStore.open(producer_config, self.intent_topic)
        if self.intent_dir is not None:
            return FileIntentStore(self.intent_dir)
        return _MEMORY_STORES.setdefault(self.query_key, MemoryIntentStore())

    def committer(self, producer_config: dict[str, str]) -> EosCommitter:
        store = self.open_store(producer_config)
        try:
            ops = listing_ops(producer_config)
        except BaseException:
            store.close()
            raise
        return EosCommitter(store, ops, query_key=self.query_key, prefix=self.prefix)


def _create_transactional(config: dict[str, str]) -> TransactionalProducer:
    """A new transactional producer for one task attempt (tests replace this)."""
    from kafka_sink.producer.producer import KafkaProducer

    producer: TransactionalProducer = KafkaProducer(config)
    return producer


# Slack on top of the producer's own bound (delivery.timeout.ms, plus request.timeout.ms for an
# attempt still in flight when it passes) before a task stops waiting for acknowledgements; the
# producer fails every batch within its bound, so this only fires when its sender is stuck.
_STALL_SLACK_MS = 30_000
# Partitions named in a timeout message; the count of the others is given.
_MESSAGE_PARTITIONS = 12


@dataclass(frozen=True)
class _TaskInfo:
    partition_id: int
    attempt_number: int
    task_attempt_id: int
    batch_id: int | None


def _task_info() -> _TaskInfo:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:  # called outside a Spark task (unit tests drive write() directly)
        return _TaskInfo(0, 0, 0, None)
    raw_batch = ctx.getLocalProperty("streaming.sql.batchId")
    return _TaskInfo(
        partition_id=ctx.partitionId(),
        attempt_number=ctx.attemptNumber(),
        task_attempt_id=ctx.taskAttemptId(),
        batch_id=int(raw_batch) if raw_batch is not None else None,
    )


@functools.lru_cache(maxsize=8)
def _producer_config(items: tuple[tuple[str, str], ...]) -> ProducerConfig:
    """The parsed producer config, once per worker process and config (not per task)."""
    from kafka_sink.producer.config import ProducerConfig

    return ProducerConfig.from_mapping(dict(items))


class _Offsets:
    """Folds bulk-send results into per topic-partition ranges."""

    def __init__(self) -> None:
        self._ranges: dict[tuple[str, int], PartitionRange] = {}

    def add(self, topic: str, offsets: dict[int, PartitionOffsets]) -> None:
        for partition, po in offsets.items():
            new = PartitionRange(
                topic,
                partition,
                po.first_offset,
                po.last_offset,
                po.record_count,
                po.unknown_offset_count,
            )
            prev = self._ranges.get((topic, partition))
            self._ranges[(topic, partition)] = new if prev is None else merge_range(prev, new)

    def ranges(self) -> tuple[PartitionRange, ...]:
        return tuple(self._ranges[k] for k in sorted(self._ranges))


class _WriterCore:
    """State and write path shared by the batch and the streaming writer (picklable)."""

    def __init__(
        self,
        options: SinkOptions,
        layout: InputLayout,
        *,
        streaming: bool,
        overwrite: bool,
        write_id: str,
        eos: EosPlan | None = None,
    ) -> None:
        self.options = options
        self.layout = layout
        self.streaming = streaming
        self.overwrite = overwrite
        self.write_id = write_id
        self.eos = eos

    # -- executor side ---------------------------------------------------------------------

    def _wait_bound(self) -> tuple[int, str]:
        """How long a task waits for acknowledgements (ms), and how that bound is made up."""
        cfg = _producer_config(self.options.producer_items)
        bound_ms = cfg.delivery_timeout_ms + cfg.request_timeout_ms + _STALL_SLACK_MS
        how = (
            f"kafka.delivery.timeout.ms ({cfg.delivery_timeout_ms} ms) + kafka.request.timeout.ms "
            f"({cfg.request_timeout_ms} ms) + {_STALL_SLACK_MS // 1000} s"
        )
        return bound_ms, how

    def _transactional_producer(self, task: _TaskInfo) -> TransactionalProducer:
        """This attempt's producer, its transaction begun (exactly-once).

        Leased from the worker's cache by config and transactional id: the same Spark
        partition and attempt slot in the next micro-batch gets it warm. InitProducerId runs
        every time (it fences older producers of the id and moves on from the transaction the
        driver has since ended); a cached one it fails for is replaced by a new producer.
        """
        from kafka_sink.errors import KafkaError
        from kafka_sink.spark import producer_cache

        assert self.eos is not None
        config = self.options.producer_config
        config["transactional.id"] = transactional_id(
            self.eos.prefix, task.partition_id, task.attempt_number
        )
        items = tuple(sorted(config.items()))
        idle_ms = self.options.producer_idle_timeout_ms
        producer, reused = producer_cache.acquire_transactional(
            items, _create_transactional, idle_timeout_ms=idle_ms
        )
        try:
            try:
                producer.init_transactions()
            except KafkaError as exc:
                if not reused:
                    raise
                # Fenced or otherwise unusable since its last task: start from a new one.
                ensure_logging()
                logger.info(
                    "task %d (attempt %d): cached transactional producer %r could not be "
                    "re-initialised (%s); replacing it",
                    task.partition_id,
                    task.attempt_number,
                    config["transactional.id"],
                    type(exc).__name__,
                )
                producer_cache.evict(producer, timeout_s=0.0)
                producer, _ = producer_cache.acquire_transactional(
                    items, _create_transactional, idle_timeout_ms=idle_ms
                )
                producer.init_transactions()
            producer.begin_transaction()
        except BaseException:
            producer_cache.evict(producer, timeout_s=0.0)
            raise
        return producer

    def _write(self, batches: Iterator[pa.RecordBatch]) -> PyKafkaCommitMessage:
        from kafka_sink.spark import producer_cache
        from kafka_sink.spark.columns import topic_columns

        task = _task_info()
        if self.eos is not None:
            return self._write_transactional(batches, task)
        producer: BulkProducer | None = None
        pending: list[tuple[str, BulkSendFuture]] = []
        sent: list[tuple[str, BulkSendFuture]] = []
        offsets = _Offsets()
        partition_counts: dict[str, int] = {}
        rows_seen = 0
        try:
            for batch in batches:
                groups = topic_columns(
                    batch,
                    self.layout,
                    self.options.topic,
                    now_ms=SYSTEM_CLOCK.wall_ms(),
                    row_base=rows_seen,
                )
                rows_seen += batch.num_rows
                if not groups:
                    continue
                if producer is None:
                    producer = producer_cache.acquire(
                        self.options.producer_items,
                        idle_timeout_ms=self.options.producer_idle_timeout_ms,
                    )
                for group in groups:
                    self._check_partitions(producer, group, partition_counts)
                    future = producer.send_columns(
                        group.topic,
                        group.values,
                        group.keys,
                        partitions=group.partitions,
                        headers=group.headers,
                        timestamps_ms=group.timestamps_ms,
                    )
                    pending.append((group.topic, future))
                    sent.append((group.topic, future))
                pending = self._collect_done(pending, sent, offsets, task)
            if producer is not None:
                self._await_acks(producer, pending, sent, offsets, task)
        except SinkError:
            # Bad data, not a bad producer: what was already sent stays in flight and is
            # delivered by the cached producer; the task fails with the data error.
            raise
        except BaseException as exc:
            if producer is not None:
                # Closing delivers (or fails) what is still queued, including the rows a failed
                # send_columns call queued before it raised. After a delivery timeout the
                # producer has had its whole bound: close it at once instead of waiting again.
                timed_out = isinstance(exc, SinkDeliveryTimeoutError)
                producer_cache.evict(
                    producer, timeout_s=0.0 if timed_out else producer_cache.CLOSE_TIMEOUT_S
                )
                self._log_partial_write(task, offsets, pending, exc)
            raise
        finally:
            if producer is not None:
                # Its idle time starts now (a no-op when it was evicted above).
                producer_cache.release(producer)
        return PyKafkaCommitMessage(
            partition_id=task.partition_id,
            attempt_number=task.attempt_number,
            task_attempt_id=task.task_attempt_id,
            batch_id=task.batch_id,
            ranges=offsets.ranges(),
        )

    def _write_transactional(
        self, batches: Iterator[pa.RecordBatch], task: _TaskInfo
    ) -> PyKafkaCommitMessage:
        """One transaction for the attempt: written, prepared, handed to the driver."""
        from kafka_sink.spark import producer_cache
        from kafka_sink.spark.columns import topic_columns

        if self.streaming and task.batch_id is None and _in_spark_task():
            raise SinkError(
                "exactly-once: this task has no streaming batch id (Spark's local property "
                "streaming.sql.batchId is not set); the sink cannot tell its batch"
            )
        producer: TransactionalProducer | None = None
        pending: list[tuple[str, BulkSendFuture]] = []
        sent: list[tuple[str, BulkSendFuture]] = []
        offsets = _Offsets()
        partition_counts: dict[str, int] = {}
        rows_seen = 0
        prepared: PreparedTransaction | None = None
        try:
            for batch in batches:
                groups = topic_columns(
                    batch,
                    self.layout,
                    self.options.topic,
                    now_ms=SYSTEM_CLOCK.wall_ms(),
                    row_base=rows_seen,
                )
                rows_seen += batch.num_rows
                if not groups:
                    continue
                if producer is None:
                    producer = self._transactional_producer(task)
                for group in groups:
                    self._check_partitions(producer, group, partition_counts)
                    future = producer.send_columns(
                        group.topic,
                        group.values,
                        group.keys,
                        partitions=group.partitions,
                        headers=group.headers,
                        timestamps_ms=group.timestamps_ms,
                    )
                    pending.append((group.topic, future))
                    sent.append((group.topic, future))
                pending = self._collect_done(pending, sent, offsets, task)
            if producer is not None:
                self._await_acks(producer, pending, sent, offsets, task)
                prepared = producer.prepare_transaction(self._wait_bound()[0] / 1000)
        except BaseException:
            if producer is not None:
                _abort_quietly(producer, task)
                # Never reused after a failure: the next attempt on this worker starts afresh.
                producer_cache.evict(producer, timeout_s=0.0)
            raise
        finally:
            if producer is not None:
                # A prepared transaction stays open for the driver: the producer only waits
                # in the cache (a no-op when evicted above); its next task re-initialises it.
                producer_cache.release(producer)
        return PyKafkaCommitMessage(
            partition_id=task.partition_id,
            attempt_number=task.attempt_number,
            task_attempt_id=task.task_attempt_id,
            batch_id=task.batch_id,
            ranges=offsets.ranges(),
            transaction=prepared if prepared is not None and prepared.partitions else None,
        )

    @staticmethod
    def _log_partial_write(
        task: _TaskInfo,
        offsets: _Offsets,
        pending: list[tuple[str, BulkSendFuture]],
        exc: BaseException,
    ) -> None:
        from kafka_sink.producer.futures import BulkSendFuture

        futures = [f for _topic, f in pending]
        queued = getattr(exc, "queued_future", None)
        if isinstance(queued, BulkSendFuture):
            futures.append(queued)
        for future in futures:
            if isinstance(future, BulkSendFuture) and future.done():
                offsets.add(future.topic, future.offsets())
        ranges = offsets.ranges()
        if not ranges:
            return
        written = ", ".join(
            f"{r.topic}-{r.partition} {r.first_offset}..{r.last_offset} ({r.record_count})"
            for r in ranges
        )
        ensure_logging()
        logger.error(
            "task %d (attempt %d) failed after these records were acknowledged: %s; "
            "a retry writes them again",
            task.partition_id,
            task.attempt_number,
            written,
        )

    @staticmethod
    def _check_partitions(
        producer: BulkProducer, group: TopicColumns, counts: dict[str, int]
    ) -> None:
        from kafka_sink.spark.columns import check_partitions

        if group.partitions is None:
            return
        if group.topic not in counts:
            counts[group.topic] = len(producer.partitions_for(group.topic))
        check_partitions(group, counts[group.topic])

    def _collect_done(
        self,
        pending: list[tuple[str, BulkSendFuture]],
        sent: list[tuple[str, BulkSendFuture]],
        offsets: _Offsets,
        task: _TaskInfo,
    ) -> list[tuple[str, BulkSendFuture]]:
        """Fold finished futures (raising the first failure early); keep the rest."""
        still: list[tuple[str, BulkSendFuture]] = []
        for topic, future in pending:
            if not future.done():
                still.append((topic, future))
                continue
            try:
                offsets.add(topic, future.get(0))
            except KafkaTimeoutError as exc:  # the producer gave up on a batch
                raise self._delivery_timeout(sent, task, exc, stalled_s=None) from exc
        return still

    def _await_acks(
        self,
        producer: BulkProducer,
        pending: list[tuple[str, BulkSendFuture]],
        sent: list[tuple[str, BulkSendFuture]],
        offsets: _Offsets,
        task: _TaskInfo,
    ) -> None:
        """Flush and fold every future, all within one bound; a stall or expiry raises
        :class:`SinkDeliveryTimeoutError` naming what was still pending."""
        bound_ms = self._wait_bound()[0]
        start = time.monotonic()
        deadline = start + bound_ms / 1000

        def stalled() -> SinkDeliveryTimeoutError:
            return self._delivery_timeout(sent, task, None, stalled_s=time.monotonic() - start)

        try:
            producer.flush(bound_ms / 1000)
        except KafkaTimeoutError as exc:
            raise stalled() from exc
        for topic, future in pending:
            try:
                result = future.get(max(deadline - time.monotonic(), 0.0))
            except KafkaTimeoutError as exc:
                if not future.done():
                    raise stalled() from exc
                raise self._delivery_timeout(sent, task, exc, stalled_s=None) from exc
            offsets.add(topic, result)

    def _delivery_timeout(
        self,
        sent: list[tuple[str, BulkSendFuture]],
        task: _TaskInfo,
        cause: BaseException | None,
        *,
        stalled_s: float | None,
    ) -> SinkDeliveryTimeoutError:
        """The task's failure when records were not acknowledged in time: what was pending,
        the bound and the option that sets it, and what happens next."""
        per_tp: dict[tuple[str, int], tuple[int, int]] = {}
        for topic, future in sent:
            for partition, (records, batches) in future.unacknowledged().items():
                r, b = per_tp.get((topic, partition), (0, 0))
                per_tp[(topic, partition)] = (r + records, b + batches)
        records = sum(r for r, _b in per_tp.values())
        batches = sum(b for _r, b in per_tp.values())
        listed = [
            f"{topic}-{partition}: {r} record(s) in {b} batch(es)"
            for (topic, partition), (r, b) in sorted(per_tp.items())[:_MESSAGE_PARTITIONS]
        ]
        if len(per_tp) > _MESSAGE_PARTITIONS:
            listed.append(f"and {len(per_tp) - _MESSAGE_PARTITIONS} more partition(s)")
        cfg = _producer_config(self.options.producer_items)
        where = f"task for Spark partition {task.partition_id} (attempt {task.attempt_number})"
        pending = f"{records} record(s) in {batches} batch(es) not acknowledged by Kafka"
        if stalled_s is not None:
            how = self._wait_bound()[1]
            why = (
                f"{where} stopped waiting after {stalled_s:.1f} s with {pending}: "
                f"{'; '.join(listed) or 'none'}. The wait is bounded by {how}; the producer "
                "should have completed or failed them by then, so its sender looks stuck"
            )
        else:
            why = (
                f"{where} failed with {pending} within kafka.delivery.timeout.ms "
                f"({cfg.delivery_timeout_ms} ms): {'; '.join(listed) or 'none'}. Producer: "
                f"{cause}"
            )
        return SinkDeliveryTimeoutError(
            f"{why}. The producer was closed and the next task gets a new one; Spark retries "
            "the task, re-sending its partition (some of these records may already be in "
            "Kafka). Check that the brokers are reachable and healthy, or raise "
            "kafka.delivery.timeout.ms."
        )

    # -- driver side -----------------------------------------------------------------------

    @property
    def _mode(self) -> str:
        if self.streaming:
            return "complete" if self.overwrite else "append"
        return "append"

    def _record(
        self, messages: Sequence[WriterCommitMessage | None], batch_id: int | None, *, ok: bool
    ) -> None:
        ensure_logging()
        if self.eos is not None:
            self._end_transactions(messages, batch_id, ok=ok)
        elif ok:
            pause_commit(batch_id)  # test-only; see fault_hooks
        now_ms = int(time.time() * 1000)
        document = build_document(
            "commit" if ok else "abort",
            messages,
            mode=self._mode,
            batch_id=batch_id,
            write_id=self.write_id,
            query_name=self.options.query_name,
            now_ms=now_ms,
            guarantee=self.options.delivery_guarantee,
        )
        directory = self.options.commit_dir(streaming=self.streaming)
        path: str | None = None
        if directory is not None:
            stem = str(batch_id) if batch_id is not None else self.write_id
            try:
                path = write_document(
                    directory, f"{stem}.json" if ok else f"{stem}.aborted.json", document
                )
            except CommitStoreUnavailableError:
                # A default under a checkpoint this driver has no client for: the query start
                # warned that no commit files are written. A commitLog was refused then.
                if self.options.commit_log is not None:
                    raise
        if ok:
            logger.info(log_line(document, path))
        else:
            logger.error(log_line(document, path))

    def _end_transactions(
        self, messages: Sequence[WriterCommitMessage | None], batch_id: int | None, *, ok: bool
    ) -> None:
        """Exactly-once: commit (or abort) every transaction the batch's tasks prepared."""
        assert self.eos is not None
        tasks = [
            TaskTransaction(m.partition_id, m.transaction)
            for m in messages
            if isinstance(m, PyKafkaCommitMessage) and m.transaction is not None
        ]
        committer = self.eos.committer(self.options.producer_config)
        try:
            # A batch job is one atomic write: batch id 0 of its own write id.
            number = 0 if batch_id is None else batch_id
            if ok:
                committer.commit(number, tasks)
                if batch_id is None:
                    # Spark calls nothing more for a batch job once commit() returns.
                    _forget_batch_job(committer.store, self.eos.query_key)
            else:
                committer.abort(number, tasks)
        finally:
            committer.store.close()
            committer.ops.close()


def _forget_batch_job(store: IntentStore, write_id: str) -> None:
    """Drop a committed batch job's record, so the store does not grow with every job."""
    _MEMORY_STORES.pop(write_id, None)
    try:
        store.delete(write_id)
    except (OSError, SinkError) as exc:  # the job is committed; the record is only bookkeeping
        logger.warning(
            "pykafka exactly-once: the job is committed, but its intent record %r could not "
            "be deleted: %s",
            write_id,
            exc,
        )


def _in_spark_task() -> bool:
    from pyspark import TaskContext

    return TaskContext.get() is not None


def _abort_quietly(producer: TransactionalProducer, task: _TaskInfo) -> None:
    try:
        producer.abort_transaction(_ABORT_TIMEOUT_S)
    except Exception as exc:  # the task's own failure is what it raises
        ensure_logging()
        logger.warning(
            "task %d (attempt %d) could not abort its transaction (the driver's sweep ends "
            "it, or the broker after transaction.timeout.ms): %s",
            task.partition_id,
            task.attempt_number,
            exc,
        )


class PyKafkaBatchWriter(_WriterCore, DataSourceArrowWriter):
    """``df.write.format("pykafka").mode("append")``: one commit for the whole job."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._record(messages, None, ok=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._record(messages, None, ok=False)


class PyKafkaStreamWriter(_WriterCore, DataSourceStreamArrowWriter):
    """``df.writeStream.format("pykafka")``: one commit per micro-batch."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._record(messages, batchId, ok=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._record(messages, batchId, ok=False)
