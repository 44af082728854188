"""``__consumer_offsets`` records in Kafka's schemas (issue 14): byte layouts written out by hand from
Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value definitions, every readable version, and
hostile bytes that must raise CORRUPT_MESSAGE and nothing else."""

from __future__ import annotations

import struct

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlog.broker.groups._group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownGroupRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kraftlog.common.errors import CorruptMessageError


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(text.encode())) + text.encode()


def compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw  # short strings: a one-byte uvarint


def test_offset_commit_bytes_are_kafkas() -> None:
    key = OffsetCommitKey("g", "t", 3)
    assert encode_key(key) == b"\x00\x01" + s16("g") + s16("t") + b"\x00\x00\x00\x03"
    value = OffsetCommitValue(offset=42, metadata="m", commit_timestamp_ms=1000, leader_epoch=7)
    assert encode_value(value) == (
        b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 7) + s16("m") + struct.pack(">q", 1000)
    )
    expiring = OffsetCommitValue(5, "", 10, expire_timestamp_ms=99)
    assert encode_value(expiring) == b"\x00\x01" + struct.pack(">q", 5) + s16("") + struct.pack(">qq", 10, 99)
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, encode_value(value)) == value
    assert decode_value(key, encode_value(expiring)) == expiring
    assert decode_value(key, None) is None  # a tombstone


def test_older_and_flexible_offset_commit_versions_read() -> None:
    key = OffsetCommitKey("g", "t", 0)
    v0 = b"\x00\x00" + struct.pack(">q", 9) + s16("meta") + struct.pack(">q", 77)
    assert decode_value(key, v0) == OffsetCommitValue(9, "meta", 77)
    v2 = b"\x00\x02" + struct.pack(">q", 9) + s16("") + struct.pack(">q", 77)
    assert decode_value(key, v2) == OffsetCommitValue(9, "", 77)
    # v4: compact metadata string, then tagged fields (one unknown tag 5 of 2 bytes, skipped)
    v4 = b"\x00\x04" + struct.pack(">q", 9) + struct.pack(">i", 3) + compact("x") + struct.pack(">q", 77)
    v4 += b"\x01\x05\x02ab"
    assert decode_value(key, v4) == OffsetCommitValue(9, "x", 77, leader_epoch=3)
    assert decode_key(b"\x00\x00" + s16("g") + s16("t") + b"\x00\x00\x00\x00") == key


def _member(i: int, instance: str | None = None) -> MemberMetadata:
    return MemberMetadata(f"m{i}", instance, f"client{i}", "/127.0.0.1", 60000, 45000, b"sub%d" % i, b"asg%d" % i)


def test_group_metadata_round_trip_and_bytes() -> None:
    key = GroupMetadataKey("group-1")
    assert encode_key(key) == b"\x00\x02" + s16("group-1")
    value = GroupMetadataValue("consumer", 4, "range", "m0", 1234, (_member(0, "i0"), _member(1)))
    raw = encode_value(value)
    assert raw[:2] == b"\x00\x03"
    expected = b"\x00\x03" + s16("consumer") + struct.pack(">i", 4) + s16("range") + s16("m0")
    expected += struct.pack(">q", 1234) + struct.pack(">i", 2)
    for m in value.members:
        expected += s16(m.member_id) + s16(m.group_instance_id) + s16(m.client_id) + s16(m.client_host)
        expected += struct.pack(">ii", m.rebalance_timeout_ms, m.session_timeout_ms)
        expected += struct.pack(">i", len(m.subscription)) + m.subscription
        expected += struct.pack(">i", len(m.assignment)) + m.assignment
    assert raw == expected
    assert decode_key(encode_key(key)) == key
    assert decode_value(key, raw) == value
    empty = GroupMetadataValue("consumer", 0, None, None, -1, ())
    assert decode_value(key, encode_value(empty)) == empty


def test_group_metadata_v0_and_v4_read() -> None:
    key = GroupMetadataKey("g")
    v0 = b"\x00\x00" + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("a") + struct.pack(">i", 1)
    v0 += s16("a") + s16("c") + s16("h") + struct.pack(">i", 3000) + struct.pack(">i", 1) + b"S"
    v0 += struct.pack(">i", 0)
    got = decode_value(key, v0)
    assert got == GroupMetadataValue(
        "consumer", 1, "range", "a", -1, (MemberMetadata("a", None, "c", "h", 3000, 3000, b"S", b""),)
    )
    v4 = b"\x00\x04" + compact("consumer") + struct.pack(">i", 2) + compact(None) + compact(None)
    v4 += struct.pack(">q", 5) + b"\x02"  # one member
    v4 += compact("a") + compact("inst") + compact("c") + compact("h") + struct.pack(">ii", 10, 20)
    v4 += b"\x02S" + b"\x01" + b"\x00"  # subscription b"S", empty assignment, no member tags
    v4 += b"\x00"  # no top-level tags
    assert decode_value(key, v4) == GroupMetadataValue(
        "consumer", 2, None, None, 5, (MemberMetadata("a", "inst", "c", "h", 10, 20, b"S", b""),)
    )


def test_unknown_key_versions_are_their_own_error() -> None:
    with pytest.raises(UnknownGroupRecordError):
        decode_key(b"\x00\x09" + s16("g"))  # Kafka 4.0's ShareGroupPartitionMetadataKey, gone from 4.2
    assert issubclass(UnknownGroupRecordError, CorruptMessageError)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00",
        b"\x00\x01" + s16("g"),
        b"\x00\x02" + b"\x00\x05ab",
        b"\x00\x02" + s16("g") + b"x",
        b"\x00\x02\xff\xfe",
    ],
)
def test_malformed_keys_are_corrupt_message(raw: bytes) -> None:
    with pytest.raises(CorruptMessageError):
        decode_key(raw)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=80), st.booleans())
def test_any_bytes_decode_or_raise_corrupt_message(raw: bytes, group: bool) -> None:
    key = GroupMetadataKey("g") if group else OffsetCommitKey("g", "t", 0)
    for call in (lambda: decode_key(raw), lambda: decode_value(key, raw)):
        try:
            call()
        except CorruptMessageError:
            pass


names = st.text(max_size=12)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.builds(
        GroupMetadataValue,
        names,
        st.integers(-(2**31), 2**31 - 1),
        st.none() | names,
        st.none() | names,
        st.integers(-(2**63), 2**63 - 1),
        st.lists(
            st.builds(
                MemberMetadata,
                names,
                st.none() | names,
                names,
                names,
                st.integers(-(2**31), 2**31 - 1),
                st.integers(-(2**31), 2**31 - 1),
                st.binary(max_size=20),
                st.binary(max_size=20),
            ),
            max_size=4,
        ).map(tuple),
    )
)
def test_group_metadata_round_trips(value: GroupMetadataValue) -> None:
    assert decode_value(GroupMetadataKey("g"), encode_value(value)) == value
