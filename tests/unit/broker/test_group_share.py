"""Share groups (KIP-932) in the group coordinator core (issue 27): joining, share-partition state
initialization before assignment, members sharing partitions, epochs and fencing, leaving, session
timeouts, group.share.max.size, one group id one group type, and a shard rebuilt from its records."""

from __future__ import annotations

import random
from typing import Any

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlog.broker.groups._group_classic_types import JoinRequest, JoinResponse, Protocol
from kraftlog.broker.groups._group_consumer_types import HeartbeatRequest, HeartbeatResponse
from kraftlog.broker.groups._group_records import decode_key, decode_value, encode_key, encode_value
from kraftlog.broker.groups._group_shard import GroupShard, GroupShardConfig, OffsetCommitRequest, OffsetCommitResponse
from kraftlog.broker.groups._group_shard_types import ShardOutcome
from kraftlog.broker.groups._group_share_types import (
    ShareGroupConfig,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
    ShareInitJob,
    ShareMembersGone,
)
from kraftlog.common import errors as kerr

T1 = "11111111-1111-4111-8111-111111111111"
T2 = "22222222-2222-4222-8222-222222222222"
SESSION_MS = 45_000


class Driver:
    """A shard whose appends are committed at once (or fail, when told); initialization jobs are
    kept for the test to answer, as the share coordinator would."""

    def __init__(self, config: ShareGroupConfig | None = None) -> None:
        self.now = 0
        self.topics: dict[str, tuple[str, int]] = {"q": (T1, 1), "r": (T2, 3)}
        self.shard = self._new(random.Random(1))
        if config is not None:
            self.shard = GroupShard(0, GroupShardConfig(share=config), random.Random(1), 0, self.topics.get)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.answers: dict[object, object] = {}
        self.jobs: list[ShareInitJob] = []
        self.gone: list[ShareMembersGone] = []
        self.fail: type[kerr.KafkaError] | None = None
        self.reloads = 0
        self._n = 0

    def _new(self, rng: random.Random) -> GroupShard:
        return GroupShard(0, GroupShardConfig(), rng, self.now, self.topics.get)

    def absorb(self, out: ShardOutcome) -> None:
        for token, response in out.responses:
            self.answers[token] = response
        self.jobs.extend(j for j in out.jobs if isinstance(j, ShareInitJob))
        self.gone.extend(j for j in out.jobs if isinstance(j, ShareMembersGone))
        self.reloads += out.reload
        if out.records:
            assert out.then is not None
            if self.fail is None:
                self.log.extend((encode_key(k), None if v is None else encode_value(v)) for k, v in out.records)
            self.absorb(out.then(self.fail, self.now))

    def beat(
        self, member: str, epoch: int, topics: tuple[str, ...] | None = None, group: str = "g"
    ) -> ShareHeartbeatResponse:
        self._n += 1
        token = ("hb", self._n)
        req = ShareHeartbeatRequest(
            group, member, epoch, subscribed_topic_names=topics, client_id="c", client_host="/h"
        )
        self.absorb(self.shard.share_heartbeat(req, token, self.now, self.topics.get))
        answer = self.answers.pop(token)
        assert isinstance(answer, ShareHeartbeatResponse)
        return answer

    def initialize_all(self, failed: dict[str, set[int]] | None = None) -> None:
        jobs, self.jobs = self.jobs, []
        names = {tid: name for name, (tid, _n) in self.topics.items()}
        for job in jobs:
            self.absorb(self.shard.share.initialized(job, failed or {}, lambda t: names.get(t, "<UNKNOWN>")))

    def advance(self, ms: int) -> None:
        self.now += ms
        self.absorb(self.shard.poll(self.now))

    def reloaded(self) -> GroupShard:
        shard = self._new(random.Random(9))
        for k, v in self.log:
            key = decode_key(k)
            shard.replay(key, decode_value(key, v), self.now)
        shard.loaded(self.now)
        return shard


def joined(d: Driver, members: list[str], topics: tuple[str, ...] = ("q",)) -> dict[str, ShareHeartbeatResponse]:
    """Members join, the state is initialized, and each heartbeats once more to take its partitions."""
    answers = {m: d.beat(m, 0, topics) for m in members}
    d.initialize_all()
    for m in members:
        answers[m] = d.beat(m, answers[m].member_epoch)
    return answers


