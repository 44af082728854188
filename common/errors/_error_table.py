"""Kafka's error table: one class per error code, in code order (see `kraftlog.common.errors`).

Retriable errors derive from `RetriableError` (or `InvalidMetadataError`) exactly where Kafka's
Java client exception derives from ``RetriableException``. Import from `kraftlog.common.errors`.
"""

from __future__ import annotations

from kraftlog.common.errors._error_base import InvalidMetadataError, KafkaError, RetriableError

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
    """The message failed its CRC check, has an invalid size, lacks a key on a compacted topic, or is corrupt."""


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
