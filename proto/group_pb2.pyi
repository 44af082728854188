from kraftlog.proto import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FindCoordinatorRequest(_message.Message):
    __slots__ = ("key_type", "keys")
    KEY_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    key_type: int
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key_type: _Optional[int] = ..., keys: _Optional[_Iterable[str]] = ...) -> None: ...

class FindCoordinatorResponse(_message.Message):
    __slots__ = ("coordinators",)
    class Coordinator(_message.Message):
        __slots__ = ("key", "node_id", "host", "port", "error")
        KEY_FIELD_NUMBER: _ClassVar[int]
        NODE_ID_FIELD_NUMBER: _ClassVar[int]
        HOST_FIELD_NUMBER: _ClassVar[int]
        PORT_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        key: str
        node_id: int
        host: str
        port: int
        error: _errors_pb2.Error
        def __init__(self, key: _Optional[str] = ..., node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    COORDINATORS_FIELD_NUMBER: _ClassVar[int]
    coordinators: _containers.RepeatedCompositeFieldContainer[FindCoordinatorResponse.Coordinator]
    def __init__(self, coordinators: _Optional[_Iterable[_Union[FindCoordinatorResponse.Coordinator, _Mapping]]] = ...) -> None: ...

class JoinGroupRequest(_message.Message):
    __slots__ = ("group_id", "session_timeout_ms", "rebalance_timeout_ms", "member_id", "group_instance_id", "protocol_type", "protocols", "reason", "client_id")
    class Protocol(_message.Message):
        __slots__ = ("name", "metadata")
        NAME_FIELD_NUMBER: _ClassVar[int]
        METADATA_FIELD_NUMBER: _ClassVar[int]
        name: str
        metadata: bytes
        def __init__(self, name: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str
    protocol_type: str
    protocols: _containers.RepeatedCompositeFieldContainer[JoinGroupRequest.Protocol]
    reason: str
    client_id: str
    def __init__(self, group_id: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., rebalance_timeout_ms: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocols: _Optional[_Iterable[_Union[JoinGroupRequest.Protocol, _Mapping]]] = ..., reason: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class JoinGroupResponse(_message.Message):
    __slots__ = ("error", "generation_id", "protocol_type", "protocol_name", "leader", "skip_assignment", "member_id", "members")
    class Member(_message.Message):
        __slots__ = ("member_id", "group_instance_id", "metadata")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
        METADATA_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        group_instance_id: str
        metadata: bytes
        def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    SKIP_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    generation_id: int
    protocol_type: str
    protocol_name: str
    leader: str
    skip_assignment: bool
    member_id: str
    members: _containers.RepeatedCompositeFieldContainer[JoinGroupResponse.Member]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., generation_id: _Optional[int] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., leader: _Optional[str] = ..., skip_assignment: _Optional[bool] = ..., member_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[JoinGroupResponse.Member, _Mapping]]] = ...) -> None: ...

class SyncGroupRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id", "protocol_type", "protocol_name", "assignments")
    class Assignment(_message.Message):
        __slots__ = ("member_id", "assignment")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        assignment: bytes
        def __init__(self, member_id: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    protocol_type: str
    protocol_name: str
    assignments: _containers.RepeatedCompositeFieldContainer[SyncGroupRequest.Assignment]
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., assignments: _Optional[_Iterable[_Union[SyncGroupRequest.Assignment, _Mapping]]] = ...) -> None: ...

class SyncGroupResponse(_message.Message):
    __slots__ = ("error", "protocol_type", "protocol_name", "assignment")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    protocol_type: str
    protocol_name: str
    assignment: bytes
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...

class LeaveGroupRequest(_message.Message):
    __slots__ = ("group_id", "members")
    class Member(_message.Message):
        __slots__ = ("member_id", "group_instance_id", "reason")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
        REASON_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        group_instance_id: str
        reason: str
        def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    members: _containers.RepeatedCompositeFieldContainer[LeaveGroupRequest.Member]
    def __init__(self, group_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[LeaveGroupRequest.Member, _Mapping]]] = ...) -> None: ...

class LeaveGroupResponse(_message.Message):
    __slots__ = ("error", "members")
    class Member(_message.Message):
        __slots__ = ("member_id", "group_instance_id", "error")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        group_instance_id: str
        error: _errors_pb2.Error
        def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    members: _containers.RepeatedCompositeFieldContainer[LeaveGroupResponse.Member]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., members: _Optional[_Iterable[_Union[LeaveGroupResponse.Member, _Mapping]]] = ...) -> None: ...

class OffsetCommitRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id", "topics")
    class Partition(_message.Message):
        __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_METADATA_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        committed_metadata: str
        def __init__(self, partition_index: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., committed_metadata: _Optional[str] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitRequest.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitRequest.Partition, _Mapping]]] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitRequest.Topic]
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitRequest.Topic, _Mapping]]] = ...) -> None: ...

class OffsetCommitResponse(_message.Message):
    __slots__ = ("topics",)
    class Partition(_message.Message):
        __slots__ = ("partition_index", "error")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error: _errors_pb2.Error
        def __init__(self, partition_index: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitResponse.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitResponse.Partition, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitResponse.Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[OffsetCommitResponse.Topic, _Mapping]]] = ...) -> None: ...

class OffsetFetchRequest(_message.Message):
    __slots__ = ("group_id", "topics", "all_topics", "require_stable")
    class Topic(_message.Message):
        __slots__ = ("name", "partition_indexes")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_indexes: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_STABLE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetFetchRequest.Topic]
    all_topics: bool
    require_stable: bool
    def __init__(self, group_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetFetchRequest.Topic, _Mapping]]] = ..., all_topics: _Optional[bool] = ..., require_stable: _Optional[bool] = ...) -> None: ...

class OffsetFetchResponse(_message.Message):
    __slots__ = ("error", "topics")
    class Partition(_message.Message):
        __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "metadata", "error")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
        COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        METADATA_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        committed_offset: int
        committed_leader_epoch: int
        metadata: str
        error: _errors_pb2.Error
        def __init__(self, partition_index: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., metadata: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetFetchResponse.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetFetchResponse.Partition, _Mapping]]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    topics: _containers.RepeatedCompositeFieldContainer[OffsetFetchResponse.Topic]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[OffsetFetchResponse.Topic, _Mapping]]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ("states_filter", "types_filter")
    STATES_FILTER_FIELD_NUMBER: _ClassVar[int]
    TYPES_FILTER_FIELD_NUMBER: _ClassVar[int]
    states_filter: _containers.RepeatedScalarFieldContainer[str]
    types_filter: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, states_filter: _Optional[_Iterable[str]] = ..., types_filter: _Optional[_Iterable[str]] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("error", "groups")
    class Group(_message.Message):
        __slots__ = ("group_id", "protocol_type", "group_state", "group_type")
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
        GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
        GROUP_TYPE_FIELD_NUMBER: _ClassVar[int]
        group_id: str
        protocol_type: str
        group_state: str
        group_type: str
        def __init__(self, group_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., group_state: _Optional[str] = ..., group_type: _Optional[str] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    groups: _containers.RepeatedCompositeFieldContainer[ListGroupsResponse.Group]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., groups: _Optional[_Iterable[_Union[ListGroupsResponse.Group, _Mapping]]] = ...) -> None: ...

class DescribeGroupsRequest(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, groups: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    class Member(_message.Message):
        __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "member_metadata", "member_assignment")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
        CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
        CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
        MEMBER_METADATA_FIELD_NUMBER: _ClassVar[int]
        MEMBER_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        group_instance_id: str
        client_id: str
        client_host: str
        member_metadata: bytes
        member_assignment: bytes
        def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., member_metadata: _Optional[bytes] = ..., member_assignment: _Optional[bytes] = ...) -> None: ...
    class Group(_message.Message):
        __slots__ = ("error", "group_id", "group_state", "protocol_type", "protocol_data", "members")
        ERROR_FIELD_NUMBER: _ClassVar[int]
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
        PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
        PROTOCOL_DATA_FIELD_NUMBER: _ClassVar[int]
        MEMBERS_FIELD_NUMBER: _ClassVar[int]
        error: _errors_pb2.Error
        group_id: str
        group_state: str
        protocol_type: str
        protocol_data: str
        members: _containers.RepeatedCompositeFieldContainer[DescribeGroupsResponse.Member]
        def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., group_id: _Optional[str] = ..., group_state: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol_data: _Optional[str] = ..., members: _Optional[_Iterable[_Union[DescribeGroupsResponse.Member, _Mapping]]] = ...) -> None: ...
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[DescribeGroupsResponse.Group]
    def __init__(self, groups: _Optional[_Iterable[_Union[DescribeGroupsResponse.Group, _Mapping]]] = ...) -> None: ...

