"""A Spark Connect client run by test_spark_connect.py in its own Python process.

``SparkSession.builder.remote("local[2]")`` starts a Connect server inside this process (a JVM
with the Connect plugin) and returns a Connect client session bound to it; the data source runs
in the server's Python workers, the client only sends plans. A fresh process keeps that server
apart from the classic SparkSession the other Spark tests share.

A busy port fails the run with Spark's bind error rather than reaching another server: runs take
a machine-wide lock file first.

Usage: ``python connect_client.py '<json plan>'``; prints one line ``RESULT <json>`` on stdout,
one entry per step of the plan: ``{"ok": true}`` or ``{"error_type": ..., "error": ...}``, plus
the server's start time and each step's time.
Steps run in the plan's order:

- ``write``: a batch ``df.write.format("pykafka")`` of ``rows`` (key, value) pairs.
- ``write_sql``: a batch write of ``spark.range(rows).selectExpr(*exprs)`` (for a struct
  ``value`` of a registry format) with ``options``.
- ``register``: ``spark.dataSource.register(PyKafkaDataSource)`` from the client.
- ``check_workers``: ``kafka_sink.spark.register(spark)``, which also checks the server's workers.
- ``stream``: ``readStream.json(input_dir)`` -> ``writeStream.format("pykafka")`` with
  ``trigger(availableNow=True)``, bounded by ``timeout_s``; ``options`` are added to the writer.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# A local Connect server always listens on port 15002: one at a time per machine, whoever runs
# this client (the Spark tests, the installed-wheel test).
LOCK_PATH = Path(tempfile.gettempdir()) / "pykafka-spark-connect-15002.lock"
LOCK_WAIT_S = 300.0

STREAM_SCHEMA = "id BIGINT, k STRING"


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error_type": type(exc).__name__, "error": str(exc)}


def _write(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    df = spark.createDataFrame([tuple(r) for r in step["rows"]], "key STRING, value STRING")
    writer = df.write.format("pykafka").mode("append")
    writer = writer.option("kafka.bootstrap.servers", step["bootstrap"])
    writer = writer.option("topic", step["topic"]).options(**step.get("options", {}))
    writer.save()
    return {"ok": True}


def _write_sql(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    df = spark.range(0, step["rows"]).selectExpr(*step["exprs"])
    df.write.format("pykafka").mode("append").options(**step["options"]).save()
    return {"ok": True}


def _register(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    from kafka_sink import PyKafkaDataSource

    spark.dataSource.register(PyKafkaDataSource)
    return {"ok": True}


def _check_workers(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    import kafka_sink.spark

    kafka_sink.spark.register(spark)
    return {"ok": True}


def _stream(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    df = (
        spark.readStream.schema(STREAM_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(step["input_dir"])
        .selectExpr("k AS key", "CAST(id AS STRING) AS value")
    )
    query = (
        df.writeStream.format("pykafka")
        .outputMode("append")
        .option("kafka.bootstrap.servers", step["bootstrap"])
        .option("topic", step["topic"])
        .option("checkpointLocation", step["checkpoint"])
        .options(**step.get("options", {}))
        .trigger(availableNow=True)
        .start()
    )
    try:
        finished = query.awaitTermination(step["timeout_s"])
    except Exception as exc:  # a failed query raises here over Connect
        return _error(exc)
    if not finished:
        query.stop()
        return {"error_type": "Timeout", "error": f"query still running after {step['timeout_s']}s"}
    failure = query.exception()
    return _error(failure) if failure is not None else {"ok": True}


STEPS = {
    "write": _write,
    "write_sql": _write_sql,
    "register": _register,
    "check_workers": _check_workers,
    "stream": _stream,
}


@contextlib.contextmanager
def _connect_port_lock() -> Iterator[None]:
    with open(LOCK_PATH, "a+", encoding="utf-8") as f:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    sys.exit(
                        f"waited {LOCK_WAIT_S:.0f}s for {LOCK_PATH}: another local Spark "
                        "Connect server (port 15002) is running on this machine"
                    )
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def main() -> None:
    plan = json.loads(sys.argv[1])
    with _connect_port_lock():
        _run(plan)


def _run(plan: list[tuple[str, dict[str, Any]]]) -> None:
    started = time.monotonic()
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    results: dict[str, Any] = {
        "session_type": f"{type(spark).__module__}.{type(spark).__name__}",
        "server_start_s": round(time.monotonic() - started, 1),
        "step_s": {},
    }
    try:
        for name, step in plan:
            step_started = time.monotonic()
            try:
                results[name] = STEPS[step["kind"]](spark, step)
            except Exception as exc:
                results[name] = _error(exc)
            results["step_s"][name] = round(time.monotonic() - step_started, 1)
    finally:
        spark.stop()
    print("RESULT " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
