"""Produce (key 0), v3-v12: append record batches to partition logs.

Invariants: ``records`` carries one already-encoded RecordBatch v2 per partition and is written
by reference (copied once, into the final frame). v13 identifies topics by id and is not
implemented. acks=0 requests get no response at all. From v10 a failed partition may carry a
``current_leader`` hint (tagged) with the leader's endpoint listed in ``node_endpoints``.
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield

Records = bytes | bytearray | memoryview


@dataclass(slots=True)
class ProduceResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.PRODUCE
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (3, 12)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 9

    @dataclass(slots=True)
    class BatchIndexAndErrorMessage:
        batch_index: int = kfield("int32", "8+")
        batch_index_error_message: str | None = kfield("string", "8+", nullable="8+", default=None)

    @dataclass(slots=True)
    class LeaderIdAndEpoch:
        leader_id: int = kfield("int32", "10+", default=-1)
        leader_epoch: int = kfield("int32", "10+", default=-1)

    @dataclass(slots=True)
    class PartitionProduceResponse:
        index: int = kfield("int32")
        error_code: int = kfield("int16")
        base_offset: int = kfield("int64")
        log_append_time_ms: int = kfield("int64", "2+", default=-1)
        log_start_offset: int = kfield("int64", "5+", default=-1)
        record_errors: list[ProduceResponse.BatchIndexAndErrorMessage] = kfield(
            "[]BatchIndexAndErrorMessage", "8+"
        )
        error_message: str | None = kfield("string", "8+", nullable="8+", default=None)
        current_leader: ProduceResponse.LeaderIdAndEpoch | None = kfield(
            "LeaderIdAndEpoch", "10+", tag=0
        )

    @dataclass(slots=True)
    class TopicProduceResponse:
        name: str = kfield("string", "0-12")
        partition_responses: list[ProduceResponse.PartitionProduceResponse] = kfield(
            "[]PartitionProduceResponse"
        )

    @dataclass(slots=True)
    class NodeEndpoint:
        node_id: int = kfield("int32", "10+")
        host: str = kfield("string", "10+")
        port: int = kfield("int32", "10+")
        rack: str | None = kfield("string", "10+", nullable="10+", default=None)

    responses: list[ProduceResponse.TopicProduceResponse] = kfield("[]TopicProduceResponse")
    throttle_time_ms: int = kfield("int32", "1+")
    node_endpoints: list[ProduceResponse.NodeEndpoint] = kfield("[]NodeEndpoint", "10+", tag=0)


@dataclass(slots=True)
class ProduceRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.PRODUCE
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (3, 12)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 9
    RESPONSE_TYPE: ClassVar[type[ProduceResponse]] = ProduceResponse

    @dataclass(slots=True)
    class PartitionProduceData:
        index: int = kfield("int32")
        records: Records | None = kfield("records", nullable="0+", repr=False)

    @dataclass(slots=True)
    class TopicProduceData:
        name: str = kfield("string", "0-12")
        partition_data: list[ProduceRequest.PartitionProduceData] = kfield("[]PartitionProduceData")

    transactional_id: str | None = kfield("string", "3+", nullable="3+", default=None)
    acks: int = kfield("int16", default=-1)
    timeout_ms: int = kfield("int32", default=30000)
    topic_data: list[ProduceRequest.TopicProduceData] = kfield("[]TopicProduceData")
