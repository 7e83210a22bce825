"""A transaction written and flushed but not ended: what another process needs to end it.

Role: ``KafkaProducer.prepare_transaction()`` returns a ``PreparedTransaction`` once every record
of the open transaction is acknowledged; ``complete_transaction(config, prepared, commit=...)``
ends it later, from any process, by sending EndTxn to the transaction coordinator with the same
producer id and epoch. The coordinator keeps no client identity, so (transactional id, producer
id, epoch) is the whole handle.

Invariants: a value is immutable, hashable and picklable (it travels from a Spark task to the
driver inside a commit message); ``partitions`` is sorted and free of duplicates, so two handles
for the same transaction compare equal; it carries no secret (it may be logged).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

TopicPartition = tuple[str, int]

__all__ = ["PreparedTransaction"]


@dataclass(frozen=True)
class PreparedTransaction:
    """One prepared transaction: its id, the producer id and epoch that wrote it, and the
    partitions it wrote to (``(topic, partition)`` pairs)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...] = ()

    def __post_init__(self) -> None:
        if not self.transactional_id:
            raise ValueError("PreparedTransaction needs a non-empty transactional_id")
        if self.producer_id < 0 or not 0 <= self.producer_epoch <= 32767:
            raise ValueError(
                f"PreparedTransaction needs a producer id >= 0 and an epoch in 0..32767, got "
                f"producer_id={self.producer_id} producer_epoch={self.producer_epoch}"
            )
        object.__setattr__(self, "partitions", _normalised(self.partitions))


def _normalised(partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(sorted({(str(topic), int(partition)) for topic, partition in partitions}))
