"""``make demo``: exactly-once through a crash. A local Kafka, a streaming query whose driver is
killed mid-batch and restarted from its checkpoint, and what two kinds of reader see.

1. Write the input: ``--files`` JSON files of ``--rows-per-file`` rows, each row's value a unique
   number; start a single-node Kafka (``LocalKafka``, from the jars ``make setup`` fetched) and
   create a topic with 3 partitions.
2. Run ``jobs/stream_write.py`` (file source, one file per micro-batch, back to back) with
   ``deliveryGuarantee=exactly-once``, as a child process in its own process group.
3. Once ``--kill-after`` micro-batches are committed (their files in the commit log), watch the
   topic: when a partition's log end offset passes its last stable offset, a batch's
   transactions hold records that are not committed. SIGKILL the driver's whole process group
   there, as a crash would (no shutdown hook runs). Should that batch's commit reach Kafka
   between the look and the kill (nothing left pending a second later), the run is restarted and
   killed again, a bounded number of times.
4. Restart the same command from the checkpoint with ``--available-now``: the sink aborts the dead
   driver's open transactions, Spark re-runs the interrupted batch, and the query drains the rest
   of the input and stops.
5. Read the topic back with an independent client (kafka-python), read_committed and
   read_uncommitted, and print per reader the rows, distinct values, duplicates and missing rows.

Invariant: the demo exits non-zero unless the read_committed reader saw every input row exactly
once; the read_uncommitted reader also sees the killed attempt's aborted rows, as duplicates.
``--delivery-guarantee at-least-once`` runs the same crash without transactions: the kill lands
while a batch's records are acknowledged but not recorded in the commit log, its re-run writes
them again, and the demo fails on the duplicates read_committed then sees.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT
from _tally import exactly_once_problem, table, tally

TOPIC = "pykafka-demo"
PARTITIONS = 3
KEYS = 16
# Bounds of the waits on the child driver: its Spark start-up, the watch for an open
# transaction, the last run's drain. Generous for a busy 2-core machine; none is a timing
# assertion, each only stops a demo that would otherwise hang.
START_TIMEOUT_S = 300.0
WATCH_TIMEOUT_S = 180.0
DRAIN_TIMEOUT_S = 600.0
# How often the kill is retried when a batch's commit slipped in before it.
KILL_ATTEMPTS = 3
_BATCH_FILE = re.compile(r"^\d+\.json$")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=8, help="input files, one per micro-batch")
    parser.add_argument("--rows-per-file", type=int, default=1000)
    parser.add_argument(
        "--kill-after",
        type=int,
        default=2,
        help="committed micro-batches before the driver is killed",
    )
    parser.add_argument(
        "--delivery-guarantee",
        choices=("exactly-once", "at-least-once"),
        default="exactly-once",
        help="the sink's deliveryGuarantee (at-least-once shows the duplicates a crash leaves)",
    )
    parser.add_argument(
        "--workdir", default=None, help="input, checkpoint and logs (default out/demo/<time>)"
    )
    args = parser.parse_args(argv)
    if not 0 < args.kill_after < args.files - 1:
        parser.error("--kill-after must leave at least two files for after the kill")
    return args


def write_input(directory: Path, files: int, rows_per_file: int) -> set[bytes]:
    """JSON files of ``{"key", "value"}`` rows, each value unique; the values, as Kafka will hold
    them. Each file appears whole (written aside, then renamed), as a file source needs."""
    directory.mkdir(parents=True)
    values: set[bytes] = set()
    for n in range(files):
        lines = []
        for i in range(n * rows_per_file, (n + 1) * rows_per_file):
            lines.append(json.dumps({"key": f"key-{i % KEYS}", "value": str(i)}) + "\n")
            values.add(str(i).encode())
        part = directory / f".part-{n:03d}.tmp"
        part.write_text("".join(lines), encoding="utf-8")
        part.rename(directory / f"part-{n:03d}.json")
    return values


class Driver:
    """One run of ``jobs/stream_write.py`` in its own process group, its output in ``log``."""

    def __init__(self, command: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self._out = open(log, "w", encoding="utf-8")  # noqa: SIM115 (closed in kill and wait)
        self.process = subprocess.Popen(
            command,
            cwd=str(ROOT),
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the driver with the JVM and Python workers it started (its process group)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(60)
        self._out.close()

    def wait(self, timeout_s: float) -> int:
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise SystemExit(
                f"demo: the query did not finish within {timeout_s:.0f} s:\n{self.tail()}"
            ) from None
        finally:
            self._out.close()

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        kept = [line for line in text if not line.lstrip().startswith("at ")]
        return "\n".join(kept[-lines:]) + f"\n(whole output: {self.log})"


def committed_batches(commit_dir: Path) -> list[dict[str, Any]]:
    """The commit log's documents of committed micro-batches (``<batchId>.json``), by batch."""
    if not commit_dir.is_dir():
        return []
    names = sorted((p for p in commit_dir.iterdir() if _BATCH_FILE.match(p.name)), key=_batch_id)
    docs = []
    for path in names:
        with contextlib.suppress(OSError, ValueError):  # being written: read it next time
            docs.append(json.loads(path.read_text(encoding="utf-8")))
    return docs


