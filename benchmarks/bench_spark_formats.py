"""Schema Registry formats through Spark: format("pykafka") against what teams write today.

One SparkSession (local[2], session time zone UTC), one LocalKafka ("bench" JVM profile), one
LocalSchemaRegistry, 6-partition topics, acks=all, lz4, linger.ms=5. The rows are the same in
every cell: a ~300 B struct (a bigint and int ids, names, an e-mail, a SKU, a quantity, a
decimal(12, 2) amount, a timestamp, an array of strings, an array of longs, a nullable note
that is null in 4 rows of 5, an address) and a 16-byte key, split over 2 tasks, cached and
materialised before any timing. Per format (``avro``, ``jsonschema``, ``protobuf``) these
writers take turns, best of ``--runs`` after one untimed warm-up each:

- ``ceiling``: bench_spark.py's Arrow writer that discards the struct rows: what handing them to
  any Python data source costs (Spark's conversion of the struct to Arrow), encoding apart.
- ``pykafka``: this project's sink with ``valueFormat=<format>`` and ``schema.registry.url``
  (the schema derived from the Spark type and registered by the driver). For Avro, the records
  of a 10-row write first must carry the very bytes ``to_avro`` gives those rows;
- ``pykafka-bytes``: the fair baseline for what the format costs: the same sink writing the same
  rows already framed, as a cached binary column (``concat`` of the 5-byte header and Spark's
  ``to_avro``, or ``to_json`` for JSON Schema; Protobuf has no encoder in Spark without the
  spark-protobuf jar, so its baseline writes the Avro bytes, a few bytes shorter per row). Only
  the write is timed, so ``pykafka / pykafka-bytes`` is the price of encoding in the sink;
- ``jvm-default`` / ``jvm-tuned``: Spark's own Kafka sink (jars from ``$SPARK_KAFKA_JARS_DIR``)
  fed by ``concat(<header literal>, to_avro(value))`` (or ``to_json``), the id registered
  beforehand: what users do today; tuned sets ``kafka.batch.size=262144`` as bench_spark.py does.
  Protobuf: skipped (``to_protobuf`` needs the spark-protobuf jar, not fetched);
- ``confluent-fp``: ``df.foreachPartition`` with one confluent-kafka ``Producer`` and its
  ``AvroSerializer`` / ``JSONSerializer`` / ``ProtobufSerializer`` per partition (against the
  same registry, registering on first use), ``produce()`` + ``poll(0)`` per row, ``flush()``.
  Rows come as ``Row.asDict(recursive=True)``; for JSON, decimals become floats and timestamps
  ISO text first; for Protobuf a message class built at run time from a descriptor (decimal as
  its text, timestamp as epoch micros). It is ~30x slower than the rest, so it writes the first
  ``--confluent-rows`` of the same rows (the rate per row is what it costs).

A pykafka cell whose format the sink refuses (a tiny write first) prints ``skipped: <error>``
and the table says so; the other cells still run. Goals, beside each ratio: pykafka >= 1.5x the
best JVM setting's rows/s, >= 5x the confluent-kafka route's, and >= 0.7x pykafka-bytes.

Measured per run as bench_spark.py measures (its ``ClientMeter``): rows/s and MB/s (key + value
bytes of the framed payload) from the wall time of the write; client CPU s per million rows
from the OS for the Spark JVM and every process under it, the broker and the registry apart;
peak RSS of a Python worker. Records written are checked against the topic's end offsets.

    python benchmarks/bench_spark_formats.py                         # all formats, ~10 minutes
    python benchmarks/bench_spark_formats.py --formats avro --rows 20000 --runs 1   # a smoke run

``--out DIR`` writes ``bench_spark_formats.{md,json,png}`` there (the full default run writes to
``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import bench_spark
from bench_spark import (
    KEY_SIZE,
    PARTITIONS,
    TUNED,
    ClientMeter,
    Result,
    _fmt_rate,
    confluent_partition,
    delete_topics,
    jvm_pid,
    kafka,
    kafka_options,
    plot,
    save,
    spark_session,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = ("avro", "jsonschema", "protobuf")
WRITERS = ("ceiling", "pykafka", "pykafka-bytes", "jvm-default", "jvm-tuned", "confluent-fp")
CODEC = "lz4"
GOAL_VS_JVM, GOAL_VS_CONFLUENT, GOAL_VS_BYTES = 1.5, 5.0, 0.7

# The ~300 B struct (about 300 B as Avro): the columns of bench_formats.py's rows, from ``id``.
VALUE_SQL = """named_struct(
  'order_id', id,
  'customer_id', CAST(pmod(hash(id, 1), 1000000) AS INT),
  'customer', concat('Customer Name ', lpad(CAST(pmod(hash(id, 1), 1000000) AS STRING), 7, '0')),
  'email', concat('firstname.lastname.', lpad(CAST(pmod(hash(id, 1), 1000000) AS STRING), 7, '0'),
                  '@mail.example.com'),
  'sku', concat('SKU-', lpad(CAST(pmod(hash(id, 2), 100000000) AS STRING), 8, '0'),
                '-XL-BLUE-COTTON-SHIRT'),
  'quantity', CAST(pmod(hash(id, 3), 49) + 1 AS INT),
  'amount', CAST((pmod(hash(id, 4), 2000000000) - 1000000000) / 100 AS DECIMAL(12, 2)),
  'created_at', timestamp_micros(
                  1700000000000000 + CAST(pmod(hash(id, 5), 1000000000) AS BIGINT) * 1000),
  'tags', slice(array('new', 'gift', 'express', 'bulk', 'return', 'vip'), 1, CAST(id % 4 AS INT)),
  'scores', array(id % 97, id % 89, id % 83),
  'note', IF(id % 5 = 0, concat('leave at the door, order ', id), NULL),
  'address', concat(id % 999, ' Long Street Name, Apartment ', id % 77, ', Building ', id % 13,
                    ', Floor ', id % 9, ', Door ', id % 4,
                    ', 12345 Some City, Some Region, Some Country, delivery between nine and five')
) AS value"""
KEY_SQL = f"CAST(lpad(CAST(id AS STRING), {KEY_SIZE}, '0') AS BINARY) AS key"

# Protobuf's message for the confluent-kafka route (proto3): field name, number, type, repeated.
PROTO_FIELDS = (
    ("order_id", "TYPE_INT64", False),
    ("customer_id", "TYPE_INT32", False),
    ("customer", "TYPE_STRING", False),
    ("email", "TYPE_STRING", False),
    ("sku", "TYPE_STRING", False),
    ("quantity", "TYPE_INT32", False),
    ("amount", "TYPE_STRING", False),  # the decimal's digits
    ("created_at", "TYPE_INT64", False),  # epoch microseconds
    ("tags", "TYPE_STRING", True),
    ("scores", "TYPE_INT64", True),
    ("note", "TYPE_STRING", False),  # absent when null
    ("address", "TYPE_STRING", False),
)


def proto_file() -> bytes:
    """The serialized FileDescriptorProto of the ``Order`` message (picklable, unlike a class)."""
    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FileDescriptorProto(name="order.proto", package="bench", syntax="proto3")
    message = fd.message_type.add(name="Order")
    for number, (name, kind, repeated) in enumerate(PROTO_FIELDS, start=1):
        message.field.add(
            name=name,
            number=number,
            type=getattr(descriptor_pb2.FieldDescriptorProto, kind),
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
            if repeated
            else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    return bytes(fd.SerializeToString())


def proto_class(serialized: bytes) -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(serialized))
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("bench.Order"))


def proto_text() -> str:
    """The same message as ``.proto`` text: what the registry is given for it."""
    fields = "".join(
        f"  {'repeated ' if repeated else ''}{kind.removeprefix('TYPE_').lower()} {name} = {n};\n"
        for n, (name, kind, repeated) in enumerate(PROTO_FIELDS, start=1)
    )
    return f'syntax = "proto3";\npackage bench;\n\nmessage Order {{\n{fields}}}\n'


def json_ready(value: dict[str, Any]) -> dict[str, Any]:
    value["amount"] = float(value["amount"])
    value["created_at"] = value["created_at"].strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value


def confluent_serializer(fmt: str, registry_url: str, schema_text: str) -> Any:
    """A ``(row value dict, context) -> bytes`` callable, as a PySpark team writes it."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient({"url": registry_url})
    if fmt == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        return AvroSerializer(client, schema_text)
    if fmt == "jsonschema":
        from confluent_kafka.schema_registry.json_schema import JSONSerializer

        serializer = JSONSerializer(schema_text, client)
        return lambda value, ctx: serializer(json_ready(value), ctx)
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    class ProtoTextRegistry(SchemaRegistryClient):  # type: ignore[misc]
        """Registers the message as ``.proto`` text: the serializer sends a base64
        FileDescriptorProto, which Apicurio's Confluent API cannot tell the type of."""

        def register_schema_full_response(self, subject: str, schema: Any, **kw: Any) -> Any:
            text = Schema(proto_text(), "PROTOBUF", schema.references)
            return super().register_schema_full_response(subject, text, **kw)

    order = proto_class(bytes.fromhex(schema_text))
    serializer = ProtobufSerializer(order, ProtoTextRegistry({"url": registry_url}))

    def to_message(value: dict[str, Any], ctx: Any) -> bytes:
        value["amount"] = str(value["amount"])
        at = value["created_at"]  # naive, in the worker's time zone (UTC here)
        value["created_at"] = (
            int(at.replace(tzinfo=dt.UTC).timestamp()) * 1_000_000 + at.microsecond
        )
        if value["note"] is None:
            del value["note"]
        return serializer(order(**value), ctx)

    return to_message


