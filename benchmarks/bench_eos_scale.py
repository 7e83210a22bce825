"""Exactly-once at scale: a streaming query of many tasks writing to a topic of many partitions.

A ``rate`` source of ``--tasks`` partitions (64) feeds a ``deliveryGuarantee=exactly-once`` query
with one-second triggers, writing keyed rows to a topic of ``--partitions`` partitions (200,
replication 3, ``min.insync.replicas`` 2) on a 3-node LocalKafka (or ``--bootstrap``), for
``--seconds`` (600) after ``--skip`` warm-up batches. Every task writes to most of the topic's
partitions, so each batch commits ``--tasks`` transactions that each span them.

Printed (and written to ``--out``):

- per micro-batch: the driver's commit (``end_transactions_ms`` of the commit documents: the check
  of the batch's transactions, the intent, the EndTxns, the done record, the sweep), ``addBatch``
  and the whole trigger, as median, 95th percentile and maximum;
- rows per second committed, batches, rows;
- the transactional ids of the query's prefix the coordinators know at the end (ListTransactions:
  every id ever used stays listed for ``transactional.id.expiration.ms``), against the bound of
  tasks x ``SLOTS_PER_PARTITION``, and how many are still open after the query stopped.

The unit simulation of an hour of one-second triggers with the same shape (retries and stage
re-attempts included) is ``tests/unit/spark/test_eos_slots_task.py``.

    python benchmarks/bench_eos_scale.py [--tasks 64] [--partitions 200] [--seconds 600]
        [--rows-per-second 6400] [--bootstrap HOST:PORT] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_spark import spark_session

from kafka_sink.admin.transactions import list_transactions
from kafka_sink.spark.executor.slots import SLOTS_PER_PARTITION
from kafka_sink.testing.oracle import create_topic

# A query stopped mid-batch leaves its prepared transactions to the next start's sweep.
UNFINISHED = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--rows-per-second", type=int, default=6400)
    parser.add_argument("--skip", type=int, default=3, help="warm-up micro-batches left out")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--out", default=None, help="also write the summary to this file")
    return parser.parse_args()


@contextmanager
def cluster(bootstrap: str | None) -> Iterator[tuple[str, int]]:
    """(bootstrap servers, replication factor) of a 3-node LocalKafka, or of ``bootstrap``."""
    if bootstrap:
        yield bootstrap, 3
        return
    from kafka_sink.testing.local_kafka import LocalKafka

    with LocalKafka(nodes=3) as local:
        yield local.bootstrap_servers, 3


def percentiles(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.0f} / {p95:.0f} / {ordered[-1]:.0f}"


def run_query(spark: Any, args: argparse.Namespace, bootstrap: str, topic: str, tmp: Path) -> Any:
    """Run the query for ``--seconds`` after its warm-up; returns (progress, checkpoint, prefix)."""
    prefix = f"bench-scale-{uuid.uuid4().hex[:8]}"
    checkpoint = tmp / "checkpoint"
    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.rows_per_second)
        .option("numPartitions", args.tasks)
        .load()
        .selectExpr(
            "CAST(CAST(value AS STRING) AS BINARY) AS key",
            "CAST(substring(sha2(CAST(value AS STRING), 256), 1, 64) AS BINARY) AS value",
        )
    )
    query = (
        df.writeStream.format("pykafka")
        .option("checkpointLocation", str(checkpoint))
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("kafka.compression.type", "lz4")
        .option("kafka.linger.ms", "5")
        .option("deliveryGuarantee", "exactly-once")
        .option("transactionalIdPrefix", prefix)
        .trigger(processingTime="1 second")
        .start()
    )
    progress: dict[int, dict[str, Any]] = {}
    measuring_since: float | None = None
    try:
        while True:
            time.sleep(2.0)
            if query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            for p in query.recentProgress:
                progress[p["batchId"]] = p
            if measuring_since is None and len(progress) > args.skip:
                measuring_since = time.monotonic()
                print(f"warm after {len(progress)} batches; measuring {args.seconds:.0f} s")
            if measuring_since is not None and time.monotonic() - measuring_since >= args.seconds:
                break
    finally:
        query.stop()
    measured = [progress[b] for b in sorted(progress) if b >= args.skip]
    return measured, checkpoint, prefix


def commit_times_ms(checkpoint: Path, first_batch: int) -> list[float]:
    times = []
    for path in (checkpoint / "pykafka-commits").glob("[0-9]*.json"):
        doc = json.loads(path.read_text())
        if doc.get("batch_id", -1) >= first_batch and "end_transactions_ms" in doc:
            times.append(float(doc["end_transactions_ms"]))
    return times


def main() -> int:
    args = parse_args()
    load_start = os.getloadavg()[0]
    with cluster(args.bootstrap) as (bootstrap, replication), tempfile.TemporaryDirectory() as tmp:
        topic = f"bench-scale-{uuid.uuid4().hex[:8]}"
        create_topic(
            bootstrap,
            topic,
            partitions=args.partitions,
            replication_factor=replication,
            configs={"min.insync.replicas": "2"},
            timeout_s=120,
        )
        spark = spark_session("", need_jars=False)
        started = time.monotonic()
        try:
            measured, checkpoint, prefix = run_query(spark, args, bootstrap, topic, Path(tmp))
        finally:
            spark.stop()
        wall_s = time.monotonic() - started
        listings = list_transactions({"bootstrap.servers": bootstrap}, f"{prefix}-")
        commits = commit_times_ms(checkpoint, args.skip)

    rows = sum(p["numInputRows"] for p in measured)
    span_s = sum(p["durationMs"].get("triggerExecution", 0) for p in measured) / 1000
    ids = {t.transactional_id for t in listings}
    states = Counter(t.state for t in listings)
    still_open = sum(n for state, n in states.items() if state in UNFINISHED)
    lines = [
        f"# Exactly-once at scale: {args.tasks} tasks, {args.partitions} partitions, "
        f"3 nodes (min ISR 2), one-second triggers",
        "",
        f"{os.cpu_count()} cores, load average {load_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end",
        "",
        f"measured {len(measured)} micro-batches over {span_s:.0f} s "
        f"(after {args.skip} warm-up batches; {wall_s:.0f} s in all), {rows:,} rows, "
        f"{rows / span_s if span_s else 0:,.0f} rows/s committed",
        "",
        "| per micro-batch (ms) | median / p95 / max |",
        "| --- | --- |",
        f"| driver's commit (end_transactions_ms) | {percentiles(commits)} |",
        f"| addBatch | {percentiles([p['durationMs'].get('addBatch', 0) for p in measured])} |",
        "| trigger (triggerExecution) | "
        f"{percentiles([p['durationMs'].get('triggerExecution', 0) for p in measured])} |",
        "",
        f"transactional ids of the prefix known to the coordinators: {len(ids)} "
        f"(bound: {args.tasks} tasks x {SLOTS_PER_PARTITION} slots = "
        f"{args.tasks * SLOTS_PER_PARTITION}); by state {dict(states)}; "
        f"open after the query stopped: {still_open}",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
