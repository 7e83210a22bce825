"""Producer throughput: our send() and send_columns() against confluent-kafka and kafka-python.

One broker, one workload for every client: N records (default 1,000,000) with 100-byte values
and 16-byte keys, acks=all, lz4, linger.ms=5, a fresh 6-partition topic per client. Each client
runs in its own subprocess, so its peak RSS (ru_maxrss) is its own; the clock runs from the first
send to the end of flush() (producer start-up and the first metadata fetch are excluded, data
generation too). The broker is warmed up first (its JIT would otherwise penalise the first
client). Records written are checked against the topic's end offsets.

    python benchmarks/bench_producer.py [--records N] [--bootstrap host:port] [--clients a,b]
        [--rounds R] [--memory-mib N]

``ours-bulk-txn`` is ``ours-bulk`` inside transactions (a ``transactional.id``, one commit per
100,000 records, the last commit inside the clock); the run prints its rate over ``ours-bulk``'s.
``ours-send-nometrics`` and ``ours-bulk-nometrics`` are the same two clients with the producer's
metrics recording switched off (the sender and accumulator record nothing): run beside the
recording ones (``make bench-producer-metrics``), they are the same-run A/B of what recording costs.
With ``--rounds R`` every client runs R times, the clients alternating within each round (in
reverse order every other round), and the table keeps each client's best run
(``make bench-transactions``: the two bulk clients, 3 rounds).

Then the bulk path's memory bound: one process sends --memory-mib (default 1024) MiB of keyed
1000-byte records through a single send_columns() call with the default buffer.memory (32 MiB),
and the run reports the input size, buffer.memory and the peak RSS over the process's baseline
before the input existed (kafka_sink.testing.bulk_memory; the promise is input + buffer.memory
+ 64 MiB). --memory-mib 0 skips it.

Without --bootstrap (or KAFKA_BOOTSTRAP_SERVERS) a LocalKafka with the "bench" JVM profile is
started for the run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

VALUE_SIZE = 100
KEY_SIZE = 16
PARTITIONS = 6
CLIENTS = ("ours-send", "ours-bulk", "ours-bulk-txn", "confluent-kafka", "kafka-python")
BULK_CHUNK = 10_000  # Spark's default Arrow batch (spark.sql.execution.arrow.maxRecordsPerBatch)
TXN_RECORDS = 100_000  # records per transaction for ours-bulk-txn


def _data(n: int) -> tuple[list[bytes], list[bytes]]:
    rng = __import__("random").Random(42)
    pool = [rng.randbytes(VALUE_SIZE) for _ in range(4096)]
    values = [pool[i & 4095] for i in range(n)]
    keys = [b"%016d" % i for i in range(n)]
    assert all(len(k) == KEY_SIZE for k in keys[:10])
    return keys, values


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _without_metrics(producer: Any) -> None:
    """The A/B's other side: nothing recorded by the sender and accumulator (they skip None)."""
    producer._sender.metrics = None
    producer._accumulator.metrics = None


def _run_ours_send(
    bootstrap: str,
    topic: str,
    keys: list[bytes],
    values: list[bytes],
    *,
    record_metrics: bool = True,
) -> float:
    from kafka_sink import KafkaProducer

    producer = KafkaProducer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 5,
        }
    )
    if not record_metrics:
        _without_metrics(producer)
    producer.partitions_for(topic)
    send = producer.send
    start = time.perf_counter()
    for key, value in zip(keys, values, strict=True):
        send(topic, value, key)
    producer.flush()
    elapsed = time.perf_counter() - start
    producer.close()
    return elapsed


def _run_ours_bulk(
    bootstrap: str,
    topic: str,
    keys: list[bytes],
    values: list[bytes],
    *,
    transactional: bool = False,
) -> float:
    import pyarrow as pa

    n = len(keys)
    chunks = [
        (
            pa.array(keys[i : i + BULK_CHUNK], pa.binary()),
            pa.array(values[i : i + BULK_CHUNK], pa.binary()),
        )
        for i in range(0, n, BULK_CHUNK)
    ]
    return _run_ours_bulk_columns(bootstrap, topic, chunks, transactional=transactional)


def _run_ours_bulk_txn(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes]) -> float:
    return _run_ours_bulk(bootstrap, topic, keys, values, transactional=True)


