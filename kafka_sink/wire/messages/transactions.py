"""AddPartitionsToTxn (key 24) v0-v3 and EndTxn (key 26) v0-v5: Transactions V1.

Invariants: AddPartitionsToTxn v4+ is broker-to-broker and not implemented; the v0-v3 fields keep
Apache's ``v3_and_below_`` names so they diff cleanly against the JSON schema. EndTxn v5 belongs to
Transactions V2 (the response returns a bumped epoch); clients on V1 cap EndTxn at v4.
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield


@dataclass(slots=True)
class AddPartitionsToTxnResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.ADD_PARTITIONS_TO_TXN
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 3)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 3

    @dataclass(slots=True)
    class AddPartitionsToTxnPartitionResult:
        partition_index: int = kfield("int32")
        partition_error_code: int = kfield("int16")

    @dataclass(slots=True)
    class AddPartitionsToTxnTopicResult:
        name: str = kfield("string")
        results_by_partition: list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult] = (
            kfield("[]AddPartitionsToTxnPartitionResult")
        )

    throttle_time_ms: int = kfield("int32")
    results_by_topic_v3_and_below: list[
        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    ] = kfield("[]AddPartitionsToTxnTopicResult", "0-3")


@dataclass(slots=True)
class AddPartitionsToTxnRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.ADD_PARTITIONS_TO_TXN
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 3)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 3
    RESPONSE_TYPE: ClassVar[type[AddPartitionsToTxnResponse]] = AddPartitionsToTxnResponse

    @dataclass(slots=True)
    class AddPartitionsToTxnTopic:
        name: str = kfield("string")
        partitions: list[int] = kfield("[]int32")

    v3_and_below_transactional_id: str = kfield("string", "0-3")
    v3_and_below_producer_id: int = kfield("int64", "0-3")
    v3_and_below_producer_epoch: int = kfield("int16", "0-3")
    v3_and_below_topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic] = kfield(
        "[]AddPartitionsToTxnTopic", "0-3"
    )


@dataclass(slots=True)
class EndTxnResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.END_TXN
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 5)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 3

    throttle_time_ms: int = kfield("int32")
    error_code: int = kfield("int16")
    producer_id: int = kfield("int64", "5+", default=-1)
    producer_epoch: int = kfield("int16", "5+", default=-1)


@dataclass(slots=True)
class EndTxnRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.END_TXN
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 5)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 3
    RESPONSE_TYPE: ClassVar[type[EndTxnResponse]] = EndTxnResponse

    transactional_id: str = kfield("string")
    producer_id: int = kfield("int64")
    producer_epoch: int = kfield("int16")
    committed: bool = kfield("bool")
