"""Kafka's wire format for the Kafka-protocol listener: frames, headers and messages.

Every message is encoded and decoded by `kio`, whose data types are generated from the JSON
schemas Apache Kafka itself is built from; nothing here knows a message's layout. What this module
adds:

- `parse_request`: a size-stripped frame -> header and request of the version the client named;
  an API or version the listener does not serve raises `UnsupportedRequest` (answered with
  UNSUPPORTED_VERSION, the connection stays open), a frame that does not decode raises
  `MalformedRequest` (the connection is closed).
- `build`: a version-independent description of a response (nested mappings with kio's field
  names, milliseconds as ints) -> the entity of the version asked for. Fields a version lacks are
  dropped and fields it has that the description leaves out take their schema default, so one
  handler serves every version, as Kafka's generated classes do.
- `encode_response`: a response -> the frame to send, as chunks. A records field holding a
  `FileRegion` (a zero-copy fetch) becomes its own chunk, sent with sendfile; the bytes around it
  are encoded as usual, so the record batches go from the segment file to the socket untouched.
"""

from __future__ import annotations

import datetime
import functools
import io
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, Field, fields
from typing import Any, NamedTuple, TypeAlias

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)
from kio.static.primitive import i32

from kraftlog.common import parse_uuid
from kraftlog.storage import FileRegion

__all__ = [
    "Chunk",
    "MalformedRequest",
    "NOT_REQUESTED_OPERATIONS",
    "ParsedRequest",
    "RegionRecords",
    "UnsupportedRequest",
    "build",
    "encode_response",
    "error_only_frame",
    "ms",
    "parse_request",
]

#: KIP-430's authorized-operations field when the request did not ask for it (Integer.MIN_VALUE)
NOT_REQUESTED_OPERATIONS = -2147483648

Chunk: TypeAlias = bytes | FileRegion
_SIZE = struct.Struct(">i")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_UTC = datetime.UTC


class UnsupportedRequest(Exception):
    """An API key or version this listener does not serve."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"API key {api_key} version {api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class MalformedRequest(Exception):
    """A frame that does not decode as the request its header names."""


class ParsedRequest(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kio request entity


def parse_request(frame: bytes, supported: Mapping[int, tuple[int, int]]) -> ParsedRequest:
    """Decode one request frame (without its size prefix) into its header and body.

    ``supported`` maps API keys to the (min, max) versions served; anything else raises
    `UnsupportedRequest` before the body is decoded (its schema may not even exist)."""
    if len(frame) < _KEY_VERSION_CORRELATION.size:
        raise MalformedRequest(f"a request of {len(frame)} bytes is shorter than its header")
    api_key, api_version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    bounds = supported.get(api_key)
    if bounds is None or not bounds[0] <= api_version <= bounds[1]:
        raise UnsupportedRequest(api_key, api_version, correlation_id)
    request_type = load_request_schema(api_key, api_version)
    try:
        header, header_size = _reader(request_type.__header_schema__)(frame, 0)
        body, body_size = _reader(request_type)(frame, header_size)
    except Exception as err:  # kio raises its own errors, struct errors, IndexError, UnicodeError...
        raise MalformedRequest(f"API key {api_key} v{api_version}: {err}") from err
    # Bytes after the request are ignored, as Kafka's generated readers ignore them: librdkafka
    # 2.x sends three after an all-topics Metadata v12.
    return ParsedRequest(api_key, api_version, correlation_id, header.client_id, body)


_READERS: dict[type, Callable[[bytes, int], tuple[Any, int]]] = {}
_WRITERS: dict[type, Callable[[Any, Any], None]] = {}


def _reader(entity_type: type) -> Callable[[bytes, int], tuple[Any, int]]:
    reader = _READERS.get(entity_type)
    if reader is None:
        reader = _READERS[entity_type] = entity_reader(entity_type)
    return reader


def _writer(entity_type: type) -> Callable[[Any, Any], None]:
    writer = _WRITERS.get(entity_type)
    if writer is None:
        writer = _WRITERS[entity_type] = entity_writer(entity_type)
    return writer


class RegionRecords(bytes):
    """A records field whose bytes stay in a segment file. Its length is the region's, so the
    encoder writes the right length prefix; `_ChunkBuffer` then puts the region in place of the
    bytes."""

    region: FileRegion

    def __new__(cls, region: FileRegion) -> RegionRecords:
        obj = super().__new__(cls, b"")
        obj.region = region
        return obj

    def __len__(self) -> int:
        return self.region.size


class _ChunkBuffer:
    """A write target for kio's encoder that keeps file regions out of the byte stream."""

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        self._current = io.BytesIO()
        self.size = 0

    def write(self, data: bytes) -> int:
        if isinstance(data, RegionRecords):
            self._flush()
            self.chunks.append(data.region)
            self.size += data.region.size
            return data.region.size
        self.size += len(data)
        return self._current.write(data)

    def _flush(self) -> None:
        if self._current.tell():
            self.chunks.append(self._current.getvalue())
            self._current = io.BytesIO()

    def finish(self) -> list[Chunk]:
        self._flush()
        return self.chunks


