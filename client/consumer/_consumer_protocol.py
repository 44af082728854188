"""Kafka's consumer embedded protocol: what a member's JoinGroup metadata and its SyncGroup
assignment carry (``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``, versions 0-3).

Byte for byte Kafka's layout, so a Java consumer and this one can share a group: a version (int16),
then the fields of that version in Kafka's non-flexible encoding (int16-length strings, int32-length
bytes and arrays, -1 for null). As Kafka's parser, a newer version is read with the newest layout
known (later versions only append fields); malformed bytes raise `InconsistentGroupProtocolError`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kraftlog.client._metadata import TopicPartition, partitions_by_topic
from kraftlog.client.assignors import Subscription
from kraftlog.common import errors as kerr

__all__ = ["encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment", "VERSION"]

VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    return _I32.pack(-1) if value is None else _I32.pack(len(value)) + value


def _partitions(tps: Sequence[TopicPartition]) -> bytes:
    by_topic = partitions_by_topic(tps)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic, ps in by_topic.items():
        out += _string(topic) + _I32.pack(len(ps)) + b"".join(_I32.pack(p) for p in ps)
    return bytes(out)


def encode_subscription(subscription: Subscription, version: int = VERSION) -> bytes:
    """A member's JoinGroup metadata for the ``consumer`` protocol type."""
    out = _I16.pack(version) + _I32.pack(len(subscription.topics))
    out += b"".join(_string(t) for t in subscription.topics) + _bytes(subscription.user_data)
    if version >= 1:
        out += _partitions(subscription.owned_partitions)
    if version >= 2:
        out += _I32.pack(subscription.generation_id)
    if version >= 3:
        out += _string(subscription.rack_id or None)
    return out


def encode_assignment(partitions: Sequence[TopicPartition], user_data: bytes | None = None) -> bytes:
    return _I16.pack(VERSION) + _partitions(partitions) + _bytes(user_data)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise kerr.InconsistentGroupProtocolError("consumer protocol data ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as err:
            raise kerr.InconsistentGroupProtocolError("consumer protocol string is not UTF-8") from err

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.data) - self.pos:
            raise kerr.InconsistentGroupProtocolError(f"consumer protocol array of {n} elements")
        return n

    def partitions(self) -> list[TopicPartition]:
        out: list[TopicPartition] = []
        for _ in range(self.count()):
            topic = self.string() or ""
            out.extend(TopicPartition(topic, self.i32()) for _ in range(self.count()))
        return out

    def version(self) -> int:
        v = self.i16()
        if v < 0:
            raise kerr.InconsistentGroupProtocolError(f"consumer protocol version {v}")
        return min(v, VERSION)


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.version()
    topics = [r.string() or "" for _ in range(r.count())]
    user_data = r.bytes_()
    owned = r.partitions() if version >= 1 else []
    generation = r.i32() if version >= 2 else -1
    rack = r.string() if version >= 3 else None
    return Subscription(topics, user_data, owned, rack_id=rack, generation_id=generation)


def decode_assignment(data: bytes) -> tuple[list[TopicPartition], bytes | None]:
    """The partitions a member was given (and the assignor's user data); empty bytes: none."""
    if not data:
        return [], None
    r = _Reader(data)
    r.version()
    return r.partitions(), r.bytes_()
