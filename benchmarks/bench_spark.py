"""Spark sink throughput matrix: format("pykafka") against Spark's sink and hand-written Python.

One SparkSession (local[2]), one broker, 6-partition topics, acks=all, linger.ms=5. For every
workload and codec the DataFrame is cached and materialised first (generation is not timed), then
these writers take turns, best of ``--repeat`` runs after ``--warmup`` untimed ones:

- ``ceiling``: a Python Arrow data source writer that counts rows and discards them: what Spark
  can hand a Python data source at all, the upper bound for pykafka;
- ``jvm-default``: Spark's built-in Kafka sink (spark-sql-kafka-0-10 jars from
  ``$SPARK_KAFKA_JARS_DIR``, fetched by ``make bench-spark``) with the producer's defaults;
- ``jvm-tuned``: the same with ``kafka.batch.size=262144``, what an expert sets;
- ``pykafka``: this project's sink;
- ``confluent-fp``: what Python users write by hand today: ``df.foreachPartition`` with one
  confluent-kafka ``Producer`` per partition, ``produce()`` + ``poll(0)`` per row, ``flush()``;
- ``pykafka-eos`` (not in the default matrix): this project's sink with
  ``deliveryGuarantee=exactly-once`` (one transaction per task, committed by the driver), to be
  compared with ``pykafka`` in the same run (``make bench-spark-eos``);
- ``pykafka-skip`` (not in the default matrix): this project's sink with ``onRecordError=skip``
  on rows that are all good: what the per-record policy costs when nothing is bad (each topic's
  rules read once per worker, each group's sizes checked), against ``pykafka`` in the same run
  (``make bench-bad-records``).

Workloads (16-byte keys): ``const100`` a constant 100-byte value; ``json200`` ~200-byte JSON
events (``to_json`` of an id, a sha256 hex, a double, a small array, an event name and a time);
``json1k`` and ``json10k`` the same event carrying a list of order lines (~1 KB, ~10 KB);
``hex100`` (not in the default matrix) the former single workload, 100 hex characters of a
sha512. Row counts are sized for about the same bytes per run.

Per cell, the encoding cost is also measured in this process on a sample of the rows (CPU time,
best of 3): the records laid out, compressed and checksummed as pykafka's ``seal_columns`` does,
and the compression alone (liblz4 with 64 KiB blocks and zstd level 3, the libraries and blocks
Java's producer uses). A Python data source sink cannot cost less than the ceiling plus the
compression, so the second table says, cell by cell, whether the CPU goal (<= 0.7x Spark's sink)
is within reach of any Python sink, and whether the ceiling itself reaches 1.5x Spark's rows/s.

Measured per run: rows/s and MB/s (key + value bytes) from the wall time of ``save()``; client
CPU seconds per million rows, read from the OS for the Spark JVM and every process under it (the
Python workers, live or exited), the broker apart; peak RSS summed over the Python workers,
sampled every 50 ms. Records written are checked against the topic's end offsets.

    python benchmarks/bench_spark.py                      # the whole matrix
    BENCH_QUICK=1 python benchmarks/bench_spark.py        # a short smoke run of every cell
    python benchmarks/bench_spark.py --workloads hex100 --codecs lz4 \\
        --writers ceiling,jvm-default,pykafka --rows 2000000   # the former single workload

``--streaming`` times streaming queries instead (``make bench-spark-stream``, on every PySpark
line the Makefile sets up): each cell's rows are written once as Parquet files, and every run is
one ``trigger(availableNow=True)`` query reading them as a file stream into the writer, from
``start()`` to the end of its micro-batch; the ceiling is then a discarding stream writer on the
same base as pykafka's, and the hand-written baseline ``foreachBatch`` + ``foreachPartition``.

``--out DIR`` writes ``bench_spark.md`` (the table), ``bench_spark.png`` (the plot, needs
matplotlib) and ``bench_spark.json`` there; the full matrix writes to ``benchmarks/results`` by
default. Without --bootstrap (or KAFKA_BOOTSTRAP_SERVERS) a LocalKafka with the "bench" JVM
profile is started for the run.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import pkgutil
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from kafka_sink.spark.spark_api import StreamWriterBase

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTITIONS = 6
KEY_SIZE = 16
WRITERS = ("ceiling", "jvm-default", "jvm-tuned", "pykafka", "confluent-fp")
# Accepted by --writers, never in the default matrix.
OPTIONAL_WRITERS = ("pykafka-eos", "pykafka-skip")
SKIP = {"onRecordError": "skip"}
EOS = {"deliveryGuarantee": "exactly-once"}
# Earlier names of writers, still accepted by --writers.
WRITER_ALIASES = {"jvm-kafka": "jvm-default"}
CODECS = ("lz4", "zstd")
TUNED = {"kafka.batch.size": "262144"}


@dataclass(frozen=True)
class Workload:
    name: str
    label: str
    rows: int  # default rows per run
    value_sql: str  # a Spark SQL expression over ``id`` giving the value (string or binary)


def _event_sql(lines: int) -> str:
    """A JSON event: realistic entropy (hashes, doubles, small ints, words from a vocabulary)."""
    base = (
        "'id', id, "
        "'event', element_at(array('view','click','add_to_cart','purchase','signup'), "
        "CAST(pmod(hash(id, 1), 5) AS INT) + 1), "
        "'ts', date_format(timestamp_millis(1767225600000 + id * 37), "
        "\"yyyy-MM-dd'T'HH:mm:ss.SSS'Z'\"), "
        "'source', element_at(array('web','ios','android'), "
        "CAST(pmod(hash(id, 5), 3) AS INT) + 1), "
        "'user', sha2(CAST(id AS STRING), 256), "
        "'score', rand(7), "
        "'tags', array(pmod(hash(id, 2), 100), pmod(hash(id, 3), 1000), pmod(hash(id, 4), 7))"
    )
    if lines:
        base += (
            f", 'lines', transform(sequence(1, {lines}), i -> named_struct("
            "'sku', concat('SKU-', lpad(CAST(pmod(hash(id, i), 100000) AS STRING), 6, '0')), "
            "'qty', pmod(hash(i, id), 5) + 1, "
            "'price', round(pmod(hash(id, i, 9), 100000) / 100.0, 2)))"
        )
    return f"to_json(named_struct({base}))"


WORKLOADS = {
    w.name: w
    for w in (
        Workload("const100", "100 B constant value", 1_500_000, "repeat('x', 100)"),
        Workload("json200", "~200 B JSON event", 1_000_000, _event_sql(0)),
        Workload("json1k", "~1 KB JSON event", 250_000, _event_sql(18)),
        Workload("json10k", "~10 KB JSON event", 25_000, _event_sql(223)),
        Workload(
            "hex100",
            "100 B of a sha512 hex",
            2_000_000,
            "substring(sha2(CAST(id AS STRING), 512), 1, 100)",
        ),
    )
}
DEFAULT_WORKLOADS = ("const100", "json200", "json1k", "json10k")


@dataclass
class _Count(WriterCommitMessage):
    rows: int


class _DiscardWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[Any]) -> _Count:
        return _Count(sum(batch.num_rows for batch in iterator))


class _DiscardStreamWriter(StreamWriterBase):
    """The streaming ceiling, on the same base as pykafka's stream writer on this PySpark."""

    def write(self, iterator: Iterator[Any]) -> _Count:
        return _Count(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass


class DiscardDataSource(DataSource):
    """The ceiling: an Arrow writer that receives every batch and keeps nothing."""

    @classmethod
    def name(cls) -> str:
        return "bench_discard"

    def writer(self, schema: Any, overwrite: bool) -> _DiscardWriter:
        return _DiscardWriter()

    def streamWriter(self, schema: Any, overwrite: bool) -> _DiscardStreamWriter:
        return _DiscardStreamWriter()


def confluent_partition(
    conf: dict[str, str],
    topic: str,
    value_of: Callable[[], Callable[[Any], Any]] | None = None,
) -> Callable[[Iterator[Any]], None]:
    """The hand-written baseline: one confluent-kafka Producer per partition.

    ``value_of``, called once per partition, gives what turns a row into its value (a
    serializer); without it the row's ``value`` column is sent as it is."""

    def send(rows: Iterator[Any]) -> None:
        from confluent_kafka import Producer

        producer = Producer(conf)
        value = value_of() if value_of is not None else lambda row: row.value
        errors: list[Any] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for row in rows:
            while True:
                try:
                    # A row read back from files carries binary columns as bytearray, which
                    # produce() refuses; bytes() of bytes is the same object, no copy.
                    producer.produce(
                        topic,
                        value=bytes(value(row)),
                        key=None if row.key is None else bytes(row.key),
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:  # local queue full: serve callbacks and try again
                    producer.poll(0.1)
            producer.poll(0)
        left = producer.flush(120)
        if left or errors:
            raise RuntimeError(f"{left} records not delivered, errors: {errors[:3]}")

    return send


# -- measuring ------------------------------------------------------------------------------


class ClientMeter:
    """CPU of the Spark JVM and every process under it, and peak RSS of its Python workers.

    A sampler thread reads every process of the tree from the OS each 50 ms: its own CPU time
    (user + system, children apart: a worker that exits is counted through its last reading,
    never twice through its parent) and, for Python processes, RSS. A run's CPU is the growth
    of those readings; its peak RSS is the largest one of a Python worker that ran during it
    (workers are reused across runs, so idle ones left by other writers are not counted).
    """

    def __init__(self, jvm_pid: int) -> None:
        import psutil

        self._psutil = psutil
        self.jvm = psutil.Process(jvm_pid)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._cpu: dict[tuple[int, float], float] = {}
        self._rss: dict[tuple[int, float], int] = {}
        self._python: set[tuple[int, float]] = set()

    def _read(self) -> None:
        try:
            tree = [self.jvm, *self.jvm.children(recursive=True)]
        except self._psutil.Error:
            tree = [self.jvm]
        for proc in tree:
            try:
                with proc.oneshot():
                    key = (proc.pid, proc.create_time())
                    t = proc.cpu_times()
                    cpu = t.user + t.system
                    python = "python" in proc.name()
                    rss = proc.memory_info().rss if python else 0
            except self._psutil.Error:
                continue
            with self._lock:
                self._cpu[key] = cpu
                if python:
                    self._python.add(key)
                    self._rss[key] = max(self._rss.get(key, 0), rss)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self._read()

    @contextlib.contextmanager
    def measure(self) -> Iterator[dict[str, float]]:
        out: dict[str, float] = {}
        self._read()
        with self._lock:
            cpu0 = dict(self._cpu)
            self._rss.clear()
        self._stop.clear()
        thread = threading.Thread(target=self._sample, daemon=True)
        thread.start()
        start = time.perf_counter()
        try:
            yield out
        finally:
            out["wall_s"] = time.perf_counter() - start
            self._stop.set()
            thread.join()
            self._read()
            with self._lock:
                grew = {k: v - cpu0.get(k, 0.0) for k, v in self._cpu.items()}
                out["cpu_s"] = sum(grew.values())
                active = [k for k in self._python if grew.get(k, 0.0) >= 0.02]
                out["peak_rss_mb"] = max((self._rss.get(k, 0) for k in active), default=0) / 1e6


def jvm_pid() -> int:
    """The Spark driver JVM: the java process under this one."""
    import psutil

    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if proc.name() == "java" and any("SparkSubmit" in a for a in proc.cmdline()):
                return int(proc.pid)
    raise SystemExit("could not find the Spark driver JVM among this process's children")


@dataclass
class Result:
    workload: str
    codec: str
    writer: str
    rows: int
    bytes: int
    runs: list[dict[str, float]] = field(default_factory=list)
    failed: str | None = None

    @property
    def best(self) -> dict[str, float] | None:
        return min(self.runs, key=lambda r: r["wall_s"]) if self.runs else None

    def rows_per_s(self) -> float:
        best = self.best
        return self.rows / best["wall_s"] if best else 0.0

    def mb_per_s(self) -> float:
        best = self.best
        return self.bytes / best["wall_s"] / 1e6 if best else 0.0

    def cpu_per_m(self) -> float:
        """Client CPU s per million rows: the median over the runs (CPU time is less noisy
        than wall time, and the best-wall run is not always the cheapest)."""
        if not self.runs:
            return 0.0
        return statistics.median(r["cpu_s"] for r in self.runs) / self.rows * 1e6

    def peak_rss_mb(self) -> float:
        return max((r["peak_rss_mb"] for r in self.runs), default=0.0)


# -- Spark and Kafka ------------------------------------------------------------------------


@contextlib.contextmanager
def kafka(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from kafka_sink.testing.local_kafka import LocalKafka

    with LocalKafka(nodes=1, jvm_profile="bench") as local:
        yield local.bootstrap_servers


def spark_session(
    jars_dir: str, need_jars: bool, master: str = "local[2]", conf: dict[str, str] | None = None
) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
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
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
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


def dataframe(spark: Any, workload: Workload, rows: int) -> tuple[Any, int]:
    """Cached, materialised (key, value) rows split over 2 tasks, and their key+value bytes."""
    df = spark.range(0, rows, 1, 2).selectExpr(
        f"CAST(lpad(CAST(id AS STRING), {KEY_SIZE}, '0') AS BINARY) AS key",
        f"CAST({workload.value_sql} AS BINARY) AS value",
    )
    df = df.cache()
    stats = df.selectExpr("count(*) AS n", "sum(length(key) + length(value)) AS b").first()
    assert stats is not None and stats["n"] == rows
    return df, int(stats["b"])


def kafka_options(bootstrap: str, topic: str, codec: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": bootstrap,
        "topic": topic,
        "kafka.acks": "all",
        "kafka.compression.type": codec,
        "kafka.linger.ms": "5",
        **extra,
    }


def write(df: Any, writer: str, options: dict[str, str], stream: Stream | None = None) -> None:
    if stream is not None:
        stream_write(stream, writer, options)
    elif writer == "ceiling":
        df.write.format("bench_discard").mode("append").save()
    elif writer == "confluent-fp":
        conf = {k.removeprefix("kafka."): v for k, v in options.items() if k.startswith("kafka.")}
        df.foreachPartition(confluent_partition(conf, options["topic"]))
    else:
        fmt = "pykafka" if writer.startswith("pykafka") else "kafka"
        extra = _extra(writer)
        df.write.format(fmt).mode("append").options(**{**options, **extra}).save()


def _extra(writer: str) -> dict[str, str]:
    """The options a writer variant adds to the cell's."""
    return {"jvm-tuned": TUNED, "pykafka-eos": EOS, "pykafka-skip": SKIP}.get(writer, {})


@dataclass
class Stream:
    """A streaming run's input: the cell's rows as Parquet files, read by a file stream in one
    ``availableNow`` micro-batch per run (its own checkpoint each time)."""

    spark: Any
    schema: Any
    path: str
    checkpoints: str

    def source(self) -> Any:
        return self.spark.readStream.schema(self.schema).parquet(self.path)


def stream_write(stream: Stream, writer: str, options: dict[str, str]) -> None:
    """One streaming query over the whole input: start() to the end of its last micro-batch."""
    checkpoint = os.path.join(stream.checkpoints, uuid.uuid4().hex)
    out = stream.source().writeStream.option("checkpointLocation", checkpoint)
    if writer == "ceiling":
        out = out.format("bench_discard")
    elif writer == "confluent-fp":
        # What a PySpark 4.0 user writes by hand today: foreachBatch, then one confluent-kafka
        # producer per partition of the micro-batch.
        conf = {k.removeprefix("kafka."): v for k, v in options.items() if k.startswith("kafka.")}
        send = confluent_partition(conf, options["topic"])
        out = out.foreachBatch(lambda batch, _id: batch.foreachPartition(send))
    else:
        fmt = "pykafka" if writer.startswith("pykafka") else "kafka"
        extra = _extra(writer)
        out = out.format(fmt).options(**{**options, **extra})
    query = out.trigger(availableNow=True).start()
    query.awaitTermination(600)
    if query.isActive:
        query.stop()
        raise RuntimeError(f"{writer}: the streaming query did not finish in 600 s")
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))


def stream_of(spark: Any, df: Any, directory: str) -> Stream:
    """The cell's cached rows written once as Parquet (not timed), one file per task."""
    path = os.path.join(directory, "input")
    df.write.mode("overwrite").parquet(path)
    return Stream(spark, df.schema, path, os.path.join(directory, "checkpoints"))


def delete_topics(bootstrap: str, names: list[str]) -> None:
    """Keep the broker lean between cells (best effort)."""
    from kafka_sink.testing.oracle import import_kafka_python

    kafka_mod = import_kafka_python()
    admin = kafka_mod.admin.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics(names, timeout_ms=30_000)
    except Exception as exc:  # the next cell does not depend on it
        print(f"  (deleting topics failed: {type(exc).__name__})")
    finally:
        admin.close()


# -- the matrix -----------------------------------------------------------------------------


def run_cell(
    meter: ClientMeter,
    bootstrap: str,
    *,
    df: Any,
    nbytes: int,
    rows: int,
    workload: Workload,
    codec: str,
    writers: list[str],
    args: argparse.Namespace,
    extra: dict[str, str],
    stream: Stream | None = None,
) -> list[Result]:
    from kafka_sink.testing.oracle import create_topic, end_offsets

    results = {w: Result(workload.name, codec, w, rows, nbytes) for w in writers}
    # Topics are created up front and given a few seconds: Spark's sink (kafka-clients 3.9)
    # writing to a topic created a moment earlier sometimes got NOT_LEADER_OR_FOLLOWER and then
    # OUT_OF_ORDER_SEQUENCE_NUMBER until delivery.timeout.ms failed the job.
    topics: dict[tuple[str, int], str] = {}
    for run in range(-args.warmup, args.repeat):
        for writer in writers:
            if writer != "ceiling":
                name = f"bench-{workload.name}-{codec}-{writer}-{uuid.uuid4().hex[:8]}"
                create_topic(bootstrap, name, PARTITIONS)
                topics[(writer, run)] = name
    time.sleep(3.0)
    for run in range(-args.warmup, args.repeat):
        for writer in writers:
            topic = topics.get((writer, run), "")
            options = kafka_options(bootstrap, topic, codec, extra)
            tag = "warm-up" if run < 0 else f"run {run + 1}  "
            try:
                with meter.measure() as m:
                    write(df, writer, options, stream)
            except Exception as exc:  # report it and go on: one bad run must not hide the rest
                first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
                print(f"    {tag} {writer:<12} FAILED: {type(exc).__name__}: {first}", flush=True)
                results[writer].failed = f"{type(exc).__name__}: {first}"
                continue
            if writer != "ceiling":
                # Under exactly-once the end offsets also count one commit marker per partition.
                written = sum(end_offsets(bootstrap, topic).values())
                if written < rows:
                    raise SystemExit(f"{writer}: only {written} of {rows} rows landed")
            print(
                f"    {tag} {writer:<12} {m['wall_s']:6.2f} s {rows / m['wall_s']:>11,.0f} rows/s "
                f"cpu {m['cpu_s']:6.2f} s  rss {m['peak_rss_mb']:6.0f} MB",
                flush=True,
            )
            if run >= 0:
                results[writer].runs.append(m)
    if topics:
        delete_topics(bootstrap, list(topics.values()))
    return [results[w] for w in writers]


@dataclass(frozen=True)
class EncodeCost:
    """CPU seconds per million rows to encode a workload's rows, measured in-process."""

    workload: str
    codec: str
    sample_rows: int
    encode_cpu_per_m: float  # records laid out, compressed and checksummed (seal_columns)
    codec_cpu_per_m: float  # the compression calls alone, on the same records sections
    ratio: float  # compressed / uncompressed records bytes


def _best_cpu_s(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def encode_cost(df: Any, workload: Workload, codec: str, sample_rows: int) -> EncodeCost:
    """What encoding ``sample_rows`` of ``df`` costs here, per million rows (see the module doc)."""
    from kafka_sink.records.columnar import seal_columns
    from kafka_sink.records.compression import CompressionType, compressor

    sample = df.limit(sample_rows).toArrow()
    keys, values = sample.column("key"), sample.column("value")
    n = sample.num_rows
    ctype = CompressionType[codec.upper()]
    batch_size = int(TUNED["kafka.batch.size"])  # pykafka's default batch.size too
    now_ms = int(time.time() * 1000)

    def seal(compression: CompressionType) -> list[Any]:
        return seal_columns(
            values, keys, timestamps_ms=now_ms, compression_type=compression, batch_size=batch_size
        )

    sections = [bytes(b.records) for b in seal(CompressionType.NONE)]
    compress = compressor(ctype)
    compressed = sum(len(compress(s)) for s in sections)
    encode_s = _best_cpu_s(lambda: seal(ctype))
    codec_s = _best_cpu_s(lambda: [compress(s) for s in sections])
    return EncodeCost(
        workload.name,
        codec,
        n,
        encode_s / n * 1e6,
        codec_s / n * 1e6,
        compressed / max(sum(map(len, sections)), 1),
    )


def floor_table(results: list[Result], costs: list[EncodeCost]) -> str:
    """Per cell: how far any Python data source sink can go, against the goals."""
    by = {(r.workload, r.codec, r.writer): r for r in results}
    lines = [
        "| workload | codec | ceiling CPU | compression CPU | floor (ceiling + compression) | "
        "pykafka CPU | pykafka's own (pykafka - ceiling) | encoding alone | goal: 0.7x best JVM "
        "| CPU goal within reach | ceiling rows/s / best JVM (goal 1.5x needs >= 1.5) | "
        "compressed / raw |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for c in costs:
        ceiling = by.get((c.workload, c.codec, "ceiling"))
        mine = by.get((c.workload, c.codec, "pykafka"))
        jvm = [
            r
            for w in ("jvm-default", "jvm-tuned")
            if (r := by.get((c.workload, c.codec, w))) is not None and r.runs
        ]
        if ceiling is None or not ceiling.runs or not jvm:
            continue
        best_jvm = max(jvm, key=Result.rows_per_s)
        floor = ceiling.cpu_per_m() + c.codec_cpu_per_m
        goal = 0.7 * best_jvm.cpu_per_m()
        mine_cpu = f"{mine.cpu_per_m():.2f}" if mine is not None and mine.runs else "-"
        own = (
            f"{mine.cpu_per_m() - ceiling.cpu_per_m():.2f}"
            if mine is not None and mine.runs
            else "-"
        )
        lines.append(
            f"| {c.workload} | {c.codec} | {ceiling.cpu_per_m():.2f} | {c.codec_cpu_per_m:.2f} | "
            f"{floor:.2f} | {mine_cpu} | {own} | {c.encode_cpu_per_m:.2f} | {goal:.2f} | "
            f"{'yes' if floor <= goal else '**no**'} | "
            f"{ceiling.rows_per_s() / best_jvm.rows_per_s():.2f}x | {c.ratio:.2f} |"
        )
    return "\n".join(lines)


def ratios(results: list[Result]) -> str:
    """Exactly-once rows/s over at-least-once rows/s, per cell run with both."""
    by = {(r.workload, r.codec, r.writer): r for r in results}
    lines = []
    for (workload, codec, writer), r in by.items():
        alo = by.get((workload, codec, "pykafka"))
        if writer != "pykafka-eos" or alo is None or not r.runs or not alo.runs:
            continue
        lines.append(
            f"- {workload} {codec}: exactly-once {r.rows_per_s():,.0f} rows/s, at-least-once "
            f"{alo.rows_per_s():,.0f} rows/s: {r.rows_per_s() / alo.rows_per_s():.2f}x"
        )
    return (
        ("\nExactly-once / at-least-once (pykafka-eos / pykafka):\n" + "\n".join(lines) + "\n")
        if lines
        else ""
    )


def _fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.0f}k"


def table(results: list[Result], writers: list[str]) -> str:
    """The markdown table: one row per cell and writer, ratios against the JVM sink's better
    setting and the ceiling from the same run."""
    lines = [
        "| workload | codec | writer | rows/s | MB/s | client CPU s / 1M rows | "
        "peak RSS of a Python worker (MB) | rows/s vs best JVM | rows/s vs ceiling |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    cells: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        cells.setdefault((r.workload, r.codec), []).append(r)
    for (workload, codec), rs in cells.items():
        by = {r.writer: r for r in rs}
        jvm = [by[w] for w in ("jvm-default", "jvm-tuned") if w in by and by[w].runs]
        best_jvm = max(jvm, key=Result.rows_per_s) if jvm else None
        ceiling = by.get("ceiling")
        for w in writers:
            r = by.get(w)
            if r is None:
                continue
            if not r.runs:
                lines.append(f"| {workload} | {codec} | {w} | failed | | | | | |")
                continue
            vs_jvm = f"{r.rows_per_s() / best_jvm.rows_per_s():.2f}x" if best_jvm else "-"
            vs_ceil = (
                f"{r.rows_per_s() / ceiling.rows_per_s():.2f}x"
                if ceiling is not None and ceiling.runs
                else "-"
            )
            name = f"**{w}**" if w == "pykafka" else w
            rss = f"{r.peak_rss_mb():.0f}" if r.peak_rss_mb() else "-"  # no Python worker ran
            lines.append(
                f"| {workload} | {codec} | {name} | {_fmt_rate(r.rows_per_s())} | "
                f"{r.mb_per_s():.0f} | {r.cpu_per_m():.2f} | {rss} | "
                f"{vs_jvm} | {vs_ceil} |"
            )
    return "\n".join(lines)


def plot(results: list[Result], writers: list[str], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(dict.fromkeys((r.workload, r.codec) for r in results))
    by = {(r.workload, r.codec, r.writer): r for r in results}
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    width = 0.8 / len(writers)
    for i, w in enumerate(writers):
        xs = [c + (i - (len(writers) - 1) / 2) * width for c in range(len(cells))]
        rate = [by[(wl, co, w)].rows_per_s() if (wl, co, w) in by else 0 for wl, co in cells]
        cpu = [by[(wl, co, w)].cpu_per_m() if (wl, co, w) in by else 0 for wl, co in cells]
        axes[0].bar(xs, rate, width, label=w)
        axes[1].bar(xs, cpu, width, label=w)
    labels = [f"{wl}\n{co}" for wl, co in cells]
    for ax, ylabel in zip(
        axes, ("rows/s (log)", "client CPU s per 1M rows (log; lower is better)"), strict=True
    ):
        ax.set_xticks(range(len(cells)), labels, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save(stem: str, md: str, doc: dict[str, Any], draw: Callable[[str], None]) -> None:
    """``stem``.md, .json and .png (the plot is left out without matplotlib)."""
    with open(stem + ".md", "w") as f:
        f.write(md)
    with open(stem + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    try:
        draw(stem + ".png")
    except ImportError:
        print("matplotlib is not installed: no plot (pip install -e '.[dev]')")
    print(f"\nwrote {stem}.md, .json and .png")


def parse_args() -> argparse.Namespace:
    quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS))
    parser.add_argument("--codecs", default=",".join(CODECS))
    parser.add_argument("--writers", default=",".join(WRITERS), help="comma-separated subset")
    parser.add_argument(
        "--rows", type=int, default=None, help="rows per run for every workload (default: sized)"
    )
    parser.add_argument(
        "--scale",
        type=float,
        default=float(os.environ.get("BENCH_SCALE", "0.05" if quick else "1")),
        help="multiplies each workload's default rows",
    )
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument(
        "--repeat", type=int, default=int(os.environ.get("BENCH_REPEAT", "1" if quick else "2"))
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=int(os.environ.get("BENCH_WARMUP", "0" if quick else "1")),
        help="untimed full-size runs per writer and cell",
    )
    parser.add_argument(
        "--jars-dir",
        default=os.environ.get(
            "SPARK_KAFKA_JARS_DIR", os.path.join(ROOT, ".cache/spark-kafka/lib")
        ),
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra kafka.* option for every Kafka writer (e.g. kafka.linger.ms=0)",
    )
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting for the session (e.g. "
        "spark.sql.execution.arrow.maxRecordsPerBatch=1000)",
    )
    parser.add_argument(
        "--floor-rows",
        type=int,
        default=20_000,
        help="rows sampled per cell to measure the encoding and compression cost in-process",
    )
    parser.add_argument(
        "--no-floor", action="store_true", help="skip the in-process encoding measurement"
    )
    parser.add_argument(
        "--out",
        default=os.environ.get("BENCH_OUT"),
        help="directory for bench_spark.{md,png,json} (default: benchmarks/results for the "
        "full default matrix, nowhere otherwise)",
    )
    parser.add_argument(
        "--streaming",
        action="store_true",
        help="time streaming queries instead of batch writes: the cell's rows as Parquet files "
        "read by a file stream, one availableNow query per run (make bench-spark-stream)",
    )
    parser.add_argument(
        "--stem",
        default=None,
        help="file names under --out: STEM.md, STEM.json, STEM.png (e.g. bench_spark_eos)",
    )
    args = parser.parse_args()
    args.quick = quick
    if args.stem is None:
        args.stem = "bench_spark_stream" if args.streaming else "bench_spark"
    return args


def main() -> int:
    args = parse_args()
    writers = [WRITER_ALIASES.get(w.strip(), w.strip()) for w in args.writers.split(",")]
    writers = [w for w in writers if w]
    unknown = [w for w in writers if w not in WRITERS + OPTIONAL_WRITERS]
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown += [w for w in workloads if w not in WORKLOADS]
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    if unknown:
        raise SystemExit(
            f"unknown writer or workload: {unknown}; writers {WRITERS}, workloads {list(WORKLOADS)}"
        )
    extra = dict(item.split("=", 1) for item in args.option)
    default_matrix = (
        tuple(workloads) == DEFAULT_WORKLOADS
        and tuple(writers) == WRITERS
        and tuple(codecs) == CODECS
        and args.scale == 1.0
        and not args.quick
        and args.rows is None
        and not args.spark_conf
        and not args.streaming
    )
    out = args.out or (os.path.join(ROOT, "benchmarks", "results") if default_matrix else None)

    results: list[Result] = []
    costs: list[EncodeCost] = []
    with kafka(args.bootstrap) as bootstrap:
        need_jars = any(w.startswith("jvm-") for w in writers)
        spark_conf = dict(item.split("=", 1) for item in args.spark_conf)
        spark = spark_session(args.jars_dir, need_jars, conf=spark_conf)
        meter = ClientMeter(jvm_pid())
        settings = "".join(f", {k}={v}" for k, v in sorted(spark_conf.items()))
        kind = "streaming (availableNow over Parquet files)" if args.streaming else "batch"
        header = (
            f"bench_spark, {kind}: local[2]{settings}, pyspark {spark.version}, Python "
            f"{platform.python_version()}, {PARTITIONS} partitions, acks=all, linger.ms=5, "
            f"{KEY_SIZE}-byte keys; best of {args.repeat} after {args.warmup} warm-up; "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start"
        )
        print(header + f"; Kafka at {bootstrap}", flush=True)
        for name in workloads:
            workload = WORKLOADS[name]
            rows = args.rows or max(int(workload.rows * args.scale), 1000)
            df, nbytes = dataframe(spark, workload, rows)
            print(
                f"{name}: {workload.label}, {rows:,} rows, {nbytes / rows:.0f} B per row "
                "(key + value)",
                flush=True,
            )
            for codec in codecs:
                print(f"  {codec}", flush=True)
                if not args.no_floor:
                    cost = encode_cost(df, workload, codec, min(rows, args.floor_rows))
                    costs.append(cost)
                    print(
                        f"    encoding {cost.encode_cpu_per_m:.2f}, compression alone "
                        f"{cost.codec_cpu_per_m:.2f} CPU s per 1M rows (in-process, "
                        f"{cost.sample_rows:,} rows)",
                        flush=True,
                    )
                stream = (
                    stream_of(spark, df, tempfile.mkdtemp(prefix="bench-spark-stream-"))
                    if args.streaming
                    else None
                )
                results += run_cell(
                    meter,
                    bootstrap,
                    df=df,
                    nbytes=nbytes,
                    rows=rows,
                    workload=workload,
                    codec=codec,
                    writers=writers,
                    args=args,
                    extra=extra,
                    stream=stream,
                )
                if stream is not None:
                    shutil.rmtree(os.path.dirname(stream.path), ignore_errors=True)
            df.unpersist(blocking=True)
        load = os.getloadavg()[0]
        spark.stop()

    md = table(results, writers)
    floors = floor_table(results, costs)
    if floors.count("\n") > 1:
        md += (
            "\n\nWhat a Python sink cannot go below (CPU s per 1M rows; compression measured "
            "in-process on a sample, the libraries and blocks Java's producer uses):\n\n" + floors
        )
    print()
    print(md)
    print(ratios(results))
    if out:
        os.makedirs(out, exist_ok=True)
        note = (
            f"{header}; load average {load:.1f} at the end. Client CPU is the Spark JVM plus "
            "its Python workers, from the OS (median over the runs); the broker is apart."
        )
        save(
            os.path.join(out, args.stem),
            note + "\n\n" + md + "\n" + ratios(results),
            {"header": note, "results": [asdict(r) for r in results]}
            | {"encoding": [asdict(c) for c in costs]},
            lambda path: plot(results, writers, path, header),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
