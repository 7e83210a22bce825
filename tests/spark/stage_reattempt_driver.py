"""The driver of a batch write whose write stage Spark re-attempts while a task of its first
attempt still runs; run in a child process by ``test_spark_exactly_once_stage_reattempt.py``.

``python stage_reattempt_driver.py MARKERS BOOTSTRAP TOPIC PREFIX ROWS``: a SparkSession on
``local-cluster[2,1,1024]`` (two executors, one core each, in JVMs of their own), ROWS rows keyed
by their number, a shuffle (``repartition(2, key)``), then a ``mapInArrow`` that, in the first run
of each write task (the one that creates ``claim-p<partition>`` in MARKERS) reads all of its
input, creates ``first-p<partition>`` (the pid of its executor's JVM, found up its process tree,
and its row count) and waits (at most :data:`HOLD_S`) for ``release-p<partition>``; every other
run creates ``rerun-p<partition>-<task attempt id>`` (the same contents) and, but for
partition 0, waits for ``release-rerun-p<partition>``: the job cannot end (and Spark kill the
first attempt's tasks with its stage) before the test says. Then ``format("pykafka")``,
exactly-once.

It creates ``app`` (the application id) once both executors registered, and prints ``JOB
SUCCEEDED`` or ``JOB FAILED: <error>`` (exit 0 either way; anything else is a harness error).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HOLD_S = 420.0
EXECUTORS = 2
EXECUTOR_CLASS = "CoarseGrainedExecutorBackend"


def executor_pid() -> int:
    """The pid of the executor JVM this Python worker descends from (-1 when none is)."""
    pid = os.getpid()
    while pid > 1:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return -1
        if EXECUTOR_CLASS.encode() in cmdline:
            return pid
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the command: state, ppid
    return -1


def _hold(release: str) -> None:
    deadline = time.monotonic() + HOLD_S
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.05)


def hold_first_run(markers: str) -> Any:
    def run(batches: Iterator[Any]) -> Iterator[Any]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        partition = ctx.partitionId()
        held = list(batches)  # the whole shuffle input is fetched before the hold
        rows = sum(b.num_rows for b in held)
        seen = f"{executor_pid()} {rows}\n"
        try:  # the first run of the partition is the one that creates its claim
            os.close(os.open(os.path.join(markers, f"claim-p{partition}"), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            Path(markers, f"rerun-p{partition}-{ctx.taskAttemptId()}").write_text(seen)
            if partition != 0:
                _hold(os.path.join(markers, f"release-rerun-p{partition}"))
        else:
            first = os.path.join(markers, f"first-p{partition}")
            Path(first + ".tmp").write_text(seen)
            os.rename(first + ".tmp", first)  # the test sees it complete
            _hold(os.path.join(markers, f"release-p{partition}"))
        yield from held

    return run


def main() -> int:
    markers, bootstrap, topic, prefix, rows = sys.argv[1:6]
    from pyspark.sql import SparkSession

    from kafka_sink.spark.workers import register_source

    spark = (
        SparkSession.builder.master(f"local-cluster[{EXECUTORS},1,1024]")
        .appName("pykafka-stage-reattempt")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        .config("spark.sql.adaptive.enabled", "false")  # exactly two write tasks
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    register_source(spark)
    sc = spark.sparkContext
    deadline = time.monotonic() + 120
    # Both executors hold map outputs only when both run map tasks: wait for them first.
    while sc._jsc.sc().getExecutorMemoryStatus().size() < EXECUTORS + 1:  # + the driver
        if time.monotonic() > deadline:
            print("JOB FAILED: the executors did not register in 120 s", flush=True)
            return 0
        time.sleep(0.2)
    Path(markers, "app").write_text(sc.applicationId)

    df = (
        spark.range(0, int(rows), numPartitions=4)
        .selectExpr("cast(id as string) as key", "concat('row-', id) as value")
        .repartition(2, "key")
        .mapInArrow(hold_first_run(markers), "key string, value string")
    )
    try:
        df.write.format("pykafka").mode("append").options(
            **{
                "kafka.bootstrap.servers": bootstrap,
                "topic": topic,
                "deliveryGuarantee": "exactly-once",
                "transactionalIdPrefix": prefix,
                "kafka.transaction.timeout.ms": "120000",
            }
        ).save()
    except Exception as exc:  # the outcome is the test's to judge
        print(f"JOB FAILED: {exc}", flush=True)
    else:
        print("JOB SUCCEEDED", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
