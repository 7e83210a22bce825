"""A new session's first write and a new query's first record, each in a fresh Spark process.

What a notebook user's first ``df.write``, every scheduled batch job (each one a new session) and
every streaming query's start pay before the first row is in Kafka. Every case runs in a new
Python process with a new SparkSession (local[2]) against one broker (a LocalKafka started for
the run, "bench" JVM profile, or ``--bootstrap``); the cases take turns in an order that is
reversed every other round, ``--rounds`` rounds (default 3, env ``BENCH_FIRST_ROW_ROUNDS``).

Batch cases, each timing its process' first ``df.write ... save()`` of 10 rows (16-byte keys,
100-byte values, 2 tasks; acks=all, lz4, linger.ms=5 for the Kafka sinks) and then a second
identical write in the same session:

- ``jvm``: Spark's built-in Kafka sink (``format("kafka")``, the spark-sql-kafka-0-10 jars from
  ``$SPARK_KAFKA_JARS_DIR`` / ``--jars-dir``);
- ``discard``: a registered Python data source that counts its rows and keeps nothing
  (``python_discard.py``): Spark's own cost of a Python sink's first write, the floor;
- ``pykafka``: this project's sink.

Streaming cases (``stream-jvm``, ``stream-discard``, ``stream-pykafka``): a file stream over one
10-row Parquet file (written before the process starts), the default trigger, into a new topic;
timed from the call to ``start()`` to the moment a consumer (kafka-python, assigned and polling
before ``start()``) reads the first record. ``stream-discard`` is the discarding source's stream
writer, timed to the moment its ``write()`` received the first rows: Spark's own cost of a Python
sink's first micro-batch, the floor (no Kafka, no consumer). ``start()``'s own return is
reported too.

The session's creation (``getOrCreate``) is reported apart and counted in no case. The load
average (1 minute) is read before every case and reported with it.

Writes ``--out``/bench_first_row.md (the table: median and range per case, same-run ratios),
.json (every run) and .png (the plot, matplotlib).

    python benchmarks/bench_first_row.py [--rounds 3] [--cases jvm,discard,pykafka,...]

``--trace DIR`` runs every case with ``-X importtime`` in every Python process Spark starts
(their stderr is kept per case under DIR) and with ``first_row_trace/sitecustomize.py`` on the
workers' path, which logs, per process, when it started and when the sink's steps began and
ended (DIR/<case>-r<round>.trace): where the first write's time goes, process by process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_spark import ROOT, kafka, save  # noqa: E402

BATCH_CASES = ("jvm", "discard", "pykafka")
STREAM_CASES = ("stream-jvm", "stream-discard", "stream-pykafka")
BASE = "@base"
ROWS = 10
PARTITIONS = 2
KAFKA_OPTIONS = {"kafka.acks": "all", "kafka.compression.type": "lz4", "kafka.linger.ms": "5"}


# -- the child: one case in a fresh process -----------------------------------------------------


def _session(case: str, jars_dir: str) -> Any:
    from bench_spark import spark_session

    return spark_session(jars_dir, case in ("jvm", "stream-jvm"))


def _kind(case: str) -> str:
    """The case without its ``@base`` mark (the same case run from ``--baseline-tree``)."""
    return case.removesuffix(BASE)


def _frame(spark: Any) -> Any:
    return spark.range(0, ROWS, 1, PARTITIONS).selectExpr(
        "CAST(lpad(CAST(id AS STRING), 16, '0') AS BINARY) AS key",
        "CAST(substring(sha2(CAST(id AS STRING), 512), 1, 100) AS BINARY) AS value",
    )


def _batch_write(spark: Any, case: str, bootstrap: str, topic: str) -> None:
    case = _kind(case)
    df = _frame(spark)
    if case == "discard":
        df.write.format("bench_first_row_discard").mode("append").save()
        return
    fmt = "kafka" if case == "jvm" else "pykafka"
    options = {"kafka.bootstrap.servers": bootstrap, "topic": topic, **KAFKA_OPTIONS}
    df.write.format(fmt).mode("append").options(**options).save()


class _FirstRecord:
    """A consumer thread, polling before the query starts, noting when it reads a record."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka_sink.testing.oracle import import_kafka_python

        kafka = import_kafka_python()
        self.consumer = kafka.KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=20,
        )
        parts = None
        deadline = time.monotonic() + 30
        while not parts and time.monotonic() < deadline:
            parts = self.consumer.partitions_for_topic(topic)
            if not parts:
                time.sleep(0.05)
        tps = [kafka.TopicPartition(topic, p) for p in sorted(parts or ())]
        self.consumer.assign(tps)
        self.consumer.seek_to_beginning(*tps)
        self.consumer.poll(timeout_ms=100)  # connected and fetching before the clock starts
        self.at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if any(self.consumer.poll(timeout_ms=20).values()):
                self.at = time.monotonic()
                return

    def wait(self, timeout_s: float) -> float | None:
        self._thread.join(timeout_s)
        self._stop.set()
        return self.at

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.consumer.close()


