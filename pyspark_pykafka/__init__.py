"""Spark's automatic discovery hook for ``format("pykafka")``.

PySpark registers, in every SparkSession, the ``DefaultSource`` of each installed top-level module
whose name starts with ``pyspark_``. With this package installed, ``format("pykafka")`` works
without ``spark.dataSource.register(...)``. Keep this import cheap: Spark imports it while
looking data sources up.
"""

from __future__ import annotations

from kafka_sink.spark.datasource import PyKafkaDataSource as DefaultSource

__all__ = ["DefaultSource"]
