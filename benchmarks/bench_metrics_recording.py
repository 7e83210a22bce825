"""What recording the producer's metrics costs, per Produce request: a micro-benchmark.

One request of ``--batches`` lz4-like batches (130 records each) of one topic to one node, as
the I/O thread records it: ``record_sent`` when sent, ``record_answered`` when answered,
``record_acked_many`` for its batches, the queued records folded into the sensors every few hundred
requests (as when nobody reads) or after every request (a reader polling ``metrics()``). Prints
CPU microseconds per request (best of ``--repeat`` timeit runs).

    python benchmarks/bench_metrics_recording.py [--batches 6] [--repeat 7]
"""

from __future__ import annotations

import argparse
import time
import timeit
from types import SimpleNamespace
from typing import Any

from kafka_sink.clock import ManualClock
from kafka_sink.producer.metrics import MetricConfig, ProducerMetrics

RECORDS_PER_BATCH = 130


def _batches(count: int) -> list[Any]:
    return [
        SimpleNamespace(
            topic="events",
            partition=p,
            tp=("events", p),
            record_count=RECORDS_PER_BATCH,
            created_ms=0,
            drained_ms=3,
            encoded=b"x",
            sealed=SimpleNamespace(
                size_bytes=9000, uncompressed_size_bytes=16000, max_record_size=121
            ),
        )
        for p in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    clock = ManualClock()
    metrics = ProducerMetrics(MetricConfig(), clock)
    batches = _batches(args.batches)

    def io_thread() -> None:
        metrics.record_sent(1, batches, 5)
        metrics.record_answered(1, 4, 0, 5)
        metrics.record_acked_many(batches)

    def io_thread_and_read() -> None:
        io_thread()
        metrics.fold()

    records = args.batches * RECORDS_PER_BATCH
    for name, fn in (
        ("I/O thread (folds every 256)", io_thread),
        ("the same, read every request", io_thread_and_read),
    ):
        metrics.fold()
        # CPU time, not wall time: the machine the numbers come from is shared.
        timings = timeit.repeat(fn, timer=time.process_time, number=5000, repeat=args.repeat)
        us = min(timings) / 5000 * 1e6
        print(f"{name:30s} {us:7.2f} us per request, {us * 1000 / records:5.1f} ns per record")


if __name__ == "__main__":
    main()
