"""One real SparkSession (local[2,2]) shared by every Spark test, with pykafka registered.

``local[2,2]``: two task threads, and a failed task is retried once (the retry test relies on
it). Shuffle partitions are 2 and the UI is off: this machine has two cores shared with Kafka.
Python workers run the interpreter running the tests, unless PYSPARK_PYTHON says otherwise.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kafka_sink.spark.datasource import PyKafkaDataSource

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("pykafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(PyKafkaDataSource)
    try:
        yield session
    finally:
        session.stop()
