"""InitProducerId (key 22), v0-v5: obtain a producer id and epoch for idempotence/transactions.

Invariants: ``transactional_id`` is None for an idempotent-only producer (any broker answers);
v6 (two-phase commit, unstable) is not implemented.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield


@dataclass(slots=True)
class InitProducerIdResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.INIT_PRODUCER_ID
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 5)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 2

    throttle_time_ms: int = kfield("int32")
    error_code: int = kfield("int16")
    producer_id: int = kfield("int64", default=-1)
    producer_epoch: int = kfield("int16")


@dataclass(slots=True)
class InitProducerIdRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.INIT_PRODUCER_ID
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 5)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 2
    RESPONSE_TYPE: ClassVar[type[InitProducerIdResponse]] = InitProducerIdResponse

    transactional_id: str | None = kfield("string", nullable="0+")
    # Ignored by the broker without a transactional id; Java sends Integer.MAX_VALUE then.
    transaction_timeout_ms: int = kfield("int32", default=2147483647)
    producer_id: int = kfield("int64", "3+", default=-1)
    producer_epoch: int = kfield("int16", "3+", default=-1)
