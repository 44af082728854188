from kraftlog.proto import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AddPartitionsToTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "topics", "verify_only")
    class Topic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_ONLY_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[AddPartitionsToTxnRequest.Topic]
    verify_only: bool
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AddPartitionsToTxnRequest.Topic, _Mapping]]] = ..., verify_only: _Optional[bool] = ...) -> None: ...

class AddPartitionsToTxnResponse(_message.Message):
    __slots__ = ("error", "results")
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
        partitions: _containers.RepeatedCompositeFieldContainer[AddPartitionsToTxnResponse.Partition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AddPartitionsToTxnResponse.Partition, _Mapping]]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    results: _containers.RepeatedCompositeFieldContainer[AddPartitionsToTxnResponse.Topic]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., results: _Optional[_Iterable[_Union[AddPartitionsToTxnResponse.Topic, _Mapping]]] = ...) -> None: ...

class AddOffsetsToTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "group_id")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., group_id: _Optional[str] = ...) -> None: ...

class AddOffsetsToTxnResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...

class EndTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "committed", "client_transaction_version")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TRANSACTION_VERSION_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    client_transaction_version: int
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ..., client_transaction_version: _Optional[int] = ...) -> None: ...

class EndTxnResponse(_message.Message):
    __slots__ = ("error", "producer_id", "producer_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    producer_id: int
    producer_epoch: int
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class ListTransactionsRequest(_message.Message):
    __slots__ = ("state_filters", "producer_id_filters")
    STATE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FILTERS_FIELD_NUMBER: _ClassVar[int]
    state_filters: _containers.RepeatedScalarFieldContainer[str]
    producer_id_filters: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, state_filters: _Optional[_Iterable[str]] = ..., producer_id_filters: _Optional[_Iterable[int]] = ...) -> None: ...

class ListTransactionsResponse(_message.Message):
    __slots__ = ("error", "transaction_states")
    class TransactionState(_message.Message):
        __slots__ = ("transactional_id", "producer_id", "transaction_state")
        TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_STATE_FIELD_NUMBER: _ClassVar[int]
        transactional_id: str
        producer_id: int
        transaction_state: str
        def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., transaction_state: _Optional[str] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_STATES_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    transaction_states: _containers.RepeatedCompositeFieldContainer[ListTransactionsResponse.TransactionState]
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., transaction_states: _Optional[_Iterable[_Union[ListTransactionsResponse.TransactionState, _Mapping]]] = ...) -> None: ...

class DescribeTransactionsRequest(_message.Message):
    __slots__ = ("transactional_ids",)
    TRANSACTIONAL_IDS_FIELD_NUMBER: _ClassVar[int]
    transactional_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, transactional_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeTransactionsResponse(_message.Message):
    __slots__ = ("transaction_states",)
    class Topic(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    class TransactionState(_message.Message):
        __slots__ = ("error", "transactional_id", "transaction_state", "transaction_timeout_ms", "transaction_start_time_ms", "producer_id", "producer_epoch", "topics")
        ERROR_FIELD_NUMBER: _ClassVar[int]
        TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_STATE_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
        TRANSACTION_START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
        PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        error: _errors_pb2.Error
        transactional_id: str
        transaction_state: str
        transaction_timeout_ms: int
        transaction_start_time_ms: int
        producer_id: int
        producer_epoch: int
        topics: _containers.RepeatedCompositeFieldContainer[DescribeTransactionsResponse.Topic]
        def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., transactional_id: _Optional[str] = ..., transaction_state: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ..., transaction_start_time_ms: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[DescribeTransactionsResponse.Topic, _Mapping]]] = ...) -> None: ...
    TRANSACTION_STATES_FIELD_NUMBER: _ClassVar[int]
    transaction_states: _containers.RepeatedCompositeFieldContainer[DescribeTransactionsResponse.TransactionState]
    def __init__(self, transaction_states: _Optional[_Iterable[_Union[DescribeTransactionsResponse.TransactionState, _Mapping]]] = ...) -> None: ...
