"""Golden bytes for every message shape we send or parse: one table drives encode and decode.

Each hex string below was written by hand from the byte layouts of the Kafka protocol (field
order, fixed widths, int16/int32 lengths in classic versions, unsigned-varint N+1 lengths and a
tagged-field section closing every struct in flexible versions). Every case is checked three ways:
our encoder produces exactly these bytes, our decoder turns them back into the same object, and
kafka-python (an independent implementation) decodes them to the same field values.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from kafka_sink.wire import messages as m
from kafka_sink.wire.schema import decode, encode

from .kp_oracle import kafka_python_decode, kafka_python_encode, to_dict


def h(text: str) -> bytes:
    """Hex with spaces, newlines and ``# comments`` allowed."""
    return bytes.fromhex(re.sub(r"#[^\n]*", "", text).replace(" ", "").replace("\n", ""))


AV = m.ApiVersionsResponse
MD = m.MetadataResponse
MR = m.MetadataRequest
PR = m.ProduceRequest
PS = m.ProduceResponse
CT = m.CreateTopicsRequest
CR = m.CreateTopicsResponse
FR = m.FindCoordinatorResponse
AP = m.AddPartitionsToTxnRequest
AR = m.AddPartitionsToTxnResponse
LT = m.ListTransactionsRequest
LS = m.ListTransactionsResponse
DT = m.DescribeTransactionsResponse
DP = m.DescribeProducersResponse
LO = m.ListOffsetsRequest
LR = m.ListOffsetsResponse
FQ = m.FetchRequest
FS = m.FetchResponse
DQ = m.DescribeConfigsRequest
DS = m.DescribeConfigsResponse

TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")

