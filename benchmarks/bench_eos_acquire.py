"""What a task attempt pays to choose its transactional id, against one broker, no Spark.

Each round is what an exactly-once task does before its first record, with a warm worker
(cached producer, cached admin client): ``task._ExactlyOnce.acquire`` (the describe round of
its partition's 8 ids, InitProducerId, begin), then a one-record transaction prepared and
committed the way the driver commits it. Measured twice, alternating: with the describe round,
and with it skipped (every slot taken as free: the id built from the attempt number alone, as
before slots existed). Printed: the median acquire of each, and the median describe round alone.

    python benchmarks/bench_eos_acquire.py [--rounds 50] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Mapping, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_spark import kafka


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()

    import pyarrow as pa

    from kafka_sink.admin.transactions import TransactionAdmin
    from kafka_sink.spark.executor import producer_cache, slots
    from kafka_sink.spark.executor import task as task_module
    from kafka_sink.spark.options import SinkOptions
    from kafka_sink.testing.oracle import create_topic

    real_describe = slots.describe_states

    def all_free(config: Mapping[str, str], ids: Sequence[str]) -> list[str | None]:
        return [None] * len(ids)

    with kafka(args.bootstrap) as bootstrap:
        topic = f"bench-acquire-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, 1, 1)
        options = SinkOptions.from_options(
            {
                "kafka.bootstrap.servers": bootstrap,
                "topic": topic,
                "deliveryGuarantee": "exactly-once",
            }
        )
        timings: dict[str, list[float]] = {"describe": [], "no-describe": [], "round": []}
        strategies = {
            name: task_module._ExactlyOnce(options, f"bench-{name}-{uuid.uuid4().hex[:6]}")
            for name in ("describe", "no-describe")
        }
        config = options.producer_config
        with TransactionAdmin({"bootstrap.servers": bootstrap}, 30) as admin:
            for i in range(args.rounds + 3):  # the first rounds warm up connections
                for name, strategy in strategies.items():
                    slots.describe_states = real_describe if name == "describe" else all_free
                    info = task_module._TaskInfo(0, 0, i, i)
                    start = time.perf_counter()
                    producer = strategy.acquire(info)
                    elapsed = time.perf_counter() - start
                    producer.send_columns(topic, pa.array([b"x"], pa.binary())).get(30)
                    admin.complete(producer.prepare_transaction(30), commit=True)
                    producer_cache.release(producer)
                    if i >= 3:
                        timings[name].append(elapsed)
                ids = [f"{strategies['describe']._prefix}-0-{s}" for s in range(8)]
                start = time.perf_counter()
                real_describe(config, ids)
                if i >= 3:
                    timings["round"].append(time.perf_counter() - start)
        slots.describe_states = real_describe
        producer_cache.close_all()
        slots.close_admins()

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.2f} ms"

    print(f"warm acquire, median of {args.rounds}:")
    print(f"  with the describe round:     {ms(timings['describe'])}")
    print(f"  without it (attempt number): {ms(timings['no-describe'])}")
    print(f"  the describe round alone:    {ms(timings['round'])}")


if __name__ == "__main__":
    main()
