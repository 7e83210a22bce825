"""Per-micro-batch overhead: median ``addBatch`` of a small streaming query, per sink.

A rate source at ``--rows-per-second`` (default 2,000) rows/s with the default trigger (each
micro-batch starts when the previous one ends), 16-byte keys and ~100-byte values, acks=all,
lz4, linger.ms=5, into a 6-partition topic. These sinks take turns, ``--rounds`` times each,
every query running ``--seconds`` after its first ``--skip`` micro-batches (start-up):

- ``jvm-kafka``: Spark's built-in Kafka sink (``$SPARK_KAFKA_JARS_DIR``);
- ``python-noop``: a Python Arrow stream writer that discards its batches: what Spark itself
  spends per micro-batch on any Python data source sink (a planning worker, Python tasks, a
  commit worker), the floor for pykafka;
- ``pykafka``: this project's sink;
- ``pykafka-eos`` (not run by default): the same with ``deliveryGuarantee=exactly-once``; its
  addBatch minus pykafka's is what exactly-once adds per micro-batch (``make
  bench-microbatch-eos``, which also writes ``--out``).

Prints, per sink, the median of each part of the query progress' ``durationMs`` (``addBatch`` is
the sink's write: planning, tasks and commit) over every micro-batch that had rows, and the
differences pykafka - python-noop (ours) and python-noop - jvm-kafka (Spark's cost of a Python
sink).

    python benchmarks/bench_microbatch.py [--seconds 30] [--rounds 2]
    BENCH_QUICK=1 python benchmarks/bench_microbatch.py     # a short smoke run
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_spark import ROOT, kafka, spark_session
from python_noop import NoopStreamDataSource

SINKS = ("jvm-kafka", "python-noop", "pykafka")
OPTIONAL_SINKS = ("pykafka-eos",)
PARTS = ("addBatch", "triggerExecution", "queryPlanning", "walCommit", "commitOffsets")


def parse_args() -> argparse.Namespace:
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0 if quick else 20.0)
    parser.add_argument("--rounds", type=int, default=1 if quick else 3)
    parser.add_argument("--skip", type=int, default=5, help="start-up micro-batches not counted")
    parser.add_argument("--rows-per-second", type=int, default=2000)
    parser.add_argument("--sinks", default=",".join(SINKS))
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="MODULE:CLASS",
        help="another Kafka data source to run as a sink under its name() (e.g. an earlier "
        "build of this one, importable by the workers through PYTHONPATH)",
    )
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument(
        "--out", default=None, help="also write the summary to this file (e.g. a .md file)"
    )
    parser.add_argument(
        "--jars-dir",
        default=os.environ.get(
            "SPARK_KAFKA_JARS_DIR", os.path.join(ROOT, ".cache/spark-kafka/lib")
        ),
    )
    return parser.parse_args()


def run_query(
    spark: Any, sink: str, bootstrap: str, *, topic: str, args: argparse.Namespace, tmp: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Run one query until ``--seconds`` have passed after its start-up micro-batches.

    Returns the first micro-batch with rows (it pays the workers' imports and the producer's
    connections) and the progress of those after ``--skip``."""
    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.rows_per_second)
        .option("numPartitions", 2)
        .load()
        .selectExpr(
            "CAST(lpad(CAST(value AS STRING), 16, '0') AS BINARY) AS key",
            "CAST(substring(sha2(CAST(value AS STRING), 512), 1, 100) AS BINARY) AS value",
        )
    )
    fmt = {
        "jvm-kafka": "kafka",
        "python-noop": "bench_noop_stream",
        "pykafka-eos": "pykafka",
    }.get(sink, sink)
    writer = df.writeStream.format(fmt).option(
        "checkpointLocation", os.path.join(tmp, f"ckpt-{sink}-{uuid.uuid4().hex[:8]}")
    )
    if sink != "python-noop":
        writer = writer.options(
            **{
                "kafka.bootstrap.servers": bootstrap,
                "topic": topic,
                "kafka.acks": "all",
                "kafka.compression.type": "lz4",
                "kafka.linger.ms": "5",
            }
        )
    if sink == "pykafka-eos":
        writer = writer.option("deliveryGuarantee", "exactly-once")
    query = writer.start()
    progress: dict[int, dict[str, Any]] = {}
    measuring_since: float | None = None
    try:
        while True:
            time.sleep(1.0)
            if query.exception() is not None:
                raise RuntimeError(f"{sink}: query failed: {query.exception()}")
            for p in query.recentProgress:
                progress[p["batchId"]] = p
            done = [b for b, p in progress.items() if p["numInputRows"] > 0]
            if measuring_since is None and len(done) > args.skip:
                measuring_since = time.monotonic()
            if measuring_since is not None and time.monotonic() - measuring_since >= args.seconds:
                break
    finally:
        query.stop()
    with_rows = sorted(
        (p for p in progress.values() if p["numInputRows"] > 0), key=lambda p: p["batchId"]
    )
    return (with_rows[0] if with_rows else None), with_rows[args.skip :]