def _batch_id(path: Path) -> int:
    return int(path.name.split(".")[0])


class PendingRecordsWatch:
    """Records of ``topic`` in the log that the query has not committed yet.

    Exactly-once: a partition's log end offset (what read_uncommitted readers reach) minus its
    last stable offset (what read_committed readers reach) is non-zero exactly while a
    transaction holding records of that partition is open: written, perhaps prepared, not
    committed. At-least-once (no transactions, no markers): the log's records beyond those the
    commit log names, acknowledged by Kafka but not yet recorded by the driver.
    """

    def __init__(self, bootstrap: str, topic: str, guarantee: str) -> None:
        self._transactional = guarantee == "exactly-once"
        from kafka_sink.testing.oracle import import_kafka_python

        kafka = import_kafka_python()
        self._readers = [
            kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, isolation_level=level)
            for level in ("read_uncommitted", "read_committed")
        ]
        self._partitions = [kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]

    def pending(self, commit_dir: Path) -> int:
        log_end, stable = (r.end_offsets(self._partitions) for r in self._readers)
        if self._transactional:
            return sum(int(log_end[tp]) - int(stable[tp]) for tp in self._partitions)
        recorded = sum(int(d["record_count"]) for d in committed_batches(commit_dir))
        return sum(int(log_end[tp]) for tp in self._partitions) - recorded

    def close(self) -> None:
        for reader in self._readers:
            reader.close()