def row_serializer(fmt: str, topic: str, registry_url: str, schema_text: str) -> Any:
    """What ``confluent_partition`` calls per partition: a row -> its serialized value."""

    def make() -> Callable[[Any], bytes]:
        from confluent_kafka.serialization import MessageField, SerializationContext

        serialize = confluent_serializer(fmt, registry_url, schema_text)
        ctx = SerializationContext(topic, MessageField.VALUE)
        return lambda row: bytes(serialize(row.value.asDict(recursive=True), ctx))

    return make


# -- the cells ------------------------------------------------------------------------------


@dataclass
class Cell:
    """One writer of one format: how it writes ``rows`` rows to a topic, or why it cannot."""

    writer: str
    rows: int
    nbytes: int
    write: Callable[[str], None] | None  # topic -> None
    skipped: str | None = None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # Spark wraps a Python worker's error in a long trace: its last line names the cause.
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = next((line for line in reversed(lines) if "Error:" in line), lines[0] if lines else "")
    return cause.rsplit("Error: ", 1)[-1][:200]


class FormatRun:
    """Everything one format's cells need: the schema registered, the framed bytes cached."""

    def __init__(self, spark: Any, fmt: str, registry_url: str, bootstrap: str, args: Any) -> None:
        from pyspark.sql import functions as sf

        from kafka_sink.formats.registry import Schema, SchemaRegistryClient
        from kafka_sink.formats.sql_types import sql_type_from_json
        from kafka_sink.formats.wire_format import header

        self.spark, self.fmt, self.registry_url, self.bootstrap = (
            spark,
            fmt,
            registry_url,
            bootstrap,
        )
        self.args = args
        self.df = self._cached(spark.range(0, args.rows, 1, 2).selectExpr(KEY_SQL, VALUE_SQL))
        self.few = self._cached(
            spark.range(0, args.confluent_rows, 1, 2).selectExpr(KEY_SQL, VALUE_SQL)
        )
        sql_type = sql_type_from_json(self.df.schema["value"].dataType.jsonValue())
        client = SchemaRegistryClient.from_options({"schema.registry.url": registry_url})
        # The JVM route's payload: Spark's own encoders behind a header with a registered id.
        if fmt == "jsonschema":
            from kafka_sink.formats.json_schema import derive_json_schema

            self.schema_text = derive_json_schema(sql_type).text
            kind = "JSON"
            payload = sf.to_json(sf.col("value")).cast("binary")
        else:
            from pyspark.sql.avro.functions import to_avro

            from kafka_sink.formats.avro_schema import derive_avro_schema

            self.schema_text = json.dumps(derive_avro_schema(sql_type).json)
            kind = "AVRO"
            payload = to_avro(sf.col("value"))
        schema_id = client.register(f"bench-jvm-{fmt}-{uuid.uuid4().hex[:8]}-value", Schema(
            self.schema_text, kind))  # fmt: skip
        self.jvm_df = self.df.select(
            "key", sf.concat(sf.lit(header(schema_id)), payload).alias("value")
        )
        self.framed = self._cached(self.jvm_df)
        self.nbytes = self._bytes(self.framed)
        if fmt == "protobuf":
            self.schema_text = proto_file().hex()  # the confluent route's message, as text
        self.client = client
        self.confluent_schema = (
            Schema(proto_text(), "PROTOBUF")
            if fmt == "protobuf"
            else Schema(self.schema_text, kind)
        )

    @staticmethod
    def _cached(df: Any) -> Any:
        df = df.cache()
        df.count()
        return df

    @staticmethod
    def _bytes(df: Any) -> int:
        row = df.selectExpr("sum(length(key) + length(value)) AS b").first()
        return int(row["b"])

    def options(self, topic: str) -> dict[str, str]:
        return kafka_options(self.bootstrap, topic, CODEC, self.args.extra)

    def pykafka_options(self, topic: str) -> dict[str, str]:
        return {
            **self.options(topic),
            "valueFormat": self.fmt,
            "schema.registry.url": self.registry_url,
        }

    def probe(self) -> str | None:
        """Why the sink refuses this format (a tiny write), or None when it takes it.

        For Avro the 10 records written must carry, after the header, the bytes Spark's
        ``to_avro`` gives the same rows: the cells compare like with like."""
        from kafka_sink.testing.oracle import create_topic, read_all

        topic = f"bench-probe-{self.fmt}-{uuid.uuid4().hex[:8]}"
        create_topic(self.bootstrap, topic, 1)
        few = f"CAST(key AS STRING) < '{10:0{KEY_SIZE}d}'"  # the rows of ids 0 to 9
        try:
            self.df.where(few).write.format("pykafka").mode("append").options(
                **self.pykafka_options(topic)
            ).save()
            if self.fmt == "avro":
                written = {r.key: r.value[5:] for r in read_all(self.bootstrap, topic, expected=10)}
                spark = {bytes(r.key): bytes(r.value)[5:] for r in self.jvm_df.where(few).collect()}
                if written != spark:
                    raise SystemExit("pykafka's Avro payloads differ from to_avro's")
        except Exception as exc:
            return first_line(exc)
        finally:
            delete_topics(self.bootstrap, [topic])
        return None

    def cells(self, writers: list[str]) -> list[Cell]:
        rows, few = self.args.rows, self.args.confluent_rows
        ratio = self.nbytes / rows  # framed bytes per row; the confluent route's are alike
        refused = self.probe() if "pykafka" in writers else None
        no_jvm = "to_protobuf needs the spark-protobuf jar" if self.fmt == "protobuf" else None

        def save(
            df: Any, fmt: str, options: Callable[[str], dict[str, str]], extra: dict[str, str]
        ) -> Callable[[str], None]:
            def run(topic: str) -> None:
                df.write.format(fmt).mode("append").options(**options(topic), **extra).save()

            return run

        def confluent(topic: str) -> None:
            conf = {
                k.removeprefix("kafka."): v for k, v in self.options(topic).items() if "kafka." in k
            }
            # Registered once here: the partitions' serializers then find the version. Two of
            # them creating a new subject at once can get Apicurio's 409 "already exists".
            self.client.register(f"{topic}-value", self.confluent_schema)
            serializer = row_serializer(self.fmt, topic, self.registry_url, self.schema_text)
            self.few.foreachPartition(confluent_partition(conf, topic, serializer))

        made = {
            "ceiling": Cell(
                "ceiling", rows, self.nbytes, save(self.df, "bench_discard", lambda _: {}, {})
            ),
            "pykafka": Cell(
                "pykafka",
                rows,
                self.nbytes,
                save(self.df, "pykafka", self.pykafka_options, {}),
                refused,
            ),
            "pykafka-bytes": Cell(
                "pykafka-bytes", rows, self.nbytes, save(self.framed, "pykafka", self.options, {})
            ),
            "jvm-default": Cell(
                "jvm-default",
                rows,
                self.nbytes,
                save(self.jvm_df, "kafka", self.options, {}),
                no_jvm,
            ),
            "jvm-tuned": Cell(
                "jvm-tuned",
                rows,
                self.nbytes,
                save(self.jvm_df, "kafka", self.options, TUNED),
                no_jvm,
            ),
            "confluent-fp": Cell("confluent-fp", few, int(ratio * few), confluent),
        }
        return [made[w] for w in writers]

    def close(self) -> None:
        for df in (self.df, self.few, self.framed):
            df.unpersist(blocking=True)


