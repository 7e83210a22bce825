"""The Spark side of pykafka: the ``format("pykafka")`` data source, its writers and commits.

The only package that imports pyspark. Nothing here talks to sockets itself: the producer does
(executors), and on the driver the admin client (exactly-once only). Modules:

- ``datasource``: ``PyKafkaDataSource``; on the driver it checks options and schema, settles
  the exactly-once plan and builds the writer (``pyspark_pykafka`` registers it).
- ``options`` / ``schema``: the option and input-column contracts, checked on the driver.
- ``writer``: the batch and streaming writers Spark pickles to the tasks, and their driver-side
  ``commit()`` / ``abort()``.
- ``task``: the executor loop behind ``write()``, one for both guarantees.
- ``columns``: an Arrow batch -> the producer's bulk-send columns, per topic (executor).
- ``producer_cache``: one producer per Python worker and config (and transactional id), leased
  by tasks and closed once unused for ``producerIdleTimeoutMs``.
- ``commit_log/``: ``document`` (commit messages, ranges, the commit and abort documents) and
  ``store`` (where documents go: a directory, S3, GCS, Azure, HDFS).
- ``eos/``: exactly-once: ``plan`` (transactional ids, the plan a write carries), ``intents``
  (intent records, file and memory stores), ``kafka_intents`` (the store on a compacted topic),
  ``committer`` (the driver's roll-forward commit) and ``timeout`` (``transaction.timeout.ms``
  against the brokers).
- ``metrics/``: per-batch sink metrics, no pyspark: ``deltas`` (a task's share of its
  producer's snapshot), ``batch`` (the commit document's ``metrics`` section and the line's
  numbers), ``prometheus`` (the push to a Pushgateway).
- ``logs`` (the logger, one warning per driver), ``fault_hooks`` (test-only pauses).
- ``workers`` (``register(spark)``: registers the source and checks, with a one-row job, that
  the Python Spark starts for its workers can import the sink) and ``worker_probe`` (that job).

A record: Spark pickles the writer to a task, whose ``write()`` calls ``task.write_task``. The
task leases its producer from ``producer_cache`` on its first row, ``columns`` turns each Arrow
batch into per-topic columns, ``KafkaProducer.send_columns`` queues them, and the task waits,
bounded, for every acknowledgement, folding the offsets into a ``PyKafkaCommitMessage``. On the
driver, ``writer.commit()`` gathers the messages into ranges, writes one document to the commit
log and logs one line.

A transaction (``deliveryGuarantee=exactly-once``): while planning, ``datasource`` settles the
timeout with the brokers (``eos.timeout``), fixes the ``eos.plan.EosPlan`` (id prefix, intent
store) and finishes any unfinished intent (``eos.committer``). Each task attempt writes in a
transaction of its own id, prepares it and returns the ``PreparedTransaction`` in its message;
``writer.commit()`` hands them to ``EosCommitter``, which records the intent (``eos.intents``,
``eos.kafka_intents``), commits every transaction, records done and aborts the strays of the
prefix, before the commit document is written.

Invariants: the driver's planning and commit workers never import ``task``, ``columns``, the
producer, numpy or ``pyarrow.compute`` (``writer.write()`` imports ``task`` on the executor);
the writers hold picklable configuration only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_sink.spark.workers import register

__all__ = ["register"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: executors import this package for ``task`` and never register.
    if name == "register":
        from kafka_sink.spark.workers import register

        return register
    raise AttributeError(f"module 'kafka_sink.spark' has no attribute {name!r}")
