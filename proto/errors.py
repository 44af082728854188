"""Kafka's protocol error table as one Python exception hierarchy.

Every gRPC response of kraftlog carries Kafka's numeric error code and upper-case error name
(DESIGN.md §6), so clients, the CLI and the servers need a single, exact table to translate between
codes, names and exceptions. Each Kafka error code is one subclass of :class:`KafkaError`; the code,
the name and whether the Java client treats it as retriable (``RetriableException`` versus plain
``ApiException``) are class attributes set through ``__init_subclass__`` keywords, so the table reads
like Kafka's own and a duplicate code or name fails at import time instead of silently shadowing.

The first line of each class docstring doubles as the default message, so the reason an error exists
is written once.

This module is pure Python on purpose: `storage` and `metadata_log` must not import it (they import no
package of ours), and clients must be able to use it without loading grpc.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, NoReturn

__all__ = [
    "ERRORS_BY_CODE",
    "KafkaError",
    "RetriableError",
    "InvalidMetadataError",
    "error_for_code",
    "error_for_name",
    "raise_for_code",
    # The table, in code order.
    "UnknownServerError",
    "OffsetOutOfRangeError",
    "CorruptMessageError",
    "UnknownTopicOrPartitionError",
    "InvalidFetchSizeError",
    "LeaderNotAvailableError",
    "NotLeaderOrFollowerError",
    "RequestTimedOutError",
    "BrokerNotAvailableError",
    "ReplicaNotAvailableError",
    "MessageTooLargeError",
    "StaleControllerEpochError",
    "OffsetMetadataTooLargeError",
    "NetworkError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "NotCoordinatorError",
    "InvalidTopicError",
    "RecordListTooLargeError",
    "NotEnoughReplicasError",
    "NotEnoughReplicasAfterAppendError",
    "InvalidRequiredAcksError",
    "IllegalGenerationError",
    "InconsistentGroupProtocolError",
    "InvalidGroupIdError",
    "UnknownMemberIdError",
    "InvalidSessionTimeoutError",
    "RebalanceInProgressError",
    "InvalidCommitOffsetSizeError",
    "TopicAuthorizationFailedError",
    "GroupAuthorizationFailedError",
    "ClusterAuthorizationFailedError",
    "InvalidTimestampError",
    "UnsupportedSaslMechanismError",
    "IllegalSaslStateError",
    "UnsupportedVersionError",
    "TopicAlreadyExistsError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "InvalidReplicaAssignmentError",
    "InvalidConfigError",
    "NotControllerError",
    "InvalidRequestError",
    "UnsupportedForMessageFormatError",
    "PolicyViolationError",
    "OutOfOrderSequenceNumberError",
    "DuplicateSequenceNumberError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "InvalidProducerIdMappingError",
    "InvalidTransactionTimeoutError",
    "ConcurrentTransactionsError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "SecurityDisabledError",
    "OperationNotAttemptedError",
    "KafkaStorageError",
    "LogDirNotFoundError",
    "SaslAuthenticationFailedError",
    "UnknownProducerIdError",
    "ReassignmentInProgressError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "InvalidPrincipalTypeError",
    "NonEmptyGroupError",
    "GroupIdNotFoundError",
    "FetchSessionIdNotFoundError",
    "InvalidFetchSessionEpochError",
    "ListenerNotFoundError",
    "TopicDeletionDisabledError",
    "FencedLeaderEpochError",
    "UnknownLeaderEpochError",
    "UnsupportedCompressionTypeError",
    "StaleBrokerEpochError",
    "OffsetNotAvailableError",
    "MemberIdRequiredError",
    "PreferredLeaderNotAvailableError",
    "GroupMaxSizeReachedError",
    "FencedInstanceIdError",
    "EligibleLeadersNotAvailableError",
    "ElectionNotNeededError",
    "NoReassignmentInProgressError",
    "GroupSubscribedToTopicError",
    "InvalidRecordError",
    "UnstableOffsetCommitError",
    "ThrottlingQuotaExceededError",
    "ProducerFencedError",
    "ResourceNotFoundError",
    "DuplicateResourceError",
    "UnacceptableCredentialError",
    "InconsistentVoterSetError",
    "InvalidUpdateVersionError",
    "FeatureUpdateFailedError",
    "PrincipalDeserializationFailureError",
    "SnapshotNotFoundError",
    "PositionOutOfRangeError",
    "UnknownTopicIdError",
    "DuplicateBrokerRegistrationError",
    "BrokerIdNotRegisteredError",
    "InconsistentTopicIdError",
    "InconsistentClusterIdError",
    "TransactionalIdNotFoundError",
    "FetchSessionTopicIdError",
    "IneligibleReplicaError",
    "NewLeaderElectedError",
    "OffsetMovedToTieredStorageError",
    "FencedMemberEpochError",
    "UnreleasedInstanceIdError",
    "UnsupportedAssignorError",
    "StaleMemberEpochError",
    "MismatchedEndpointTypeError",
    "UnsupportedEndpointTypeError",
    "UnknownControllerIdError",
    "UnknownSubscriptionIdError",
    "TelemetryTooLargeError",
    "InvalidRegistrationError",
    "TransactionAbortableError",
    "InvalidRecordStateError",
    "ShareSessionNotFoundError",
    "InvalidShareSessionEpochError",
    "FencedStateEpochError",
    "InvalidVoterKeyError",
    "DuplicateVoterError",
    "VoterNotFoundError",
    "InvalidRegularExpressionError",
    "RebootstrapRequiredError",
    "StreamsInvalidTopologyError",
    "StreamsInvalidTopologyEpochError",
    "StreamsTopologyFencedError",
    "ShareSessionLimitReachedError",
]

# Kafka error codes travel as int16 on the wire.
_INT16_MIN = -(2**15)
_INT16_MAX = 2**15 - 1

_BY_CODE: dict[int, type[KafkaError]] = {}
_BY_NAME: dict[str, type[KafkaError]] = {}
_UNKNOWN_CODE_CLASSES: dict[int, type[KafkaError]] = {}

#: Read-only view of the table: error code -> exception class (code 0, NONE, is not in it).
ERRORS_BY_CODE: Mapping[int, type[KafkaError]] = MappingProxyType(_BY_CODE)

# Names older Kafka versions (and older clients) used for codes that were renamed since.
_LEGACY_NAMES: dict[str, int] = {
    "UNKNOWN": -1,
    "NOT_LEADER_FOR_PARTITION": 6,
    "GROUP_LOAD_IN_PROGRESS": 14,
    "GROUP_COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR_FOR_GROUP": 16,
}

# Attributes a context keyword may not replace: they define what the error *is*.
_RESERVED_CONTEXT = frozenset({"error_code", "error_name", "retriable", "message", "context", "args"})


class KafkaError(Exception):
    """The server experienced an unexpected error while processing the request.

    Base of every Kafka protocol error. ``error_code``, ``error_name`` and ``retriable`` are class
    attributes so code can reason about an error type without an instance (``cls.retriable`` in a
    retry loop, ``cls.error_code`` when filling a response). Extra keyword arguments become instance
    attributes and are kept in :attr:`context`: NOT_LEADER_OR_FOLLOWER and NOT_CONTROLLER use it to
    carry the current leader (``leader_id``, ``leader_address``) so a client can redirect at once
    instead of refreshing metadata first.
    """

    error_code: ClassVar[int] = -1
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False
    _dynamic: ClassVar[bool] = False

    message: str
    context: dict[str, Any]

    def __init_subclass__(
        cls,
        *,
        code: int | None = None,
        name: str | None = None,
        retriable: bool | None = None,
        _register: bool = True,
        **kwargs: Any,
    ) -> None:
        """Set the class attributes from keywords and register the class in the code/name table.

        A subclass without ``code`` is an abstract grouping (or a finer-grained alias) that inherits
        its parent's code and is not registered, so the table keeps exactly one class per code.
        """
        super().__init_subclass__(**kwargs)
        if retriable is not None:
            if not retriable and issubclass(cls, RetriableError):
                raise TypeError(f"{cls.__name__} derives from RetriableError but says retriable=False")
            cls.retriable = retriable
        if (code is None) != (name is None):
            raise TypeError(f"{cls.__name__}: give both code= and name=, or neither")
        if code is None or name is None:
            return
        if code == 0:
            raise TypeError("code 0 is NONE, which is not an error")
        if not _INT16_MIN <= code <= _INT16_MAX:
            raise TypeError(f"{cls.__name__}: error code {code} does not fit in int16")
        if name != name.upper():
            raise TypeError(f"{cls.__name__}: error name {name!r} must be upper-case like Kafka's")
        cls.error_code = code
        cls.error_name = name
        if not _register:
            return
        if code in _BY_CODE:
            raise TypeError(f"error code {code} registered twice: {_BY_CODE[code].__name__}, {cls.__name__}")
        if name in _BY_NAME:
            raise TypeError(f"error name {name} registered twice: {_BY_NAME[name].__name__}, {cls.__name__}")
        _BY_CODE[code] = cls
        _BY_NAME[name] = cls

    def __init__(self, message: str | None = None, **context: Any) -> None:
        if message is None:
            message = _default_message(type(self))
        super().__init__(message)
        self.message = message
        self.context = {}
        for key, value in context.items():
            if key.startswith("_") or key in _RESERVED_CONTEXT or _is_behaviour(type(self), key):
                raise TypeError(f"{type(self).__name__}: {key!r} cannot be used as a context keyword")
            setattr(self, key, value)
            self.context[key] = value

    def __str__(self) -> str:
        if not self.context:
            return self.message
        extra = ", ".join(f"{key}={value!r}" for key, value in self.context.items())
        return f"{self.message} ({extra})"

    def __repr__(self) -> str:
        parts = [repr(self.message)] + [f"{key}={value!r}" for key, value in self.context.items()]
        return f"{type(self).__name__}({', '.join(parts)})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle by code for classes built on the fly for unknown codes (they are not importable)."""
        if type(self)._dynamic:
            return (_rebuild, (self.error_code, self.message, dict(self.context)))
        return (_rebuild_static, (type(self), self.message, dict(self.context)))


