"""A Spark task's write: the executor loop behind both writers' ``write()``.

Role: :func:`write_task` runs once per Spark task on an executor. It leases a producer from the
worker's cache (``producer_cache``) on the task's first record, turns each Arrow batch into
per-topic columns (``columns``), hands them to ``KafkaProducer.send_columns`` (the producer's
bulk path), flushes, waits for every bulk future and returns a
:class:`~kafka_sink.spark.commit_log.document.PyKafkaCommitMessage` with the acknowledged offsets
per topic-partition. There is one loop; what differs between the delivery guarantees is a small
strategy (:class:`_Guarantee`): which producer the task leases, what it does once every record is
acknowledged, and what a failure does to the producer. Beside it, the write's record error policy
(``record_errors``) decides the fate of a row that can never be written (a null topic, a
partition out of range, a record too large, ...): every such row detected here passes through it
once, with its index in the task's input and the reason; the default fails the task.

- At-least-once: the worker's shared producer for the config; nothing after the acks; a failure
  other than bad data evicts (closes) the producer and logs the ranges that were acknowledged,
  which Spark's retry of the task writes again.
- Exactly-once (the writer carries an :class:`~kafka_sink.spark.eos_plan.EosPlan`): a
  transactional producer of an id no other running attempt holds, ``<prefix>-<partition
  id>-<slot>`` with the slot chosen by ``eos/slots.py`` (the attempt number's when free; never
  the shared at-least-once entry), leased from the cache keyed by config and id, so the same
  partition and slot of the next micro-batch finds it warm;
  ``init_transactions()`` runs for every task (a cached producer it fails for is replaced) and
  one transaction is begun. Once every record is acknowledged it calls
  ``prepare_transaction()`` (nothing is committed) and the commit message carries the
  :class:`~kafka_sink.prepared.PreparedTransaction` (None when the task wrote nothing); the
  driver commits it (``eos/committer.py``). On any failure the task aborts its transaction
  (best-effort, bounded; the driver's sweep ends what it could not) and evicts the producer.
  The message also carries the fingerprint of the task's rows (``row_fingerprint.py``). A task
  of a Spark partition that an earlier run of the same batch already committed (the plan's
  ``partial`` batch, matched by Spark's ``streaming.sql.batchId``) writes nothing: it reads its
  rows for their fingerprint only and returns a message marked skipped, which the driver checks
  against the fingerprint it recorded.

Invariants:
- ``write_task`` returns only after every record it sent is acknowledged; any delivery error
  raises and fails the task (Spark then retries it, re-sending the whole partition).
- Every wait (flush and futures together) is bounded by delivery.timeout.ms +
  request.timeout.ms + 30 s. Records not acknowledged by then (or given up by the producer at
  its delivery timeout) fail the task with :class:`SinkDeliveryTimeoutError`, which lists them
  per topic-partition and names the bound's options; that producer is closed without waiting.
- It consumes its whole iterator on success (Spark reuses the worker only then), except when
  there is nothing to write (below).
- Producers, threads and sockets exist only here, on the executor, through ``producer_cache``:
  the producer is leased for the task and released when it ends, on every path; from then on
  its idle time (``producerIdleTimeoutMs``) runs.
- A producer involved in a delivery failure is evicted from the cache and closed (which delivers
  or fails what it still holds, including rows a failed ``send_columns`` call had queued); a
  data error (a :class:`SinkDataError`) keeps an at-least-once producer, whose records stay in
  flight; dead letters that could not be written are a delivery failure.
  A transactional producer is never reused after any failure.
- A task of a batch job whose ``idempotencyKey`` an earlier run completed returns at once: no
  producer, no transaction, its input not read.
- A task never commits a transaction; exactly-once in a streaming query, a task without a
  streaming batch id fails before it leases anything. A skipping task leases no producer.
- No per-row Python on the send path except for headers (see ``columns.py``).
- With a format (the writer's :class:`~kafka_sink.formats.plan.FormatPlan`), the task
  builds one :class:`~kafka_sink.formats.batch_encoder.BatchEncoder` and serializes each
  Arrow batch's ``value`` / ``key`` column in bulk before anything else reads the batch (the
  fingerprint is then of the bytes sent); the producer stays bytes in, bytes out, and the task
  never calls the registry.
- The message carries the task's share of its producer's metrics (``spark/metrics``): a snapshot
  when the lease starts, its difference once every record is acknowledged (and, exactly-once,
  the transaction prepared); a task that wrote nothing carries none.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import pyarrow as pa
from pyspark import TaskContext

from kafka_sink.clock import SYSTEM_CLOCK
from kafka_sink.errors import (
    InvalidTopicError,
    KafkaError,
    KafkaTimeoutError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.producer.bulk import RecordTooLargeInColumnsError
from kafka_sink.producer.config import ProducerConfig
from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets
from kafka_sink.producer.producer import KafkaProducer
from kafka_sink.sink_errors import (
    BadRecord,
    BadRowsError,
    ColumnSerializationError,
    SinkDataError,
    SinkDeliveryTimeoutError,
    SinkError,
)
from kafka_sink.spark.commit_log.document import (
    PartitionRange,
    PyKafkaCommitMessage,
    merge_range,
)
from kafka_sink.spark.eos_plan import EosPlan
from kafka_sink.spark.executor import producer_cache, record_errors
from kafka_sink.spark.executor import topic_rules as topic_rules_module
from kafka_sink.spark.executor.columns import (
    TopicColumns,
    check_partitions,
    merge_groups,
    timestamps_ms,
    topic_columns,
)
from kafka_sink.spark.executor.producer_cache import BulkProducer
from kafka_sink.spark.executor.record_errors import (
    FAIL_TASK,
    BadRecordError,
    RecordErrorPolicy,
    RowContents,
    SkipRecords,
    row_contents,
)
from kafka_sink.spark.executor.row_fingerprint import batch_fingerprint
from kafka_sink.spark.executor.topic_rules import refused_rows, topic_rules
from kafka_sink.spark.fault_hooks import TASK_DONE, pause_commit
from kafka_sink.spark.fingerprint import EMPTY_FINGERPRINT, Fingerprint
from kafka_sink.spark.logs import (
    LEVEL_CONF,
    LEVEL_NAMES,
    apply_level,
    ensure_logging,
    logger,
    parse_level,
)
from kafka_sink.spark.metrics import TaskMeter, TaskMetrics
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout

if TYPE_CHECKING:
    # Types only: a write without a format never loads the formats' plan, its catalog and the
    # encoder (imported by ``write_task`` when a plan comes with the write).
    from kafka_sink.formats.batch_encoder import BatchEncoder
    from kafka_sink.formats.plan import FormatPlan

__all__ = ["write_task"]

# How long a failing task waits for its transaction's abort before leaving it to the driver.
_ABORT_TIMEOUT_S = 10.0
# Slack on top of the producer's own bound (delivery.timeout.ms, plus request.timeout.ms for an
# attempt still in flight when it passes) before a task stops waiting for acknowledgements; the
# producer fails every batch within its bound, so this only fires when its sender is stuck.
_STALL_SLACK_MS = 30_000
# What a topic's rules (``topic_rules``) find before sending: a broker refusing one of these
# means the rules this worker holds are out of date.
_TOPIC_RULE_REASONS = frozenset({"record_too_large", "invalid_record", "invalid_timestamp"})
# Partitions named in a timeout message; the count of the others is given.
_MESSAGE_PARTITIONS = 12

P = TypeVar("P", bound=BulkProducer)


class TransactionalProducer(BulkProducer, Protocol):
    """The part of a transactional ``KafkaProducer`` an exactly-once task uses."""

    def init_transactions(self, timeout: float | None = None) -> None: ...

    def begin_transaction(self) -> None: ...

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction: ...

    def abort_transaction(self, timeout: float | None = None) -> None: ...


def _create_transactional(config: dict[str, str]) -> TransactionalProducer:
    """A new transactional producer for one task attempt (tests replace this)."""
    producer: TransactionalProducer = KafkaProducer(config)
    return producer


@dataclass(frozen=True)
class _TaskInfo:
    partition_id: int
    attempt_number: int
    task_attempt_id: int
    batch_id: int | None
    #: The level Spark's conf ``spark.pykafka.logLevel`` names (a session's conf reaches tasks
    #: as local properties); None when unset or not a level.
    conf_log_level: int | None = None


def _task_info() -> _TaskInfo:
    ctx = TaskContext.get()
    if ctx is None:  # called outside a Spark task (unit tests drive write() directly)
        return _TaskInfo(0, 0, 0, None)
    raw_batch = ctx.getLocalProperty("streaming.sql.batchId")
    raw_level = ctx.getLocalProperty(LEVEL_CONF)
    conf_level = parse_level(raw_level) if raw_level is not None else None
    if raw_level is not None and conf_level is None:
        ensure_logging()
        logger.warning(
            "Spark conf %s is %r, not one of %s; the sink logs at INFO",
            LEVEL_CONF,
            raw_level,
            LEVEL_NAMES,
        )
    return _TaskInfo(
        partition_id=ctx.partitionId(),
        attempt_number=ctx.attemptNumber(),
        task_attempt_id=ctx.taskAttemptId(),
        batch_id=int(raw_batch) if raw_batch is not None else None,
        conf_log_level=conf_level,
    )


def _in_spark_task() -> bool:
    return TaskContext.get() is not None


@functools.lru_cache(maxsize=8)
def _producer_config(items: tuple[tuple[str, str], ...]) -> ProducerConfig:
    """The parsed producer config, once per worker process and config (not per task)."""
    return ProducerConfig.from_mapping(dict(items))


def write_task(
    options: SinkOptions,
    layout: InputLayout,
    batches: Iterator[pa.RecordBatch],
    *,
    streaming: bool,
    eos: EosPlan | None,
    formats: FormatPlan | None = None,
) -> PyKafkaCommitMessage:
    """Write one Spark task's rows under the write's delivery guarantee (module docstring)."""
    task = _task_info()
    encoder = None
    if formats is not None:
        # Only a write with a format loads the encoder (and the formats' catalog under it).
        from kafka_sink.formats.batch_encoder import BatchEncoder

        encoder = BatchEncoder(formats)
    apply_level(options.log_level if options.log_level is not None else task.conf_log_level)
    if eos is not None and eos.completed is not None:
        # An earlier run completed this idempotencyKey: nothing to produce, nor to read.
        return PyKafkaCommitMessage(
            task.partition_id,
            task.attempt_number,
            task.task_attempt_id,
            task.batch_id,
            conf_log_level=task.conf_log_level,
        )
    policy = record_errors.policy_for(
        options,
        partition_id=task.partition_id,
        attempt_number=task.attempt_number,
        batch_id=task.batch_id,
    )
    if eos is None:
        write = _TaskWrite(options, layout, task, encoder, record_errors=policy)
        return write.run(_AtLeastOnce(options), batches)
    if streaming and task.batch_id is None and _in_spark_task():
        raise SinkError(
            "exactly-once: this task has no streaming batch id (Spark's local property "
            "streaming.sql.batchId is not set); the sink cannot tell its batch"
        )
    write = _TaskWrite(
        options, layout, task, encoder, fingerprinted=True, record_errors=policy, transactional=True
    )
    # A batch job is batch 0 of its own write, as the driver commits it.
    if eos.committed_partition(task.batch_id or 0, task.partition_id):
        return write.skip(batches)
    return write.run(_ExactlyOnce(options, eos.prefix), batches)


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


class _Guarantee(Protocol[P]):
    """What a delivery guarantee decides in a task's write; the loop does the rest."""

    def acquire(self, task: _TaskInfo) -> P:
        """The producer for the task's rows, leased from the cache (on the first record)."""
        ...

    def finish(self, producer: P, bound_s: float) -> PreparedTransaction | None:
        """Once every record is acknowledged: the transaction the commit message carries."""
        ...

    def fail(self, producer: P, write: _TaskWrite, exc: BaseException) -> None:
        """The task fails with ``exc`` while it holds ``producer`` (then it is released)."""
        ...


