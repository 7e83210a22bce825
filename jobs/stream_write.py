"""Streaming job: a rate or file source -> Kafka through writeStream.format("pykafka").

    python jobs/stream_write.py --bootstrap-servers 127.0.0.1:9092 --topic events --run-seconds 20
    spark-submit --properties-file conf/spark-defaults.conf jobs/stream_write.py \\
        --bootstrap-servers 127.0.0.1:9092 --topic events --source json --input data/in/

Rate source rows become ``key = "key-<n mod --keys>"``, ``value = {"seq": n, "ts": ...}`` (JSON),
the record timestamp from the rate source and a ``source`` header. File sources keep a ``value``
column if there is one, else write each row as JSON; ``--key-column`` picks the key.

With ``--run-seconds`` the job streams for that long after its first micro-batch, then stops
between two micro-batches (stopping in the middle of one would leave it to be re-run, and
re-sent, on the next start); with ``--available-now`` it processes what the source holds at
start and stops; with neither, it runs until interrupted. The checkpoint makes a
restart continue where the last commit left off.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, add_sink_arguments, describe, sink_options, spark_session


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_sink_arguments(parser)
    src = parser.add_argument_group("source")
    src.add_argument("--source", choices=("rate", "json", "csv", "parquet"), default="rate")
    src.add_argument("--rows-per-second", type=int, default=500, help="rate source speed")
    src.add_argument("--keys", type=int, default=16, help="distinct keys (rate source)")
    src.add_argument("--input", help="input directory (file sources)")
    src.add_argument("--schema", help="DDL schema of the input files (default: inferred)")
    src.add_argument("--key-column", help="column to use as the record key (file sources)")
    src.add_argument("--max-files-per-trigger", type=int, help="file sources: files per batch")
    run = parser.add_argument_group("query")
    run.add_argument(
        "--checkpoint",
        default=str(ROOT / "out" / "checkpoints" / "stream_write"),
        help="checkpoint directory (its pykafka-commits/ holds the commit log)",
    )
    run.add_argument("--trigger-seconds", type=float, default=1.0)
    run.add_argument("--output-mode", choices=("append", "complete"), default="append")
    run.add_argument(
        "--run-seconds",
        type=float,
        default=0.0,
        help="stop this long after the first micro-batch (default: run until interrupted)",
    )
    run.add_argument(
        "--available-now",
        action="store_true",
        help="process what the source holds at start (file sources: every file, in "
        "micro-batches of --max-files-per-trigger), then stop (trigger availableNow)",
    )
    run.add_argument("--query-name", default="pykafka_stream_write")
    args = parser.parse_args(argv)
    if args.available_now and args.run_seconds > 0:
        parser.error("--available-now stops by itself: leave out --run-seconds")
    if args.source != "rate" and not args.input:
        parser.error(f"--source {args.source} needs --input DIR")
    return args


def build_stream(spark: Any, args: argparse.Namespace) -> Any:
    from pyspark.sql import functions as sf

    if args.source == "rate":
        rate = spark.readStream.format("rate").option("rowsPerSecond", args.rows_per_second).load()
        return rate.select(
            sf.concat(sf.lit("key-"), (sf.col("value") % args.keys).cast("string")).alias("key"),
            sf.to_json(
                sf.struct(sf.col("value").alias("seq"), sf.col("timestamp").alias("ts"))
            ).alias("value"),
            sf.col("timestamp"),
            sf.array(
                sf.struct(sf.lit("source").alias("key"), sf.lit(b"rate").alias("value"))
            ).alias("headers"),
        )
    reader = spark.readStream
    if args.schema:
        reader = reader.schema(args.schema)
    else:
        reader = reader.option("inferSchema", "true")
        spark.conf.set("spark.sql.streaming.schemaInference", "true")
    if args.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", args.max_files_per_trigger)
    if args.source == "csv":
        reader = reader.option("header", "true")
    df = reader.format(args.source).load(args.input)
    return to_sink_columns(df, args.key_column)


def to_sink_columns(df: Any, key_column: str | None) -> Any:
    """Keep the sink's columns if present; otherwise the whole row becomes a JSON value."""
    from pyspark.sql import functions as sf

    cols = []
    if key_column:
        cols.append(sf.col(key_column).cast("string").alias("key"))
    elif "key" in df.columns:
        cols.append(sf.col("key"))
    if "value" in df.columns:
        cols.append(sf.col("value"))
    else:
        cols.append(sf.to_json(sf.struct(*[sf.col(c) for c in df.columns])).alias("value"))
    cols += [sf.col(c) for c in ("topic", "partition", "headers", "timestamp") if c in df.columns]
    return df.select(*cols)


def wait_between_batches(query: Any, timeout_s: float = 30.0) -> None:
    """Return when no micro-batch is running (so stop() interrupts none)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and query.status.get("isTriggerActive"):
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = sink_options(args)
    spark = spark_session("pykafka-stream-write", args.spark_log_level)
    df = build_stream(spark, args)
    writer = (
        df.writeStream.format("pykafka")
        .queryName(args.query_name)
        .outputMode(args.output_mode)
        .options(**options)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    query = writer.start()
    print(
        f"stream_write: {args.source} -> pykafka ({describe(options)}); checkpoint "
        f"{args.checkpoint}",
        flush=True,
    )
    try:
        if args.available_now:
            query.awaitTermination()
        elif args.run_seconds > 0:
            # Count from the first finished micro-batch: Spark's start-up (seconds on a busy
            # machine) should not eat the streaming time.
            deadline = time.monotonic() + 300
            while query.lastProgress is None and query.isActive and time.monotonic() < deadline:
                time.sleep(0.1)
            query.awaitTermination(args.run_seconds)
            wait_between_batches(query)
        else:
            query.awaitTermination()
    except KeyboardInterrupt:
        wait_between_batches(query)
    finally:
        query.stop()
    rows = sum(p.get("numInputRows", 0) for p in query.recentProgress)
    print(
        f"stream_write: stopped after {len(query.recentProgress)} progress reports, "
        f"{rows} rows in the last reports",
        flush=True,
    )
    error = query.exception()
    spark.stop()
    if error is not None:
        print(f"stream_write: query failed: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
