"""What each partition's leader knows of the producers writing to it, and where its log ends.

Role: :func:`describe_producers` asks the leader of each given topic-partition for its active
producers (DescribeProducers, Java's ``Admin.describeProducers``) and, on the same connection
right after, for its log end offset (ListOffsets at LATEST, read_uncommitted): per partition a
:class:`PartitionProducers`. A process that did not write a transaction can so learn what it
wrote while it is still open (the Spark driver counting what a stopped batch's killed tasks had
appended before it aborts them, ``spark/driver/eos/aborted.py``).

What the leader reports per producer (Kafka's ``ProducerStateEntry``): its producer id and
epoch, the sequence of the last record it appended (``last_sequence``, -1 when none at this
epoch) and, while it has a transaction open on the partition, that transaction's first offset
(``current_txn_start_offset``; -1 when none is open). Sequences count records per partition from
0 at each new epoch, so a transaction that began its producer's epoch appended
``last_sequence + 1`` records to the partition (:meth:`ActiveProducer.open_records`).

Invariants:
- Each leader gets its DescribeProducers before its ListOffsets on one connection, and a broker
  answers a connection's requests in order: the log end offset is read after the producer
  state, so every record the state counts lies below it.
- Every given partition is in the result, or the call raises: answers that may clear (a moved
  leader, a partition the leader does not know yet, a lost connection) are asked again after a
  metadata refresh and a backoff, within the one :class:`~kafka_sink.admin.client.Deadline`;
  any other error (an authorization failure, a broker without DescribeProducers) raises at once.
- It reads only: nothing is written, no transaction is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka_sink.admin.client import AdminClient, Deadline
from kafka_sink.errors import KafkaError, error_for_code
from kafka_sink.prepared import TopicPartition
from kafka_sink.wire.messages import (
    DescribeProducersRequest,
    ListOffsetsRequest,
)
from kafka_sink.wire.messages.list_offsets import LATEST_TIMESTAMP, READ_UNCOMMITTED

__all__ = ["ActiveProducer", "PartitionProducers", "describe_producers"]

_POLL_MS = 100


@dataclass(frozen=True)
class ActiveProducer:
    """One producer as a partition's leader knows it (Apache's DescribeProducers fields)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    current_txn_start_offset: int

    def open_records(self) -> int:
        """How many records its open transaction appended to the partition, when that
        transaction began the producer's epoch (sequences restart at 0 with each epoch)."""
        return self.last_sequence + 1


@dataclass(frozen=True)
class PartitionProducers:
    """A partition's active producers and its log end offset (the next offset to be written)."""

    topic: str
    partition: int
    log_end_offset: int
    producers: tuple[ActiveProducer, ...]

    def producer(self, producer_id: int) -> ActiveProducer | None:
        """The leader's state of ``producer_id``; None when it holds none."""
        return next((p for p in self.producers if p.producer_id == producer_id), None)


def describe_producers(
    client: AdminClient, partitions: Sequence[TopicPartition], deadline: Deadline
) -> dict[TopicPartition, PartitionProducers]:
    """Per partition, its leader's active producers and log end offset (see the module doc)."""
    pending = sorted(set(partitions))
    out: dict[TopicPartition, PartitionProducers] = {}
    attempts = 0
    while pending:
        leaders = _leaders(client, pending, deadline)
        requests: list[tuple[int, Any, int | None]] = []
        asked: list[list[TopicPartition]] = []
        for node in sorted(set(leaders.values())):
            mine = [tp for tp in pending if leaders[tp] == node]
            requests.append((node, _describe_request(mine), None))
            requests.append((node, _end_offsets_request(mine), None))
            asked.append(mine)
        deadline.waiting_for = f"the producers and log end offsets of {len(pending)} partition(s)"
        answers = client.request_all(requests, deadline)
        again: list[TopicPartition] = []
        for i, mine in enumerate(asked):
            found = _read(mine, answers[2 * i], answers[2 * i + 1], deadline)
            out.update(found)
            again.extend(tp for tp in mine if tp not in found)
        pending = again
        if pending:
            client.metadata.request_update()
            client.back_off(attempts, deadline)
            attempts += 1
    return out


def _leaders(
    client: AdminClient, partitions: Sequence[TopicPartition], deadline: Deadline
) -> dict[TopicPartition, int]:
    """The leader node of each partition, waiting for metadata that names them all."""
    metadata = client.metadata
    for topic in sorted({topic for topic, _ in partitions}):
        metadata.add_topic(topic)
    deadline.waiting_for = f"the leaders of {len(partitions)} partition(s)"
    while True:
        cluster = metadata.fetch()
        nodes = {tp: cluster.leader_for(*tp) for tp in partitions}
        if all(node is not None for node in nodes.values()):
            return {tp: int(node.node_id) for tp, node in nodes.items() if node is not None}
        deadline.check()
        metadata.request_update()
        client.network.poll(max(min(_POLL_MS, deadline.remaining_ms()), 0), client.clock.now_ms())
        last = metadata.last_error()
        if last is not None:
            deadline.last_error = last


def _by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return topics


def _describe_request(partitions: Sequence[TopicPartition]) -> DescribeProducersRequest:
    return DescribeProducersRequest(
        [
            DescribeProducersRequest.TopicRequest(topic, indexes)
            for topic, indexes in _by_topic(partitions).items()
        ]
    )


def _end_offsets_request(partitions: Sequence[TopicPartition]) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(
                        partition_index=p, timestamp=LATEST_TIMESTAMP
                    )
                    for p in indexes
                ],
            )
            for topic, indexes in _by_topic(partitions).items()
        ],
        isolation_level=READ_UNCOMMITTED,
    )


def _read(
    partitions: Sequence[TopicPartition], described: Any, ends: Any, deadline: Deadline
) -> dict[TopicPartition, PartitionProducers]:
    """The partitions both answers cover; raises what no retry can clear."""
    for answer in (described, ends):
        if isinstance(answer, KafkaError):
            if deadline.is_own(answer) or not answer.retriable:
                raise answer
            deadline.last_error = answer
            return {}
    producers: dict[TopicPartition, tuple[ActiveProducer, ...]] = {}
    for topic in described.topics:
        for p in topic.partitions:
            if _usable(p.error_code, p.error_message, deadline):
                producers[(topic.name, int(p.partition_index))] = tuple(
                    ActiveProducer(
                        int(s.producer_id),
                        int(s.producer_epoch),
                        int(s.last_sequence),
                        int(s.current_txn_start_offset),
                    )
                    for s in p.active_producers
                )
    out: dict[TopicPartition, PartitionProducers] = {}
    for topic in ends.topics:
        for p in topic.partitions:
            tp = (topic.name, int(p.partition_index))
            if tp in producers and tp in partitions and _usable(p.error_code, None, deadline):
                out[tp] = PartitionProducers(tp[0], tp[1], int(p.offset), producers[tp])
    return out


def _usable(code: int, message: str | None, deadline: Deadline) -> bool:
    """True for an answer without error; False (to ask again) for one that may clear."""
    error = error_for_code(code, message)
    if error is None:
        return True
    if not error.retriable:
        raise error
    deadline.last_error = error
    return False
