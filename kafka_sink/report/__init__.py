"""``python -m kafka_sink report``: the sink's commit log read back as a table and a plot.

Role: ``reader`` loads the commit documents of a commit log (a local directory or any store
``commitLog`` supports, or a checkpoint location holding ``pykafka-commits/``), skipping with a
reason each the files it cannot use (unreadable, another version, malformed); ``table`` turns
their ``metrics`` sections into rows per batch (or per minute for long runs) and totals;
``plot`` draws rows/s, MB/s, produce latency, retries and commit time over the batches with
matplotlib (the ``report`` extra); ``cli`` is the command line. See docs/monitoring.md.

Invariants:
- Read only: nothing here writes to the commit log or talks to Kafka; no pyspark.
- matplotlib is imported only by ``plot``, and only when a plot is asked for; without it the
  command fails naming the extra to install.
"""
