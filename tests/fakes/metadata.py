"""One builder of the broker's MetadataResponse, for tests that feed metadata without a broker.

The defaults describe the smallest cluster the producer tests need: broker 1 (a closed port on
the loopback) leads every partition of one topic, epoch 0, and is its only replica. Tests that
need more name it: partitions as ``(index, leader, epoch)``, other brokers, replicas, errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafka_sink.wire.messages import MetadataResponse

Broker = MetadataResponse.MetadataResponseBroker
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition

LOOPBACK_CLOSED_PORT = ("127.0.0.1", 1)


def metadata_response(
    topic: str | None = "t",
    partitions: int | Sequence[tuple[int, int, int]] = 1,
    *,
    brokers: Sequence[tuple[int, str, int]] = ((1, *LOOPBACK_CLOSED_PORT),),
    replicas: Sequence[int] | None = None,
    topic_error: int = 0,
    partition_error: int = 0,
) -> MetadataResponse:
    """``partitions``: a count (broker 1 leads each, epoch 0) or ``(index, leader, epoch)``.

    ``topic=None`` answers with brokers only (as for a request naming no topic); ``replicas``
    defaults to the leader alone and is also the in-sync set.
    """
    layout = [(i, 1, 0) for i in range(partitions)] if isinstance(partitions, int) else partitions
    topics = []
    if topic is not None:
        topics.append(
            Topic(
                error_code=topic_error,
                name=topic,
                partitions=[
                    Partition(
                        error_code=partition_error,
                        partition_index=index,
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=list(replicas) if replicas is not None else [leader],
                        isr_nodes=list(replicas) if replicas is not None else [leader],
                    )
                    for index, leader, epoch in layout
                ],
            )
        )
    return MetadataResponse(
        brokers=[Broker(node_id, host, port) for node_id, host, port in brokers],
        cluster_id="c",
        controller_id=1,
        topics=topics,
    )
