"""Kafka's protocol error table as one Python exception hierarchy.

Every gRPC response of kraftlog carries Kafka's numeric error code and upper-case error name
(docs/architecture.md §5), so clients, the CLI and the servers need a single, exact table to translate between
codes, names and exceptions. Each Kafka error code is one subclass of :class:`KafkaError`; the code,
the name and whether the Java client treats it as retriable (``RetriableException`` versus plain
``ApiException``) are class attributes set through ``__init_subclass__`` keywords, so the table reads
like Kafka's own and a duplicate code or name fails at import time instead of silently shadowing.

The first line of each class docstring doubles as the default message, so the reason an error exists
is written once.

The one error tree of kraftlog: it lives in the ground floor so that every layer raises from it
(storage's errors are members too, see `kraftlog.storage`), and it is pure Python so that clients can
use it without loading grpc. The classes are in `_error_table`, the base and registry in `_error_base`.
"""

from __future__ import annotations

import types
from typing import Any, NoReturn

from kraftlog.common.errors._error_base import (
    _BY_CODE,
    _BY_NAME,
    _INT16_MAX,
    _INT16_MIN,
    _LEGACY_NAMES,
    _UNKNOWN_CODE_CLASSES,
    ERRORS_BY_CODE,
    InvalidMetadataError,
    KafkaError,
    RecordError,
    RetriableError,
    install_code_lookup,
)
from kraftlog.common.errors._error_table import (
    BrokerIdNotRegisteredError,
    BrokerNotAvailableError,
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CorruptMessageError,
    DelegationTokenAuthDisabledError,
    DelegationTokenAuthorizationFailedError,
    DelegationTokenExpiredError,
    DelegationTokenNotFoundError,
    DelegationTokenOwnerMismatchError,
    DelegationTokenRequestNotAllowedError,
    DuplicateBrokerRegistrationError,
    DuplicateResourceError,
    DuplicateSequenceNumberError,
    DuplicateVoterError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    FeatureUpdateFailedError,
    FencedInstanceIdError,
    FencedLeaderEpochError,
    FencedMemberEpochError,
    FencedStateEpochError,
    FetchSessionIdNotFoundError,
    FetchSessionTopicIdError,
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    IllegalSaslStateError,
    InconsistentClusterIdError,
    InconsistentGroupProtocolError,
    InconsistentTopicIdError,
    InconsistentVoterSetError,
    IneligibleReplicaError,
    InvalidCommitOffsetSizeError,
    InvalidConfigError,
    InvalidFetchSessionEpochError,
    InvalidFetchSizeError,
    InvalidGroupIdError,
    InvalidPartitionsError,
    InvalidPrincipalTypeError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidRecordError,
    InvalidRecordStateError,
    InvalidRegistrationError,
    InvalidRegularExpressionError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidSessionTimeoutError,
    InvalidShareSessionEpochError,
    InvalidTimestampError,
    InvalidTopicError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    InvalidUpdateVersionError,
    InvalidVoterKeyError,
    KafkaStorageError,
    LeaderNotAvailableError,
    ListenerNotFoundError,
    LogDirNotFoundError,
    MemberIdRequiredError,
    MessageTooLargeError,
    MismatchedEndpointTypeError,
    NetworkError,
    NewLeaderElectedError,
    NonEmptyGroupError,
    NoReassignmentInProgressError,
    NotControllerError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetMetadataTooLargeError,
    OffsetMovedToTieredStorageError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    OperationNotAttemptedError,
    OutOfOrderSequenceNumberError,
    PolicyViolationError,
    PositionOutOfRangeError,
    PreferredLeaderNotAvailableError,
    PrincipalDeserializationFailureError,
    ProducerFencedError,
    ReassignmentInProgressError,
    RebalanceInProgressError,
    RebootstrapRequiredError,
    RecordListTooLargeError,
    ReplicaNotAvailableError,
    RequestTimedOutError,
    ResourceNotFoundError,
    SaslAuthenticationFailedError,
    SecurityDisabledError,
    ShareSessionLimitReachedError,
    ShareSessionNotFoundError,
    SnapshotNotFoundError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
    StaleMemberEpochError,
    StreamsInvalidTopologyEpochError,
    StreamsInvalidTopologyError,
    StreamsTopologyFencedError,
    TelemetryTooLargeError,
    ThrottlingQuotaExceededError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    TopicDeletionDisabledError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    TransactionalIdNotFoundError,
    TransactionCoordinatorFencedError,
    UnacceptableCredentialError,
    UnknownControllerIdError,
    UnknownLeaderEpochError,
    UnknownMemberIdError,
    UnknownProducerIdError,
    UnknownServerError,
    UnknownSubscriptionIdError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnreleasedInstanceIdError,
    UnstableOffsetCommitError,
    UnsupportedAssignorError,
    UnsupportedCompressionTypeError,
    UnsupportedEndpointTypeError,
    UnsupportedForMessageFormatError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    VoterNotFoundError,
)

__all__ = [
    "ERRORS_BY_CODE",
    "KafkaError",
    "RetriableError",
    "InvalidMetadataError",
    "RecordError",
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
    cls: type[KafkaError] = types.new_class(
        f"UnknownErrorCode{suffix}Error", (UnknownServerError,), {}, lambda ns: ns.update(namespace)
    )
    # Keep UNKNOWN_SERVER_ERROR as the name: that is how Kafka itself reports an unmapped code.
    cls.error_code = code
    return cls


install_code_lookup(error_for_code)


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
