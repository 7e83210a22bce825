"""Partitioning: Java's murmur2 placement for keys, KIP-794 sticky placement for keyless records."""

from __future__ import annotations

import random

import pytest

from kafka_sink.producer.partitioner import BuiltInPartitioner
from kafka_sink.records.murmur2 import partition_for_key

# From kafka-python's partitioner tests, which were checked against Java's partitioner.
JAVA_1000 = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
]


@pytest.mark.parametrize(("key", "partition"), JAVA_1000)
def test_keyed_records_land_where_java_puts_them(key: bytes, partition: int) -> None:
    assert partition_for_key(key, 1000) == partition


def test_keyed_placement_matches_kafka_python() -> None:
    from kafka.partitioner.default import murmur2 as kp_murmur2

    rng = random.Random(1)
    for _ in range(500):
        key = rng.randbytes(rng.randrange(0, 40))
        expected = (kp_murmur2(key) & 0x7FFFFFFF) % 12
        assert partition_for_key(key, 12) == expected


def test_sticky_partition_switches_after_batch_size_bytes() -> None:
    p = BuiltInPartitioner(1000, rng=random.Random(3))
    first = p.sticky_partition("t", 50)
    for _ in range(9):
        p.update_partition_info("t", first, 100, 50, enforce_switch=True)
        assert p.sticky_partition("t", 50) == first
    p.update_partition_info("t", first, 100, 50, enforce_switch=True)
    # 1000 bytes produced: a new draw (it may repeat by chance; the counter restarts).
    assert p._sticky["t"].produced_bytes == 0


def test_sticky_waits_for_full_batch_up_to_twice_batch_size() -> None:
    p = BuiltInPartitioner(1000, rng=random.Random(3))
    first = p.sticky_partition("t", 50)
    for _ in range(19):
        p.update_partition_info("t", first, 100, 50, enforce_switch=False)
    assert p._sticky["t"].produced_bytes == 1900
    p.update_partition_info("t", first, 100, 50, enforce_switch=False)
    assert p._sticky["t"].produced_bytes == 0


def test_sticky_spreads_uniformly_over_time() -> None:
    p = BuiltInPartitioner(100, rng=random.Random(5))
    counts = [0] * 4
    for _ in range(4000):
        part = p.sticky_partition("t", 4)
        counts[part] += 1
        p.update_partition_info("t", part, 50, 4, enforce_switch=True)
    assert all(700 < c < 1300 for c in counts)


def test_sticky_prefers_available_partitions() -> None:
    p = BuiltInPartitioner(10, rng=random.Random(5))
    seen = set()
    for _ in range(200):
        part = p.sticky_partition("t", 6, available=[2, 4])
        seen.add(part)
        p.update_partition_info("t", part, 10, 6, enforce_switch=True, available=[2, 4])
    assert seen <= {2, 4}


def test_sticky_chunks_for_bulk_path() -> None:
    p = BuiltInPartitioner(100, rng=random.Random(5))
    current = p.sticky_partition("t", 6)
    chunks = p.sticky_chunks("t", 6, 5, None)
    assert len(chunks) == 5 and chunks[0] == current
    assert all(0 <= c < 6 for c in chunks)