def run_format(meter: ClientMeter, run: FormatRun, writers: list[str], args: Any) -> list[Result]:
    from kafka_sink.testing.oracle import create_topic, end_offsets

    cells = run.cells(writers)
    results = {c.writer: Result(run.fmt, CODEC, c.writer, c.rows, c.nbytes) for c in cells}
    live = [c for c in cells if c.skipped is None]
    for c in cells:
        if c.skipped is not None:
            print(f"    {c.writer:<14} skipped: {c.skipped}", flush=True)
            results[c.writer].failed = f"skipped: {c.skipped}"
    rounds = range(-1, args.runs)  # one untimed warm-up
    # Topics up front, given a few seconds (see bench_spark.run_cell for why).
    topics = {(c.writer, r): f"bench-{run.fmt}-{c.writer}-{uuid.uuid4().hex[:8]}" for c in live
              for r in rounds if c.writer != "ceiling"}  # fmt: skip
    for name in topics.values():
        create_topic(run.bootstrap, name, PARTITIONS)
    time.sleep(3.0)
    for r in rounds:
        for c in live:
            if results[c.writer].failed:
                continue
            topic = topics.get((c.writer, r), "")
            tag = "warm-up" if r < 0 else f"run {r + 1}  "
            assert c.write is not None
            try:
                with meter.measure() as m:
                    c.write(topic)
            except Exception as exc:  # report it and go on: one bad cell must not hide the rest
                print(f"    {tag} {c.writer:<14} FAILED: {first_line(exc)}", flush=True)
                results[c.writer].failed = first_line(exc)
                continue
            written = sum(end_offsets(run.bootstrap, topic).values()) if topic else c.rows
            if written < c.rows:
                raise SystemExit(f"{run.fmt} {c.writer}: only {written} of {c.rows} rows landed")
            print(
                f"    {tag} {c.writer:<14} {m['wall_s']:6.2f} s {c.rows / m['wall_s']:>10,.0f} "
                f"rows/s cpu {m['cpu_s']:6.2f} s  rss {m['peak_rss_mb']:5.0f} MB",
                flush=True,
            )
            if r >= 0:
                results[c.writer].runs.append(m)
    if topics:
        delete_topics(run.bootstrap, list(topics.values()))
    return [results[c.writer] for c in cells]