def _run_ours_bulk_columns(
    bootstrap: str,
    topic: str,
    chunks: list[tuple[Any, Any]],
    *,
    transactional: bool = False,
    record_metrics: bool = True,
) -> float:
    from kafka_sink import KafkaProducer

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "compression.type": "lz4",
        "linger.ms": 5,
    }
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(config)
    if not record_metrics:
        _without_metrics(producer)
    producer.partitions_for(topic)
    if transactional:
        producer.init_transactions()
    start = time.perf_counter()
    futures = []
    in_txn = 0
    for k, v in chunks:
        if transactional and in_txn == 0:
            producer.begin_transaction()
        futures.append(producer.send_columns(topic, v, k))
        in_txn += len(v)
        if transactional and in_txn >= TXN_RECORDS:
            producer.commit_transaction()
            in_txn = 0
    if transactional and in_txn:
        producer.commit_transaction()
    producer.flush()
    for f in futures:
        f.get()
    elapsed = time.perf_counter() - start
    producer.close()
    return elapsed


def _run_confluent(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes]) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "compression.type": "lz4",
            "linger.ms": 5,
            "enable.idempotence": True,
            # Java-compatible key placement, so every client writes the same layout.
            "partitioner": "murmur2_random",
        }
    )
    producer.list_topics(topic, timeout=30)
    produce = producer.produce
    poll = producer.poll
    start = time.perf_counter()
    for key, value in zip(keys, values, strict=True):
        while True:
            try:
                produce(topic, value, key)
                break
            except BufferError:
                poll(0.05)
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    if remaining:
        raise RuntimeError(f"confluent-kafka: {remaining} messages not delivered")
    return elapsed


def _run_kafka_python(bootstrap: str, topic: str, keys: list[bytes], values: list[bytes]) -> float:
    import warnings

    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaProducer as PythonKafkaProducer

    producer = PythonKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type="lz4",
        linger_ms=5,
    )
    producer.partitions_for(topic)
    send = producer.send
    start = time.perf_counter()
    for key, value in zip(keys, values, strict=True):
        send(topic, value=value, key=key)
    producer.flush()
    elapsed = time.perf_counter() - start
    producer.close()
    return elapsed


_RUNNERS: dict[str, Callable[..., float] | None] = {
    "ours-send": _run_ours_send,
    "ours-send-nometrics": lambda *a: _run_ours_send(*a, record_metrics=False),
    "ours-bulk": _run_ours_bulk,
    "ours-bulk-nometrics": None,  # built from columns in _worker, as ours-bulk
    "ours-bulk-txn": _run_ours_bulk_txn,
    "confluent-kafka": _run_confluent,
    "kafka-python": _run_kafka_python,
}


def _worker(client: str, bootstrap: str, topic: str, n: int) -> None:
    if client in ("ours-bulk", "ours-bulk-txn", "ours-bulk-nometrics"):
        # Arrow columns, as Spark hands them over; built chunk by chunk so the Python lists
        # the other clients need are never all alive at once.
        import pyarrow as pa

        rng = __import__("random").Random(42)
        pool = [rng.randbytes(VALUE_SIZE) for _ in range(4096)]
        chunks = [
            (
                pa.array([b"%016d" % i for i in range(s, min(s + BULK_CHUNK, n))], pa.binary()),
                pa.array([pool[i & 4095] for i in range(s, min(s + BULK_CHUNK, n))], pa.binary()),
            )
            for s in range(0, n, BULK_CHUNK)
        ]
        rss_data = _rss_mb()
        cpu_start = _cpu_s()
        elapsed = _run_ours_bulk_columns(
            bootstrap,
            topic,
            chunks,
            transactional=client == "ours-bulk-txn",
            record_metrics=client != "ours-bulk-nometrics",
        )
    else:
        keys, values = _data(n)
        rss_data = _rss_mb()
        cpu_start = _cpu_s()
        runner = _RUNNERS[client]
        assert runner is not None
        elapsed = runner(bootstrap, topic, keys, values)
    print(
        json.dumps(
            {
                "client": client,
                "records": n,
                "seconds": elapsed,
                "peak_rss_mb": _rss_mb(),
                "rss_after_data_mb": rss_data,
                # Both threads' CPU time over the run: on a busy machine it varies less than
                # the wall time (which waits for cores), so it is what an A/B compares.
                "cpu_s": _cpu_s() - cpu_start,
            }
        ),
        flush=True,
    )


def _measure(client: str, bootstrap: str, n: int) -> dict[str, Any]:
    from kafka_sink.testing.oracle import create_topic, end_offsets

    topic = f"bench-{client}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            client,
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--records",
            str(n),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{client} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    written = sum(end_offsets(bootstrap, topic).values())
    result["written"] = written
    if written < n:
        raise RuntimeError(f"{client}: only {written} of {n} records in {topic}")
    return result


