"""Committed offsets answered as Kafka 4.0 answers them (issue 25): OffsetDelete on a group with
members refuses per partition (GROUP_SUBSCRIBED_TO_TOPIC) rather than the whole group; offsets of an
open transaction are unstable per partition; a commit to a topic or partition the metadata does not
know is refused per partition."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

from kraftlog.broker.groups._group_classic_types import JoinRequest, JoinResponse, Protocol, subscription_topics
from kraftlog.broker.groups._group_service import _unknown_partitions
from kraftlog.broker.groups._group_shard import CommittedOffset, OffsetCommitRequest
from kraftlog.broker.groups._group_shard_txn import TxnOffsetCommitRequest
from kraftlog.common import errors as kerr
from tests.unit.broker.test_group_shard import Driver


def _subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription as Kafka's consumers write it (topics, user data, owned partitions)."""
    out = struct.pack(">hi", version, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1) + struct.pack(">i", 0)


def test_subscription_topics_reads_the_consumer_protocol_and_refuses_garbage() -> None:
    assert subscription_topics(_subscription("a", "bc")) == {"a", "bc"}
    assert subscription_topics(_subscription(version=0)) == set()
    assert subscription_topics(b"m") is None
    assert subscription_topics(struct.pack(">hih", 0, 1, 9) + b"ab") is None  # a name longer than the bytes


def _stable_group(d: Driver, protocol_type: str, topics: tuple[str, ...]) -> str:
    """One member joined and synced (a Stable group); returns its member id."""
    protocols = (Protocol("range", _subscription(*topics)),)
    d.absorb(d.shard.join(JoinRequest("g", "", protocol_type, protocols, 10_000, 30_000), "j0", d.now))
    first = d.answer("j0")
    assert isinstance(first, JoinResponse)
    d.absorb(d.shard.join(JoinRequest("g", first.member_id, protocol_type, protocols, 10_000, 30_000), "j1", d.now))
    d.advance(6_000)
    from kraftlog.broker.groups._group_classic_types import SyncRequest

    d.absorb(d.shard.sync(SyncRequest("g", first.member_id, 1, assignments=((first.member_id, b""),)), "s", d.now))
    assert d.shard.groups["g"].state.name == "STABLE"
    return first.member_id


def test_offset_delete_on_a_stable_consumer_group_refuses_only_subscribed_topics() -> None:
    d = Driver()
    member = _stable_group(d, "consumer", ("read",))
    offsets = (("read", 0, 5, -1, ""), ("gone", 0, 7, -1, ""), ("gone", 1, 8, -1, ""))
    d.absorb(d.shard.commit_offsets(OffsetCommitRequest("g", offsets, member, None, 1), "c", d.now))
    error, refused, out = d.shard.delete_offsets("g", [("read", 0), ("gone", 0), ("gone", 1)], "del", d.now)
    assert error is None and refused == [("read", 0)]
    d.absorb(out)
    assert d.shard.fetch_offsets("g", None)[1] == [CommittedOffset("read", 0, 5)]


def test_offset_delete_on_a_group_of_another_protocol_type_with_members_is_refused_whole() -> None:
    d = Driver()
    _stable_group(d, "connect", ("read",))
    error, refused, _out = d.shard.delete_offsets("g", [("other", 0)], "del", d.now)
    assert error is kerr.NonEmptyGroupError and refused == []
    assert d.shard.delete_offsets("missing", [("t", 0)], "x", d.now)[0] is kerr.GroupIdNotFoundError


def test_unstable_partitions_are_those_an_open_transaction_wrote() -> None:
    d = Driver()
    d.absorb(d.shard.txn_commit_offsets(TxnOffsetCommitRequest("g", 7, 0, (("t", 1, 4, -1, ""),)), "tx", d.now))
    assert d.shard.unstable_partitions("g") == {("t", 1)}
    assert d.shard.unstable_partitions("other") == set()
    d.shard.complete_txn(7, commit=True)
    assert d.shard.unstable_partitions("g") == set()


def test_unknown_partitions_checks_topics_and_for_plain_commits_partitions() -> None:
    topics: dict[str, Any] = {"t": SimpleNamespace(partitions={0: object(), 1: object()})}
    image: Any = SimpleNamespace(topics=SimpleNamespace(get_by_name=topics.get))
    offsets = [("t", 0, 1), ("t", 5, 1), ("nope", 0, 1)]
    assert _unknown_partitions(image, offsets, partitions=True) == [("t", 5, 1), ("nope", 0, 1)]
    assert _unknown_partitions(image, offsets, partitions=False) == [("nope", 0, 1)]