class DeleteGroupsRequest(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, groups: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteGroupsResponse(_message.Message):
    __slots__ = ("results",)
    class Result(_message.Message):
        __slots__ = ("group_id", "error")
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        group_id: str
        error: _errors_pb2.Error
        def __init__(self, group_id: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DeleteGroupsResponse.Result]
    def __init__(self, results: _Optional[_Iterable[_Union[DeleteGroupsResponse.Result, _Mapping]]] = ...) -> None: ...

class OffsetDeleteRequest(_message.Message):
    __slots__ = ("group_id", "topics")
    class Topic(_message.Message):
        __slots__ = ("name", "partition_indexes")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_indexes: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetDeleteRequest.Topic]
    def __init__(self, group_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetDeleteRequest.Topic, _Mapping]]] = ...) -> None: ...

class OffsetDeleteResponse(_message.Message):
    __slots__ = ("error", "topics")
    class Partition(_message.Message):
        __slots__ = ("partition_index", "error")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error: _errors_pb2.Error
        def __init__(self, partition_index: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetDeleteResponse.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetDeleteResponse.Partition, _Mapping]]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    topics: _containers.RepeatedCompositeFieldContainer[OffsetDeleteResponse.Topic]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[OffsetDeleteResponse.Topic, _Mapping]]] = ...) -> None: ...

class TxnOffsetCommitRequest(_message.Message):
    __slots__ = ("transactional_id", "group_id", "producer_id", "producer_epoch", "generation_id", "member_id", "group_instance_id", "topics", "abortable_error")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ABORTABLE_ERROR_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitRequest.Topic]
    abortable_error: bool
    def __init__(self, transactional_id: _Optional[str] = ..., group_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[OffsetCommitRequest.Topic, _Mapping]]] = ..., abortable_error: _Optional[bool] = ...) -> None: ...

class TxnOffsetCommitResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[OffsetCommitResponse.Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[OffsetCommitResponse.Topic, _Mapping]]] = ...) -> None: ...

class GroupTopicPartitions(_message.Message):
    __slots__ = ("topic_id", "partitions", "topic_name")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    topic_name: str
    def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ..., topic_name: _Optional[str] = ...) -> None: ...

class TopicAssignment(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[GroupTopicPartitions]
    def __init__(self, topics: _Optional[_Iterable[_Union[GroupTopicPartitions, _Mapping]]] = ...) -> None: ...

class TopicNames(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class ConsumerGroupHeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "instance_id", "rack_id", "rebalance_timeout_ms", "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "topic_partitions", "client_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
    SERVER_ASSIGNOR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str
    rack_id: str
    rebalance_timeout_ms: int
    subscribed_topic_names: TopicNames
    subscribed_topic_regex: str
    server_assignor: str
    topic_partitions: TopicAssignment
    client_id: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., instance_id: _Optional[str] = ..., rack_id: _Optional[str] = ..., rebalance_timeout_ms: _Optional[int] = ..., subscribed_topic_names: _Optional[_Union[TopicNames, _Mapping]] = ..., subscribed_topic_regex: _Optional[str] = ..., server_assignor: _Optional[str] = ..., topic_partitions: _Optional[_Union[TopicAssignment, _Mapping]] = ..., client_id: _Optional[str] = ...) -> None: ...

class ConsumerGroupHeartbeatResponse(_message.Message):
    __slots__ = ("error", "member_id", "member_epoch", "heartbeat_interval_ms", "assignment")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: TopicAssignment
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., assignment: _Optional[_Union[TopicAssignment, _Mapping]] = ...) -> None: ...

