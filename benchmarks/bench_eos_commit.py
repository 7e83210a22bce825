"""Where exactly-once spends its time outside the rows: the driver's commit and a task's producer.

Against one broker, no Spark: ``--tasks`` transactional producers each prepare a one-record
transaction per batch, and an ``EosCommitter`` (in-memory intents) commits the batch, over
``--batches`` batches, with two kinds of ``TransactionOps``:

- ``per-call``: ``complete_transaction`` / ``list_transactions`` one by one, each building and
  closing its own admin client (connections, ApiVersions, FindCoordinator every time);
- ``batched``: ``eos.committer.listing_ops``, what the sink uses: one admin client per commit, one
  FindCoordinator for all ids, every EndTxn sent at once.

and, with the batched ops, each intent store (``--stores``): ``memory`` (no store cost), ``file``
(``intentStore=checkpoint``: a JSON file replaced and fsynced) and ``kafka`` (``intentStore=kafka``,
the default: opened per commit as the driver does, in a process that keeps its caches, as Spark's
long-lived driver-side worker does).

Printed: the median driver commit per batch (list, intent, EndTxns, done, the sweep's list), the
median re-initialisation of a warm producer between batches (InitProducerId only), and for
comparison a new producer up to its first acknowledged record in a transaction (what a task
paid when it built its producer every time).

    python benchmarks/bench_eos_commit.py [--tasks 2,6] [--batches 8] [--stores memory,file,kafka]
        [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_spark import kafka

from kafka_sink.admin.transactions import (
    OPEN_STATES,
    complete_transaction,
    list_transactions,
)
from kafka_sink.prepared import PreparedTransaction
from kafka_sink.producer.producer import KafkaProducer
from kafka_sink.spark.driver.eos.committer import (
    EosCommitter,
    TaskTransaction,
    TransactionOps,
    listing_ops,
)
from kafka_sink.spark.driver.eos.intents import FileIntentStore, IntentStore, MemoryIntentStore
from kafka_sink.spark.driver.eos.kafka_intents import KafkaIntentStore
from kafka_sink.testing.oracle import create_topic

MEMORY = MemoryIntentStore()


def per_call_ops(config: Mapping[str, object]) -> TransactionOps:
    def complete(p: PreparedTransaction, commit: bool) -> object:
        return complete_transaction(config, p, commit=commit)

    def list_open(prefix: str) -> list[PreparedTransaction]:
        return [t.prepared() for t in list_transactions(config, prefix) if t.state in OPEN_STATES]

    return TransactionOps(complete=complete, list_open=list_open)


def open_store(kind: str, config: dict[str, str], directory: str) -> IntentStore:
    if kind == "kafka":
        return KafkaIntentStore.open(config, "bench-eos-intents")
    if kind == "file":
        return FileIntentStore(directory)
    return MEMORY


def run(bootstrap: str, topic: str, tasks: int, kind: str, *, batches: int, store_kind: str) -> str:
    config = {"bootstrap.servers": bootstrap}
    prefix = f"bench-eos-{kind}-{tasks}-{uuid.uuid4().hex[:6]}"
    directory = tempfile.mkdtemp(prefix="bench-eos-intents-")
    producers = [
        KafkaProducer({**config, "transactional.id": f"{prefix}-{i}-0"}) for i in range(tasks)
    ]
    commits: list[float] = []
    reinits: list[float] = []
    try:
        for p in producers:
            p.init_transactions(30)
        for batch in range(batches):
            prepared = []
            for i, p in enumerate(producers):
                if batch:
                    t0 = time.perf_counter()
                    p.init_transactions(30)
                    reinits.append(time.perf_counter() - t0)
                p.begin_transaction()
                p.send(topic, b"x" * 100, partition=i % 6)
                prepared.append(TaskTransaction(i, p.prepare_transaction(30)))
            t0 = time.perf_counter()
            store = open_store(store_kind, config, directory)
            ops = per_call_ops(config) if kind == "per-call" else listing_ops(config)
            committer = EosCommitter(store, ops, query_key=prefix, prefix=prefix)
            committer.commit(batch, prepared)
            ops.close()
            store.close()
            commits.append(time.perf_counter() - t0)
    finally:
        for p in producers:
            p.close(10)
        shutil.rmtree(directory, ignore_errors=True)
    steady = commits[1:]  # the first batch also connects
    return (
        f"{tasks} task(s), {kind:<8}, {store_kind:<6} store: driver commit median "
        f"{statistics.median(steady) * 1000:5.0f} "
        f"ms (min {min(steady) * 1000:4.0f}); warm producer re-init median "
        f"{statistics.median(reinits) * 1000:4.0f} ms"
    )


def fresh_producer(bootstrap: str, topic: str, n: int = 6) -> str:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        p = KafkaProducer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"bench-eos-fresh-{uuid.uuid4()}"}
        )
        try:
            p.init_transactions(30)
            p.begin_transaction()
            p.send(topic, b"x", partition=0).get(30)
            times.append(time.perf_counter() - t0)
            p.abort_transaction(10)
        finally:
            p.close(10)
    median_ms = statistics.median(times) * 1000
    return f"new transactional producer up to its first ack: median {median_ms:.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="2,6")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--stores", default="memory,file,kafka")
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    lines = [
        f"bench_eos_commit: one broker, {args.batches} batches, median over batches after the "
        f"first; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    ]
    print(lines[0], flush=True)
    with kafka(args.bootstrap) as bootstrap:
        topic = f"bench-eos-{uuid.uuid4().hex[:6]}"
        create_topic(bootstrap, topic, 6)
        for tasks in (int(t) for t in args.tasks.split(",")):
            runs = [("per-call", "memory")] + [("batched", s) for s in args.stores.split(",")]
            for kind, store_kind in runs:
                lines.append(
                    run(bootstrap, topic, tasks, kind, batches=args.batches, store_kind=store_kind)
                )
                print(lines[-1], flush=True)
        lines.append(fresh_producer(bootstrap, topic))
        print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(lines[0] + "\n\n```\n" + "\n".join(lines[1:]) + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
