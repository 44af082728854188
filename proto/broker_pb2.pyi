from kraftlog.proto import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeEndpoint(_message.Message):
    __slots__ = ("node_id", "host", "port", "rack")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    host: str
    port: int
    rack: str
    def __init__(self, node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ...) -> None: ...

class LeaderIdAndEpoch(_message.Message):
    __slots__ = ("leader_id", "leader_epoch")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    leader_epoch: int
    def __init__(self, leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("acks", "timeout_ms", "transactional_id", "topics", "add_partitions", "abortable_error")
    class PartitionData(_message.Message):
        __slots__ = ("index", "records")
        INDEX_FIELD_NUMBER: _ClassVar[int]
        RECORDS_FIELD_NUMBER: _ClassVar[int]
        index: int
        records: bytes
        def __init__(self, index: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...
    class TopicData(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ProduceRequest.PartitionData]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ProduceRequest.PartitionData, _Mapping]]] = ...) -> None: ...
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ADD_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ABORTABLE_ERROR_FIELD_NUMBER: _ClassVar[int]
    acks: int
    timeout_ms: int
    transactional_id: str
    topics: _containers.RepeatedCompositeFieldContainer[ProduceRequest.TopicData]
    add_partitions: bool
    abortable_error: bool
    def __init__(self, acks: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., transactional_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[ProduceRequest.TopicData, _Mapping]]] = ..., add_partitions: _Optional[bool] = ..., abortable_error: _Optional[bool] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("topics", "throttle_time_ms", "node_endpoints", "error")
    class RecordError(_message.Message):
        __slots__ = ("batch_index", "message")
        BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
        MESSAGE_FIELD_NUMBER: _ClassVar[int]
        batch_index: int
        message: str
        def __init__(self, batch_index: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...
    class PartitionResponse(_message.Message):
        __slots__ = ("index", "error", "base_offset", "log_append_time_ms", "log_start_offset", "record_errors", "current_leader")
        INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LOG_APPEND_TIME_MS_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        RECORD_ERRORS_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
        index: int
        error: _errors_pb2.Error
        base_offset: int
        log_append_time_ms: int
        log_start_offset: int
        record_errors: _containers.RepeatedCompositeFieldContainer[ProduceResponse.RecordError]
        current_leader: LeaderIdAndEpoch
        def __init__(self, index: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., base_offset: _Optional[int] = ..., log_append_time_ms: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., record_errors: _Optional[_Iterable[_Union[ProduceResponse.RecordError, _Mapping]]] = ..., current_leader: _Optional[_Union[LeaderIdAndEpoch, _Mapping]] = ...) -> None: ...
    class TopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ProduceResponse.PartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ProduceResponse.PartitionResponse, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    NODE_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[ProduceResponse.TopicResponse]
    throttle_time_ms: int
    node_endpoints: _containers.RepeatedCompositeFieldContainer[NodeEndpoint]
    error: _errors_pb2.Error
    def __init__(self, topics: _Optional[_Iterable[_Union[ProduceResponse.TopicResponse, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ..., node_endpoints: _Optional[_Iterable[_Union[NodeEndpoint, _Mapping]]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "replica_epoch", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "topics", "rack_id", "fetch_from_follower")
    class FetchPartition(_message.Message):
        __slots__ = ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch", "log_start_offset", "partition_max_bytes")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        PARTITION_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
        partition: int
        current_leader_epoch: int
        fetch_offset: int
        last_fetched_epoch: int
        log_start_offset: int
        partition_max_bytes: int
        def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., partition_max_bytes: _Optional[int] = ...) -> None: ...
    class FetchTopic(_message.Message):
        __slots__ = ("topic", "partitions", "topic_id")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedCompositeFieldContainer[FetchRequest.FetchPartition]
        topic_id: str
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchRequest.FetchPartition, _Mapping]]] = ..., topic_id: _Optional[str] = ...) -> None: ...
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    FETCH_FROM_FOLLOWER_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    replica_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    topics: _containers.RepeatedCompositeFieldContainer[FetchRequest.FetchTopic]
    rack_id: str
    fetch_from_follower: bool
    def __init__(self, replica_id: _Optional[int] = ..., replica_epoch: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., isolation_level: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[FetchRequest.FetchTopic, _Mapping]]] = ..., rack_id: _Optional[str] = ..., fetch_from_follower: _Optional[bool] = ...) -> None: ...