class ConsumerGroupDescribeRequest(_message.Message):
    __slots__ = ("group_ids",)
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    group_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ConsumerGroupDescribeResponse(_message.Message):
    __slots__ = ("groups",)
    class Member(_message.Message):
        __slots__ = ("member_id", "instance_id", "rack_id", "member_epoch", "client_id", "client_host", "subscribed_topic_names", "subscribed_topic_regex", "assignment", "target_assignment")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
        RACK_ID_FIELD_NUMBER: _ClassVar[int]
        MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
        CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
        SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
        SUBSCRIBED_TOPIC_REGEX_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
        TARGET_ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        instance_id: str
        rack_id: str
        member_epoch: int
        client_id: str
        client_host: str
        subscribed_topic_names: _containers.RepeatedScalarFieldContainer[str]
        subscribed_topic_regex: str
        assignment: TopicAssignment
        target_assignment: TopicAssignment
        def __init__(self, member_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., rack_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., subscribed_topic_names: _Optional[_Iterable[str]] = ..., subscribed_topic_regex: _Optional[str] = ..., assignment: _Optional[_Union[TopicAssignment, _Mapping]] = ..., target_assignment: _Optional[_Union[TopicAssignment, _Mapping]] = ...) -> None: ...
    class Group(_message.Message):
        __slots__ = ("error", "group_id", "group_state", "group_epoch", "assignment_epoch", "assignor_name", "members")
        ERROR_FIELD_NUMBER: _ClassVar[int]
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
        GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ASSIGNOR_NAME_FIELD_NUMBER: _ClassVar[int]
        MEMBERS_FIELD_NUMBER: _ClassVar[int]
        error: _errors_pb2.Error
        group_id: str
        group_state: str
        group_epoch: int
        assignment_epoch: int
        assignor_name: str
        members: _containers.RepeatedCompositeFieldContainer[ConsumerGroupDescribeResponse.Member]
        def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., group_id: _Optional[str] = ..., group_state: _Optional[str] = ..., group_epoch: _Optional[int] = ..., assignment_epoch: _Optional[int] = ..., assignor_name: _Optional[str] = ..., members: _Optional[_Iterable[_Union[ConsumerGroupDescribeResponse.Member, _Mapping]]] = ...) -> None: ...
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[ConsumerGroupDescribeResponse.Group]
    def __init__(self, groups: _Optional[_Iterable[_Union[ConsumerGroupDescribeResponse.Group, _Mapping]]] = ...) -> None: ...

class ShareGroupHeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "member_epoch", "rack_id", "subscribed_topic_names", "client_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str
    subscribed_topic_names: TopicNames
    client_id: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., rack_id: _Optional[str] = ..., subscribed_topic_names: _Optional[_Union[TopicNames, _Mapping]] = ..., client_id: _Optional[str] = ...) -> None: ...

class ShareGroupHeartbeatResponse(_message.Message):
    __slots__ = ("error", "member_id", "member_epoch", "heartbeat_interval_ms", "assignment")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: TopicAssignment
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., assignment: _Optional[_Union[TopicAssignment, _Mapping]] = ...) -> None: ...

class ShareGroupDescribeRequest(_message.Message):
    __slots__ = ("group_ids",)
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    group_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ShareGroupDescribeResponse(_message.Message):
    __slots__ = ("groups",)
    class Member(_message.Message):
        __slots__ = ("member_id", "rack_id", "member_epoch", "client_id", "client_host", "subscribed_topic_names", "assignment")
        MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
        RACK_ID_FIELD_NUMBER: _ClassVar[int]
        MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
        CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
        SUBSCRIBED_TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
        member_id: str
        rack_id: str
        member_epoch: int
        client_id: str
        client_host: str
        subscribed_topic_names: _containers.RepeatedScalarFieldContainer[str]
        assignment: TopicAssignment
        def __init__(self, member_id: _Optional[str] = ..., rack_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., client_id: _Optional[str] = ..., client_host: _Optional[str] = ..., subscribed_topic_names: _Optional[_Iterable[str]] = ..., assignment: _Optional[_Union[TopicAssignment, _Mapping]] = ...) -> None: ...
    class Group(_message.Message):
        __slots__ = ("error", "group_id", "group_state", "group_epoch", "assignment_epoch", "assignor_name", "members")
        ERROR_FIELD_NUMBER: _ClassVar[int]
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        GROUP_STATE_FIELD_NUMBER: _ClassVar[int]
        GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENT_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ASSIGNOR_NAME_FIELD_NUMBER: _ClassVar[int]
        MEMBERS_FIELD_NUMBER: _ClassVar[int]
        error: _errors_pb2.Error
        group_id: str
        group_state: str
        group_epoch: int
        assignment_epoch: int
        assignor_name: str
        members: _containers.RepeatedCompositeFieldContainer[ShareGroupDescribeResponse.Member]
        def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., group_id: _Optional[str] = ..., group_state: _Optional[str] = ..., group_epoch: _Optional[int] = ..., assignment_epoch: _Optional[int] = ..., assignor_name: _Optional[str] = ..., members: _Optional[_Iterable[_Union[ShareGroupDescribeResponse.Member, _Mapping]]] = ...) -> None: ...
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[ShareGroupDescribeResponse.Group]
    def __init__(self, groups: _Optional[_Iterable[_Union[ShareGroupDescribeResponse.Group, _Mapping]]] = ...) -> None: ...

