"""KIP-848's consumer-group records in ``__consumer_offsets``: Kafka 4.0's bytes, both ways."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraftlog.broker.groups._group_records import decode_key, decode_value, encode_key, encode_value
from kraftlog.broker.groups._group_records_consumer import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicMetadata,
)
from kraftlog.common.errors import CorruptMessageError

T1 = "5f7f0a4c-61a7-4c5e-9a43-1d2f1c0b9e01"
T2 = "00000000-0000-0000-0000-000000000002"


def test_current_assignment_value_is_kafkas_bytes() -> None:
    value = ConsumerGroupCurrentMemberAssignmentValue(7, 6, 1, ((T1, (0, 2)),), ((T2, (5,)),))
    expected = (
        b"\x00\x00"  # version 0
        + struct.pack(">iib", 7, 6, 1)
        + b"\x02"  # one topic (compact: n + 1)
        + uuid.UUID(T1).bytes
        + b"\x03"
        + struct.pack(">ii", 0, 2)
        + b"\x00"  # the topic's tagged fields
        + b"\x02"
        + uuid.UUID(T2).bytes
        + b"\x02"
        + struct.pack(">i", 5)
        + b"\x00"
        + b"\x00"  # the value's tagged fields
    )
    assert encode_value(value) == expected
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    assert encode_key(key) == b"\x00\x08\x00\x01g\x00\x01m"
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, expected) == value


def test_member_metadata_nulls_and_strings() -> None:
    value = ConsumerGroupMemberMetadataValue(None, "r1", "client", "/127.0.0.1", ("a", "b"), None, 30000, "uniform")
    raw = encode_value(value)
    assert raw.startswith(b"\x00\x00\x00\x03r1")  # version 0, null instance id, rack "r1"
    key = ConsumerGroupMemberMetadataKey("g", "m")
    assert decode_value(key, raw) == value


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(12)),
        (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(12)),
        (ConsumerGroupTargetAssignmentMemberKey("g", "m"), ConsumerGroupTargetAssignmentMemberValue(((T1, (1, 3)),))),
        (ConsumerGroupPartitionMetadataKey("g"), ConsumerGroupPartitionMetadataValue((TopicMetadata(T1, "t", 12),))),
    ],
)
def test_round_trips(key: object, value: object) -> None:
    k = decode_key(encode_key(key))  # type: ignore[arg-type]
    assert k == key
    assert decode_value(k, encode_value(value)) == value  # type: ignore[arg-type]


def test_tombstones_and_truncation() -> None:
    key = ConsumerGroupMetadataKey("g")
    assert decode_value(key, None) is None
    raw = encode_value(ConsumerGroupMetadataValue(3))
    with pytest.raises(CorruptMessageError):
        decode_value(key, raw[:-2])
    with pytest.raises(CorruptMessageError):
        decode_value(key, b"\x00\x01" + raw[2:])  # a version this broker does not know


@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([0, 1, 2, 127]),
    st.dictionaries(st.uuids().map(str), st.sets(st.integers(0, 10_000), min_size=1), max_size=4),
)
def test_current_assignment_round_trips(epoch: int, previous: int, state: int, parts: dict[str, set[int]]) -> None:
    assigned = tuple((t, tuple(sorted(p))) for t, p in sorted(parts.items()))
    value = ConsumerGroupCurrentMemberAssignmentValue(epoch, previous, state, assigned, ())
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "m")
    assert decode_value(key, encode_value(value)) == value
