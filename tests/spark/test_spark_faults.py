"""A broker that stops answering fails the Spark task in bounded time, saying what was pending.

One extra single-node Kafka for this module, reached by produce requests only through a TCP proxy
the test can close: the writer bootstraps on the broker's own port (so a fresh producer on a
retried task still gets metadata), and the metadata sends every later request, produce included,
to the proxy.
"""

from __future__ import annotations

import time

import pytest
from sparkutil import commit_docs

from kafka_sink.testing.oracle import create_topic, end_offsets

# A fault proof: `-m "not slow"` leaves it out, CI runs it.
pytestmark = pytest.mark.slow


def test_unreachable_leader_fails_the_task_naming_what_was_pending(
    spark, proxied_kafka, tmp_path
) -> None:
    topic = f"unreachable-{time.monotonic_ns()}"
    create_topic(proxied_kafka.proxied_bootstrap_servers, topic, partitions=2)
    [node_id] = proxied_kafka.node_ids
    proxy = proxied_kafka.proxy(node_id)
    df = spark.createDataFrame(
        [(i % 2, f"v{i}".encode()) for i in range(20)], "partition INT, value BINARY"
    ).coalesce(1)
    proxy.refuse_new = True
    proxy.cut()
    try:
        start = time.monotonic()
        with pytest.raises(Exception) as info:
            (
                df.write.format("pykafka")
                .mode("append")
                .option("kafka.bootstrap.servers", f"127.0.0.1:{proxy.target_port}")
                .option("kafka.linger.ms", "0")
                .option("kafka.request.timeout.ms", "1000")
                .option("kafka.delivery.timeout.ms", "3000")
                .option("topic", topic)
                .option("commitLog", str(tmp_path))
                .save()
            )
        elapsed = time.monotonic() - start
    finally:
        proxy.refuse_new = False
    text = str(info.value)
    assert "SinkDeliveryTimeoutError" in text
    assert "20 record(s) in 2 batch(es) not acknowledged by Kafka within" in text
    assert "kafka.delivery.timeout.ms (3000 ms)" in text
    assert f"{topic}-0: 10 record(s) in 1 batch(es); {topic}-1: 10 record(s) in 1 batch(es)" in text
    assert "the leader could not be reached" in text
    # Two attempts (local[2,2]) of about 3 s each, plus Spark's own time on a loaded machine.
    assert elapsed < 120, elapsed
    [aborted] = commit_docs(tmp_path, "*.aborted.json")
    assert aborted["failed_tasks"] == [0]
    assert end_offsets(proxied_kafka.bootstrap_servers, topic) == {0: 0, 1: 0}