def kill_mid_batch(
    start: Any, commit_dir: Path, watch: PendingRecordsWatch, kill_after: int
) -> tuple[int, int]:
    """Start runs (``start(attempt)`` returns a Driver) and SIGKILL one while a micro-batch's
    records are in the log, not committed; returns (committed batches at the kill, records
    left pending)."""
    for attempt in range(1, KILL_ATTEMPTS + 1):
        driver = start(attempt)
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(committed_batches(commit_dir)) < kill_after:
            if not driver.running() or time.monotonic() > deadline:
                driver.kill()
                raise SystemExit(
                    f"demo: the query committed fewer than {kill_after} micro-batches "
                    f"within {START_TIMEOUT_S:.0f} s:\n{driver.tail()}"
                )
            time.sleep(0.2)
        deadline = time.monotonic() + WATCH_TIMEOUT_S
        while watch.pending(commit_dir) == 0:
            if not driver.running() or time.monotonic() > deadline:
                driver.kill()
                raise SystemExit(
                    "demo: no micro-batch had records pending to kill the driver in:\n"
                    + driver.tail()
                )
        driver.kill()
        done = len(committed_batches(commit_dir))
        # The coordinator may still be writing the markers of a commit sent just before the kill.
        time.sleep(1.0)
        left_pending = watch.pending(commit_dir)
        if left_pending > 0:
            return done, left_pending
        print(
            f"demo: kill {attempt} came as the batch's commit was already reaching Kafka "
            "(nothing was left pending); restarting to kill again"
        )
    raise SystemExit(f"demo: each of {KILL_ATTEMPTS} kills came as a commit was reaching Kafka")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from kafka_sink.testing.local_kafka import LocalKafka
    from kafka_sink.testing.oracle import create_topic, read_all

    workdir = Path(args.workdir or ROOT / "out" / "demo" / time.strftime("%Y%m%dT%H%M%S"))
    checkpoint = workdir / "checkpoint"
    commit_dir = checkpoint / "pykafka-commits"
    total = args.files * args.rows_per_file
    expected = write_input(workdir / "input", args.files, args.rows_per_file)
    print(f"demo: starting a local Kafka (single KRaft node); files in {workdir}", flush=True)
    with LocalKafka(nodes=1) as kafka:
        bootstrap = kafka.bootstrap_servers
        create_topic(bootstrap, TOPIC, PARTITIONS)
        env = dict(os.environ)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        job = [
            sys.executable,
            str(ROOT / "jobs" / "stream_write.py"),
            *("--bootstrap-servers", bootstrap, "--topic", TOPIC),
            *("--source", "json", "--input", str(workdir / "input")),
            *("--schema", "key STRING, value STRING", "--max-files-per-trigger", "1"),
            *("--checkpoint", str(checkpoint), "--query-name", "pykafka_demo"),
            *("--option", f"deliveryGuarantee={args.delivery_guarantee}"),
            # Spark warns that micro-batches fall behind while it warms up; not news here.
            *("--spark-log-level", "ERROR"),
        ]
        print(
            f"demo: Kafka at {bootstrap}, topic {TOPIC!r} with {PARTITIONS} partitions; "
            f"streaming {total} rows in {args.files} micro-batches with "
            f"deliveryGuarantee={args.delivery_guarantee}",
            flush=True,
        )

        def start(attempt: int) -> Driver:
            # Back-to-back micro-batches: nearly always one is writing when the watch looks.
            command = [*job, "--trigger-seconds", "0.1"]
            return Driver(command, workdir / f"run{attempt}.log", env)

        watch = PendingRecordsWatch(bootstrap, TOPIC, args.delivery_guarantee)
        try:
            done, pending = kill_mid_batch(start, commit_dir, watch, args.kill_after)
        finally:
            watch.close()
        print(
            f"demo: killed the driver (SIGKILL, process group) after {done} committed "
            f"micro-batches, while {pending} records of micro-batch {done} were in the log, "
            "not committed",
            flush=True,
        )
        print("demo: restarting the query from its checkpoint (trigger availableNow)", flush=True)
        last = Driver([*job, "--available-now"], workdir / "restart.log", env)
        code = last.wait(DRAIN_TIMEOUT_S)
        if code != 0:
            print(f"demo: the restarted query failed (exit {code}):\n{last.tail()}")
            return code or 1
        readings = [
            tally(level, (r.value for r in read_all(bootstrap, TOPIC, **read)), expected)
            for level, read in (
                ("read_committed", {"expected": total, "isolation_level": "read_committed"}),
                ("read_uncommitted", {"expected": total}),
            )
        ]
        batches = committed_batches(commit_dir)

    committed, uncommitted = readings
    print()
    print(f"Read back {TOPIC!r} from the beginning with kafka-python; {total} rows were fed in.")
    print(table(readings))
    print()
    print(
        f"Commit log: {len(batches)} micro-batch files, "
        f"{sum(d['record_count'] for d in batches)} records, in {commit_dir}"
    )
    if args.delivery_guarantee == "exactly-once":
        print(
            f"read_uncommitted also reads the {uncommitted.rows - committed.rows} aborted records "
            "of the killed attempt; consumers with isolation.level=read_committed never see them."
        )
    else:
        print(
            "At-least-once writes no transactions: every reader reads the killed attempt's "
            "records and, again, those of its re-run."
        )
    problem = exactly_once_problem(committed)
    if problem:
        print(f"demo: FAILED: read_committed is not exactly once: {problem}", file=sys.stderr)
        return 1
    print("Every row was read exactly once by read_committed, across the crash and restart.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