CASES: list[tuple[str, Any, int, str]] = [
    # ---------------------------------------------------------------- ApiVersions
    ("api_versions_req_v0", m.ApiVersionsRequest(), 0, ""),
    ("api_versions_req_v2", m.ApiVersionsRequest(), 2, ""),
    (
        "api_versions_req_v3",
        m.ApiVersionsRequest("my-client", "0.1.0"),
        3,
        "0a 6d792d636c69656e74  06 302e312e30  00",
    ),
    (
        "api_versions_req_v4",
        m.ApiVersionsRequest("my-client", "0.1.0"),
        4,
        "0a 6d792d636c69656e74  06 302e312e30  00",
    ),
    (
        "api_versions_resp_v0",
        AV(0, [AV.ApiVersion(0, 3, 12), AV.ApiVersion(18, 0, 4)]),
        0,
        "0000  00000002  0000 0003 000c  0012 0000 0004",
    ),
    (
        "api_versions_resp_v2",
        AV(0, [AV.ApiVersion(0, 3, 12)], throttle_time_ms=7),
        2,
        "0000  00000001  0000 0003 000c  00000007",
    ),
    (
        "api_versions_resp_v3_no_tags",
        AV(0, [AV.ApiVersion(0, 3, 12)]),
        3,
        "0000  02 0000 0003 000c 00  00000000  00",
    ),
    (
        "api_versions_resp_v4_tags",
        AV(
            0,
            [AV.ApiVersion(18, 0, 4)],
            throttle_time_ms=1,
            supported_features=[AV.SupportedFeatureKey("x", 0, 1)],
            finalized_features_epoch=5,
            finalized_features=[AV.FinalizedFeatureKey("x", 1, 0)],
            zk_migration_ready=True,
        ),
        4,
        """
        0000  02 0012 0000 0004 00  00000001
        04                                    # four tagged fields
        00 08  02 02 78 0000 0001 00          # tag 0 supported_features [x 0..1]
        01 08  0000000000000005               # tag 1 finalized_features_epoch 5
        02 08  02 02 78 0001 0000 00          # tag 2 finalized_features [x max 1 min 0]
        03 01  01                             # tag 3 zk_migration_ready true
        """,
    ),
    # ---------------------------------------------------------------- Metadata request
    ("metadata_req_v0", MR([MR.MetadataRequestTopic(name="t")]), 0, "00000001 0001 74"),
    ("metadata_req_v1_all", MR(None), 1, "ffffffff"),
    ("metadata_req_v1_none", MR([]), 1, "00000000"),
    ("metadata_req_v4", MR.for_topics(["t"]), 4, "00000001 0001 74  01"),
    (
        "metadata_req_v8",
        MR.for_topics(["t"], allow_auto_topic_creation=False),
        8,
        "00000001 0001 74  00  00  00",
    ),
    ("metadata_req_v9", MR.for_topics(["t"]), 9, "02 02 74 00  01  00  00  00"),
    ("metadata_req_v9_all", MR(None), 9, "00  01  00  00  00"),
    (
        "metadata_req_v10",
        MR.for_topics(["t"]),
        10,
        "02 00000000000000000000000000000000 02 74 00  01  00  00  00",
    ),
    (
        "metadata_req_v11",
        MR([MR.MetadataRequestTopic(name="t")], include_topic_authorized_operations=True),
        11,
        "02 00000000000000000000000000000000 02 74 00  01  01  00",
    ),
    (
        "metadata_req_v12",
        MR.for_topics(["t"]),
        12,
        "02 00000000000000000000000000000000 02 74 00  01  00  00",
    ),
    # ---------------------------------------------------------------- Metadata response
    (
        "metadata_resp_v0",
        MD(
            brokers=[MD.MetadataResponseBroker(1, "h", 9092)],
            topics=[
                MD.MetadataResponseTopic(
                    0, "t", partitions=[MD.MetadataResponsePartition(0, 0, 1, -1, [1], [1])]
                )
            ],
        ),
        0,
        """
        00000001  00000001 0001 68 00002384               # brokers: [1 h:9092]
        00000001  0000 0001 74                            # topics: [error 0, "t"
          00000001  0000 00000000 00000001                #   partitions: [err 0, p0, leader 1,
                    00000001 00000001  00000001 00000001  #     replicas [1], isr [1]]]
        """,
    ),
    (
        "metadata_resp_v1",
        MD(
            brokers=[MD.MetadataResponseBroker(1, "h", 9092, None)],
            controller_id=1,
            topics=[
                MD.MetadataResponseTopic(
                    0,
                    "t",
                    is_internal=True,
                    partitions=[MD.MetadataResponsePartition(9, 0, 1, -1, [1, 2], [1])],
                )
            ],
        ),
        1,
        """
        00000001  00000001 0001 68 00002384 ffff          # broker, rack null
        00000001                                          # controller_id
        00000001  0000 0001 74 01                         # topic "t", is_internal
          00000001  0009 00000000 00000001
                    00000002 00000001 00000002  00000001 00000001
        """,
    ),
    (
        "metadata_resp_v7",
        MD(
            throttle_time_ms=0,
            brokers=[MD.MetadataResponseBroker(1, "h", 9092, "r")],
            cluster_id="c",
            controller_id=1,
            topics=[
                MD.MetadataResponseTopic(
                    3,
                    "t",
                    partitions=[MD.MetadataResponsePartition(0, 0, 1, 4, [1], [1], [2])],
                )
            ],
        ),
        7,
        """
        00000000                                          # throttle
        00000001  00000001 0001 68 00002384 0001 72       # broker with rack "r"
        0001 63  00000001                                 # cluster_id "c", controller 1
        00000001  0003 0001 74 00                         # topic error 3, "t", not internal
          00000001  0000 00000000 00000001 00000004       # leader 1, leader_epoch 4
                    00000001 00000001  00000001 00000001  00000001 00000002  # offline [2]
        """,
    ),
    (
        "metadata_resp_v8",
        MD(
            brokers=[],
            cluster_id=None,
            controller_id=-1,
            topics=[MD.MetadataResponseTopic(0, "t", topic_authorized_operations=8)],
            cluster_authorized_operations=-(2**31),
        ),
        8,
        """
        00000000  00000000  ffff  ffffffff
        00000001  0000 0001 74 00  00000000  00000008
        80000000
        """,
    ),
    (
        "metadata_resp_v9",
        MD(
            brokers=[MD.MetadataResponseBroker(1, "h", 9092, None)],
            cluster_id="c",
            controller_id=1,
            topics=[
                MD.MetadataResponseTopic(
                    0, "t", partitions=[MD.MetadataResponsePartition(0, 0, 1, 4, [1], [1], [])]
                )
            ],
        ),
        9,
        """
        00000000                                          # throttle
        02  00000001 02 68 00002384 00 00                 # broker, rack null, struct tags
        02 63  00000001                                   # cluster_id "c", controller 1
        02  0000 02 74 00                                 # topic error 0, "t", not internal
          02  0000 00000000 00000001 00000004  02 00000001  02 00000001  01  00
          80000000  00                                    # topic auth ops, topic tags
        80000000                                          # cluster auth ops (v8-10)
        00                                                # body tags
        """,
    ),
    (
        "metadata_resp_v12",
        MD(
            brokers=[MD.MetadataResponseBroker(1, "h", 9092, "r")],
            cluster_id="c",
            controller_id=1,
            topics=[
                MD.MetadataResponseTopic(
                    0,
                    "t",
                    topic_id=TOPIC_ID,
                    partitions=[MD.MetadataResponsePartition(0, 0, 1, 4, [1], [1], [])],
                ),
                MD.MetadataResponseTopic(100, None),
            ],
        ),
        12,
        """
        00000000
        02  00000001 02 68 00002384 02 72 00
        02 63  00000001
        03
          0000 02 74 0123456789abcdef0123456789abcdef 00
          02  0000 00000000 00000001 00000004  02 00000001  02 00000001  01  00
          80000000  00
          0064 00 00000000000000000000000000000000 00  01  80000000  00   # unknown id: null name
        00
        """,
    ),
    # ---------------------------------------------------------------- Produce request
    (
        "produce_req_v3",
        PR("tx", 1, 1000, [PR.TopicProduceData("t", [PR.PartitionProduceData(2, b"abc")])]),
        3,
        """
        0002 7478  0001  000003e8                         # transactional_id "tx", acks 1, 1000 ms
        00000001  0001 74                                 # topic_data: ["t"
          00000001  00000002  00000003 616263             #   [partition 2, records "abc"]]
        """,
    ),
    (
        "produce_req_v8_null_records",
        PR(None, -1, 30000, [PR.TopicProduceData("t", [PR.PartitionProduceData(0, None)])]),
        8,
        "ffff ffff 00007530  00000001 0001 74  00000001 00000000 ffffffff",
    ),
    (
        "produce_req_v9",
        PR(None, -1, 30000, [PR.TopicProduceData("t", [PR.PartitionProduceData(0, b"abc")])]),
        9,
        """
        00  ffff 00007530                                 # null transactional_id, acks -1
        02 02 74                                          # topic_data: 1 topic, "t"
          02 00000000 04 616263 00                        #   1 partition, records len 3+1
        00  00                                            # topic tags, body tags
        """,
    ),
    (
        "produce_req_v12_two_topics",
        PR(
            "tx",
            -1,
            5,
            [
                PR.TopicProduceData(
                    "a", [PR.PartitionProduceData(0, b"\x01"), PR.PartitionProduceData(1, b"")]
                ),
                PR.TopicProduceData("b", [PR.PartitionProduceData(0, None)]),
            ],
        ),
        12,
        """
        03 7478  ffff 00000005
        03
          02 61  03  00000000 02 01 00  00000001 01 00  00
          02 62  02  00000000 00 00  00
        00
        """,
    ),
    # ---------------------------------------------------------------- Produce response
    (
        "produce_resp_v3",
        PS([PS.TopicProduceResponse("t", [PS.PartitionProduceResponse(0, 0, 42, -1)])], 0),
        3,
        """
        00000001  0001 74  00000001
          00000000 0000 000000000000002a ffffffffffffffff
        00000000
        """,
    ),
    (
        "produce_resp_v5",
        PS([PS.TopicProduceResponse("t", [PS.PartitionProduceResponse(1, 0, 42, -1, 7)])], 3),
        5,
        """
        00000001  0001 74  00000001
          00000001 0000 000000000000002a ffffffffffffffff 0000000000000007
        00000003
        """,
    ),
    (
        "produce_resp_v8",
        PS(
            [
                PS.TopicProduceResponse(
                    "t",
                    [
                        PS.PartitionProduceResponse(
                            0,
                            87,
                            -1,
                            -1,
                            -1,
                            [PS.BatchIndexAndErrorMessage(1, "bad")],
                            "invalid",
                        )
                    ],
                )
            ],
            0,
        ),
        8,
        """
        00000001  0001 74  00000001
          00000000 0057 ffffffffffffffff ffffffffffffffff ffffffffffffffff
          00000001  00000001 0003 626164                  # record_errors [(1, "bad")]
          0007 696e76616c6964                             # error_message "invalid"
        00000000
        """,
    ),
    (
        "produce_resp_v9",
        PS([PS.TopicProduceResponse("t", [PS.PartitionProduceResponse(0, 0, 42, -1, 0)])], 0),
        9,
        """
        02  02 74  02
          00000000 0000 000000000000002a ffffffffffffffff 0000000000000000  01  00  00
          00
        00000000  00
        """,
    ),
    (
        "produce_resp_v10_leader_hint",
        PS(
            [
                PS.TopicProduceResponse(
                    "t",
                    [
                        PS.PartitionProduceResponse(
                            0, 6, -1, -1, -1, current_leader=PS.LeaderIdAndEpoch(2, 5)
                        )
                    ],
                )
            ],
            0,
            node_endpoints=[PS.NodeEndpoint(2, "h", 9092, None)],
        ),
        10,
        """
        02  02 74  02
          00000000 0006 ffffffffffffffff ffffffffffffffff ffffffffffffffff  01  00
          01 00 09  00000002 00000005 00                  # tag 0 current_leader (2, epoch 5)
          00                                              # topic tags
        00000000
        01 00 0d  02 00000002 02 68 00002384 00 00        # tag 0 node_endpoints [2 h:9092]
        """,
    ),
    (
        "produce_resp_v12",
        PS([PS.TopicProduceResponse("t", [PS.PartitionProduceResponse(0, 0, 42, 9, 0)])], 0),
        12,
        """
        02  02 74  02
          00000000 0000 000000000000002a 0000000000000009 0000000000000000  01  00  00
          00
        00000000  00
        """,
    ),
    # ---------------------------------------------------------------- InitProducerId
    ("init_pid_req_v0", m.InitProducerIdRequest(None), 0, "ffff 7fffffff"),
    ("init_pid_req_v1_txn", m.InitProducerIdRequest("tx", 60000), 1, "0002 7478 0000ea60"),
    ("init_pid_req_v2", m.InitProducerIdRequest(None), 2, "00 7fffffff 00"),
    (
        "init_pid_req_v4",
        m.InitProducerIdRequest("tx", 60000, 1000, 3),
        4,
        "03 7478 0000ea60 00000000000003e8 0003 00",
    ),
    (
        "init_pid_req_v5",
        m.InitProducerIdRequest(None),
        5,
        "00 7fffffff ffffffffffffffff ffff 00",
    ),
    (
        "init_pid_resp_v0",
        m.InitProducerIdResponse(0, 0, 1000, 0),
        0,
        "00000000 0000 00000000000003e8 0000",
    ),
    (
        "init_pid_resp_v5",
        m.InitProducerIdResponse(10, 15, -1, -1),
        5,
        "0000000a 000f ffffffffffffffff ffff 00",
    ),
    # ---------------------------------------------------------------- CreateTopics
    (
        "create_topics_req_v2",
        CT(
            [
                CT.CreatableTopic(
                    "t",
                    3,
                    1,
                    [CT.CreatableReplicaAssignment(0, [1])],
                    [CT.CreatableTopicConfig("k", "v"), CT.CreatableTopicConfig("n", None)],
                )
            ],
            60000,
            True,
        ),
        2,
        """
        00000001  0001 74 00000003 0001
          00000001  00000000 00000001 00000001            # assignments [p0 -> [1]]
          00000002  0001 6b 0001 76  0001 6e ffff          # configs k=v, n=null
        0000ea60  01
        """,
    ),
    (
        "create_topics_req_v5",
        CT([CT.CreatableTopic("t", -1, -1, [], [CT.CreatableTopicConfig("k", "v")])], 1000),
        5,
        "02  02 74 ffffffff ffff 01  02 02 6b 02 76 00  00  000003e8  00  00",
    ),
    (
        "create_topics_resp_v2",
        CR(0, [CR.CreatableTopicResult("t", error_code=36, error_message="exists")]),
        2,
        "00000000  00000001  0001 74 0024 0006 657869737473",
    ),
    (
        "create_topics_resp_v5",
        CR(
            0,
            [
                CR.CreatableTopicResult(
                    "t",
                    error_code=0,
                    error_message=None,
                    topic_config_error_code=29,
                    num_partitions=1,
                    replication_factor=1,
                    configs=[CR.CreatableTopicConfigs("k", "v", False, 5, False)],
                )
            ],
        ),
        5,
        """
        00000000  02
          02 74 0000 00  00000001 0001
          02  02 6b 02 76 00 05 00 00                     # configs [k=v, source 5]
          01 00 02 001d                                   # tag 0 topic_config_error_code 29
        00
        """,
    ),
    (
        "create_topics_resp_v7",
        CR(0, [CR.CreatableTopicResult("t", TOPIC_ID, 0, None, 0, 1, 1, None)]),
        7,
        "00000000 02  02 74 0123456789abcdef0123456789abcdef 0000 00 00000001 0001 00 00  00",
    ),
    # ---------------------------------------------------------------- FindCoordinator
    ("find_coord_req_v0", m.FindCoordinatorRequest("g"), 0, "0001 67"),
    ("find_coord_req_v1", m.FindCoordinatorRequest("tx", 1), 1, "0002 7478 01"),
    ("find_coord_req_v3", m.FindCoordinatorRequest("tx", 1), 3, "03 7478 01 00"),
    (
        "find_coord_req_v4",
        m.FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]),
        4,
        "01 02 03 7478 00",
    ),
    ("find_coord_resp_v0", FR(0, 0, None, 1, "h", 9092), 0, "0000 00000001 0001 68 00002384"),
    (
        "find_coord_resp_v1",
        FR(0, 15, "no", -1, "", -1),
        1,
        "00000000 000f 0002 6e6f ffffffff 0000 ffffffff",
    ),
    (
        "find_coord_resp_v3",
        FR(0, 0, None, 1, "h", 9092),
        3,
        "00000000 0000 00 00000001 02 68 00002384 00",
    ),
    (
        "find_coord_resp_v4",
        FR(0, coordinators=[FR.Coordinator("tx", 1, "h", 9092, 0, None)]),
        4,
        "00000000  02  03 7478 00000001 02 68 00002384 0000 00 00  00",
    ),
    # ---------------------------------------------------------------- AddPartitionsToTxn
    (
        "add_partitions_req_v0",
        AP("tx", 1000, 0, [AP.AddPartitionsToTxnTopic("t", [0, 1])]),
        0,
        "0002 7478 00000000000003e8 0000  00000001 0001 74 00000002 00000000 00000001",
    ),
    (
        "add_partitions_req_v3",
        AP("tx", 1000, 0, [AP.AddPartitionsToTxnTopic("t", [0])]),
        3,
        "03 7478 00000000000003e8 0000  02 02 74 02 00000000 00  00",
    ),
    (
        "add_partitions_resp_v0",
        AR(
            0,
            [AR.AddPartitionsToTxnTopicResult("t", [AR.AddPartitionsToTxnPartitionResult(0, 51)])],
        ),
        0,
        "00000000  00000001 0001 74 00000001 00000000 0033",
    ),
    (
        "add_partitions_resp_v3",
        AR(
            0, [AR.AddPartitionsToTxnTopicResult("t", [AR.AddPartitionsToTxnPartitionResult(0, 0)])]
        ),
        3,
        "00000000  02 02 74 02 00000000 0000 00 00  00",
    ),
    # ---------------------------------------------------------------- EndTxn
    (
        "end_txn_req_v0",
        m.EndTxnRequest("tx", 1000, 2, True),
        0,
        "0002 7478 00000000000003e8 0002 01",
    ),
    (
        "end_txn_req_v3",
        m.EndTxnRequest("tx", 1000, 2, False),
        3,
        "03 7478 00000000000003e8 0002 00 00",
    ),
    ("end_txn_resp_v0", m.EndTxnResponse(0, 48), 0, "00000000 0030"),
    ("end_txn_resp_v3", m.EndTxnResponse(0, 0), 3, "00000000 0000 00"),
    (
        "end_txn_resp_v5",
        m.EndTxnResponse(0, 0, 1000, 3),
        5,
        "00000000 0000 00000000000003e8 0003 00",
    ),
    # ---------------------------------------------------------------- SASL
    ("sasl_handshake_req_v1", m.SaslHandshakeRequest("PLAIN"), 1, "0005 504c41494e"),
    (
        "sasl_handshake_resp_v1",
        m.SaslHandshakeResponse(33, ["PLAIN", "SCRAM-SHA-256"]),
        1,
        "0021 00000002 0005 504c41494e 000d 534352414d2d5348412d323536",
    ),
    ("sasl_auth_req_v0", m.SaslAuthenticateRequest(b"\0u\0p"), 0, "00000004 00750070"),
    ("sasl_auth_req_v2", m.SaslAuthenticateRequest(b"\0u\0p"), 2, "05 00750070 00"),
    (
        "sasl_auth_resp_v0",
        m.SaslAuthenticateResponse(58, "denied", b""),
        0,
        "003a 0006 64656e696564 00000000",
    ),
    (
        "sasl_auth_resp_v1",
        m.SaslAuthenticateResponse(0, None, b"v=1", 3600000),
        1,
        "0000 ffff 00000003 763d31 000000000036ee80",
    ),
    (
        "sasl_auth_resp_v2",
        m.SaslAuthenticateResponse(0, None, b"", 0),
        2,
        "0000 00 01 0000000000000000 00",
    ),
    # ---------------------------------------------------------------- ListTransactions
    (
        "list_txns_req_v0",
        LT(["Ongoing"], [5]),
        0,
        "02 08 4f6e676f696e67  02 0000000000000005  00",
    ),
    (
        "list_txns_req_v1_duration",
        LT([], [], 60000),
        1,
        "01  01  000000000000ea60  00",  # running longer than 60 s
    ),
    (
        "list_txns_req_v2_pattern",
        LT(["Ongoing"], [], -1, "app-.*"),
        2,
        "02 08 4f6e676f696e67  01  ffffffffffffffff  07 6170702d2e2a  00",
    ),
    ("list_txns_req_v2_no_pattern", LT(), 2, "01 01 ffffffffffffffff 00 00"),
    (
        "list_txns_resp_v0",
        LS(0, 0, ["Bogus"], [LS.TransactionState("tx", 1000, "Ongoing")]),
        0,
        """
        00000000 0000  02 06 426f677573                   # unknown_state_filters ["Bogus"]
        02  03 7478 00000000000003e8 08 4f6e676f696e67 00  # ("tx", pid 1000, "Ongoing")
        00
        """,
    ),
    # ---------------------------------------------------------------- DescribeTransactions
    ("describe_txns_req_v0", m.DescribeTransactionsRequest(["tx"]), 0, "02 03 7478 00"),
    (
        "describe_txns_resp_v0",
        DT(
            0,
            [
                DT.TransactionState(
                    0,
                    "tx",
                    "Ongoing",
                    60000,
                    1_700_000_000_000,
                    1000,
                    2,
                    [DT.TopicData("t", [0, 1])],
                ),
                DT.TransactionState(16, "other", "", 0, -1, -1, -1, []),
            ],
        ),
        0,
        """
        00000000  03
          0000 03 7478 08 4f6e676f696e67 0000ea60         # ok, "tx", Ongoing, timeout 60 s
          0000018bcfe56800 00000000000003e8 0002          # started at, pid 1000, epoch 2
          02  02 74 03 00000000 00000001 00  00           # topics [t: [0, 1]]
          0010 06 6f74686572 01 00000000                  # NOT_COORDINATOR for "other"
          ffffffffffffffff ffffffffffffffff ffff 01 00
        00
        """,
    ),
    # ---------------------------------------------------------------- DescribeProducers
    (
        "describe_producers_req_v0",
        m.DescribeProducersRequest([m.DescribeProducersRequest.TopicRequest("t", [0])]),
        0,
        "02  02 74 02 00000000 00  00",
    ),
    (
        "describe_producers_resp_v0",
        DP(
            0,
            [
                DP.TopicResponse(
                    "t",
                    [
                        DP.PartitionResponse(
                            0, 0, None, [DP.ProducerState(1000, 2, 4, 1_700_000_000_000, 7, 42)]
                        )
                    ],
                )
            ],
        ),
        0,
        """
        00000000  02  02 74  02
          00000000 0000 00                                # partition 0, no error, null message
          02  00000000000003e8 00000002 00000004          # pid 1000, epoch 2, last sequence 4
              0000018bcfe56800 00000007 000000000000002a 00   # coordinator epoch 7, txn at 42
          00  00
        00
        """,
    ),
    # ---------------------------------------------------------------- ListOffsets
    (
        "list_offsets_req_v1_earliest",
        LO(topics=[LO.ListOffsetsTopic("t", [LO.ListOffsetsPartition(0, timestamp=-2)])]),
        1,
        "ffffffff  00000001 0001 74  00000001 00000000 fffffffffffffffe",
    ),
    (
        "list_offsets_req_v2_read_committed",
        LO(isolation_level=1, topics=[LO.ListOffsetsTopic("t", [LO.ListOffsetsPartition(0)])]),
        2,
        "ffffffff 01  00000001 0001 74  00000001 00000000 ffffffffffffffff",
    ),
    (
        "list_offsets_req_v4_leader_epoch",
        LO(topics=[LO.ListOffsetsTopic("t", [LO.ListOffsetsPartition(0, 5, -1)])]),
        4,
        "ffffffff 00  00000001 0001 74  00000001 00000000 00000005 ffffffffffffffff",
    ),
    (
        "list_offsets_req_v6",
        LO(isolation_level=1, topics=[LO.ListOffsetsTopic("t", [LO.ListOffsetsPartition(0)])]),
        6,
        "ffffffff 01  02 02 74  02 00000000 ffffffff ffffffffffffffff 00  00  00",
    ),
    (
        "list_offsets_req_v10_timeout",
        LO(topics=[LO.ListOffsetsTopic("t", [LO.ListOffsetsPartition(0, timestamp=-2)])]),
        10,
        "ffffffff 00  02 02 74  02 00000000 ffffffff fffffffffffffffe 00  00  00007530 00",
    ),
    (
        "list_offsets_req_v11_pending_upload",
        LO(topics=[LO.ListOffsetsTopic("t", [LO.ListOffsetsPartition(0, timestamp=-6)])]),
        11,
        "ffffffff 00  02 02 74  02 00000000 ffffffff fffffffffffffffa 00  00  00007530 00",
    ),
    (
        "list_offsets_resp_v1",
        LR(
            topics=[
                LR.ListOffsetsTopicResponse("t", [LR.ListOffsetsPartitionResponse(0, 0, -1, 42)])
            ]
        ),
        1,
        "00000001 0001 74  00000001 00000000 0000 ffffffffffffffff 000000000000002a",
    ),
    (
        "list_offsets_resp_v4",
        LR(
            topics=[
                LR.ListOffsetsTopicResponse("t", [LR.ListOffsetsPartitionResponse(0, 0, -1, 42, 3)])
            ]
        ),
        4,
        """
        00000000  00000001 0001 74  00000001
          00000000 0000 ffffffffffffffff 000000000000002a 00000003   # leader epoch 3
        """,
    ),
    (
        "list_offsets_resp_v6",
        LR(
            topics=[
                LR.ListOffsetsTopicResponse(
                    "t", [LR.ListOffsetsPartitionResponse(0, 6, -1, -1, -1)]
                )
            ]
        ),
        6,
        """
        00000000  02 02 74
          02  00000000 0006 ffffffffffffffff ffffffffffffffff ffffffff 00  # NOT_LEADER_OR_FOLLOWER
          00
        00
        """,
    ),
    # ---------------------------------------------------------------- Fetch request
    (
        "fetch_req_v4",
        FQ(
            max_bytes=1 << 20,
            isolation_level=1,
            topics=[FQ.FetchTopic("t", partitions=[FQ.FetchPartition(0, fetch_offset=5)])],
        ),
        4,
        """
        ffffffff 000001f4 00000001 00100000 01            # replica -1, 500 ms, 1 byte, 1 MiB, RC
        00000001  0001 74  00000001  00000000 0000000000000005 00100000
        """,
    ),
    (
        "fetch_req_v7_session",
        FQ(topics=[FQ.FetchTopic("t", partitions=[FQ.FetchPartition(0, fetch_offset=5)])]),
        7,
        """
        ffffffff 000001f4 00000001 7fffffff 00  00000000 ffffffff   # sessionless full fetch
        00000001  0001 74  00000001  00000000 0000000000000005 ffffffffffffffff 00100000
        00000000                                          # no forgotten topics
        """,
    ),
    (
        "fetch_req_v11_rack",
        FQ(
            topics=[
                FQ.FetchTopic("t", partitions=[FQ.FetchPartition(0, 2, 5, log_start_offset=0)])
            ],
            forgotten_topics_data=[FQ.ForgottenTopic("u", partitions=[1])],
            rack_id="r",
        ),
        11,
        """
        ffffffff 000001f4 00000001 7fffffff 00  00000000 ffffffff
        00000001  0001 74  00000001  00000000 00000002 0000000000000005 0000000000000000 00100000
        00000001  0001 75  00000001 00000001               # forget u-1
        0001 72                                           # rack_id "r"
        """,
    ),
    (
        "fetch_req_v12",
        FQ(
            cluster_id="c",
            isolation_level=1,
            topics=[FQ.FetchTopic("t", partitions=[FQ.FetchPartition(0, fetch_offset=5)])],
        ),
        12,
        """
        ffffffff 000001f4 00000001 7fffffff 01  00000000 ffffffff
        02  02 74  02  00000000 ffffffff 0000000000000005 ffffffff ffffffffffffffff 00100000 00
            00
        01  01                                            # no forgotten topics, rack ""
        01 00 02 02 63                                    # tag 0 cluster_id "c"
        """,
    ),
    (
        "fetch_req_v13_topic_id",
        FQ(
            topics=[
                FQ.FetchTopic(topic_id=TOPIC_ID, partitions=[FQ.FetchPartition(0, fetch_offset=5)])
            ]
        ),
        13,
        """
        ffffffff 000001f4 00000001 7fffffff 00  00000000 ffffffff
        02  0123456789abcdef0123456789abcdef
            02  00000000 ffffffff 0000000000000005 ffffffff ffffffffffffffff 00100000 00
            00
        01  01  00
        """,
    ),
    (
        "fetch_req_v18",
        FQ(
            topics=[
                FQ.FetchTopic(topic_id=TOPIC_ID, partitions=[FQ.FetchPartition(0, fetch_offset=5)])
            ]
        ),
        18,
        """
        000001f4 00000001 7fffffff 00  00000000 ffffffff  # no replica_id from v15
        02  0123456789abcdef0123456789abcdef
            02  00000000 ffffffff 0000000000000005 ffffffff ffffffffffffffff 00100000 00
            00
        01  01  00
        """,
    ),
    # ---------------------------------------------------------------- Fetch response
    (
        "fetch_resp_v4_aborted",
        FS(
            0,
            responses=[
                FS.FetchableTopicResponse(
                    "t",
                    partitions=[
                        FS.PartitionData(
                            0,
                            0,
                            10,
                            8,
                            aborted_transactions=[FS.AbortedTransaction(1000, 3)],
                            records=b"abc",
                        )
                    ],
                )
            ],
        ),
        4,
        """
        00000000  00000001  0001 74  00000001
          00000000 0000 000000000000000a 0000000000000008   # hw 10, lso 8
          00000001  00000000000003e8 0000000000000003     # aborted: pid 1000 from offset 3
          00000003 616263
        """,
    ),
    (
        "fetch_resp_v7_nulls",
        FS(
            0,
            0,
            0,
            [FS.FetchableTopicResponse("t", partitions=[FS.PartitionData(0, 1, -1, -1, -1)])],
        ),
        7,
        """
        00000000 0000 00000000  00000001  0001 74  00000001
          00000000 0001 ffffffffffffffff ffffffffffffffff ffffffffffffffff
          ffffffff ffffffff                               # null aborted list, null records
        """,
    ),
    (
        "fetch_resp_v11",
        FS(
            0,
            0,
            9,
            [
                FS.FetchableTopicResponse(
                    "t",
                    partitions=[
                        FS.PartitionData(0, 0, 1, 1, 0, aborted_transactions=[], records=b"")
                    ],
                )
            ],
        ),
        11,
        """
        00000000 0000 00000009  00000001  0001 74  00000001
          00000000 0000 0000000000000001 0000000000000001 0000000000000000
          00000000 ffffffff 00000000                      # no aborted, no preferred replica
        """,
    ),
    (
        "fetch_resp_v12_leader_hint",
        FS(
            0,
            0,
            0,
            [
                FS.FetchableTopicResponse(
                    "t",
                    partitions=[
                        FS.PartitionData(
                            0,
                            6,
                            10,
                            8,
                            0,
                            current_leader=FS.LeaderIdAndEpoch(2, 5),
                            aborted_transactions=[FS.AbortedTransaction(1000, 3)],
                            records=b"abc",
                        )
                    ],
                )
            ],
        ),
        12,
        """
        00000000 0000 00000000
        02  02 74  02
          00000000 0006 000000000000000a 0000000000000008 0000000000000000
          02  00000000000003e8 0000000000000003 00        # aborted: pid 1000 from offset 3
          ffffffff  04 616263
          01 01 09  00000002 00000005 00                  # tag 1 current_leader (2, epoch 5)
          00
        00
        """,
    ),
    (
        "fetch_resp_v16_endpoints",
        FS(
            0,
            0,
            0,
            [
                FS.FetchableTopicResponse(
                    topic_id=TOPIC_ID, partitions=[FS.PartitionData(0, 0, 1, 1, 0, records=b"")]
                )
            ],
            node_endpoints=[FS.NodeEndpoint(2, "h", 9092, None)],
        ),
        16,
        """
        00000000 0000 00000000
        02  0123456789abcdef0123456789abcdef  02
          00000000 0000 0000000000000001 0000000000000001 0000000000000000
          00  ffffffff  01  00                            # null aborted, empty records
          00
        01 00 0d  02 00000002 02 68 00002384 00 00        # tag 0 node_endpoints [2 h:9092]
        """,
    ),
    # ---------------------------------------------------------------- DescribeConfigs
    (
        "describe_configs_req_v1",
        DQ([DQ.DescribeConfigsResource(4, "1", ["transaction.max.timeout.ms"])]),
        1,
        """
        00000001  04 0001 31                              # broker "1"
          00000001 001a 7472616e73616374696f6e2e6d61782e74696d656f75742e6d73
        00                                                # no synonyms
        """,
    ),
    (
        "describe_configs_req_v3_all_keys",
        DQ([DQ.DescribeConfigsResource(2, "t", None)], True, True),
        3,
        "00000001  02 0001 74 ffffffff  01 01",
    ),
    (
        "describe_configs_req_v4",
        DQ([DQ.DescribeConfigsResource(4, "1", ["transaction.max.timeout.ms"])]),
        4,
        """
        02  04 02 31  02 1b 7472616e73616374696f6e2e6d61782e74696d656f75742e6d73 00
        00 00 00
        """,
    ),
    (
        "describe_configs_resp_v1",
        DS(
            0,
            [
                DS.DescribeConfigsResult(
                    0,
                    None,
                    4,
                    "1",
                    [
                        DS.DescribeConfigsResourceResult(
                            "k", "v", False, 5, False, [DS.DescribeConfigsSynonym("k", "v", 5)]
                        )
                    ],
                )
            ],
        ),
        1,
        """
        00000000  00000001  0000 ffff 04 0001 31
          00000001  0001 6b 0001 76 00 05 00              # k=v, default config
            00000001  0001 6b 0001 76 05                  # synonym k=v from the default
        """,
    ),
    (
        "describe_configs_resp_v3_sensitive",
        DS(
            0,
            [
                DS.DescribeConfigsResult(
                    0,
                    None,
                    4,
                    "1",
                    [DS.DescribeConfigsResourceResult("p", None, True, 4, True, [], 7, "d")],
                )
            ],
        ),
        3,
        """
        00000000  00000001  0000 ffff 04 0001 31
          00000001  0001 70 ffff 01 04 01  00000000  07 0001 64   # null value, PASSWORD, doc "d"
        """,
    ),
    (
        "describe_configs_resp_v4",
        DS(
            0,
            [DS.DescribeConfigsResult(42, "bad", 4, "x", [])],
        ),
        4,
        "00000000  02  002a 04 626164 04 02 78 01 00  00",
    ),
]

