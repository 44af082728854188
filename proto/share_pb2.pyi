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
