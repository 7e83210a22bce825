"""The writers of ``format("pykafka")``: what Spark pickles to the tasks and calls on the driver.

Role: ``datasource.py`` builds a :class:`PyKafkaBatchWriter` (``df.write``, one commit for the
whole job) or a :class:`PyKafkaStreamWriter` (``df.writeStream``, one commit per micro-batch);
Spark pickles it to every task, whose ``write()`` runs the executor loop in ``task.py``, and calls
its ``commit()`` / ``abort()`` on the driver (in a Python worker Spark starts there) with the
tasks' commit messages. ``commit()`` and ``abort()`` record the batch: exactly-once, they first
commit (or abort) every transaction the tasks prepared (``eos/committer.py``, through the write's
:class:`~kafka_sink.spark.eos_plan.EosPlan`; an abort first counts what the open transactions of
tasks that sent no message had written, ``eos/aborted.py``); then they write the commit-log document
(``commit_log/``) and log its one short INFO line (the offset ranges at DEBUG), both naming
the delivery guarantee. ``commit()`` and ``abort()`` log at the option ``logLevel``, else at
the level Spark's conf gave the tasks (carried in their commit messages, see ``logs.py``).

Invariants:
- The writers hold picklable configuration only (options, layout, ids, the plans: exactly-once's
  and the formats', which carries schemas and ids, never a registry connection); producers,
  threads and sockets exist only inside ``write()`` on the executor.
- Importing this module loads nothing executor-side (no producer, numpy, ``pyarrow.compute`` or
  ``columns``): the driver's Python workers that plan and commit every micro-batch import it.
  ``task.py`` is imported by ``write()`` only. Nor does it load what only some writes need: the
  formats' plan (its catalog, the registry client and the network stack under it; a plan that
  travels with the writer brings its module when it is unpickled) and exactly-once's committer
  (imported by ``_end_transactions``). Every Python process of a write (each task's worker, the
  commit's) imports this module first, so what it loads is paid on the first row's path.
- Exactly-once, the transactions are committed before the commit file and the log line are
  written, so a commit file names a batch that is visible to read_committed readers; a failed
  commit raises and writes no commit file. Once the transactions are committed, a commit file
  that cannot be written is logged (ERROR, naming it and that the rows are visible) and does not
  fail the write: the rows cannot be hidden any more.
- A batch job's intent record is deleted once its commit is over (Spark calls nothing more for
  it), unless the job has an ``idempotencyKey``: then it is kept, stamped with the write id and
  the time (``eos/idempotency.py``), for the key's later runs; a streaming query's is kept for
  the next batch's recovery.
- A batch job whose key an earlier run completed (its plan's ``completed``) ends no transaction:
  its commit writes nothing to Kafka, and its commit-log document and line say it was already
  completed.
- Under ``onRecordError`` deadLetter or skip, a commit adds its tasks' bad-row counts up
  (``bad_records.merge_counts``) and refuses a batch over ``deadLetterMaxRecords`` /
  ``deadLetterMaxRatio`` (``driver/record_bounds.py``) before anything is recorded: exactly-once
  inside ``EosCommitter.commit`` before the intent, so its transactions are aborted and nothing
  of it becomes visible; at-least-once before the commit document. A batch with bad rows logs
  its line at WARNING (under skip, the batch's one report of them).
- A streaming commit none of whose tasks ran ``write()`` (``trigger(continuous=...)``) raises
  before anything is recorded (``triggers.py``), so Spark never marks the epoch done with its
  rows unwritten.
- A commit's document carries the batch's ``metrics`` section (``spark/metrics``) when its tasks
  measured their producers; ``commit_duration_ms`` runs from the start of ``commit()`` to the
  document (exactly-once: the transactions committed). With ``metricsPushGateway`` the section
  is then pushed (bounded; a failed push is a WARNING, never a failed batch).
- An exactly-once stream writer carries its query's start work (``eos/start.py``) on the
  driver only: ``streamWriter()`` runs it explicitly (:meth:`PyKafkaStreamWriter.run_query_start`)
  and pickling leaves it out, doing nothing else. Its ``commit()`` and ``abort()`` tell the start
  work the planned batch ended (``QueryStart.batch_ended``), so that a planning after an
  interrupted batch is known for a start.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from kafka_sink.sink_errors import CommitStoreUnavailableError
from kafka_sink.spark.bad_records import BadRecordCounts, merge_counts
from kafka_sink.spark.commit_log.document import (
    PyKafkaCommitMessage,
    UnfinishedWrites,
    build_document,
    log_line,
    offsets_line,
    write_document,
)
from kafka_sink.spark.driver.record_bounds import check_bounds
from kafka_sink.spark.driver.triggers import refuse_unwritten_commit
from kafka_sink.spark.eos_plan import EosPlan
from kafka_sink.spark.fault_hooks import BEFORE_COMMIT, pause_commit
from kafka_sink.spark.logs import apply_level, logger
from kafka_sink.spark.metrics import batch_metrics
from kafka_sink.spark.options import SinkOptions
from kafka_sink.spark.schema import InputLayout
from kafka_sink.spark.spark_api import StreamWriterBase

if TYPE_CHECKING:
    import pyarrow as pa

    from kafka_sink.formats.plan import FormatPlan
    from kafka_sink.spark.driver.eos.start import QueryStart

__all__ = ["PyKafkaBatchWriter", "PyKafkaStreamWriter"]


class _WriterCore:
    """State shared by the batch and the streaming writer (picklable), and their driver side."""

    def __init__(
        self,
        options: SinkOptions,
        layout: InputLayout,
        *,
        streaming: bool,
        overwrite: bool,
        write_id: str,
        eos: EosPlan | None = None,
        formats: FormatPlan | None = None,
        input_schema: StructType | None = None,
    ) -> None:
        self.options = options
        self.layout = layout
        self.streaming = streaming
        self.overwrite = overwrite
        self.write_id = write_id
        self.eos = eos
        #: The serialized columns' schemas and ids (``formats/plan.py``); None: bytes as given.
        self.formats = formats
        #: The DataFrame's schema: what rows become should Spark hand ``Row`` s (``spark_api.py``).
        self.input_schema = input_schema

    def _write(self, batches: Iterator[pa.RecordBatch]) -> PyKafkaCommitMessage:
        """The executor side: one task's rows (``task.py``)."""
        # Imported here, on the executor, and nowhere else: the driver's workers that plan and
        # commit every micro-batch import this module and must not load the producer, numpy
        # and pyarrow.compute that task.py brings.
        from kafka_sink.spark.executor.rows import arrow_batches
        from kafka_sink.spark.executor.task import write_task

        if self.input_schema is not None:
            batches = arrow_batches(batches, self.input_schema)
        return write_task(
            self.options,
            self.layout,
            batches,
            streaming=self.streaming,
            eos=self.eos,
            formats=self.formats,
        )

    @property
    def _mode(self) -> str:
        if self.streaming:
            return "complete" if self.overwrite else "append"
        return "append"

    def _log_level(self, messages: Sequence[WriterCommitMessage | None]) -> int | None:
        """The option ``logLevel``, else the Spark conf's level the tasks saw (``logs.py``)."""
        if self.options.log_level is not None:
            return self.options.log_level
        for message in messages:
            if isinstance(message, PyKafkaCommitMessage) and message.conf_log_level is not None:
                return message.conf_log_level
        return None

    def _record(
        self, messages: Sequence[WriterCommitMessage | None], batch_id: int | None, *, ok: bool
    ) -> None:
        started = time.monotonic()
        apply_level(self._log_level(messages))
        if ok:
            pause_commit(batch_id, BEFORE_COMMIT)  # test-only; see fault_hooks
        completed = self.eos.completed if self.eos is not None else None
        bad = merge_counts(m.bad_records for m in messages if isinstance(m, PyKafkaCommitMessage))
        check = functools.partial(self._check_bad_records, bad, batch_id)
        end_transactions_ms: int | None = None
        unfinished: UnfinishedWrites | None = None
        if self.eos is not None and completed is None:
            started = time.monotonic()
            unfinished = self._end_transactions(messages, batch_id, ok=ok, check=check)
            end_transactions_ms = round((time.monotonic() - started) * 1000)
        elif ok and self.eos is None:
            check()  # before the commit document: a batch over its bounds is not recorded
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
            unfinished=unfinished,
        )
        metrics = (
            batch_metrics(
                [
                    (m.partition_id, m.metrics)
                    for m in messages
                    if isinstance(m, PyKafkaCommitMessage) and m.metrics is not None
                ],
                commit_duration_ms=round((time.monotonic() - started) * 1000),
                committed_wall_ms=now_ms,
            )
            if ok
            else None
        )
        if metrics is not None:
            document["metrics"] = metrics
        if self.eos is not None and self.eos.idempotency_key is not None:
            document["idempotency_key"] = self.eos.idempotency_key
        if completed is not None:
            document["already_completed"] = completed.describe()
        if end_transactions_ms is not None:
            # The driver's part of exactly-once: check, intent, EndTxns, done, sweep.
            document["end_transactions_ms"] = end_transactions_ms
        directory = self.options.commit_dir(streaming=self.streaming)
        path: str | None = None
        if directory is not None:
            stem = str(batch_id) if batch_id is not None else self.write_id
            name = f"{stem}.json" if ok else f"{stem}.aborted.json"
            try:
                path = write_document(directory, name, document)
            except CommitStoreUnavailableError:
                # A default under a checkpoint this driver has no client for: the query start
                # warned that no commit files are written. A commitLog was refused then.
                if self.options.commit_log is not None and not self._visible_anyway(
                    directory, name, batch_id, ok=ok
                ):
                    raise
            except Exception:
                if not self._visible_anyway(directory, name, batch_id, ok=ok):
                    raise
        # An abort is not the error: Spark raises the failure that caused it (a stopped query
        # raises nothing), so the abort line only says what was rolled back.
        # Bad rows make a commit's line a WARNING: under skip it is the batch's one report of
        # them (an abort's line does not list them: its document has them).
        level = logging.WARNING if ok and bad is not None and bad.total else logging.INFO
        logger.log(level, log_line(document, path))
        logger.debug(offsets_line(document))
        if metrics is not None and self.options.metrics_push_gateway is not None:
            from kafka_sink.spark.metrics.prometheus import push_batch

            push_batch(
                metrics,
                gateway=self.options.metrics_push_gateway,
                job=self.options.metrics_job,
                query=self.options.query_name or self.write_id,
                batch_id=batch_id,
                bad_records=document.get("bad_records"),
            )

    def _check_bad_records(self, bad: BadRecordCounts | None, batch_id: int | None) -> None:
        """Fail the batch when its bad rows exceed ``deadLetterMaxRecords`` / ``Ratio``."""
        check_bounds(
            bad,
            max_records=self.options.dead_letter_max_records,
            max_ratio=self.options.dead_letter_max_ratio,
            batch_id=batch_id,
            guarantee=self.options.delivery_guarantee,
        )

    def _visible_anyway(self, directory: str, name: str, batch_id: int | None, *, ok: bool) -> bool:
        """Whether a commit file that could not be written is logged instead of failing.

        Exactly-once, a committed batch is visible to read_committed readers: failing it now
        (Spark then records the job or the batch as failed) would not hide a row, and a batch
        job's re-run would write every row again. So the missing file is logged (ERROR).
        """
        if not (ok and self.eos is not None):
            return False
        logger.exception(
            "pykafka exactly-once: %s is committed and its rows ARE visible to read_committed "
            "readers, but its commit file %s could not be written; the write is not failed "
            "(that would not hide its rows)",
            "the job" if batch_id is None else f"batch {batch_id}",
            f"{directory.rstrip('/')}/{name}",
        )
        return True

    def _end_transactions(
        self,
        messages: Sequence[WriterCommitMessage | None],
        batch_id: int | None,
        *,
        ok: bool,
        check: Callable[[], None] | None = None,
    ) -> UnfinishedWrites | None:
        """Exactly-once: commit (or abort) every transaction the batch's tasks prepared; an
        abort returns what the unfinished tasks' transactions had written. ``check`` (the
        bad-row bounds) runs inside the commit, before its intent: refusing there aborts the
        batch's transactions (``EosCommitter.commit``)."""
        assert self.eos is not None
        # Exactly-once only: an at-least-once commit (and every task, which unpickles this
        # module) never loads the committer and the admin client under it.
        from kafka_sink.spark.driver.eos.committer import EosCommitter, TaskTransaction
        from kafka_sink.spark.driver.eos.idempotency import record_completion
        from kafka_sink.spark.driver.eos.plan_store import forget_batch_job

        written = [m for m in messages if isinstance(m, PyKafkaCommitMessage)]
        tasks = [
            TaskTransaction(
                m.partition_id,
                m.transaction,
                m.fingerprint,
                tuple(((r.topic, r.partition), r.first_offset) for r in m.ranges),
            )
            for m in written
            if m.transaction is not None
        ]
        # Partitions an earlier run of the batch committed: their tasks wrote nothing.
        skipped = {
            m.partition_id: m.fingerprint
            for m in written
            if m.skipped and m.fingerprint is not None
        }
        committer = EosCommitter.for_plan(self.eos, self.options.producer_config)
        try:
            # A batch job is one atomic write: batch id 0 of its own write id.
            number = 0 if batch_id is None else batch_id
            if ok:
                if batch_id is None:
                    pause_commit(number, step="before-intent")  # test-only; see fault_hooks
                committer.commit(number, tasks, skipped, check=check)
                if batch_id is None and self.eos.idempotency_key is not None:
                    # Kept, so that a re-run of the key finds the job done.
                    record_completion(
                        committer.store,
                        self.eos.query_key,
                        self.eos.idempotency_key,
                        write_id=self.write_id,
                        wall_ms=int(time.time() * 1000),
                    )
                elif batch_id is None:
                    # Spark calls nothing more for a batch job once commit() returns.
                    forget_batch_job(self.eos, committer.store)
                if batch_id is None:
                    pause_commit(number, step="after-done")
            else:
                # Spark commits only when every task succeeded; a missing message (a failed
                # task) proves commit() never ran, so no intent can name these transactions.
                return committer.abort(
                    number,
                    tasks,
                    intent_possible=None not in messages,
                    unfinished=[i for i, m in enumerate(messages) if m is None],
                )
        finally:
            committer.close()
        return None