class _AtLeastOnce:
    """The worker's shared producer for the config; a retried task sends its rows again."""

    def __init__(self, options: SinkOptions) -> None:
        self._options = options

    def acquire(self, task: _TaskInfo) -> BulkProducer:
        return producer_cache.acquire(
            self._options.producer_items,
            idle_timeout_ms=self._options.producer_idle_timeout_ms,
        )

    def finish(self, producer: BulkProducer, bound_s: float) -> PreparedTransaction | None:
        return None

    def fail(self, producer: BulkProducer, write: _TaskWrite, exc: BaseException) -> None:
        if isinstance(exc, SinkDataError):
            # Bad data, not a bad producer: what was already sent stays in flight and is
            # delivered by the cached producer; the task fails with the data error. (A task
            # meets no registry nor commit store: the driver alone calls them.) Dead letters
            # that could not be written are a delivery failure (a SinkError, not data's).
            return
        # Closing delivers (or fails) what is still queued, including the rows a failed
        # send_columns call queued before it raised. After a delivery timeout the producer has
        # had its whole bound: close it at once instead of waiting again.
        timed_out = isinstance(exc, SinkDeliveryTimeoutError)
        producer_cache.evict(
            producer, timeout_s=0.0 if timed_out else producer_cache.CLOSE_TIMEOUT_S
        )
        write.log_partial_write(exc)


