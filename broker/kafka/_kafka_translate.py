"""Field-by-field translation between kio's Kafka messages and kraftlog's gRPC messages.

kraftlog's protobuf messages were written after Kafka's (same field names; durations as
``*_ms`` ints; errors as an ``Error`` message with code, name and text), so most of the Kafka
listener's translation is mechanical: `to_pb` fills a protobuf message from a kio entity by field
name, `from_pb` turns a protobuf answer into the version-independent description `_kafka_wire.build`
shapes into the version the client asked for. Where Kafka named a field differently, ``aliases``
maps the protobuf name to Kafka's.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from kraftlog.broker.kafka._kafka_wire import ms

__all__ = ["to_pb", "from_pb"]

_MISSING: Any = object()
_NO_ALIASES: Mapping[str, str] = {}


def to_pb(entity: Any, pb_type: type[Message], aliases: Mapping[str, str] = _NO_ALIASES, **values: Any) -> Any:
    """A ``pb_type`` message from kio ``entity``; ``values`` set top-level fields directly."""
    msg = pb_type()
    _fill(msg, entity, aliases)
    for name, value in values.items():
        if value is not None:
            setattr(msg, name, value)
    return msg


def _fill(msg: Any, entity: Any, aliases: Mapping[str, str]) -> None:
    for fd in msg.DESCRIPTOR.fields:
        name = fd.name
        value = getattr(entity, aliases[name], _MISSING) if name in aliases else _MISSING
        if value is _MISSING:
            value = getattr(entity, name, _MISSING)
        if value is _MISSING and name.endswith("_ms"):
            value = getattr(entity, name[:-3], _MISSING)
        if value is _MISSING or value is None:
            continue
        repeated = fd.is_repeated
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            if fd.message_type.GetOptions().map_entry:
                continue
            if repeated:
                container = getattr(msg, name)
                for item in value:
                    _fill(container.add(), item, aliases)
            else:
                sub = getattr(msg, name)
                sub.SetInParent()
                _fill(sub, value, aliases)
        elif repeated:
            getattr(msg, name).extend(_scalar(v, fd) for v in value)
        else:
            setattr(msg, name, _scalar(value, fd))


def _scalar(value: Any, fd: Any) -> Any:
    if isinstance(value, (datetime.timedelta, datetime.datetime)):
        return ms(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if fd.type == FieldDescriptor.TYPE_STRING and isinstance(value, bytes):
        return value.decode()
    return value


def from_pb(msg: Any, aliases: Mapping[str, str] = _NO_ALIASES) -> dict[str, Any]:
    """The description of a protobuf answer: every field (defaults included, an unset optional as
    None), an ``Error`` field as ``error_code`` and ``error_message`` (``<x>_error`` as
    ``<x>_error_code``), ``*_ms`` also under the name without the suffix, ``aliases`` applied."""
    out: dict[str, Any] = {}
    for fd in msg.DESCRIPTOR.fields:
        name = fd.name
        repeated = fd.is_repeated
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            value = getattr(msg, name)
            if fd.message_type.GetOptions().map_entry:
                out[name] = dict(value)
                continue
            if fd.message_type.name == "Error" and not repeated:
                prefix = "" if name == "error" else name[: -len("error")]
                out[f"{prefix}error_code"] = value.code
                out[f"{prefix}error_message"] = (value.message or None) if value.code else None
                continue
            if repeated:
                out[name] = [from_pb(item, aliases) for item in value]
            elif msg.HasField(name):
                out[name] = from_pb(value, aliases)
            else:
                out[name] = None
            continue
        if fd.has_presence and not repeated and not msg.HasField(name):
            out[name] = None
        else:
            value = getattr(msg, name)
            out[name] = list(value) if repeated else value
        if name.endswith("_ms"):
            out[name[:-3]] = out[name]
    for pb_name, kafka_name in aliases.items():
        if pb_name in out:
            out[kafka_name] = out[pb_name]
    return out