def _is_behaviour(cls: type[KafkaError], key: str) -> bool:
    """True if ``key`` names a method or other class attribute that a context value would shadow.

    Attributes declared on the class with the value ``None`` are hint slots (``leader_id`` and
    friends) and may be filled in.
    """
    if not hasattr(cls, key):
        return False
    return getattr(cls, key) is not None


def _default_message(cls: type[KafkaError]) -> str:
    """The first line of the nearest docstring: the one place each error's meaning is written."""
    for klass in cls.__mro__:
        doc = klass.__dict__.get("__doc__")
        if doc:
            return doc.strip().splitlines()[0].strip()
    return cls.error_name


def _rebuild(code: int, message: str, context: dict[str, Any]) -> KafkaError:
    return error_for_code(code)(message, **context)


def _rebuild_static(cls: type[KafkaError], message: str, context: dict[str, Any]) -> KafkaError:
    return cls(message, **context)


class RetriableError(KafkaError, retriable=True):
    """A transient error: the same request may succeed if sent again after a back-off.

    Abstract grouping (Kafka's ``RetriableException``) so clients can ``except RetriableError``.
    """


class InvalidMetadataError(RetriableError):
    """The client's view of the cluster is stale: refresh metadata, then retry.

    Abstract grouping modelled on Kafka's ``InvalidMetadataException``: leadership or placement
    moved, so retrying against the same broker without new metadata would fail again.
    """


