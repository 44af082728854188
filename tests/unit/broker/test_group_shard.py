"""A ``__consumer_offsets`` partition's coordinator core (issue 14): request checks, offsets committed
only once written, fetch, delete, retention, and a shard rebuilt from its own records."""

from __future__ import annotations

import random

from kraftlog.broker.groups._group_classic_types import GroupState, JoinRequest, JoinResponse, Protocol, SyncRequest
from kraftlog.broker.groups._group_records import decode_key, decode_value, encode_key, encode_value
from kraftlog.broker.groups._group_shard import (
    CommittedOffset,
    GroupShard,
    GroupShardConfig,
    OffsetCommitRequest,
    OffsetCommitResponse,
    ShardOutcome,
)
from kraftlog.common import errors as kerr

HOUR = 3600 * 1000


class Driver:
    """A shard whose appends are stored (and committed at once unless told otherwise)."""

    def __init__(self, config: GroupShardConfig | None = None) -> None:
        self.now = 0
        self.shard = GroupShard(0, config or GroupShardConfig(), random.Random(3), self.now)
        self.answers: dict[object, list[object]] = {}
        self.log: list[tuple[bytes, bytes | None]] = []  # the partition, as bytes
        self.fail: type[kerr.KafkaError] | None = None

    def absorb(self, out: ShardOutcome) -> None:
        for token, response in out.responses:
            self.answers.setdefault(token, []).append(response)
        if out.records:
            assert out.then is not None
            if self.fail is None:
                self.log.extend((encode_key(k), None if v is None else encode_value(v)) for k, v in out.records)
            self.absorb(out.then(self.fail, self.now))

    def answer(self, token: object) -> object:
        return self.answers[token][0]

    def join_group(self, group: str, *members: str) -> dict[str, JoinResponse]:
        """Members join (through KIP-394), the initial delay passes, the leader syncs."""
        ids = {}
        for name in members:
            request = JoinRequest(group, "", "consumer", (Protocol("range", b"m"),), 10_000, 30_000, client_id=name)
            self.absorb(self.shard.join(request, (name, 0), self.now))
            first = self.answer((name, 0))
            assert isinstance(first, JoinResponse) and first.error is kerr.MemberIdRequiredError
            known = JoinRequest(group, first.member_id, "consumer", (Protocol("range", b"m"),), 10_000, 30_000)
            self.absorb(self.shard.join(known, (name, 1), self.now))
            ids[name] = first.member_id
        self.advance(6_000)
        joined = {name: self.answer((name, 1)) for name in members}
        leader = next(r for r in joined.values() if isinstance(r, JoinResponse) and r.members)
        assert isinstance(leader, JoinResponse)
        assignments = tuple((m.member_id, b"A") for m in leader.members)
        self.absorb(
            self.shard.sync(
                SyncRequest(group, leader.member_id, leader.generation_id, assignments=assignments), "sync", self.now
            )
        )
        return joined  # type: ignore[return-value]

    def advance(self, ms: int) -> None:
        self.now += ms
        self.absorb(self.shard.poll(self.now))


def test_join_checks_group_id_and_session_timeout() -> None:
    d = Driver()
    bad_group = JoinRequest("", "", "consumer", (Protocol("range", b""),), 10_000, 30_000)
    d.absorb(d.shard.join(bad_group, "a", 0))
    assert d.answer("a") == JoinResponse(kerr.InvalidGroupIdError, "")
    short = JoinRequest("g", "", "consumer", (Protocol("range", b""),), 10, 30_000)
    d.absorb(d.shard.join(short, "b", 0))
    assert d.answer("b") == JoinResponse(kerr.InvalidSessionTimeoutError, "")
    unknown = JoinRequest("g", "m-1", "consumer", (Protocol("range", b""),), 10_000, 30_000)
    d.absorb(d.shard.join(unknown, "c", 0))
    assert d.answer("c") == JoinResponse(kerr.UnknownMemberIdError, "m-1")
    assert d.shard.heartbeat("nope", "m", None, 0, 0)[0] is kerr.UnknownMemberIdError


def test_new_group_is_stored_at_once() -> None:
    d = Driver()
    d.absorb(d.shard.join(JoinRequest("g", "", "consumer", (Protocol("range", b""),), 10_000, 30_000), "a", 0))
    assert [decode_key(k) for k, _v in d.log][0].group == "g"  # type: ignore[union-attr]