class PyKafkaBatchWriter(_WriterCore, DataSourceArrowWriter):
    """``df.write.format("pykafka").mode("append")``: one commit for the whole job."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._record(messages, None, ok=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._record(messages, None, ok=False)


class PyKafkaStreamWriter(_WriterCore, StreamWriterBase):
    """``df.writeStream.format("pykafka")``: one commit per micro-batch."""

    #: An exactly-once query's start work (``eos/start.py``), attached on the driver by
    #: ``streamWriter()``; never pickled, so a task's writer carries none.
    start: QueryStart | None = None

    def run_query_start(self) -> None:
        """The query's start work, on the driver, before the batch's tasks are shipped.

        ``streamWriter()`` calls it on the writer it built; the work is done only when the call
        is a planning that starts the query (``QueryStart.run``: never in the commit worker,
        once per start), and never raises. Nothing else runs it: pickling the writer does not.
        """
        if self.start is not None:
            self.start.run()

    def __getstate__(self) -> dict[str, object]:
        # The start work stays on the driver: it holds the producer config and is no task's.
        state = dict(self.__dict__)
        state.pop("start", None)
        return state

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        try:
            refuse_unwritten_commit(messages, batchId)
            self._record(messages, batchId, ok=True)
        finally:
            self._batch_ended()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        try:
            self._record(messages, batchId, ok=False)
        finally:
            self._batch_ended()

    def _batch_ended(self) -> None:
        # The planned batch reached its commit or abort: a next planning is the run going on.
        if self.start is not None:
            self.start.batch_ended()
