"""The outcome of a commit the coordinator can no longer tell, read from the partitions.

Role: the committer (``committer.py``) finds a transaction lost when its EndTxn(commit) is
refused because the id moved on (PRODUCER_FENCED and the like). That refusal does not say
whether the transaction was aborted first, or whether an earlier EndTxn of the same commit was
applied and only its answer lost before a stale task attempt's InitProducerId moved the id on:
DescribeTransactions shows the id Empty at a newer epoch either way. :func:`settle_lost` asks
the transaction's own partitions (its COMMIT or ABORT marker, through the ops' ``outcome``,
``admin/control_records.py`` in production) and returns which of the refused commits are in
fact committed; the committer then treats those as committed (recorded done, or, in a partial
batch, committed with their fingerprints, so the re-run never writes them again).

Invariants:
- Only the refused commits are read, each from one partition (the first whose first offset its
  task acknowledged), so the driver reads nothing of a batch whose commits were answered.
- A marker is the only proof: a transaction whose marker cannot be read stays lost (the batch
  fails naming its id and partitions, as without the reader), never guessed committed.
- Without an ``outcome`` reader (tests, or ops that cannot read partitions) nothing changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from kafka_sink.errors import KafkaError, TransactionLostError
from kafka_sink.prepared import PreparedTransaction, TopicPartition

__all__ = ["OutcomeReader", "marker_reader", "settle_lost"]

log = logging.getLogger("kafka_sink.spark")

#: ``outcome(prepared, first_offsets)``: True when the transaction's marker is COMMIT, False
#: when ABORT; raises ``KafkaError`` when no marker can be read.
OutcomeReader = Callable[[PreparedTransaction, Mapping[TopicPartition, int]], bool]

Task = TypeVar("Task")


def marker_reader(config: Mapping[str, object], timeout_s: float | None = None) -> OutcomeReader:
    """The production :data:`OutcomeReader`: Fetch from the partition leaders of the cluster
    ``config`` names, each partition's read bounded by ``timeout_s`` (None: ``max.block.ms``);
    a connection per call, as the path is rare (a refused commit)."""

    def outcome(prepared: PreparedTransaction, first_offsets: Mapping[TopicPartition, int]) -> bool:
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
) -> tuple[list[Task], list[tuple[Task, TransactionLostError]]]:
    """Split refused commits into the ones their markers show committed and the ones lost."""
    if outcome is None or not lost:
        return [], list(lost)
    committed: list[Task] = []
    still_lost: list[tuple[Task, TransactionLostError]] = []
    for task, error in lost:
        t = transaction(task)
        try:
            was_committed = outcome(t, first_offsets(task))
        except KafkaError as exc:
            log.error(
                "pykafka exactly-once: the commit of transaction %r (producer id %d, epoch %d) "
                "was refused and its marker could not be read, so it is taken as lost: %s",
                t.transactional_id,
                t.producer_id,
                t.producer_epoch,
                exc,
            )
            still_lost.append((task, error))
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
            committed.append(task)
        else:
            still_lost.append((task, error))
    return committed, still_lost