def test_offsets_commit_fetch_and_survive_a_reload() -> None:
    d = Driver()
    joined = d.join_group("g", "c1", "c2")
    member = next(iter(joined.values()))
    commit = OffsetCommitRequest("g", (("t", 0, 42, 3, "meta"), ("t", 1, 7, 3, "")), member.member_id, None, 1)
    d.absorb(d.shard.commit_offsets(commit, "commit", d.now))
    assert d.answer("commit") == OffsetCommitResponse((("t", 0, None), ("t", 1, None)))
    assert d.shard.fetch_offsets("g", [("t", 0), ("t", 2)]) == (
        None,
        [CommittedOffset("t", 0, 42, 3, "meta"), CommittedOffset("t", 2, -1)],
    )
    stale = OffsetCommitRequest("g", (("t", 0, 1, 3, ""),), member.member_id, None, 0)
    d.absorb(d.shard.commit_offsets(stale, "stale", d.now))
    assert d.answer("stale") == OffsetCommitResponse((("t", 0, kerr.IllegalGenerationError),))
    # a new leader of the partition replays what was written
    again = GroupShard(0, GroupShardConfig(), random.Random(4), d.now)
    for key, value in d.log:
        k = decode_key(key)
        again.replay(k, decode_value(k, value), d.now)
    again.loaded(d.now)
    assert again.fetch_offsets("g", None)[1] == d.shard.fetch_offsets("g", None)[1]
    group = again.groups["g"]
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert sorted(m.member_id for m in group.members) == sorted(r.member_id for r in joined.values())
    assert {m.assignment for m in group.members} == {b"A"}


def test_failed_write_commits_nothing() -> None:
    d = Driver()
    d.fail = kerr.NotEnoughReplicasError
    d.absorb(d.shard.commit_offsets(OffsetCommitRequest("simple", (("t", 0, 5, -1, ""),)), "c", 0))
    assert d.answer("c") == OffsetCommitResponse((("t", 0, kerr.CoordinatorNotAvailableError),))
    assert d.shard.fetch_offsets("simple", [("t", 0)])[1] == [CommittedOffset("t", 0, -1)]


def test_metadata_too_large_and_simple_groups() -> None:
    d = Driver(GroupShardConfig(offset_metadata_max_bytes=3))
    d.absorb(
        d.shard.commit_offsets(OffsetCommitRequest("s", (("t", 0, 5, -1, "toolong"), ("t", 1, 6, -1, "ok"))), "c", 0)
    )
    assert d.answer("c") == OffsetCommitResponse((("t", 0, kerr.OffsetMetadataTooLargeError), ("t", 1, None)))
    assert d.shard.fetch_offsets("s", None)[1] == [CommittedOffset("t", 1, 6, -1, "ok")]
    assert d.shard.list_groups()[0].state == "Empty"
    no_group = OffsetCommitRequest("other", (("t", 0, 1, -1, ""),), "m", None, 3)
    d.absorb(d.shard.commit_offsets(no_group, "x", 0))
    assert d.answer("x") == OffsetCommitResponse((("t", 0, kerr.IllegalGenerationError),))


def test_delete_offsets_and_groups_only_when_empty() -> None:
    d = Driver()
    joined = d.join_group("g", "c1")
    member = next(iter(joined.values()))
    d.absorb(
        d.shard.commit_offsets(OffsetCommitRequest("g", (("t", 0, 1, -1, ""),), member.member_id, None, 1), "c", d.now)
    )
    error, _out = d.shard.delete_group("g", "del", d.now)
    assert error is kerr.NonEmptyGroupError
    error, refused, _out = d.shard.delete_offsets("g", [("t", 0)], "del", d.now)
    # issue 25: a group of Kafka's consumers (protocol type "consumer") is not refused whole, as in
    # Kafka; its members' subscriptions (b"m": unreadable) count as every topic: refused per partition
    assert error is None and refused == [("t", 0)]
    _e, _r, out = d.shard.leave("g", [(member.member_id, None)], d.now)
    d.absorb(out)
    assert d.shard.groups["g"].state is GroupState.EMPTY
    error, out = d.shard.delete_group("g", "del", d.now)
    assert error is None
    d.absorb(out)
    assert "g" not in d.shard.groups and d.shard.fetch_offsets("g", None)[1] == []
    assert d.log[-1][1] is None  # the group's tombstone
    assert d.shard.delete_group("g", "again", d.now)[0] is kerr.GroupIdNotFoundError