# ---------------------------------------------------------------------------------------------
# The table. One class per Kafka error code, in code order. Retriable ones derive from
# RetriableError (or InvalidMetadataError), exactly where Kafka's Java client exception derives
# from RetriableException.
# ---------------------------------------------------------------------------------------------


class UnknownServerError(KafkaError, code=-1, name="UNKNOWN_SERVER_ERROR"):
    """The server hit an unexpected error while processing the request."""


class OffsetOutOfRangeError(KafkaError, code=1, name="OFFSET_OUT_OF_RANGE"):
    """The requested offset is outside the range of offsets the server holds for the partition."""


class CorruptMessageError(RetriableError, code=2, name="CORRUPT_MESSAGE"):
    """The message failed its CRC check, has an invalid size, lacks a key on a compacted topic, or is otherwise corrupt."""


class UnknownTopicOrPartitionError(InvalidMetadataError, code=3, name="UNKNOWN_TOPIC_OR_PARTITION"):
    """This server does not host the topic-partition."""


class InvalidFetchSizeError(KafkaError, code=4, name="INVALID_FETCH_SIZE"):
    """The requested fetch size is invalid."""


class LeaderNotAvailableError(InvalidMetadataError, code=5, name="LEADER_NOT_AVAILABLE"):
    """The partition has no leader right now, typically because an election is in progress."""


class NotLeaderOrFollowerError(InvalidMetadataError, code=6, name="NOT_LEADER_OR_FOLLOWER"):
    """This broker is not the leader (or, for replica requests, not a replica) of the partition."""

    #: Hint: the broker id the sender believes leads the partition, when known.
    leader_id: int | None = None
    #: Hint: ``host:port`` of that leader, when known.
    leader_address: str | None = None
    #: Hint: the leader epoch that goes with ``leader_id``, when known.
    leader_epoch: int | None = None


class RequestTimedOutError(RetriableError, code=7, name="REQUEST_TIMED_OUT"):
    """The request timed out."""


class BrokerNotAvailableError(KafkaError, code=8, name="BROKER_NOT_AVAILABLE"):
    """The broker is not available."""


class ReplicaNotAvailableError(InvalidMetadataError, code=9, name="REPLICA_NOT_AVAILABLE"):
    """The replica is not available for the requested topic-partition."""


class MessageTooLargeError(KafkaError, code=10, name="MESSAGE_TOO_LARGE"):
    """The request contains a message larger than the maximum message size the server accepts."""


class StaleControllerEpochError(KafkaError, code=11, name="STALE_CONTROLLER_EPOCH"):
    """The request came from a controller whose epoch is older than the current one."""