IDS = [case[0] for case in CASES]


@pytest.mark.parametrize(("name", "msg", "version", "golden"), CASES, ids=IDS)
def test_encode_matches_golden_bytes(name: str, msg: Any, version: int, golden: str) -> None:
    assert encode(msg, version).hex() == h(golden).hex()


@pytest.mark.parametrize(("name", "msg", "version", "golden"), CASES, ids=IDS)
def test_decode_golden_bytes(name: str, msg: Any, version: int, golden: str) -> None:
    decoded = decode(type(msg), h(golden), version)
    assert to_dict(decoded, version) == to_dict(msg, version)
    # Fields outside the version come back as their defaults, so a second trip is stable.
    assert encode(decoded, version) == h(golden)


@pytest.mark.parametrize(("name", "msg", "version", "golden"), CASES, ids=IDS)
def test_kafka_python_agrees_with_golden_bytes(
    name: str, msg: Any, version: int, golden: str
) -> None:
    assert kafka_python_decode(type(msg), h(golden), version) == to_dict(msg, version)
    assert kafka_python_encode(msg, version).hex() == h(golden).hex()


def test_every_implemented_version_has_a_golden_case_or_oracle_sweep() -> None:
    covered = {(type(msg), version) for _, msg, version, _ in CASES}
    classes = {type(msg) for _, msg, _, _ in CASES}
    assert classes == {cls for cls in vars(m).values() if hasattr(cls, "VALID_VERSIONS")}
    assert (PR, 12) in covered
    assert (PS, 10) in covered
    # The name-to-id switch of Fetch and the KIP-1152 pattern filter are pinned byte for byte.
    assert {(FQ, 12), (FQ, 13), (FS, 12), (FS, 16), (LT, 2)} <= covered
