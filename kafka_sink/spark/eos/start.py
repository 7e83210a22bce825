"""A streaming exactly-once query's start: end what an earlier run left open, before any task.

Role: a driver that dies after its tasks prepared their transactions and before it committed
them (no intent names them) leaves them open, and an open transaction holds read_committed
readers of its partitions back until the coordinator times it out (``transaction.timeout.ms``,
up to 15 minutes) or a commit's sweep ends it. So a planning that starts the query on a driver,
once it finished any unfinished intent (``EosCommitter.recover``, in ``datasource.py``), aborts
the open transactions of the query's prefix that no unfinished intent names
(:meth:`EosCommitter.sweep_leftovers`) and logs one INFO line with how many, naming the prefix.
Nothing of the query is open then: within a run Spark plans batch N+1 only after commit(N)
returned, and this runs before the batch's tasks start.

Which planning starts the query: the first on the driver, and each one that took the query's
fence anew (``fence.py``: the token was dropped, or another driver had taken the fence since, as
when a Spark Connect server or a notebook starts the query again after another application ran
it). The planning worker cannot see Spark's run id, so a restart inside one application that no
other driver came between does not sweep here: what the stopped run left open is ended by the
new run's first commit (its sweep), or by the brokers after ``transaction.timeout.ms`` when the
restarted query has nothing to process.

Which ``streamWriter()`` call plans. Spark calls it twice per micro-batch, both in Python
workers on the driver, with the same arguments: ``pyspark.sql.worker.write_into_data_source``
plans the batch and returns the writer pickled (alone, and inside the write function the tasks
run); ``pyspark.sql.worker.python_streaming_sink_runner`` builds it again right before
``commit()`` / ``abort()``, when the batch's prepared transactions are open and must not be
aborted. Nothing tells the data source which call it serves. The ways weighed:

- the caller's frame (the worker's module): tied to pyspark's private layout, and to how the
  worker runs (imported by the daemon, or as ``__main__`` with ``spark.python.use.daemon``
  off), either of which a 4.x release may change;
- keywords versus positional arguments: an accident of the current code;
- pickling: the planning must ship the writer to the executors, so it pickles it in every
  pyspark version and under Spark Connect (whose server runs the same workers), while the
  commit call builds the writer only to call ``commit()`` / ``abort()`` on it.

So ``streamWriter()`` attaches a :class:`QueryStart` to the writer, and the writer runs it when
it is first pickled, leaving it out of the pickled state (tasks never carry it). As a second
guard, a stack that holds a frame of the commit worker's file skips the sweep: were a later
pyspark to pickle the writer on the commit path, the sweep would still not run there.

Invariants:
- The sweep runs at most once per driver, query key and take of the fence
  (``logs.first_on_driver`` keyed by the take's id: a marker in the driver's Spark local
  directory, seen by all its Python workers), after ``recover``, and keeps every transaction an
  unfinished intent names.
- The driver took the query's fence before (``fence.py``, in the planning's
  ``EosCommitter.for_plan``); the sweep aborts only while the fence is still this driver's.
- It never fails the planning: an error is logged as a warning (the first commit's sweep then
  ends the leftovers), since pickling would turn it into an unrelated serialisation error.
- A query restarted with nothing to process plans no batch, so it sweeps with its first batch;
  one whose driver died before commit always re-runs that batch first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_sink.spark.eos.committer import EosCommitter
from kafka_sink.spark.eos.fence import in_commit_worker, take_id
from kafka_sink.spark.eos.plan import EosPlan
from kafka_sink.spark.fault_hooks import STARTED, pause_commit, start_sweep_disabled
from kafka_sink.spark.logs import ensure_logging, first_on_driver, logger

__all__ = ["QueryStart"]


@dataclass
class QueryStart:
    """The start work of one streaming exactly-once query (see the module docstring)."""

    plan: EosPlan
    producer_config: Mapping[str, str] = field(repr=False)  # may carry credentials

    def run(self) -> None:
        """Sweep the prefix once per driver and take of the fence; never raises (see the
        module docstring)."""
        if in_commit_worker():
            return
        started = self.plan.query_key
        taken = take_id(self.plan.prefix, self.plan.query_key) if self.plan.fenced else ""
        if taken:
            started += "\0" + taken
        if not first_on_driver("started", started):
            return
        ensure_logging()
        if not start_sweep_disabled():
            self._sweep()
        pause_commit(None, STARTED)  # test-only; see fault_hooks

    def _sweep(self) -> None:
        prefix = self.plan.prefix
        try:
            committer = EosCommitter.for_plan(self.plan, self.producer_config)
            try:
                aborted = committer.sweep_leftovers()
            finally:
                committer.close()
        except Exception as exc:
            logger.warning(
                "pykafka exactly-once: query start: could not end the open transactions of "
                "prefix %r left by an earlier run (the first commit's sweep ends them): %s",
                prefix,
                exc,
            )
            return
        logger.info(
            "pykafka exactly-once: query start: aborted %d open transaction(s) of prefix %r "
            "that no unfinished intent names",
            aborted,
            prefix,
        )
