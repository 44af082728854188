"""Records of the internal topic ``__share_group_state``, in Kafka's own binary schemas.

The share coordinator keeps each share partition's state, keyed by (group, topic id, partition),
as records of one partition of ``__share_group_state`` (compacted):

- key type 0 ``ShareSnapshotKey`` -> ``ShareSnapshotValue``: the whole state (snapshot epoch, state
  epoch, leader epoch, start offset, create and write timestamps, state batches);
- key type 1 ``ShareUpdateKey`` -> ``ShareUpdateValue``: a change to merge into the last snapshot
  (snapshot epoch, leader epoch, start offset or -1 for unchanged, state batches);
- a null value on a snapshot key (tombstone): the state was deleted.

Keys are non-flexible: an int16 record type, then group (string), topic id (uuid), partition
(int32). Values are flexible version 0: an int16 version, the fields, compact arrays of state
batches (first offset, last offset, delivery state int8, delivery count int16), tagged fields.
KIP-1226's delivery-complete count travels as tagged field 0 (-1, absent, when unknown). Unknown
tagged fields are skipped; malformed bytes raise `CorruptMessageError` (CORRUPT_MESSAGE), a key type
this code does not know `UnknownShareRecordError`, which a loader skips.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

from kraftlog.broker.coordinator import I8, I16, I32, I64, Reader, compact_array_length, string, uvarint
from kraftlog.broker.share._share_types import StateBatch
from kraftlog.common.errors import CorruptMessageError

__all__ = [
    "ShareSnapshotKey",
    "ShareUpdateKey",
    "ShareSnapshotValue",
    "ShareUpdateValue",
    "ShareKey",
    "ShareValue",
    "UnknownShareRecordError",
    "SHARE_STATE_TOPIC",
    "encode_key",
    "encode_value",
    "decode_key",
    "decode_value",
]

SHARE_STATE_TOPIC = "__share_group_state"

_SNAPSHOT_TYPE = 0
_UPDATE_TYPE = 1
_DELIVERY_COMPLETE_TAG = 0


class UnknownShareRecordError(CorruptMessageError):
    """A ``__share_group_state`` record of a key type this broker does not know."""


class ShareSnapshotKey(NamedTuple):
    group: str
    topic_id: str
    partition: int


class ShareUpdateKey(NamedTuple):
    group: str
    topic_id: str
    partition: int


class ShareSnapshotValue(NamedTuple):
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp_ms: int
    write_timestamp_ms: int
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


class ShareUpdateValue(NamedTuple):
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: unchanged
    state_batches: tuple[StateBatch, ...]
    delivery_complete_count: int = -1


ShareKey = ShareSnapshotKey | ShareUpdateKey
ShareValue = ShareSnapshotValue | ShareUpdateValue


def encode_key(key: ShareKey) -> bytes:
    kind = _SNAPSHOT_TYPE if isinstance(key, ShareSnapshotKey) else _UPDATE_TYPE
    return I16.pack(kind) + string(key.group) + uuid.UUID(key.topic_id).bytes + I32.pack(key.partition)


def _batches(batches: tuple[StateBatch, ...]) -> bytes:
    parts = [compact_array_length(len(batches))]
    for b in batches:
        parts += [I64.pack(b.first_offset), I64.pack(b.last_offset), I8.pack(b.delivery_state)]
        parts += [I16.pack(b.delivery_count), b"\x00"]  # no tagged fields
    return b"".join(parts)


def _tags(delivery_complete_count: int) -> bytes:
    if delivery_complete_count < 0:
        return b"\x00"
    field = I32.pack(delivery_complete_count)
    return b"\x01" + uvarint(_DELIVERY_COMPLETE_TAG) + uvarint(len(field)) + field


def encode_value(value: ShareValue) -> bytes:
    """The record value, version 0 (flexible)."""
    if isinstance(value, ShareSnapshotValue):
        head = [
            I16.pack(0),
            I32.pack(value.snapshot_epoch),
            I32.pack(value.state_epoch),
            I32.pack(value.leader_epoch),
            I64.pack(value.start_offset),
            I64.pack(value.create_timestamp_ms),
            I64.pack(value.write_timestamp_ms),
        ]
    else:
        head = [I16.pack(0), I32.pack(value.snapshot_epoch), I32.pack(value.leader_epoch), I64.pack(value.start_offset)]
    return b"".join(head) + _batches(value.state_batches) + _tags(value.delivery_complete_count)


def decode_key(data: bytes) -> ShareKey:
    r = Reader(data, "__share_group_state key")
    kind = r.int16()
    if kind not in (_SNAPSHOT_TYPE, _UPDATE_TYPE):
        raise UnknownShareRecordError(f"__share_group_state key type {kind} is not one this broker reads")
    group, topic_id, partition = r.required_string(False), r.uuid(), r.int32()
    r.end()
    if kind == _SNAPSHOT_TYPE:
        return ShareSnapshotKey(group, topic_id, partition)
    return ShareUpdateKey(group, topic_id, partition)


def _read_batches(r: Reader) -> tuple[StateBatch, ...]:
    out = []
    for _ in range(r.array_length(True)):
        batch = StateBatch(r.int64(), r.int64(), r.int8(), r.int16())
        r.tagged_fields()
        if batch.last_offset < batch.first_offset:
            raise CorruptMessageError(f"{r.what} has a state batch ending before it starts: {batch}")
        out.append(batch)
    return tuple(out)


def _read_tags(r: Reader) -> int:
    """The delivery-complete count among the tagged fields (-1 when absent); others skipped."""
    found = -1
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag == _DELIVERY_COMPLETE_TAG and size == 4:
            found = r.int32()
        else:
            r.skip(size)
    return found


def decode_value(key: ShareKey, data: bytes | None) -> ShareValue | None:
    """The value for ``key``: None for a tombstone."""
    if data is None:
        return None
    what = "ShareSnapshotValue" if isinstance(key, ShareSnapshotKey) else "ShareUpdateValue"
    r = Reader(data, what)
    version = r.int16()
    if version != 0:
        raise CorruptMessageError(f"{what} version {version} is unknown")
    value: ShareValue
    if isinstance(key, ShareSnapshotKey):
        epochs = r.int32(), r.int32(), r.int32()
        start, created, written = r.int64(), r.int64(), r.int64()
        batches = _read_batches(r)
        value = ShareSnapshotValue(*epochs, start, created, written, batches, _read_tags(r))
    else:
        snapshot_epoch, leader_epoch, start = r.int32(), r.int32(), r.int64()
        batches = _read_batches(r)
        value = ShareUpdateValue(snapshot_epoch, leader_epoch, start, batches, _read_tags(r))
    r.end()
    return value
