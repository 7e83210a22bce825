"""ProducerBatch: the records bound for one partition that travel in one Produce request.

Role: wraps either an open :class:`~kafka_sink.records.batch.RecordBatchBuilder` (the ``send()``
path) or a :class:`~kafka_sink.records.batch.SealedBatch` built by the bulk path, plus what the
sender needs to track its life: attempts, creation/drain/attempt times, the producer state
stamped at drain, and the futures and callbacks to complete.

Invariants:
- The records section is sealed (and compressed) once, at the first drain; the full batch bytes
  are encoded with (producer id, epoch, base sequence) then and cached, so every retry resends
  exactly the same bytes. Only an epoch bump (which changes the stamp) re-encodes them.
- A batch completes once: ``done()`` after the first completion is a no-op returning False.
- Callbacks run in append order, after the batch's result is set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafka_sink.producer.futures import Callback, FutureRecordMetadata, ProduceRequestResult
from kafka_sink.records.batch import RecordBatchBuilder, SealedBatch

if TYPE_CHECKING:
    from collections.abc import Sequence

NO_SEQUENCE = -1


class ProducerBatch:
    __slots__ = (
        "attempts",
        "base_sequence",
        "builder",
        "created_ms",
        "drained_ms",
        "encoded",
        "full",
        "in_request",
        "last_attempt_ms",
        "last_error",
        "memory",
        "next_attempt_ms",
        "partition",
        "producer_epoch",
        "producer_id",
        "record_count",
        "result",
        "sealed",
        "thunks",
        "topic",
        "tp",
        "transactional",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        created_ms: int,
        *,
        builder: RecordBatchBuilder | None = None,
        sealed: SealedBatch | None = None,
        memory: int = 0,
    ) -> None:
        if (builder is None) == (sealed is None):
            raise ValueError("a ProducerBatch holds a builder or a sealed batch, not both")
        self.topic = topic
        self.partition = partition
        self.tp = (topic, partition)
        self.created_ms = created_ms
        self.last_attempt_ms = created_ms
        self.next_attempt_ms = 0
        self.drained_ms = -1
        self.attempts = 0
        self.builder = builder
        self.sealed = sealed
        self.record_count = sealed.record_count if sealed is not None else 0
        self.full = sealed is not None
        self.result = ProduceRequestResult(topic, partition)
        self.thunks: list[tuple[Callback, FutureRecordMetadata]] | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = NO_SEQUENCE
        self.transactional = False
        self.encoded: bytes | None = None
        self.in_request = False
        self.last_error: BaseException | None = None
        self.memory = memory

    # -- appending (caller holds the accumulator lock) ------------------------------------

    def try_append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        callback: Callback | None,
    ) -> FutureRecordMetadata | None:
        builder = self.builder
        if builder is None or self.full:
            return None
        delta = builder.append(timestamp_ms, key, value, headers)
        if delta is None:
            self.full = True
            return None
        self.record_count = delta + 1
        future = FutureRecordMetadata(
            self.result,
            delta,
            timestamp_ms,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )
        if callback is not None:
            self.add_thunk(callback, future)
        return future

    def add_thunk(self, callback: Callback, future: FutureRecordMetadata) -> None:
        if self.thunks is None:
            self.thunks = []
        self.thunks.append((callback, future))

    def is_full(self) -> bool:
        return self.full

    def estimated_size_bytes(self) -> int:
        if self.sealed is not None:
            return self.sealed.size_bytes
        assert self.builder is not None
        return self.builder.estimated_size_bytes

    # -- draining (sender thread) ---------------------------------------------------------

    def close_for_appends(self) -> SealedBatch:
        """Seal the records (compressing them once); idempotent."""
        if self.sealed is None:
            assert self.builder is not None
            self.full = True
            self.sealed = self.builder.seal()
            self.builder = None
        return self.sealed

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool
    ) -> None:
        """Stamp the producer state; drops cached bytes only if the stamp changed."""
        if (
            self.producer_id != producer_id
            or self.producer_epoch != producer_epoch
            or self.base_sequence != base_sequence
            or self.transactional != transactional
        ):
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch
            self.base_sequence = base_sequence
            self.transactional = transactional
            self.encoded = None

    def encode(self) -> bytes:
        """The full RecordBatch bytes; computed once per producer stamp, then reused."""
        encoded = self.encoded
        if encoded is None:
            sealed = self.close_for_appends()
            encoded = self.encoded = sealed.encode(
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
                is_transactional=self.transactional,
            )
        return encoded

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.record_count - 1) & 0x7FFFFFFF

    # -- completion ----------------------------------------------------------------------

    def is_done(self) -> bool:
        return self.result.done()

    def done(self, base_offset: int, log_append_time_ms: int, error: BaseException | None) -> bool:
        """Complete the batch (and run its callbacks); False if it was already complete."""
        if not self.result.complete(base_offset, log_append_time_ms, error):
            return False
        thunks, self.thunks = self.thunks, None
        if thunks:
            for callback, future in thunks:
                future.add_callback(callback)
        return True

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.topic}-{self.partition}, records={self.record_count}, "
            f"attempts={self.attempts}, seq={self.base_sequence})"
        )
