"""Spark sink throughput: format("pykafka") against Spark's built-in format("kafka").

Same broker, same SparkSession (local[2]), same cached DataFrame, same producer settings:
N rows (default 2,000,000) with 16-byte keys and 100-byte values, acks=all, lz4, linger.ms=5,
into a fresh 6-partition topic per run. Three writers are timed end to end (``save()``):

- ``ceiling``: a Python Arrow writer that counts rows and discards them: what Spark can hand a
  Python data source at all, the upper bound for pykafka;
- ``jvm-kafka``: Spark's built-in Kafka sink (spark-sql-kafka-0-10 jars from
  ``$SPARK_KAFKA_JARS_DIR``, fetched by ``make bench-spark``, loaded offline with spark.jars);
- ``pykafka``: this project's sink.

Each writer first does ``--warmup`` untimed full-size writes (the JVM sink needs a full run
before its JIT settles; Python workers and cached producers warm up too), then ``--repeat``
timed runs, writers taking turns; the best run counts. Records written are checked against the
topic's end offsets. Prints rows/s per writer and the ratios.

    python benchmarks/bench_spark.py [--rows N] [--bootstrap host:port] [--repeat 2]

Without --bootstrap (or KAFKA_BOOTSTRAP_SERVERS) a LocalKafka with the "bench" JVM profile is
started for the run.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import pkgutil
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTITIONS = 6
KEY_SIZE = 16
VALUE_SIZE = 100


@dataclass
class _Count(WriterCommitMessage):
    rows: int


class _DiscardWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[Any]) -> _Count:
        return _Count(sum(batch.num_rows for batch in iterator))


class DiscardDataSource(DataSource):
    """The ceiling: an Arrow writer that receives every batch and keeps nothing."""

    @classmethod
    def name(cls) -> str:
        return "bench_discard"

    def writer(self, schema: Any, overwrite: bool) -> _DiscardWriter:
        return _DiscardWriter()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed full-size runs per writer")
    parser.add_argument(
        "--jars-dir",
        default=os.environ.get(
            "SPARK_KAFKA_JARS_DIR", os.path.join(ROOT, ".cache/spark-kafka/lib")
        ),
    )
    parser.add_argument(
        "--writers", default="ceiling,jvm-kafka,pykafka", help="comma-separated subset"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra kafka.* option for both Kafka sinks (e.g. kafka.batch.size=262144)",
    )
    return parser.parse_args()


@contextlib.contextmanager
def kafka(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from kafka_sink.testing.local_kafka import LocalKafka

    with LocalKafka(nodes=1, jvm_profile="bench") as local:
        yield local.bootstrap_servers


def spark_session(jars_dir: str, need_jars: bool) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("pykafka-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config(
            "spark.driver.extraJavaOptions",
            f"-Dlog4j2.configurationFile={ROOT}/conf/log4j2-spark.properties",
        )
    )
    if need_jars:
        jars = sorted(glob.glob(os.path.join(jars_dir, "*.jar")))
        if not jars:
            raise SystemExit(
                f"no jars in {jars_dir}: run `make bench-spark` (it fetches Spark's Kafka "
                "connector from Maven Central) or set SPARK_KAFKA_JARS_DIR"
            )
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    from kafka_sink.spark.datasource import PyKafkaDataSource

    if not any(m.name == "pyspark_pykafka" for m in pkgutil.iter_modules([os.getcwd()])):
        # Spark's workers run in this working directory and find pyspark_pykafka on their own
        # when it is here; elsewhere (an editable install) register it for this session.
        spark.dataSource.register(PyKafkaDataSource)
    spark.dataSource.register(DiscardDataSource)
    return spark


def dataframe(spark: Any, rows: int) -> Any:
    """Cached, materialised (key, value) rows split over 2 tasks; generation is not timed."""
    df = spark.range(0, rows, 1, 2).selectExpr(
        f"CAST(lpad(CAST(id AS STRING), {KEY_SIZE}, '0') AS BINARY) AS key",
        f"CAST(substring(sha2(CAST(id AS STRING), 512), 1, {VALUE_SIZE}) AS BINARY) AS value",
    )
    df = df.cache()
    assert df.count() == rows
    return df


def write(df: Any, writer: str, bootstrap: str, topic: str, extra: dict[str, str]) -> None:
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "topic": topic,
        "kafka.acks": "all",
        "kafka.compression.type": "lz4",
        "kafka.linger.ms": "5",
        **extra,
    }
    fmt = {"ceiling": "bench_discard", "jvm-kafka": "kafka", "pykafka": "pykafka"}[writer]
    out = df.write.format(fmt).mode("append")
    if writer != "ceiling":
        out = out.options(**options)
    out.save()


def main() -> int:
    args = parse_args()
    writers = [w.strip() for w in args.writers.split(",") if w.strip()]
    extra = dict(item.split("=", 1) for item in args.option)
    from kafka_sink.testing.oracle import create_topic, end_offsets

    with kafka(args.bootstrap) as bootstrap:
        spark = spark_session(args.jars_dir, "jvm-kafka" in writers)
        print(
            f"bench_spark: {args.rows:,} rows, {KEY_SIZE}-byte keys, {VALUE_SIZE}-byte values, "
            f"acks=all, lz4, {PARTITIONS} partitions, local[2], pyspark {spark.version}; "
            f"Kafka at {bootstrap}",
            flush=True,
        )
        df = dataframe(spark, args.rows)
        best: dict[str, float] = {}
        # Every topic is created up front and given a few seconds: Spark's sink (kafka-clients
        # 3.9) writing to a topic created a moment earlier sometimes got NOT_LEADER_OR_FOLLOWER
        # and then OUT_OF_ORDER_SEQUENCE_NUMBER until delivery.timeout.ms failed the job.
        topics: dict[tuple[str, int], str] = {}
        for run in range(-args.warmup, args.repeat):
            for writer in writers:
                name = f"bench-{'warm' if run < 0 else run + 1}-{writer}-{uuid.uuid4().hex[:8]}"
                create_topic(bootstrap, name, PARTITIONS)
                topics[(writer, run)] = name
        time.sleep(3.0)
        for warm in range(-args.warmup, 0):
            for writer in writers:
                topic = topics[(writer, warm)]
                start = time.perf_counter()
                write(df, writer, bootstrap, topic, extra)
                print(f"  warm-up {writer:<10} {time.perf_counter() - start:7.2f} s", flush=True)
        for run in range(args.repeat):
            for writer in writers:
                topic = topics[(writer, run)]
                start = time.perf_counter()
                try:
                    write(df, writer, bootstrap, topic, extra)
                except Exception as exc:  # report it and go on: one bad run must not hide the rest
                    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
                    print(f"  run {run + 1}   {writer:<10} FAILED: {type(exc).__name__}: {first}")
                    continue
                elapsed = time.perf_counter() - start
                if writer != "ceiling":
                    written = sum(end_offsets(bootstrap, topic).values())
                    if written < args.rows:
                        raise SystemExit(f"{writer}: only {written} of {args.rows} rows landed")
                rate = args.rows / elapsed
                best[writer] = max(best.get(writer, 0.0), rate)
                print(
                    f"  run {run + 1}   {writer:<10} {elapsed:7.2f} s  {rate:>12,.0f} rows/s",
                    flush=True,
                )
        spark.stop()

    print()
    print(f"{'writer':<10} {'best rows/s':>14}")
    for writer in writers:
        print(f"{writer:<10} {best[writer]:>14,.0f}" if writer in best else f"{writer:<10} failed")
    print()
    pairs = [("pykafka", "jvm-kafka"), ("pykafka", "ceiling"), ("jvm-kafka", "ceiling")]
    for a, b in pairs:
        if a in best and b in best:
            print(f"{a} / {b}: {best[a] / best[b]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
