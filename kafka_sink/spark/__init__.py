"""The Spark side of pykafka: the ``format("pykafka")`` data source, its writers and commits.

The only package that imports pyspark. Nothing here talks to sockets itself: the producer does
(executors), and on the driver the admin client (exactly-once only). Split by where code runs:

- Entry points, loaded on both sides: ``datasource`` (``PyKafkaDataSource``; on the driver it
  checks options and schema, settles the exactly-once plan and builds the writer),
  ``writer`` (the batch and streaming writers Spark pickles to the tasks: ``write()`` enters the
  executor room, ``commit()`` / ``abort()`` the driver room), ``workers`` / ``worker_probe``
  (``register(spark)`` and its one-row check that the workers can import the sink).
- ``driver/``: what only the driver runs. ``preflight`` (one bounded round trip to the cluster
  before any task), ``triggers`` (modes PySpark hands no rows), ``eos/`` (exactly-once: the
  intent stores, the fence, the committer's roll-forward, the start sweep, the timeout).
- ``executor/``: what only the tasks run. ``task`` (the write loop, one for both guarantees,
  with the seam where a record's fate is decided), ``columns`` (an Arrow batch -> the
  producer's bulk-send columns), ``producer_cache`` (one producer per worker and config, leased
  by tasks), ``row_fingerprint`` and ``slots`` (a free transactional id per attempt).
- Shared by both rooms, importing neither: ``options`` / ``option_table`` / ``option_names`` /
  ``schema`` (the option and input-column contracts the writers carry), ``eos_plan`` (the
  exactly-once plan the tasks receive), ``commit_message`` (what a task returns),
  ``commit_log/`` (the commit documents and where they go), ``metrics/``, ``logs``,
  ``fingerprint``, ``fault_hooks``.

The registry formats are a layer of their own below (``kafka_sink.formats``), without pyspark.

A record: Spark pickles the writer to a task, whose ``write()`` calls ``task.write_task``. The
task leases its producer from ``producer_cache`` on its first row, ``columns`` turns each Arrow
batch into per-topic columns, ``KafkaProducer.send_columns`` queues them, and the task waits,
bounded, for every acknowledgement, folding the offsets into a ``PyKafkaCommitMessage``. On the
driver, ``writer.commit()`` gathers the messages into ranges, writes one document to the commit
log and logs one line.

A transaction (``deliveryGuarantee=exactly-once``): while planning, ``datasource`` settles the
timeout with the brokers (``eos.timeout``), fixes the ``eos_plan.EosPlan`` (id prefix, intent
store) and finishes any unfinished intent (``eos.committer``). Each task attempt writes in a
transaction of its own id, prepares it and returns the ``PreparedTransaction`` in its message;
``writer.commit()`` hands them to ``EosCommitter``, which records the intent (``eos.intents``,
``eos.kafka_intents``), commits every transaction, records done and aborts the strays of the
prefix, before the commit document is written.

Invariants: the driver's planning and commit workers never import the executor room, the
producer, numpy or ``pyarrow.compute`` (``writer.write()`` imports ``executor.task`` there);
the writers hold picklable configuration only. What only some writes need (a format's catalog,
registry client and encoder, OAUTHBEARER's token sources, exactly-once's committer, stores and
slots) is imported where such a write asks for it, never by the entry points: Spark imports those
in every Python process of every write, so what they load is paid before the first row.
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
