"""Records of the internal topic ``__consumer_offsets``, in Kafka's own binary schemas.

A group coordinator keeps a group's state and its committed offsets as records of one partition of
``__consumer_offsets`` (compacted): the key says what the record is about, the value its latest
state, a null value (tombstone) that it is gone. Kafka's formats, so that Kafka's tools read our
partitions and an operator's knowledge applies:

- key version 0/1 ``OffsetCommitKey`` (group, topic, partition) -> ``OffsetCommitValue`` v0-v4
  (offset, leader epoch from v3, metadata, commit timestamp, expire timestamp in v1 only);
- key version 2 ``GroupMetadataKey`` (group) -> ``GroupMetadataValue`` v0-v4 (protocol type,
  generation, protocol, leader, state timestamp from v2, members with their subscription and
  assignment bytes; group instance id from v3; v4 is flexible).

Written as Kafka 4.x writes them: OffsetCommitValue v3 (v1 when an expire timestamp is set),
GroupMetadataValue v3 — the highest non-flexible versions. Read: every version; tagged fields of the
flexible versions are skipped. Key versions this code does not know (KIP-848's consumer-group
records, 3 and up) raise `UnknownGroupRecordError`, which a loader skips, as Kafka's does.
Malformed bytes raise `CorruptMessageError` (CORRUPT_MESSAGE); nothing else escapes.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kraftlog.common.errors import CorruptMessageError

__all__ = [
    "OffsetCommitKey",
    "OffsetCommitValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "GroupKey",
    "GroupValue",
    "UnknownGroupRecordError",
    "encode_key",
    "encode_value",
    "decode_key",
    "decode_value",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class UnknownGroupRecordError(CorruptMessageError):
    """A ``__consumer_offsets`` record of a key version this broker does not know."""


class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    group: str


class OffsetCommitValue(NamedTuple):
    offset: int
    metadata: str
    commit_timestamp_ms: int
    leader_epoch: int = -1
    expire_timestamp_ms: int = -1


class MemberMetadata(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...]


GroupKey = OffsetCommitKey | GroupMetadataKey
GroupValue = OffsetCommitValue | GroupMetadataValue


# ================================================================================= encoding


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is longer than a Kafka string may be")
    return _I16.pack(len(raw)) + raw


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


def encode_key(key: GroupKey) -> bytes:
    """The record key: its version, then its fields (OffsetCommitKey v1, GroupMetadataKey v2)."""
    if isinstance(key, OffsetCommitKey):
        return _I16.pack(1) + _string(key.group) + _string(key.topic) + _I32.pack(key.partition)
    return _I16.pack(2) + _string(key.group)


def encode_value(value: GroupValue) -> bytes:
    """The record value, in the version Kafka 4.x writes (see the module docstring)."""
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp_ms >= 0:  # v1: no leader epoch, an expire timestamp
            return (
                _I16.pack(1)
                + _I64.pack(value.offset)
                + _string(value.metadata)
                + _I64.pack(value.commit_timestamp_ms)
                + _I64.pack(value.expire_timestamp_ms)
            )
        return (
            _I16.pack(3)
            + _I64.pack(value.offset)
            + _I32.pack(value.leader_epoch)
            + _string(value.metadata)
            + _I64.pack(value.commit_timestamp_ms)
        )
    parts = [
        _I16.pack(3),
        _string(value.protocol_type),
        _I32.pack(value.generation),
        _string(value.protocol),
        _string(value.leader),
        _I64.pack(value.current_state_timestamp_ms),
        _I32.pack(len(value.members)),
    ]
    for m in value.members:
        parts += [
            _string(m.member_id),
            _string(m.group_instance_id),
            _string(m.client_id),
            _string(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(parts)


# ================================================================================= decoding


class _Reader:
    """Kafka's primitive types off one buffer; any overrun or bad length is CORRUPT_MESSAGE."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptMessageError(f"{self.what} ends {self.pos + n - len(self.data)} bytes early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        result = shift = 0
        for _ in range(5):
            (b,) = self._take(1)
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
            shift += 7
        raise CorruptMessageError(f"{self.what} has a varint longer than 5 bytes")

    def _text(self, raw: bytes) -> str:
        try:
            return raw.decode()
        except UnicodeDecodeError as err:
            raise CorruptMessageError(f"{self.what} has a string that is not UTF-8") from err

    def string(self, flexible: bool, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise CorruptMessageError(f"{self.what} has a null or negative-length string where one is required")
        return self._text(self._take(n))

    def required_string(self, flexible: bool) -> str:
        value = self.string(flexible)
        assert value is not None
        return value

    def bytes_(self, flexible: bool) -> bytes:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            raise CorruptMessageError(f"{self.what} has null bytes where bytes are required")
        return self._take(n)

    def array_length(self, flexible: bool) -> int:
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < 0:
            raise CorruptMessageError(f"{self.what} has a null array where one is required")
        if n > len(self.data) - self.pos:  # every element takes at least a byte
            raise CorruptMessageError(f"{self.what} claims {n} elements in {len(self.data) - self.pos} bytes")
        return n

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.data):
            raise CorruptMessageError(f"{self.what} has {len(self.data) - self.pos} bytes after its last field")


def decode_key(data: bytes) -> GroupKey:
    """A ``__consumer_offsets`` key; `UnknownGroupRecordError` for key versions past 2."""
    r = _Reader(data, "__consumer_offsets key")
    version = r.int16()
    if version in (0, 1):
        key: GroupKey = OffsetCommitKey(r.required_string(False), r.required_string(False), r.int32())
    elif version == 2:
        key = GroupMetadataKey(r.required_string(False))
    else:
        raise UnknownGroupRecordError(f"__consumer_offsets key version {version} is not one this broker reads")
    r.end()
    return key


def decode_value(key: GroupKey, data: bytes | None) -> GroupValue | None:
    """The value for ``key``: None for a tombstone (the group or the offset was deleted)."""
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return _decode_offset_commit(data)
    return _decode_group_metadata(data)


def _decode_offset_commit(data: bytes) -> OffsetCommitValue:
    r = _Reader(data, "OffsetCommitValue")
    version = r.int16()
    if not 0 <= version <= 4:
        raise CorruptMessageError(f"OffsetCommitValue version {version} is unknown")
    flexible = version >= 4
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.required_string(flexible)
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else -1
    if flexible:
        r.tagged_fields()
    r.end()
    return OffsetCommitValue(offset, metadata, commit_ts, leader_epoch, expire_ts)


def _decode_group_metadata(data: bytes) -> GroupMetadataValue:
    r = _Reader(data, "GroupMetadataValue")
    version = r.int16()
    if not 0 <= version <= 4:
        raise CorruptMessageError(f"GroupMetadataValue version {version} is unknown")
    flexible = version >= 4
    protocol_type = r.required_string(flexible)
    generation = r.int32()
    protocol = r.string(flexible, nullable=True)
    leader = r.string(flexible, nullable=True)
    state_ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.array_length(flexible)):
        member_id = r.required_string(flexible)
        instance_id = r.string(flexible, nullable=True) if version >= 3 else None
        client_id = r.required_string(flexible)
        client_host = r.required_string(flexible)
        rebalance_timeout = r.int32() if version >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_(flexible)
        assignment = r.bytes_(flexible)
        if flexible:
            r.tagged_fields()
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout if version >= 1 else session_timeout,  # v0: Kafka uses the session timeout
                session_timeout,
                subscription,
                assignment,
            )
        )
    if flexible:
        r.tagged_fields()
    r.end()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))