def _mark(what: str) -> None:
    """A line in the trace (``--trace``): where the driver's clock for a case starts and ends."""
    path = os.environ.get("FIRST_ROW_TRACE")
    if path:
        with open(path, "a") as f:
            f.write(f"{time.time():.4f} {os.getpid()} mark {what}\n")


def child(args: argparse.Namespace) -> int:
    case = _kind(args.child)
    load = os.getloadavg()[0]
    started = time.monotonic()
    spark = _session(case, args.jars_dir)
    spark.dataSource.register(_discard_source())
    import kafka_sink

    result: dict[str, Any] = {
        "case": args.child,
        "kafka_sink": os.path.dirname(os.path.dirname(os.path.abspath(kafka_sink.__file__))),
        "load_1m": load,
        "session_s": time.monotonic() - started,
    }
    if case in BATCH_CASES:
        _mark("first-write-begin")
        t0 = time.monotonic()
        _batch_write(spark, case, args.bootstrap, args.topic)
        t1 = time.monotonic()
        _mark("first-write-end")
        _batch_write(spark, case, args.bootstrap, args.topic)
        t2 = time.monotonic()
        _mark("second-write-end")
        result.update(first_s=t1 - t0, second_s=t2 - t1)
    else:
        mark_file = os.path.join(args.tmp, f"first-rows-{uuid.uuid4().hex}")
        probe = None if case == "stream-discard" else _FirstRecord(args.bootstrap, args.topic)
        try:
            from pyspark.sql.types import BinaryType, StructField, StructType

            schema = StructType(
                [StructField("key", BinaryType()), StructField("value", BinaryType())]
            )
            writer = (
                spark.readStream.schema(schema)
                .parquet(args.stream_input)
                .writeStream.option(
                    "checkpointLocation", os.path.join(args.tmp, f"ckpt-{uuid.uuid4().hex}")
                )
            )
            if probe is None:
                writer = writer.format("bench_first_row_discard").option("markFile", mark_file)
            else:
                writer = (
                    writer.format("kafka" if case == "stream-jvm" else "pykafka")
                    .options(**{"kafka.bootstrap.servers": args.bootstrap, "topic": args.topic})
                    .options(**KAFKA_OPTIONS)
                )
            _mark("start-begin")
            wall0, t0 = time.time(), time.monotonic()
            query = writer.start()
            t1 = time.monotonic()
            if probe is not None:
                at = probe.wait(120)
                first = None if at is None else at - t0
            else:
                # The discarding writer notes the wall time its first rows arrived.
                deadline = time.monotonic() + 120
                while not os.path.exists(mark_file) and time.monotonic() < deadline:
                    time.sleep(0.01)
                first = None
                if os.path.exists(mark_file):
                    with open(mark_file) as f:
                        first = float(f.read()) - wall0
            _mark("first-record-read")
            if first is None:
                raise RuntimeError(f"{case}: no first record within 120 s: {query.exception()}")
            result.update(start_call_s=t1 - t0, first_record_s=first)
            query.stop()
        finally:
            if probe is not None:
                probe.close()
    spark.stop()
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def _discard_source() -> Any:
    from python_discard import DiscardDataSource

    return DiscardDataSource


# -- the parent: rounds of fresh processes ------------------------------------------------------


def _stream_input(directory: str) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(directory, "stream-input")
    os.makedirs(path, exist_ok=True)
    keys = [str(i).zfill(16).encode() for i in range(ROWS)]
    values = [(b"%03d" % i) * 34 for i in range(ROWS)]
    table = pa.table(
        {"key": pa.array(keys, pa.binary()), "value": pa.array([v[:100] for v in values])}
    )
    pq.write_table(table, os.path.join(path, "part-0.parquet"))
    return path


