"""kafka-python 3.0.12 as an independent oracle for the wire codec (tests only).

Converts our message dataclasses to kafka-python's JSON-schema-driven message objects and back
to plain dicts, so a test can encode with one implementation and decode with the other.
"""

from __future__ import annotations

import sys
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest as KCreateTopicsRequest
from kafka.protocol.admin import CreateTopicsResponse as KCreateTopicsResponse
from kafka.protocol.admin import DescribeConfigsRequest as KDescribeConfigsRequest
from kafka.protocol.admin import DescribeConfigsResponse as KDescribeConfigsResponse
from kafka.protocol.admin import DescribeProducersRequest as KDescribeProducersRequest
from kafka.protocol.admin import DescribeProducersResponse as KDescribeProducersResponse
from kafka.protocol.admin import DescribeTransactionsRequest as KDescribeTransactionsRequest
from kafka.protocol.admin import DescribeTransactionsResponse as KDescribeTransactionsResponse
from kafka.protocol.admin import ListTransactionsRequest as KListTransactionsRequest
from kafka.protocol.admin import ListTransactionsResponse as KListTransactionsResponse
from kafka.protocol.consumer import FetchRequest as KFetchRequest
from kafka.protocol.consumer import FetchResponse as KFetchResponse
from kafka.protocol.consumer import ListOffsetsRequest as KListOffsetsRequest
from kafka.protocol.consumer import ListOffsetsResponse as KListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest as KApiVersionsRequest
from kafka.protocol.metadata import ApiVersionsResponse as KApiVersionsResponse
from kafka.protocol.metadata import FindCoordinatorRequest as KFindCoordinatorRequest
from kafka.protocol.metadata import FindCoordinatorResponse as KFindCoordinatorResponse
from kafka.protocol.metadata import MetadataRequest as KMetadataRequest
from kafka.protocol.metadata import MetadataResponse as KMetadataResponse
from kafka.protocol.producer import AddPartitionsToTxnRequest as KAddPartitionsToTxnRequest
from kafka.protocol.producer import AddPartitionsToTxnResponse as KAddPartitionsToTxnResponse
from kafka.protocol.producer import EndTxnRequest as KEndTxnRequest
from kafka.protocol.producer import EndTxnResponse as KEndTxnResponse
from kafka.protocol.producer import InitProducerIdRequest as KInitProducerIdRequest
from kafka.protocol.producer import InitProducerIdResponse as KInitProducerIdResponse
from kafka.protocol.producer import ProduceRequest as KProduceRequest
from kafka.protocol.producer import ProduceResponse as KProduceResponse
from kafka.protocol.sasl import SaslAuthenticateRequest as KSaslAuthenticateRequest
from kafka.protocol.sasl import SaslAuthenticateResponse as KSaslAuthenticateResponse
from kafka.protocol.sasl import SaslHandshakeRequest as KSaslHandshakeRequest
from kafka.protocol.sasl import SaslHandshakeResponse as KSaslHandshakeResponse

from kafka_sink.wire import messages as m
from kafka_sink.wire.primitives import ZERO_UUID
from kafka_sink.wire.schema import field_specs

ORACLE: dict[type, Any] = {
    m.ApiVersionsRequest: KApiVersionsRequest,
    m.ApiVersionsResponse: KApiVersionsResponse,
    m.MetadataRequest: KMetadataRequest,
    m.MetadataResponse: KMetadataResponse,
    m.ProduceRequest: KProduceRequest,
    m.ProduceResponse: KProduceResponse,
    m.InitProducerIdRequest: KInitProducerIdRequest,
    m.InitProducerIdResponse: KInitProducerIdResponse,
    m.CreateTopicsRequest: KCreateTopicsRequest,
    m.CreateTopicsResponse: KCreateTopicsResponse,
    m.FindCoordinatorRequest: KFindCoordinatorRequest,
    m.FindCoordinatorResponse: KFindCoordinatorResponse,
    m.AddPartitionsToTxnRequest: KAddPartitionsToTxnRequest,
    m.AddPartitionsToTxnResponse: KAddPartitionsToTxnResponse,
    m.EndTxnRequest: KEndTxnRequest,
    m.EndTxnResponse: KEndTxnResponse,
    m.SaslHandshakeRequest: KSaslHandshakeRequest,
    m.SaslHandshakeResponse: KSaslHandshakeResponse,
    m.SaslAuthenticateRequest: KSaslAuthenticateRequest,
    m.SaslAuthenticateResponse: KSaslAuthenticateResponse,
    m.ListOffsetsRequest: KListOffsetsRequest,
    m.ListOffsetsResponse: KListOffsetsResponse,
    m.FetchRequest: KFetchRequest,
    m.FetchResponse: KFetchResponse,
    m.DescribeConfigsRequest: KDescribeConfigsRequest,
    m.DescribeConfigsResponse: KDescribeConfigsResponse,
    m.ListTransactionsRequest: KListTransactionsRequest,
    m.ListTransactionsResponse: KListTransactionsResponse,
    m.DescribeTransactionsRequest: KDescribeTransactionsRequest,
    m.DescribeTransactionsResponse: KDescribeTransactionsResponse,
    m.DescribeProducersRequest: KDescribeProducersRequest,
    m.DescribeProducersResponse: KDescribeProducersResponse,
}