class EpochEndOffset(_message.Message):
    __slots__ = ("epoch", "end_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    end_offset: int
    def __init__(self, epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class AbortedTransaction(_message.Message):
    __slots__ = ("producer_id", "first_offset")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    first_offset: int
    def __init__(self, producer_id: _Optional[int] = ..., first_offset: _Optional[int] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("error", "throttle_time_ms", "responses", "node_endpoints")
    class PartitionData(_message.Message):
        __slots__ = ("partition_index", "error", "high_watermark", "last_stable_offset", "log_start_offset", "diverging_epoch", "current_leader", "aborted_transactions", "preferred_read_replica", "records")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
        LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
        ABORTED_TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
        PREFERRED_READ_REPLICA_FIELD_NUMBER: _ClassVar[int]
        RECORDS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error: _errors_pb2.Error
        high_watermark: int
        last_stable_offset: int
        log_start_offset: int
        diverging_epoch: EpochEndOffset
        current_leader: LeaderIdAndEpoch
        aborted_transactions: _containers.RepeatedCompositeFieldContainer[AbortedTransaction]
        preferred_read_replica: int
        records: bytes
        def __init__(self, partition_index: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., diverging_epoch: _Optional[_Union[EpochEndOffset, _Mapping]] = ..., current_leader: _Optional[_Union[LeaderIdAndEpoch, _Mapping]] = ..., aborted_transactions: _Optional[_Iterable[_Union[AbortedTransaction, _Mapping]]] = ..., preferred_read_replica: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...
    class FetchableTopicResponse(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedCompositeFieldContainer[FetchResponse.PartitionData]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchResponse.PartitionData, _Mapping]]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    NODE_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    throttle_time_ms: int
    responses: _containers.RepeatedCompositeFieldContainer[FetchResponse.FetchableTopicResponse]
    node_endpoints: _containers.RepeatedCompositeFieldContainer[NodeEndpoint]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., throttle_time_ms: _Optional[int] = ..., responses: _Optional[_Iterable[_Union[FetchResponse.FetchableTopicResponse, _Mapping]]] = ..., node_endpoints: _Optional[_Iterable[_Union[NodeEndpoint, _Mapping]]] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("replica_id", "isolation_level", "topics")
    class Partition(_message.Message):
        __slots__ = ("partition_index", "current_leader_epoch", "timestamp")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        current_leader_epoch: int
        timestamp: int
        def __init__(self, partition_index: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsRequest.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsRequest.Partition, _Mapping]]] = ...) -> None: ...
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    isolation_level: int
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsRequest.Topic]
    def __init__(self, replica_id: _Optional[int] = ..., isolation_level: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ListOffsetsRequest.Topic, _Mapping]]] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("topics",)
    class Partition(_message.Message):
        __slots__ = ("partition_index", "error", "timestamp", "offset", "leader_epoch")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
        OFFSET_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error: _errors_pb2.Error
        timestamp: int
        offset: int
        leader_epoch: int
        def __init__(self, partition_index: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., timestamp: _Optional[int] = ..., offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsResponse.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsResponse.Partition, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsResponse.Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[ListOffsetsResponse.Topic, _Mapping]]] = ...) -> None: ...

class OffsetForLeaderEpochRequest(_message.Message):
    __slots__ = ("replica_id", "topics")
    class Partition(_message.Message):
        __slots__ = ("partition", "current_leader_epoch", "leader_epoch")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        partition: int
        current_leader_epoch: int
        leader_epoch: int
        def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderEpochRequest.Partition]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetForLeaderEpochRequest.Partition, _Mapping]]] = ...) -> None: ...
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    topics: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderEpochRequest.Topic]
    def __init__(self, replica_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[OffsetForLeaderEpochRequest.Topic, _Mapping]]] = ...) -> None: ...

class OffsetForLeaderEpochResponse(_message.Message):
    __slots__ = ("topics",)
    class Partition(_message.Message):
        __slots__ = ("partition", "error", "leader_epoch", "end_offset")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        partition: int
        error: _errors_pb2.Error
        leader_epoch: int
        end_offset: int
        def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., leader_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderEpochResponse.Partition]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetForLeaderEpochResponse.Partition, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderEpochResponse.Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[OffsetForLeaderEpochResponse.Topic, _Mapping]]] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ("topics", "all_topics", "allow_auto_topic_creation")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_AUTO_TOPIC_CREATION_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    all_topics: bool
    allow_auto_topic_creation: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., all_topics: _Optional[bool] = ..., allow_auto_topic_creation: _Optional[bool] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("brokers", "cluster_id", "controller_id", "topics")
    class Partition(_message.Message):
        __slots__ = ("error", "partition_index", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes", "offline_replicas")
        ERROR_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LEADER_ID_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        REPLICA_NODES_FIELD_NUMBER: _ClassVar[int]
        ISR_NODES_FIELD_NUMBER: _ClassVar[int]
        OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        error: _errors_pb2.Error
        partition_index: int
        leader_id: int
        leader_epoch: int
        replica_nodes: _containers.RepeatedScalarFieldContainer[int]
        isr_nodes: _containers.RepeatedScalarFieldContainer[int]
        offline_replicas: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., partition_index: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replica_nodes: _Optional[_Iterable[int]] = ..., isr_nodes: _Optional[_Iterable[int]] = ..., offline_replicas: _Optional[_Iterable[int]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("error", "name", "topic_id", "is_internal", "partitions")
        ERROR_FIELD_NUMBER: _ClassVar[int]
        NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        IS_INTERNAL_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        error: _errors_pb2.Error
        name: str
        topic_id: str
        is_internal: bool
        partitions: _containers.RepeatedCompositeFieldContainer[MetadataResponse.Partition]
        def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., name: _Optional[str] = ..., topic_id: _Optional[str] = ..., is_internal: _Optional[bool] = ..., partitions: _Optional[_Iterable[_Union[MetadataResponse.Partition, _Mapping]]] = ...) -> None: ...
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[NodeEndpoint]
    cluster_id: str
    controller_id: int
    topics: _containers.RepeatedCompositeFieldContainer[MetadataResponse.Topic]
    def __init__(self, brokers: _Optional[_Iterable[_Union[NodeEndpoint, _Mapping]]] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[MetadataResponse.Topic, _Mapping]]] = ...) -> None: ...

class DeleteRecordsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms")
    class Partition(_message.Message):
        __slots__ = ("partition_index", "offset")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        OFFSET_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        offset: int
        def __init__(self, partition_index: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DeleteRecordsRequest.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DeleteRecordsRequest.Partition, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DeleteRecordsRequest.Topic]
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[DeleteRecordsRequest.Topic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteRecordsResponse(_message.Message):
    __slots__ = ("topics",)
    class Partition(_message.Message):
        __slots__ = ("partition_index", "low_watermark", "error")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LOW_WATERMARK_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        low_watermark: int
        error: _errors_pb2.Error
        def __init__(self, partition_index: _Optional[int] = ..., low_watermark: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DeleteRecordsResponse.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DeleteRecordsResponse.Partition, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DeleteRecordsResponse.Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[DeleteRecordsResponse.Topic, _Mapping]]] = ...) -> None: ...

class InitProducerIdRequest(_message.Message):
    __slots__ = ("transactional_id", "transaction_timeout_ms", "producer_id", "producer_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int
    def __init__(self, transactional_id: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class InitProducerIdResponse(_message.Message):
    __slots__ = ("error", "producer_id", "producer_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    producer_id: int
    producer_epoch: int
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class DescribeProducersRequest(_message.Message):
    __slots__ = ("topics",)
    class Topic(_message.Message):
        __slots__ = ("name", "partition_indexes")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_indexes: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeProducersRequest.Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeProducersRequest.Topic, _Mapping]]] = ...) -> None: ...

class DescribeProducersResponse(_message.Message):
    __slots__ = ("topics",)
    class Producer(_message.Message):
        __slots__ = ("producer_id", "producer_epoch", "last_sequence", "last_timestamp", "coordinator_epoch", "current_txn_start_offset")
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
        LAST_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
        COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
        CURRENT_TXN_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
        producer_id: int
        producer_epoch: int
        last_sequence: int
        last_timestamp: int
        coordinator_epoch: int
        current_txn_start_offset: int
        def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., last_sequence: _Optional[int] = ..., last_timestamp: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., current_txn_start_offset: _Optional[int] = ...) -> None: ...
    class Partition(_message.Message):
        __slots__ = ("partition_index", "error", "active_producers")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        ACTIVE_PRODUCERS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error: _errors_pb2.Error
        active_producers: _containers.RepeatedCompositeFieldContainer[DescribeProducersResponse.Producer]
        def __init__(self, partition_index: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., active_producers: _Optional[_Iterable[_Union[DescribeProducersResponse.Producer, _Mapping]]] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[DescribeProducersResponse.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[DescribeProducersResponse.Partition, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DescribeProducersResponse.Topic]
    def __init__(self, topics: _Optional[_Iterable[_Union[DescribeProducersResponse.Topic, _Mapping]]] = ...) -> None: ...

class WriteTxnMarkersRequest(_message.Message):
    __slots__ = ("markers", "timeout_ms")
    class Topic(_message.Message):
        __slots__ = ("name", "partition_indexes")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_indexes: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...
    class Marker(_message.Message):
        __slots__ = ("producer_id", "producer_epoch", "transaction_result", "topics", "coordinator_epoch", "transaction_version")
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_RESULT_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_VERSION_FIELD_NUMBER: _ClassVar[int]
        producer_id: int
        producer_epoch: int
        transaction_result: bool
        topics: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersRequest.Topic]
        coordinator_epoch: int
        transaction_version: int
        def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., transaction_result: _Optional[bool] = ..., topics: _Optional[_Iterable[_Union[WriteTxnMarkersRequest.Topic, _Mapping]]] = ..., coordinator_epoch: _Optional[int] = ..., transaction_version: _Optional[int] = ...) -> None: ...
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersRequest.Marker]
    timeout_ms: int
    def __init__(self, markers: _Optional[_Iterable[_Union[WriteTxnMarkersRequest.Marker, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class WriteTxnMarkersResponse(_message.Message):
    __slots__ = ("markers",)
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
        partitions: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersResponse.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[WriteTxnMarkersResponse.Partition, _Mapping]]] = ...) -> None: ...
    class Marker(_message.Message):
        __slots__ = ("producer_id", "topics")
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        producer_id: int
        topics: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersResponse.Topic]
        def __init__(self, producer_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[WriteTxnMarkersResponse.Topic, _Mapping]]] = ...) -> None: ...
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkersResponse.Marker]
    def __init__(self, markers: _Optional[_Iterable[_Union[WriteTxnMarkersResponse.Marker, _Mapping]]] = ...) -> None: ...
