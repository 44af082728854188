"""Share-group records (KIP-932) in Kafka 4.2's schemas: every key and value round-trips through
``__consumer_offsets``' codec, the bytes are Kafka's layout, and 4.0's key 9 is skipped as unknown."""

from __future__ import annotations

import struct

import pytest

from kraftlog.broker.groups._group_records import (
    UnknownGroupRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kraftlog.broker.groups._group_records_share import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareTopicPartitions,
)
from kraftlog.common.errors import CorruptMessageError

T1 = "00000000-0000-0000-0000-000000000001"
T2 = "00000000-0000-0000-0000-0000000000ff"

CASES = [
    (ShareGroupMemberMetadataKey("g", "m1"), ShareGroupMemberMetadataValue(None, "c", "/127.0.0.1", ("a", "b"))),
    (ShareGroupMemberMetadataKey("g", "m2"), ShareGroupMemberMetadataValue("r1", "", "", ())),
    (ShareGroupMetadataKey("g"), ShareGroupMetadataValue(7, -123456789012345)),
    (ShareGroupTargetAssignmentMetadataKey("g"), ShareGroupTargetAssignmentMetadataValue(7)),
    (ShareGroupTargetAssignmentMemberKey("g", "m1"), ShareGroupTargetAssignmentMemberValue(((T1, (0, 2)), (T2, (1,))))),
    (ShareGroupCurrentMemberAssignmentKey("g", "m1"), ShareGroupCurrentMemberAssignmentValue(7, 6, 0, ((T1, (0,)),))),
    (
        ShareGroupStatePartitionMetadataKey("g"),
        ShareGroupStatePartitionMetadataValue(
            (ShareTopicPartitions(T2, "t2", (3,)),), (ShareTopicPartitions(T1, "t1", (0, 1)),), ((T2, "t2"),)
        ),
    ),
]


@pytest.mark.parametrize(("key", "value"), CASES)
def test_round_trip(key: object, value: object) -> None:
    decoded = decode_key(encode_key(key))  # type: ignore[arg-type]
    assert decoded == key and type(decoded) is type(key)
    assert decode_value(decoded, encode_value(value)) == value  # type: ignore[arg-type]
    assert decode_value(decoded, None) is None


def test_kafkas_layout() -> None:
    assert encode_key(ShareGroupMetadataKey("g")) == struct.pack(">hh", 11, 1) + b"g"
    assert (
        encode_key(ShareGroupMemberMetadataKey("g", "m"))
        == struct.pack(">hh", 10, 1) + b"g" + struct.pack(">h", 1) + b"m"
    )
    # version 0, epoch, metadata hash, no tagged fields
    assert encode_value(ShareGroupMetadataValue(3, 9)) == struct.pack(">hiq", 0, 3, 9) + b"\x00"
    # version, epoch, previous epoch, state, one topic (compact length 2) with one partition
    current = encode_value(ShareGroupCurrentMemberAssignmentValue(2, 1, 0, ((T1, (5,)),)))
    assert current[:12] == struct.pack(">hiib", 0, 2, 1, 0) + b"\x02"
    assert current[12:28] == bytes.fromhex(T1.replace("-", ""))
    assert current[28:] == b"\x02" + struct.pack(">i", 5) + b"\x00\x00"


def test_kafka_40s_partition_metadata_key_is_skipped_and_garbage_is_corrupt() -> None:
    with pytest.raises(UnknownGroupRecordError):
        decode_key(struct.pack(">hh", 9, 1) + b"g")
    with pytest.raises(CorruptMessageError):
        decode_value(ShareGroupMetadataKey("g"), struct.pack(">hi", 1, 3))
    with pytest.raises(CorruptMessageError):
        decode_value(ShareGroupMetadataKey("g"), struct.pack(">hi", 0, 3))
