from kraftlog.proto import errors_pb2 as _errors_pb2
from kraftlog.proto import controller_pb2 as _controller_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QuotaEntityComponent(_message.Message):
    __slots__ = ("entity_type", "entity_name")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_NAME_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    entity_name: str
    def __init__(self, entity_type: _Optional[str] = ..., entity_name: _Optional[str] = ...) -> None: ...

class DescribeClientQuotasRequest(_message.Message):
    __slots__ = ("components", "strict")
    class Component(_message.Message):
        __slots__ = ("entity_type", "match_type", "match")
        ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
        MATCH_TYPE_FIELD_NUMBER: _ClassVar[int]
        MATCH_FIELD_NUMBER: _ClassVar[int]
        entity_type: str
        match_type: int
        match: str
        def __init__(self, entity_type: _Optional[str] = ..., match_type: _Optional[int] = ..., match: _Optional[str] = ...) -> None: ...
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    components: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasRequest.Component]
    strict: bool
    def __init__(self, components: _Optional[_Iterable[_Union[DescribeClientQuotasRequest.Component, _Mapping]]] = ..., strict: _Optional[bool] = ...) -> None: ...

class DescribeClientQuotasResponse(_message.Message):
    __slots__ = ("error", "entries", "controller")
    class Entry(_message.Message):
        __slots__ = ("entity", "values")
        class ValuesEntry(_message.Message):
            __slots__ = ("key", "value")
            KEY_FIELD_NUMBER: _ClassVar[int]
            VALUE_FIELD_NUMBER: _ClassVar[int]
            key: str
            value: float
            def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        VALUES_FIELD_NUMBER: _ClassVar[int]
        entity: _containers.RepeatedCompositeFieldContainer[QuotaEntityComponent]
        values: _containers.ScalarMap[str, float]
        def __init__(self, entity: _Optional[_Iterable[_Union[QuotaEntityComponent, _Mapping]]] = ..., values: _Optional[_Mapping[str, float]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error: _errors_pb2.Error
    entries: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasResponse.Entry]
    controller: _controller_pb2.ControllerHint
    def __init__(self, error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[DescribeClientQuotasResponse.Entry, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ...) -> None: ...

class AlterClientQuotasRequest(_message.Message):
    __slots__ = ("entries", "validate_only")
    class Op(_message.Message):
        __slots__ = ("key", "value", "remove")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        REMOVE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        remove: bool
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ..., remove: _Optional[bool] = ...) -> None: ...
    class Entry(_message.Message):
        __slots__ = ("entity", "ops")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        entity: _containers.RepeatedCompositeFieldContainer[QuotaEntityComponent]
        ops: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Op]
        def __init__(self, entity: _Optional[_Iterable[_Union[QuotaEntityComponent, _Mapping]]] = ..., ops: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Op, _Mapping]]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.Entry]
    validate_only: bool
    def __init__(self, entries: _Optional[_Iterable[_Union[AlterClientQuotasRequest.Entry, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterClientQuotasResponse(_message.Message):
    __slots__ = ("results", "controller", "error")
    class Result(_message.Message):
        __slots__ = ("entity", "error")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        ERROR_FIELD_NUMBER: _ClassVar[int]
        entity: _containers.RepeatedCompositeFieldContainer[QuotaEntityComponent]
        error: _errors_pb2.Error
        def __init__(self, entity: _Optional[_Iterable[_Union[QuotaEntityComponent, _Mapping]]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasResponse.Result]
    controller: _controller_pb2.ControllerHint
    error: _errors_pb2.Error
    def __init__(self, results: _Optional[_Iterable[_Union[AlterClientQuotasResponse.Result, _Mapping]]] = ..., controller: _Optional[_Union[_controller_pb2.ControllerHint, _Mapping]] = ..., error: _Optional[_Union[_errors_pb2.Error, _Mapping]] = ...) -> None: ...