def _measure_bulk_memory(bootstrap: str, mib: int) -> dict[str, Any]:
    from kafka_sink.testing.oracle import create_topic

    topic = f"bench-bulk-memory-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=PARTITIONS)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafka_sink.testing.bulk_memory",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--mib",
            str(mib),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"bulk memory run failed:\n{proc.stdout}\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _memory_line(r: dict[str, Any]) -> str:
    mib = 1024 * 1024
    over = r["peak_bytes"] - r["baseline_bytes"]
    extra = over - r["input_bytes"]
    return (
        f"send_columns memory: {r['records']:,} records in {r['calls']} call(s), "
        f"input {r['input_bytes'] / mib:,.0f} MiB, "
        f"buffer.memory {r['buffer_memory'] / mib:.0f} MiB: "
        f"peak RSS {r['peak_bytes'] / mib:,.0f} MiB = baseline {r['baseline_bytes'] / mib:.0f} "
        f"MiB + {over / mib:,.0f} MiB (input + {extra / mib:.0f} MiB; bound input + "
        f"buffer.memory + 64 MiB = {r['bound_bytes'] / mib:,.0f} MiB) in {r['seconds']:.1f} s"
    )


def _table(results: list[dict[str, Any]]) -> str:
    rate = {r["client"]: r["records"] / r["seconds"] for r in results}
    lines = [
        f"{'client':<16} {'records/s':>12} {'seconds':>8} {'peak RSS MB':>12} "
        f"{'(input data)':>13} {'vs kafka-python':>16} {'vs confluent':>13}"
    ]
    for r in results:
        c = r["client"]
        kp = f"{rate[c] / rate['kafka-python']:.2f}x" if "kafka-python" in rate else "n/a"
        ck = f"{rate[c] / rate['confluent-kafka']:.2f}x" if "confluent-kafka" in rate else "n/a"
        lines.append(
            f"{c:<16} {rate[c]:>12,.0f} {r['seconds']:>8.2f} {r['peak_rss_mb']:>12.1f} "
            f"{r['rss_after_data_mb']:>13.1f} {kp:>16} {ck:>13}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--memory-mib", type=int, default=1024)
    parser.add_argument("--worker")
    parser.add_argument("--topic")
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.bootstrap, args.topic, args.records)
        return
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    for c in clients:
        if c not in _RUNNERS:
            parser.error(f"unknown client {c!r}; choose from {', '.join(CLIENTS)}")
    kafka = None
    bootstrap = args.bootstrap
    if not bootstrap:
        from kafka_sink.testing.local_kafka import LocalKafka

        kafka = LocalKafka(nodes=1, jvm_profile="bench").start()
        bootstrap = kafka.bootstrap_servers
    try:
        print(
            f"{args.records:,} records, {VALUE_SIZE}-byte values, {KEY_SIZE}-byte keys, acks=all, "
            f"lz4, linger.ms=5, {PARTITIONS} partitions, broker {bootstrap}",
            flush=True,
        )
        # A cold broker JVM (JIT, page cache) would penalise whichever client runs first.
        warm = _measure("confluent-kafka", bootstrap, max(args.records // 2, 1000))
        print(f"  (broker warm-up: {warm['records']:,} records)", flush=True)
        best: dict[str, dict[str, Any]] = {}
        for round_no in range(max(args.rounds, 1)):
            # A B, then B A: whichever client runs first in a round uses a little more CPU.
            for client in clients if round_no % 2 == 0 else clients[::-1]:
                result = _measure(client, bootstrap, args.records)
                print(
                    f"  {client}: {result['records'] / result['seconds']:,.0f} records/s "
                    f"({result['seconds']:.2f} s, CPU {result['cpu_s']:.2f} s, "
                    f"peak RSS {result['peak_rss_mb']:.0f} MB)",
                    flush=True,
                )
                if client not in best or result["seconds"] < best[client]["seconds"]:
                    best[client] = result
        results = [best[c] for c in clients]
        print()
        print(_table(results))
        if "ours-bulk" in best and "ours-bulk-txn" in best:
            ratio = best["ours-bulk"]["seconds"] / best["ours-bulk-txn"]["seconds"]
            print(
                f"\ntransactional send_columns (one commit per {TXN_RECORDS:,} records) / "
                f"send_columns: {ratio:.2f}x",
                flush=True,
            )
        if args.memory_mib > 0:
            print()
            print(_memory_line(_measure_bulk_memory(bootstrap, args.memory_mib)), flush=True)
    finally:
        if kafka is not None:
            kafka.close()


if __name__ == "__main__":
    main()