class _ExactlyOnce:
    """One transaction for the attempt: written, prepared, handed to the driver."""

    def __init__(self, options: SinkOptions, prefix: str) -> None:
        self._options = options
        self._prefix = prefix

    def acquire(self, task: _TaskInfo) -> TransactionalProducer:
        """This attempt's producer, its transaction begun.

        Its transactional id is a slot of the partition no other attempt holds open
        (``eos/slots.py``, asked before InitProducerId, which would abort such a transaction).
        Leased from the worker's cache by config and transactional id: the same Spark
        partition and slot in the next micro-batch gets it warm. InitProducerId runs
        every time (it fences older producers of the id and moves on from the transaction the
        driver has since ended); a cached one it fails for is replaced by a new producer.
        """
        # Exactly-once only: an at-least-once task never loads the slots' admin client.
        from kafka_sink.spark.executor import slots

        config = self._options.producer_config
        config["transactional.id"] = slots.claim_transactional_id(
            config, self._prefix, task.partition_id, task.attempt_number
        )
        items = tuple(sorted(config.items()))
        idle_ms = self._options.producer_idle_timeout_ms
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

    def finish(self, producer: TransactionalProducer, bound_s: float) -> PreparedTransaction | None:
        # The transaction stays open for the driver; the producer only waits in the cache and
        # its next task re-initialises it.
        prepared = producer.prepare_transaction(bound_s)
        return prepared if prepared.partitions else None

    def fail(self, producer: TransactionalProducer, write: _TaskWrite, exc: BaseException) -> None:
        try:
            producer.abort_transaction(_ABORT_TIMEOUT_S)
        except Exception as abort_exc:  # the task's own failure is what it raises
            ensure_logging()
            logger.warning(
                "task %d (attempt %d) could not abort its transaction (the driver's sweep ends "
                "it, or the broker after transaction.timeout.ms): %s",
                write.task.partition_id,
                write.task.attempt_number,
                abort_exc,
            )
        # Never reused after a failure: the next attempt on this worker starts afresh.
        producer_cache.evict(producer, timeout_s=0.0)


