"""ListOffsets (key 2), v1-v11: a partition's offset for a timestamp or a special position.

Invariants: v0 (several offsets per partition) was removed in Kafka 4.0, so v1 is the floor
and its v0-only fields are not declared.
``timestamp`` is a record timestamp in ms or one of the ``*_TIMESTAMP`` positions below; each
position needs the version named next to it. ``isolation_level`` (v2+) READ_COMMITTED makes
LATEST answer the last stable offset (the first offset of the oldest open transaction, or the
high watermark when none is open) instead of the high watermark. ``replica_id`` is -1 for a
client. v10 adds ``timeout_ms`` for offsets that live in remote storage.
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

LATEST_TIMESTAMP = -1  # the next offset to be written (the LSO under READ_COMMITTED)
EARLIEST_TIMESTAMP = -2  # the log start offset
MAX_TIMESTAMP = -3  # the record with the largest timestamp (v7+, KIP-734)
EARLIEST_LOCAL_TIMESTAMP = -4  # the first offset still on the leader's disk (v8+, KIP-405)
LATEST_TIERED_TIMESTAMP = -5  # the last offset in remote storage (v9+, KIP-1005)
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # the first offset not yet in remote storage (v11+)


@dataclass(slots=True)
class ListOffsetsResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (1, 11)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 6

    @dataclass(slots=True)
    class ListOffsetsPartitionResponse:
        partition_index: int = kfield("int32")
        error_code: int = kfield("int16")
        timestamp: int = kfield("int64", "1+", default=-1)
        offset: int = kfield("int64", "1+", default=-1)
        leader_epoch: int = kfield("int32", "4+", default=-1)

    @dataclass(slots=True)
    class ListOffsetsTopicResponse:
        name: str = kfield("string")
        partitions: list[ListOffsetsResponse.ListOffsetsPartitionResponse] = kfield(
            "[]ListOffsetsPartitionResponse"
        )

    throttle_time_ms: int = kfield("int32", "2+")
    topics: list[ListOffsetsResponse.ListOffsetsTopicResponse] = kfield(
        "[]ListOffsetsTopicResponse"
    )


@dataclass(slots=True)
class ListOffsetsRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_OFFSETS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (1, 11)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 6
    RESPONSE_TYPE: ClassVar[type[ListOffsetsResponse]] = ListOffsetsResponse

    @dataclass(slots=True)
    class ListOffsetsPartition:
        partition_index: int = kfield("int32")
        current_leader_epoch: int = kfield("int32", "4+", default=-1)
        timestamp: int = kfield("int64", default=LATEST_TIMESTAMP)

    @dataclass(slots=True)
    class ListOffsetsTopic:
        name: str = kfield("string")
        partitions: list[ListOffsetsRequest.ListOffsetsPartition] = kfield("[]ListOffsetsPartition")

    replica_id: int = kfield("int32", default=-1)
    isolation_level: int = kfield("int8", "2+", default=READ_UNCOMMITTED)
    topics: list[ListOffsetsRequest.ListOffsetsTopic] = kfield("[]ListOffsetsTopic")
    timeout_ms: int = kfield("int32", "10+", default=30000)
