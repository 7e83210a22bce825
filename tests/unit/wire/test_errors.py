"""The error-code table and exception classes (kafka_sink.errors)."""

from __future__ import annotations

import pickle

import pytest

from kafka_sink import errors as e

# (code, name, retriable, invalid_metadata) for the codes a producer must handle.
PRODUCER_CODES = [
    (-1, "UNKNOWN_SERVER_ERROR", False, False),
    (2, "CORRUPT_MESSAGE", True, False),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, True),
    (5, "LEADER_NOT_AVAILABLE", True, True),
    (6, "NOT_LEADER_OR_FOLLOWER", True, True),
    (7, "REQUEST_TIMED_OUT", True, False),
    (9, "REPLICA_NOT_AVAILABLE", True, True),
    (10, "MESSAGE_TOO_LARGE", False, False),
    (13, "NETWORK_EXCEPTION", True, True),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, False),
    (15, "COORDINATOR_NOT_AVAILABLE", True, False),
    (16, "NOT_COORDINATOR", True, False),
    (17, "INVALID_TOPIC_EXCEPTION", False, False),
    (18, "RECORD_LIST_TOO_LARGE", False, False),
    (19, "NOT_ENOUGH_REPLICAS", True, False),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, False),
    (21, "INVALID_REQUIRED_ACKS", False, False),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, False),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, False),
    (32, "INVALID_TIMESTAMP", False, False),
    (35, "UNSUPPORTED_VERSION", False, False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, False),
    (47, "INVALID_PRODUCER_EPOCH", False, False),
    (51, "CONCURRENT_TRANSACTIONS", True, False),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, False),
    (56, "KAFKA_STORAGE_ERROR", True, True),
    (58, "SASL_AUTHENTICATION_FAILED", False, False),
    (59, "UNKNOWN_PRODUCER_ID", False, False),
    (72, "LISTENER_NOT_FOUND", True, True),
    (74, "FENCED_LEADER_EPOCH", True, True),
    (75, "UNKNOWN_LEADER_EPOCH", True, False),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, False),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, True),
    (87, "INVALID_RECORD", False, False),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, False),
    (90, "PRODUCER_FENCED", False, False),
    (100, "UNKNOWN_TOPIC_ID", True, True),
    (103, "INCONSISTENT_TOPIC_ID", True, True),
    (120, "TRANSACTION_ABORTABLE", False, False),
    (129, "REBOOTSTRAP_REQUIRED", False, False),
]


@pytest.mark.parametrize(("code", "name", "retriable", "invalid_metadata"), PRODUCER_CODES)
def test_producer_relevant_codes(
    code: int, name: str, retriable: bool, invalid_metadata: bool
) -> None:
    spec = e.ERROR_TABLE[code]
    assert (spec.code, spec.name, spec.retriable, spec.invalid_metadata) == (
        code,
        name,
        retriable,
        invalid_metadata,
    )
    exc = e.error_for_code(code, "detail")
    assert exc is not None
    assert (exc.code, exc.name, exc.message) == (code, name, "detail")
    assert (exc.retriable, exc.invalid_metadata) == (retriable, invalid_metadata)
    assert str(exc) == f"{name} ({code}): detail"


def test_table_is_complete_and_consistent() -> None:
    assert e.error_for_code(0) is None
    assert e.ERROR_TABLE[0].name == "NONE"
    assert set(e.ERROR_TABLE) == {-1, *range(130)}
    for code, spec in e.ERROR_TABLE.items():
        if code == 0:
            continue
        cls = e.error_class_for_code(code)
        assert cls is not None
        assert cls.code == code
        assert cls.name == spec.name
        # Java: InvalidMetadataException extends RetriableException.
        assert spec.retriable or not spec.invalid_metadata
        assert issubclass(cls, e.BrokerResponseError)
        assert spec.description


def test_class_names_follow_the_kafka_names() -> None:
    assert e.error_class_for_code(6) is e.NotLeaderOrFollowerError
    assert e.error_class_for_code(3) is e.UnknownTopicOrPartitionError
    assert e.error_class_for_code(45) is e.OutOfOrderSequenceNumberError
    assert e.error_class_for_code(10) is e.MessageTooLargeError
    assert e.error_class_for_code(18) is e.RecordListTooLargeError
    assert e.error_class_for_code(35) is e.UnsupportedVersionError
    assert e.error_class_for_code(29) is e.TopicAuthorizationFailedError
    assert e.error_class_for_code(17) is e.InvalidTopicError is e.InvalidTopicExceptionError
    assert e.error_class_for_code(13) is e.NetworkError
    assert e.error_class_for_code(-1) is e.UnknownServerError
    assert e.error_class_for_code(90) is e.ProducerFencedError


def test_unknown_codes_still_map_to_a_broker_error() -> None:
    exc = e.error_for_code(4242, "new")
    assert type(exc) is e.BrokerResponseError
    assert (exc.code, exc.name, exc.retriable) == (4242, "UNKNOWN_ERROR_CODE_4242", False)


def test_client_side_errors() -> None:
    assert e.KafkaTimeoutError.retriable
    assert not e.KafkaTimeoutError.invalid_metadata
    assert e.KafkaConnectionError.retriable
    assert e.KafkaConnectionError.invalid_metadata
    assert issubclass(e.ConfigError, ValueError)
    assert issubclass(e.BufferExhaustedError, e.KafkaTimeoutError)
    for cls in (
        e.ProtocolError,
        e.CorruptRecordError,
        e.RecordTooLargeError,
        e.ProducerClosedError,
    ):
        assert issubclass(cls, e.KafkaError)
        assert not cls.retriable
    assert isinstance(e.error_for_code(58), e.SaslAuthenticationError)
    assert isinstance(e.error_for_code(33), e.SaslAuthenticationError)


@pytest.mark.parametrize("code", [6, 58, 4242])
def test_broker_errors_pickle(code: int) -> None:
    exc = e.error_for_code(code, "why")
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is type(exc)
    assert (copy.code, copy.name, copy.message, str(copy)) == (
        exc.code,
        exc.name,
        exc.message,
        str(exc),
    )
