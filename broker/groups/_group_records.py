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
flexible versions are skipped. KIP-848's consumer-group records (key versions 3-8) are in
`_group_records_consumer`, share groups' (KIP-932, key versions 10-15) in `_group_records_share`.
Key versions this code does not know (9: 4.0's share-group partition metadata, and 16 and up) raise
`UnknownGroupRecordError`, which a loader skips, as Kafka's does.
Malformed bytes raise `CorruptMessageError` (CORRUPT_MESSAGE); nothing else escapes.
"""

from __future__ import annotations

from typing import NamedTuple

from kraftlog.broker.coordinator import I16 as _I16
from kraftlog.broker.coordinator import I32 as _I32
from kraftlog.broker.coordinator import I64 as _I64
from kraftlog.broker.coordinator import Reader, bytes_, string
from kraftlog.broker.groups._group_records_consumer import (
    CONSUMER_KEY_VERSIONS,
    ConsumerKey,
    ConsumerValue,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from kraftlog.broker.groups._group_records_share import (
    SHARE_KEY_VERSIONS,
    ShareKey,
    ShareValue,
    decode_share_key,
    decode_share_value,
    encode_share_key,
    encode_share_value,
)
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


GroupKey = OffsetCommitKey | GroupMetadataKey | ConsumerKey | ShareKey
GroupValue = OffsetCommitValue | GroupMetadataValue | ConsumerValue | ShareValue


# ================================================================================= encoding


def encode_key(key: GroupKey) -> bytes:
    """The record key: its version, then its fields (OffsetCommitKey v1, GroupMetadataKey v2)."""
    if isinstance(key, ShareKey):
        return encode_share_key(key)
    if not isinstance(key, OffsetCommitKey | GroupMetadataKey):
        return encode_consumer_key(key)
    if isinstance(key, OffsetCommitKey):
        return _I16.pack(1) + string(key.group) + string(key.topic) + _I32.pack(key.partition)
    return _I16.pack(2) + string(key.group)


def encode_value(value: GroupValue) -> bytes:
    """The record value, in the version Kafka 4.x writes (see the module docstring)."""
    if isinstance(value, ShareValue):
        return encode_share_value(value)
    if not isinstance(value, OffsetCommitValue | GroupMetadataValue):
        return encode_consumer_value(value)
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp_ms >= 0:  # v1: no leader epoch, an expire timestamp
            return (
                _I16.pack(1)
                + _I64.pack(value.offset)
                + string(value.metadata)
                + _I64.pack(value.commit_timestamp_ms)
                + _I64.pack(value.expire_timestamp_ms)
            )
        return (
            _I16.pack(3)
            + _I64.pack(value.offset)
            + _I32.pack(value.leader_epoch)
            + string(value.metadata)
            + _I64.pack(value.commit_timestamp_ms)
        )
    parts = [
        _I16.pack(3),
        string(value.protocol_type),
        _I32.pack(value.generation),
        string(value.protocol),
        string(value.leader),
        _I64.pack(value.current_state_timestamp_ms),
        _I32.pack(len(value.members)),
    ]
    for m in value.members:
        parts += [
            string(m.member_id),
            string(m.group_instance_id),
            string(m.client_id),
            string(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            bytes_(m.subscription),
            bytes_(m.assignment),
        ]
    return b"".join(parts)


# ================================================================================= decoding


def decode_key(data: bytes) -> GroupKey:
    """A ``__consumer_offsets`` key; `UnknownGroupRecordError` for key versions it does not know."""
    r = Reader(data, "__consumer_offsets key")
    version = r.int16()
    if version in (0, 1):
        key: GroupKey = OffsetCommitKey(r.required_string(False), r.required_string(False), r.int32())
    elif version == 2:
        key = GroupMetadataKey(r.required_string(False))
    elif version in CONSUMER_KEY_VERSIONS:
        key = decode_consumer_key(version, r)
    elif version in SHARE_KEY_VERSIONS:
        key = decode_share_key(version, r)
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
    if isinstance(key, GroupMetadataKey):
        return _decode_group_metadata(data)
    if isinstance(key, ShareKey):
        return decode_share_value(key, data)
    return decode_consumer_value(key, data)


def _decode_offset_commit(data: bytes) -> OffsetCommitValue:
    r = Reader(data, "OffsetCommitValue")
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
    r = Reader(data, "GroupMetadataValue")
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