def test_offsets_expire_after_the_group_has_been_empty_for_the_retention() -> None:
    d = Driver(GroupShardConfig(offsets_retention_ms=24 * HOUR, offsets_retention_check_interval_ms=HOUR))
    d.absorb(d.shard.commit_offsets(OffsetCommitRequest("simple", (("t", 0, 5, -1, ""),)), "c", 0))
    d.advance(23 * HOUR)
    assert d.shard.fetch_offsets("simple", None)[1] != []
    d.advance(2 * HOUR)
    assert d.shard.fetch_offsets("simple", None)[1] == []
    assert "simple" not in d.shard.groups  # nothing left: the group goes too
    assert d.log[-1] == (encode_key(decode_key(d.log[-1][0])), None)


def test_describe_and_list() -> None:
    d = Driver()
    d.join_group("g", "c1", "c2")
    described = d.shard.describe_group("g")
    assert described.state == "Stable" and described.protocol == "range" and len(described.members) == 2
    assert all(m[5] == b"A" for m in described.members)
    assert [g.group_id for g in d.shard.list_groups({"stable"})] == ["g"]
    assert d.shard.list_groups({"empty"}) == []
    assert d.shard.describe_group("missing").state == "Dead"


def test_transactional_offsets_wait_for_their_marker() -> None:
    from kraftlog.broker.groups._group_shard_txn import TxnOffsetCommitRequest

    d = Driver()
    req = TxnOffsetCommitRequest("g", 77, 2, (("t", 0, 40, -1, ""),))
    out = d.shard.txn_commit_offsets(req, "tx", d.now)
    assert out.producer == (77, 2)  # written in the producer's transaction
    d.absorb(out)
    assert d.answer("tx") == OffsetCommitResponse((("t", 0, None),))
    assert d.shard.fetch_offsets("g", [("t", 0)])[1] == [CommittedOffset("t", 0, -1)]  # pending
    assert d.shard.unstable("g", [("t", 0)]) and not d.shard.unstable("g", [("t", 1)])
    d.shard.complete_txn(77, commit=True)
    assert d.shard.fetch_offsets("g", [("t", 0)])[1] == [CommittedOffset("t", 0, 40)]
    assert not d.shard.unstable("g", None)
    d.absorb(d.shard.txn_commit_offsets(TxnOffsetCommitRequest("g", 77, 3, (("t", 0, 99, -1, ""),)), "tx2", d.now))
    d.shard.complete_txn(77, commit=False)  # aborted: the committed offset stays
    assert d.shard.fetch_offsets("g", [("t", 0)])[1] == [CommittedOffset("t", 0, 40)]


def test_a_transactional_commit_checks_the_member_when_it_names_one() -> None:
    from kraftlog.broker.groups._group_shard_txn import TxnOffsetCommitRequest

    d = Driver()
    d.join_group("g", "a")
    stale = TxnOffsetCommitRequest("g", 77, 0, (("t", 0, 1, -1, ""),), member_id="nobody", generation_id=7)
    d.absorb(d.shard.txn_commit_offsets(stale, "tx", d.now))
    (result,) = d.answer("tx").partitions  # type: ignore[attr-defined]
    assert result[2] in (kerr.UnknownMemberIdError, kerr.IllegalGenerationError)


def test_transactional_offsets_are_pending_before_their_write_completes() -> None:
    from kraftlog.broker.groups._group_shard_txn import TxnOffsetCommitRequest

    d = Driver()
    out = d.shard.txn_commit_offsets(TxnOffsetCommitRequest("g", 77, 2, (("t", 0, 40, -1, ""),)), "tx", d.now)
    d.shard.complete_txn(77, commit=False)  # the timeout abort's marker lands before the write is acknowledged
    assert out.then is not None
    d.absorb(out.then(None, d.now))
    assert not d.shard.unstable("g", None)  # nothing left pending for a later commit to apply
    failed = d.shard.txn_commit_offsets(TxnOffsetCommitRequest("g", 78, 0, (("t", 1, 5, -1, ""),)), "tx2", d.now)
    assert failed.then is not None
    d.absorb(failed.then(kerr.NotEnoughReplicasError, d.now))
    assert not d.shard.unstable("g", None)  # a write that failed leaves nothing pending
