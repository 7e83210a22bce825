"""FindCoordinator (key 10), v0-v6: locate the transaction (or group) coordinator.

Invariants: v0 has no ``key_type`` and can only find group coordinators; v4+ batches keys in
``coordinator_keys`` and answers in ``coordinators`` instead of the single key/node fields.
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


@dataclass(slots=True)
class FindCoordinatorResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.FIND_COORDINATOR
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 6)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 3

    @dataclass(slots=True)
    class Coordinator:
        key: str = kfield("string", "4+")
        node_id: int = kfield("int32", "4+")
        host: str = kfield("string", "4+")
        port: int = kfield("int32", "4+")
        error_code: int = kfield("int16", "4+")
        error_message: str | None = kfield("string", "4+", nullable="4+", default=None)

    throttle_time_ms: int = kfield("int32", "1+")
    error_code: int = kfield("int16", "0-3")
    error_message: str | None = kfield("string", "1-3", nullable="1-3", default=None)
    node_id: int = kfield("int32", "0-3")
    host: str = kfield("string", "0-3")
    port: int = kfield("int32", "0-3")
    coordinators: list[FindCoordinatorResponse.Coordinator] = kfield("[]Coordinator", "4+")


@dataclass(slots=True)
class FindCoordinatorRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.FIND_COORDINATOR
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 6)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 3
    RESPONSE_TYPE: ClassVar[type[FindCoordinatorResponse]] = FindCoordinatorResponse

    key: str = kfield("string", "0-3")
    key_type: int = kfield("int8", "1+")
    coordinator_keys: list[str] = kfield("[]string", "4+")
