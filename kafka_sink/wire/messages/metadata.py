"""Metadata (key 3), v0-v12: brokers, topics, partitions and their leaders.

Invariants: in v1+ ``topics=None`` asks for every topic and an empty list for none (only brokers
and cluster id); in v0 an empty list means every topic. Topics are always requested by name
(``topic_id`` stays the zero UUID): lookup by id only works from v12 and is not used here.
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

INT32_MIN = -(2**31)


@dataclass(slots=True)
class MetadataResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.METADATA
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 12)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 9

    @dataclass(slots=True)
    class MetadataResponseBroker:
        node_id: int = kfield("int32")
        host: str = kfield("string")
        port: int = kfield("int32")
        rack: str | None = kfield("string", "1+", nullable="1+", default=None)

    @dataclass(slots=True)
    class MetadataResponsePartition:
        error_code: int = kfield("int16")
        partition_index: int = kfield("int32")
        leader_id: int = kfield("int32")
        leader_epoch: int = kfield("int32", "7+", default=-1)
        replica_nodes: list[int] = kfield("[]int32")
        isr_nodes: list[int] = kfield("[]int32")
        offline_replicas: list[int] = kfield("[]int32", "5+")

    @dataclass(slots=True)
    class MetadataResponseTopic:
        error_code: int = kfield("int16")
        name: str | None = kfield("string", nullable="12+")
        topic_id: uuid.UUID = kfield("uuid", "10+")
        is_internal: bool = kfield("bool", "1+")
        partitions: list[MetadataResponse.MetadataResponsePartition] = kfield(
            "[]MetadataResponsePartition"
        )
        topic_authorized_operations: int = kfield("int32", "8+", default=INT32_MIN)

    throttle_time_ms: int = kfield("int32", "3+")
    brokers: list[MetadataResponse.MetadataResponseBroker] = kfield("[]MetadataResponseBroker")
    cluster_id: str | None = kfield("string", "2+", nullable="2+", default=None)
    controller_id: int = kfield("int32", "1+", default=-1)
    topics: list[MetadataResponse.MetadataResponseTopic] = kfield("[]MetadataResponseTopic")
    cluster_authorized_operations: int = kfield("int32", "8-10", default=INT32_MIN)


@dataclass(slots=True)
class MetadataRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.METADATA
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 12)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 9
    RESPONSE_TYPE: ClassVar[type[MetadataResponse]] = MetadataResponse

    @dataclass(slots=True)
    class MetadataRequestTopic:
        topic_id: uuid.UUID = kfield("uuid", "10+", default=ZERO_UUID)
        name: str | None = kfield("string", nullable="10+")

    topics: list[MetadataRequest.MetadataRequestTopic] | None = kfield(
        "[]MetadataRequestTopic", nullable="1+"
    )
    allow_auto_topic_creation: bool = kfield("bool", "4+", default=True)
    include_cluster_authorized_operations: bool = kfield("bool", "8-10")
    include_topic_authorized_operations: bool = kfield("bool", "8+")

    @classmethod
    def for_topics(
        cls, names: list[str] | None, *, allow_auto_topic_creation: bool = True
    ) -> MetadataRequest:
        """A request by topic name; ``None`` means every topic (v1+)."""
        topics = None if names is None else [cls.MetadataRequestTopic(name=n) for n in names]
        return cls(topics=topics, allow_auto_topic_creation=allow_auto_topic_creation)
