"""Idle Python workers after a job: the cached producer is closed and its sender thread ends.

The write runs with ``producerIdleTimeoutMs`` = 1 s and its own ``client.id`` (the sender thread
is named after it). A plain Spark job then runs in the same, reused, Python workers and looks for
that producer: it must be gone, thread included. A second write afterwards builds a new producer
and lands its records.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid

from pyspark.sql import functions as sf

from kafka_sink.testing.oracle import read_all


def _probe(client_id: str, within_s: float):
    """A UDF body run in a Python worker: wait (bounded) for the producer's sender thread to go.

    Returns (pid, whether this worker ran the sink, whether the thread was seen, whether it is
    still alive, seconds waited).
    """

    def run(_row: int) -> tuple[int, bool, bool, bool, float]:
        ran_the_sink = "kafka_sink.spark.executor.producer_cache" in sys.modules
        suffix = f"| {client_id}"
        start = time.monotonic()
        seen = alive = False
        while True:
            alive = any(t.name.endswith(suffix) for t in threading.enumerate())
            seen = seen or alive
            if not alive or time.monotonic() - start > within_s:
                break
            time.sleep(0.05)
        return os.getpid(), ran_the_sink, seen, alive, time.monotonic() - start

    return run


def _write(spark, bootstrap: str, topic: str, client_id: str, start: int) -> None:
    df = spark.range(start, start + 100, 1, 2).selectExpr("CAST(id AS STRING) AS value")
    (
        df.write.format("pykafka")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.client.id", client_id)
        .option("topic", topic)
        .option("producerIdleTimeoutMs", "1000")
        .save()
    )


def test_idle_worker_closes_its_producer_and_sender_thread(
    spark, kafka_bootstrap, topic_factory
) -> None:
    topic = topic_factory(partitions=2)
    client_id = f"idle-{uuid.uuid4().hex[:8]}"
    _write(spark, kafka_bootstrap, topic, client_id, 0)
    probe = sf.udf(
        _probe(client_id, within_s=30),
        "struct<pid: long, ran_the_sink: boolean, seen: boolean, alive: boolean, waited_s: double>",
        useArrow=False,
    )
    probes = [row.p for row in spark.range(0, 2, 1, 2).select(probe("id").alias("p")).collect()]
    # The probe ran in the workers the sink used (Python workers are reused), and found no
    # sender thread of that producer left: closed after its 1 s of idleness, not kept for good.
    assert all(p.ran_the_sink for p in probes), probes
    assert not any(p.alive for p in probes), probes
    _write(spark, kafka_bootstrap, topic, client_id, 100)
    records = read_all(kafka_bootstrap, topic, expected=200)
    assert sorted(int(r.value) for r in records) == list(range(200))
