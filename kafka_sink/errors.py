"""Exceptions raised by the client and the Kafka error-code table.

Role: the one place that knows every Kafka protocol error code, whether the Java client treats it
as retriable (a ``RetriableException``) and whether it means cached metadata is stale (an
``InvalidMetadataException``: refresh metadata before retrying). Layers above ask the exception
class, never compare codes by hand.

Invariants:
- ``ERROR_TABLE`` has one :class:`ErrorSpec` per code, and :data:`_ERROR_CLASSES` one
  :class:`BrokerResponseError` subclass per non-zero code; class names are the Kafka name in
  CamelCase with a trailing ``_ERROR``/``_EXCEPTION`` dropped, plus ``Error``
  (``NOT_LEADER_OR_FOLLOWER`` -> :class:`NotLeaderOrFollowerError`,
  ``INVALID_TOPIC_EXCEPTION`` -> :class:`InvalidTopicError`).
- ``invalid_metadata`` implies ``retriable`` (as in Java, where InvalidMetadataException extends
  RetriableException); client-side :class:`KafkaConnectionError` follows the same rule.
- Codes this table does not know still map to a :class:`BrokerResponseError` (non-retriable), so a
  newer broker never makes the client crash on a lookup.
- Exception text never contains secrets: callers pass messages, not configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    """One row of the Kafka error-code table."""

    code: int
    name: str
    retriable: bool
    invalid_metadata: bool
    description: str


class KafkaError(Exception):
    """Base of every error this package raises on purpose."""

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False


# --- client-side errors ------------------------------------------------------------------------


class KafkaTimeoutError(KafkaError):
    """A deadline passed (request, delivery, metadata wait, flush).

    A metadata wait's timeout carries ``topic_error``: what the brokers last answered for the
    topic (``UnknownTopicOrPartitionError`` when it does not exist), None when they said nothing.
    """

    retriable = True
    topic_error: KafkaError | None = None


class KafkaConnectionError(KafkaError):
    """A broker connection failed or dropped; the leader may have moved, so refresh metadata."""

    retriable = True
    invalid_metadata = True


class ConfigError(KafkaError, ValueError):
    """An unknown or invalid configuration key or value."""


class ProtocolError(KafkaError):
    """Malformed bytes from the wire, an unexpected correlation id, or a frame that is too large."""


class CorruptRecordError(KafkaError):
    """A record batch failed its CRC-32C check or could not be parsed (Java's
    CorruptRecordException).

    Where it is known: ``topic``, ``partition``, ``offset`` (the batch's base offset) and
    ``last_offset`` (the batch's last offset, from its header: a reader that passes over the batch
    goes on after it). ``checksum_ok`` is True when the batch's CRC-32C matched, so its bytes are
    the ones its producer wrote (that producer wrote something unreadable); False when they were
    damaged since, or the checksum could not be checked.
    """

    def __init__(
        self,
        message: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        last_offset: int | None = None,
        checksum_ok: bool = False,
    ) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.last_offset = last_offset
        self.checksum_ok = checksum_ok


class DecodeLimitError(CorruptRecordError):
    """A record batch would decode to more than the reader allows: a decompression bomb, or more
    records or headers than the limit leaves room for."""


class BufferExhaustedError(KafkaTimeoutError):
    """The producer's memory budget (buffer.memory) stayed full for max.block.ms."""


class SerializationError(KafkaError):
    """A ``key.serializer`` / ``value.serializer`` failed or returned something other than bytes.

    Raised by ``send()`` / ``send_columns()`` before anything of the call is queued.
    """


class TransactionLostError(KafkaError):
    """A prepared transaction can no longer be committed: the coordinator aborted it (it stayed
    open longer than ``transaction.timeout.ms``), a newer producer took its transactional id, or
    the coordinator does not know the id. Its records will never be visible to read_committed
    consumers. Raised by ``complete_transaction``; the broker's answer is ``__cause__``.
    """


class RecordTooLargeError(KafkaError):
    """A record is larger than max.request.size or buffer.memory (checked before sending)."""


class ProducerClosedError(KafkaError):
    """The producer was closed before this operation could complete."""


class IllegalStateError(KafkaError):
    """An operation was called in a state that does not allow it (e.g. a fatal producer error)."""


class AbortableTransactionError(KafkaError):
    """The open transaction hit an error that only aborting it clears (Java's abortable errors).

    Raised by ``send()``, ``send_columns()``, ``commit_transaction()`` and
    ``prepare_transaction()`` of a transactional producer once a record of the transaction failed
    (its cause is ``__cause__`` and the failed record's future): call ``abort_transaction()``,
    then begin a new transaction and send again.
    """


class TransactionAbortedError(KafkaError):
    """A record was never sent because its transaction is being aborted (Java's
    ``TransactionAbortedException``): ``abort_transaction()`` drops what was still queued."""


class AuthenticationError(KafkaError):
    """A broker connection could not be authenticated; no retry fixes it (Java's
    ``AuthenticationException``), so waiters for metadata get it at once."""


class SaslAuthenticationError(AuthenticationError):
    """SASL authentication with a broker failed (client- or broker-detected)."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake with a broker failed: certificate rejected either way, or no protocol
    version or cipher suite in common."""


# --- broker error codes ------------------------------------------------------------------------


class BrokerResponseError(KafkaError):
    """An error code returned by a broker. Subclasses exist per code; see :func:`error_for_code`."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    description: ClassVar[str] = "An error code returned by a broker."

    def __init__(self, message: str | None = None, *, code: int | None = None) -> None:
        if code is not None:
            self.code = code
            self.name = f"UNKNOWN_ERROR_CODE_{code}"
        self.message = message
        text = f"{self.name} ({self.code})"
        if message:
            text = f"{text}: {message}"
        super().__init__(text)

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling goes through __init__ again, so keep the original arguments (Spark ships
        # exceptions between processes).
        code = None if type(self)._is_known(self.code) else self.code
        return (_rebuild_broker_error, (type(self), self.message, code))

    @classmethod
    def _is_known(cls, code: int) -> bool:
        return cls is not BrokerResponseError and code == cls.code


class UnknownServerError(BrokerResponseError):
    """The server experienced an unexpected error when processing the request."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    description = "The server experienced an unexpected error when processing the request."


class OffsetOutOfRangeError(BrokerResponseError):
    """The requested offset is not within the range of offsets maintained by the server."""

    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    description = (
        "The requested offset is not within the range of offsets maintained by the server."
    )


class CorruptMessageError(BrokerResponseError):
    """The message failed its CRC check, exceeded the valid size, has a null key on a
    compacted topic, or is otherwise corrupt.
    """

    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True
    description = (
        "The message failed its CRC check, exceeded the valid size, has a null key on a "
        "compacted topic, or is otherwise corrupt."
    )


class UnknownTopicOrPartitionError(BrokerResponseError):
    """This server does not host this topic-partition."""

    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True
    invalid_metadata = True
    description = "This server does not host this topic-partition."


class InvalidFetchSizeError(BrokerResponseError):
    """The requested fetch size is invalid."""

    code = 4
    name = "INVALID_FETCH_SIZE"
    description = "The requested fetch size is invalid."


class LeaderNotAvailableError(BrokerResponseError):
    """There is no leader for this topic-partition as we are in the middle of a
    leadership election.
    """

    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = (
        "There is no leader for this topic-partition as we are in the middle of a "
        "leadership election."
    )


class NotLeaderOrFollowerError(BrokerResponseError):
    """For requests intended only for the leader, this broker is not the current leader."""

    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True
    invalid_metadata = True
    description = (
        "For requests intended only for the leader, this broker is not the current leader."
    )


class RequestTimedOutError(BrokerResponseError):
    """The request timed out."""

    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True
    description = "The request timed out."


class BrokerNotAvailableError(BrokerResponseError):
    """The broker is not available."""

    code = 8
    name = "BROKER_NOT_AVAILABLE"
    description = "The broker is not available."


class ReplicaNotAvailableError(BrokerResponseError):
    """The replica is not available for the requested topic-partition."""

    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = "The replica is not available for the requested topic-partition."


class MessageTooLargeError(BrokerResponseError):
    """The request included a message larger than the max message size the server will
    accept.
    """

    code = 10
    name = "MESSAGE_TOO_LARGE"
    description = (
        "The request included a message larger than the max message size the server will accept."
    )


class StaleControllerEpochError(BrokerResponseError):
    """The controller moved to another broker."""

    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    description = "The controller moved to another broker."


class OffsetMetadataTooLargeError(BrokerResponseError):
    """The metadata field of the offset request was too large."""

    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    description = "The metadata field of the offset request was too large."


class NetworkError(BrokerResponseError):
    """The server disconnected before a response was received."""

    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True
    invalid_metadata = True
    description = "The server disconnected before a response was received."


class CoordinatorLoadInProgressError(BrokerResponseError):
    """The coordinator is loading and hence can't process requests."""

    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True
    description = "The coordinator is loading and hence can't process requests."


class CoordinatorNotAvailableError(BrokerResponseError):
    """The coordinator is not available."""

    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True
    description = "The coordinator is not available."


class NotCoordinatorError(BrokerResponseError):
    """This is not the correct coordinator."""

    code = 16
    name = "NOT_COORDINATOR"
    retriable = True
    description = "This is not the correct coordinator."


class InvalidTopicError(BrokerResponseError):
    """The request attempted to perform an operation on an invalid topic."""

    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    description = "The request attempted to perform an operation on an invalid topic."


class RecordListTooLargeError(BrokerResponseError):
    """The request included a message batch larger than the configured segment size on
    the server.
    """

    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    description = (
        "The request included a message batch larger than the configured segment size on "
        "the server."
    )


class NotEnoughReplicasError(BrokerResponseError):
    """Messages are rejected since there are fewer in-sync replicas than required."""

    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True
    description = "Messages are rejected since there are fewer in-sync replicas than required."


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    """Messages are written to the log, but to fewer in-sync replicas than required."""

    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True
    description = "Messages are written to the log, but to fewer in-sync replicas than required."


class InvalidRequiredAcksError(BrokerResponseError):
    """Produce request specified an invalid value for required acks."""

    code = 21
    name = "INVALID_REQUIRED_ACKS"
    description = "Produce request specified an invalid value for required acks."


class IllegalGenerationError(BrokerResponseError):
    """Specified group generation id is not valid."""

    code = 22
    name = "ILLEGAL_GENERATION"
    description = "Specified group generation id is not valid."


class InconsistentGroupProtocolError(BrokerResponseError):
    """The group member's supported protocols are incompatible with those of existing
    members.
    """

    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    description = (
        "The group member's supported protocols are incompatible with those of existing members."
    )


class InvalidGroupIdError(BrokerResponseError):
    """The configured groupId is invalid."""

    code = 24
    name = "INVALID_GROUP_ID"
    description = "The configured groupId is invalid."


class UnknownMemberIdError(BrokerResponseError):
    """The coordinator is not aware of this member."""

    code = 25
    name = "UNKNOWN_MEMBER_ID"
    description = "The coordinator is not aware of this member."


class InvalidSessionTimeoutError(BrokerResponseError):
    """The session timeout is not within the range allowed by the broker."""

    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    description = "The session timeout is not within the range allowed by the broker."


class RebalanceInProgressError(BrokerResponseError):
    """The group is rebalancing, so a rejoin is needed."""

    code = 27
    name = "REBALANCE_IN_PROGRESS"
    description = "The group is rebalancing, so a rejoin is needed."


class InvalidCommitOffsetSizeError(BrokerResponseError):
    """The committing offset data size is not valid."""

    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    description = "The committing offset data size is not valid."


class TopicAuthorizationFailedError(BrokerResponseError):
    """Topic authorization failed."""

    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    description = "Topic authorization failed."


class GroupAuthorizationFailedError(BrokerResponseError):
    """Group authorization failed."""

    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    description = "Group authorization failed."


class ClusterAuthorizationFailedError(BrokerResponseError):
    """Cluster authorization failed."""

    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    description = "Cluster authorization failed."


class InvalidTimestampError(BrokerResponseError):
    """The timestamp of the message is out of acceptable range."""

    code = 32
    name = "INVALID_TIMESTAMP"
    description = "The timestamp of the message is out of acceptable range."


class UnsupportedSaslMechanismError(BrokerResponseError, SaslAuthenticationError):
    """The broker does not support the requested SASL mechanism."""

    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    description = "The broker does not support the requested SASL mechanism."


class IllegalSaslStateError(BrokerResponseError, SaslAuthenticationError):
    """Request is not valid given the current SASL state."""

    code = 34
    name = "ILLEGAL_SASL_STATE"
    description = "Request is not valid given the current SASL state."


class UnsupportedVersionError(BrokerResponseError):
    """The version of API is not supported."""

    code = 35
    name = "UNSUPPORTED_VERSION"
    description = "The version of API is not supported."


class TopicAlreadyExistsError(BrokerResponseError):
    """Topic with this name already exists."""

    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    description = "Topic with this name already exists."


class InvalidPartitionsError(BrokerResponseError):
    """Number of partitions is below 1."""

    code = 37
    name = "INVALID_PARTITIONS"
    description = "Number of partitions is below 1."


class InvalidReplicationFactorError(BrokerResponseError):
    """Replication factor is below 1 or larger than the number of available brokers."""

    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    description = "Replication factor is below 1 or larger than the number of available brokers."


class InvalidReplicaAssignmentError(BrokerResponseError):
    """Replica assignment is invalid."""

    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"
    description = "Replica assignment is invalid."


class InvalidConfigError(BrokerResponseError):
    """Configuration is invalid."""

    code = 40
    name = "INVALID_CONFIG"
    description = "Configuration is invalid."


class NotControllerError(BrokerResponseError):
    """This is not the correct controller for this cluster."""

    code = 41
    name = "NOT_CONTROLLER"
    retriable = True
    description = "This is not the correct controller for this cluster."


class InvalidRequestError(BrokerResponseError):
    """The request is malformed or carries a value the broker rejects; see the broker log."""

    code = 42
    name = "INVALID_REQUEST"
    description = (
        "The request is malformed or carries a value the broker rejects; see the broker log."
    )


class UnsupportedForMessageFormatError(BrokerResponseError):
    """The message format version on the broker does not support the request."""

    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    description = "The message format version on the broker does not support the request."


class PolicyViolationError(BrokerResponseError):
    """Request parameters do not satisfy the configured policy."""

    code = 44
    name = "POLICY_VIOLATION"
    description = "Request parameters do not satisfy the configured policy."


class OutOfOrderSequenceNumberError(BrokerResponseError):
    """The broker received an out of order sequence number."""

    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    description = "The broker received an out of order sequence number."


class DuplicateSequenceNumberError(BrokerResponseError):
    """The broker received a duplicate sequence number."""

    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    description = "The broker received a duplicate sequence number."


class InvalidProducerEpochError(BrokerResponseError):
    """Producer attempted to produce with an old epoch."""

    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    description = "Producer attempted to produce with an old epoch."


class InvalidTxnStateError(BrokerResponseError):
    """The producer attempted a transactional operation in an invalid state."""

    code = 48
    name = "INVALID_TXN_STATE"
    description = "The producer attempted a transactional operation in an invalid state."


class InvalidProducerIdMappingError(BrokerResponseError):
    """The producer attempted to use a producer id which is not currently assigned to
    its transactional id.
    """

    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    description = (
        "The producer attempted to use a producer id which is not currently assigned to "
        "its transactional id."
    )


class InvalidTransactionTimeoutError(BrokerResponseError):
    """The transaction timeout is larger than the maximum value allowed by the broker."""

    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    description = "The transaction timeout is larger than the maximum value allowed by the broker."


class ConcurrentTransactionsError(BrokerResponseError):
    """The producer attempted to update a transaction while another concurrent
    operation on the same transaction was ongoing.
    """

    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = True
    description = (
        "The producer attempted to update a transaction while another concurrent "
        "operation on the same transaction was ongoing."
    )


class TransactionCoordinatorFencedError(BrokerResponseError):
    """The transaction coordinator sending a WriteTxnMarker is no longer the current
    coordinator.
    """

    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    description = (
        "The transaction coordinator sending a WriteTxnMarker is no longer the current coordinator."
    )


class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    """Transactional Id authorization failed."""

    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    description = "Transactional Id authorization failed."


class SecurityDisabledError(BrokerResponseError):
    """Security features are disabled."""

    code = 54
    name = "SECURITY_DISABLED"
    description = "Security features are disabled."


class OperationNotAttemptedError(BrokerResponseError):
    """The broker did not attempt to execute this operation."""

    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    description = "The broker did not attempt to execute this operation."


class KafkaStorageError(BrokerResponseError):
    """Disk error when trying to access log file on the disk."""

    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True
    invalid_metadata = True
    description = "Disk error when trying to access log file on the disk."


class LogDirNotFoundError(BrokerResponseError):
    """The user-specified log directory is not found in the broker config."""

    code = 57
    name = "LOG_DIR_NOT_FOUND"
    description = "The user-specified log directory is not found in the broker config."


class SaslAuthenticationFailedError(BrokerResponseError, SaslAuthenticationError):
    """SASL Authentication failed."""

    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    description = "SASL Authentication failed."


class UnknownProducerIdError(BrokerResponseError):
    """The broker could not locate the producer metadata associated with the producer id."""

    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    description = (
        "The broker could not locate the producer metadata associated with the producer id."
    )


class ReassignmentInProgressError(BrokerResponseError):
    """A partition reassignment is in progress."""

    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    description = "A partition reassignment is in progress."


class DelegationTokenAuthDisabledError(BrokerResponseError):
    """Delegation Token feature is not enabled."""

    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    description = "Delegation Token feature is not enabled."


class DelegationTokenNotFoundError(BrokerResponseError):
    """Delegation Token is not found on server."""

    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    description = "Delegation Token is not found on server."


class DelegationTokenOwnerMismatchError(BrokerResponseError):
    """Specified Principal is not valid Owner/Renewer."""

    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    description = "Specified Principal is not valid Owner/Renewer."


class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    """Delegation Token requests are not allowed on this kind of channel."""

    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    description = "Delegation Token requests are not allowed on this kind of channel."


class DelegationTokenAuthorizationFailedError(BrokerResponseError):
    """Delegation Token authorization failed."""

    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    description = "Delegation Token authorization failed."


class DelegationTokenExpiredError(BrokerResponseError):
    """Delegation Token is expired."""

    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    description = "Delegation Token is expired."


class InvalidPrincipalTypeError(BrokerResponseError):
    """Supplied principalType is not supported."""

    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    description = "Supplied principalType is not supported."


class NonEmptyGroupError(BrokerResponseError):
    """The group is not empty."""

    code = 68
    name = "NON_EMPTY_GROUP"
    description = "The group is not empty."


class GroupIdNotFoundError(BrokerResponseError):
    """The group id does not exist."""

    code = 69
    name = "GROUP_ID_NOT_FOUND"
    description = "The group id does not exist."


class FetchSessionIdNotFoundError(BrokerResponseError):
    """The fetch session ID was not found."""

    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True
    description = "The fetch session ID was not found."


class InvalidFetchSessionEpochError(BrokerResponseError):
    """The fetch session epoch is invalid."""

    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True
    description = "The fetch session epoch is invalid."


class ListenerNotFoundError(BrokerResponseError):
    """There is no listener on the leader broker that matches the listener on which the
    metadata request was processed.
    """

    code = 72
    name = "LISTENER_NOT_FOUND"
    retriable = True
    invalid_metadata = True
    description = (
        "There is no listener on the leader broker that matches the listener on which the"
        " metadata request was processed."
    )


class TopicDeletionDisabledError(BrokerResponseError):
    """Topic deletion is disabled."""

    code = 73
    name = "TOPIC_DELETION_DISABLED"
    description = "Topic deletion is disabled."


class FencedLeaderEpochError(BrokerResponseError):
    """The leader epoch in the request is older than the epoch on the broker."""

    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True
    invalid_metadata = True
    description = "The leader epoch in the request is older than the epoch on the broker."


class UnknownLeaderEpochError(BrokerResponseError):
    """The leader epoch in the request is newer than the epoch on the broker."""

    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True
    description = "The leader epoch in the request is newer than the epoch on the broker."


class UnsupportedCompressionTypeError(BrokerResponseError):
    """The requesting client does not support the compression type of given partition."""

    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    description = "The requesting client does not support the compression type of given partition."


class StaleBrokerEpochError(BrokerResponseError):
    """Broker epoch has changed."""

    code = 77
    name = "STALE_BROKER_EPOCH"
    description = "Broker epoch has changed."


class OffsetNotAvailableError(BrokerResponseError):
    """The leader high watermark has not caught up from a recent leader election."""

    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    retriable = True
    description = "The leader high watermark has not caught up from a recent leader election."


class MemberIdRequiredError(BrokerResponseError):
    """The group member needs to have a valid member id before actually entering a
    consumer group.
    """

    code = 79
    name = "MEMBER_ID_REQUIRED"
    description = (
        "The group member needs to have a valid member id before actually entering a "
        "consumer group."
    )


class PreferredLeaderNotAvailableError(BrokerResponseError):
    """The preferred leader was not available."""

    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = "The preferred leader was not available."


class GroupMaxSizeReachedError(BrokerResponseError):
    """The group has reached its maximum size."""

    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    description = "The group has reached its maximum size."


class FencedInstanceIdError(BrokerResponseError):
    """Another member with the same group.instance.id has fenced this one."""

    code = 82
    name = "FENCED_INSTANCE_ID"
    description = "Another member with the same group.instance.id has fenced this one."


class EligibleLeadersNotAvailableError(BrokerResponseError):
    """Eligible topic partition leaders are not available."""

    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True
    invalid_metadata = True
    description = "Eligible topic partition leaders are not available."


class ElectionNotNeededError(BrokerResponseError):
    """Leader election not needed for topic partition."""

    code = 84
    name = "ELECTION_NOT_NEEDED"
    retriable = True
    invalid_metadata = True
    description = "Leader election not needed for topic partition."


class NoReassignmentInProgressError(BrokerResponseError):
    """No partition reassignment is in progress."""

    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    description = "No partition reassignment is in progress."


class GroupSubscribedToTopicError(BrokerResponseError):
    """Deleting offsets of a topic is forbidden while the consumer group is actively
    subscribed to it.
    """

    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    description = (
        "Deleting offsets of a topic is forbidden while the consumer group is actively "
        "subscribed to it."
    )


class InvalidRecordError(BrokerResponseError):
    """This record has failed the validation on broker and hence will be rejected."""

    code = 87
    name = "INVALID_RECORD"
    description = "This record has failed the validation on broker and hence will be rejected."


class UnstableOffsetCommitError(BrokerResponseError):
    """There are unstable offsets that need to be cleared."""

    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True
    description = "There are unstable offsets that need to be cleared."


class ThrottlingQuotaExceededError(BrokerResponseError):
    """The throttling quota has been exceeded."""

    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True
    description = "The throttling quota has been exceeded."


class ProducerFencedError(BrokerResponseError):
    """There is a newer producer with the same transactional id which fences the
    current one.
    """

    code = 90
    name = "PRODUCER_FENCED"
    description = (
        "There is a newer producer with the same transactional id which fences the current one."
    )


class ResourceNotFoundError(BrokerResponseError):
    """A request illegally referred to a resource that does not exist."""

    code = 91
    name = "RESOURCE_NOT_FOUND"
    description = "A request illegally referred to a resource that does not exist."


class DuplicateResourceError(BrokerResponseError):
    """A request illegally referred to the same resource twice."""

    code = 92
    name = "DUPLICATE_RESOURCE"
    description = "A request illegally referred to the same resource twice."


class UnacceptableCredentialError(BrokerResponseError):
    """Requested credential would not meet criteria for acceptability."""

    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    description = "Requested credential would not meet criteria for acceptability."


class InconsistentVoterSetError(BrokerResponseError):
    """The voter set of the request is inconsistent with the local voter set."""

    code = 94
    name = "INCONSISTENT_VOTER_SET"
    description = "The voter set of the request is inconsistent with the local voter set."


class InvalidUpdateVersionError(BrokerResponseError):
    """The given update version was invalid."""

    code = 95
    name = "INVALID_UPDATE_VERSION"
    description = "The given update version was invalid."


class FeatureUpdateFailedError(BrokerResponseError):
    """Unable to update finalized features due to an unexpected server error."""

    code = 96
    name = "FEATURE_UPDATE_FAILED"
    description = "Unable to update finalized features due to an unexpected server error."


class PrincipalDeserializationFailureError(BrokerResponseError):
    """Request principal deserialization failed during forwarding."""

    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    description = "Request principal deserialization failed during forwarding."


class SnapshotNotFoundError(BrokerResponseError):
    """Requested snapshot was not found."""

    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    description = "Requested snapshot was not found."


class PositionOutOfRangeError(BrokerResponseError):
    """Requested position is not greater than or equal to zero, and less than the size
    of the snapshot.
    """

    code = 99
    name = "POSITION_OUT_OF_RANGE"
    description = (
        "Requested position is not greater than or equal to zero, and less than the size "
        "of the snapshot."
    )


class UnknownTopicIdError(BrokerResponseError):
    """This server does not host this topic ID."""

    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True
    invalid_metadata = True
    description = "This server does not host this topic ID."


class DuplicateBrokerRegistrationError(BrokerResponseError):
    """This broker ID is already in use."""

    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    description = "This broker ID is already in use."


class BrokerIdNotRegisteredError(BrokerResponseError):
    """The given broker ID was not registered."""

    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    description = "The given broker ID was not registered."


class InconsistentTopicIdError(BrokerResponseError):
    """The log's topic ID did not match the topic ID in the request."""

    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    retriable = True
    invalid_metadata = True
    description = "The log's topic ID did not match the topic ID in the request."


class InconsistentClusterIdError(BrokerResponseError):
    """The clusterId in the request does not match that found on the server."""

    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    description = "The clusterId in the request does not match that found on the server."


class TransactionalIdNotFoundError(BrokerResponseError):
    """The transactionalId could not be found."""

    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"
    description = "The transactionalId could not be found."


class FetchSessionTopicIdError(BrokerResponseError):
    """The fetch session encountered inconsistent topic ID usage."""

    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable = True
    description = "The fetch session encountered inconsistent topic ID usage."


class IneligibleReplicaError(BrokerResponseError):
    """The new ISR contains at least one ineligible replica."""

    code = 107
    name = "INELIGIBLE_REPLICA"
    description = "The new ISR contains at least one ineligible replica."


class NewLeaderElectedError(BrokerResponseError):
    """The AlterPartition request successfully updated the partition state but the
    leader has changed.
    """

    code = 108
    name = "NEW_LEADER_ELECTED"
    description = (
        "The AlterPartition request successfully updated the partition state but the "
        "leader has changed."
    )


class OffsetMovedToTieredStorageError(BrokerResponseError):
    """The requested offset is moved to tiered storage."""

    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"
    description = "The requested offset is moved to tiered storage."


class FencedMemberEpochError(BrokerResponseError):
    """The member epoch is fenced by the group coordinator."""

    code = 110
    name = "FENCED_MEMBER_EPOCH"
    description = "The member epoch is fenced by the group coordinator."


class UnreleasedInstanceIdError(BrokerResponseError):
    """The instance ID is still used by another member in the consumer group."""

    code = 111
    name = "UNRELEASED_INSTANCE_ID"
    description = "The instance ID is still used by another member in the consumer group."


class UnsupportedAssignorError(BrokerResponseError):
    """The assignor or its version range is not supported by the consumer group."""

    code = 112
    name = "UNSUPPORTED_ASSIGNOR"
    description = "The assignor or its version range is not supported by the consumer group."


class StaleMemberEpochError(BrokerResponseError):
    """The member epoch is stale."""

    code = 113
    name = "STALE_MEMBER_EPOCH"
    description = "The member epoch is stale."


class MismatchedEndpointTypeError(BrokerResponseError):
    """The request was sent to an endpoint of the wrong type."""

    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"
    description = "The request was sent to an endpoint of the wrong type."


class UnsupportedEndpointTypeError(BrokerResponseError):
    """This endpoint type is not supported yet."""

    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"
    description = "This endpoint type is not supported yet."


class UnknownControllerIdError(BrokerResponseError):
    """This controller ID is not known."""

    code = 116
    name = "UNKNOWN_CONTROLLER_ID"
    description = "This controller ID is not known."


class UnknownSubscriptionIdError(BrokerResponseError):
    """Client sent a push telemetry request with an invalid or outdated subscription ID."""

    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"
    description = (
        "Client sent a push telemetry request with an invalid or outdated subscription ID."
    )


class TelemetryTooLargeError(BrokerResponseError):
    """Client sent a push telemetry request larger than the maximum size the broker
    will accept.
    """

    code = 118
    name = "TELEMETRY_TOO_LARGE"
    description = (
        "Client sent a push telemetry request larger than the maximum size the broker will accept."
    )


class InvalidRegistrationError(BrokerResponseError):
    """The controller has considered the broker registration to be invalid."""

    code = 119
    name = "INVALID_REGISTRATION"
    description = "The controller has considered the broker registration to be invalid."


class TransactionAbortableError(BrokerResponseError):
    """The server encountered an error with the transaction; the client can abort the
    transaction to continue.
    """

    code = 120
    name = "TRANSACTION_ABORTABLE"
    description = (
        "The server encountered an error with the transaction; the client can abort the "
        "transaction to continue."
    )


class InvalidRecordStateError(BrokerResponseError):
    """The record state is invalid."""

    code = 121
    name = "INVALID_RECORD_STATE"
    description = "The record state is invalid."


class ShareSessionNotFoundError(BrokerResponseError):
    """The share session was not found."""

    code = 122
    name = "SHARE_SESSION_NOT_FOUND"
    retriable = True
    description = "The share session was not found."


class InvalidShareSessionEpochError(BrokerResponseError):
    """The share session epoch is invalid."""

    code = 123
    name = "INVALID_SHARE_SESSION_EPOCH"
    retriable = True
    description = "The share session epoch is invalid."


class FencedStateEpochError(BrokerResponseError):
    """The share coordinator rejected the request because the share-group state epoch
    did not match.
    """

    code = 124
    name = "FENCED_STATE_EPOCH"
    description = (
        "The share coordinator rejected the request because the share-group state epoch "
        "did not match."
    )


class InvalidVoterKeyError(BrokerResponseError):
    """The voter key doesn't match the receiving replica's key."""

    code = 125
    name = "INVALID_VOTER_KEY"
    description = "The voter key doesn't match the receiving replica's key."


class DuplicateVoterError(BrokerResponseError):
    """The voter is already part of the set of voters."""

    code = 126
    name = "DUPLICATE_VOTER"
    description = "The voter is already part of the set of voters."


class VoterNotFoundError(BrokerResponseError):
    """The voter is not part of the set of voters."""

    code = 127
    name = "VOTER_NOT_FOUND"
    description = "The voter is not part of the set of voters."


class InvalidRegularExpressionError(BrokerResponseError):
    """The regular expression is not valid."""

    code = 128
    name = "INVALID_REGULAR_EXPRESSION"
    description = "The regular expression is not valid."


class RebootstrapRequiredError(BrokerResponseError):
    """Client metadata is stale; the client should rebootstrap to obtain new metadata."""

    code = 129
    name = "REBOOTSTRAP_REQUIRED"
    description = "Client metadata is stale; the client should rebootstrap to obtain new metadata."


# Friendlier spellings of names whose mechanical form reads oddly.
InvalidTopicExceptionError = InvalidTopicError
NetworkExceptionError = NetworkError

_ERROR_CLASSES: Mapping[int, type[BrokerResponseError]] = MappingProxyType(
    {
        cls.code: cls
        for cls in (
            UnknownServerError,
            OffsetOutOfRangeError,
            CorruptMessageError,
            UnknownTopicOrPartitionError,
            InvalidFetchSizeError,
            LeaderNotAvailableError,
            NotLeaderOrFollowerError,
            RequestTimedOutError,
            BrokerNotAvailableError,
            ReplicaNotAvailableError,
            MessageTooLargeError,
            StaleControllerEpochError,
            OffsetMetadataTooLargeError,
            NetworkError,
            CoordinatorLoadInProgressError,
            CoordinatorNotAvailableError,
            NotCoordinatorError,
            InvalidTopicError,
            RecordListTooLargeError,
            NotEnoughReplicasError,
            NotEnoughReplicasAfterAppendError,
            InvalidRequiredAcksError,
            IllegalGenerationError,
            InconsistentGroupProtocolError,
            InvalidGroupIdError,
            UnknownMemberIdError,
            InvalidSessionTimeoutError,
            RebalanceInProgressError,
            InvalidCommitOffsetSizeError,
            TopicAuthorizationFailedError,
            GroupAuthorizationFailedError,
            ClusterAuthorizationFailedError,
            InvalidTimestampError,
            UnsupportedSaslMechanismError,
            IllegalSaslStateError,
            UnsupportedVersionError,
            TopicAlreadyExistsError,
            InvalidPartitionsError,
            InvalidReplicationFactorError,
            InvalidReplicaAssignmentError,
            InvalidConfigError,
            NotControllerError,
            InvalidRequestError,
            UnsupportedForMessageFormatError,
            PolicyViolationError,
            OutOfOrderSequenceNumberError,
            DuplicateSequenceNumberError,
            InvalidProducerEpochError,
            InvalidTxnStateError,
            InvalidProducerIdMappingError,
            InvalidTransactionTimeoutError,
            ConcurrentTransactionsError,
            TransactionCoordinatorFencedError,
            TransactionalIdAuthorizationFailedError,
            SecurityDisabledError,
            OperationNotAttemptedError,
            KafkaStorageError,
            LogDirNotFoundError,
            SaslAuthenticationFailedError,
            UnknownProducerIdError,
            ReassignmentInProgressError,
            DelegationTokenAuthDisabledError,
            DelegationTokenNotFoundError,
            DelegationTokenOwnerMismatchError,
            DelegationTokenRequestNotAllowedError,
            DelegationTokenAuthorizationFailedError,
            DelegationTokenExpiredError,
            InvalidPrincipalTypeError,
            NonEmptyGroupError,
            GroupIdNotFoundError,
            FetchSessionIdNotFoundError,
            InvalidFetchSessionEpochError,
            ListenerNotFoundError,
            TopicDeletionDisabledError,
            FencedLeaderEpochError,
            UnknownLeaderEpochError,
            UnsupportedCompressionTypeError,
            StaleBrokerEpochError,
            OffsetNotAvailableError,
            MemberIdRequiredError,
            PreferredLeaderNotAvailableError,
            GroupMaxSizeReachedError,
            FencedInstanceIdError,
            EligibleLeadersNotAvailableError,
            ElectionNotNeededError,
            NoReassignmentInProgressError,
            GroupSubscribedToTopicError,
            InvalidRecordError,
            UnstableOffsetCommitError,
            ThrottlingQuotaExceededError,
            ProducerFencedError,
            ResourceNotFoundError,
            DuplicateResourceError,
            UnacceptableCredentialError,
            InconsistentVoterSetError,
            InvalidUpdateVersionError,
            FeatureUpdateFailedError,
            PrincipalDeserializationFailureError,
            SnapshotNotFoundError,
            PositionOutOfRangeError,
            UnknownTopicIdError,
            DuplicateBrokerRegistrationError,
            BrokerIdNotRegisteredError,
            InconsistentTopicIdError,
            InconsistentClusterIdError,
            TransactionalIdNotFoundError,
            FetchSessionTopicIdError,
            IneligibleReplicaError,
            NewLeaderElectedError,
            OffsetMovedToTieredStorageError,
            FencedMemberEpochError,
            UnreleasedInstanceIdError,
            UnsupportedAssignorError,
            StaleMemberEpochError,
            MismatchedEndpointTypeError,
            UnsupportedEndpointTypeError,
            UnknownControllerIdError,
            UnknownSubscriptionIdError,
            TelemetryTooLargeError,
            InvalidRegistrationError,
            TransactionAbortableError,
            InvalidRecordStateError,
            ShareSessionNotFoundError,
            InvalidShareSessionEpochError,
            FencedStateEpochError,
            InvalidVoterKeyError,
            DuplicateVoterError,
            VoterNotFoundError,
            InvalidRegularExpressionError,
            RebootstrapRequiredError,
        )
    }
)

ERROR_TABLE: Mapping[int, ErrorSpec] = MappingProxyType(
    {
        0: ErrorSpec(0, "NONE", False, False, "No error."),
        **{
            code: ErrorSpec(code, cls.name, cls.retriable, cls.invalid_metadata, cls.description)
            for code, cls in _ERROR_CLASSES.items()
        },
    }
)


def error_class_for_code(code: int) -> type[BrokerResponseError] | None:
    """The exception class for ``code``; None for 0 or a code this table does not know."""
    return _ERROR_CLASSES.get(code)


def error_for_code(code: int, message: str | None = None) -> BrokerResponseError | None:
    """An exception instance for a broker error code, or None when ``code`` is 0 (no error)."""
    if code == 0:
        return None
    cls = _ERROR_CLASSES.get(code)
    if cls is None:
        return BrokerResponseError(message, code=code)
    return cls(message)


def _rebuild_broker_error(
    cls: type[BrokerResponseError], message: str | None, code: int | None
) -> BrokerResponseError:
    return cls(message, code=code)


# The errors that condemn one record, not the producer, its connection or its transaction's
# other records: resending the same bytes gets the same answer, and the records around it can
# still be written. What a dead-letter policy may route instead of failing the write.
_RECORD_ERRORS = (
    RecordTooLargeError,
    InvalidRecordError,
    InvalidTimestampError,
    CorruptMessageError,
    CorruptRecordError,
)


def is_record_error(error: BaseException) -> bool:
    """True when ``error`` is about one record rather than the write as a whole.

    Record-level: RecordTooLargeError (larger than max.request.size / buffer.memory, or refused
    as MESSAGE_TOO_LARGE once its batch was split down to it), InvalidRecordError (the broker's
    INVALID_RECORD, e.g. a null key on a compacted topic), InvalidTimestampError (its timestamp
    is outside the topic's message.timestamp.before/after.max.ms) and CORRUPT_MESSAGE
    (CorruptMessageError from the broker, CorruptRecordError from the client). Everything else
    (timeouts, authorization, fencing, a closed producer, ...) is not: it would fail the next
    record as well.
    """
    return isinstance(error, _RECORD_ERRORS)