def test_a_member_joins_and_gets_the_partition_once_its_state_is_initialized() -> None:
    d = Driver()
    first = d.beat("m1", 0, ("q",))
    assert first.error is None and first.member_epoch == 1 and first.assignment == ()
    assert first.heartbeat_interval_ms == 5_000
    # the partition is marked initializing; the job goes out once that is written
    assert [j.partitions() for j in d.jobs] == [{T1: {0}}]
    assert d.shard.share.groups["g"].initializing == {T1: ("q", {0})}
    d.initialize_all()
    assert d.shard.share.groups["g"].initialized == {T1: ("q", {0})}
    second = d.beat("m1", 1)
    assert second.member_epoch == 2 and second.assignment == ((T1, (0,)),)
    # nothing changed: no assignment in the answer, the same epoch, nothing asked to initialize
    third = d.beat("m1", 2)
    assert third.member_epoch == 2 and third.assignment is None and not d.jobs


def test_three_members_on_one_partition_all_hold_it() -> None:
    d = Driver()
    answers = joined(d, ["a", "b", "c"])
    # every member settles on the partition (a later heartbeat of the earlier ones sees the last epoch)
    for m in ("a", "b", "c"):
        answers[m] = d.beat(m, answers[m].member_epoch)
    described = d.shard.describe_share_group("g")
    assert described.error is None and described.state == "Stable" and described.assignor_name == "simple"
    assert [(m.member_id, m.assignment) for m in described.members] == [(x, ((T1, (0,)),)) for x in ("a", "b", "c")]
    assert len({m.member_epoch for m in described.members}) == 1


def test_members_share_the_partitions_of_a_topic_with_fewer_partitions_than_members() -> None:
    d = Driver()
    answers = joined(d, [f"m{i}" for i in range(5)], ("r",))
    for m in answers:
        answers[m] = d.beat(m, answers[m].member_epoch)
    held = {m.member_id: m.assignment for m in d.shard.describe_share_group("g").members}
    per_partition = {p: sum(1 for a in held.values() for _t, ps in a if p in ps) for p in range(3)}
    assert per_partition == {0: 2, 1: 2, 2: 2}


def test_a_failed_initialization_is_asked_for_again_at_a_later_heartbeat() -> None:
    d = Driver(ShareGroupConfig(initialize_retry_interval_ms=1_000))
    d.beat("m1", 0, ("q",))
    d.initialize_all(failed={T1: {0}})
    assert d.shard.share.groups["g"].initializing == {} and d.shard.share.groups["g"].initialized == {}
    assert d.beat("m1", 1).assignment is None
    assert [j.partitions() for j in d.jobs] == [{T1: {0}}]  # asked again
    d.initialize_all()
    assert d.beat("m1", 1).assignment == ((T1, (0,)),)


def test_a_stale_initialization_is_retried_after_the_interval() -> None:
    d = Driver(ShareGroupConfig(initialize_retry_interval_ms=1_000))
    d.beat("m1", 0, ("q",))
    d.jobs.clear()  # the share coordinator never answers
    d.now += 999
    d.beat("m1", 1)
    assert not d.jobs
    d.now += 1
    d.beat("m1", 1)
    assert [j.partitions() for j in d.jobs] == [{T1: {0}}]


def test_epochs_are_checked_as_kafka_checks_them() -> None:
    d = Driver()
    answers = joined(d, ["m1"])
    epoch = answers["m1"].member_epoch
    assert d.beat("m1", epoch + 1).error is kerr.FencedMemberEpochError
    assert d.beat("m1", epoch - 1).error is None  # the previous epoch: its last answer was lost
    assert d.beat("m1", 0, ("q",)).error is kerr.FencedMemberEpochError  # neither current nor previous
    assert d.beat("nobody", 3).error is kerr.UnknownMemberIdError
    assert d.beat("m1", 3, group="unknown").error is kerr.GroupIdNotFoundError


def test_requests_are_validated_before_any_group() -> None:
    d = Driver()
    assert d.beat("", 0, ("q",)).error is kerr.InvalidRequestError
    assert d.beat("m", 0, None).error is kerr.InvalidRequestError
    assert d.beat("m", -2).error is kerr.InvalidRequestError
    assert "g" not in d.shard.share.groups


