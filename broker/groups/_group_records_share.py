"""The records of share groups (KIP-932) in ``__consumer_offsets``, in Kafka 4.2's schemas: keys are
non-flexible (version = record type), values flexible v0.

- 10 ``ShareGroupMemberMetadataKey`` (group, member) -> rack, client id and host, subscribed topics;
- 11 ``ShareGroupMetadataKey`` (group) -> the group epoch and the subscribed topics' metadata hash;
- 12 ``ShareGroupTargetAssignmentMetadataKey`` (group) -> the target assignment's epoch;
- 13 ``ShareGroupTargetAssignmentMemberKey`` (group, member) -> the member's target partitions;
- 14 ``ShareGroupCurrentMemberAssignmentKey`` (group, member) -> the member's epochs, state and
  assigned partitions (a share member never revokes: nothing is pending);
- 15 ``ShareGroupStatePartitionMetadataKey`` (group) -> the partitions whose share-group state is
  being initialized (with when that began), is initialized, and the topics being deleted.

Key 9 (``ShareGroupPartitionMetadata`` of Kafka 4.0) is gone from 4.2's schema: its records are
unknown here and skipped on load, as Kafka's loader skips them. Assignments are in the canonical
form of `_group_records_consumer` (topic id text, sorted).
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from kraftlog.broker.coordinator import I8, I16, I32, I64, Reader, compact_array_length, compact_string, string
from kraftlog.broker.groups._group_records_consumer import Assignment
from kraftlog.common.errors import CorruptMessageError

__all__ = [
    "ShareGroupMemberMetadataKey",
    "ShareGroupMemberMetadataValue",
    "ShareGroupMetadataKey",
    "ShareGroupMetadataValue",
    "ShareGroupTargetAssignmentMetadataKey",
    "ShareGroupTargetAssignmentMetadataValue",
    "ShareGroupTargetAssignmentMemberKey",
    "ShareGroupTargetAssignmentMemberValue",
    "ShareGroupCurrentMemberAssignmentKey",
    "ShareGroupCurrentMemberAssignmentValue",
    "ShareGroupStatePartitionMetadataKey",
    "ShareGroupStatePartitionMetadataValue",
    "ShareTopicPartitions",
    "ShareKey",
    "ShareValue",
    "SHARE_KEY_VERSIONS",
    "SHARE_KEY_TYPES",
    "SHARE_VALUE_TYPES",
    "encode_share_key",
    "encode_share_value",
    "decode_share_key",
    "decode_share_value",
]


class ShareGroupMemberMetadataKey(NamedTuple):
    group: str
    member_id: str


class ShareGroupMemberMetadataValue(NamedTuple):
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


class ShareGroupMetadataKey(NamedTuple):
    group: str


class ShareGroupMetadataValue(NamedTuple):
    epoch: int
    metadata_hash: int = 0


class ShareGroupTargetAssignmentMetadataKey(NamedTuple):
    group: str


class ShareGroupTargetAssignmentMetadataValue(NamedTuple):
    assignment_epoch: int


class ShareGroupTargetAssignmentMemberKey(NamedTuple):
    group: str
    member_id: str


class ShareGroupTargetAssignmentMemberValue(NamedTuple):
    partitions: Assignment


class ShareGroupCurrentMemberAssignmentKey(NamedTuple):
    group: str
    member_id: str


class ShareGroupCurrentMemberAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: int  # 0 stable (the only state a share member has)
    assigned: Assignment


class ShareGroupStatePartitionMetadataKey(NamedTuple):
    group: str


class ShareTopicPartitions(NamedTuple):
    topic_id: str
    topic_name: str
    partitions: tuple[int, ...]


class ShareGroupStatePartitionMetadataValue(NamedTuple):
    initializing: tuple[ShareTopicPartitions, ...]
    initialized: tuple[ShareTopicPartitions, ...]
    deleting: tuple[tuple[str, str], ...]  # (topic id, topic name)


ShareKey = (
    ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
    | ShareGroupStatePartitionMetadataKey
)
ShareValue = (
    ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
)

_KEY_VERSION: dict[type, int] = {
    ShareGroupMemberMetadataKey: 10,
    ShareGroupMetadataKey: 11,
    ShareGroupTargetAssignmentMetadataKey: 12,
    ShareGroupTargetAssignmentMemberKey: 13,
    ShareGroupCurrentMemberAssignmentKey: 14,
    ShareGroupStatePartitionMetadataKey: 15,
}
_KEY_TYPE = {v: k for k, v in _KEY_VERSION.items()}
_MEMBER_KEYS = (ShareGroupMemberMetadataKey, ShareGroupTargetAssignmentMemberKey, ShareGroupCurrentMemberAssignmentKey)
SHARE_KEY_VERSIONS = frozenset(_KEY_TYPE)
SHARE_KEY_TYPES = tuple(_KEY_VERSION)
SHARE_VALUE_TYPES = (
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupStatePartitionMetadataValue,
)

_NO_TAGS = b"\x00"

# ================================================================================= encoding


def encode_share_key(key: ShareKey) -> bytes:
    out = I16.pack(_KEY_VERSION[type(key)]) + string(key.group)
    return out + string(key.member_id) if isinstance(key, _MEMBER_KEYS) else out


def _int32s(values: tuple[int, ...]) -> bytes:
    return compact_array_length(len(values)) + b"".join(I32.pack(v) for v in values)


def _assignment(value: Assignment) -> bytes:
    parts = [compact_array_length(len(value))]
    for topic_id, partitions in value:
        parts += [uuid.UUID(topic_id).bytes, _int32s(partitions), _NO_TAGS]
    return b"".join(parts)


def _topics(value: tuple[ShareTopicPartitions, ...]) -> bytes:
    parts = [compact_array_length(len(value))]
    for t in value:
        parts += [uuid.UUID(t.topic_id).bytes, compact_string(t.topic_name), _int32s(t.partitions), _NO_TAGS]
    return b"".join(parts)


def encode_share_value(value: ShareValue) -> bytes:
    """The value, version 0 (flexible), with no tagged fields."""
    body: list[bytes] = [I16.pack(0)]
    if isinstance(value, ShareGroupMemberMetadataValue):
        body += [
            compact_string(value.rack_id),
            compact_string(value.client_id),
            compact_string(value.client_host),
            compact_array_length(len(value.subscribed_topic_names)),
            *(compact_string(t) for t in value.subscribed_topic_names),
        ]
    elif isinstance(value, ShareGroupMetadataValue):
        body += [I32.pack(value.epoch), I64.pack(value.metadata_hash)]
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        body.append(I32.pack(value.assignment_epoch))
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        body.append(_assignment(value.partitions))
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        body += [
            I32.pack(value.member_epoch),
            I32.pack(value.previous_member_epoch),
            I8.pack(value.state),
            _assignment(value.assigned),
        ]
    else:
        body += [_topics(value.initializing), _topics(value.initialized), compact_array_length(len(value.deleting))]
        for topic_id, name in value.deleting:
            body += [uuid.UUID(topic_id).bytes, compact_string(name), _NO_TAGS]
    body.append(_NO_TAGS)
    return b"".join(body)


# ================================================================================= decoding


def decode_share_key(version: int, r: Reader) -> ShareKey:
    """The rest of a key whose version (10-15) was read already."""
    kind = _KEY_TYPE[version]
    group = r.required_string(False)
    if kind in _MEMBER_KEYS:
        key: ShareKey = kind(group, r.required_string(False))
    else:
        key = kind(group)
    return key


def _read_int32s(r: Reader) -> tuple[int, ...]:
    return tuple(sorted(r.int32() for _ in range(r.array_length(True))))


def _read_assignment(r: Reader) -> Assignment:
    out = []
    for _ in range(r.array_length(True)):
        topic_id = r.uuid()
        partitions = _read_int32s(r)
        r.tagged_fields()
        out.append((topic_id, partitions))
    return tuple(sorted(out))


def _read_topics(r: Reader) -> tuple[ShareTopicPartitions, ...]:
    out = []
    for _ in range(r.array_length(True)):
        topic_id, name, partitions = r.uuid(), r.required_string(True), _read_int32s(r)
        r.tagged_fields()
        out.append(ShareTopicPartitions(topic_id, name, partitions))
    return tuple(sorted(out))


def decode_share_value(key: ShareKey, data: bytes) -> ShareValue:
    """The value of ``key``, version 0; tagged fields are skipped."""
    name = type(key).__name__.replace("Key", "Value")
    r = Reader(data, name)
    version = r.int16()
    if version != 0:
        raise CorruptMessageError(f"{name} version {version} is unknown")
    value: ShareValue
    if isinstance(key, ShareGroupMemberMetadataKey):
        rack = r.string(True, nullable=True)
        client_id, client_host = r.required_string(True), r.required_string(True)
        topics = tuple(r.required_string(True) for _ in range(r.array_length(True)))
        value = ShareGroupMemberMetadataValue(rack, client_id, client_host, topics)
    elif isinstance(key, ShareGroupMetadataKey):
        value = ShareGroupMetadataValue(r.int32(), r.int64())
    elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        value = ShareGroupTargetAssignmentMetadataValue(r.int32())
    elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
        value = ShareGroupTargetAssignmentMemberValue(_read_assignment(r))
    elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
        value = ShareGroupCurrentMemberAssignmentValue(r.int32(), r.int32(), r.int8(), _read_assignment(r))
    else:
        initializing, initialized = _read_topics(r), _read_topics(r)
        deleting = []
        for _ in range(r.array_length(True)):
            deleting.append((r.uuid(), r.required_string(True)))
            r.tagged_fields()
        value = ShareGroupStatePartitionMetadataValue(initializing, initialized, tuple(sorted(deleting)))
    r.tagged_fields()
    r.end()
    return value
