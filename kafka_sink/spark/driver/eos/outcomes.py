"""The outcome of a commit the coordinator can no longer tell, read from the partitions.

Role: the committer (``committer.py``) finds a transaction refused when its EndTxn(commit) is
refused because the id moved on (PRODUCER_FENCED and the like). That refusal does not say
whether the transaction was aborted first, or whether an earlier EndTxn of the same commit was
applied and only its answer lost before a stale task attempt's InitProducerId moved the id on:
DescribeTransactions shows the id Empty at a newer epoch either way. :func:`settle_lost` asks
the transaction's own partitions (its COMMIT or ABORT marker, through the ops' ``outcome``,
``admin/control_records.py`` in production) and sorts the refused commits into three: committed
(a COMMIT marker: the committer treats them as committed, recorded done, or, in a partial
batch, committed with their fingerprints, so the re-run never writes them again), lost (an
ABORT marker) and unknown (no marker could be read: the committer leaves the batch's intent
unfinished, fails the batch as incomplete naming them and why, and the next planning reads
again).

Invariants:
- Only the refused commits are read, each from its partitions whose first offset its task
  acknowledged, so the driver reads nothing of a batch whose commits were answered.
- A marker is the only proof either way: a transaction whose marker cannot be read (the
  principal lacks READ on the topic, retention removed it, a leader that stays behind it, no
  first offsets recorded) is unknown, never lost and never committed.
- The test-only hook ``fault_hooks.marker_unreadable`` makes every read of :func:`marker_reader`
  fail as an unreadable marker (unknown); its default (any real deployment) fails none.
- Without an ``outcome`` reader (ops that cannot read partitions: some tests) a refused commit
  is lost, as the coordinator's refusal says.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kafka_sink.errors import KafkaError, TransactionLostError
from kafka_sink.prepared import PreparedTransaction, TopicPartition
from kafka_sink.spark.fault_hooks import marker_unreadable

__all__ = ["OutcomeReader", "Settled", "marker_reader", "settle_lost"]

log = logging.getLogger("kafka_sink.spark")

#: ``outcome(prepared, first_offsets)``: True when the transaction's marker is COMMIT, False
#: when ABORT; raises ``KafkaError`` when no marker can be read.
OutcomeReader = Callable[[PreparedTransaction, Mapping[TopicPartition, int]], bool]

Task = TypeVar("Task")


@dataclass(frozen=True)
class Settled(Generic[Task]):
    """Refused commits sorted by their markers."""

    #: COMMIT marker: committed (an earlier EndTxn was applied, its answer lost).
    committed: list[Task] = field(default_factory=list)
    #: ABORT marker (or no reader): lost, with the refusal.
    lost: list[tuple[Task, TransactionLostError]] = field(default_factory=list)
    #: No marker could be read: the refusal, and why the marker could not be read.
    unknown: list[tuple[Task, TransactionLostError, KafkaError]] = field(default_factory=list)


def marker_reader(config: Mapping[str, object], timeout_s: float | None = None) -> OutcomeReader:
    """The production :data:`OutcomeReader`: Fetch from the partition leaders of the cluster
    ``config`` names, each transaction's read bounded by ``timeout_s`` (None: ``max.block.ms``);
    a connection per call, as the path is rare (a refused commit)."""

    def outcome(prepared: PreparedTransaction, first_offsets: Mapping[TopicPartition, int]) -> bool:
        if marker_unreadable():  # test-only; see fault_hooks
            raise KafkaError(
                f"the marker of transaction {prepared.transactional_id!r} cannot be read: a "
                "test's fault hook (fault_hooks.faults) denies it"
            )
        # Lazy: the driver's workers import this module for every write.
        from kafka_sink.admin.control_records import ControlRecordReader

        reader = ControlRecordReader.from_config(config, timeout_s)
        assert isinstance(reader, ControlRecordReader)  # from_config builds ``cls``
        try:
            return reader.transaction_outcome(prepared, first_offsets)
        finally:
            reader.close()

    return outcome


def settle_lost(
    lost: Sequence[tuple[Task, TransactionLostError]],
    transaction: Callable[[Task], PreparedTransaction],
    first_offsets: Callable[[Task], Mapping[TopicPartition, int]],
    outcome: OutcomeReader | None,
) -> Settled[Task]:
    """Sort refused commits into committed, lost and unknown by their markers."""
    if outcome is None or not lost:
        return Settled(lost=list(lost))
    settled: Settled[Task] = Settled()
    for task, error in lost:
        t = transaction(task)
        try:
            was_committed = outcome(t, first_offsets(task))
        except KafkaError as exc:
            log.error(
                "pykafka exactly-once: the commit of transaction %r (producer id %d, epoch %d) "
                "was refused (%s) and its marker could not be read, so whether it was committed "
                "is unknown: %s",
                t.transactional_id,
                t.producer_id,
                t.producer_epoch,
                error,
                exc,
            )
            settled.unknown.append((task, error, exc))
            continue
        if was_committed:
            log.warning(
                "pykafka exactly-once: the commit of transaction %r (producer id %d, epoch %d) "
                "was refused (%s), but its partitions hold its COMMIT marker: an earlier EndTxn "
                "was applied and its answer lost; it is committed",
                t.transactional_id,
                t.producer_id,
                t.producer_epoch,
                error,
            )
            settled.committed.append(task)
        else:
            settled.lost.append((task, error))
    return settled