# kafka-python renames these two MetadataResponse fields; everything else keeps Apache's names.
_RENAMED = {
    ("MetadataResponse", "cluster_authorized_operations"): "authorized_operations",
    ("MetadataResponse.MetadataResponseTopic", "topic_authorized_operations"): (
        "authorized_operations"
    ),
}


def _kp_name(cls: type, name: str) -> str:
    return _RENAMED.get((cls.__qualname__, name), name)


_INT32_MIN = -(2**31)


def _bitfield_to_kp(value: int) -> set[int] | None:
    if value == _INT32_MIN:
        return None
    return {bit for bit in range(32) if value >> bit & 1}


def _bitfield_from_kp(value: set[int] | None) -> int:
    if value is None:
        return _INT32_MIN
    unsigned = sum(1 << bit for bit in value)
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned


def _is_struct(type_: str) -> bool:
    return type_.lstrip("[]")[:1].isupper()


def to_dict(obj: Any, version: int) -> dict[str, Any]:
    """Our message as nested dicts holding only the fields present in ``version``."""
    out: dict[str, Any] = {}
    for name, spec in field_specs(type(obj)):
        if version not in spec.versions:
            continue
        value = getattr(obj, name)
        if _is_struct(spec.type) and value is not None:
            if spec.type.startswith("[]"):
                value = [to_dict(v, version) for v in value]
            else:
                value = to_dict(value, version)
        elif isinstance(value, bytearray | memoryview):
            value = bytes(value)
        out[name] = value
    return out


def to_kafka_python(obj: Any, version: int, kp_cls: Any = None) -> Any:
    """An equivalent kafka-python object (``kp_cls`` for nested structs)."""
    if kp_cls is None:
        kp_cls = ORACLE[type(obj)][version]
    kwargs: dict[str, Any] = {}
    for name, spec in field_specs(type(obj)):
        if version not in spec.versions:
            continue
        value = getattr(obj, name)
        if spec.tag is not None and (value is None or value == spec.default):
            continue
        if _is_struct(spec.type) and value is not None:
            sub = getattr(kp_cls, spec.type.lstrip("[]"))
            if spec.type.startswith("[]"):
                value = [to_kafka_python(v, version, sub) for v in value]
            else:
                value = to_kafka_python(value, version, sub)
        kp_name = _kp_name(type(obj), name)
        if kp_name != name:
            value = _bitfield_to_kp(value)
        kwargs[kp_name] = value
    if kp_cls is ORACLE.get(type(obj)):
        return kp_cls(**kwargs)
    return kp_cls(version=version, **kwargs)


def kafka_python_encode(obj: Any, version: int) -> bytes:
    return bytes(to_kafka_python(obj, version).encode(version=version))


def kafka_python_decode(cls: type, data: bytes, version: int) -> dict[str, Any]:
    """kafka-python's reading of ``data``, as :func:`to_dict` would render the same message."""
    return _from_kafka_python(cls, ORACLE[cls].decode(data, version=version), version)


def _from_kafka_python(cls: type, obj: Any, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, spec in field_specs(cls):
        if version not in spec.versions:
            continue
        kp_name = _kp_name(cls, name)
        value = getattr(obj, kp_name)
        if kp_name != name:
            value = _bitfield_from_kp(value)
        if _is_struct(spec.type) and value is not None:
            sub = _resolve(cls, name)
            if spec.type.startswith("[]"):
                value = [_from_kafka_python(sub, v, version) for v in value]
            else:
                value = _from_kafka_python(sub, value, version)
        elif spec.type == "uuid" and value is None:
            value = ZERO_UUID  # kafka-python reads the all-zero UUID as None
        out[name] = value
    return out


def _resolve(cls: type, attr: str) -> type:
    # Our nested struct classes hang off the top-level class under their Apache names.
    spec = dict(field_specs(cls))[attr]
    name = spec.type.lstrip("[]")
    top = sys.modules[cls.__module__]
    for part in cls.__qualname__.split(".")[:1]:
        owner = getattr(top, part)
        if hasattr(owner, name):
            found: type = getattr(owner, name)
            return found
    raise LookupError(name)
