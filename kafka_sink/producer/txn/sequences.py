"""TxnPartitionMap: the per-partition sequence bookkeeping of an idempotent producer.

Role (Java's ``TxnPartitionMap`` and ``TxnPartitionEntry``, with the unresolved and re-sequenced
partition sets Java keeps beside them in the TransactionManager): one ``TxnPartitionEntry`` per
partition remembers the (producer id, epoch) its sequences belong to, the ``next_sequence`` to
stamp, the ``last_acked_sequence`` (last record of the highest acknowledged batch) and the
``inflight_batches_by_sequence``: every stamped batch not yet completed, in sequence order,
whether it is in a request or queued for a retry. The map decides whether a partition's head
batch may be drained, stamps first-time batches, settles batches that failed for good, and says
when a sequence error reveals a gap that only an epoch bump repairs. The producer id and epoch
themselves, the bump and the transaction states belong to the ``TransactionManager``
(``producer.txn.manager``), which owns one map and passes its current id/epoch in.

Invariants:

- Sequences are per partition and per (producer id, epoch); they wrap at 2**31.
- A stamped batch keeps its stamp and bytes for every retry; only the first batch of
  ``inflight_batches_by_sequence`` may be drained as a retry (``firstInFlightSequence``), so
  retries go out in order while up to 5 requests are in flight. A partition's first batch of an
  (id, epoch) travels alone: until the broker acknowledged one, it has no state for us and would
  accept a later batch ahead of an earlier one that failed retriably.
- **A batch that fails for good never moves the other batches' sequences.** An earlier attempt
  of it may have been written, so its range is *unresolved* (the sequence right after it is
  remembered) and new batches of the partition wait; the batches already stamped keep their
  numbers. Once nothing of the partition is in flight, the range is settled: accounted for if
  ``last_acked_sequence`` is ``next_sequence - 1``, otherwise a real gap that needs a bump.
- A partition waiting to be re-sequenced (``partitions_to_rewrite_sequences``) drains nothing
  until none of its batches is in a request; then its in-flight batches are re-stamped from 0
  under the new epoch, in order. Other partitions move to a new epoch (from 0) only once they
  have nothing in flight, so the broker never sees a new-epoch batch while old-epoch ones of the
  partition may still land.
- Not locked itself: the TransactionManager calls in under its own lock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kafka_sink.errors import KafkaError, UnknownProducerIdError
from kafka_sink.producer.batch import ProducerBatch

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
NO_LAST_ACKED_SEQUENCE = -1
SEQUENCE_MASK = 0x7FFFFFFF


@dataclass(slots=True)
class TxnPartitionEntry:
    """The sequence state of one partition under one (producer id, epoch)."""

    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED_SEQUENCE
    inflight_batches_by_sequence: list[ProducerBatch] = field(default_factory=list)

    def first_in_flight(self) -> ProducerBatch | None:
        batches = self.inflight_batches_by_sequence
        return batches[0] if batches else None

    def remove_in_flight_batch(self, batch: ProducerBatch) -> bool:
        batches = self.inflight_batches_by_sequence
        for i, queued in enumerate(batches):
            if queued is batch:
                del batches[i]
                return True
        return False

    def is_next_sequence(self, sequence: int) -> bool:
        return sequence == (self.last_acked_sequence + 1) & SEQUENCE_MASK

    def stamped_by_this_epoch(self, batch: ProducerBatch) -> bool:
        """Was ``batch`` stamped under the (id, epoch) this entry's sequences belong to?"""
        return (batch.producer_id, batch.producer_epoch) == (
            self.producer_id,
            self.producer_epoch,
        )

    def reset_sequence_numbers(self, producer_id: int, producer_epoch: int) -> None:
        """Move a partition with nothing in flight to a new (id, epoch), from sequence 0."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = 0
        self.last_acked_sequence = NO_LAST_ACKED_SEQUENCE

    def add_inflight_batch(self, batch: ProducerBatch, transactional: bool) -> None:
        """Stamp a first-time batch with the next base sequence and track it."""
        batch.set_producer_state(
            self.producer_id, self.producer_epoch, self.next_sequence, transactional
        )
        self.next_sequence = (self.next_sequence + batch.record_count) & SEQUENCE_MASK
        self.inflight_batches_by_sequence.append(batch)

    def maybe_update_last_acked_sequence(self, last_sequence: int) -> None:
        if self.last_acked_sequence == NO_LAST_ACKED_SEQUENCE or last_sequence > (
            self.last_acked_sequence
        ):
            self.last_acked_sequence = last_sequence

    def start_sequences_at_beginning(
        self, producer_id: int, producer_epoch: int, transactional: bool
    ) -> None:
        """Re-stamp every in-flight batch from sequence 0 under a new (id, epoch), in order."""
        seq = 0
        for batch in self.inflight_batches_by_sequence:
            batch.set_producer_state(producer_id, producer_epoch, seq, transactional)
            seq = (seq + batch.record_count) & SEQUENCE_MASK
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = seq
        self.last_acked_sequence = NO_LAST_ACKED_SEQUENCE


class TxnPartitionMap:
    """The ``TxnPartitionEntry`` of every partition, with the partitions needing repair."""

    def __init__(self) -> None:
        self._entries: dict[TopicPartition, TxnPartitionEntry] = {}
        self._partitions_to_rewrite_sequences: set[TopicPartition] = set()
        # Partition -> the sequence right after the highest batch that failed for good there.
        self._partitions_with_unresolved_sequences: dict[TopicPartition, int] = {}

    def get(self, tp: TopicPartition) -> TxnPartitionEntry | None:
        return self._entries.get(tp)

    # -- drain ----------------------------------------------------------------------------

    def prepare_drain(self, batch: ProducerBatch, producer_id: int, producer_epoch: int) -> bool:
        """May ``batch`` (the head of its deque) be drained under (``producer_id``,
        ``producer_epoch``)? The sequence half of Java's shouldStopDrainBatchesForPartition, with
        maybeUpdateProducerIdAndEpoch for a partition that can move to the current epoch."""
        tp = batch.tp
        if tp in self._partitions_to_rewrite_sequences:
            return False
        entry = self._entries.get(tp)
        if entry is None:
            self._entries[tp] = TxnPartitionEntry(producer_id, producer_epoch)
            return not batch.has_sequence
        if batch.has_sequence:
            return entry.first_in_flight() is batch
        if tp in self._partitions_with_unresolved_sequences:
            return False
        if (entry.producer_id, entry.producer_epoch) != (producer_id, producer_epoch):
            if entry.inflight_batches_by_sequence:
                return False
            entry.reset_sequence_numbers(producer_id, producer_epoch)
        return (
            entry.last_acked_sequence != NO_LAST_ACKED_SEQUENCE
            or not entry.inflight_batches_by_sequence
        )

    def stamp(self, batch: ProducerBatch, transactional: bool) -> None:
        """Give a first-time batch (``prepare_drain`` let it through) its base sequence."""
        self._entries[batch.tp].add_inflight_batch(batch, transactional)

    # -- outcomes -------------------------------------------------------------------------

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        """The broker acknowledged ``batch`` (or recognised it as a duplicate)."""
        entry = self._entries.get(batch.tp)
        if entry is None or not batch.has_sequence:
            return
        entry.remove_in_flight_batch(batch)
        if entry.stamped_by_this_epoch(batch):
            entry.maybe_update_last_acked_sequence(batch.last_sequence)

    def handle_failed_batch(self, batch: ProducerBatch) -> None:
        """``batch`` failed for good: the other sequences stay, its range becomes unresolved."""
        entry = self._entries.get(batch.tp)
        if entry is None or not batch.has_sequence:
            return
        entry.remove_in_flight_batch(batch)
        tp = batch.tp
        if tp in self._partitions_to_rewrite_sequences:
            return  # the partition starts again from sequence 0 anyway
        if not entry.stamped_by_this_epoch(batch):
            return
        following = (batch.last_sequence + 1) & SEQUENCE_MASK
        known = self._partitions_with_unresolved_sequences.get(tp)
        if known is None or following > known:
            self._partitions_with_unresolved_sequences[tp] = following
        log.debug(
            "%s-%d: sequences up to %d unresolved after a failed batch",
            tp[0],
            tp[1],
            following - 1,
        )

    def sequence_error_needs_epoch_bump(self, batch: ProducerBatch, error: KafkaError) -> bool:
        """Does OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID on ``batch`` reveal a gap?

        UNKNOWN_PRODUCER_ID does, once. OUT_OF_ORDER_SEQUENCE_NUMBER does on the batch the broker
        should have taken next (right after the last acknowledged sequence, or right after an
        unresolved one), and on a first in-flight batch after an acknowledged one: nothing from
        there on was written, so re-stamping loses and duplicates nothing. An answer about an
        older epoch, or for a partition already waiting for its re-stamp, does not.
        """
        tp = batch.tp
        entry = self._entries.get(tp)
        if entry is None or tp in self._partitions_to_rewrite_sequences:
            return False  # a bump for this partition is already on its way
        if not entry.stamped_by_this_epoch(batch):
            return False  # an answer about an older epoch
        if isinstance(error, UnknownProducerIdError):
            return True
        unresolved = self._partitions_with_unresolved_sequences.get(tp)
        if unresolved is None:
            if entry.is_next_sequence(batch.base_sequence):
                return True
            # Nothing earlier is pending, yet the broker expects another sequence: this epoch
            # cannot make progress on the partition any more.
            return (
                entry.first_in_flight() is batch
                and entry.last_acked_sequence != NO_LAST_ACKED_SEQUENCE
            )
        # The batch right after the unresolved one (or after the last acknowledged one) is out
        # of order: nothing from there on was written.
        return batch.base_sequence == unresolved or entry.is_next_sequence(batch.base_sequence)

    def replace_split(
        self, parent: ProducerBatch, children: list[ProducerBatch], transactional: bool
    ) -> None:
        """A sequenced batch was split: its halves take over its sequence range, in order.

        The broker rejected the whole batch (nothing was written), so the first half's base
        sequence is the parent's and the next ones follow: no gap, no epoch bump (Java does the
        same in splitAndReenqueue).
        """
        seq = parent.base_sequence
        for child in children:
            child.set_producer_state(parent.producer_id, parent.producer_epoch, seq, transactional)
            seq = (seq + child.record_count) & SEQUENCE_MASK
        entry = self._entries.get(parent.tp)
        if entry is None:
            return
        batches = entry.inflight_batches_by_sequence
        for i, queued in enumerate(batches):
            if queued is parent:
                batches[i : i + 1] = children
                return

    # -- repairs --------------------------------------------------------------------------

    def mark_for_rewrite(self, tp: TopicPartition) -> None:
        """``tp`` restarts from sequence 0 under the next epoch."""
        self._partitions_to_rewrite_sequences.add(tp)

    def resolve_sequences(self) -> list[TopicPartition]:
        """Settle unresolved partitions that have nothing in flight any more; returns those
        with a real gap (their epoch must be bumped)."""
        gaps: list[TopicPartition] = []
        for tp, following in list(self._partitions_with_unresolved_sequences.items()):
            entry = self._entries.get(tp)
            if entry is not None and entry.inflight_batches_by_sequence:
                continue
            del self._partitions_with_unresolved_sequences[tp]
            if entry is None or entry.is_next_sequence(entry.next_sequence):
                log.debug("%s-%d: unresolved sequences resolved", tp[0], tp[1])
                continue
            log.info(
                "%s-%d: nothing in flight, last acknowledged sequence %d, next %d (a failed "
                "batch ended at %d): bumping the epoch and restarting sequences",
                tp[0],
                tp[1],
                entry.last_acked_sequence,
                entry.next_sequence,
                following - 1,
            )
            gaps.append(tp)
        return gaps

    def start_sequences_at_beginning_if_ready(
        self, producer_id: int, producer_epoch: int, transactional: bool
    ) -> list[TopicPartition]:
        """Re-stamp partitions waiting for a bump once none of their batches is in a request.

        Their in-flight batches get sequences 0.. under (``producer_id``, ``producer_epoch``),
        in their order. Returns the partitions re-stamped.
        """
        done: list[TopicPartition] = []
        for tp in list(self._partitions_to_rewrite_sequences):
            entry = self._entries.get(tp)
            if entry is not None and any(b.in_request for b in entry.inflight_batches_by_sequence):
                continue
            self._partitions_to_rewrite_sequences.discard(tp)
            self._partitions_with_unresolved_sequences.pop(tp, None)
            if entry is None:
                continue
            entry.start_sequences_at_beginning(producer_id, producer_epoch, transactional)
            done.append(tp)
        return done

    def reset_for_new_epoch(self) -> None:
        """A new (id, epoch) with nothing in flight: no repair is pending any more; every
        partition restarts at sequence 0 when it next drains (``prepare_drain`` moves it)."""
        self._partitions_with_unresolved_sequences.clear()
        self._partitions_to_rewrite_sequences.clear()

    def has_unresolved_sequences(self) -> bool:
        return bool(self._partitions_with_unresolved_sequences)

    # -- introspection (tests, diagnostics) -----------------------------------------------

    def next_sequence(self, tp: TopicPartition) -> int:
        entry = self._entries.get(tp)
        return 0 if entry is None else entry.next_sequence

    def last_acked_sequence(self, tp: TopicPartition) -> int:
        entry = self._entries.get(tp)
        return NO_LAST_ACKED_SEQUENCE if entry is None else entry.last_acked_sequence

    def in_flight_count(self, tp: TopicPartition) -> int:
        entry = self._entries.get(tp)
        return 0 if entry is None else len(entry.inflight_batches_by_sequence)

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        return tp in self._partitions_with_unresolved_sequences

    def has_pending_sequence_rewrite(self, tp: TopicPartition) -> bool:
        return tp in self._partitions_to_rewrite_sequences


__all__ = [
    "NO_LAST_ACKED_SEQUENCE",
    "SEQUENCE_MASK",
    "TopicPartition",
    "TxnPartitionEntry",
    "TxnPartitionMap",
]
