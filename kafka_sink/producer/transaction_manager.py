"""TransactionManager: producer id, epoch and per-partition sequence numbers (idempotence).

Role (Java's TransactionManager, idempotent part): holds the producer id/epoch obtained with
InitProducerId, stamps each batch with its partition's next base sequence when it is first
drained, tracks every stamped batch until it completes, and decides, for every failure, whether
the partition's sequences can go on or need an epoch bump (KIP-360). Transactions will build on
the same bookkeeping.

Theory of operation (the names are Java's):

- Sequences are per partition and per (producer id, epoch). Each partition's entry remembers
  the id/epoch its sequences belong to, the ``next_sequence`` to stamp, the
  ``last_acked_sequence`` (last record of the highest acknowledged batch) and the
  ``inflight_batches_by_sequence``: every stamped batch not yet completed, in sequence order,
  whether it is in a request or queued for a retry.
- A stamped batch keeps its stamp and bytes for every retry; only the first batch of
  ``inflight_batches_by_sequence`` may be drained as a retry (``firstInFlightSequence``), so
  retries go out in order while up to 5 requests are in flight. A partition's first batch of an
  (id, epoch) travels alone: until the broker acknowledged one, it has no state for us and would
  accept a later batch ahead of an earlier one that failed retriably.
- **A batch that fails for good never moves the other batches' sequences.** Whether it expired,
  exhausted ``retries`` or got a non-retriable error, an earlier attempt may have been written
  (a lost response, a retry refused for an unrelated reason), so its sequence range is
  *unresolved*: ``handle_failed_batch`` records the sequence right after it
  (``partitions_with_unresolved_sequences``) and new batches of that partition wait. The later
  batches already stamped keep their numbers and are retried as they are: if the failed batch
  was written, they are accepted (or recognised as duplicates) as usual.
- ``maybe_resolve_sequences`` (start of each sender run) settles an unresolved partition once
  nothing of it is in flight: if ``last_acked_sequence`` is ``next_sequence - 1`` every stamped
  batch is accounted for (the failed one was written, since the broker accepted what followed)
  and the partition simply goes on; otherwise there is a real gap and an epoch bump is
  requested for it.
- An epoch bump is also requested by OUT_OF_ORDER_SEQUENCE_NUMBER on the batch the broker
  should have taken next (right after the last acknowledged sequence, or right after an
  unresolved one): nothing after that point can have been written, so re-stamping loses and
  duplicates nothing. Other OUT_OF_ORDER_SEQUENCE_NUMBER answers are retried without a bump,
  waiting for the earlier batches. UNKNOWN_PRODUCER_ID (brokers up to 2.4) requests a bump,
  once: a batch from an epoch that was already bumped, or from a partition already waiting for
  its re-stamp, is only retried (``can_retry``).
- A bump is local (epoch + 1, as Java does for an idempotent producer; a new InitProducerId when
  the epoch would overflow). The partitions that requested it (``partitions_to_rewrite_sequences``)
  drain nothing until none of their batches is in a request; then
  ``start_sequences_at_beginning`` re-stamps their in-flight batches from sequence 0 under the
  new epoch, in order, and clears their unresolved state. Other partitions move to the new
  epoch (from 0) only once they have nothing in flight, so the broker never sees a new-epoch
  batch while old-epoch ones of the partition may still land.

Locking: one lock; callers may hold the accumulator lock when calling in (never the reverse).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from kafka_sink.errors import KafkaError, OutOfOrderSequenceNumberError, UnknownProducerIdError
from kafka_sink.producer.batch import NO_SEQUENCE, ProducerBatch

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
MAX_EPOCH = 32767
NO_LAST_ACKED_SEQUENCE = -1
_SEQ_MASK = 0x7FFFFFFF


@dataclass(slots=True)
class _TopicPartitionEntry:
    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED_SEQUENCE
    inflight_batches_by_sequence: list[ProducerBatch] = field(default_factory=list)

    def first_in_flight(self) -> ProducerBatch | None:
        batches = self.inflight_batches_by_sequence
        return batches[0] if batches else None

    def remove(self, batch: ProducerBatch) -> bool:
        batches = self.inflight_batches_by_sequence
        for i, queued in enumerate(batches):
            if queued is batch:
                del batches[i]
                return True
        return False

    def is_next_sequence(self, sequence: int) -> bool:
        return sequence == (self.last_acked_sequence + 1) & _SEQ_MASK


class TransactionManager:
    def __init__(self, transactional_id: str | None = None) -> None:
        if transactional_id is not None:
            raise NotImplementedError("transactions are not implemented")
        self._lock = threading.Lock()
        self.producer_id = -1
        self.producer_epoch = -1
        self._entries: dict[TopicPartition, _TopicPartitionEntry] = {}
        self._epoch_bump_required = False
        self._partitions_to_rewrite_sequences: set[TopicPartition] = set()
        # Partition -> the sequence right after the highest batch that failed for good there.
        self._partitions_with_unresolved_sequences: dict[TopicPartition, int] = {}
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
        """May ``batch`` (the head of its deque) be drained now?

        The negation of Java's shouldStopDrainBatchesForPartition, plus
        maybeUpdateProducerIdAndEpoch for a partition that can move to the current epoch.
        """
        with self._lock:
            if self.producer_id < 0 or self.fatal_error is not None:
                return False
            tp = batch.tp
            if tp in self._partitions_to_rewrite_sequences:
                return False
            entry = self._entries.get(tp)
            if entry is None:
                self._entries[tp] = _TopicPartitionEntry(self.producer_id, self.producer_epoch)
                return not batch.has_sequence
            if batch.has_sequence:
                return entry.first_in_flight() is batch
            if tp in self._partitions_with_unresolved_sequences:
                return False
            if (entry.producer_id, entry.producer_epoch) != (self.producer_id, self.producer_epoch):
                if entry.inflight_batches_by_sequence:
                    return False
                entry.producer_id = self.producer_id
                entry.producer_epoch = self.producer_epoch
                entry.next_sequence = 0
                entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE
            return (
                entry.last_acked_sequence != NO_LAST_ACKED_SEQUENCE
                or not entry.inflight_batches_by_sequence
            )

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
            entry.inflight_batches_by_sequence.append(batch)

    # -- outcomes -------------------------------------------------------------------------

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        """The broker acknowledged ``batch`` (or recognised it as a duplicate)."""
        with self._lock:
            entry = self._entries.get(batch.tp)
            if entry is None or not batch.has_sequence:
                return
            entry.remove(batch)
            if (batch.producer_id, batch.producer_epoch) != (
                entry.producer_id,
                entry.producer_epoch,
            ):
                return
            last = batch.last_sequence
            if entry.last_acked_sequence == NO_LAST_ACKED_SEQUENCE or last > (
                entry.last_acked_sequence
            ):
                entry.last_acked_sequence = last

    def handle_failed_batch(self, batch: ProducerBatch) -> None:
        """``batch`` failed for good: leave the other sequences alone, mark its range unresolved.

        Whether it was written is unknown (an earlier attempt may have landed), so it is settled
        by ``maybe_resolve_sequences`` once nothing of the partition is in flight.
        """
        with self._lock:
            entry = self._entries.get(batch.tp)
            if entry is None or not batch.has_sequence:
                return
            entry.remove(batch)
            tp = batch.tp
            if tp in self._partitions_to_rewrite_sequences:
                return  # the partition starts again from sequence 0 anyway
            if (batch.producer_id, batch.producer_epoch) != (
                entry.producer_id,
                entry.producer_epoch,
            ):
                return
            following = (batch.last_sequence + 1) & _SEQ_MASK
            known = self._partitions_with_unresolved_sequences.get(tp)
            if known is None or following > known:
                self._partitions_with_unresolved_sequences[tp] = following
            log.debug(
                "%s-%d: sequences up to %d unresolved after a failed batch",
                tp[0],
                tp[1],
                following - 1,
            )

    def can_retry(self, batch: ProducerBatch, error: KafkaError) -> bool:
        """Java's canRetry for a batch whose retry budget is not spent.

        OUT_OF_ORDER_SEQUENCE_NUMBER and UNKNOWN_PRODUCER_ID are always retried by an idempotent
        producer; they request an epoch bump when they reveal a real gap (see the module
        docstring). Any other error is retried if it is retriable.
        """
        if not isinstance(error, OutOfOrderSequenceNumberError | UnknownProducerIdError):
            return bool(error.retriable)
        with self._lock:
            tp = batch.tp
            entry = self._entries.get(tp)
            if entry is None or tp in self._partitions_to_rewrite_sequences:
                return True  # a bump for this partition is already on its way
            if (batch.producer_id, batch.producer_epoch) != (
                entry.producer_id,
                entry.producer_epoch,
            ):
                return True  # an answer about an older epoch
            if isinstance(error, UnknownProducerIdError):
                self._request_epoch_bump_for_partition(tp)
                return True
            unresolved = self._partitions_with_unresolved_sequences.get(tp)
            if unresolved is None:
                if entry.is_next_sequence(batch.base_sequence):
                    self._request_epoch_bump_for_partition(tp)
                elif (
                    entry.first_in_flight() is batch
                    and entry.last_acked_sequence != NO_LAST_ACKED_SEQUENCE
                ):
                    # Nothing earlier is pending, yet the broker expects another sequence:
                    # this epoch cannot make progress on the partition any more.
                    self._request_epoch_bump_for_partition(tp)
            elif batch.base_sequence == unresolved or entry.is_next_sequence(batch.base_sequence):
                # The batch right after the unresolved one (or after the last acknowledged one)
                # is out of order: nothing from there on was written.
                self._request_epoch_bump_for_partition(tp)
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
            batches = entry.inflight_batches_by_sequence
            for i, queued in enumerate(batches):
                if queued is parent:
                    batches[i : i + 1] = children
                    return

    def request_epoch_bump_for_partition(self, tp: TopicPartition) -> None:
        with self._lock:
            self._request_epoch_bump_for_partition(tp)

    def _request_epoch_bump_for_partition(self, tp: TopicPartition) -> None:
        self._epoch_bump_required = True
        self._partitions_to_rewrite_sequences.add(tp)

    # -- sender thread, start of each run -------------------------------------------------

    def maybe_resolve_sequences(self) -> None:
        """Settle unresolved partitions that have nothing in flight any more."""
        with self._lock:
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
                self._request_epoch_bump_for_partition(tp)

    def bump_idempotent_epoch_and_reset_id_if_needed(self) -> bool:
        """Apply a requested bump; True when a new InitProducerId is needed instead."""
        with self._lock:
            if not self._epoch_bump_required or self.producer_id < 0:
                return self.producer_id < 0
            self._epoch_bump_required = False
            if self.producer_epoch >= MAX_EPOCH:
                self.producer_id = -1
                self.producer_epoch = -1
                return True
            self.producer_epoch += 1
            return False

    def start_sequences_at_beginning_if_ready(self) -> list[TopicPartition]:
        """Re-stamp partitions waiting for a bump once none of their batches is in a request.

        Their in-flight batches get sequences 0.. under the current id/epoch, in their order.
        Returns the partitions re-stamped.
        """
        done: list[TopicPartition] = []
        with self._lock:
            if self.producer_id < 0 or self._epoch_bump_required:
                return done
            for tp in list(self._partitions_to_rewrite_sequences):
                entry = self._entries.get(tp)
                if entry is not None and any(
                    b.in_request for b in entry.inflight_batches_by_sequence
                ):
                    continue
                self._partitions_to_rewrite_sequences.discard(tp)
                self._partitions_with_unresolved_sequences.pop(tp, None)
                if entry is None:
                    continue
                seq = 0
                for b in entry.inflight_batches_by_sequence:
                    b.set_producer_state(self.producer_id, self.producer_epoch, seq, False)
                    seq = (seq + b.record_count) & _SEQ_MASK
                entry.producer_id = self.producer_id
                entry.producer_epoch = self.producer_epoch
                entry.next_sequence = seq
                entry.last_acked_sequence = NO_LAST_ACKED_SEQUENCE
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
            return NO_LAST_ACKED_SEQUENCE if entry is None else entry.last_acked_sequence

    def in_flight_count(self, tp: TopicPartition) -> int:
        with self._lock:
            entry = self._entries.get(tp)
            return 0 if entry is None else len(entry.inflight_batches_by_sequence)

    def has_unresolved_sequence(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._partitions_with_unresolved_sequences

    def has_pending_sequence_rewrite(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._partitions_to_rewrite_sequences


__all__ = ["MAX_EPOCH", "NO_SEQUENCE", "TransactionManager"]
