"""CreateTopics (key 19), v2-v7: create topics (used by tooling and tests, not by produce).

Invariants: must be sent to a broker (it forwards to the controller); ``num_partitions`` and
``replication_factor`` of -1 mean "broker default".
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield


@dataclass(slots=True)
class CreateTopicsResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.CREATE_TOPICS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (2, 7)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 5

    @dataclass(slots=True)
    class CreatableTopicConfigs:
        name: str = kfield("string", "5+")
        value: str | None = kfield("string", "5+", nullable="5+", default=None)
        read_only: bool = kfield("bool", "5+")
        config_source: int = kfield("int8", "5+", default=-1)
        is_sensitive: bool = kfield("bool", "5+")

    @dataclass(slots=True)
    class CreatableTopicResult:
        name: str = kfield("string")
        topic_id: uuid.UUID = kfield("uuid", "7+")
        error_code: int = kfield("int16")
        error_message: str | None = kfield("string", "1+", nullable="0+")
        topic_config_error_code: int = kfield("int16", "5+", tag=0)
        num_partitions: int = kfield("int32", "5+", default=-1)
        replication_factor: int = kfield("int16", "5+", default=-1)
        configs: list[CreateTopicsResponse.CreatableTopicConfigs] | None = kfield(
            "[]CreatableTopicConfigs", "5+", nullable="5+"
        )

    throttle_time_ms: int = kfield("int32", "2+")
    topics: list[CreateTopicsResponse.CreatableTopicResult] = kfield("[]CreatableTopicResult")


@dataclass(slots=True)
class CreateTopicsRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.CREATE_TOPICS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (2, 7)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 5
    RESPONSE_TYPE: ClassVar[type[CreateTopicsResponse]] = CreateTopicsResponse

    @dataclass(slots=True)
    class CreatableReplicaAssignment:
        partition_index: int = kfield("int32")
        broker_ids: list[int] = kfield("[]int32")

    @dataclass(slots=True)
    class CreatableTopicConfig:
        name: str = kfield("string")
        value: str | None = kfield("string", nullable="0+")

    @dataclass(slots=True)
    class CreatableTopic:
        name: str = kfield("string")
        num_partitions: int = kfield("int32", default=-1)
        replication_factor: int = kfield("int16", default=-1)
        assignments: list[CreateTopicsRequest.CreatableReplicaAssignment] = kfield(
            "[]CreatableReplicaAssignment"
        )
        configs: list[CreateTopicsRequest.CreatableTopicConfig] = kfield("[]CreatableTopicConfig")

    topics: list[CreateTopicsRequest.CreatableTopic] = kfield("[]CreatableTopic")
    timeout_ms: int = kfield("int32", default=60000)
    validate_only: bool = kfield("bool", "1+")