def test_leaving_removes_the_member_and_the_others_keep_their_partition() -> None:
    d = Driver()
    answers = joined(d, ["a", "b"])
    left = d.beat("a", -1)
    assert left.error is None and left.member_epoch == -1
    group = d.shard.share.groups["g"]
    assert set(group.members) == {"b"} and "a" not in group.target
    b = d.beat("b", answers["b"].member_epoch)
    assert b.error is None and b.member_epoch == group.group_epoch and group.members["b"].assigned == ((T1, (0,)),)
    assert d.beat("a", -1).error is kerr.UnknownMemberIdError
    d.beat("b", -1)
    assert d.shard.describe_share_group("g").state == "Empty"


def test_a_silent_member_is_fenced_when_its_session_ends() -> None:
    d = Driver()
    answers = joined(d, ["a", "b"])
    d.advance(SESSION_MS - 1)
    d.beat("b", answers["b"].member_epoch)
    d.advance(1)
    assert set(d.shard.share.groups["g"].members) == {"b"}
    d.advance(SESSION_MS)
    assert d.shard.share.groups["g"].members == {}
    assert d.shard.next_deadline() > d.now


def test_members_that_leave_or_are_fenced_are_handed_out_once_written() -> None:
    """Their share partitions give their records back at once (Kafka's onMemberLeave)."""
    d = Driver()
    answers = joined(d, ["a", "b", "c"])
    assert d.gone == []  # joining and heartbeats hand out nothing
    d.fail = kerr.NotLeaderOrFollowerError
    d.beat("a", -1)
    assert d.gone == []  # the leave was not written: the member is still there after the reload
    d.fail = None
    d.shard = d.reloaded()
    d.beat("a", -1)
    assert d.gone == [ShareMembersGone("g", ("a",))]
    d.advance(SESSION_MS - 1)
    d.beat("b", answers["b"].member_epoch)
    d.advance(1)
    assert d.gone[1:] == [ShareMembersGone("g", ("c",))]


def test_the_max_size_refuses_a_new_member_but_not_a_known_one() -> None:
    d = Driver(ShareGroupConfig(max_size=2))
    joined(d, ["a", "b"])
    assert d.beat("c", 0, ("q",)).error is kerr.GroupMaxSizeReachedError
    assert d.beat("a", 0, ("q",)).error is kerr.FencedMemberEpochError  # known: its epoch is checked


def test_one_group_id_is_one_group_type() -> None:
    d = Driver()
    joined(d, ["a"])
    # a consumer-protocol heartbeat, a classic join, offsets: not for a share group (Kafka's answers)
    token = object()
    d.absorb(
        d.shard.consumer_heartbeat(
            HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("q",), owned=()),
            token,
            d.now,
            d.topics.get,
        )
    )
    answer = d.answers.pop(token)
    assert isinstance(answer, HeartbeatResponse) and answer.error is kerr.GroupIdNotFoundError
    token = object()
    join = JoinRequest("g", "", "consumer", (Protocol("range", b""),), 10_000, 10_000)
    d.absorb(d.shard.join(join, token, d.now))
    joined_answer = d.answers.pop(token)
    assert isinstance(joined_answer, JoinResponse) and joined_answer.error is kerr.InconsistentGroupProtocolError
    token = object()
    d.absorb(d.shard.commit_offsets(OffsetCommitRequest("g", (("q", 0, 5, -1, ""),)), token, d.now))
    committed = d.answers.pop(token)
    assert isinstance(committed, OffsetCommitResponse) and committed.partitions == (
        ("q", 0, kerr.GroupIdNotFoundError),
    )
    assert d.shard.fetch_offsets("g", None) == (kerr.GroupIdNotFoundError, [])
    assert "g" not in d.shard.groups and "g" not in d.shard.consumer_groups
    # and a share group cannot be made where a consumer group lives
    token = object()
    d.absorb(
        d.shard.consumer_heartbeat(
            HeartbeatRequest("cg", "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("q",), owned=()),
            token,
            d.now,
            d.topics.get,
        )
    )
    refused = d.beat("m", 0, ("q",), group="cg")
    assert refused.error is kerr.GroupIdNotFoundError and "not a share group" in refused.message
    assert d.shard.describe_share_group("cg").error is kerr.GroupIdNotFoundError


def test_list_groups_shows_the_share_type_and_delete_needs_an_empty_group() -> None:
    d = Driver()
    joined(d, ["a"])
    listed = d.shard.list_groups()
    assert [(g.group_id, g.protocol_type, g.state, g.group_type) for g in listed] == [("g", "share", "Stable", "share")]
    assert d.shard.list_groups(types={"SHARE"}) == listed and d.shard.list_groups(types={"consumer"}) == []
    assert d.shard.list_groups(states={"empty"}) == []
    token = object()
    error, _out = d.shard.delete_group("g", token, d.now)
    assert error is kerr.NonEmptyGroupError
    d.beat("a", -1)
    error, out = d.shard.delete_group("g", token, d.now)
    assert error is None
    d.absorb(out)
    assert d.answers.pop(token) == (("g", None),)
    assert d.shard.list_groups() == [] and d.reloaded().list_groups() == []


def test_a_reloaded_shard_has_the_same_groups_and_a_failed_write_asks_for_a_reload() -> None:
    d = Driver()
    answers = joined(d, ["a", "b"], ("q", "r"))
    before = d.shard.describe_share_group("g")
    shard = d.reloaded()
    after = shard.describe_share_group("g")
    assert after == before and after.group_epoch >= 2
    assert shard.share.groups["g"].initialized == {T1: ("q", {0}), T2: ("r", {0, 1, 2})}
    # members' sessions start afresh on load
    assert shard.next_deadline() == d.now + SESSION_MS
    d.fail = kerr.NotLeaderOrFollowerError
    answer = d.beat("c", 0, ("q",))
    assert answer.error is kerr.NotCoordinatorError and d.reloads == 1
    assert answers["a"].error is None


@pytest.mark.parametrize("topics", [("q",), ("q", "r"), ("nope",)])
def test_the_group_epoch_moves_when_the_subscriptions_change(topics: tuple[str, ...]) -> None:
    d = Driver()
    joined(d, ["a"])
    epoch = d.shard.share.groups["g"].group_epoch
    answer = d.beat("a", d.shard.share.groups["g"].members["a"].member_epoch, topics)
    if topics == ("q",):
        assert d.shard.share.groups["g"].group_epoch == epoch and answer.assignment == ((T1, (0,)),)  # full request
    else:
        assert d.shard.share.groups["g"].group_epoch > epoch
        if topics == ("nope",):
            assert answer.assignment == ()  # the unsubscribed topic's partition is gone


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["join", "beat", "leave", "resubscribe", "wait", "init"]),
        st.sampled_from(["a", "b", "c", "d", "e"]),
        st.sampled_from([("q",), ("r",), ("q", "r")]),
    ),
    max_size=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(_OPS)
