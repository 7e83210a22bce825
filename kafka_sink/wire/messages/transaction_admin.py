"""ListTransactions (key 66) v0-v2, DescribeTransactions (key 65) v0, DescribeProducers (key 61)
v0: what a transaction coordinator and a partition leader know about open transactions.

Invariants: all three are flexible from v0. ListTransactions v1 adds ``duration_filter`` (only
transactions running longer than that many ms; -1 = all) and v2 ``transactional_id_pattern`` (a
Java regular expression; null or empty = all, KIP-1152); a broker below v2 cannot filter by id,
so callers list and filter themselves. A coordinator answers only for the transactional ids it
owns, so listing or describing every transaction means asking every broker; DescribeTransactions
answers NOT_COORDINATOR (16) per id for the ids another broker owns. DescribeProducers is
answered by each partition's leader: ``current_txn_start_offset`` >= 0 marks a producer with an
open transaction on that partition. Transaction states are Java's ``TransactionState`` names
("Ongoing", "PrepareCommit", "CompleteAbort", ...): see ``TRANSACTION_STATES``.
"""

# kfield() returns a dataclasses.field(); ruff cannot see that.
# ruff: noqa: RUF009

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.schema import kfield

# The state names a coordinator reports (and accepts in ``state_filters``).
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


@dataclass(slots=True)
class ListTransactionsResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_TRANSACTIONS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 2)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 0

    @dataclass(slots=True)
    class TransactionState:
        transactional_id: str = kfield("string")
        producer_id: int = kfield("int64")
        transaction_state: str = kfield("string")

    throttle_time_ms: int = kfield("int32")
    error_code: int = kfield("int16")
    unknown_state_filters: list[str] = kfield("[]string")
    transaction_states: list[ListTransactionsResponse.TransactionState] = kfield(
        "[]TransactionState"
    )


@dataclass(slots=True)
class ListTransactionsRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.LIST_TRANSACTIONS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 2)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 0
    RESPONSE_TYPE: ClassVar[type[ListTransactionsResponse]] = ListTransactionsResponse

    state_filters: list[str] = kfield("[]string")
    producer_id_filters: list[int] = kfield("[]int64")
    duration_filter: int = kfield("int64", "1+", default=-1)
    transactional_id_pattern: str | None = kfield("string", "2+", nullable="2+", default=None)


@dataclass(slots=True)
class DescribeTransactionsResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_TRANSACTIONS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 0

    @dataclass(slots=True)
    class TopicData:
        topic: str = kfield("string")
        partitions: list[int] = kfield("[]int32")

    @dataclass(slots=True)
    class TransactionState:
        error_code: int = kfield("int16")
        transactional_id: str = kfield("string")
        transaction_state: str = kfield("string")
        transaction_timeout_ms: int = kfield("int32")
        transaction_start_time_ms: int = kfield("int64")
        producer_id: int = kfield("int64")
        producer_epoch: int = kfield("int16")
        topics: list[DescribeTransactionsResponse.TopicData] = kfield("[]TopicData")

    throttle_time_ms: int = kfield("int32")
    transaction_states: list[DescribeTransactionsResponse.TransactionState] = kfield(
        "[]TransactionState"
    )


@dataclass(slots=True)
class DescribeTransactionsRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_TRANSACTIONS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 0
    RESPONSE_TYPE: ClassVar[type[DescribeTransactionsResponse]] = DescribeTransactionsResponse

    transactional_ids: list[str] = kfield("[]string")


@dataclass(slots=True)
class DescribeProducersResponse:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_PRODUCERS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 0

    @dataclass(slots=True)
    class ProducerState:
        producer_id: int = kfield("int64")
        producer_epoch: int = kfield("int32")
        last_sequence: int = kfield("int32", default=-1)
        last_timestamp: int = kfield("int64", default=-1)
        coordinator_epoch: int = kfield("int32")
        current_txn_start_offset: int = kfield("int64", default=-1)

    @dataclass(slots=True)
    class PartitionResponse:
        partition_index: int = kfield("int32")
        error_code: int = kfield("int16")
        error_message: str | None = kfield("string", nullable="0+", default=None)
        active_producers: list[DescribeProducersResponse.ProducerState] = kfield("[]ProducerState")

    @dataclass(slots=True)
    class TopicResponse:
        name: str = kfield("string")
        partitions: list[DescribeProducersResponse.PartitionResponse] = kfield(
            "[]PartitionResponse"
        )

    throttle_time_ms: int = kfield("int32")
    topics: list[DescribeProducersResponse.TopicResponse] = kfield("[]TopicResponse")


@dataclass(slots=True)
class DescribeProducersRequest:
    API_KEY: ClassVar[ApiKey] = ApiKey.DESCRIBE_PRODUCERS
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    FLEXIBLE_VERSIONS: ClassVar[int | None] = 0
    RESPONSE_TYPE: ClassVar[type[DescribeProducersResponse]] = DescribeProducersResponse

    @dataclass(slots=True)
    class TopicRequest:
        name: str = kfield("string")
        partition_indexes: list[int] = kfield("[]int32")

    topics: list[DescribeProducersRequest.TopicRequest] = kfield("[]TopicRequest")
