"""A session whose workers' Python lacks the sink: what Spark says, and what register() says.

Run by test_spark_worker_python.py with PYSPARK_PYTHON set to a bare virtualenv and no source
tree on PYTHONPATH (the workers inherit it); the driver finds the package through argv[1], put
on its own sys.path only. Prints one ``RESULT <json>`` line: each attempt's error text (None if
it succeeded) and the seconds register() took.
"""

from __future__ import annotations

import json
import sys
import time

sys.path.insert(0, sys.argv[1])

from pyspark.sql import SparkSession


def write(spark: SparkSession) -> None:
    (
        spark.range(3)
        .selectExpr("CAST(id AS STRING) AS value")
        .write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", "localhost:9")
        .option("topic", "t")
        .save()
    )


def attempt(results: dict[str, str | None], name: str, call) -> None:  # type: ignore[no-untyped-def]
    try:
        call()
        results[name] = None
    except Exception as exc:
        results[name] = f"{type(exc).__name__}: {exc}"


def main() -> None:
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    results: dict[str, str | None] = {}
    attempt(results, "discovered", lambda: write(spark))
    from kafka_sink import PyKafkaDataSource

    spark.dataSource.register(PyKafkaDataSource)
    attempt(results, "registered", lambda: write(spark))
    import kafka_sink.spark

    started = time.monotonic()
    attempt(results, "register", lambda: kafka_sink.spark.register(spark))
    took_s = time.monotonic() - started
    spark.stop()
    print("RESULT " + json.dumps({"errors": results, "register_s": took_s}), flush=True)


if __name__ == "__main__":
    main()
