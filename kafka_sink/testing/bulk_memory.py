"""Peak memory of one process sending a large input through ``send_columns``.

The producer promises that a process sending N bytes of columns through ``send_columns`` peaks
within N + ``buffer.memory`` + 64 MiB of resident memory over what it used before the input
existed. This module measures that in a process of its own (so the resident set is the
producer's alone); the broker test and ``benchmarks/bench_producer.py`` both run it::

    python -m kafka_sink.testing.bulk_memory --bootstrap HOST:PORT --topic T [--mib 1024]
        [--calls 1] [--value-size 1000]

It prints one JSON line. How it counts:

- ``baseline_bytes``: VmRSS once the imports are done, the producer is connected and the
  topic's metadata is known, before any input exists;
- ``input_bytes``: the Arrow buffers of the columns handed over (values, 16-byte keys and their
  offsets), built with numpy, without a Python object per row; held until the end;
- ``peak_bytes``: VmHWM (the resident high-water mark) once every future has resolved.

The input goes out in ``--calls`` equal ``send_columns`` calls (one by default: the case that
used to encode everything before queueing), keyed, with the producer's defaults otherwise
(``buffer.memory`` 32 MiB, no compression, ``acks=all``).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_sink.producer.producer import KafkaProducer

__all__ = ["build_columns", "main", "measure", "proc_status_bytes"]

KEY_SIZE = 16
MIB = 1 << 20


def proc_status_bytes(field: str) -> int:
    """A memory line of /proc/self/status (``VmRSS``, ``VmHWM``) in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not found in /proc/self/status")


def build_columns(total_bytes: int, value_size: int) -> tuple[Any, Any]:
    """(values, keys): about ``total_bytes`` of binary columns with distinct 16-byte keys."""
    n = max(total_bytes // (value_size + KEY_SIZE), 1)
    block = np.random.default_rng(7).integers(0, 256, MIB, dtype=np.uint8)
    data = np.empty(n * value_size, dtype=np.uint8)
    for start in range(0, len(data), MIB):
        piece = data[start : start + MIB]
        piece[:] = block[: len(piece)]
    value_offsets = np.arange(0, (n + 1) * value_size, value_size, dtype=np.int64)
    large = n * value_size > (1 << 31) - 1
    values = pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(),
        n,
        [
            None,
            pa.py_buffer(value_offsets if large else value_offsets.astype(np.int32)),
            pa.py_buffer(data),
        ],
    )
    key_words = np.zeros((n, 2), dtype=">u8")
    key_words[:, 1] = np.arange(n, dtype=np.uint64)
    key_offsets = np.arange(0, (n + 1) * KEY_SIZE, KEY_SIZE, dtype=np.int32)
    keys = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(key_offsets), pa.py_buffer(key_words.view(np.uint8))]
    )
    return values, keys


def _buffers_size(array: Any) -> int:
    return sum(b.size for b in array.buffers() if b is not None)


def measure(
    bootstrap: str, topic: str, *, total_bytes: int, calls: int = 1, value_size: int = 1000
) -> dict[str, Any]:
    producer = KafkaProducer({"bootstrap.servers": bootstrap})
    try:
        producer.partitions_for(topic)
        baseline = proc_status_bytes("VmRSS")
        values, keys = build_columns(total_bytes, value_size)
        input_bytes = _buffers_size(values) + _buffers_size(keys)
        n = len(values)
        step = -(-n // calls)
        start = time.perf_counter()
        futures = [
            producer.send_columns(topic, values.slice(i, step), keys.slice(i, step))
            for i in range(0, n, step)
        ]
        producer.flush()
        acknowledged = sum(po.record_count for f in futures for po in f.get(timeout=120).values())
        seconds = time.perf_counter() - start
        peak = proc_status_bytes("VmHWM")
        return {
            "records": n,
            "calls": len(futures),
            "acknowledged": acknowledged,
            "seconds": seconds,
            "input_bytes": input_bytes,
            "buffer_memory": producer.config.buffer_memory,
            "baseline_bytes": baseline,
            "peak_bytes": peak,
            "peak_over_baseline_bytes": peak - baseline,
            "bound_bytes": input_bytes + producer.config.buffer_memory + 64 * MIB,
        }
    finally:
        producer.close(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--mib", type=int, default=1024, help="input size in MiB")
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--value-size", type=int, default=1000)
    args = parser.parse_args()
    result = measure(
        args.bootstrap,
        args.topic,
        total_bytes=args.mib * MIB,
        calls=args.calls,
        value_size=args.value_size,
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
