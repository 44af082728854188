from kraftlog.proto import errors_pb2 as _errors_pb2
from kraftlog.proto import controller_pb2 as _controller_pb2
from kraftlog.proto import security_pb2 as _security_pb2
from kraftlog.proto import quotas_pb2 as _quotas_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicaAssignment(_message.Message):
    __slots__ = ("partition_index", "broker_ids")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    broker_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition_index: _Optional[int] = ..., broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    class CreatableTopic(_message.Message):
        __slots__ = ("name", "num_partitions", "replication_factor", "assignments", "configs")
        class ConfigsEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        NAME_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        name: str
        num_partitions: int
        replication_factor: int
        assignments: _containers.RepeatedCompositeFieldContainer[ReplicaAssignment]
        configs: _containers.ScalarMap[str, str]
        def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[ReplicaAssignment, _Mapping]]] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.CreatableTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreateTopicsRequest.CreatableTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("topics", "controller", "error", "throttle_time_ms")
    class Result(_message.Message):
        __slots__ = ("name", "topic_id", "error", "num_partitions", "replication_factor")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        name: str
        topic_id: str
        error: _errors_pb2.Error
        num_partitions: int
        replication_factor: int
        def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsResponse.Result]
    controller: _controller_pb2.ControllerHint
    error: _errors_pb2.Error
    throttle_time_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[CreateTopicsResponse.Result, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names", "topic_ids", "timeout_ms")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    TOPIC_IDS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    topic_ids: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., topic_ids: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("topics", "controller", "error", "throttle_time_ms")
    class Result(_message.Message):
        __slots__ = ("name", "topic_id", "error")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        name: str
        topic_id: str
        error: _errors_pb2.Error
        def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DeleteTopicsResponse.Result]
    controller: _controller_pb2.ControllerHint
    error: _errors_pb2.Error
    throttle_time_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[DeleteTopicsResponse.Result, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    class Topic(_message.Message):
        __slots__ = ("name", "count", "assignments")
        NAME_FIELD_NUMBER: _ClassVar[int]
        COUNT_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
        name: str
        count: int
        assignments: _containers.RepeatedCompositeFieldContainer[ReplicaAssignment]
        def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[ReplicaAssignment, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsRequest.Topic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatePartitionsRequest.Topic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("results", "controller", "error", "throttle_time_ms")
    class Result(_message.Message):
        __slots__ = ("name", "error")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        name: str
        error: _errors_pb2.Error
        def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CreatePartitionsResponse.Result]
    controller: _controller_pb2.ControllerHint
    error: _errors_pb2.Error
    throttle_time_ms: int
    def __init__(self, results: _Optional[_Iterable[_Union[CreatePartitionsResponse.Result, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class TopicPartitions(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "topic_partitions", "timeout_ms")
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    election_type: int
    topic_partitions: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    timeout_ms: int
    def __init__(self, election_type: _Optional[int] = ..., topic_partitions: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("error", "results", "controller")
    class PartitionResult(_message.Message):
        __slots__ = ("topic", "partition", "error")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        error: _errors_pb2.Error
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    results: _containers.RepeatedCompositeFieldContainer[ElectLeadersResponse.PartitionResult]
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., results: _Optional[_Iterable[_Union[ElectLeadersResponse.PartitionResult, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms")
    class Partition(_message.Message):
        __slots__ = ("partition_index", "replicas", "cancel")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        CANCEL_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        cancel: bool
        def __init__(self, partition_index: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., cancel: _Optional[bool] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsRequest.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionReassignmentsRequest.Partition, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsRequest.Topic]
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[AlterPartitionReassignmentsRequest.Topic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error", "results", "controller")
    class PartitionResult(_message.Message):
        __slots__ = ("topic", "partition", "error")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        error: _errors_pb2.Error
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    results: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsResponse.PartitionResult]
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AlterPartitionReassignmentsResponse.PartitionResult, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicPartitions]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicPartitions, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error", "reassignments", "controller")
    class Ongoing(_message.Message):
        __slots__ = ("topic", "partition", "replicas", "adding_replicas", "removing_replicas")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        adding_replicas: _containers.RepeatedScalarFieldContainer[int]
        removing_replicas: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    reassignments: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsResponse.Ongoing]
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., reassignments: _Optional[_Iterable[_Union[ListPartitionReassignmentsResponse.Ongoing, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class ConfigResource(_message.Message):
    __slots__ = ("resource_type", "resource_name")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources", "include_synonyms", "include_documentation", "broker_id")
    class Resource(_message.Message):
        __slots__ = ("resource", "config_names")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        CONFIG_NAMES_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        config_names: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., config_names: _Optional[_Iterable[str]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SYNONYMS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DOCUMENTATION_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[DescribeConfigsRequest.Resource]
    include_synonyms: bool
    include_documentation: bool
    broker_id: int
    def __init__(self, resources: _Optional[_Iterable[_Union[DescribeConfigsRequest.Resource, _Mapping]]] = ..., include_synonyms: _Optional[bool] = ..., include_documentation: _Optional[bool] = ..., broker_id: _Optional[int] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("results", "controller", "error")
    class Entry(_message.Message):
        __slots__ = ("name", "value", "has_value", "read_only", "is_default", "source", "is_sensitive", "synonyms", "config_type", "documentation")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        HAS_VALUE_FIELD_NUMBER: _ClassVar[int]
        READ_ONLY_FIELD_NUMBER: _ClassVar[int]
        IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        IS_SENSITIVE_FIELD_NUMBER: _ClassVar[int]
        SYNONYMS_FIELD_NUMBER: _ClassVar[int]
        CONFIG_TYPE_FIELD_NUMBER: _ClassVar[int]
        DOCUMENTATION_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        has_value: bool
        read_only: bool
        is_default: bool
        source: str
        is_sensitive: bool
        synonyms: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Synonym]
        config_type: str
        documentation: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., has_value: _Optional[bool] = ..., read_only: _Optional[bool] = ..., is_default: _Optional[bool] = ..., source: _Optional[str] = ..., is_sensitive: _Optional[bool] = ..., synonyms: _Optional[_Iterable[_Union[DescribeConfigsResponse.Synonym, _Mapping]]] = ..., config_type: _Optional[str] = ..., documentation: _Optional[str] = ...) -> None: ...
    class Synonym(_message.Message):
        __slots__ = ("name", "value", "has_value", "source")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        HAS_VALUE_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        has_value: bool
        source: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., has_value: _Optional[bool] = ..., source: _Optional[str] = ...) -> None: ...
    class Result(_message.Message):
        __slots__ = ("resource", "error", "configs")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        error: _errors_pb2.Error
        configs: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Entry]
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., configs: _Optional[_Iterable[_Union[DescribeConfigsResponse.Entry, _Mapping]]] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.Result]
    controller: _controller_pb2.ControllerHint
    error: _errors_pb2.Error
    def __init__(self, results: _Optional[_Iterable[_Union[DescribeConfigsResponse.Result, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...

class IncrementalAlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only")
    class Op(_message.Message):
        __slots__ = ("name", "op", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        OP_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        op: int
        value: str
        def __init__(self, name: _Optional[str] = ..., op: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    class Resource(_message.Message):
        __slots__ = ("resource", "configs")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        configs: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.Op]
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., configs: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.Op, _Mapping]]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.Resource]
    validate_only: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.Resource, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class IncrementalAlterConfigsResponse(_message.Message):
    __slots__ = ("results", "controller", "error")
    class Result(_message.Message):
        __slots__ = ("resource", "error")
        RESOURCE_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        resource: ConfigResource
        error: _errors_pb2.Error
        def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsResponse.Result]
    controller: _controller_pb2.ControllerHint
    error: _errors_pb2.Error
    def __init__(self, results: _Optional[_Iterable[_Union[IncrementalAlterConfigsResponse.Result, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("error", "cluster_id", "controller_id", "brokers", "controller")
    class Broker(_message.Message):
        __slots__ = ("broker_id", "host", "port", "rack", "fenced", "in_controlled_shutdown", "broker_epoch", "registration_timestamp_ms", "security_protocol")
        BROKER_ID_FIELD_NUMBER: _ClassVar[int]
        HOST_FIELD_NUMBER: _ClassVar[int]
        PORT_FIELD_NUMBER: _ClassVar[int]
        RACK_FIELD_NUMBER: _ClassVar[int]
        FENCED_FIELD_NUMBER: _ClassVar[int]
        IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
        BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        REGISTRATION_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
        SECURITY_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
        broker_id: int
        host: str
        port: int
        rack: str
        fenced: bool
        in_controlled_shutdown: bool
        broker_epoch: int
        registration_timestamp_ms: int
        security_protocol: str
        def __init__(self, broker_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ..., fenced: _Optional[bool] = ..., in_controlled_shutdown: _Optional[bool] = ..., broker_epoch: _Optional[int] = ..., registration_timestamp_ms: _Optional[int] = ..., security_protocol: _Optional[str] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    cluster_id: str
    controller_id: int
    brokers: _containers.RepeatedCompositeFieldContainer[DescribeClusterResponse.Broker]
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[DescribeClusterResponse.Broker, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("error", "leader_id", "leader_epoch", "high_watermark", "voters", "observers", "controller", "kraft_version")
    class Replica(_message.Message):
        __slots__ = ("replica_id", "log_end_offset", "last_fetch_timestamp_ms", "last_caught_up_timestamp_ms", "replica_directory_id", "endpoint")
        REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
        LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LAST_FETCH_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
        LAST_CAUGHT_UP_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
        REPLICA_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
        ENDPOINT_FIELD_NUMBER: _ClassVar[int]
        replica_id: int
        log_end_offset: int
        last_fetch_timestamp_ms: int
        last_caught_up_timestamp_ms: int
        replica_directory_id: str
        endpoint: str
        def __init__(self, replica_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., last_fetch_timestamp_ms: _Optional[int] = ..., last_caught_up_timestamp_ms: _Optional[int] = ..., replica_directory_id: _Optional[str] = ..., endpoint: _Optional[str] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    KRAFT_VERSION_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: _containers.RepeatedCompositeFieldContainer[DescribeQuorumResponse.Replica]
    observers: _containers.RepeatedCompositeFieldContainer[DescribeQuorumResponse.Replica]
    controller: _controller_pb2.ControllerHint
    kraft_version: int
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., voters: _Optional[_Iterable[_Union[DescribeQuorumResponse.Replica, _Mapping]]] = ..., observers: _Optional[_Iterable[_Union[DescribeQuorumResponse.Replica, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ..., kraft_version: _Optional[int] = ...) -> None: ...

class AddRaftVoterRequest(_message.Message):
    __slots__ = ("voter_id", "voter_directory_id", "host", "port", "timeout_ms")
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    voter_id: int
    voter_directory_id: str
    host: str
    port: int
    timeout_ms: int
    def __init__(self, voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AddRaftVoterResponse(_message.Message):
    __slots__ = ("error", "controller")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class RemoveRaftVoterRequest(_message.Message):
    __slots__ = ("voter_id", "voter_directory_id")
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    voter_id: int
    voter_directory_id: str
    def __init__(self, voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ...) -> None: ...

class RemoveRaftVoterResponse(_message.Message):
    __slots__ = ("error", "controller")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class UpdateRaftVoterRequest(_message.Message):
    __slots__ = ("voter_id", "voter_directory_id", "host", "port", "kraft_version_min", "kraft_version_max", "current_leader_epoch")
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    KRAFT_VERSION_MIN_FIELD_NUMBER: _ClassVar[int]
    KRAFT_VERSION_MAX_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    voter_id: int
    voter_directory_id: str
    host: str
    port: int
    kraft_version_min: int
    kraft_version_max: int
    current_leader_epoch: int
    def __init__(self, voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., kraft_version_min: _Optional[int] = ..., kraft_version_max: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ...) -> None: ...

class UpdateRaftVoterResponse(_message.Message):
    __slots__ = ("error", "controller")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("topics", "controller", "error")
    class Partition(_message.Message):
        __slots__ = ("partition_index", "leader_id", "leader_epoch", "partition_epoch", "replicas", "isr", "offline_replicas", "adding_replicas", "removing_replicas", "controller_epoch", "eligible_leader_replicas", "last_known_elr")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LEADER_ID_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ISR_FIELD_NUMBER: _ClassVar[int]
        OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        leader_id: int
        leader_epoch: int
        partition_epoch: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        isr: _containers.RepeatedScalarFieldContainer[int]
        offline_replicas: _containers.RepeatedScalarFieldContainer[int]
        adding_replicas: _containers.RepeatedScalarFieldContainer[int]
        removing_replicas: _containers.RepeatedScalarFieldContainer[int]
        controller_epoch: int
        eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
        last_known_elr: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, partition_index: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., offline_replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., controller_epoch: _Optional[int] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., last_known_elr: _Optional[_Iterable[int]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "topic_id", "error", "partitions", "configs")
        class ConfigsEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: str
            def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
        NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        name: str
        topic_id: str
        error: _errors_pb2.Error
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeTopicsResponse.Partition]
        configs: _containers.ScalarMap[str, str]
        def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[DescribeTopicsResponse.Partition, _Mapping]]] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeTopicsResponse.Topic]
    controller: _controller_pb2.ControllerHint
    error: _errors_pb2.Error
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeTopicsResponse.Topic, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...

class DescribeFeaturesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeFeaturesResponse(_message.Message):
    __slots__ = ("error", "finalized", "supported", "finalized_epoch", "controller")
    class Finalized(_message.Message):
        __slots__ = ("name", "level")
        NAME_FIELD_NUMBER: _ClassVar[int]
        LEVEL_FIELD_NUMBER: _ClassVar[int]
        name: str
        level: int
        def __init__(self, name: _Optional[str] = ..., level: _Optional[int] = ...) -> None: ...
    class Supported(_message.Message):
        __slots__ = ("name", "min_version", "max_version")
        NAME_FIELD_NUMBER: _ClassVar[int]
        MIN_VERSION_FIELD_NUMBER: _ClassVar[int]
        MAX_VERSION_FIELD_NUMBER: _ClassVar[int]
        name: str
        min_version: int
        max_version: int
        def __init__(self, name: _Optional[str] = ..., min_version: _Optional[int] = ..., max_version: _Optional[int] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINALIZED_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_FIELD_NUMBER: _ClassVar[int]
    FINALIZED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    finalized: _containers.RepeatedCompositeFieldContainer[DescribeFeaturesResponse.Finalized]
    supported: _containers.RepeatedCompositeFieldContainer[DescribeFeaturesResponse.Supported]
    finalized_epoch: int
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., finalized: _Optional[_Iterable[_Union[DescribeFeaturesResponse.Finalized, _Mapping]]] = ..., supported: _Optional[_Iterable[_Union[DescribeFeaturesResponse.Supported, _Mapping]]] = ..., finalized_epoch: _Optional[int] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class UpdateFeaturesRequest(_message.Message):
    __slots__ = ("updates", "validate_only", "timeout_ms")
    class FeatureUpdate(_message.Message):
        __slots__ = ("feature", "max_version_level", "upgrade_type")
        FEATURE_FIELD_NUMBER: _ClassVar[int]
        MAX_VERSION_LEVEL_FIELD_NUMBER: _ClassVar[int]
        UPGRADE_TYPE_FIELD_NUMBER: _ClassVar[int]
        feature: str
        max_version_level: int
        upgrade_type: int
        def __init__(self, feature: _Optional[str] = ..., max_version_level: _Optional[int] = ..., upgrade_type: _Optional[int] = ...) -> None: ...
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[UpdateFeaturesRequest.FeatureUpdate]
    validate_only: bool
    timeout_ms: int
    def __init__(self, updates: _Optional[_Iterable[_Union[UpdateFeaturesRequest.FeatureUpdate, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class UpdateFeaturesResponse(_message.Message):
    __slots__ = ("error", "results", "controller")
    class Result(_message.Message):
        __slots__ = ("feature", "error")
        FEATURE_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        feature: str
        error: _errors_pb2.Error
        def __init__(self, feature: _Optional[str] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    results: _containers.RepeatedCompositeFieldContainer[UpdateFeaturesResponse.Result]
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., results: _Optional[_Iterable[_Union[UpdateFeaturesResponse.Result, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class CreateMetadataSnapshotRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateMetadataSnapshotResponse(_message.Message):
    __slots__ = ("error", "node_id", "snapshot_offset", "snapshot_epoch", "path")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    node_id: int
    snapshot_offset: int
    snapshot_epoch: int
    path: str
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., node_id: _Optional[int] = ..., snapshot_offset: _Optional[int] = ..., snapshot_epoch: _Optional[int] = ..., path: _Optional[str] = ...) -> None: ...

class DescribeMetadataTreeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeMetadataTreeResponse(_message.Message):
    __slots__ = ("error", "offset", "epoch", "timestamp_ms", "nodes", "omitted", "controller")
    class Node(_message.Message):
        __slots__ = ("path", "data_json")
        PATH_FIELD_NUMBER: _ClassVar[int]
        DATA_JSON_FIELD_NUMBER: _ClassVar[int]
        path: str
        data_json: str
        def __init__(self, path: _Optional[str] = ..., data_json: _Optional[str] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    OMITTED_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    offset: int
    epoch: int
    timestamp_ms: int
    nodes: _containers.RepeatedCompositeFieldContainer[DescribeMetadataTreeResponse.Node]
    omitted: _containers.RepeatedScalarFieldContainer[str]
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., offset: _Optional[int] = ..., epoch: _Optional[int] = ..., timestamp_ms: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[DescribeMetadataTreeResponse.Node, _Mapping]]] = ..., omitted: _Optional[_Iterable[str]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...
