"""Every request/response message the client speaks, importable from one place.

Invariants: class and nested struct names are Apache's JSON names; field names are their
snake_case; each request class has ``API_KEY`` and ``RESPONSE_TYPE``. ``REQUEST_TYPES`` maps each
:class:`~kafka_sink.wire.api.ApiKey` to its request class.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kafka_sink.wire.api import ApiKey
from kafka_sink.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka_sink.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kafka_sink.wire.messages.describe_configs import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from kafka_sink.wire.messages.fetch import FetchRequest, FetchResponse
from kafka_sink.wire.messages.find_coordinator import (
    KEY_TYPE_GROUP,
    KEY_TYPE_TRANSACTION,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka_sink.wire.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kafka_sink.wire.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka_sink.wire.messages.metadata import MetadataRequest, MetadataResponse
from kafka_sink.wire.messages.produce import ProduceRequest, ProduceResponse
from kafka_sink.wire.messages.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kafka_sink.wire.messages.transaction_admin import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka_sink.wire.messages.transactions import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
)

__all__ = [
    "KEY_TYPE_GROUP",
    "KEY_TYPE_TRANSACTION",
    "REQUEST_TYPES",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResponse",
    "DescribeProducersRequest",
    "DescribeProducersResponse",
    "DescribeTransactionsRequest",
    "DescribeTransactionsResponse",
    "EndTxnRequest",
    "EndTxnResponse",
    "FetchRequest",
    "FetchResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListTransactionsRequest",
    "ListTransactionsResponse",
    "MetadataRequest",
    "MetadataResponse",
    "ProduceRequest",
    "ProduceResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
]

REQUEST_TYPES: Mapping[ApiKey, type] = MappingProxyType(
    {
        cls.API_KEY: cls
        for cls in (
            ProduceRequest,
            FetchRequest,
            ListOffsetsRequest,
            MetadataRequest,
            FindCoordinatorRequest,
            SaslHandshakeRequest,
            ApiVersionsRequest,
            CreateTopicsRequest,
            InitProducerIdRequest,
            AddPartitionsToTxnRequest,
            EndTxnRequest,
            DescribeConfigsRequest,
            SaslAuthenticateRequest,
            DescribeProducersRequest,
            DescribeTransactionsRequest,
            ListTransactionsRequest,
        )
    }
)