class OffsetMetadataTooLargeError(KafkaError, code=12, name="OFFSET_METADATA_TOO_LARGE"):
    """The metadata string attached to the offset commit is too large."""


class NetworkError(InvalidMetadataError, code=13, name="NETWORK_EXCEPTION"):
    """The server disconnected before a response was received."""


class CoordinatorLoadInProgressError(RetriableError, code=14, name="COORDINATOR_LOAD_IN_PROGRESS"):
    """The coordinator is still loading its state and cannot serve requests yet."""


class CoordinatorNotAvailableError(RetriableError, code=15, name="COORDINATOR_NOT_AVAILABLE"):
    """The coordinator is not available."""


class NotCoordinatorError(RetriableError, code=16, name="NOT_COORDINATOR"):
    """This broker is not the coordinator for the group or transactional id."""


class InvalidTopicError(KafkaError, code=17, name="INVALID_TOPIC_EXCEPTION"):
    """The request names an invalid topic (bad name, or an internal topic that may not be used this way)."""


class RecordListTooLargeError(KafkaError, code=18, name="RECORD_LIST_TOO_LARGE"):
    """The request contains a record batch larger than the configured segment size."""


class NotEnoughReplicasError(RetriableError, code=19, name="NOT_ENOUGH_REPLICAS"):
    """The write was rejected because fewer replicas are in sync than min.insync.replicas requires."""


class NotEnoughReplicasAfterAppendError(RetriableError, code=20, name="NOT_ENOUGH_REPLICAS_AFTER_APPEND"):
    """The write reached the log, but fewer replicas than required acknowledged it."""


class InvalidRequiredAcksError(KafkaError, code=21, name="INVALID_REQUIRED_ACKS"):
    """The produce request asked for an invalid acks value."""


class IllegalGenerationError(KafkaError, code=22, name="ILLEGAL_GENERATION"):
    """The group generation id in the request is not the current one."""


class InconsistentGroupProtocolError(KafkaError, code=23, name="INCONSISTENT_GROUP_PROTOCOL"):
    """The member's protocols are incompatible with those of the group's existing members."""


class InvalidGroupIdError(KafkaError, code=24, name="INVALID_GROUP_ID"):
    """The group id is invalid."""


class UnknownMemberIdError(KafkaError, code=25, name="UNKNOWN_MEMBER_ID"):
    """The coordinator does not know this member id."""


class InvalidSessionTimeoutError(KafkaError, code=26, name="INVALID_SESSION_TIMEOUT"):
    """The session timeout is outside group.min.session.timeout.ms .. group.max.session.timeout.ms."""


class RebalanceInProgressError(KafkaError, code=27, name="REBALANCE_IN_PROGRESS"):
    """The group is rebalancing; the member has to rejoin."""


class InvalidCommitOffsetSizeError(KafkaError, code=28, name="INVALID_COMMIT_OFFSET_SIZE"):
    """The size of the offset commit data is invalid."""


class TopicAuthorizationFailedError(KafkaError, code=29, name="TOPIC_AUTHORIZATION_FAILED"):
    """Not authorized to access the topic."""


class GroupAuthorizationFailedError(KafkaError, code=30, name="GROUP_AUTHORIZATION_FAILED"):
    """Not authorized to access the group."""


class ClusterAuthorizationFailedError(KafkaError, code=31, name="CLUSTER_AUTHORIZATION_FAILED"):
    """Not authorized to perform a cluster-level operation."""


class InvalidTimestampError(KafkaError, code=32, name="INVALID_TIMESTAMP"):
    """The message timestamp is outside the accepted range."""


class UnsupportedSaslMechanismError(KafkaError, code=33, name="UNSUPPORTED_SASL_MECHANISM"):
    """The broker does not support the requested SASL mechanism."""


class IllegalSaslStateError(KafkaError, code=34, name="ILLEGAL_SASL_STATE"):
    """The request is not valid in the current SASL state."""


class UnsupportedVersionError(KafkaError, code=35, name="UNSUPPORTED_VERSION"):
    """The server does not support this version of the API."""


class TopicAlreadyExistsError(KafkaError, code=36, name="TOPIC_ALREADY_EXISTS"):
    """A topic with this name already exists."""


class InvalidPartitionsError(KafkaError, code=37, name="INVALID_PARTITIONS"):
    """The number of partitions is invalid (below 1, or not larger than the current count)."""


class InvalidReplicationFactorError(KafkaError, code=38, name="INVALID_REPLICATION_FACTOR"):
    """The replication factor is below 1 or larger than the number of available brokers."""


class InvalidReplicaAssignmentError(KafkaError, code=39, name="INVALID_REPLICA_ASSIGNMENT"):
    """The replica assignment is invalid."""


