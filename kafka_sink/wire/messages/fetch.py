"""Fetch (key 1), v4-v18: read record batches from partition leaders.

Invariants: v0-v3 were removed in Kafka 4.0 (v4 is the first with ``isolation_level`` and
RecordBatch v2 only). Topics travel by name up to v12 (``topic``) and by id from v13
(``topic_id``, from Metadata v10+); :func:`uses_topic_ids` says which one a version needs and
the other is ignored on the wire. A client leaves ``replica_id`` -1 (v4-v14) and
``replica_state`` absent (v15+). ``session_id`` 0 with ``session_epoch`` -1 is a full,
sessionless fetch (KIP-227): every call names every partition and ``forgotten_topics_data`` stays
empty. ``records`` in a response partition is the log as stored: zero or more whole batches,
possibly followed by one truncated batch when ``partition_max_bytes`` or ``max_bytes`` cut it
(the reader must drop that tail), control batches included; under READ_COMMITTED it stops at the
last stable offset and ``aborted_transactions`` lists (producer id, first offset) of the
aborted transactions whose records it contains. One response is not "everything below the high
watermark": a 4.3 broker was seen returning a partition's data batches without the marker after
them although bytes were left, so a reader fetches again from the offset after its last whole
batch until it reaches the offset it wants.
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.primitives import ZERO_UUID
from kafka_sink.wire.schema import kfield

Records = bytes | bytearray | memoryview

FIRST_TOPIC_ID_VERSION = 13
INT64_MAX = 2**63 - 1


def uses_topic_ids(version: int) -> bool:
    """True when Fetch ``version`` names topics by ``topic_id`` instead of ``topic``."""
    return version >= FIRST_TOPIC_ID_VERSION


@dataclass(slots=True)
class FetchResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (4, 18)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 12

    @dataclass(slots=True)
    class EpochEndOffset:
        epoch: int = kfield("int32", "12+", default=-1)
        end_offset: int = kfield("int64", "12+", default=-1)

    @dataclass(slots=True)
    class LeaderIdAndEpoch:
        leader_id: int = kfield("int32", "12+", default=-1)
        leader_epoch: int = kfield("int32", "12+", default=-1)

    @dataclass(slots=True)
    class SnapshotId:
        end_offset: int = kfield("int64", default=-1)
        epoch: int = kfield("int32", default=-1)

    @dataclass(slots=True)
    class AbortedTransaction:
        producer_id: int = kfield("int64", "4+")
        first_offset: int = kfield("int64", "4+")

    @dataclass(slots=True)
    class PartitionData:
        partition_index: int = kfield("int32")
        error_code: int = kfield("int16")
        high_watermark: int = kfield("int64")
        last_stable_offset: int = kfield("int64", "4+", default=-1)
        log_start_offset: int = kfield("int64", "5+", default=-1)
        diverging_epoch: FetchResponse.EpochEndOffset | None = kfield(
            "EpochEndOffset", "12+", tag=0
        )
        current_leader: FetchResponse.LeaderIdAndEpoch | None = kfield(
            "LeaderIdAndEpoch", "12+", tag=1
        )
        snapshot_id: FetchResponse.SnapshotId | None = kfield("SnapshotId", "12+", tag=2)
        aborted_transactions: list[FetchResponse.AbortedTransaction] | None = kfield(
            "[]AbortedTransaction", "4+", nullable="4+", default=None
        )
        preferred_read_replica: int = kfield("int32", "11+", default=-1)
        records: Records | None = kfield("records", nullable="0+", repr=False)

    @dataclass(slots=True)
    class FetchableTopicResponse:
        topic: str = kfield("string", "0-12")
        topic_id: uuid.UUID = kfield("uuid", "13+")
        partitions: list[FetchResponse.PartitionData] = kfield("[]PartitionData")

    @dataclass(slots=True)
    class NodeEndpoint:
        node_id: int = kfield("int32", "16+")
        host: str = kfield("string", "16+")
        port: int = kfield("int32", "16+")
        rack: str | None = kfield("string", "16+", nullable="16+", default=None)

    throttle_time_ms: int = kfield("int32", "1+")
    error_code: int = kfield("int16", "7+")
    session_id: int = kfield("int32", "7+")
    responses: list[FetchResponse.FetchableTopicResponse] = kfield("[]FetchableTopicResponse")
    node_endpoints: list[FetchResponse.NodeEndpoint] = kfield("[]NodeEndpoint", "16+", tag=0)


@dataclass(slots=True)
class FetchRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.FETCH
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (4, 18)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 12
    RESPONSE_TYPE: ClassVar[type[FetchResponse]] = FetchResponse

    @dataclass(slots=True)
    class ReplicaState:
        replica_id: int = kfield("int32", "15+", default=-1)
        replica_epoch: int = kfield("int64", "15+", default=-1)

    @dataclass(slots=True)
    class FetchPartition:
        partition: int = kfield("int32")
        current_leader_epoch: int = kfield("int32", "9+", default=-1)
        fetch_offset: int = kfield("int64")
        last_fetched_epoch: int = kfield("int32", "12+", default=-1)
        log_start_offset: int = kfield("int64", "5+", default=-1)
        partition_max_bytes: int = kfield("int32", default=1024 * 1024)
        replica_directory_id: uuid.UUID = kfield("uuid", "17+", tag=0, default=ZERO_UUID)
        high_watermark: int = kfield("int64", "18+", tag=1, default=INT64_MAX)

    @dataclass(slots=True)
    class FetchTopic:
        topic: str = kfield("string", "0-12")
        topic_id: uuid.UUID = kfield("uuid", "13+")
        partitions: list[FetchRequest.FetchPartition] = kfield("[]FetchPartition")

    @dataclass(slots=True)
    class ForgottenTopic:
        topic: str = kfield("string", "7-12")
        topic_id: uuid.UUID = kfield("uuid", "13+")
        partitions: list[int] = kfield("[]int32", "7+")

    cluster_id: str | None = kfield("string", "12+", nullable="12+", tag=0, default=None)
    replica_id: int = kfield("int32", "0-14", default=-1)
    replica_state: FetchRequest.ReplicaState | None = kfield("ReplicaState", "15+", tag=1)
    max_wait_ms: int = kfield("int32", default=500)
    min_bytes: int = kfield("int32", default=1)
    max_bytes: int = kfield("int32", "3+", default=0x7FFFFFFF)
    isolation_level: int = kfield("int8", "4+", default=0)
    session_id: int = kfield("int32", "7+", default=0)
    session_epoch: int = kfield("int32", "7+", default=-1)
    topics: list[FetchRequest.FetchTopic] = kfield("[]FetchTopic")
    forgotten_topics_data: list[FetchRequest.ForgottenTopic] = kfield("[]ForgottenTopic", "7+")
    rack_id: str = kfield("string", "11+", default="")
