"""Built-in partitioner: explicit partition > murmur2(key) > uniform sticky (KIP-794).

Role: pick the partition for a record exactly as Java's ``KafkaProducer.partition`` with the
built-in partitioner does.

- A record with an explicit partition goes there.
- A record with a key (and ``partitioner.ignore.keys=false``) goes to
  ``(murmur2(key) & 0x7fffffff) % num_partitions`` over *all* partitions of the topic: that
  mapping is ``records.murmur2.partition_for_key`` (``murmur2_columns.partitions_for_keys`` is the
  same over a column, for the bulk path), below this layer so that every reader of keyed
  placement uses the one formula. This class holds the sticky state only.
- A record without a key goes to the topic's current sticky partition. After about
  ``batch.size`` bytes were produced to it (at least ``batch.size`` once the current batch is
  full, at most twice that), the next sticky partition is drawn uniformly at random among the
  partitions that have a leader (among all when none has). Adaptive (load-aware) selection is
  not implemented: ``partitioner.adaptive.partitioning.enable`` is accepted and has no effect.

A configured ``partitioner.class`` (``producer.plugins.CustomPartitioner``) replaces this one for
every record without an explicit partition, keyed or not, as in Java.

Invariants: the keyed mapping never depends on leader availability (so a key never moves while
a broker is down); the sticky state is per topic and thread-safe.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafka_sink.net.metadata import PartitionInfo

# Partitions with a leader: a list, a callable computing it only when a draw needs it, or None.
Available = Sequence[int] | Callable[[], Sequence[int]] | None


def partitions_with_leader(parts: Sequence[PartitionInfo]) -> list[int]:
    """The partitions a sticky draw picks from: those whose leader is known."""
    return [p.partition for p in parts if p.leader_id >= 0]


class _StickyState:
    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.produced_bytes = 0


class BuiltInPartitioner:
    def __init__(self, batch_size: int, *, rng: random.Random | None = None) -> None:
        self.sticky_batch_size = max(batch_size, 1)
        self._random = rng or random.Random()
        self._lock = threading.Lock()
        self._sticky: dict[str, _StickyState] = {}

    def sticky_partition(self, topic: str, num_partitions: int, available: Available = None) -> int:
        """The current sticky partition for a keyless record of ``topic``."""
        state = self._sticky.get(topic)
        if state is not None and state.partition < num_partitions:
            return state.partition
        with self._lock:
            state = self._sticky.get(topic)
            if state is None or state.partition >= num_partitions:
                state = _StickyState(self._next_partition(num_partitions, available))
                self._sticky[topic] = state
            return state.partition

    def update_partition_info(
        self,
        topic: str,
        partition: int,
        appended_bytes: int,
        num_partitions: int,
        *,
        enforce_switch: bool,
        available: Available = None,
    ) -> None:
        """Count bytes produced to the sticky partition; switch after batch.size bytes.

        ``enforce_switch`` is true when the partition's batches are all full, so switching now
        does not leave a fractional batch behind; without it the switch waits until twice
        batch.size was produced (Java's ``updatePartitionInfo``).
        """
        state = self._sticky.get(topic)
        if state is None or state.partition != partition:
            return
        with self._lock:
            state.produced_bytes += appended_bytes
            produced = state.produced_bytes
            if (produced >= self.sticky_batch_size and enforce_switch) or (
                produced >= 2 * self.sticky_batch_size
            ):
                self._sticky[topic] = _StickyState(self._next_partition(num_partitions, available))

    def _next_partition(self, num_partitions: int, available: Available) -> int:
        if callable(available):
            available = available()
        if available:
            return available[self._random.randrange(len(available))]
        return self._random.randrange(num_partitions)

    def sticky_chunks(
        self, topic: str, num_partitions: int, chunks: int, available: Available
    ) -> list[int]:
        """Partitions for ``chunks`` consecutive batch.size-sized runs of keyless records.

        The bulk path's equivalent of calling ``sticky_partition`` record by record: the first
        run continues the current sticky partition, each following run gets a fresh draw, and
        the topic's sticky partition moves on to a fresh one afterwards.
        """
        out = [self.sticky_partition(topic, num_partitions, available)]
        with self._lock:
            out.extend(self._next_partition(num_partitions, available) for _ in range(chunks - 1))
            self._sticky[topic] = _StickyState(self._next_partition(num_partitions, available))
        return out
