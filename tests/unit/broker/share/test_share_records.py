"""``__share_group_state`` records in Kafka's schemas: the bytes of a key and a value field by
field, round trips of every record type, tombstones, tagged fields, corrupt input, and the merge
of state batches (Kafka's PersisterStateBatchCombiner) against a per-offset model."""

from __future__ import annotations

import struct
import uuid

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlog.broker.share import (
    ShareGroupOffset,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
    StateBatch,
    UnknownShareRecordError,
    combine_state_batches,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    kafka_uuid_text,
    share_state_partition,
)
from kraftlog.common import errors as kerr

TOPIC = "6f1c1f3e-1b8a-4c53-9a4e-2f7f3a9d0b11"


def test_key_bytes_field_by_field() -> None:
    raw = encode_key(ShareSnapshotKey("g", TOPIC, 3))
    assert raw == struct.pack(">hh", 0, 1) + b"g" + uuid.UUID(TOPIC).bytes + struct.pack(">i", 3)
    assert encode_key(ShareUpdateKey("g", TOPIC, 3))[:2] == struct.pack(">h", 1)


def test_update_value_bytes_field_by_field() -> None:
    value = ShareUpdateValue(2, 7, 100, (StateBatch(100, 109, 2, 1),))
    raw = encode_value(value)
    expected = struct.pack(">hiiq", 0, 2, 7, 100) + b"\x02" + struct.pack(">qqbh", 100, 109, 2, 1) + b"\x00\x00"
    assert raw == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (
            ShareSnapshotKey("group-1", TOPIC, 0),
            ShareSnapshotValue(3, 1, 5, 42, 1_000, 2_000, (StateBatch(42, 50, 0, 2), StateBatch(51, 51, 4, 5))),
        ),
        (ShareSnapshotKey("g", TOPIC, 9), ShareSnapshotValue(0, 0, -1, -1, 7, 7, (), delivery_complete_count=12)),
        (ShareUpdateKey("g", TOPIC, 1), ShareUpdateValue(4, 2, -1, (StateBatch(0, 0, 2, 1),), 3)),
        (ShareSnapshotKey("g", TOPIC, 2), None),
    ],
)
def test_round_trip(
    key: ShareSnapshotKey | ShareUpdateKey, value: ShareSnapshotValue | ShareUpdateValue | None
) -> None:
    decoded = decode_key(encode_key(key))
    assert decoded == key and type(decoded) is type(key)
    assert decode_value(decoded, None if value is None else encode_value(value)) == value


def test_unknown_tagged_fields_are_skipped() -> None:
    raw = encode_value(ShareUpdateValue(1, 1, 5, ()))
    tagged = raw[:-1] + b"\x01\x05\x02ab"  # one tagged field, tag 5, two bytes
    assert decode_value(ShareUpdateKey("g", TOPIC, 0), tagged) == ShareUpdateValue(1, 1, 5, ())


@pytest.mark.parametrize(
    "data",
    [
        b"\x00",  # short
        struct.pack(">h", 1) + b"\x00" * 30,  # unknown version
        encode_value(ShareUpdateValue(1, 1, 5, ())) + b"x",  # trailing bytes
        struct.pack(">hiiq", 0, 1, 1, 0) + b"\x02" + struct.pack(">qqbh", 9, 3, 0, 1) + b"\x00\x00",  # last < first
    ],
)
def test_corrupt_values_are_corrupt_message(data: bytes) -> None:
    with pytest.raises(kerr.CorruptMessageError):
        decode_value(ShareUpdateKey("g", TOPIC, 0), data)


def test_unknown_key_type_is_its_own_error() -> None:
    with pytest.raises(UnknownShareRecordError):
        decode_key(struct.pack(">hh", 7, 1) + b"g" + uuid.UUID(TOPIC).bytes + struct.pack(">i", 0))


def test_kafka_uuid_text_and_partition() -> None:
    assert kafka_uuid_text("00000000-0000-0000-0000-000000000001") == "AAAAAAAAAAAAAAAAAAAAAQ"
    placed = {share_state_partition("g", TOPIC, p, 50) for p in range(40)}
    assert placed <= set(range(50)) and len(placed) > 10  # spread, and stable:
    assert share_state_partition("g", TOPIC, 3, 50) == share_state_partition("g", TOPIC, 3, 50)


# ===================================================================== batch merging


def test_combine_overlays_clips_and_joins() -> None:
    current = [StateBatch(0, 9, 0, 1), StateBatch(10, 19, 2, 1)]
    newer = [StateBatch(5, 12, 2, 1)]
    assert combine_state_batches(current, newer, 3) == (
        StateBatch(3, 4, 0, 1),
        StateBatch(5, 19, 2, 1),
    )
    assert combine_state_batches(current, [], 25) == ()


def test_merge_of_an_update_keeps_the_snapshot_timestamps() -> None:
    base = ShareGroupOffset(1, 2, 3, 0, (StateBatch(0, 4, 0, 1),), 100, 200)
    merged = base.merge(ShareUpdateValue(1, 4, 2, (StateBatch(3, 3, 2, 1),), 9))
    assert merged == ShareGroupOffset(
        1, 2, 4, 2, (StateBatch(2, 2, 0, 1), StateBatch(3, 3, 2, 1), StateBatch(4, 4, 0, 1)), 100, 200, 9
    )
    assert base.merge(ShareUpdateValue(1, 4, -1, ())).start_offset == 0  # -1: unchanged


batch = st.builds(
    lambda first, length, state, count: StateBatch(first, first + length, state, count),
    st.integers(0, 30),
    st.integers(0, 6),
    st.sampled_from([0, 2, 4]),
    st.integers(0, 3),
)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.lists(batch, max_size=4), max_size=5), st.lists(st.integers(-1, 25), min_size=5, max_size=5))
def test_combining_writes_equals_the_per_offset_model(writes: list[list[StateBatch]], starts: list[int]) -> None:
    """Folding writes into the state batches equals keeping, per offset, the last write's state
    and count, dropping offsets below the start; the result is sorted, disjoint and joined."""
    state: tuple[StateBatch, ...] = ()
    model: dict[int, tuple[int, int]] = {}
    start = 0
    for write, new_start in zip(writes, starts, strict=False):
        start = start if new_start == -1 else new_start
        for b in write:
            for o in range(b.first_offset, b.last_offset + 1):
                model[o] = (b.delivery_state, b.delivery_count)
        model = {o: v for o, v in model.items() if o >= start}
        state = combine_state_batches(state, write, start)
        flat = {
            o: (b.delivery_state, b.delivery_count) for b in state for o in range(b.first_offset, b.last_offset + 1)
        }
        assert flat == model
        assert all(start <= b.first_offset <= b.last_offset for b in state)
        for a, b in zip(state, state[1:], strict=False):
            assert a.last_offset < b.first_offset
            assert not (a.last_offset + 1 == b.first_offset and a[2:] == b[2:])


def test_combine_drops_a_split_piece_left_below_the_start() -> None:
    assert combine_state_batches([StateBatch(0, 1, 0, 1)], [StateBatch(1, 1, 0, 2)], 1) == (StateBatch(1, 1, 0, 2),)
