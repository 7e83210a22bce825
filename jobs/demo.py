"""``make demo``: a local Kafka, a streaming Spark job writing to it, and what landed.

1. Start a single-node Kafka (``LocalKafka``, from the Maven jars ``make setup`` fetched).
2. Create a topic with 3 partitions.
3. Run ``jobs/stream_write.py`` (rate source -> format("pykafka")) for ``--seconds`` seconds; it
   stops between micro-batches.
4. Read the topic back with an independent client (kafka-python) and print, per partition, the
   records and offsets read beside the offsets the driver committed (the commit log under the
   checkpoint, one JSON file per micro-batch).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT

TOPIC = "pykafka-demo"
PARTITIONS = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the job streams")
    parser.add_argument("--rows-per-second", type=int, default=500)
    parser.add_argument(
        "--workdir", default=None, help="checkpoint parent (default out/demo/<time>)"
    )
    return parser.parse_args(argv)


def committed(commit_dir: Path) -> tuple[dict[int, list[int]], int, int]:
    """Per partition [first, last, count] over every commit file; also #files and #replaced."""
    ranges: dict[int, list[int]] = {}
    files = sorted(glob.glob(str(commit_dir / "*.json")))
    for path in files:
        with open(path, encoding="utf-8") as f:
            doc: dict[str, Any] = json.load(f)
        for o in doc["offsets"]:
            p = o["partition"]
            first, last, n = o["first_offset"], o["last_offset"], o["record_count"]
            if p not in ranges:
                ranges[p] = [first, last, n]
            else:
                ranges[p][0] = min(ranges[p][0], first)
                ranges[p][1] = max(ranges[p][1], last)
                ranges[p][2] += n
    replaced = len(glob.glob(str(commit_dir / "*.json.replaced-*")))
    return ranges, len(files), replaced


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from kafka_sink.testing.local_kafka import LocalKafka
    from kafka_sink.testing.oracle import create_topic, read_all

    workdir = Path(args.workdir or ROOT / "out" / "demo" / time.strftime("%Y%m%dT%H%M%S"))
    checkpoint = workdir / "checkpoint"
    print(f"demo: starting a local Kafka (single KRaft node); files in {workdir}", flush=True)
    with LocalKafka(nodes=1) as kafka:
        bootstrap = kafka.bootstrap_servers
        create_topic(bootstrap, TOPIC, PARTITIONS)
        print(
            f"demo: Kafka at {bootstrap}, topic {TOPIC!r} with {PARTITIONS} partitions; "
            f"streaming for {args.seconds:.0f} s",
            flush=True,
        )
        env = dict(os.environ)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        job = [
            sys.executable,
            str(ROOT / "jobs" / "stream_write.py"),
            "--bootstrap-servers",
            bootstrap,
            "--topic",
            TOPIC,
            "--checkpoint",
            str(checkpoint),
            "--rows-per-second",
            str(args.rows_per_second),
            "--run-seconds",
            str(args.seconds),
            "--option",
            "kafka.acks=all",
            "--option",
            "kafka.compression.type=lz4",
            # Spark warns that micro-batches fall behind while it warms up; not news here.
            "--spark-log-level",
            "ERROR",
        ]
        done = subprocess.run(job, cwd=str(ROOT), env=env, check=False)
        if done.returncode != 0:
            print(f"demo: the streaming job failed (exit {done.returncode})", file=sys.stderr)
            return done.returncode

        records = read_all(bootstrap, TOPIC)
        ranges, files, replaced = committed(checkpoint / "pykafka-commits")

    read: dict[int, list[int]] = defaultdict(list)
    for r in records:
        read[r.partition].append(r.offset)
    duplicates = sum(n - 1 for n in Counter(r.value for r in records).values() if n > 1)

    print()
    print(f"Read back {len(records)} records from {TOPIC!r} (kafka-python, from the beginning).")
    print(f"Commit log: {files} micro-batch files in {checkpoint / 'pykafka-commits'}")
    print()
    header = f"{'partition':>9}  {'records read':>12}  {'offsets read':>14}  "
    header += f"{'committed':>9}  {'committed offsets':>17}"
    print(header)
    print("-" * len(header))
    ok = True
    for p in range(PARTITIONS):
        offs = read.get(p, [])
        got = f"{min(offs)}..{max(offs)}" if offs else "-"
        c = ranges.get(p)
        com = f"{c[0]}..{c[1]}" if c and c[0] is not None else "-"
        n_com = c[2] if c else 0
        print(f"{p:>9}  {len(offs):>12}  {got:>14}  {n_com:>9}  {com:>17}")
        ok = ok and n_com == len(offs) and (not offs or (c is not None and c[0] == min(offs)))
        ok = ok and (not offs or (c is not None and c[1] == max(offs)))
    print()
    if ok and duplicates == 0:
        print("Every record read is in a committed range, and every committed record was read.")
    else:
        print(
            f"The commit log and the topic differ ({duplicates} duplicate values, {replaced} "
            "re-run batches): at-least-once delivery re-sends a micro-batch that was "
            "interrupted before Spark recorded it."
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
