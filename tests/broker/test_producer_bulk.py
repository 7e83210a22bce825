"""send_columns against a real broker: negative timestamps, and peak memory for 1 GiB."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable

import pyarrow as pa
import pytest

from kafka_sink import KafkaProducer
from kafka_sink.testing.oracle import end_offsets, import_kafka_python, read_all

TopicFactory = Callable[..., str]

MIB = 1 << 20


def _admin(bootstrap: str) -> object:
    kafka = import_kafka_python()
    return kafka.admin.KafkaAdminClient(bootstrap_servers=bootstrap)


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = _admin(bootstrap)
    try:
        with contextlib.suppress(Exception):
            admin.delete_topics([topic])  # type: ignore[attr-defined]
    finally:
        admin.close()  # type: ignore[attr-defined]


def test_negative_timestamps_are_refused_by_send_and_send_columns_alike(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    topic = topic_factory(partitions=1)
    with KafkaProducer({"bootstrap.servers": kafka_bootstrap}) as producer:
        with pytest.raises(ValueError, match="timestamp_ms must be a non-negative int, got -1"):
            producer.send(topic, b"v", timestamp_ms=-1)
        with pytest.raises(ValueError, match="timestamps_ms must be a non-negative int, got -1"):
            producer.send_columns(topic, [b"v"], timestamps_ms=-1)
        with pytest.raises(ValueError, match=r"timestamps_ms\[1\] is -1"):
            producer.send_columns(topic, [b"a", b"b"], timestamps_ms=pa.array([5, -1], pa.int64()))
        # A null timestamp is "now", as timestamp_ms=None is for send().
        before = int(time.time() * 1000)
        producer.send_columns(
            topic, [b"a", b"b"], timestamps_ms=pa.array([None, 1_600_000_000_000], pa.int64())
        ).get(30)
        after = int(time.time() * 1000)
    records = read_all(kafka_bootstrap, topic, expected=2)
    assert [r.value for r in records] == [b"a", b"b"]
    assert before <= records[0].timestamp_ms <= after
    assert records[1].timestamp_ms == 1_600_000_000_000


@pytest.mark.slow
def test_one_gib_through_send_columns_peaks_within_input_plus_buffer_memory(
    kafka_bootstrap: str, topic_factory: TopicFactory
) -> None:
    # A process of its own, so its resident memory is the producer's alone. One call of 1 GiB
    # of keyed columns, default producer settings (buffer.memory = 32 MiB). See
    # kafka_sink/testing/bulk_memory.py for how baseline, input and peak are counted: baseline is
    # VmRSS after imports and metadata, before the input exists; input is the Arrow buffers
    # handed over; peak is VmHWM after every record was acknowledged.
    topic = topic_factory(partitions=6)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "kafka_sink.testing.bulk_memory",
                "--bootstrap",
                kafka_bootstrap,
                "--topic",
                topic,
                "--mib",
                "1024",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        assert result["input_bytes"] >= 1000 * MIB
        assert result["buffer_memory"] == 32 * MIB
        assert result["acknowledged"] == result["records"]
        assert sum(end_offsets(kafka_bootstrap, topic).values()) == result["records"]
        over = result["peak_bytes"] - result["baseline_bytes"]
        bound = result["input_bytes"] + result["buffer_memory"] + 64 * MIB
        assert over <= bound, (
            f"peak {over / MIB:.0f} MiB over the baseline, bound {bound / MIB:.0f} MiB "
            f"(input {result['input_bytes'] / MIB:.0f} MiB): {result}"
        )
    finally:
        _delete_topic(kafka_bootstrap, topic)  # 1 GiB of log: give the disk back
