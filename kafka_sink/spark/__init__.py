"""The Spark side of pykafka: the ``format("pykafka")`` data source and its writers.

The only package that imports pyspark. Modules:

- ``datasource``: ``PyKafkaDataSource`` (driver: options, schema check, writer construction).
- ``options`` / ``schema``: the option and input-column contracts, checked on the driver.
- ``columns``: Arrow batch -> the producer's bulk-send columns (executor).
- ``writer``: batch and streaming Arrow writers (``write()`` on executors, ``commit()`` on
  the driver).
- ``commit``: commit messages, gathering into offset ranges, the commit-log files.
- ``producer_cache``: one producer per Python worker process and config, leased by tasks and
  closed once unused for ``producerIdleTimeoutMs``.

Nothing here talks to sockets; the producer does.
"""
