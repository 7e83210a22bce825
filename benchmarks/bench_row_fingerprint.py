"""What the fingerprint of an exactly-once task's rows costs per row, no Kafka, no Spark.

An exactly-once task folds the fingerprint of every Arrow batch it writes
(``kafka_sink/spark/executor/row_fingerprint.py``). This times it over 100,000 rows in batches
of 10,000
(Spark's ``spark.sql.execution.arrow.maxRecordsPerBatch`` default), with 16-byte keys, a
timestamp column and values of 200 bytes, 1 KiB and 10 KiB, and of 150 to 250 and 500 to 1,500
bytes (as JSON documents vary; short ones padded to a few widths, long ones checksummed): the
median of ``--rounds`` rounds, in microseconds per row, to hold against a task's whole per-row
cost (docs/benchmarks.md).

    python benchmarks/bench_row_fingerprint.py [--rounds 7] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import numpy as np
    import pyarrow as pa

    from kafka_sink.spark.executor.row_fingerprint import batch_fingerprint
    from kafka_sink.spark.schema import InputLayout

    layout = InputLayout(False, True, False, False, "millis")
    rng = np.random.default_rng(1)
    lines = ["| value size | µs/row (median) | rows/s |", "| ---: | ---: | ---: |"]
    cases = (
        ("200 B", 200, 200),
        ("1 KiB", 1024, 1024),
        ("10 KiB", 10240, 10240),
        ("150-250 B", 150, 250),
        ("500-1500 B", 500, 1500),
    )
    for label, low, high in cases:
        batches = []
        for start in range(0, args.rows, 10_000):
            n = min(10_000, args.rows - start)
            sizes = rng.integers(low, high + 1, size=n)
            offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
            values = rng.integers(0, 256, size=int(offsets[-1]), dtype=np.uint8)
            value_column = pa.Array.from_buffers(
                pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(values.tobytes())]
            )
            keys = [f"key-{start + i:012d}".encode() for i in range(n)]
            batches.append(
                pa.record_batch(
                    {
                        "key": pa.array(keys, pa.binary()),
                        "value": value_column,
                        "timestamp": pa.array(np.arange(n, dtype=np.int64) + 1_700_000_000_000),
                    }
                )
            )
        timings = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            for batch in batches:
                batch_fingerprint(batch, layout, "t")
            timings.append(time.perf_counter() - began)
        per_row_us = statistics.median(timings) / args.rows * 1e6
        lines.append(f"| {label} | {per_row_us:.2f} | {1e6 / per_row_us:,.0f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