class DescribeShareGroupOffsetsRequest(_message.Message):
    __slots__ = ("groups",)
    class Topic(_message.Message):
        __slots__ = ("topic_name", "partitions")
        TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_name: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic_name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    class Group(_message.Message):
        __slots__ = ("group_id", "all_topics", "topics")
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        group_id: str
        all_topics: bool
        topics: _containers.RepeatedCompositeFieldContainer[DescribeShareGroupOffsetsRequest.Topic]
        def __init__(self, group_id: _Optional[str] = ..., all_topics: _Optional[bool] = ..., topics: _Optional[_Iterable[_Union[DescribeShareGroupOffsetsRequest.Topic, _Mapping]]] = ...) -> None: ...
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[DescribeShareGroupOffsetsRequest.Group]
    def __init__(self, groups: _Optional[_Iterable[_Union[DescribeShareGroupOffsetsRequest.Group, _Mapping]]] = ...) -> None: ...

class DescribeShareGroupOffsetsResponse(_message.Message):
    __slots__ = ("groups",)
    class Partition(_message.Message):
        __slots__ = ("partition", "start_offset", "leader_epoch", "lag", "error")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LAG_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        partition: int
        start_offset: int
        leader_epoch: int
        lag: int
        error: _errors_pb2.Error
        def __init__(self, partition: _Optional[int] = ..., start_offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., lag: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("topic_name", "topic_id", "partitions")
        TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_name: str
        topic_id: str
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeShareGroupOffsetsResponse.Partition]
        def __init__(self, topic_name: _Optional[str] = ..., topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DescribeShareGroupOffsetsResponse.Partition, _Mapping]]] = ...) -> None: ...
    class Group(_message.Message):
        __slots__ = ("group_id", "error", "topics")
        GROUP_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        group_id: str
        error: _errors_pb2.Error
        topics: _containers.RepeatedCompositeFieldContainer[DescribeShareGroupOffsetsResponse.Topic]
        def __init__(self, group_id: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[DescribeShareGroupOffsetsResponse.Topic, _Mapping]]] = ...) -> None: ...
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[DescribeShareGroupOffsetsResponse.Group]
    def __init__(self, groups: _Optional[_Iterable[_Union[DescribeShareGroupOffsetsResponse.Group, _Mapping]]] = ...) -> None: ...

class AlterShareGroupOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "topics")
    class Partition(_message.Message):
        __slots__ = ("partition", "start_offset")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        partition: int
        start_offset: int
        def __init__(self, partition: _Optional[int] = ..., start_offset: _Optional[int] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("topic_name", "partitions")
        TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_name: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterShareGroupOffsetsRequest.Partition]
        def __init__(self, topic_name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterShareGroupOffsetsRequest.Partition, _Mapping]]] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topics: _containers.RepeatedCompositeFieldContainer[AlterShareGroupOffsetsRequest.Topic]
    def __init__(self, group_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[AlterShareGroupOffsetsRequest.Topic, _Mapping]]] = ...) -> None: ...

class AlterShareGroupOffsetsResponse(_message.Message):
    __slots__ = ("error", "topics")
    class Partition(_message.Message):
        __slots__ = ("partition", "error")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        partition: int
        error: _errors_pb2.Error
        def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("topic_name", "topic_id", "partitions")
        TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_name: str
        topic_id: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterShareGroupOffsetsResponse.Partition]
        def __init__(self, topic_name: _Optional[str] = ..., topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterShareGroupOffsetsResponse.Partition, _Mapping]]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    topics: _containers.RepeatedCompositeFieldContainer[AlterShareGroupOffsetsResponse.Topic]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[AlterShareGroupOffsetsResponse.Topic, _Mapping]]] = ...) -> None: ...

class DeleteShareGroupOffsetsRequest(_message.Message):
    __slots__ = ("group_id", "topic_names")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_NAMES_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topic_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group_id: _Optional[str] = ..., topic_names: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteShareGroupOffsetsResponse(_message.Message):
    __slots__ = ("error", "topics")
    class Topic(_message.Message):
        __slots__ = ("topic_name", "topic_id", "error")
        TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        topic_name: str
        topic_id: str
        error: _errors_pb2.Error
        def __init__(self, topic_name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    topics: _containers.RepeatedCompositeFieldContainer[DeleteShareGroupOffsetsResponse.Topic]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[DeleteShareGroupOffsetsResponse.Topic, _Mapping]]] = ...) -> None: ...