# -- reporting ------------------------------------------------------------------------------


def _ratio(mine: Result | None, other: Result | None, goal: float) -> str:
    if mine is None or other is None or not mine.runs or not other.runs:
        return "-"
    x = mine.rows_per_s() / other.rows_per_s()
    cpu = mine.cpu_per_m() / other.cpu_per_m() if other.cpu_per_m() else 0.0
    verdict = "met" if x >= goal else "**missed**"
    return f"{x:.2f}x, {verdict} (CPU per row {cpu:.2f}x the route's)"


def goals_table(results: list[Result]) -> str:
    """Per format, pykafka's rows/s over each route's, beside the goal."""
    lines = [
        f"| format | pykafka rows/s | vs best JVM (goal {GOAL_VS_JVM:g}x) | vs confluent-kafka "
        f"(goal {GOAL_VS_CONFLUENT:g}x) | vs pykafka-bytes (goal {GOAL_VS_BYTES:g}x) |",
        "| --- | ---: | --- | --- | --- |",
    ]
    for fmt in dict.fromkeys(r.workload for r in results):
        by = {r.writer: r for r in results if r.workload == fmt}
        mine = by.get("pykafka")
        jvm = [by[w] for w in ("jvm-default", "jvm-tuned") if w in by and by[w].runs]
        best_jvm = max(jvm, key=Result.rows_per_s) if jvm else None
        rate = _fmt_rate(mine.rows_per_s()) if mine and mine.runs else (mine and mine.failed)
        lines.append(
            f"| {fmt} | {rate or '-'} | {_ratio(mine, best_jvm, GOAL_VS_JVM)} | "
            f"{_ratio(mine, by.get('confluent-fp'), GOAL_VS_CONFLUENT)} | "
            f"{_ratio(mine, by.get('pykafka-bytes'), GOAL_VS_BYTES)} |"
        )
    return "\n".join(lines)


