"""TransactionManager: producer id, epoch and per-partition sequence numbers (idempotence).

Role (Java's TransactionManager, idempotent part): holds the producer id/epoch obtained with
InitProducerId, stamps each batch with its partition's next base sequence when it is first
drained, tracks every stamped batch until it is resolved, and recovers from sequence gaps with
an epoch bump (KIP-360) without dropping any in-flight data.

Theory of operation:
- Sequences are per partition and per (producer id, epoch); each partition remembers the id and
  epoch its sequences belong to. After a global epoch change a partition moves to the new epoch
  (starting again at sequence 0) only once none of its batches is unresolved, so the broker
  never sees a new-epoch batch while old-epoch ones may still land.
- A stamped batch stays in its partition's ``unresolved`` list (in sequence order) until it
  succeeds or fails for good. A retried batch keeps its stamp and bytes. Only the first
  unresolved batch of a partition may be drained as a retry (Java's firstInFlightSequence rule),
  which keeps retries in order while up to 5 requests are in flight.
- OUT_OF_ORDER_SEQUENCE_NUMBER on the batch right after the last acknowledged one, or
  UNKNOWN_PRODUCER_ID, or a stamped batch that failed for good, means a real gap: the epoch is
  bumped (locally, epoch + 1, as Java does for idempotent producers; a new InitProducerId when
  the epoch would overflow), and once the partition has no request in flight its unresolved
  batches are re-stamped from sequence 0 under the new epoch and sent again, in order.

Locking: one lock; callers may hold the accumulator lock when calling in (never the reverse).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kafka_sink.errors import KafkaError
from kafka_sink.producer.batch import NO_SEQUENCE, ProducerBatch

TopicPartition = tuple[str, int]
MAX_EPOCH = 32767
_SEQ_MASK = 0x7FFFFFFF


@dataclass(slots=True)
class _PartitionEntry:
    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    last_acked_sequence: int = -1
    unresolved: list[ProducerBatch] = field(default_factory=list)


class TransactionManager:
    def __init__(self, transactional_id: str | None = None) -> None:
        if transactional_id is not None:
            raise NotImplementedError("transactions are not implemented")
        self._lock = threading.Lock()
        self.producer_id = -1
        self.producer_epoch = -1
        self._entries: dict[TopicPartition, _PartitionEntry] = {}
        self._bump_required = False
        self._partitions_to_reset: set[TopicPartition] = set()
        self.fatal_error: KafkaError | None = None
        self.init_in_flight = False
        self.next_init_attempt_ms = 0
        self.init_attempts = 0

    # -- producer id ----------------------------------------------------------------------

    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        with self._lock:
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch
            self.init_attempts = 0

    # -- drain (called under the accumulator lock) ----------------------------------------

    def prepare_drain(self, batch: ProducerBatch) -> bool:
        """May ``batch`` (the head of its deque) be drained now?"""
        with self._lock:
            if self.producer_id < 0 or self.fatal_error is not None:
                return False
            tp = batch.tp
            if tp in self._partitions_to_reset:
                return False
            entry = self._entries.get(tp)
            if entry is None:
                self._entries[tp] = _PartitionEntry(self.producer_id, self.producer_epoch)
                return not batch.has_sequence
            if batch.has_sequence:
                return bool(entry.unresolved) and entry.unresolved[0] is batch
            if (entry.producer_id, entry.producer_epoch) != (self.producer_id, self.producer_epoch):
                if entry.unresolved:
                    return False
                entry.producer_id = self.producer_id
                entry.producer_epoch = self.producer_epoch
                entry.next_sequence = 0
                entry.last_acked_sequence = -1
            # Until the broker acknowledged a first batch of this (id, epoch) on the partition
            # it has no state for us and accepts *any* sequence: a second batch in flight could
            # then be written ahead of a first one that failed retriably. So the first batch
            # travels alone.
            return entry.last_acked_sequence >= 0 or not entry.unresolved

    def stamp(self, batch: ProducerBatch) -> None:
        """Give a first-time batch its base sequence (retries keep theirs)."""
        if batch.has_sequence:
            return
        with self._lock:
            entry = self._entries[batch.tp]
            batch.set_producer_state(
                entry.producer_id, entry.producer_epoch, entry.next_sequence, False
            )
            entry.next_sequence = (entry.next_sequence + batch.record_count) & _SEQ_MASK
            entry.unresolved.append(batch)

    # -- outcomes -------------------------------------------------------------------------

    def batch_succeeded(self, batch: ProducerBatch) -> None:
        with self._lock:
            entry = self._entries.get(batch.tp)
            if entry is None or not batch.has_sequence:
                return
            self._forget(entry, batch)
            if (batch.producer_id, batch.producer_epoch) == (
                entry.producer_id,
                entry.producer_epoch,
            ):
                entry.last_acked_sequence = batch.last_sequence

    def batch_failed(self, batch: ProducerBatch) -> None:
        """A stamped batch failed for good: its sequence leaves a gap, so bump the epoch."""
        with self._lock:
            entry = self._entries.get(batch.tp)
            if entry is None or not batch.has_sequence:
                return
            if self._forget(entry, batch):
                self._request_bump(batch.tp)

    def can_retry_sequence_error(self, batch: ProducerBatch, unknown_producer: bool) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID: always retried (idempotent only).

        A bump is requested when the batch is the next one the broker should have accepted
        (a real gap), or when the broker lost our producer state.
        """
        with self._lock:
            entry = self._entries.get(batch.tp)
            if entry is None:
                return True
            expected = (entry.last_acked_sequence + 1) & _SEQ_MASK
            stale = (batch.producer_id, batch.producer_epoch) != (
                entry.producer_id,
                entry.producer_epoch,
            )
            if unknown_producer or (not stale and batch.base_sequence == expected):
                self._request_bump(batch.tp)
            elif (
                not stale
                and entry.unresolved
                and entry.unresolved[0] is batch
                and entry.last_acked_sequence >= 0
            ):
                # Nothing earlier is pending, yet the broker expects another sequence: this
                # epoch cannot make progress on the partition any more.
                self._request_bump(batch.tp)
            return True

    def replace_split(self, parent: ProducerBatch, children: list[ProducerBatch]) -> None:
        """A sequenced batch was split: its halves take over its sequence range, in order.

        The broker rejected the whole batch (nothing was written), so the first half's base
        sequence is the parent's and the next ones follow: no gap, no epoch bump (Java does the
        same in splitAndReenqueue).
        """
        with self._lock:
            seq = parent.base_sequence
            for child in children:
                child.set_producer_state(parent.producer_id, parent.producer_epoch, seq, False)
                seq = (seq + child.record_count) & _SEQ_MASK
            entry = self._entries.get(parent.tp)
            if entry is None:
                return
            for i, queued in enumerate(entry.unresolved):
                if queued is parent:
                    entry.unresolved[i : i + 1] = children
                    return

    def _forget(self, entry: _PartitionEntry, batch: ProducerBatch) -> bool:
        for i, queued in enumerate(entry.unresolved):
            if queued is batch:
                del entry.unresolved[i]
                return True
        return False

    def _request_bump(self, tp: TopicPartition) -> None:
        self._bump_required = True
        self._partitions_to_reset.add(tp)

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        with self._lock:
            self._request_bump(tp)

    # -- epoch bump (sender thread, start of each run) ------------------------------------

    def bump_epoch_if_needed(self) -> bool:
        """Apply a requested bump; True when a new InitProducerId is needed instead."""
        with self._lock:
            if not self._bump_required or self.producer_id < 0:
                return self.producer_id < 0
            self._bump_required = False
            if self.producer_epoch >= MAX_EPOCH:
                self.producer_id = -1
                self.producer_epoch = -1
                return True
            self.producer_epoch += 1
            return False

    def reset_partitions_ready(self) -> list[TopicPartition]:
        """Re-stamp partitions waiting for a reset whose batches are all back in the queue.

        Their unresolved batches get sequences 0.. under the current id/epoch, in their order.
        Returns the partitions reset.
        """
        done: list[TopicPartition] = []
        with self._lock:
            if self.producer_id < 0 or self._bump_required:
                return done
            for tp in list(self._partitions_to_reset):
                entry = self._entries.get(tp)
                if entry is None:
                    self._partitions_to_reset.discard(tp)
                    continue
                if any(b.in_request for b in entry.unresolved):
                    continue
                seq = 0
                for b in entry.unresolved:
                    b.set_producer_state(self.producer_id, self.producer_epoch, seq, False)
                    seq = (seq + b.record_count) & _SEQ_MASK
                entry.producer_id = self.producer_id
                entry.producer_epoch = self.producer_epoch
                entry.next_sequence = seq
                entry.last_acked_sequence = -1
                self._partitions_to_reset.discard(tp)
                done.append(tp)
        return done

    # -- introspection (tests, diagnostics) -----------------------------------------------

    def next_sequence(self, tp: TopicPartition) -> int:
        with self._lock:
            entry = self._entries.get(tp)
            return 0 if entry is None else entry.next_sequence

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        with self._lock:
            entry = self._entries.get(tp)
            return -1 if entry is None else entry.last_acked_sequence

    def unresolved_count(self, tp: TopicPartition) -> int:
        with self._lock:
            entry = self._entries.get(tp)
            return 0 if entry is None else len(entry.unresolved)

    def pending_reset(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._partitions_to_reset


__all__ = ["MAX_EPOCH", "NO_SEQUENCE", "TransactionManager"]
