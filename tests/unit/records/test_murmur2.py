"""murmur2 and key partitioning: Java's vectors, kafka-python, and the vectorised column path."""

from __future__ import annotations

import importlib.util
import random
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

import kafka_sink.records.murmur2 as murmur2_module
from kafka_sink.records.murmur2 import (
    murmur2,
    murmur2_python,
    murmur2_unsigned,
    partition_for_key,
    to_positive,
)
from kafka_sink.records.murmur2_columns import partitions_for_keys

# Apache Kafka UtilsTest.testMurmur2 (signed results).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}
# librdkafka's java_murmur2_results (toPositive values).
LIBRDKAFKA_VECTORS = {b"kafka": 1348980580, b"amqp": 767747138, b"giberish123456789": 257239820}
# Key -> partition with 1000 partitions, as Java's partitioner computes it.
PARTITION_VECTORS = {b"": 681, b"a": 524, b"ab": 434, b"abc": 107, b"123456789": 566, b"\x00 ": 742}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_java_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), LIBRDKAFKA_VECTORS.items())
def test_librdkafka_vectors(key: bytes, expected: int) -> None:
    assert to_positive(murmur2(key)) == expected


def test_partition_vectors_scalar_and_vectorised() -> None:
    keys = list(PARTITION_VECTORS)
    assert [partition_for_key(k, 1000) for k in keys] == list(PARTITION_VECTORS.values())
    assert partitions_for_keys(keys, 1000).tolist() == list(PARTITION_VECTORS.values())
    signed = [JAVA_VECTORS[k] for k in JAVA_VECTORS]
    vectorised = partitions_for_keys(pa.array(list(JAVA_VECTORS)), 2**31 - 1)
    assert vectorised.tolist() == [(h & 0x7FFFFFFF) % (2**31 - 1) for h in signed]


def test_matches_kafka_python_on_random_keys() -> None:
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randint(0, 40)) for _ in range(3000)]
    assert [murmur2(k) & 0xFFFFFFFF for k in keys] == [kafka_python_murmur2(k) for k in keys]
    expected = [kafka_python_murmur2(k) & 0x7FFFFFFF for k in keys]
    got = partitions_for_keys(pa.array(keys, type=pa.binary()), 2**31 - 1)
    assert got.dtype == np.int32
    assert got.tolist() == [h % (2**31 - 1) for h in expected]


def test_every_length_matches_kafka_python() -> None:
    # Every tail (0-3 bytes) and word count, including past the precompiled readers (63 words).
    rng = random.Random(11)
    for length in [*range(65), 251, 252, 255, 256, 300, 1024]:
        for _ in range(25):
            key = rng.randbytes(length)
            expected = kafka_python_murmur2(key)
            for form in (key, bytearray(key), memoryview(key)):
                assert murmur2(form) & 0xFFFFFFFF == expected, (length, key)


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.binary(max_size=24), min_size=1, max_size=60),
    num_partitions=st.integers(1, 5000),
    kind=st.sampled_from(["list", "binary", "large", "chunked", "sliced", "string"]),
)
def test_vectorised_equals_scalar(keys: list[bytes], num_partitions: int, kind: str) -> None:
    expected = [partition_for_key(k, num_partitions) for k in keys]
    column: object
    if kind == "list":
        column = keys
    elif kind == "binary":
        column = pa.array(keys, type=pa.binary())
    elif kind == "large":
        column = pa.array(keys, type=pa.large_binary())
    elif kind == "chunked":
        column = pa.chunked_array([keys[:1], keys[1:]], type=pa.binary())
    elif kind == "sliced":
        column = pa.array([b"zz", *keys, b"yy"], type=pa.binary()).slice(1, len(keys))
    else:
        texts = [k.hex() for k in keys]
        column = pa.array(texts, type=pa.string())
        expected = [partition_for_key(t.encode(), num_partitions) for t in texts]
    assert partitions_for_keys(column, num_partitions).tolist() == expected


def test_same_length_keys_fast_path() -> None:
    rng = random.Random(3)
    for length in range(10):
        keys = [rng.randbytes(length) for _ in range(50)]
        column = pa.array(keys).slice(5)
        assert partitions_for_keys(column, 97).tolist() == [
            partition_for_key(k, 97) for k in keys[5:]
        ]


def test_errors() -> None:
    with pytest.raises(ValueError, match="null"):
        partitions_for_keys(pa.array([b"a", None]), 3)
    with pytest.raises(ValueError):
        partitions_for_keys([b"a"], 0)
    with pytest.raises(ValueError):
        partition_for_key(b"a", 0)
    assert partitions_for_keys([], 3).tolist() == []


def test_the_native_hash_is_in_use() -> None:
    # murmurhash2 is a declared dependency: a broken install must not fall back silently.
    assert murmur2_module._native_murmur2 is not None
    assert murmur2_unsigned is murmur2_module._murmur2_unsigned_native


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_python_reference_java_vectors(key: bytes, expected: int) -> None:
    assert murmur2_python(key) == expected
    assert murmur2_unsigned(key) == expected & 0xFFFFFFFF


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_native_equals_the_python_reference(key: bytes) -> None:
    assert murmur2(key) == murmur2_python(key)
    assert murmur2_unsigned(key) == murmur2_python(key) & 0xFFFFFFFF
    for form in (bytearray(key), memoryview(key)):  # the native function takes bytes only
        assert murmur2_unsigned(form) == murmur2_python(key) & 0xFFFFFFFF


def test_without_the_native_package_the_python_reference_hashes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "murmurhash2", None)  # import raises ImportError
    spec = importlib.util.spec_from_file_location("murmur2_without_native", murmur2_module.__file__)
    assert spec is not None and spec.loader is not None
    fallback = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fallback)
    assert fallback._native_murmur2 is None
    assert fallback.murmur2_unsigned is fallback._murmur2_unsigned_python
    for key, expected in JAVA_VECTORS.items():
        assert fallback.murmur2(key) == expected
        assert fallback.partition_for_key(key, 1000) == partition_for_key(key, 1000)
