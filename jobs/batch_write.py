"""Batch job: parquet, JSON or CSV files -> Kafka through df.write.format("pykafka").

    python jobs/batch_write.py --bootstrap-servers 127.0.0.1:9092 --topic events \\
        --input data/events.parquet --key-column user_id
    spark-submit --properties-file conf/spark-defaults.conf jobs/batch_write.py ...

A ``value`` column is written as it is; without one, each row is written as a JSON object. The
``key``, ``topic``, ``partition``, ``headers`` and ``timestamp`` columns are used when present
(see the README's input columns); ``--key-column`` names another column as the key.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_sink_arguments, describe, sink_options, spark_session
from stream_write import to_sink_columns

FORMATS = ("parquet", "json", "csv")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_sink_arguments(parser)
    src = parser.add_argument_group("input")
    src.add_argument("--input", required=True, help="file or directory to read")
    src.add_argument("--format", choices=FORMATS, help="input format (default: from the name)")
    src.add_argument("--schema", help="DDL schema for json/csv (default: inferred)")
    src.add_argument("--key-column", help="column to use as the record key")
    src.add_argument("--partitions", type=int, help="repartition the input into this many tasks")
    args = parser.parse_args(argv)
    if args.format is None:
        suffix = Path(args.input.rstrip("/")).suffix.lower().lstrip(".")
        if suffix not in FORMATS:
            parser.error(f"cannot tell the format of {args.input!r}: give --format")
        args.format = suffix
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = sink_options(args)
    spark = spark_session("pykafka-batch-write", args.spark_log_level)
    reader = spark.read.format(args.format)
    if args.schema:
        reader = reader.schema(args.schema)
    elif args.format in ("json", "csv"):
        reader = reader.option("inferSchema", "true")
    if args.format == "csv":
        reader = reader.option("header", "true")
    df = to_sink_columns(reader.load(args.input), args.key_column)
    if args.partitions:
        df = df.repartition(args.partitions)
    print(f"batch_write: {args.input} ({args.format}) -> pykafka ({describe(options)})", flush=True)
    df.write.format("pykafka").mode("append").options(**options).save()
    print("batch_write: done", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
