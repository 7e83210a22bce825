"""What the unfinished tasks of an aborted exactly-once batch had written, learned before the
driver aborts their transactions.

Role: when a query is stopped mid-batch, Spark kills the batch's running tasks and calls the
writer's ``abort()`` with None for each: a killed task sends nothing back. Its transaction is
still open, though, and Kafka knows what it wrote. Before the committer aborts them
(``committer.py``), :func:`count_unfinished` asks:

1. DescribeTransactions on every id the unfinished Spark partitions may hold (the prefix, each
   partition, each of its ``slots.SLOTS_PER_PARTITION`` slots): the Ongoing ones, at their
   producer id and epoch, and the topic-partitions each added;
2. each such partition's leader (``admin/producers.py``: DescribeProducers, then its log end
   offset): the producer's state there.

The counting rule (Kafka's ``ProducerStateManager``): sequences count a producer's records per
partition from 0 at each new epoch, and every task runs InitProducerId (a new epoch) before it
begins its one transaction, so that transaction began its epoch. The leader's entry for the
producer id at the transaction's epoch, with a transaction open on the partition, so counts
``last_sequence + 1`` records from ``current_txn_start_offset``; no entry at that epoch means
the transaction appended nothing there yet. An entry at another epoch, or at this epoch with
records and no open transaction, cannot be read that way: the count is then not known.

Invariants:
- The result is ``counted`` only when every unfinished Spark partition has an open transaction
  and each open transaction of those partitions was counted on each of its partitions. A
  partition without one (its task was killed before it wrote, or its transaction had already
  ended) leaves the count a lower bound, as does any error (a broker without
  DescribeTransactions or DescribeProducers, a principal without READ on the topic, which
  DescribeProducers needs, a timeout): the note says which. No error escapes: the aborts that
  follow must run whatever the count met.
- Transactions ``keep`` names (an unfinished intent's) are neither counted nor touched.
- It only reads; the driver's abort follows it. A task still sending when the leaders were asked
  (Spark kills a cancelled task's Python worker about 2 s after the cancel, and need not wait
  for that before it calls ``abort()``) may append records after the count and before the
  abort's marker: those are not counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from kafka_sink.errors import KafkaError
from kafka_sink.prepared import PreparedTransaction, TopicPartition
from kafka_sink.spark.commit_log.document import PartitionRange, UnfinishedWrites
from kafka_sink.spark.eos_plan import (
    SLOTS_PER_PARTITION,
    parse_transactional_id,
    transactional_id,
)

if TYPE_CHECKING:
    from kafka_sink.admin.producers import PartitionProducers
    from kafka_sink.admin.transactions import TransactionListing

__all__ = ["count_unfinished", "not_known"]

log = logging.getLogger("kafka_sink.spark")

Describe = Callable[[Sequence[str]], Mapping[str, "TransactionListing | None"]]
Producers = Callable[[Sequence[TopicPartition]], Mapping[TopicPartition, "PartitionProducers"]]

_COUNTED = (
    "counted from their open transactions (DescribeTransactions, then DescribeProducers on "
    "each partition) before the driver aborted them"
)


def not_known(why: str) -> UnfinishedWrites:
    """A count of the unfinished tasks' writes that could not be learned, saying why."""
    return UnfinishedWrites(
        (),
        False,
        f"not known: {why}; their transactions are aborted, so read_committed "
        "readers see none of it",
    )


def count_unfinished(
    partition_ids: Sequence[int],
    *,
    prefix: str,
    describe: Describe | None,
    producers: Producers | None,
    keep: Iterable[PreparedTransaction] = (),
) -> UnfinishedWrites:
    """What the open transactions of the Spark partitions ``partition_ids`` (tasks that did not
    finish) wrote, per topic-partition (see the module docstring)."""
    if not partition_ids:
        return UnfinishedWrites((), True, "every task finished")
    if describe is None or producers is None:
        return not_known("this driver cannot describe transactions and producers")
    ids = [
        transactional_id(prefix, p, slot)
        for p in sorted(set(partition_ids))
        for slot in range(SLOTS_PER_PARTITION)
    ]
    kept = {(t.transactional_id, t.producer_id, t.producer_epoch) for t in keep}
    try:
        seen = describe(ids)
        open_now = [
            t
            for t in (seen.get(i) for i in ids)
            if t is not None
            and t.state == "Ongoing"
            and (t.transactional_id, t.producer_id, t.producer_epoch) not in kept
        ]
        wanted = sorted({tp for t in open_now for tp in t.partitions})
        leaders = producers(wanted) if wanted else {}
    except KafkaError as exc:
        return not_known(f"their transactions could not be described: {exc}")
    except Exception as exc:  # a count must never keep the driver from the aborts that follow
        log.warning(
            "pykafka exactly-once: could not count what the unfinished tasks wrote", exc_info=True
        )
        return not_known(f"counting them failed: {type(exc).__name__}: {exc}")
    ranges: list[PartitionRange] = []
    found: set[int] = set()
    unreadable: list[str] = []
    for t in open_now:
        counts = [_written(t, leaders.get(tp)) for tp in t.partitions]
        if any(c is None for c in counts):
            unreadable.append(t.transactional_id)
            continue
        ranges.extend(c for c in counts if c is not None and c.record_count > 0)
        parsed = parse_transactional_id(prefix, t.transactional_id)
        if parsed is not None:
            found.add(parsed[0])
    missing = sorted(set(partition_ids) - found)
    if unreadable:
        return UnfinishedWrites(
            tuple(ranges),
            False,
            f"partly known: the partition leaders' producer state of transaction(s) "
            f"{unreadable} does not show what they wrote (another epoch wrote since)",
        )
    if missing:
        others = f"; the others' were {_COUNTED}" if found else ""
        return UnfinishedWrites(
            tuple(ranges),
            False,
            f"partly known: Spark partition(s) {missing} had no open transaction (a task killed "
            "before it wrote, or one that failed and aborted its transaction itself): what "
            f"they wrote, if anything, is not counted{others}",
        )
    return UnfinishedWrites(tuple(ranges), True, _COUNTED)


def _written(t: TransactionListing, leader: PartitionProducers | None) -> PartitionRange | None:
    """What open transaction ``t`` wrote to one of its partitions; None when not known."""
    if leader is None:
        return None
    topic, partition = leader.topic, leader.partition
    state = leader.producer(t.producer_id)
    if state is None or state.producer_epoch < t.producer_epoch:
        # The leader appended nothing at the transaction's epoch: under Transactions V1 the
        # partition is added before its first Produce, which had not landed.
        return PartitionRange(topic, partition, -1, -1, 0)
    if state.producer_epoch > t.producer_epoch:
        return None
    if state.current_txn_start_offset < 0:
        return PartitionRange(topic, partition, -1, -1, 0) if state.last_sequence < 0 else None
    return PartitionRange(
        topic,
        partition,
        state.current_txn_start_offset,
        leader.log_end_offset - 1,
        state.open_records(),
    )
