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

Which planning starts the query. The planning worker cannot see Spark's run id (Spark keeps
it in the JVM; the worker gets the options only), so a start is told by what this driver saw:

- the first planning of the query on the driver;
- a planning that took the query's fence anew (``fence.py``: the token was dropped, or another
  driver took the fence since and went on with nothing since, as when a Spark Connect server or
  a notebook starts the query again after another application ran it);
- a planning that finds the previous one's batch never reached ``commit()`` or ``abort()`` on
  this driver (a pending marker, set by each planning and cleared by the commit worker's
  :meth:`QueryStart.batch_ended`): within a run every planned batch is committed or aborted
  before the next is planned, so the run that planned it was stopped mid-batch, and its
  tasks' transactions may be open. This is a query stopped and started again inside one
  application. The marker lives in ``fence.py``
  (:func:`~kafka_sink.spark.driver.eos.fence.pending_path`),
  whose planning also takes a stale fence back when it is set.

A restart inside one application after a run that ended between batches is not told apart from
the next batch of a run, and does not sweep here: that run's last commit swept the prefix, and
what was opened after it (a task attempt still running then) is ended by the new run's first
commit, or by the brokers after ``transaction.timeout.ms`` when the query processes nothing.

Which ``streamWriter()`` call plans. Spark calls it twice per micro-batch, both in Python
workers on the driver, with the same arguments: ``pyspark.sql.worker.write_into_data_source``
plans the batch and returns the writer pickled (alone, and inside the write function the tasks
run); ``pyspark.sql.worker.python_streaming_sink_runner`` builds it again right before
``commit()`` / ``abort()``, when the batch's prepared transactions are open and must not be
aborted. Neither the arguments nor the checkpoint tell the data source which call it serves (the
re-planning of an interrupted batch and the commit call of a batch see the same state). The ways
weighed:

- pickling: only the planning pickles the writer; but the start work, which aborts
  transactions, would then be a side effect of serialisation, run by whatever pickles the writer
  and invisible where the writer is built;
- keywords versus positional arguments: an accident of the current code;
- the caller's frames: the commit worker's file on the stack (``fence.in_commit_worker``),
  whether the daemon imported the worker or it runs as ``__main__`` (a frame names its file
  either way), under Spark Connect too (its server runs the same workers). The fence already
  tells the commit call so (``fence.py``). Were a pyspark release to rename the file, every
  exactly-once commit would fail before committing anything (its batch's transactions found
  aborted), never commit twice; a unit test pins the file's name against the installed pyspark.

So ``streamWriter()`` attaches a :class:`QueryStart` to the writer and runs it explicitly
(``PyKafkaStreamWriter.run_query_start``), and :meth:`QueryStart.run` returns at once inside the
commit worker. Pickling the writer does no start work and leaves it out of the pickled state
(tasks never carry it).

Invariants:
- The sweep runs once per driver, query key and take of the fence (``logs.first_on_driver``
  keyed by the take's id: a marker in the driver's Spark local directory, seen by all its
  Python workers), and again at a planning whose previous planning's batch was never committed
  or aborted here (the pending marker, in the same directory); always after ``recover``, and it
  keeps every transaction an unfinished intent names.
- The driver took the query's fence before (``fence.py``, in the planning's
  ``EosCommitter.for_plan``); the sweep aborts only while the fence is still this driver's.
- It never fails the planning: an error is logged as a warning (the first commit's sweep then
  ends the leftovers), since the batch can run without it.
- It runs only on the driver: ``streamWriter()`` runs it, and no task's writer carries it.
- A query restarted with nothing to process plans no batch, so it sweeps with its first batch;
  one whose driver died before commit always re-runs that batch first.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_sink.spark import fault_hooks
from kafka_sink.spark.driver.eos.committer import EosCommitter
from kafka_sink.spark.driver.eos.fence import PENDING, in_commit_worker, pending_path, take_id
from kafka_sink.spark.eos_plan import EosPlan
from kafka_sink.spark.fault_hooks import STARTED, pause_commit
from kafka_sink.spark.logs import ensure_logging, first_on_driver, logger

__all__ = ["QueryStart"]


@dataclass
class QueryStart:
    """The start work of one streaming exactly-once query (see the module docstring)."""

    plan: EosPlan
    producer_config: Mapping[str, str] = field(repr=False)  # may carry credentials

    def run(self) -> None:
        """Sweep the prefix once per driver and take of the fence, in a planning call only;
        never raises (see the module docstring)."""
        if in_commit_worker():
            return
        started = self.plan.query_key
        taken = take_id(self.plan.prefix, self.plan.query_key) if self.plan.fenced else ""
        if taken:
            started += "\0" + taken
        interrupted = _set_pending(self.plan.query_key)
        if not first_on_driver("started", started) and not interrupted:
            return
        ensure_logging()
        if fault_hooks.safeguards.start_sweep:  # only a test leaves it out
            self._sweep()
        pause_commit(None, STARTED)  # test-only; see fault_hooks

    def batch_ended(self) -> None:
        """The commit worker reached ``commit()`` or ``abort()`` of the batch last planned."""
        path = pending_path(self.plan.query_key)
        if path is None:
            PENDING.discard(self.plan.query_key)
            return
        with contextlib.suppress(OSError):
            os.remove(path)

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


def _set_pending(query_key: str) -> bool:
    """Mark ``query_key``'s batch planned; whether the previous planning's batch was still
    pending (never committed nor aborted on this driver)."""
    path = pending_path(query_key)
    if path is None:
        was = query_key in PENDING
        PENDING.add(query_key)
        return was
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return True
    except OSError:
        return False  # no marker: the first commit's sweep ends the leftovers instead
    return False