@dataclass(frozen=True)
class _Sent:
    """What a tracked bulk send came from: its group, and the piece (and its first row) the
    group's rows were taken from, for the rows the broker refuses."""

    group: TopicColumns
    piece: pa.RecordBatch
    base: int


class _TaskWrite:
    """One task's rows on their way to Kafka: what was sent, what is pending, what was acked."""

    def __init__(
        self,
        options: SinkOptions,
        layout: InputLayout,
        task: _TaskInfo,
        encoder: BatchEncoder | None = None,
        *,
        fingerprinted: bool = False,
        record_errors: RecordErrorPolicy = FAIL_TASK,
        transactional: bool = False,
    ) -> None:
        self.options = options
        self.layout = layout
        self.task = task
        self.encoder = encoder
        #: What becomes of a row that can never be written (``record_errors``).
        self.record_errors = record_errors
        #: The rows go into one transaction (exactly-once): a refused batch fails all of it.
        self.transactional = transactional
        #: The fingerprint of the rows seen so far; None when the write does not keep one.
        self.fingerprint: Fingerprint | None = EMPTY_FINGERPRINT if fingerprinted else None
        #: Futures not yet folded into ``offsets`` (topic, future).
        self.pending: list[tuple[str, BulkSendFuture]] = []
        #: Every future of the task, for what a timeout reports as unacknowledged.
        self.sent: list[tuple[str, BulkSendFuture]] = []
        self.offsets = _Offsets()
        self._partition_counts: dict[str, int] = {}
        #: Bulk sends whose refused rows go to the policy (``onRecordError`` other than fail).
        self._tracked: dict[int, _Sent] = {}
        #: Column topics that could be written, and those that cannot (checked once per task).
        self._writable: set[str] = set()
        self._unwritable: dict[str, KafkaError] = {}
        self._acquire: Callable[[], BulkProducer] | None = None
        self.rows_read = 0

    @property
    def _takes_rows_out(self) -> bool:
        return self.record_errors.action is not None

    def run(
        self, guarantee: _Guarantee[P], batches: Iterator[pa.RecordBatch]
    ) -> PyKafkaCommitMessage:
        producer: P | None = None
        transaction: PreparedTransaction | None = None
        metrics: TaskMetrics | None = None
        meter = TaskMeter()

        def acquire() -> P:
            nonlocal producer
            if producer is None:
                producer = guarantee.acquire(self.task)
                meter.lease(producer)
            return producer

        self._acquire = acquire
        try:
            for piece, base in self._serialized(batches, self.record_errors):
                self._fold_fingerprint(piece)
                for group in self._groups(piece, base):
                    future = self._send(acquire(), group, piece, base)
                    self.pending.append((group.topic, future))
                    self.sent.append((group.topic, future))
                self._send_dead_letters()
                self._collect_done()
            # The last rows the format refused became dead letters after the last piece, or
            # every row did and no piece came: send them (leasing the producer if none yet).
            self._send_dead_letters()
            if producer is not None:
                self._await_acks(producer)
                # Rows the broker refused became dead letters only now: send and await them too.
                if self._send_dead_letters():
                    self._await_acks(producer)
                transaction = guarantee.finish(producer, self._wait_bound()[0] / 1000)
                metrics = meter.result(producer, transactional=transaction is not None)
            pause_commit(self.task.batch_id, TASK_DONE)  # test-only; see fault_hooks
        except BaseException as exc:
            if producer is not None:
                guarantee.fail(producer, self, exc)
            raise
        finally:
            if producer is not None:
                # Its idle time starts now (a no-op when it was evicted above).
                producer_cache.release(producer)
        return PyKafkaCommitMessage(
            partition_id=self.task.partition_id,
            attempt_number=self.task.attempt_number,
            task_attempt_id=self.task.task_attempt_id,
            batch_id=self.task.batch_id,
            ranges=self.offsets.ranges(),
            transaction=transaction,
            fingerprint=self.fingerprint,
            conf_log_level=self.task.conf_log_level,
            metrics=metrics,
            bad_records=self.record_errors.counts(self.rows_read),
        )

    def skip(self, batches: Iterator[pa.RecordBatch]) -> PyKafkaCommitMessage:
        """Write nothing: Kafka committed this partition of the batch in an earlier run. The
        rows are read (Spark reuses the worker only once they are) for their fingerprint."""
        # The rows the first run could not serialize were left out of its fingerprint: leave
        # them out again, without sending or counting them a second time.
        quiet = SkipRecords(self.task.partition_id, None) if self._takes_rows_out else None
        for piece, _base in self._serialized(batches, quiet or self.record_errors):
            self._fold_fingerprint(piece)
        ensure_logging()
        logger.info(
            "task %d (attempt %d) of batch %s: skipped, an earlier run of the batch committed "
            "this partition; fingerprint %s",
            self.task.partition_id,
            self.task.attempt_number,
            self.task.batch_id,
            self.fingerprint,
        )
        return PyKafkaCommitMessage(
            partition_id=self.task.partition_id,
            attempt_number=self.task.attempt_number,
            task_attempt_id=self.task.task_attempt_id,
            batch_id=self.task.batch_id,
            fingerprint=self.fingerprint,
            skipped=True,
            conf_log_level=self.task.conf_log_level,
        )

    def _serialized(
        self, batches: Iterator[pa.RecordBatch], policy: RecordErrorPolicy
    ) -> Iterator[tuple[pa.RecordBatch, int]]:
        """The batches with their formatted columns serialized (a skipping task too, so its
        fingerprint is of the bytes the first run wrote), each with the task-input row of its
        first row. A row the format cannot serialize goes to ``policy``; the rows around it
        come as pieces of their own."""
        for batch in batches:
            base = self.rows_read
            self.rows_read += batch.num_rows
            if self.encoder is None:
                yield batch, base
            else:
                yield from self._encoded(batch, base, policy)

    def _encoded(
        self, batch: pa.RecordBatch, base: int, policy: RecordErrorPolicy
    ) -> Iterator[tuple[pa.RecordBatch, int]]:
        assert self.encoder is not None
        try:
            yield self.encoder.encode(batch), base
            return
        except ColumnSerializationError as exc:
            if policy.action is None:
                raise
            if batch.num_rows > 1:
                # Halve until the failing rows stand alone: O(bad rows x log rows) encodes,
                # on the failure path only.
                middle = batch.num_rows // 2
                yield from self._encoded(batch.slice(0, middle), base, policy)
                yield from self._encoded(batch.slice(middle), base + middle, policy)
                return
            failure = exc
        topic = self.options.topic
        if topic is None and "topic" in batch.schema.names:
            topic = batch.column("topic")[0].as_py()
        stage = "KEY_CONVERTER" if failure.column == "key" else "VALUE_CONVERTER"
        record = BadRecord(
            base,
            topic,
            f"row {base} ({failure.column}): {failure}",
            code=failure.code,
            stage=stage,
            error_class=record_errors.error_class_name(failure.__cause__ or failure),
        )
        policy.reject(record, lambda: self._contents(batch, 0))

    def _contents(self, piece: pa.RecordBatch, index: int) -> RowContents:
        return row_contents(piece, index, timestamp_ms=self._timestamp_of)

    @staticmethod
    def _timestamp_of(column: pa.Array) -> int | None:
        if column.null_count:
            return None
        return int(timestamps_ms(column, 0)[0])

    def _groups(self, piece: pa.RecordBatch, base: int) -> list[TopicColumns]:
        """The piece's rows by topic, checked; bad rows go to the policy and the rows around
        them are grouped again (contiguous runs, so every row keeps its task-input number)."""
        out: list[TopicColumns] = []
        work = [(0, piece.num_rows)]
        while work:
            start, stop = work.pop()
            if start >= stop:
                continue
            try:
                out.extend(self._checked_groups(piece.slice(start, stop - start), base + start))
            except BadRecordError as exc:
                bad = [exc.record]
            except BadRowsError as exc:
                bad = exc.records
            else:
                continue
            locals_ = sorted({record.row - base for record in bad})
            for record in sorted(bad, key=lambda r: r.row):
                self._reject(record, piece, record.row - base)
            # The runs between the bad rows, pushed so the first run is processed first.
            bounds = [start - 1, *locals_, stop]
            work.extend(reversed([(lo + 1, hi) for lo, hi in itertools.pairwise(bounds)]))
        return merge_groups(out, base)

    def _checked_groups(self, piece: pa.RecordBatch, base: int) -> list[TopicColumns]:
        groups = topic_columns(
            piece,
            self.layout,
            self.options.topic,
            now_ms=SYSTEM_CLOCK.wall_ms(),
            row_base=base,
        )
        if not groups:
            return groups
        assert self._acquire is not None
        producer = self._acquire()
        for group in groups:
            if self._takes_rows_out:
                self._check_topic(producer, group)
            self._check_partitions(producer, group)
            if self._takes_rows_out:
                cfg = _producer_config(self.options.producer_items)
                rules = topic_rules(self.options.producer_items, group.topic)
                refused = refused_rows(group, rules, cfg)
                if refused:
                    raise BadRowsError(refused)
        return groups

    def _check_topic(self, producer: BulkProducer, group: TopicColumns) -> None:
        """A topic the ``topic`` column names that cannot be written makes its rows bad: one
        the principal may not write, an invalid name, or one the brokers answered does not
        exist (after max.block.ms; an unreachable cluster is not a row's fault and fails the
        task). Each topic is asked once per task."""
        if self.options.topic is not None or group.topic in self._writable:
            return
        refusal = self._unwritable.get(group.topic)
        if refusal is None:
            try:
                count = len(producer.partitions_for(group.topic))
            except (TopicAuthorizationFailedError, InvalidTopicError) as exc:
                refusal = exc
            except KafkaTimeoutError as exc:
                if not isinstance(exc.topic_error, UnknownTopicOrPartitionError):
                    raise
                refusal = exc
            else:
                self._partition_counts[group.topic] = count
                self._writable.add(group.topic)
                return
            self._unwritable[group.topic] = refusal
        code = record_errors.reason_of(refusal) or "unknown_topic"
        raise BadRowsError(
            [
                BadRecord(
                    group.row_number(i),
                    group.topic,
                    f"row {group.row_number(i)} names topic {group.topic!r} in its 'topic' "
                    f"column, which cannot be written: {refusal}",
                    code=code,
                    error_class=record_errors.error_class_name(refusal),
                )
                for i in range(group.num_rows)
            ]
        )

    def _reject(self, record: BadRecord, piece: pa.RecordBatch, index: int) -> None:
        """Hand a row that can never be written to the record error policy (raising fails
        the task); ``piece``'s row ``index`` is its contents."""
        self.record_errors.reject(record, lambda: self._contents(piece, index))

    def _send(
        self, producer: BulkProducer, group: TopicColumns, piece: pa.RecordBatch, base: int
    ) -> BulkSendFuture:
        track = self._takes_rows_out and not self.transactional
        try:
            future = _send(producer, group, track_rows=track)
        except BadRecordError as exc:
            # Policies that take rows out checked sizes before: only FailTask gets here.
            self.record_errors.reject(exc.record, lambda: self._contents(piece, 0))
            raise SinkDataError(exc.record.reason) from None
        if track:
            self._tracked[id(future)] = _Sent(group, piece, base)
        return future

    def _send_dead_letters(self) -> bool:
        """Queue the dead letters made so far; True if there were any."""
        letters = self.record_errors.take_dead_letters()
        if not letters:
            return False
        topic = self.options.dead_letter_topic
        assert topic is not None and self._acquire is not None
        producer = self._acquire()
        values = pa.array([d.value for d in letters], pa.binary())
        keys = pa.array([d.key for d in letters], pa.binary())
        stamps = pa.array([d.timestamp_ms for d in letters], pa.int64())
        try:
            future = producer.send_columns(
                topic,
                values,
                keys if keys.null_count < len(keys) else None,
                headers=[list(d.headers) for d in letters],
                timestamps_ms=stamps,
            )
        except RecordTooLargeInColumnsError as exc:
            # A row too large for the producer is as large in the dead-letter topic, with its
            # headers on top: no policy can set it aside, only a larger max.request.size can.
            row = (dict(letters[exc.row].headers).get(record_errors.HEADER_ROW) or b"?").decode()
            raise SinkError(
                f"the dead letter of row {row} for topic {topic!r} (option 'deadLetterTopic') is "
                f"{exc.size} bytes, larger than {exc.setting}={exc.limit}: a dead letter holds the "
                "row's own bytes, so it cannot be written either and the task fails rather than "
                f"lose the row. Fix: {exc.fix(prefix='option kafka.')}, or use "
                "onRecordError=skip for such rows"
            ) from None
        except KafkaError as exc:
            raise SinkError(
                f"{len(letters)} dead letter(s) for topic {topic!r} (option 'deadLetterTopic') "
                f"could not be queued, so the task fails rather than lose them: {exc}"
            ) from exc
        self.pending.append((topic, future))
        self.sent.append((topic, future))
        return True

    def _fold_fingerprint(self, batch: pa.RecordBatch) -> None:
        if self.fingerprint is not None:
            seen = batch_fingerprint(batch, self.layout, self.options.topic)
            self.fingerprint = self.fingerprint.plus(seen)

    def _wait_bound(self) -> tuple[int, str]:
        """How long a task waits for acknowledgements (ms), and how that bound is made up."""
        cfg = _producer_config(self.options.producer_items)
        bound_ms = cfg.delivery_timeout_ms + cfg.request_timeout_ms + _STALL_SLACK_MS
        how = (
            f"kafka.delivery.timeout.ms ({cfg.delivery_timeout_ms} ms) + kafka.request.timeout.ms "
            f"({cfg.request_timeout_ms} ms) + {_STALL_SLACK_MS // 1000} s"
        )
        return bound_ms, how

    def _check_partitions(self, producer: BulkProducer, group: TopicColumns) -> None:
        if group.partitions is None:
            return
        counts = self._partition_counts
        if group.topic not in counts:
            counts[group.topic] = len(producer.partitions_for(group.topic))
        check_partitions(group, counts[group.topic])

    def _collect_done(self) -> None:
        """Fold finished futures (raising the first failure early); keep the rest pending."""
        still: list[tuple[str, BulkSendFuture]] = []
        for topic, future in self.pending:
            if not future.done():
                still.append((topic, future))
                continue
            try:
                self._fold(topic, future, 0.0)
            except KafkaTimeoutError as exc:  # the producer gave up on a batch
                raise self._delivery_timeout(exc, stalled_s=None) from exc
        self.pending = still

    def _await_acks(self, producer: BulkProducer) -> None:
        """Flush and fold every future, all within one bound; a stall or expiry raises
        :class:`SinkDeliveryTimeoutError` naming what was still pending."""
        bound_ms = self._wait_bound()[0]
        start = time.monotonic()
        deadline = start + bound_ms / 1000

        def stalled() -> SinkDeliveryTimeoutError:
            return self._delivery_timeout(None, stalled_s=time.monotonic() - start)

        try:
            producer.flush(bound_ms / 1000)
        except KafkaTimeoutError as exc:
            raise stalled() from exc
        for topic, future in self.pending:
            try:
                self._fold(topic, future, max(deadline - time.monotonic(), 0.0))
            except KafkaTimeoutError as exc:
                if not future.done():
                    raise stalled() from exc
                raise self._delivery_timeout(exc, stalled_s=None) from exc
        self.pending = []

    def _fold(self, topic: str, future: BulkSendFuture, timeout_s: float) -> None:
        """Add a future's offsets. Under a policy that takes rows out (at-least-once), the
        records the broker refused one by one go to the policy and the rest count; any other
        failure raises (a dead letter's, named as such)."""
        try:
            result = future.get(timeout_s)
        except KafkaTimeoutError:
            raise
        except KafkaError as exc:
            if record_errors.reason_of(exc) in _TOPIC_RULE_REASONS:
                topic_rules_module.forget(self.options.producer_items, topic)
            sent = self._tracked.pop(id(future), None)
            if sent is None or not self._refused_rows_taken_out(future, sent):
                if topic == self.options.dead_letter_topic and self._takes_rows_out:
                    raise SinkError(
                        f"dead letters for topic {topic!r} (option 'deadLetterTopic') could not "
                        f"be written, so the task fails rather than lose them: {exc}"
                    ) from exc
                raise
            result = future.offsets()
        self._tracked.pop(id(future), None)
        self.offsets.add(topic, result)

    def _refused_rows_taken_out(self, future: BulkSendFuture, sent: _Sent) -> bool:
        """Hand the rows the broker refused to the policy; False (nothing handed) when any
        failure is not a record's own."""
        failed = future.failed_rows()
        codes = [record_errors.reason_of(error) for _row, error in failed]
        if not failed or any(code is None for code in codes):
            return False
        group = sent.group
        for (index, error), code in zip(failed, codes, strict=True):
            assert code is not None
            row = group.row_number(index)
            record = BadRecord(
                row,
                group.topic,
                f"row {row} (topic {group.topic!r}) was refused by the broker: {error}",
                code=code,
                error_class=record_errors.error_class_name(error),
            )
            self._reject(record, sent.piece, row - sent.base)
        return True

    def _delivery_timeout(
        self, cause: BaseException | None, *, stalled_s: float | None
    ) -> SinkDeliveryTimeoutError:
        """The task's failure when records were not acknowledged in time: what was pending,
        the bound and the option that sets it, and what happens next."""
        per_tp: dict[tuple[str, int], tuple[int, int]] = {}
        for topic, future in self.sent:
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
        task = self.task
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

    def log_partial_write(self, exc: BaseException) -> None:
        """Log what was acknowledged before the task failed with ``exc`` (a retry rewrites it),
        counting the rows a failed ``send_columns`` call had queued."""
        futures = [f for _topic, f in self.pending]
        queued = getattr(exc, "queued_future", None)
        if isinstance(queued, BulkSendFuture):
            futures.append(queued)
        for future in futures:
            if isinstance(future, BulkSendFuture) and future.done():
                self.offsets.add(future.topic, future.offsets())
        ranges = self.offsets.ranges()
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
            self.task.partition_id,
            self.task.attempt_number,
            written,
        )


def _send(producer: BulkProducer, group: TopicColumns, *, track_rows: bool) -> BulkSendFuture:
    """Queue one topic's rows; a row too large to ever send is a ``BadRecordError`` naming
    its task-input row. ``track_rows``: the future can name the rows the broker refused."""
    try:
        if track_rows:
            return producer.send_columns(
                group.topic,
                group.values,
                group.keys,
                partitions=group.partitions,
                headers=group.headers,
                timestamps_ms=group.timestamps_ms,
                track_rows=True,
            )
        return producer.send_columns(
            group.topic,
            group.values,
            group.keys,
            partitions=group.partitions,
            headers=group.headers,
            timestamps_ms=group.timestamps_ms,
        )
    except RecordTooLargeInColumnsError as exc:
        row = group.row_number(exc.row)
        raise BadRecordError(
            row,
            exc.topic,
            f"row {row} (topic {exc.topic!r}) {exc.too_large()}. "
            f"Fix: {exc.fix(prefix='option kafka.')}",
            code="record_too_large",
            error_class="kafka_sink.errors.RecordTooLargeError",
        ) from None
