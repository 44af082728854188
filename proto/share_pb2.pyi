from kraftlog.proto import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ShareStateBatch(_message.Message):
    __slots__ = ("first_offset", "last_offset", "delivery_state", "delivery_count")
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_STATE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int
    def __init__(self, first_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., delivery_state: _Optional[int] = ..., delivery_count: _Optional[int] = ...) -> None: ...

class SharePartitionState(_message.Message):
    __slots__ = ("group_id", "topic_id", "partition", "state_epoch", "leader_epoch", "start_offset", "state_batches", "delivery_complete_count")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    STATE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STATE_BATCHES_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COMPLETE_COUNT_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    topic_id: str
    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: _containers.RepeatedCompositeFieldContainer[ShareStateBatch]
    delivery_complete_count: int
    def __init__(self, group_id: _Optional[str] = ..., topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., state_epoch: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., start_offset: _Optional[int] = ..., state_batches: _Optional[_Iterable[_Union[ShareStateBatch, _Mapping]]] = ..., delivery_complete_count: _Optional[int] = ...) -> None: ...

class ShareStateRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[SharePartitionState]
    def __init__(self, partitions: _Optional[_Iterable[_Union[SharePartitionState, _Mapping]]] = ...) -> None: ...

class ShareStateResult(_message.Message):
    __slots__ = ("topic_id", "partition", "error", "state_epoch", "leader_epoch", "start_offset", "delivery_complete_count", "state_batches")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COMPLETE_COUNT_FIELD_NUMBER: _ClassVar[int]
    STATE_BATCHES_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    error: _errors_pb2.Error
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: _containers.RepeatedCompositeFieldContainer[ShareStateBatch]
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., state_epoch: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., start_offset: _Optional[int] = ..., delivery_complete_count: _Optional[int] = ..., state_batches: _Optional[_Iterable[_Union[ShareStateBatch, _Mapping]]] = ...) -> None: ...

class ShareStateResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ShareStateResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ShareStateResult, _Mapping]]] = ...) -> None: ...

class ShareAcknowledgementBatch(_message.Message):
    __slots__ = ("first_offset", "last_offset", "acknowledge_types")
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGE_TYPES_FIELD_NUMBER: _ClassVar[int]
    first_offset: int
    last_offset: int
    acknowledge_types: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, first_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., acknowledge_types: _Optional[_Iterable[int]] = ...) -> None: ...

class ShareFetchTopic(_message.Message):
    __slots__ = ("topic_id", "partitions")
    class Partition(_message.Message):
        __slots__ = ("partition", "acknowledgement_batches")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ACKNOWLEDGEMENT_BATCHES_FIELD_NUMBER: _ClassVar[int]
        partition: int
        acknowledgement_batches: _containers.RepeatedCompositeFieldContainer[ShareAcknowledgementBatch]
        def __init__(self, partition: _Optional[int] = ..., acknowledgement_batches: _Optional[_Iterable[_Union[ShareAcknowledgementBatch, _Mapping]]] = ...) -> None: ...
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[ShareFetchTopic.Partition]
    def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ShareFetchTopic.Partition, _Mapping]]] = ...) -> None: ...

class ShareFetchRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "share_session_epoch", "max_wait_ms", "min_bytes", "max_bytes", "max_records", "share_acquire_mode", "is_renew_ack", "topics", "forgotten_topics")
    class ForgottenTopic(_message.Message):
        __slots__ = ("topic_id", "partitions")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_id: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    SHARE_SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_RECORDS_FIELD_NUMBER: _ClassVar[int]
    SHARE_ACQUIRE_MODE_FIELD_NUMBER: _ClassVar[int]
    IS_RENEW_ACK_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    share_session_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    share_acquire_mode: int
    is_renew_ack: bool
    topics: _containers.RepeatedCompositeFieldContainer[ShareFetchTopic]
    forgotten_topics: _containers.RepeatedCompositeFieldContainer[ShareFetchRequest.ForgottenTopic]
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., share_session_epoch: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_records: _Optional[int] = ..., share_acquire_mode: _Optional[int] = ..., is_renew_ack: _Optional[bool] = ..., topics: _Optional[_Iterable[_Union[ShareFetchTopic, _Mapping]]] = ..., forgotten_topics: _Optional[_Iterable[_Union[ShareFetchRequest.ForgottenTopic, _Mapping]]] = ...) -> None: ...

class ShareAcknowledgeRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "share_session_epoch", "topics")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    SHARE_SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    share_session_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[ShareFetchTopic]
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., share_session_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ShareFetchTopic, _Mapping]]] = ...) -> None: ...

class ShareFetchResponse(_message.Message):
    __slots__ = ("error", "acquisition_lock_timeout_ms", "topics")
    class AcquiredRecords(_message.Message):
        __slots__ = ("first_offset", "last_offset", "delivery_count")
        FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
        LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
        DELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
        first_offset: int
        last_offset: int
        delivery_count: int
        def __init__(self, first_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., delivery_count: _Optional[int] = ...) -> None: ...
    class Partition(_message.Message):
        __slots__ = ("partition", "error", "acknowledge_error", "records", "acquired_records", "leader_id", "leader_epoch")
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        ACKNOWLEDGE_ERROR_FIELD_NUMBER: _ClassVar[int]
        RECORDS_FIELD_NUMBER: _ClassVar[int]
        ACQUIRED_RECORDS_FIELD_NUMBER: _ClassVar[int]
        LEADER_ID_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        partition: int
        error: _errors_pb2.Error
        acknowledge_error: _errors_pb2.Error
        records: bytes
        acquired_records: _containers.RepeatedCompositeFieldContainer[ShareFetchResponse.AcquiredRecords]
        leader_id: int
        leader_epoch: int
        def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., acknowledge_error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., records: _Optional[bytes] = ..., acquired_records: _Optional[_Iterable[_Union[ShareFetchResponse.AcquiredRecords, _Mapping]]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("topic_id", "partitions")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_id: str
        partitions: _containers.RepeatedCompositeFieldContainer[ShareFetchResponse.Partition]
        def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ShareFetchResponse.Partition, _Mapping]]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ACQUISITION_LOCK_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    acquisition_lock_timeout_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[ShareFetchResponse.Topic]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., acquisition_lock_timeout_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ShareFetchResponse.Topic, _Mapping]]] = ...) -> None: ...

class ForgetShareGroupRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class ForgetShareGroupResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
