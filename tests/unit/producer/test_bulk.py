"""The bulk path (``send_columns``) against a stepped Sender, a scripted network and a manual clock.

A caller thread runs ``BulkAppender.append`` (what ``KafkaProducer.send_columns`` calls) while the
test thread plays a slow broker: it steps the Sender and answers Produce requests only when it
chooses, advancing the manual clock. The accumulator's wakeup hook, called when a caller starts
waiting for buffer memory, tells the test the caller is blocked.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from kafka_sink import KafkaProducer
from kafka_sink.clock import ManualClock
from kafka_sink.errors import BufferExhaustedError, ProducerClosedError, RecordTooLargeError
from kafka_sink.producer import bulk as bulk_module
from kafka_sink.producer.accumulator import RecordAccumulator
from kafka_sink.producer.bulk import BulkAppender, RecordTooLargeInColumnsError, bulk_columns
from kafka_sink.producer.futures import BulkSendFuture, PartitionOffsets
from kafka_sink.producer.partitioner import BuiltInPartitioner
from kafka_sink.producer.sender import Sender
from kafka_sink.records import columnar
from kafka_sink.records.compression import CompressionType
from kafka_sink.records.murmur2 import murmur2
from tests.fakes.producer import FakeMetadata, FakeNetworkClient, produce_response

TOPIC = "t"
WAIT_S = 30.0  # real time; only a broken test waits this long


@dataclass
class Bulk:
    clock: ManualClock
    metadata: FakeMetadata
    network: FakeNetworkClient
    accumulator: RecordAccumulator
    sender: Sender
    appender: BulkAppender
    blocked: threading.Event
    next_offset: dict[int, int]
    peak_memory: int = 0

    def columns(self, values: Any, keys: Any = None, **kw: Any) -> Any:
        return bulk_columns(
            values,
            keys,
            partitions=kw.get("partitions"),
            headers=kw.get("headers"),
            timestamps_ms=kw.get("timestamps_ms"),
            wall_ms=self.clock.wall_ms,
        )

    def append(self, values: Any, keys: Any = None, **kw: Any) -> BulkSendFuture:
        parts = self.metadata.cluster.partitions[TOPIC]
        return self.appender.append(TOPIC, parts, self.columns(values, keys, **kw))

    def advance(self, ms: int) -> None:
        """Move the clock, then wake a caller waiting for memory so it reads the new time.

        The wait for memory is bounded in real time (at most 1 s per round): with a manual clock
        nothing else ends it once the deadline has passed, so without this nudge every
        max.block.ms expiry would cost a real second.
        """
        self.clock.advance(ms)
        with self.accumulator._memory_available:
            self.accumulator._memory_available.notify_all()

    def run(self) -> None:
        self.sender.run_once(self.clock.now_ms())
        self.peak_memory = max(self.peak_memory, self.accumulator.used_memory)

    def answer_all(self) -> int:
        """Acknowledge every Produce request in flight, with consecutive offsets per partition."""
        records = 0
        for sent in self.network.pending():
            base = {}
            for (topic, partition), batch in sent.batches().items():
                base[(topic, partition)] = self.next_offset.get(partition, 0)
                self.next_offset[partition] = base[(topic, partition)] + len(batch.records)
                records += len(batch.records)
            self.network.respond(sent, produce_response(sent, base_offsets=base))
        self.run()
        return records

    def deliver_everything(self) -> None:
        for _ in range(10_000):
            if not self.accumulator.has_incomplete():
                return
            self.run()
            self.answer_all()
        raise AssertionError("batches still incomplete")


def make_bulk(
    *,
    partitions: int = 1,
    buffer_memory: int = 64 * 1024,
    batch_size: int = 16 * 1024,
    max_block_ms: int = 1000,
    compression: CompressionType = CompressionType.NONE,
) -> Bulk:
    clock = ManualClock()
    metadata = FakeMetadata({TOPIC: [0] * partitions}, nodes=(0,))
    network = FakeNetworkClient(clock)
    blocked = threading.Event()
    accumulator = RecordAccumulator(
        clock=clock,
        batch_size=batch_size,
        linger_ms=0,
        buffer_memory=buffer_memory,
        compression_type=compression,
        wakeup=blocked.set,  # called when a caller starts waiting for memory
    )
    sender = Sender(
        accumulator=accumulator,
        metadata=metadata,
        network=network,
        clock=clock,
        transaction_manager=None,
        acks=-1,
        retries=2**31 - 1,
        request_timeout_ms=30_000,
        delivery_timeout_ms=120_000,
        max_request_size=1 << 20,
        max_in_flight=5,
        rng=random.Random(7),
    )
    appender = BulkAppender(
        accumulator=accumulator,
        partitioner=BuiltInPartitioner(batch_size, rng=random.Random(3)),
        clock=clock,
        max_block_ms=max_block_ms,
        max_request_size=1 << 20,
        ignore_keys=False,
        wakeup=lambda: None,
    )
    return Bulk(clock, metadata, network, accumulator, sender, appender, blocked, {})


class Caller:
    """Runs one bulk call on its own thread; keeps its result or exception."""

    def __init__(self, call: Callable[[], BulkSendFuture]) -> None:
        self.result: BulkSendFuture | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], BulkSendFuture]) -> None:
        try:
            self.result = call()
        except BaseException as exc:
            self.error = exc

    def join(self) -> None:
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the bulk call did not return"

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


def wait_blocked(b: Bulk, caller: Caller) -> bool:
    """Wait until the caller blocks for memory (True) or returns (False)."""
    while not b.blocked.wait(0.05):
        if not caller.alive:
            return False
    b.blocked.clear()
    return True


def values_of(n: int, size: int) -> Any:
    return pa.array([b"%08d" % i + b"x" * (size - 8) for i in range(n)], pa.binary())


def test_each_batch_waits_up_to_max_block_ms_and_a_failure_hands_over_what_was_queued() -> None:
    b = make_bulk(buffer_memory=64 * 1024, batch_size=16 * 1024, max_block_ms=1000)
    n = 2000
    caller = Caller(lambda: b.append(values_of(n, 1000)))  # ~2 MB: ~125 batches, 4 fit at once

    # A slow broker: every round of requests is answered 900 ms after the caller blocked. Each
    # batch waits less than max.block.ms, the whole call far longer (10 rounds = 9 s).
    for _ in range(10):
        assert wait_blocked(b, caller), f"the call ended early: {caller.error!r}"
        b.advance(900)
        b.run()
        assert b.answer_all() > 0
    acknowledged = sum(b.next_offset.values())

    # Then the broker stalls: the waiting batch gives up after max.block.ms.
    assert wait_blocked(b, caller)
    b.run()  # drain what fits in a request: those batches are in flight, not answered
    b.advance(1000)
    caller.join()
    error = caller.error
    assert isinstance(error, BufferExhaustedError), error
    assert "max.block.ms=1000" in str(error)

    # The error accounts for every record queued before the failure: rows 0..k-1, in order.
    queued = error.queued_future  # type: ignore[attr-defined]
    assert isinstance(queued, BulkSendFuture)
    assert acknowledged < queued.record_count < n
    assert not queued.done()
    b.deliver_everything()
    assert queued.get(0) == {0: PartitionOffsets(0, queued.record_count - 1, queued.record_count)}
    assert sum(b.next_offset.values()) == queued.record_count
    values = [
        r.value for s in b.network.produce_requests() for r in s.batches()[(TOPIC, 0)].records
    ]
    assert values[: queued.record_count] == values_of(queued.record_count, 1000).to_pylist()
    assert b.peak_memory <= 64 * 1024
    assert b.accumulator.used_memory == 0


def test_a_slow_broker_that_keeps_freeing_memory_never_fails_the_call() -> None:
    b = make_bulk(buffer_memory=64 * 1024, max_block_ms=1000)
    n = 600
    caller = Caller(lambda: b.append(values_of(n, 1000)))
    rounds = 0
    while wait_blocked(b, caller):
        b.advance(999)
        b.run()
        b.answer_all()
        rounds += 1
    caller.join()
    assert caller.error is None
    assert rounds >= 5  # the call spanned several times max.block.ms
    assert caller.result is not None
    b.deliver_everything()
    assert caller.result.get(0) == {0: PartitionOffsets(0, n - 1, n)}


def test_batch_size_above_buffer_memory_seals_batches_that_fit_it() -> None:
    # Spark's sink leaves batch.size at Java's 16384, so a user's buffer.memory=16384 works
    # there; this sink's larger batch.size must not turn the same setting into a failure.
    b = make_bulk(buffer_memory=16384, batch_size=262144, max_block_ms=1000)
    n = 12
    caller = Caller(lambda: b.append(values_of(n, 15 * 1024)))
    while wait_blocked(b, caller):
        b.run()
        b.answer_all()
    caller.join()
    assert caller.error is None, caller.error
    assert caller.result is not None
    b.deliver_everything()
    assert caller.result.get(0) == {0: PartitionOffsets(0, n - 1, n)}
    assert b.peak_memory <= 16384


def test_sealing_is_incremental_under_buffer_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # Count the batches the encoder finishes (one compress call each): with a broker that never
    # answers, no more than one batch beyond what buffer.memory holds may be encoded.
    compressed = []

    def counting(ctype: CompressionType, level: int | None = None) -> Callable[[Any], bytes]:
        def compress(data: Any) -> bytes:
            compressed.append(len(data))
            return bytes(data)

        return compress

    monkeypatch.setattr(columnar, "compressor", counting)
    b = make_bulk(buffer_memory=64 * 1024, max_block_ms=1000)
    n = 4000  # ~4 MB, ~250 batches
    caller = Caller(lambda: b.append(values_of(n, 1000)))
    assert wait_blocked(b, caller)
    b.advance(1000)
    caller.join()
    assert isinstance(caller.error, BufferExhaustedError)
    queued = caller.error.queued_future  # type: ignore[attr-defined]
    in_pool = b.accumulator.used_memory
    assert in_pool <= 64 * 1024
    batches_queued = len(b.accumulator.incomplete_batches())
    assert batches_queued == 4
    assert len(compressed) <= batches_queued + 1
    assert sum(compressed) <= in_pool + 16 * 1024
    b.deliver_everything()
    assert queued.get(0)[0].record_count == queued.record_count


def test_close_while_waiting_hands_over_what_was_queued() -> None:
    b = make_bulk(buffer_memory=64 * 1024, max_block_ms=60_000)
    caller = Caller(lambda: b.append(values_of(1000, 1000)))
    assert wait_blocked(b, caller)
    b.accumulator.close()
    caller.join()
    assert isinstance(caller.error, ProducerClosedError)
    queued = caller.error.queued_future  # type: ignore[attr-defined]
    assert queued.record_count > 0
    b.deliver_everything()  # a closing producer still sends what was queued
    assert queued.get(0)[0].record_count == queued.record_count


def test_bad_input_queues_nothing_and_carries_no_future() -> None:
    b = make_bulk(buffer_memory=1 << 20)
    values = [b"x"] * 10 + [b"y" * (2 << 20)]  # the last record exceeds max.request.size
    with pytest.raises(RecordTooLargeError, match=r"record 10 .* max\.request\.size") as info:
        b.append(values)
    assert "of this call" not in str(info.value)
    assert str(info.value).endswith(
        "none of them was queued. Fix: raise max.request.size and the topic's max.message.bytes "
        "with it (the broker refuses a larger batch), or write smaller records"
    )
    assert not hasattr(info.value, "queued_future")
    assert not b.accumulator.has_incomplete()
    with pytest.raises(ValueError, match="out of range"):
        b.append([b"a", b"b"], partitions=[0, 1])
    assert not b.accumulator.has_incomplete()


def test_a_record_too_large_for_a_request_names_its_size_and_the_requests() -> None:
    """Its serialized size is the record's own; what max.request.size bounds is the request that
    would carry it alone, framing included: the error gives both, each for what it is."""
    b = make_bulk(buffer_memory=4 << 20)
    with pytest.raises(RecordTooLargeInColumnsError) as info:
        b.append([b"y" * (2 << 20)])
    error = info.value
    assert error.request_size is not None and error.size < error.request_size < error.size + 300
    assert (
        f"is {error.size} bytes when serialized, and a request carrying it "
        f"{error.request_size} bytes, larger than max.request.size=1048576"
    ) in str(error)


def test_windows_keep_keyed_placement_and_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk_module, "_WINDOW_ROWS", 7)
    monkeypatch.setattr(bulk_module, "_WINDOW_BYTES", 300)
    b = make_bulk(partitions=4, buffer_memory=1 << 20, batch_size=256)
    n = 500
    keys = [b"k%d" % (i % 37) for i in range(n)]
    values = [b"v%d" % i for i in range(n)]
    explicit = pa.array([2 if i % 11 == 0 else None for i in range(n)], pa.int32())
    future = b.append(pa.array(values, pa.binary()), pa.array(keys), partitions=explicit)
    b.deliver_everything()
    offsets = future.get(0)
    got: dict[int, list[bytes]] = {}
    for s in b.network.produce_requests():
        for (_t, p), batch in s.batches().items():
            got.setdefault(p, []).extend(r.value for r in batch.records)
    expected: dict[int, list[bytes]] = {}
    for i in range(n):
        p = 2 if i % 11 == 0 else (murmur2(keys[i]) & 0x7FFFFFFF) % 4
        expected.setdefault(p, []).append(values[i])
    assert got == expected
    assert {p: o.record_count for p, o in offsets.items()} == {p: len(v) for p, v in got.items()}


def test_null_timestamps_mean_now_and_negative_ones_are_refused() -> None:
    b = make_bulk(buffer_memory=1 << 20)
    b.advance(5)
    future = b.append([b"a", b"b"], timestamps_ms=pa.array([None, 1_600_000_000_000], pa.int64()))
    b.deliver_everything()
    future.get(0)
    (batch,) = [s.batches()[(TOPIC, 0)] for s in b.network.produce_requests()]
    assert [r.timestamp_ms for r in batch.records] == [b.clock.wall_ms(), 1_600_000_000_000]

    with pytest.raises(ValueError, match=r"timestamps_ms must be a non-negative int, got -1"):
        b.columns([b"a"], timestamps_ms=-1)
    with pytest.raises(ValueError, match=r"timestamps_ms\[2\] is -5: .*non-negative"):
        b.columns([b"a"] * 3, timestamps_ms=np.array([0, 1, -5], dtype=np.int64))
    with pytest.raises(ValueError, match=r"timestamps_ms\[1\] is -1"):
        b.columns([b"a"] * 3, timestamps_ms=pa.array([None, -1, 3], pa.int64()))
    with pytest.raises(ValueError, match=r"timestamps_ms\[0\] is -1"):
        b.columns([b"a"], timestamps_ms=[-1])


def test_producer_send_columns_refuses_negative_timestamps_before_waiting_for_metadata() -> None:
    # No broker: the refusal comes before any wait for metadata (send() is checked against a
    # real broker in tests/broker/test_producer_bulk.py).
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 200})
    try:
        with pytest.raises(ValueError, match="timestamps_ms must be a non-negative int, got -1"):
            producer.send_columns("t", [b"v"], timestamps_ms=-1)
        with pytest.raises(ValueError, match=r"timestamps_ms\[1\] is -1"):
            producer.send_columns("t", [b"v", b"w"], timestamps_ms=np.array([5, -1]))
    finally:
        producer.close(0)


_NO_PANDAS_SCRIPT = """
import random, sys
import numpy as np
import pyarrow as pa
from kafka_sink.clock import ManualClock
from kafka_sink.producer.accumulator import RecordAccumulator
from kafka_sink.producer.bulk import BulkAppender, bulk_columns
from kafka_sink.producer.partitioner import BuiltInPartitioner
from kafka_sink.net.metadata import PartitionInfo
from kafka_sink.records.compression import CompressionType