class InvalidConfigError(KafkaError, code=40, name="INVALID_CONFIG"):
    """The configuration is invalid."""


class NotControllerError(RetriableError, code=41, name="NOT_CONTROLLER"):
    """This node is not the active controller of the cluster."""

    #: Hint: node id of the active controller, when the sender knows it.
    leader_id: int | None = None
    #: Hint: ``host:port`` where the active controller serves, when known.
    leader_address: str | None = None


class InvalidRequestError(KafkaError, code=42, name="INVALID_REQUEST"):
    """The request is malformed or was sent to an incompatible server; the server log has details."""


class UnsupportedForMessageFormatError(KafkaError, code=43, name="UNSUPPORTED_FOR_MESSAGE_FORMAT"):
    """The message format version on the broker does not support the request."""


class PolicyViolationError(KafkaError, code=44, name="POLICY_VIOLATION"):
    """The request parameters violate the configured policy."""


class OutOfOrderSequenceNumberError(KafkaError, code=45, name="OUT_OF_ORDER_SEQUENCE_NUMBER"):
    """The broker received a sequence number that does not follow the last one from this producer."""


class DuplicateSequenceNumberError(KafkaError, code=46, name="DUPLICATE_SEQUENCE_NUMBER"):
    """The broker already has a batch with this producer's sequence number."""


class InvalidProducerEpochError(KafkaError, code=47, name="INVALID_PRODUCER_EPOCH"):
    """The producer used an epoch older than the current one."""


class InvalidTxnStateError(KafkaError, code=48, name="INVALID_TXN_STATE"):
    """The transactional operation is not valid in the transaction's current state."""


class InvalidProducerIdMappingError(KafkaError, code=49, name="INVALID_PRODUCER_ID_MAPPING"):
    """The producer id is not the one currently assigned to its transactional id."""


class InvalidTransactionTimeoutError(KafkaError, code=50, name="INVALID_TRANSACTION_TIMEOUT"):
    """The transaction timeout exceeds transaction.max.timeout.ms."""


class ConcurrentTransactionsError(RetriableError, code=51, name="CONCURRENT_TRANSACTIONS"):
    """Another operation on the same transaction is still in progress."""


class TransactionCoordinatorFencedError(KafkaError, code=52, name="TRANSACTION_COORDINATOR_FENCED"):
    """The transaction coordinator that sent the marker is no longer the producer's coordinator."""


