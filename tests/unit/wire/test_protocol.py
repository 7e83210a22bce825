"""Request/response headers, the ApiVersions exceptions, and version negotiation."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kafka_sink.errors import ProtocolError
from kafka_sink.wire import messages as m
from kafka_sink.wire.api import CLIENT_VERSIONS, ApiKey, negotiate
from kafka_sink.wire.framing import frame
from kafka_sink.wire.protocol import (
    correlation_id_of,
    decode_response,
    encode_request,
    encode_request_frame,
    request_header_version,
    response_header_version,
)
from kafka_sink.wire.schema import encode

from .kp_oracle import to_kafka_python


def h(text: str) -> bytes:
    return bytes.fromhex(re.sub(r"#[^\n]*", "", text).replace(" ", "").replace("\n", ""))


# A one-record RecordBatch v2 (null key, value "v", producer id 1000, epoch 0, sequence 0).
BATCH = h(
    """
    0000000000000000 00000039 ffffffff 02 839e0c01 0000 00000000
    0000018bcfe56800 0000018bcfe56800 00000000000003e8 0000 00000000 00000001
    0e 00 00 00 01 02 76 00
    """
)


def test_api_versions_v4_request_frame() -> None:
    payload = encode_request(m.ApiVersionsRequest("my-client", "0.1.0"), 4, 1, "py")
    assert frame(payload) == h(
        """
        0000001e  0012 0004 00000001  0002 7079  00       # header v2: client_id int16 length
        0a 6d792d636c69656e74  06 302e312e30  00
        """
    )


def test_metadata_v12_request_frame() -> None:
    payload = encode_request(m.MetadataRequest.for_topics(["t"]), 12, 2, "py")
    assert frame(payload) == h(
        "00000024 0003 000c 00000002 0002 7079 00  02 " + "00" * 16 + " 02 74 00  01 00 00"
    )


def test_produce_v9_request_frame_carries_the_batch_verbatim() -> None:
    request = m.ProduceRequest(
        None,
        -1,
        30000,
        [m.ProduceRequest.TopicProduceData("t", [m.ProduceRequest.PartitionProduceData(0, BATCH)])],
    )
    expected = h(
        "00000065 0000 0009 00000003 0002 7079 00  00 ffff 00007530 02 02 74 02 00000000 46"
    )
    expected += BATCH + h("00 00 00")
    assert encode_request_frame(request, 9, 3, "py") == expected
    assert frame(encode_request(request, 9, 3, "py")) == expected


def test_non_flexible_request_uses_header_v1_and_null_client_id() -> None:
    payload = encode_request(m.SaslHandshakeRequest("PLAIN"), 1, 0x01020304, None)
    assert payload == h("0011 0001 01020304 ffff  0005 504c41494e")


@pytest.mark.parametrize(
    ("request_obj", "version"),
    [
        (m.ApiVersionsRequest("kafka-sink", "1.0"), 0),
        (m.ApiVersionsRequest("kafka-sink", "1.0"), 4),
        (m.MetadataRequest.for_topics(["a", "b"]), 1),
        (m.MetadataRequest(None), 12),
        (
            m.ProduceRequest(
                "tx",
                1,
                10,
                [
                    m.ProduceRequest.TopicProduceData(
                        "t", [m.ProduceRequest.PartitionProduceData(0, BATCH)]
                    )
                ],
            ),
            3,
        ),
        (
            m.ProduceRequest(
                None,
                -1,
                10,
                [
                    m.ProduceRequest.TopicProduceData(
                        "t", [m.ProduceRequest.PartitionProduceData(0, BATCH)]
                    )
                ],
            ),
            12,
        ),
        (m.InitProducerIdRequest(None), 5),
        (m.FindCoordinatorRequest("tx", 1), 2),
        (m.SaslAuthenticateRequest(b"\0u\0p"), 2),
    ],
)
def test_request_frames_match_kafka_python(request_obj: Any, version: int) -> None:
    theirs = to_kafka_python(request_obj, version)
    theirs.with_header(correlation_id=42, client_id="client-1")
    expected = bytes(theirs.encode(version=version, header=True, framed=True))
    assert encode_request_frame(request_obj, version, 42, "client-1") == expected


def test_header_versions() -> None:
    assert request_header_version(m.ProduceRequest, 8) == 1
    assert request_header_version(m.ProduceRequest, 9) == 2
    assert request_header_version(m.SaslHandshakeRequest, 1) == 1
    assert response_header_version(m.ProduceResponse, 9) == 1
    assert response_header_version(m.MetadataResponse, 8) == 0
    # KIP-511: ApiVersions responses always use header v0, even for flexible bodies.
    assert response_header_version(m.ApiVersionsResponse, 4) == 0


def test_decode_flexible_response_skips_header_tags() -> None:
    body = m.ProduceResponse(
        [
            m.ProduceResponse.TopicProduceResponse(
                "t", [m.ProduceResponse.PartitionProduceResponse(0, 0, 5)]
            )
        ]
    )
    payload = h("00000007 00") + encode(body, 9)
    assert correlation_id_of(payload) == 7
    correlation_id, decoded = decode_response(m.ProduceRequest, 9, payload)
    assert correlation_id == 7
    assert decoded.responses[0].partition_responses[0].base_offset == 5
    assert decoded.node_endpoints == []
    assert decoded.responses[0].partition_responses[0].current_leader is None


def test_decode_non_flexible_response_has_no_header_tags() -> None:
    payload = h("00000009") + encode(m.InitProducerIdResponse(0, 0, 1000, 1), 1)
    assert decode_response(m.InitProducerIdRequest, 1, payload) == (
        9,
        m.InitProducerIdResponse(0, 0, 1000, 1),
    )


def test_api_versions_v3_response_uses_header_v0() -> None:
    body = m.ApiVersionsResponse(0, [m.ApiVersionsResponse.ApiVersion(0, 0, 12)])
    payload = h("0000000b") + encode(body, 3)  # no tag byte after the correlation id
    correlation_id, decoded = decode_response(m.ApiVersionsRequest, 3, payload)
    assert correlation_id == 11
    assert decoded.version_ranges() == {0: (0, 12)}


def test_api_versions_response_encoded_by_kafka_python_decodes() -> None:
    body = m.ApiVersionsResponse(
        0,
        [m.ApiVersionsResponse.ApiVersion(0, 0, 12), m.ApiVersionsResponse.ApiVersion(18, 0, 4)],
        finalized_features_epoch=3,
        finalized_features=[m.ApiVersionsResponse.FinalizedFeatureKey("transaction.version", 2, 0)],
    )
    theirs = to_kafka_python(body, 4)
    theirs.with_header(correlation_id=5)
    payload = bytes(theirs.encode(header=True))
    assert decode_response(m.ApiVersionsRequest, 4, payload) == (5, body)


def test_unsupported_api_versions_answer_is_read_in_the_v0_layout() -> None:
    # A broker that does not know ApiVersions v4 answers error 35 with a v0 body and header v0,
    # listing only its own ApiVersions range.
    payload = h("00000001  0023  00000001  0012 0000 0002")
    correlation_id, decoded = decode_response(m.ApiVersionsRequest, 4, payload)
    assert correlation_id == 1
    assert decoded.error_code == 35
    assert decoded.version_ranges() == {18: (0, 2)}
    # Brokers before 2.4 send an empty list.
    _, old = decode_response(m.ApiVersionsRequest, 3, h("00000002 0023 00000000"))
    assert old.api_keys == []


def test_malformed_responses_raise_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="no correlation id"):
        correlation_id_of(b"\x00\x01")
    with pytest.raises(ProtocolError, match="truncated"):
        decode_response(m.InitProducerIdRequest, 1, h("00000001 00000000 0000"))
    with pytest.raises(ProtocolError, match="trailing"):
        decode_response(m.EndTxnRequest, 0, h("00000001 00000000 0000 ff"))


def test_unimplemented_versions_are_refused() -> None:
    with pytest.raises(ProtocolError, match=r"ProduceRequest v13 is not implemented"):
        encode_request(m.ProduceRequest(), 13, 1, None)
    with pytest.raises(ProtocolError, match=r"v2 is not implemented"):
        encode(m.ProduceRequest(), 2)


def test_values_that_do_not_fit_raise_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="acks"):
        encode(m.ProduceRequest(acks=1 << 20), 9)
    with pytest.raises(ProtocolError, match="null"):
        encode(m.EndTxnRequest(transactional_id=None), 0)  # type: ignore[arg-type]


def test_sasl_secrets_stay_out_of_repr() -> None:
    assert "secret" not in repr(m.SaslAuthenticateRequest(b"\0user\0secret"))
    assert "records" not in repr(m.ProduceRequest.PartitionProduceData(0, BATCH))


# ------------------------------------------------------------------------------ negotiation


def test_negotiate_picks_the_highest_common_version() -> None:
    broker = {0: (0, 13), 3: (0, 13), 18: (0, 4), 22: (0, 6), 10: (0, 6), 999: (0, 1)}
    chosen = negotiate(broker)
    assert chosen == {
        ApiKey.PRODUCE: 12,  # v13 needs topic ids
        ApiKey.METADATA: 12,
        ApiKey.API_VERSIONS: 4,
        ApiKey.INIT_PRODUCER_ID: 5,  # v6 is unstable
        ApiKey.FIND_COORDINATOR: 6,
    }


def test_negotiate_never_goes_below_our_minimum() -> None:
    # A 3.x broker advertising Produce 0..2 only would need legacy message formats.
    assert ApiKey.PRODUCE not in negotiate({0: (0, 2)})
    assert negotiate({0: (0, 7)}) == {ApiKey.PRODUCE: 7}
    # ... nor below the broker's.
    assert ApiKey.END_TXN not in negotiate({26: (6, 6)})
    assert ApiKey.ADD_PARTITIONS_TO_TXN not in negotiate({24: (4, 5)})
    # EndTxn v5 (Transactions V2) is in range.
    assert negotiate({26: (0, 5)}) == {ApiKey.END_TXN: 5}


def test_client_versions_are_within_what_the_codec_implements() -> None:
    for key, (low, high) in CLIENT_VERSIONS.items():
        request_type = m.REQUEST_TYPES[key]
        assert request_type.API_KEY is key
        valid = request_type.VALID_VERSIONS
        assert valid[0] <= low <= high <= valid[1]
        assert valid == request_type.RESPONSE_TYPE.VALID_VERSIONS
    assert set(CLIENT_VERSIONS) == set(ApiKey) == set(m.REQUEST_TYPES)
