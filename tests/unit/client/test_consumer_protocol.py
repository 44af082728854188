"""Kafka's consumer embedded protocol bytes (issue 14), written out by hand from Kafka's
ConsumerProtocolSubscription / ConsumerProtocolAssignment schemas, and the assignor names."""

from __future__ import annotations

import struct

import pytest

from kraftlog.client._metadata import TopicPartition
from kraftlog.client.assignors._assignors import RangeAssignor, Subscription
from kraftlog.client.assignors._sticky import CooperativeStickyAssignor
from kraftlog.client.consumer._consumer_groups import make_assignors
from kraftlog.client.consumer._consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kraftlog.common import errors as kerr


def s16(text: str | None) -> bytes:
    return struct.pack(">h", -1) if text is None else struct.pack(">h", len(text)) + text.encode()


def test_subscription_v3_bytes() -> None:
    sub = Subscription(
        ["a", "bb"], None, [TopicPartition("a", 1), TopicPartition("a", 3)], rack_id="r1", generation_id=7
    )
    expected = (
        struct.pack(">h", 3)
        + struct.pack(">i", 2) + s16("a") + s16("bb")
        + struct.pack(">i", -1)  # null user data
        + struct.pack(">i", 1) + s16("a") + struct.pack(">iii", 2, 1, 3)
        + struct.pack(">i", 7)
        + s16("r1")
    )  # fmt: skip
    assert encode_subscription(sub) == expected
    back = decode_subscription(expected)
    assert (back.topics, back.user_data, back.owned_partitions, back.generation_id, back.rack_id) == (
        ["a", "bb"],
        None,
        [TopicPartition("a", 1), TopicPartition("a", 3)],
        7,
        "r1",
    )


def test_older_and_newer_subscription_versions_read() -> None:
    v0 = struct.pack(">h", 0) + struct.pack(">i", 1) + s16("t") + struct.pack(">i", 2) + b"ud"
    sub = decode_subscription(v0)
    assert (sub.topics, sub.user_data, sub.owned_partitions, sub.generation_id) == (["t"], b"ud", [], -1)
    v9 = encode_subscription(Subscription(["t"], b"", [], rack_id=None, generation_id=2)) + b"future field"
    v9 = struct.pack(">h", 9) + v9[2:]  # a newer version is read with the newest layout known
    assert decode_subscription(v9).generation_id == 2
    with pytest.raises(kerr.InconsistentGroupProtocolError):
        decode_subscription(b"\x00\x03\x00\x00\x00\x05")


def test_assignment_bytes() -> None:
    data = encode_assignment([TopicPartition("t", 0), TopicPartition("u", 2)])
    assert data == (
        struct.pack(">h", 3)
        + struct.pack(">i", 2) + s16("t") + struct.pack(">ii", 1, 0) + s16("u") + struct.pack(">ii", 1, 2)
        + struct.pack(">i", -1)
    )  # fmt: skip
    assert decode_assignment(data) == ([TopicPartition("t", 0), TopicPartition("u", 2)], None)
    assert decode_assignment(b"") == ([], None)  # a member the leader gave nothing


def test_assignment_strategy_names() -> None:
    chosen = make_assignors("range, org.apache.kafka.clients.consumer.CooperativeStickyAssignor")
    assert [type(a) for a in chosen] == [RangeAssignor, CooperativeStickyAssignor]
    with pytest.raises(ValueError, match="unknown assignor 'fair'"):
        make_assignors("fair")
    with pytest.raises(ValueError):
        make_assignors("")