class TransactionalIdAuthorizationFailedError(KafkaError, code=53, name="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
    """Not authorized to use the transactional id."""


class SecurityDisabledError(KafkaError, code=54, name="SECURITY_DISABLED"):
    """Security features are disabled."""


class OperationNotAttemptedError(KafkaError, code=55, name="OPERATION_NOT_ATTEMPTED"):
    """The broker skipped this operation because another one in the same batch failed."""


class KafkaStorageError(InvalidMetadataError, code=56, name="KAFKA_STORAGE_ERROR"):
    """A disk error occurred while accessing the log."""


class LogDirNotFoundError(KafkaError, code=57, name="LOG_DIR_NOT_FOUND"):
    """The log directory is not one of the broker's configured log directories."""


class SaslAuthenticationFailedError(KafkaError, code=58, name="SASL_AUTHENTICATION_FAILED"):
    """SASL authentication failed."""


class UnknownProducerIdError(KafkaError, code=59, name="UNKNOWN_PRODUCER_ID"):
    """The broker has no state for this producer id, e.g. because its records were all deleted."""


class ReassignmentInProgressError(KafkaError, code=60, name="REASSIGNMENT_IN_PROGRESS"):
    """A partition reassignment is in progress."""


class DelegationTokenAuthDisabledError(KafkaError, code=61, name="DELEGATION_TOKEN_AUTH_DISABLED"):
    """Delegation tokens are not enabled."""


class DelegationTokenNotFoundError(KafkaError, code=62, name="DELEGATION_TOKEN_NOT_FOUND"):
    """The delegation token was not found."""


class DelegationTokenOwnerMismatchError(KafkaError, code=63, name="DELEGATION_TOKEN_OWNER_MISMATCH"):
    """The principal is not a valid owner or renewer of the token."""


class DelegationTokenRequestNotAllowedError(KafkaError, code=64, name="DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"):
    """Delegation token requests are not allowed on this kind of channel."""


class DelegationTokenAuthorizationFailedError(KafkaError, code=65, name="DELEGATION_TOKEN_AUTHORIZATION_FAILED"):
    """Not authorized for the delegation token operation."""


class DelegationTokenExpiredError(KafkaError, code=66, name="DELEGATION_TOKEN_EXPIRED"):
    """The delegation token has expired."""


class InvalidPrincipalTypeError(KafkaError, code=67, name="INVALID_PRINCIPAL_TYPE"):
    """The principal type is not supported."""


class NonEmptyGroupError(KafkaError, code=68, name="NON_EMPTY_GROUP"):
    """The group still has members."""


class GroupIdNotFoundError(KafkaError, code=69, name="GROUP_ID_NOT_FOUND"):
    """The group id does not exist."""


class FetchSessionIdNotFoundError(RetriableError, code=70, name="FETCH_SESSION_ID_NOT_FOUND"):
    """The fetch session id was not found."""


class InvalidFetchSessionEpochError(RetriableError, code=71, name="INVALID_FETCH_SESSION_EPOCH"):
    """The fetch session epoch is invalid."""


class ListenerNotFoundError(InvalidMetadataError, code=72, name="LISTENER_NOT_FOUND"):
    """The leader has no listener matching the one the metadata request arrived on."""


class TopicDeletionDisabledError(KafkaError, code=73, name="TOPIC_DELETION_DISABLED"):
    """Topic deletion is disabled (delete.topic.enable=false)."""


class FencedLeaderEpochError(InvalidMetadataError, code=74, name="FENCED_LEADER_EPOCH"):
    """The leader epoch in the request is older than the broker's."""


class UnknownLeaderEpochError(RetriableError, code=75, name="UNKNOWN_LEADER_EPOCH"):
    """The leader epoch in the request is newer than the broker's."""


class UnsupportedCompressionTypeError(KafkaError, code=76, name="UNSUPPORTED_COMPRESSION_TYPE"):
    """The client does not support the partition's compression type."""


class StaleBrokerEpochError(KafkaError, code=77, name="STALE_BROKER_EPOCH"):
    """The broker epoch in the request is not the current one."""


class OffsetNotAvailableError(RetriableError, code=78, name="OFFSET_NOT_AVAILABLE"):
    """The new leader's high watermark has not caught up yet, so offsets are not guaranteed monotonic."""


class MemberIdRequiredError(KafkaError, code=79, name="MEMBER_ID_REQUIRED"):
    """The member needs a member id before it can join the group."""


class PreferredLeaderNotAvailableError(InvalidMetadataError, code=80, name="PREFERRED_LEADER_NOT_AVAILABLE"):
    """The preferred leader is not available."""


class GroupMaxSizeReachedError(KafkaError, code=81, name="GROUP_MAX_SIZE_REACHED"):
    """The group already has group.max.size members."""


class FencedInstanceIdError(KafkaError, code=82, name="FENCED_INSTANCE_ID"):
    """Another member registered with the same group.instance.id under a different member id."""


class EligibleLeadersNotAvailableError(InvalidMetadataError, code=83, name="ELIGIBLE_LEADERS_NOT_AVAILABLE"):
    """No eligible leader is available for the partition."""


class ElectionNotNeededError(InvalidMetadataError, code=84, name="ELECTION_NOT_NEEDED"):
    """The partition already has the leader the election would pick."""


class NoReassignmentInProgressError(KafkaError, code=85, name="NO_REASSIGNMENT_IN_PROGRESS"):
    """No partition reassignment is in progress."""


class GroupSubscribedToTopicError(KafkaError, code=86, name="GROUP_SUBSCRIBED_TO_TOPIC"):
    """The group is subscribed to the topic, so its offsets for it may not be deleted."""


class InvalidRecordError(KafkaError, code=87, name="INVALID_RECORD"):
    """The record failed the broker's validation and was rejected."""


class UnstableOffsetCommitError(RetriableError, code=88, name="UNSTABLE_OFFSET_COMMIT"):
    """Pending transactional offsets must be resolved first."""


class ThrottlingQuotaExceededError(RetriableError, code=89, name="THROTTLING_QUOTA_EXCEEDED"):
    """The throttling quota was exceeded."""


class ProducerFencedError(KafkaError, code=90, name="PRODUCER_FENCED"):
    """A newer producer with the same transactional id has fenced this one."""


class ResourceNotFoundError(KafkaError, code=91, name="RESOURCE_NOT_FOUND"):
    """The request refers to a resource that does not exist."""


class DuplicateResourceError(KafkaError, code=92, name="DUPLICATE_RESOURCE"):
    """The request refers to the same resource more than once."""


class UnacceptableCredentialError(KafkaError, code=93, name="UNACCEPTABLE_CREDENTIAL"):
    """The requested credential does not meet the acceptance criteria."""


class InconsistentVoterSetError(KafkaError, code=94, name="INCONSISTENT_VOTER_SET"):
    """The sender or receiver of a voter-only request is not one of the expected voters."""


class InvalidUpdateVersionError(KafkaError, code=95, name="INVALID_UPDATE_VERSION"):
    """The update version is invalid."""


class FeatureUpdateFailedError(KafkaError, code=96, name="FEATURE_UPDATE_FAILED"):
    """The finalized features could not be updated because of an unexpected server error."""


class PrincipalDeserializationFailureError(KafkaError, code=97, name="PRINCIPAL_DESERIALIZATION_FAILURE"):
    """The forwarded request principal could not be deserialized."""


class SnapshotNotFoundError(KafkaError, code=98, name="SNAPSHOT_NOT_FOUND"):
    """The requested snapshot was not found."""


class PositionOutOfRangeError(KafkaError, code=99, name="POSITION_OUT_OF_RANGE"):
    """The requested position is negative or past the end of the snapshot."""


class UnknownTopicIdError(InvalidMetadataError, code=100, name="UNKNOWN_TOPIC_ID"):
    """This server does not host a topic with this topic id."""


class DuplicateBrokerRegistrationError(KafkaError, code=101, name="DUPLICATE_BROKER_REGISTRATION"):
    """Another live broker is already registered with this broker id."""


class BrokerIdNotRegisteredError(KafkaError, code=102, name="BROKER_ID_NOT_REGISTERED"):
    """The broker id is not registered."""


class InconsistentTopicIdError(InvalidMetadataError, code=103, name="INCONSISTENT_TOPIC_ID"):
    """The topic id of the log does not match the topic id in the request."""


class InconsistentClusterIdError(KafkaError, code=104, name="INCONSISTENT_CLUSTER_ID"):
    """The cluster id in the request does not match the server's."""


class TransactionalIdNotFoundError(KafkaError, code=105, name="TRANSACTIONAL_ID_NOT_FOUND"):
    """The transactional id was not found."""


class FetchSessionTopicIdError(RetriableError, code=106, name="FETCH_SESSION_TOPIC_ID_ERROR"):
    """The fetch session used topic ids inconsistently."""


class IneligibleReplicaError(KafkaError, code=107, name="INELIGIBLE_REPLICA"):
    """The proposed ISR contains a replica that is not eligible (fenced or shutting down)."""


class NewLeaderElectedError(KafkaError, code=108, name="NEW_LEADER_ELECTED"):
    """The partition change was applied, but it also elected a new leader."""


class OffsetMovedToTieredStorageError(KafkaError, code=109, name="OFFSET_MOVED_TO_TIERED_STORAGE"):
    """The requested offset now lives in tiered storage."""


class FencedMemberEpochError(KafkaError, code=110, name="FENCED_MEMBER_EPOCH"):
    """The member epoch was fenced; the member must give up its partitions and rejoin."""


class UnreleasedInstanceIdError(KafkaError, code=111, name="UNRELEASED_INSTANCE_ID"):
    """Another member still holds this instance id and has to leave first."""


class UnsupportedAssignorError(KafkaError, code=112, name="UNSUPPORTED_ASSIGNOR"):
    """The group does not support this assignor or assignor version."""


class StaleMemberEpochError(KafkaError, code=113, name="STALE_MEMBER_EPOCH"):
    """The member epoch is stale; retry with the epoch returned by the latest heartbeat."""


class MismatchedEndpointTypeError(KafkaError, code=114, name="MISMATCHED_ENDPOINT_TYPE"):
    """The request was sent to the wrong type of endpoint (broker versus controller)."""


class UnsupportedEndpointTypeError(KafkaError, code=115, name="UNSUPPORTED_ENDPOINT_TYPE"):
    """This endpoint type is not supported."""


class UnknownControllerIdError(KafkaError, code=116, name="UNKNOWN_CONTROLLER_ID"):
    """The controller id is not known."""


class UnknownSubscriptionIdError(KafkaError, code=117, name="UNKNOWN_SUBSCRIPTION_ID"):
    """The telemetry subscription id is unknown or outdated."""


class TelemetryTooLargeError(KafkaError, code=118, name="TELEMETRY_TOO_LARGE"):
    """The pushed telemetry is larger than the broker accepts."""


class InvalidRegistrationError(KafkaError, code=119, name="INVALID_REGISTRATION"):
    """The controller considers the broker registration invalid."""


class TransactionAbortableError(KafkaError, code=120, name="TRANSACTION_ABORTABLE"):
    """The transaction hit an error; aborting it lets the transactional id be used again."""


class InvalidRecordStateError(KafkaError, code=121, name="INVALID_RECORD_STATE"):
    """The record state does not allow the acknowledgement."""


class ShareSessionNotFoundError(RetriableError, code=122, name="SHARE_SESSION_NOT_FOUND"):
    """The share session was not found."""


class InvalidShareSessionEpochError(RetriableError, code=123, name="INVALID_SHARE_SESSION_EPOCH"):
    """The share session epoch is invalid."""


class FencedStateEpochError(KafkaError, code=124, name="FENCED_STATE_EPOCH"):
    """The share-group state epoch does not match the share coordinator's."""


class InvalidVoterKeyError(KafkaError, code=125, name="INVALID_VOTER_KEY"):
    """The voter key does not match the receiving replica's."""


class DuplicateVoterError(KafkaError, code=126, name="DUPLICATE_VOTER"):
    """The voter is already in the voter set."""


class VoterNotFoundError(KafkaError, code=127, name="VOTER_NOT_FOUND"):
    """The voter is not in the voter set."""


class InvalidRegularExpressionError(KafkaError, code=128, name="INVALID_REGULAR_EXPRESSION"):
    """The regular expression is invalid."""


class RebootstrapRequiredError(KafkaError, code=129, name="REBOOTSTRAP_REQUIRED"):
    """The client's metadata is too stale; it must bootstrap again."""


class StreamsInvalidTopologyError(KafkaError, code=130, name="STREAMS_INVALID_TOPOLOGY"):
    """The streams topology is invalid."""


class StreamsInvalidTopologyEpochError(KafkaError, code=131, name="STREAMS_INVALID_TOPOLOGY_EPOCH"):
    """The streams topology epoch is invalid."""


class StreamsTopologyFencedError(KafkaError, code=132, name="STREAMS_TOPOLOGY_FENCED"):
    """The streams topology epoch is outdated."""


class ShareSessionLimitReachedError(RetriableError, code=133, name="SHARE_SESSION_LIMIT_REACHED"):
    """The broker already holds its maximum number of share sessions."""


# ---------------------------------------------------------------------------------------------
# Lookups
# ---------------------------------------------------------------------------------------------


def error_for_code(code: int) -> type[KafkaError]:
    """Return the exception class for a Kafka error code.

    A code this table does not know (a newer server, say) maps to a subclass of
    :class:`UnknownServerError` that keeps the received code in ``error_code``, so logs and
    re-serialised responses do not lose it. Code 0 is NONE, which is success, not an exception.
    """
    if isinstance(code, bool) or not isinstance(code, int):
        raise TypeError(f"error code must be an int, not {type(code).__name__}")
    if code == 0:
        raise ValueError("error code 0 is NONE (success); there is no exception for it")
    try:
        return _BY_CODE[code]
    except KeyError:
        pass
    if not _INT16_MIN <= code <= _INT16_MAX:
        raise ValueError(f"error code {code} does not fit in int16")
    cls = _UNKNOWN_CODE_CLASSES.get(code)
    if cls is None:
        cls = _make_unknown_code_class(code)
        _UNKNOWN_CODE_CLASSES[code] = cls
    return cls


def _make_unknown_code_class(code: int) -> type[KafkaError]:
    """Build (once per code) an UnknownServerError subclass that remembers an unmapped code."""
    suffix = f"M{-code}" if code < 0 else str(code)
    namespace: dict[str, Any] = {
        "__doc__": f"The server returned error code {code}, which this version of kraftlog does not know.",
        "__module__": __name__,
        "_dynamic": True,
    }
    cls = type(f"UnknownErrorCode{suffix}Error", (UnknownServerError,), namespace)
    # Keep UNKNOWN_SERVER_ERROR as the name: that is how Kafka itself reports an unmapped code.
    cls.error_code = code
    return cls


def error_for_name(name: str) -> type[KafkaError]:
    """Return the exception class for a Kafka error name such as ``"NOT_LEADER_OR_FOLLOWER"``.

    Accepts the name in any case, Kafka's former names for renamed codes (``NOT_LEADER_FOR_PARTITION``,
    ``UNKNOWN``, ...) and this module's class names, because names arrive from old clients, logs and
    CLI flags alike. Raises ``ValueError`` for ``NONE`` and ``KeyError`` for a name nobody defines.
    """
    key = name.strip()
    upper = key.upper()
    if upper == "NONE":
        raise ValueError("NONE (code 0) is success; there is no exception for it")
    cls = _BY_NAME.get(upper)
    if cls is not None:
        return cls
    legacy = _LEGACY_NAMES.get(upper)
    if legacy is not None:
        return _BY_CODE[legacy]
    for candidate in _BY_CODE.values():
        if candidate.__name__ == key:
            return candidate
    raise KeyError(f"unknown Kafka error name {name!r}")


def raise_for_code(code: int, message: str | None = None, **context: Any) -> None:
    """Raise the exception for ``code`` (with ``message`` and context hints); return for code 0.

    This is the one call a client needs after reading ``error_code``/``error_message`` from a
    response: success falls through, every failure becomes its precise exception type.
    """
    if code == 0:
        return None
    _raise(error_for_code(code), message, context)


def _raise(cls: type[KafkaError], message: str | None, context: dict[str, Any]) -> NoReturn:
    raise cls(message or None, **context)