def _run_case(
    case: str,
    bootstrap: str,
    topic: str,
    args: argparse.Namespace,
    *,
    tmp: str,
    stream_input: str,
    trace_to: str | None,
) -> dict[str, Any]:
    env = dict(os.environ)
    # The workers import python_discard (and, traced, sitecustomize) by reference.
    extra = [HERE]
    cwd = ROOT
    if case.endswith(BASE):
        # The earlier build first on every process' path, and the workers' working directory
        # (where they find pyspark_pykafka first).
        extra.insert(0, args.baseline_tree)
        cwd = args.baseline_tree
    if trace_to is not None:
        extra.insert(0, os.path.join(HERE, "first_row_trace"))
        env["PYTHONPROFILEIMPORTTIME"] = "1"
        env["FIRST_ROW_TRACE"] = trace_to + ".trace"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*extra, env.get("PYTHONPATH", "")) if p)
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        case,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--jars-dir",
        args.jars_dir,
        "--tmp",
        tmp,
        "--stream-input",
        stream_input,
    ]
    done = subprocess.run(
        command, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    if trace_to is not None:
        with open(trace_to + ".stderr", "w") as f:
            f.write(done.stderr)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        sys.stderr.write(done.stderr[-4000:])
        raise RuntimeError(f"{case}: the process failed (exit {done.returncode})")
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return result


def _fmt_range(values: list[float]) -> str:
    if not values:
        return ""
    med = statistics.median(values)
    return f"{med:.2f} s ({min(values):.2f}-{max(values):.2f})"


def _table(runs: list[dict[str, Any]], header: str) -> str:
    by: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by.setdefault(run["case"], []).append(run)

    def values(case: str, key: str) -> list[float]:
        return [r[key] for r in by.get(case, []) if key in r]

    def med(case: str, key: str) -> float | None:
        found = values(case, key)
        return statistics.median(found) if found else None

    base = bool(by.get("pykafka" + BASE) or by.get("stream-pykafka" + BASE))
    batch = ["jvm", "discard", *(["pykafka" + BASE] if base else []), "pykafka"]
    stream = [
        "stream-jvm",
        "stream-discard",
        *(["stream-pykafka" + BASE] if base else []),
        "stream-pykafka",
    ]
    names = {
        "jvm": "Spark's JVM sink",
        "discard": "a Python data source that discards its rows",
        "pykafka" + BASE: "pykafka, before (--baseline-tree)",
        "pykafka": "pykafka",
    }

    def row(label: str, cases: list[str | None], key: str) -> str:
        cells = [_fmt_range(values(c, key)) if c else "" for c in cases]
        return f"| {label} | " + " | ".join(cells) + " |"

    lines = [
        header,
        "",
        "Median (min-max) over the rounds; every run a fresh Python and Spark process.",
        "",
        "| | " + " | ".join(names[c] for c in batch) + " |",
        "| --- |" + " ---: |" * len(batch),
        row("first `df.write` of 10 rows in a new session", list(batch), "first_s"),
        row("second write in the same session", list(batch), "second_s"),
        row("streaming: `start()` to the first record a consumer reads", stream, "first_record_s"),
        row("streaming: `start()` returns", stream, "start_call_s"),
        row("the session's creation (counted in no case)", list(batch), "session_s"),
        "",
    ]
    jvm, discard = med("jvm", "first_s"), med("discard", "first_s")
    sj = med("stream-jvm", "first_record_s")
    sd = med("stream-discard", "first_record_s")
    for suffix, label in (("", "pykafka"), (BASE, "pykafka before")):
        ours = med("pykafka" + suffix, "first_s")
        if ours is not None and discard is not None:
            lines.append(
                f"- first write, {label} - discarding source: {ours - discard:+.2f} s "
                f"({ours / discard:.2f}x; goal: <= +1 s)"
            )
        if ours is not None and jvm is not None:
            lines.append(f"- first write, {label} / JVM sink: {ours / jvm:.2f}x")
        sp = med("stream-pykafka" + suffix, "first_record_s")
        if sp is not None:
            vs = f"; {label} - JVM sink: {sp - sj:+.2f} s" if sj is not None else ""
            if sd is not None:
                vs += f"; {label} - discarding source: {sp - sd:+.2f} s"
            lines.append(
                f"- streaming first record, {label}: {sp:.2f} s after start(){vs} "
                "(goal: <= 2.5 s, or within 0.8 s of the JVM sink)"
            )
    if discard is not None and jvm is not None:
        lines.append(f"- first write, discarding source / JVM sink: {discard / jvm:.2f}x")
    loads = [r["load_1m"] for r in runs]
    lines.append(f"- load average (1 min) before the cases: {min(loads):.2f}-{max(loads):.2f}")
    return "\n".join(lines) + "\n"


def _plot(runs: list[dict[str, Any]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batch = ["jvm", "discard", "pykafka" + BASE, "pykafka"]
    stream = ["stream-jvm", "stream-discard", "stream-pykafka" + BASE, "stream-pykafka"]
    groups = [
        ("first write", [(c, "first_s") for c in batch]),
        ("second write", [(c, "second_s") for c in batch]),
        ("stream: first record", [(c, "first_record_s") for c in stream]),
    ]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    colors = {
        "jvm": "tab:blue",
        "discard": "tab:gray",
        "pykafka" + BASE: "navajowhite",
        "pykafka": "tab:orange",
    }
    x = 0.0
    ticks, labels = [], []
    for label, cells in groups:
        start = x
        for case, key in cells:
            found = [r[key] for r in runs if r["case"] == case and key in r]
            if not found:
                continue
            name = case.removeprefix("stream-")
            ax.bar(
                x,
                statistics.median(found),
                0.8,
                color=colors[name],
                label=name if label == "first write" else None,
            )
            ax.plot([x] * len(found), found, "k.", markersize=4)
            x += 1
        ticks.append((start + x - 1) / 2)
        labels.append(label)
        x += 0.8
    ax.set_xticks(ticks, labels)
    ax.set_ylabel("seconds (median; dots: each round)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title.replace("; ", ";\n", 1), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=int(os.environ.get("BENCH_FIRST_ROW_ROUNDS", "3"))
    )
    parser.add_argument("--cases", default=",".join(BATCH_CASES + STREAM_CASES))
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    parser.add_argument("--stem", default="bench_first_row")
    parser.add_argument("--trace", default=None, metavar="DIR")
    parser.add_argument(
        "--baseline-tree",
        default=None,
        metavar="DIR",
        help="a directory holding an earlier build's kafka_sink and pyspark_pykafka (e.g. from "
        "git archive): the pykafka cases run from it too, as pykafka@base and "
        "stream-pykafka@base, in the same rounds",
    )
    parser.add_argument(
        "--jars-dir",
        default=os.environ.get(
            "SPARK_KAFKA_JARS_DIR", os.path.join(ROOT, ".cache/spark-kafka/lib")
        ),
    )
    # The child's own arguments.
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--topic", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--tmp", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--stream-input", default=None, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.child:
        return child(args)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if args.baseline_tree:
        args.baseline_tree = os.path.abspath(args.baseline_tree)
        cases += [c + BASE for c in cases if c in ("pykafka", "stream-pykafka")]
    unknown = {_kind(c) for c in cases} - set(BATCH_CASES + STREAM_CASES)
    if unknown:
        raise SystemExit(f"unknown cases {sorted(unknown)}: pick from {BATCH_CASES + STREAM_CASES}")
    from kafka_sink.testing.oracle import create_topic

    if args.trace:
        os.makedirs(args.trace, exist_ok=True)
    runs: list[dict[str, Any]] = []
    with kafka(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory() as tmp:
        stream_input = _stream_input(tmp)
        import pyspark

        header = (
            f"bench_first_row: {ROWS} rows in {PARTITIONS} tasks, local[2], one broker, "
            f"pyspark {pyspark.__version__}; {args.rounds} round(s), each case a fresh process, "
            f"order reversed every other round; {os.cpu_count()} cores"
        )
        print(header, flush=True)
        for rnd in range(args.rounds):
            order = cases if rnd % 2 == 0 else cases[::-1]
            for case in order:
                topic = f"first-row-{_kind(case)}-{uuid.uuid4().hex[:8]}"
                if "discard" not in case:
                    create_topic(bootstrap, topic, 6)
                trace_to = os.path.join(args.trace, f"{case}-r{rnd + 1}") if args.trace else None
                run = _run_case(
                    case,
                    bootstrap,
                    topic,
                    args,
                    tmp=tmp,
                    stream_input=stream_input,
                    trace_to=trace_to,
                )
                run["round"] = rnd + 1
                runs.append(run)
                shown = ", ".join(
                    f"{k} {run[k]:.2f} s"
                    for k in ("first_s", "second_s", "start_call_s", "first_record_s", "session_s")
                    if k in run
                )
                print(
                    f"  round {rnd + 1} {case:<20} {shown}; load {run['load_1m']:.2f}", flush=True
                )
    md = _table(runs, header)
    print()
    print(md)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, args.stem)
    save(stem, md, {"header": header, "runs": runs}, lambda p: _plot(runs, p, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
