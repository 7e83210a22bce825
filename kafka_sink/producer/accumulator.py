"""RecordAccumulator: per-partition queues of ProducerBatches between send() and the Sender.

Theory of operation (Java's RecordAccumulator, simplified to one lock):

- ``append`` (user threads) adds a record to the last batch of the partition's deque, or opens a
  new batch. Opening a batch reserves ``max(batch.size, record size)`` bytes of the
  ``buffer.memory`` budget (a bulk batch reserves its sealed size); when the budget is spent the
  caller blocks up to ``max.block.ms`` and then gets BufferExhaustedError. ``batch.size`` is
  capped at ``buffer.memory``: a reservation above the whole budget could never be granted, and
  this sink's own ``batch.size`` default is larger than settings of ``buffer.memory`` that Java's
  producer (whose default ``batch.size`` is 16384) serves. The time blocked is added to
  ``bufferpool-wait-time-ns-total`` (when ``metrics`` is set). The reservation is
  returned when the batch completes (``deallocate``), so the bound covers queued *and* in-flight
  data, as Java's BufferPool does. ``try_append_to_open`` is ``send()``'s common case: a record
  without headers into the partition's open batch if it has room, else nothing changes and the
  caller goes through ``append``.
- ``ready`` (sender thread) says which leader nodes have something to send: a partition is
  sendable when its head batch is full, has lingered ``linger.ms`` (or, for a retry, waited its
  backoff), or when memory is exhausted, a flush is in progress or the producer is closing.
- ``drain`` takes at most one batch per partition per node, up to ``max.request.size`` counted
  over the whole request (the batches and the request's framing, ``framing.py``), stamps
  producer id / epoch / sequence (idempotence) and hands the batches to the sender.
- ``reenqueue`` puts a batch that will be retried back at the head of its deque (with
  idempotence: in sequence order, behind retries with lower sequences).
- ``expired_batches`` removes queued batches whose ``delivery.timeout.ms`` has passed.

Invariants:
- No batch reserves more than ``buffer.memory``: ``batch_size <= buffer_memory``, and a record
  larger than ``buffer.memory`` is refused before it reaches the accumulator.
- One lock (``_lock``) guards every deque, the memory counter and the incomplete set; the memory
  condition shares it. Nothing slow (compression, I/O, callbacks) runs under it.
- Within a partition, batches leave in deque order; a batch leaves its deque only by drain,
  expiry or abort, and every batch created is in ``_incomplete`` until it completes.
- No batch is opened once ``close()`` ran, also by an append that was waiting for memory: the
  closed flag is checked again, under the lock, after every wait.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kafka_sink.errors import BufferExhaustedError, KafkaTimeoutError, ProducerClosedError
from kafka_sink.producer.batch import ProducerBatch
from kafka_sink.producer.framing import PARTITION_FRAMING, topic_framing
from kafka_sink.producer.futures import FutureRecordMetadata
from kafka_sink.records.batch import RecordBatchBuilder, SealedBatch, estimate_record_size
from kafka_sink.records.compression import CompressionType

if TYPE_CHECKING:
    from kafka_sink.clock import Clock
    from kafka_sink.producer.futures import Callback
    from kafka_sink.producer.metrics import ProducerMetrics
    from kafka_sink.producer.txn.manager import TransactionManager

TopicPartition = tuple[str, int]


class _Node(Protocol):
    @property
    def node_id(self) -> int: ...


class LeaderLookup(Protocol):
    """The slice of Metadata the accumulator needs."""

    def leader_for(self, topic: str, partition: int) -> _Node | None: ...


@dataclass(slots=True)
class ReadyCheckResult:
    ready_nodes: set[int]
    next_ready_check_delay_ms: int
    unknown_leader_topics: set[str] = field(default_factory=set)


# (future, batch_is_full, new_batch_created): a plain tuple, as append() is per record.
AppendResult = tuple["FutureRecordMetadata", bool, bool]


class RecordAccumulator:
    def __init__(
        self,
        *,
        clock: Clock,
        batch_size: int = 16384,
        linger_ms: int = 5,
        buffer_memory: int = 32 * 1024 * 1024,
        delivery_timeout_ms: int = 120000,
        compression_type: CompressionType = CompressionType.NONE,
        compression_level: int | None = None,
        wakeup: Callable[[], None] | None = None,
    ) -> None:
        self._clock = clock
        # The size batches are cut at (see the module docstring); a record above it still gets
        # a batch of its own size, which send() has already checked against buffer.memory.
        self.batch_size = min(batch_size, buffer_memory)
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.delivery_timeout_ms = delivery_timeout_ms
        self.compression_type = compression_type
        self.compression_level = compression_level
        self._wakeup = wakeup
        self._lock = threading.Lock()
        self._memory_available = threading.Condition(self._lock)
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: dict[ProducerBatch, None] = {}
        self._used_memory = 0
        self._waiters = 0
        self._flushes_in_progress = 0
        self._closed = False
        self._muted: set[TopicPartition] = set()
        self._drain_index = 0
        # Set by the producer: bufferpool-wait-time-ns-total is recorded here.
        self.metrics: ProducerMetrics | None = None

    @property
    def available_memory(self) -> int:
        """buffer.memory not taken by a queued or in-flight batch (buffer-available-bytes)."""
        return self.buffer_memory - self._used_memory

    # -- user threads ---------------------------------------------------------------------

    def append(  # noqa: PLR0917 - positional on purpose: the per-record hot path
        self,
        topic: str,
        partition: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        callback: Callback | None,
        max_block_ms: int,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Append one record; ``now_ms`` defaults to the clock (read only for a new batch)."""
        tp = (topic, partition)
        with self._lock:
            if self._closed:
                raise ProducerClosedError("cannot send: the producer is closed")
            dq = self._batches.get(tp)
            if dq is None:
                dq = self._batches[tp] = deque()
            elif dq:
                future = dq[-1].try_append(timestamp_ms, key, value, headers, callback)
                if future is not None:
                    return future, len(dq) > 1, False
            size = max(self.batch_size, estimate_record_size(key, value, headers) + 61)
            if now_ms is None:
                now_ms = self._clock.now_ms()
            if self._used_memory + size > self.buffer_memory:
                retry = self._await_memory(size, max_block_ms, now_ms, dq, tp)
                if retry is not None:
                    retried = retry.try_append(timestamp_ms, key, value, headers, callback)
                    if retried is not None:
                        return retried, len(dq) > 1 or retry.full, False
                    if self._used_memory + size > self.buffer_memory:
                        self._await_memory(size, max_block_ms, now_ms, None, tp)
            self._used_memory += size
            builder = RecordBatchBuilder(
                compression_type=self.compression_type,
                compression_level=self.compression_level,
                batch_size=self.batch_size,
            )
            batch = ProducerBatch(topic, partition, now_ms, builder=builder, memory=size)
            first = batch.try_append(timestamp_ms, key, value, headers, callback)
            assert first is not None  # the first record always fits
            if dq:
                dq[-1].full = True
            dq.append(batch)
            self._incomplete[batch] = None
            return first, len(dq) > 1 or batch.full, True

    def try_append_to_open(  # noqa: PLR0917 - positional on purpose: the per-record hot path
        self,
        topic: str,
        partition: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        callback: Callback | None,
    ) -> FutureRecordMetadata | None:
        """Append a record without headers to the partition's open batch if it has room.

        None (and nothing changed) when there is no open batch with room or the accumulator is
        closed: the caller then goes through ``append``, which opens a batch, waits for memory
        or raises. This is ``send()``'s common case without the rest of ``append``'s branches.
        """
        with self._lock:
            dq = self._batches.get((topic, partition))
            if not dq or self._closed:
                return None
            # ProducerBatch.try_append without headers, inlined: calling it costs 40-50 ns, 2% of
            # a send() (test_send_fast_path holds this path to the general one byte for byte).
            last = dq[-1]
            builder = last.builder
            if builder is None or last.full:
                return None
            delta = builder.append(timestamp_ms, key, value)
            if delta is None:
                return None
            last.record_count = delta + 1
            future = FutureRecordMetadata(
                last.result,
                delta,
                timestamp_ms,
                -1 if key is None else len(key),
                -1 if value is None else len(value),
            )
            if callback is not None:
                last.add_thunk(callback, future)
            return future

    def append_sealed(
        self, topic: str, partition: int, sealed: SealedBatch, max_block_ms: int, now_ms: int
    ) -> ProducerBatch:
        """Queue an already sealed batch (the bulk path); blocks for memory like append.

        ``now_ms`` starts this batch's max.block.ms wait (and its delivery timeout): the bulk
        path passes a fresh time per batch, so the bound is per batch, not per call.
        """
        tp = (topic, partition)
        size = sealed.size_bytes
        with self._lock:
            if self._closed:
                raise ProducerClosedError("cannot send: the producer is closed")
            dq = self._batches.get(tp)
            if dq is None:
                dq = self._batches[tp] = deque()
            if self._used_memory + size > self.buffer_memory:
                self._await_memory(size, max_block_ms, now_ms, None, tp)
                if self._closed:
                    raise ProducerClosedError("cannot send: the producer is closed")
            self._used_memory += size
            batch = ProducerBatch(topic, partition, now_ms, sealed=sealed, memory=size)
            if dq:
                dq[-1].full = True
            dq.append(batch)
            self._incomplete[batch] = None
            return batch

    def _await_memory(
        self,
        size: int,
        max_block_ms: int,
        now_ms: int,
        dq: deque[ProducerBatch] | None,
        tp: TopicPartition,
    ) -> ProducerBatch | None:
        """Block (lock held, released while waiting) until ``size`` bytes fit.

        Returns the partition's new last batch if one appeared while waiting (the caller tries
        it first, as Java does), else None once the memory is available. Raises
        ProducerClosedError if the accumulator is closed when it returns, so no caller ever
        opens a batch in a closed accumulator after waiting.
        """
        if size > self.buffer_memory:
            raise BufferExhaustedError(
                f"a batch of {size} bytes can never fit in buffer.memory={self.buffer_memory}"
            )
        deadline = now_ms + max_block_ms
        start_last = dq[-1] if dq else None
        metrics = self.metrics
        start_ns = metrics.nanos() if metrics is not None else 0
        self._waiters += 1
        try:
            if self._wakeup is not None:
                self._wakeup()  # ready() treats waiters as "send everything now"
            while self._used_memory + size > self.buffer_memory:
                if self._closed:
                    raise ProducerClosedError("cannot send: the producer is closed")
                remaining = deadline - self._clock.now_ms()
                if remaining <= 0:
                    raise BufferExhaustedError(
                        f"failed to allocate {size} bytes for {tp[0]}-{tp[1]} within "
                        f"max.block.ms={max_block_ms}: buffer.memory={self.buffer_memory} is "
                        f"full ({self._used_memory} bytes queued or in flight); the brokers are "
                        "not keeping up or are unreachable"
                    )
                self._memory_available.wait(min(remaining, 1000) / 1000.0)
                if self._closed:
                    break
                if dq is not None and dq and dq[-1] is not start_last and not dq[-1].full:
                    return dq[-1]
        finally:
            self._waiters -= 1
            if metrics is not None:
                metrics.record_time_ns("bufferpool-wait", metrics.nanos() - start_ns)
        # The memory may have been freed by close() failing everything (a crashed sender
        # included): a batch opened now would never be drained, so its future would never
        # complete (Java re-checks after each allocation as well).
        if self._closed:
            raise ProducerClosedError(
                "the producer was closed while allocating memory for this record; it was not sent"
            )
        return None

    # -- sender thread --------------------------------------------------------------------

    def ready(self, metadata: LeaderLookup, now_ms: int) -> ReadyCheckResult:
        ready_nodes: set[int] = set()
        unknown: set[str] = set()
        next_delay = 2**31 - 1
        linger = self.linger_ms
        with self._lock:
            send_all = self._waiters > 0 or self._closed or self._flushes_in_progress > 0
            muted = self._muted
            for tp, dq in self._batches.items():
                if not dq:
                    continue
                leader = metadata.leader_for(tp[0], tp[1])
                if leader is None:
                    unknown.add(tp[0])
                    continue
                node_id = leader.node_id
                if node_id in ready_nodes or tp in muted:
                    continue
                batch = dq[0]
                if batch.attempts > 0 and now_ms < batch.next_attempt_ms:
                    next_delay = min(next_delay, batch.next_attempt_ms - now_ms)
                    continue
                waited = now_ms - batch.last_attempt_ms
                if send_all or batch.attempts > 0 or batch.full or len(dq) > 1 or waited >= linger:
                    ready_nodes.add(node_id)
                else:
                    next_delay = min(next_delay, linger - waited)
        return ReadyCheckResult(ready_nodes, max(next_delay, 0), unknown)

    def drain(
        self,
        metadata: LeaderLookup,
        nodes: Iterable[int],
        max_request_size: int,
        now_ms: int,
        transaction_manager: TransactionManager | None = None,
        *,
        request_framing: int = 0,
    ) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each node, within max_request_size.

        A node's request counts ``request_framing`` once, each of its topics' framing once and
        each batch's partition entry besides the batch (``framing.py``): the whole request, as
        the broker counts it against its ``socket.request.max.bytes``.
        """
        wanted = set(nodes)
        out: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        topics: dict[int, set[str]] = {}
        with self._lock:
            items = [(tp, dq) for tp, dq in self._batches.items() if dq]
            if not items:
                return out
            start = self._drain_index % len(items)
            self._drain_index += 1
            for i in range(len(items)):
                tp, dq = items[(start + i) % len(items)]
                if tp in self._muted:
                    continue
                leader = metadata.leader_for(tp[0], tp[1])
                if leader is None or leader.node_id not in wanted:
                    continue
                node_id = leader.node_id
                first = dq[0]
                if first.attempts > 0 and now_ms < first.next_attempt_ms:
                    continue
                size = sizes.get(node_id, request_framing)
                request_topics = topics.setdefault(node_id, set())
                batch_size = first.estimated_size_bytes() + PARTITION_FRAMING
                if tp[0] not in request_topics:
                    batch_size += topic_framing(tp[0])
                # A single batch above max.request.size still goes alone (compression can
                # make the estimate pessimistic); it is never split across requests.
                if request_topics and size + batch_size > max_request_size:
                    continue
                if transaction_manager is not None and not transaction_manager.prepare_drain(first):
                    continue
                dq.popleft()
                first.full = True
                first.drained_ms = now_ms
                first.in_request = True
                if transaction_manager is not None:
                    transaction_manager.stamp(first)
                sizes[node_id] = size + batch_size
                request_topics.add(tp[0])
                out.setdefault(node_id, []).append(first)
        return out

    def reenqueue(self, batch: ProducerBatch, now_ms: int, backoff_ms: int) -> None:
        """Put a batch back at the head of its deque for a retry after ``backoff_ms``."""
        with self._lock:
            batch.attempts += 1
            batch.last_attempt_ms = now_ms
            batch.next_attempt_ms = now_ms + backoff_ms
            batch.in_request = False
            self._insert_at_head(batch)

    def _insert_at_head(self, batch: ProducerBatch) -> None:
        dq = self._batches.get(batch.tp)
        if dq is None:
            dq = self._batches[batch.tp] = deque()
        if not batch.has_sequence:
            dq.appendleft(batch)
            return
        # Retries keep sequence order: behind queued retries with lower sequences, in front of
        # everything else (Java insertInSequenceOrder).
        i = 0
        for queued in dq:
            if not queued.has_sequence or queued.base_sequence > batch.base_sequence:
                break
            i += 1
        dq.insert(i, batch)

    def reenqueue_split(self, child: ProducerBatch, parent: ProducerBatch, now_ms: int) -> None:
        """Queue one half of a split batch at the head (no backoff: a split is not a retry)."""
        with self._lock:
            self._incomplete[child] = None
            child.last_attempt_ms = now_ms
            child.next_attempt_ms = now_ms
            self._insert_at_head(child)

    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches past delivery.timeout.ms (head first, in order)."""
        expired: list[ProducerBatch] = []
        timeout = self.delivery_timeout_ms
        with self._lock:
            for dq in self._batches.values():
                while dq and now_ms - dq[0].created_ms >= timeout:
                    batch = dq.popleft()
                    batch.full = True
                    expired.append(batch)
        return expired

    def next_expiry_ms(self) -> int | None:
        with self._lock:
            heads = [dq[0].created_ms for dq in self._batches.values() if dq]
        return min(heads) + self.delivery_timeout_ms if heads else None

    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a completed batch and return its memory to the pool."""
        with self._lock:
            if self._incomplete.pop(batch, 0) is None:
                self._used_memory -= batch.memory
                self._memory_available.notify_all()

    def mute(self, tp: TopicPartition) -> None:
        with self._lock:
            self._muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        with self._lock:
            self._muted.discard(tp)

    # -- flush / close --------------------------------------------------------------------

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes_in_progress += 1

    def end_flush(self) -> None:
        with self._lock:
            self._flushes_in_progress -= 1

    def await_flush_completion(self, timeout_ms: int | None) -> None:
        """Wait for every batch that existed when called; KafkaTimeoutError after timeout."""
        with self._lock:
            # Results, not batches: a completed batch's bytes must not live on until the
            # whole flush returns (that would hold up to buffer.memory twice over).
            pending = [(batch.result, batch.record_count) for batch in self._incomplete]
        deadline = None if timeout_ms is None else self._clock.now_ms() + timeout_ms
        for result, _count in pending:
            if deadline is None:
                result.wait()
                continue
            # Past the deadline a batch that is already done still counts as done.
            remaining = max(deadline - self._clock.now_ms(), 0)
            if not result.wait(remaining / 1000.0):
                left = [(r, n) for r, n in pending if not r.done()]
                records = sum(n for _r, n in left)
                raise KafkaTimeoutError(
                    f"flush timed out after {timeout_ms} ms: {records} record(s) in "
                    f"{len(left)} batch(es) not yet acknowledged (they stay queued)"
                )

    def close(self) -> None:
        """Refuse new appends; queued batches are still sent (ready() sends immediately)."""
        with self._lock:
            self._closed = True
            self._memory_available.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self._batches.values())

    def has_incomplete(self) -> bool:
        with self._lock:
            return bool(self._incomplete)

    def incomplete_batches(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._incomplete)

    def undrained_batches(self) -> list[ProducerBatch]:
        """Remove and return every queued batch (for abort)."""
        with self._lock:
            out = [b for dq in self._batches.values() for b in dq]
            for dq in self._batches.values():
                dq.clear()
            return out

    def abort_undrained_unsequenced(self) -> list[ProducerBatch]:
        """Remove and return the queued batches that were never sent (no sequence yet).

        For a transaction being aborted (Java's abortUndrainedBatches): a queued retry keeps its
        place, because whether an earlier attempt was written is unknown until it is answered.
        """
        with self._lock:
            out: list[ProducerBatch] = []
            for dq in self._batches.values():
                if not dq:
                    continue
                keep = [b for b in dq if b.has_sequence]
                if len(keep) != len(dq):
                    out.extend(b for b in dq if not b.has_sequence)
                    dq.clear()
                    dq.extend(keep)
            return out

    def queued_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return [tp for tp, dq in self._batches.items() if dq]

    @property
    def used_memory(self) -> int:
        return self._used_memory