def test_any_history_converges_to_every_partition_held_and_reloads_the_same(ops: list[Any]) -> None:
    """Whatever members do, once the state is initialized and every member heartbeats twice at its
    epoch: each member holds only partitions of its topics, every partition of a subscribed topic is
    held by a member subscribed to it, all are at the group epoch, and a shard rebuilt from the
    records describes the same group."""
    d = Driver(ShareGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000))
    epochs: dict[str, int] = {}
    for op, member, topics in ops:
        if op == "join" and member not in epochs:
            answer = d.beat(member, 0, topics)
            if answer.error is None:
                epochs[member] = answer.member_epoch
        elif op in ("beat", "resubscribe") and member in epochs:
            answer = d.beat(member, epochs[member], topics if op == "resubscribe" else None)
            assert answer.error is None
            epochs[member] = answer.member_epoch
        elif op == "leave" and member in epochs:
            assert d.beat(member, -1).error is None
            del epochs[member]
        elif op == "wait":
            d.advance(4_000)
            group = d.shard.share.groups.get("g")
            for gone in [m for m in epochs if group is None or m not in group.members]:
                del epochs[gone]  # its session ended
        elif op == "init":
            d.initialize_all()
    for _round in range(3):
        d.initialize_all()
        for member in sorted(epochs):
            answer = d.beat(member, epochs[member])
            assert answer.error is None
            epochs[member] = answer.member_epoch
    group = d.shard.share.groups.get("g")
    if group is None or not epochs:
        return
    assert set(group.members) == set(epochs)
    ids = {tid: name for name, (tid, _n) in d.topics.items()}
    for m in group.members.values():
        assert m.member_epoch == group.group_epoch == group.assignment_epoch
        assert all(ids[t] in m.subscribed_topic_names for t, _ps in m.assigned)
    for name, (tid, count) in d.topics.items():
        subscribers = [m for m in group.members.values() if name in m.subscribed_topic_names]
        for p in range(count if subscribers else 0):
            assert any(p in dict(m.assigned).get(tid, ()) for m in subscribers), (name, p)
    assert d.reloaded().describe_share_group("g") == d.shard.describe_share_group("g")
