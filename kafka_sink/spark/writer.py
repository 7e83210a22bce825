"""The Arrow writers of ``format("pykafka")``: batch and streaming share one write path.

Role: ``write()`` runs once per Spark task on an executor. It acquires this worker's cached
producer for the config, turns each Arrow batch into per-topic columns, hands them to
``KafkaProducer.send_columns`` (the producer's bulk path), flushes, waits for every bulk future and
returns a :class:`~kafka_sink.spark.commit.PyKafkaCommitMessage` with the acknowledged offsets.
``commit()`` / ``abort()`` run on the driver (in a Python worker Spark starts there) and record
the gathered offsets (``commit.py``).

Invariants:
- ``write()`` returns only after every record it sent is acknowledged; any delivery error raises
  and fails the task (Spark then retries it, re-sending the whole partition: at-least-once).
- ``write()`` consumes its whole iterator on success (Spark reuses the worker only then).
- The writers hold picklable configuration only (options, layout, ids); producers, threads and
  sockets exist only inside ``write()`` on the executor, through ``producer_cache``.
- A producer involved in a delivery failure is evicted from the cache and closed (which delivers
  or fails what it still holds, including rows a failed ``send_columns`` call had queued); the
  failed task then logs the ranges that were acknowledged, which a retry writes again.
- No per-row Python on the send path except for headers (see ``columns.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from kafka_sink.clock import SYSTEM_CLOCK
from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets
from kafka_sink.spark import producer_cache
from kafka_sink.spark.columns import TopicColumns, check_partitions, topic_columns
from kafka_sink.spark.commit import (
    PartitionRange,
    PyKafkaCommitMessage,
    abort_document,
    commit_document,
    ensure_logging,
    log_line,
    logger,
    merge_range,
    write_document,
)
from kafka_sink.spark.errors import SinkError
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout

__all__ = ["PyKafkaBatchWriter", "PyKafkaStreamWriter"]

# Slack on top of the producer's own delivery.timeout.ms before a task stops waiting for a bulk
# future; the producer fails every batch by its delivery timeout, so this only guards a stall.
_GET_SLACK_S = 60.0
_DEFAULT_DELIVERY_TIMEOUT_MS = 120_000


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


class _Offsets:
    """Folds bulk-send results into per topic-partition ranges."""

    def __init__(self) -> None:
        self._ranges: dict[tuple[str, int], PartitionRange] = {}

    def add(self, topic: str, offsets: dict[int, PartitionOffsets]) -> None:
        for partition, po in offsets.items():
            new = PartitionRange(topic, partition, po.first_offset, po.last_offset, po.record_count)
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
    ) -> None:
        self.options = options
        self.layout = layout
        self.streaming = streaming
        self.overwrite = overwrite
        self.write_id = write_id

    # -- executor side ---------------------------------------------------------------------

    def _get_timeout_s(self) -> float:
        raw = self.options.producer_config.get("delivery.timeout.ms")
        try:
            delivery_ms = int(raw) if raw is not None else _DEFAULT_DELIVERY_TIMEOUT_MS
        except ValueError:
            delivery_ms = _DEFAULT_DELIVERY_TIMEOUT_MS
        return delivery_ms / 1000 + _GET_SLACK_S

    def _write(self, batches: Iterator[pa.RecordBatch]) -> PyKafkaCommitMessage:
        task = _task_info()
        producer: producer_cache.BulkProducer | None = None
        pending: list[tuple[str, BulkSendFuture]] = []
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
                    producer = producer_cache.acquire(self.options.producer_items)
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
                pending = self._collect_done(pending, offsets)
            if producer is not None:
                producer.flush()
                timeout_s = self._get_timeout_s()
                for topic, future in pending:
                    offsets.add(topic, future.get(timeout_s))
        except SinkError:
            # Bad data, not a bad producer: what was already sent stays in flight and is
            # delivered by the cached producer; the task fails with the data error.
            raise
        except BaseException as exc:
            if producer is not None:
                # Closing delivers (or fails) what is still queued, including the rows a failed
                # send_columns call queued before it raised; then say what this attempt wrote.
                producer_cache.evict(producer)
                self._log_partial_write(task, offsets, pending, exc)
            raise
        return PyKafkaCommitMessage(
            partition_id=task.partition_id,
            attempt_number=task.attempt_number,
            task_attempt_id=task.task_attempt_id,
            batch_id=task.batch_id,
            ranges=offsets.ranges(),
        )

    @staticmethod
    def _log_partial_write(
        task: _TaskInfo,
        offsets: _Offsets,
        pending: list[tuple[str, BulkSendFuture]],
        exc: BaseException,
    ) -> None:
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
        producer: producer_cache.BulkProducer, group: TopicColumns, counts: dict[str, int]
    ) -> None:
        if group.partitions is None:
            return
        if group.topic not in counts:
            counts[group.topic] = len(producer.partitions_for(group.topic))
        check_partitions(group, counts[group.topic])

    @staticmethod
    def _collect_done(
        pending: list[tuple[str, BulkSendFuture]], offsets: _Offsets
    ) -> list[tuple[str, BulkSendFuture]]:
        """Fold finished futures (raising the first failure early); keep the rest."""
        still: list[tuple[str, BulkSendFuture]] = []
        for topic, future in pending:
            if future.done():
                offsets.add(topic, future.get(0))
            else:
                still.append((topic, future))
        return still

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
        now_ms = int(time.time() * 1000)
        build = commit_document if ok else abort_document
        document = build(
            messages,
            mode=self._mode,
            batch_id=batch_id,
            write_id=self.write_id,
            query_name=self.options.query_name,
            now_ms=now_ms,
        )
        directory = self.options.commit_dir(streaming=self.streaming)
        path: str | None = None
        if directory is not None:
            stem = str(batch_id) if batch_id is not None else self.write_id
            path = write_document(
                directory, f"{stem}.json" if ok else f"{stem}.aborted.json", document
            )
        if ok:
            logger.info(log_line(document, path))
        else:
            logger.error(log_line(document, path))


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
