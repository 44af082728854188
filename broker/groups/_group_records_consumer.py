"""The records of KIP-848 consumer groups (``group.protocol=consumer``) in ``__consumer_offsets``,
in Kafka 4.0's schemas: keys are non-flexible (version = record type), values flexible v0.

- 3 ``ConsumerGroupMetadataKey`` (group) -> epoch: the group epoch;
- 4 ``ConsumerGroupPartitionMetadataKey`` (group) -> the subscribed topics' ids, names and
  partition counts when the epoch was last bumped (racks are not written: 4.0 ignores them too);
- 5 ``ConsumerGroupMemberMetadataKey`` (group, member) -> the member's subscription and client;
- 6 ``ConsumerGroupTargetAssignmentMetadataKey`` (group) -> the target assignment's epoch;
- 7 ``ConsumerGroupTargetAssignmentMemberKey`` (group, member) -> the member's target partitions;
- 8 ``ConsumerGroupCurrentMemberAssignmentKey`` (group, member) -> the member's epochs, state,
  assigned partitions and those it still has to revoke.

An assignment is a tuple of (topic id, partitions) pairs, topic ids in kraftlog's canonical text
form, both sorted, so that equal assignments are equal values.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from kraftlog.broker.coordinator import I8, I16, I32, Reader, compact_array_length, compact_string, string
from kraftlog.common.errors import CorruptMessageError

__all__ = [
    "Assignment",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "TopicMetadata",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerKey",
    "ConsumerValue",
    "CONSUMER_KEY_VERSIONS",
    "CONSUMER_KEY_TYPES",
    "encode_consumer_key",
    "encode_consumer_value",
    "decode_consumer_key",
    "decode_consumer_value",
    "assignment_of",
]

Assignment = tuple[tuple[str, tuple[int, ...]], ...]


def assignment_of(partitions: dict[str, set[int]] | dict[str, frozenset[int]]) -> Assignment:
    """The canonical (sorted, no empty topics) form of a topic id -> partitions mapping."""
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(partitions.items()) if ps)


class ConsumerGroupMetadataKey(NamedTuple):
    group: str


class ConsumerGroupMetadataValue(NamedTuple):
    epoch: int


class ConsumerGroupPartitionMetadataKey(NamedTuple):
    group: str


class TopicMetadata(NamedTuple):
    topic_id: str
    name: str
    num_partitions: int


class ConsumerGroupPartitionMetadataValue(NamedTuple):
    topics: tuple[TopicMetadata, ...]


class ConsumerGroupMemberMetadataKey(NamedTuple):
    group: str
    member_id: str


class ConsumerGroupMemberMetadataValue(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


class ConsumerGroupTargetAssignmentMetadataKey(NamedTuple):
    group: str


class ConsumerGroupTargetAssignmentMetadataValue(NamedTuple):
    assignment_epoch: int


class ConsumerGroupTargetAssignmentMemberKey(NamedTuple):
    group: str
    member_id: str


class ConsumerGroupTargetAssignmentMemberValue(NamedTuple):
    partitions: Assignment


class ConsumerGroupCurrentMemberAssignmentKey(NamedTuple):
    group: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: int  # 0 stable, 1 unrevoked partitions, 2 unreleased partitions, 127 unknown
    assigned: Assignment
    pending_revocation: Assignment


ConsumerKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
)
ConsumerValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
)

_KEY_VERSION: dict[type, int] = {
    ConsumerGroupMetadataKey: 3,
    ConsumerGroupPartitionMetadataKey: 4,
    ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6,
    ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8,
}
_KEY_TYPE = {v: k for k, v in _KEY_VERSION.items()}
CONSUMER_KEY_VERSIONS = frozenset(_KEY_TYPE)
CONSUMER_KEY_TYPES = tuple(_KEY_VERSION)

# ================================================================================= encoding

_NO_TAGS = b"\x00"


def encode_consumer_key(key: ConsumerKey) -> bytes:
    out = I16.pack(_KEY_VERSION[type(key)]) + string(key.group)
    member_id = getattr(key, "member_id", None)
    return out if member_id is None else out + string(member_id)


def _assignment(value: Assignment) -> bytes:
    parts = [compact_array_length(len(value))]
    for topic_id, partitions in value:
        parts += [uuid.UUID(topic_id).bytes, compact_array_length(len(partitions))]
        parts += [I32.pack(p) for p in partitions]
        parts.append(_NO_TAGS)
    return b"".join(parts)


def _strings(values: tuple[str, ...]) -> bytes:
    return compact_array_length(len(values)) + b"".join(compact_string(v) for v in values)


def encode_consumer_value(value: ConsumerValue) -> bytes:
    """The value, version 0 (flexible), with no tagged fields."""
    body: list[bytes] = [I16.pack(0)]
    if isinstance(value, ConsumerGroupMetadataValue):
        body.append(I32.pack(value.epoch))
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        body.append(I32.pack(value.assignment_epoch))
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        body.append(compact_array_length(len(value.topics)))
        for t in value.topics:
            body += [uuid.UUID(t.topic_id).bytes, compact_string(t.name), I32.pack(t.num_partitions)]
            body += [compact_array_length(0), _NO_TAGS]  # no rack metadata
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        body += [
            compact_string(value.instance_id),
            compact_string(value.rack_id),
            compact_string(value.client_id),
            compact_string(value.client_host),
            _strings(value.subscribed_topic_names),
            compact_string(value.subscribed_topic_regex),
            I32.pack(value.rebalance_timeout_ms),
            compact_string(value.server_assignor),
        ]
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        body.append(_assignment(value.partitions))
    else:
        body += [
            I32.pack(value.member_epoch),
            I32.pack(value.previous_member_epoch),
            I8.pack(value.state),
            _assignment(value.assigned),
            _assignment(value.pending_revocation),
        ]
    body.append(_NO_TAGS)
    return b"".join(body)


# ================================================================================= decoding


def decode_consumer_key(version: int, r: Reader) -> ConsumerKey:
    """The rest of a key whose version (3-8) was read already."""
    kind = _KEY_TYPE[version]
    group = r.required_string(False)
    if kind in (
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupCurrentMemberAssignmentKey,
    ):
        key: ConsumerKey = kind(group, r.required_string(False))
    else:
        key = kind(group)
    return key


def _read_assignment(r: Reader) -> Assignment:
    out = []
    for _ in range(r.array_length(True)):
        topic_id = r.uuid()
        partitions = tuple(sorted(r.int32() for _ in range(r.array_length(True))))
        r.tagged_fields()
        out.append((topic_id, partitions))
    return tuple(sorted(out))


def _read_strings(r: Reader) -> tuple[str, ...]:
    return tuple(r.required_string(True) for _ in range(r.array_length(True)))


def decode_consumer_value(key: ConsumerKey, data: bytes) -> ConsumerValue:
    """The value of ``key``: version 0; tagged fields (such as a classic member's metadata of a
    group upgraded online, which kraftlog does not do) are skipped."""
    name = type(key).__name__.replace("Key", "Value")
    r = Reader(data, name)
    version = r.int16()
    if version != 0:
        raise CorruptMessageError(f"{name} version {version} is unknown")
    value: ConsumerValue
    if isinstance(key, ConsumerGroupMetadataKey):
        value = ConsumerGroupMetadataValue(r.int32())
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        value = ConsumerGroupTargetAssignmentMetadataValue(r.int32())
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        topics = []
        for _ in range(r.array_length(True)):
            topic_id, topic_name, n = r.uuid(), r.required_string(True), r.int32()
            for _p in range(r.array_length(True)):  # racks per partition: read past
                r.int32()
                _read_strings(r)
                r.tagged_fields()
            r.tagged_fields()
            topics.append(TopicMetadata(topic_id, topic_name, n))
        value = ConsumerGroupPartitionMetadataValue(tuple(topics))
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        value = ConsumerGroupMemberMetadataValue(
            r.string(True, nullable=True),
            r.string(True, nullable=True),
            r.required_string(True),
            r.required_string(True),
            _read_strings(r),
            r.string(True, nullable=True),
            r.int32(),
            r.string(True, nullable=True),
        )
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        value = ConsumerGroupTargetAssignmentMemberValue(_read_assignment(r))
    else:
        value = ConsumerGroupCurrentMemberAssignmentValue(
            r.int32(), r.int32(), r.int8(), _read_assignment(r), _read_assignment(r)
        )
    r.tagged_fields()
    r.end()
    return value