def median(progress: list[dict[str, Any]], part: str) -> float:
    values = [p["durationMs"].get(part) for p in progress]
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else float("nan")


def main() -> int:
    args = parse_args()
    sinks = [s.strip() for s in args.sinks.split(",") if s.strip()]
    from kafka_sink.testing.oracle import create_topic

    collected: dict[str, list[dict[str, Any]]] = {s: [] for s in sinks}
    firsts: dict[str, list[dict[str, Any]]] = {s: [] for s in sinks}
    # The workers import python_noop by reference, like pykafka (see that module).
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (here, os.environ.get("PYTHONPATH", "")) if p
    )
    with kafka(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory() as tmp:
        spark = spark_session(
            args.jars_dir,
            "jvm-kafka" in sinks,
            conf={"spark.sql.streaming.numRecentProgressUpdates": "2000"},
        )
        spark.dataSource.register(NoopStreamDataSource)
        for spec in args.also:
            module, _, cls = spec.partition(":")
            source = getattr(importlib.import_module(module), cls)
            spark.dataSource.register(source)
            sinks.append(source.name())
            collected[source.name()] = []
            firsts[source.name()] = []
        header = (
            f"bench_microbatch: rate source {args.rows_per_second} rows/s, default trigger, "
            f"local[2], pyspark {spark.version}; {args.rounds} round(s) of {args.seconds:.0f} s "
            f"per sink; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
        )
        print(header, flush=True)
        for rnd in range(args.rounds):
            for sink in sinks:
                topic = f"bench-mb-{sink}-{uuid.uuid4().hex[:8]}"
                if sink != "python-noop":
                    create_topic(bootstrap, topic, 6)
                    time.sleep(2.0)
                first, progress = run_query(spark, sink, bootstrap, topic=topic, args=args, tmp=tmp)
                collected[sink] += progress
                firsts[sink] += [first] if first else []
                rows = statistics.median(p["numInputRows"] for p in progress) if progress else 0
                print(
                    f"  round {rnd + 1} {sink:<12} {len(progress):4d} micro-batches, "
                    f"median {rows:.0f} rows, addBatch {median(progress, 'addBatch'):6.0f} ms, "
                    f"triggerExecution {median(progress, 'triggerExecution'):6.0f} ms",
                    flush=True,
                )
        spark.stop()

    lines = ["median ms per micro-batch   " + "".join(f"{s:>13}" for s in sinks)]
    lines.extend(
        f"  {part:<26}" + "".join(f"{median(collected[s], part):>13.0f}" for s in sinks)
        for part in PARTS
    )
    lines.append(
        f"  {'addBatch, first batch':<26}"
        + "".join(f"{median(firsts[s], 'addBatch'):>13.0f}" for s in sinks)
    )
    add = {s: median(collected[s], "addBatch") for s in sinks}
    lines.append("")
    if {"pykafka", "python-noop"} <= add.keys():
        ours = add["pykafka"] - add["python-noop"]
        lines.append(f"addBatch pykafka - python-noop (ours): {ours:6.0f} ms")
    if {"python-noop", "jvm-kafka"} <= add.keys():
        lines.append(
            f"addBatch python-noop - jvm-kafka (Spark's cost of a Python sink): "
            f"{add['python-noop'] - add['jvm-kafka']:6.0f} ms"
        )
    if {"pykafka", "jvm-kafka"} <= add.keys():
        lines.append(f"addBatch pykafka / jvm-kafka: {add['pykafka'] / add['jvm-kafka']:.2f}x")
    if {"pykafka", "pykafka-eos"} <= add.keys():
        lines.append(
            f"addBatch pykafka-eos - pykafka (what exactly-once adds per micro-batch): "
            f"{add['pykafka-eos'] - add['pykafka']:6.0f} ms"
        )
    print()
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write(header + "\n\n```\n" + "\n".join(lines) + "\n```\n")
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