def encode_response(correlation_id: int, response: Any) -> tuple[list[Chunk], int]:
    """The frame of ``response`` (size prefix included) as chunks, and its total byte count."""
    buf = _ChunkBuffer()
    buf.write(b"\0\0\0\0")  # the size, filled in below
    header_type = response.__header_schema__
    _writer(header_type)(buf, header_type(correlation_id=i32(correlation_id)))
    _writer(type(response))(buf, response)
    chunks = buf.finish()
    first = chunks[0]
    assert isinstance(first, bytes)
    chunks[0] = _SIZE.pack(buf.size - 4) + first[4:]
    return chunks, buf.size


def error_only_frame(correlation_id: int, error_code: int) -> bytes:
    """The answer to a request whose API or version is not served: response header v0 and an
    int16 error code, as ApiVersions v0 begins (Kafka answers an unknown ApiVersions version so;
    for other APIs a client reads at least the error code where the header ends)."""
    buf = io.BytesIO()
    _writer(ResponseHeaderV0)(buf, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    buf.write(struct.pack(">h", error_code))
    body = buf.getvalue()
    return _SIZE.pack(len(body)) + body


def response_type(api_key: int, api_version: int) -> type:
    return load_response_schema(api_key, api_version)


# ---------------------------------------------------------------------------- building entities


def build(entity_type: type, values: Mapping[str, Any]) -> Any:
    """``entity_type`` from a version-independent description (see the module docstring)."""
    kwargs: dict[str, Any] = {}
    for name, convert, zero in _plan(entity_type):
        if name in values:
            kwargs[name] = convert(values[name])
        elif zero is not MISSING:
            kwargs[name] = zero() if isinstance(zero, functools.partial) else zero
    return entity_type(**kwargs)


def _plan(entity_type: type) -> list[tuple[str, Callable[[Any], Any], Any]]:
    plan = _PLANS.get(entity_type)
    if plan is None:
        plan = [_field_plan(f) for f in fields(entity_type)]
        _PLANS[entity_type] = plan
    return plan


_PLANS: dict[type, list[tuple[str, Callable[[Any], Any], Any]]] = {}


def _field_plan(f: Field[Any]) -> tuple[str, Callable[[Any], Any], Any]:
    """(name, value converter, zero) where zero is MISSING when the field has a default."""
    has_default = f.default is not MISSING or f.default_factory is not MISSING
    optional = is_optional(f)
    kind = classify_field(f)
    convert: Callable[[Any], Any]
    zero: Any
    if isinstance(kind, (EntityTupleField, EntityField)):
        inner: type = kind.type_

        def one(item: Any) -> Any:
            return build(inner, item) if isinstance(item, Mapping) else item

        if isinstance(kind, EntityTupleField):
            convert, zero = _each(one), (None if optional else ())
        else:
            convert, zero = _or_none(one), (None if optional else functools.partial(build, inner, {}))
    else:
        kafka_type = get_schema_field_type(f)
        primitive = _primitive(kafka_type, optional)
        if isinstance(kind, PrimitiveTupleField):
            convert, zero = _each(primitive), (None if optional else ())
        else:
            convert, zero = primitive, (None if optional else _ZEROS.get(kafka_type, 0))
    return f.name, convert, (MISSING if has_default else zero)


def _each(one: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def convert(items: Any) -> Any:
        return None if items is None else tuple(one(item) for item in items)

    return convert


def _or_none(one: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def convert(item: Any) -> Any:
        return None if item is None else one(item)

    return convert


_EPOCH = datetime.datetime.fromtimestamp(0, _UTC)
_ZEROS: dict[str, Any] = {
    "string": "",
    "bytes": b"",
    "records": b"",
    "bool": False,
    "uuid": None,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": _EPOCH,
    "float64": 0.0,
}


def _primitive(kafka_type: str, optional: bool) -> Callable[[Any], Any]:
    if kafka_type == "error_code":
        return _error_code
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return _timedelta
    if kafka_type == "datetime_i64":
        return functools.partial(_datetime, optional=optional)
    if kafka_type == "uuid":
        return _uuid
    return _same


def _timedelta(value: Any) -> Any:
    return datetime.timedelta(milliseconds=value) if isinstance(value, int) else value


def _same(value: Any) -> Any:
    return value


def _error_code(value: Any) -> ErrorCode:
    if isinstance(value, ErrorCode):
        return value
    try:
        return ErrorCode(int(value))
    except ValueError:
        return ErrorCode.unknown_server_error


def _datetime(value: Any, optional: bool) -> datetime.datetime | None:
    if not isinstance(value, int):
        return value  # type: ignore[no-any-return]
    if value < 0 and optional:
        return None
    return datetime.datetime.fromtimestamp(value / 1000, _UTC)  # -1 stays -1 on the wire


def _uuid(value: Any) -> uuid.UUID | None:
    if value is None or isinstance(value, uuid.UUID):
        return value
    if isinstance(value, bytes):
        return None if value == bytes(16) else uuid.UUID(bytes=value)
    if isinstance(value, str):
        return parse_uuid(value) if value else None
    return value  # type: ignore[no-any-return]


def ms(value: Any) -> int:
    """Milliseconds of a kio duration or timestamp field (kio decodes them as timedelta/datetime)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


def uuid_bytes(value: uuid.UUID | None) -> bytes:
    return bytes(16) if value is None else value.bytes


def entity_fields(entity: Any) -> Sequence[str]:
    return [f.name for f in fields(entity)]
