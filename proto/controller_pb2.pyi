from kraftlog.proto import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Endpoint(_message.Message):
    __slots__ = ("name", "host", "port", "security_protocol")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    SECURITY_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    security_protocol: str
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., security_protocol: _Optional[str] = ...) -> None: ...

class ControllerHint(_message.Message):
    __slots__ = ("leader_id", "leader_address", "leader_epoch")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    leader_address: str
    leader_epoch: int
    def __init__(self, leader_id: _Optional[int] = ..., leader_address: _Optional[str] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id", "cluster_id", "incarnation_id", "listeners", "rack", "log_dirs", "previous_broker_epoch", "features")
    class Feature(_message.Message):
        __slots__ = ("name", "min_supported_version", "max_supported_version")
        NAME_FIELD_NUMBER: _ClassVar[int]
        MIN_SUPPORTED_VERSION_FIELD_NUMBER: _ClassVar[int]
        MAX_SUPPORTED_VERSION_FIELD_NUMBER: _ClassVar[int]
        name: str
        min_supported_version: int
        max_supported_version: int
        def __init__(self, name: _Optional[str] = ..., min_supported_version: _Optional[int] = ..., max_supported_version: _Optional[int] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    cluster_id: str
    incarnation_id: str
    listeners: _containers.RepeatedCompositeFieldContainer[Endpoint]
    rack: str
    log_dirs: _containers.RepeatedScalarFieldContainer[str]
    previous_broker_epoch: int
    features: _containers.RepeatedCompositeFieldContainer[RegisterBrokerRequest.Feature]
    def __init__(self, broker_id: _Optional[int] = ..., cluster_id: _Optional[str] = ..., incarnation_id: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ..., rack: _Optional[str] = ..., log_dirs: _Optional[_Iterable[str]] = ..., previous_broker_epoch: _Optional[int] = ..., features: _Optional[_Iterable[_Union[RegisterBrokerRequest.Feature, _Mapping]]] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("error", "broker_epoch", "controller")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    broker_epoch: int
    controller: ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., broker_epoch: _Optional[int] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "current_metadata_offset", "want_fence", "want_shutdown", "offline_partitions")
    class OfflineTopic(_message.Message):
        __slots__ = ("topic_id", "partitions")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_id: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FENCE_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shutdown: bool
    offline_partitions: _containers.RepeatedCompositeFieldContainer[BrokerHeartbeatRequest.OfflineTopic]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., current_metadata_offset: _Optional[int] = ..., want_fence: _Optional[bool] = ..., want_shutdown: _Optional[bool] = ..., offline_partitions: _Optional[_Iterable[_Union[BrokerHeartbeatRequest.OfflineTopic, _Mapping]]] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("error", "is_caught_up", "is_fenced", "should_shutdown", "controller", "metadata_high_watermark")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    IS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    METADATA_HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    is_caught_up: bool
    is_fenced: bool
    should_shutdown: bool
    controller: ControllerHint
    metadata_high_watermark: int
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., is_caught_up: _Optional[bool] = ..., is_fenced: _Optional[bool] = ..., should_shutdown: _Optional[bool] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., metadata_high_watermark: _Optional[int] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "topics")
    class PartitionData(_message.Message):
        __slots__ = ("partition_index", "leader_epoch", "new_isr", "partition_epoch", "leader_recovery_state")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        NEW_ISR_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        leader_epoch: int
        new_isr: _containers.RepeatedScalarFieldContainer[int]
        partition_epoch: int
        leader_recovery_state: int
        def __init__(self, partition_index: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[int]] = ..., partition_epoch: _Optional[int] = ..., leader_recovery_state: _Optional[int] = ...) -> None: ...
    class TopicData(_message.Message):
        __slots__ = ("topic_id", "partitions")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_id: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.PartitionData]
        def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionRequest.PartitionData, _Mapping]]] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.TopicData]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionRequest.TopicData, _Mapping]]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("error", "topics", "controller")
    class PartitionData(_message.Message):
        __slots__ = ("partition_index", "error", "leader_id", "leader_epoch", "isr", "partition_epoch", "leader_recovery_state")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        LEADER_ID_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ISR_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error: _errors_pb2.Error
        leader_id: int
        leader_epoch: int
        isr: _containers.RepeatedScalarFieldContainer[int]
        partition_epoch: int
        leader_recovery_state: int
        def __init__(self, partition_index: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., partition_epoch: _Optional[int] = ..., leader_recovery_state: _Optional[int] = ...) -> None: ...
    class TopicData(_message.Message):
        __slots__ = ("topic_id", "partitions")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_id: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionResponse.PartitionData]
        def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionResponse.PartitionData, _Mapping]]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionResponse.TopicData]
    controller: ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionResponse.TopicData, _Mapping]]] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ...) -> None: ...

class FetchMetadataRequest(_message.Message):
    __slots__ = ("from_offset", "broker_id", "broker_epoch", "min_epoch")
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MIN_EPOCH_FIELD_NUMBER: _ClassVar[int]
    from_offset: int
    broker_id: int
    broker_epoch: int
    min_epoch: int
    def __init__(self, from_offset: _Optional[int] = ..., broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., min_epoch: _Optional[int] = ...) -> None: ...

class MetadataBatch(_message.Message):
    __slots__ = ("entries", "snapshot_records", "snapshot_offset", "snapshot_epoch", "snapshot_timestamp_ms", "high_watermark", "leader_id", "leader_epoch", "keep_alive", "error")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_RECORDS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedScalarFieldContainer[bytes]
    snapshot_records: _containers.RepeatedScalarFieldContainer[bytes]
    snapshot_offset: int
    snapshot_epoch: int
    snapshot_timestamp_ms: int
    high_watermark: int
    leader_id: int
    leader_epoch: int
    keep_alive: bool
    error: _errors_pb2.Error
    def __init__(self, entries: _Optional[_Iterable[bytes]] = ..., snapshot_records: _Optional[_Iterable[bytes]] = ..., snapshot_offset: _Optional[int] = ..., snapshot_epoch: _Optional[int] = ..., snapshot_timestamp_ms: _Optional[int] = ..., high_watermark: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., keep_alive: _Optional[bool] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("error", "producer_id_start", "producer_id_len", "controller")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_START_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_LEN_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    producer_id_start: int
    producer_id_len: int
    controller: ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., producer_id_start: _Optional[int] = ..., producer_id_len: _Optional[int] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ...) -> None: ...