def table(results: list[Result]) -> str:
    lines = [
        "| format | writer | rows | rows/s | MB/s | client CPU s / 1M rows | peak RSS of a Python "
        "worker (MB) | pykafka rows/s / this |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        mine = next(m for m in results if m.workload == r.workload and m.writer == "pykafka")
        name = f"**{r.writer}**" if r.writer == "pykafka" else r.writer
        if not r.runs:
            lines.append(f"| {r.workload} | {name} | {r.rows:,} | {r.failed or 'failed'} | | | | |")
            continue
        vs = f"{mine.rows_per_s() / r.rows_per_s():.2f}x" if mine.runs else "-"
        rss = f"{r.peak_rss_mb():.0f}" if r.peak_rss_mb() else "-"
        lines.append(
            f"| {r.workload} | {name} | {r.rows:,} | {_fmt_rate(r.rows_per_s())} | "
            f"{r.mb_per_s():.0f} | {r.cpu_per_m():.2f} | {rss} | {vs} |"
        )
    return "\n".join(lines)


@contextlib.contextmanager
def registry() -> Iterator[str]:
    from kafka_sink.testing import LocalSchemaRegistry

    with LocalSchemaRegistry() as local:
        yield local.url


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated subset")
    parser.add_argument("--writers", default=",".join(WRITERS), help="comma-separated subset")
    parser.add_argument("--rows", type=int, default=500_000, help="rows per run")
    parser.add_argument(
        "--confluent-rows",
        type=int,
        default=None,
        help="rows per run of the confluent-kafka route (default: --rows / 10)",
    )
    parser.add_argument("--runs", type=int, default=2, help="timed runs per cell (best counts)")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument(
        "--jars-dir",
        default=os.environ.get(
            "SPARK_KAFKA_JARS_DIR", os.path.join(ROOT, ".cache/spark-kafka/lib")
        ),
    )
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="extra kafka.* option"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="directory for bench_spark_formats.{md,json,png} (default: benchmarks/results for "
        "the full default run, nowhere otherwise)",
    )
    args = parser.parse_args()
    args.confluent_rows = args.confluent_rows or max(args.rows // 10, 1000)
    args.extra = dict(item.split("=", 1) for item in args.option)
    return args


def main() -> int:
    args = parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    writers = [w.strip() for w in args.writers.split(",") if w.strip()]
    unknown = [f for f in formats if f not in FORMATS] + [w for w in writers if w not in WRITERS]
    if unknown:
        raise SystemExit(
            f"unknown format or writer: {unknown}; formats {FORMATS}, writers {WRITERS}"
        )
    if "pykafka" not in writers:
        raise SystemExit("--writers must include pykafka: every ratio is pykafka's")
    default_run = tuple(formats) == FORMATS and tuple(writers) == WRITERS and sys.argv[1:] == []
    out = args.out or (os.path.join(ROOT, "benchmarks", "results") if default_run else None)

    results: list[Result] = []
    os.environ["TZ"] = "UTC"  # the Python workers' datetimes, as the session's
    # The ceiling's data source lives in bench_spark, which Spark's workers cannot import.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(bench_spark)
    with kafka(args.bootstrap) as bootstrap, registry() as registry_url:
        spark = spark_session(args.jars_dir, True, conf={"spark.sql.session.timeZone": "UTC"})
        meter = ClientMeter(jvm_pid())
        header = (
            f"bench_spark_formats: local[2], pyspark {spark.version}, Python "
            f"{platform.python_version()}, {PARTITIONS} partitions, acks=all, {CODEC}, "
            f"linger.ms=5, {KEY_SIZE}-byte keys, {args.rows:,} rows per run "
            f"({args.confluent_rows:,} for confluent-fp); best of {args.runs} after 1 warm-up; "
            f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start"
        )
        print(header + f"; Kafka at {bootstrap}, registry at {registry_url}", flush=True)
        for fmt in formats:
            run = FormatRun(spark, fmt, registry_url, bootstrap, args)
            print(f"{fmt}: {run.nbytes / args.rows:.0f} B per row (key + framed value)", flush=True)
            results += run_format(meter, run, writers, args)
            run.close()
        load = os.getloadavg()[0]
        title = (  # the header is too long for the plot
            f"format('pykafka') with valueFormat against the routes users write today: "
            f"{args.rows:,} rows of ~300 B structs, acks=all, {CODEC}, load average {load:.1f}"
        )
        spark.stop()

    md = (
        table(results)
        + "\n\nGoals (rows/s ratios, pykafka over the route):\n\n"
        + goals_table(results)
    )
    print()
    print(md)
    if out:
        os.makedirs(out, exist_ok=True)
        note = (
            f"{header}; load average {load:.1f} at the end. Client CPU is the Spark JVM plus "
            "its Python workers, from the OS (median over the runs); the broker and the "
            "registry are apart. pykafka-bytes writes the same framed bytes precomputed and "
            "cached (see docs/benchmarks.md)."
        )
        save(
            os.path.join(out, "bench_spark_formats"),
            note + "\n\n" + md + "\n",
            {"header": note, "results": [asdict(r) for r in results]},
            lambda path: plot(results, writers, path, title),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