clock = ManualClock()
accumulator = RecordAccumulator(
    clock=clock, batch_size=16384, linger_ms=0, buffer_memory=1 << 26,
    compression_type=CompressionType.NONE,
)
appender = BulkAppender(
    accumulator=accumulator, partitioner=BuiltInPartitioner(16384, rng=random.Random(3)),
    clock=clock, max_block_ms=1000, max_request_size=1 << 20, ignore_keys=False,
    wakeup=lambda: None,
)
n = 5000
values = pa.Array.from_buffers(pa.binary(), n, [None,
    pa.py_buffer(np.arange(0, (n + 1) * 10, 10, dtype=np.int32)), pa.py_buffer(bytes(n * 10))])
valid = np.packbits(np.arange(n) % 7 != 0, bitorder="little")
keys = pa.Array.from_buffers(pa.binary(), n, [pa.py_buffer(valid),
    pa.py_buffer(np.arange(0, (n + 1) * 4, 4, dtype=np.int32)),
    pa.py_buffer(np.arange(n, dtype=">u4").tobytes())])
stamps = pa.Array.from_buffers(pa.int64(), n, [pa.py_buffer(valid),
    pa.py_buffer(np.full(n, 1_700_000_000_000, dtype=np.int64))])
parts = [PartitionInfo("t", p, 0, 0) for p in range(4)]
columns = bulk_columns(values, keys, partitions=None, headers=None, timestamps_ms=stamps,
                       wall_ms=clock.wall_ms)
appender.append("t", parts, columns)
print(len(accumulator.queued_partitions()))
print("pandas" in sys.modules)
"""


def test_send_columns_does_not_import_pandas() -> None:
    # pyarrow's to_numpy, pa.array and pa.scalar import pandas when it is installed: tens of MiB
    # of resident memory a producer process would pay for nothing (and the 1 GiB memory bound
    # of send_columns would not hold). The bulk path builds what it needs from Arrow buffers.
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _NO_PANDAS_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["4", "False"]
