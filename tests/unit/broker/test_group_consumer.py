"""KIP-848 consumer groups in the coordinator core (issue 14): joining, the epochs, revocation
before reassignment, fencing, static members, offsets, and a shard rebuilt from its records."""

from __future__ import annotations

import random

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlog.broker.groups._group_consumer_types import HeartbeatRequest, HeartbeatResponse
from kraftlog.broker.groups._group_records import decode_key, decode_value, encode_key, encode_value
from kraftlog.broker.groups._group_shard import GroupShard, GroupShardConfig, OffsetCommitRequest, OffsetCommitResponse
from kraftlog.broker.groups._group_shard_types import ShardOutcome
from kraftlog.common import errors as kerr

T1 = "11111111-1111-4111-8111-111111111111"
T2 = "22222222-2222-4222-8222-222222222222"
TOPICS = {"orders": (T1, 6), "audit": (T2, 3)}
SESSION_MS = 45_000


class Driver:
    """A shard whose appends are committed at once (or fail, when told)."""

    def __init__(self, topics: dict[str, tuple[str, int]] | None = None, seed: int = 1) -> None:
        self.now = 0
        self.topics = dict(TOPICS if topics is None else topics)
        self.shard = GroupShard(0, GroupShardConfig(), random.Random(seed), self.now)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.answers: dict[object, object] = {}
        self.fail: type[kerr.KafkaError] | None = None
        self.reloads = 0
        self._n = 0

    def absorb(self, out: ShardOutcome) -> None:
        for token, response in out.responses:
            self.answers[token] = response
        self.reloads += out.reload
        if out.records:
            assert out.then is not None
            if self.fail is None:
                self.log.extend((encode_key(k), None if v is None else encode_value(v)) for k, v in out.records)
            self.absorb(out.then(self.fail, self.now))

    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        self._n += 1
        token = ("hb", self._n)
        self.absorb(self.shard.consumer_heartbeat(req, token, self.now, self.topics.get))
        answer = self.answers.pop(token)
        assert isinstance(answer, HeartbeatResponse)
        return answer

    def advance(self, ms: int) -> None:
        self.now += ms
        self.absorb(self.shard.poll(self.now))

    def reloaded(self) -> GroupShard:
        shard = GroupShard(0, GroupShardConfig(), random.Random(9), self.now)
        for k, v in self.log:
            key = decode_key(k)
            shard.replay(key, decode_value(key, v), self.now)
        shard.loaded(self.now)
        return shard


class Member:
    """A consumer of the new protocol, as the client runs it: it revokes what it is no longer
    given before it says what it owns."""

    def __init__(self, d: Driver, group: str = "g", topics: tuple[str, ...] = ("orders",), **kw: object) -> None:
        self.d, self.group, self.topics, self.kw = d, group, topics, kw
        self.member_id = ""
        self.epoch = 0
        self.owned: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def beat(self, full: bool = False) -> HeartbeatResponse:
        joining = self.epoch == 0
        req = HeartbeatRequest(
            self.group,
            self.member_id,
            self.epoch,
            rebalance_timeout_ms=30_000 if joining or full else -1,
            subscribed_topic_names=self.topics if joining or full else None,
            owned=self.owned,
            **self.kw,  # type: ignore[arg-type]
        )
        r = self.d.heartbeat(req)
        if r.error is None:
            self.member_id, self.epoch = r.member_id, r.member_epoch
            if r.assignment is not None:
                self.owned = r.assignment
        return r

    def leave(self) -> HeartbeatResponse:
        return self.d.heartbeat(HeartbeatRequest(self.group, self.member_id, -1))

    def partitions(self) -> set[tuple[str, int]]:
        return {(t, p) for t, ps in self.owned for p in ps}


def converge(members: list[Member], rounds: int = 10) -> None:
    for _ in range(rounds):
        for m in members:
            assert m.beat().error is None
        owned = [m.partitions() for m in members]
        for i, a in enumerate(owned):  # never two owners of one partition
            for b in owned[i + 1 :]:
                assert not a & b


def test_one_member_gets_every_partition_at_epoch_one() -> None:
    d = Driver()
    m = Member(d)
    r = m.beat()
    assert r.error is None and r.member_id and r.member_epoch == 1
    assert r.assignment == ((T1, (0, 1, 2, 3, 4, 5)),)
    assert r.heartbeat_interval_ms == 5_000
    again = m.beat()
    assert again.assignment is None and again.member_epoch == 1  # nothing changed: nothing sent
    group = d.shard.consumer_groups["g"]
    assert group.state.value == "Stable" and group.group_epoch == 1 and group.assignment_epoch == 1


def test_a_second_member_waits_for_the_first_to_revoke() -> None:
    d = Driver()
    a, b = Member(d), Member(d)
    a.beat()
    rb = b.beat()
    assert rb.member_epoch == 2 and rb.assignment == ()  # its partitions are still a's
    group = d.shard.consumer_groups["g"]
    assert group.state.value == "Reconciling"
    ra = a.beat()  # told to give three up; its epoch stays until it did
    assert ra.member_epoch == 1 and len(a.partitions()) == 3
    ra = a.beat()  # owns only what it keeps now
    assert ra.member_epoch == 2
    rb = b.beat()
    assert rb.assignment is not None and len(b.partitions()) == 3
    assert a.partitions() | b.partitions() == {(T1, p) for p in range(6)}
    assert not a.partitions() & b.partitions()
    assert group.state.value == "Stable"


def test_session_expiry_fences_and_the_rest_take_over() -> None:
    d = Driver()
    a, b = Member(d), Member(d)
    converge([a, b])
    for _ in range(3):  # b keeps heartbeating, a goes silent
        d.advance(SESSION_MS // 3)
        b.beat()
    d.advance(1)
    assert a.member_id not in d.shard.consumer_groups["g"].members
    converge([b])
    assert b.partitions() == {(T1, p) for p in range(6)}
    assert a.beat().error is kerr.UnknownMemberIdError


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    d = Driver()
    a, b = Member(d), Member(d)
    a.beat()
    b.beat()
    a.beat()  # a must revoke now
    d.advance(30_001)  # a never acknowledges
    assert a.member_id not in d.shard.consumer_groups["g"].members


def test_epochs_are_checked() -> None:
    d = Driver()
    a = Member(d)
    a.beat()
    ahead = d.heartbeat(HeartbeatRequest("g", a.member_id, 5, owned=a.owned))
    assert ahead.error is kerr.FencedMemberEpochError
    b = Member(d)
    b.beat()
    a.beat()
    a.beat()  # a at epoch 2 now, previous 1
    assert a.epoch == 2
    lost_answer = d.heartbeat(HeartbeatRequest("g", a.member_id, 1, owned=a.owned))
    assert lost_answer.error is None and lost_answer.member_epoch == 2  # a subset at the previous epoch
    stale = d.heartbeat(HeartbeatRequest("g", a.member_id, 1, owned=((T1, (0, 1, 2, 3, 4, 5)),)))
    assert stale.error is kerr.FencedMemberEpochError


@pytest.mark.parametrize(
    ("req", "error"),
    [
        (
            HeartbeatRequest("", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), owned=()),
            "INVALID_REQUEST",
        ),
        (HeartbeatRequest("g", "", 0, subscribed_topic_names=("t",), owned=()), "INVALID_REQUEST"),
        (HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1, owned=()), "INVALID_REQUEST"),
        (HeartbeatRequest("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",)), "INVALID_REQUEST"),
        (HeartbeatRequest("g", "", 3), "INVALID_REQUEST"),
        (HeartbeatRequest("g", "m", -3), "INVALID_REQUEST"),
        (HeartbeatRequest("g", "m", -2), "INVALID_REQUEST"),
        (HeartbeatRequest("g", "m", 1), "UNKNOWN_MEMBER_ID"),
        (
            HeartbeatRequest(
                "g", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("t",), owned=(), server_assignor="sticky"
            ),
            "UNSUPPORTED_ASSIGNOR",
        ),
    ],
)
def test_bad_heartbeats_get_kafkas_errors(req: HeartbeatRequest, error: str) -> None:
    d = Driver()
    r = d.heartbeat(req)
    assert r.error is not None and r.error.error_name == error, r
    assert r.message


def test_static_member_leaves_for_a_while_and_comes_back_with_its_partitions() -> None:
    d = Driver()
    a, b = Member(d, instance_id="a"), Member(d, instance_id="b")
    converge([a, b])
    before = a.partitions()
    clash = Member(d, instance_id="a")
    assert clash.beat().error is kerr.UnreleasedInstanceIdError
    r = d.heartbeat(HeartbeatRequest("g", a.member_id, -2, instance_id="a"))
    assert r.error is None and r.member_epoch == -2
    back = Member(d, instance_id="a")
    rb = back.beat()
    assert rb.error is None and rb.member_id != a.member_id
    assert back.partitions() == before  # no rebalance for the others
    assert d.shard.consumer_groups["g"].group_epoch == 2


def test_a_static_member_with_another_id_is_fenced() -> None:
    d = Driver()
    a = Member(d, instance_id="a")
    a.beat()
    r = d.heartbeat(HeartbeatRequest("g", "someone-else", 1, instance_id="a"))
    assert r.error is kerr.FencedInstanceIdError


def test_offset_commits_check_the_member_epoch() -> None:
    d = Driver()
    a = Member(d)
    a.beat()
    stale = OffsetCommitRequest("g", (("orders", 0, 5, -1, ""),), a.member_id, None, 7)
    d.absorb(d.shard.commit_offsets(stale, "c1", d.now))
    assert d.answers["c1"] == OffsetCommitResponse((("orders", 0, kerr.StaleMemberEpochError),))
    ok = OffsetCommitRequest("g", (("orders", 0, 5, -1, ""),), a.member_id, None, a.epoch)
    d.absorb(d.shard.commit_offsets(ok, "c2", d.now))
    assert d.answers["c2"] == OffsetCommitResponse((("orders", 0, None),))
    admin = OffsetCommitRequest("g", (("orders", 0, 9, -1, ""),), "", None, -1)
    d.absorb(d.shard.commit_offsets(admin, "c3", d.now))
    assert d.answers["c3"] == OffsetCommitResponse((("orders", 0, kerr.UnknownMemberIdError),))


def test_leave_bumps_the_epoch_and_the_group_empties_and_deletes() -> None:
    d = Driver()
    a = Member(d)
    a.beat()
    assert a.leave().error is None
    group = d.shard.consumer_groups["g"]
    assert group.state.value == "Empty" and group.group_epoch == 2
    listed = d.shard.list_groups()
    assert [(g.group_id, g.protocol_type, g.state) for g in listed] == [("g", "consumer", "Empty")]
    error, out = d.shard.delete_group("g", "del", d.now)
    assert error is None
    d.absorb(out)
    assert "g" not in d.shard.consumer_groups
    assert "g" not in d.reloaded().consumer_groups


def test_a_classic_group_with_members_is_not_taken_over() -> None:
    from kraftlog.broker.groups._group_classic_types import JoinRequest, Protocol

    d = Driver()
    d.absorb(d.shard.join(JoinRequest("g", "", "consumer", (Protocol("range", b""),), 10_000, 30_000), "j", d.now))
    d.absorb(
        d.shard.join(
            JoinRequest("g", d.answers["j"].member_id, "consumer", (Protocol("range", b""),), 10_000, 30_000),
            "j2",
            d.now,
        )
    )  # type: ignore[attr-defined]
    assert Member(d).beat().error is kerr.GroupIdNotFoundError
    a = Member(d, group="h")
    a.beat()
    d.absorb(d.shard.join(JoinRequest("h", "", "consumer", (Protocol("range", b""),), 10_000, 30_000), "j3", d.now))
    assert d.answers["j3"].error is kerr.InconsistentGroupProtocolError  # type: ignore[attr-defined]


def test_the_state_survives_a_reload_and_sessions_start_afresh() -> None:
    d = Driver()
    a, b = Member(d, topics=("orders", "audit")), Member(d, topics=("orders",))
    converge([a, b])
    before = d.shard.consumer_groups["g"]
    shard = d.reloaded()
    after = shard.consumer_groups["g"]
    assert after.members == before.members
    assert after.target == before.target and after.partition_epochs == before.partition_epochs
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert after.subscription_metadata == before.subscription_metadata
    assert shard.next_deadline() == d.now + SESSION_MS


def test_a_failed_write_answers_its_error_and_asks_for_a_reload() -> None:
    d = Driver()
    d.fail = kerr.NotEnoughReplicasError
    r = Member(d).beat()
    assert r.error is kerr.CoordinatorNotAvailableError
    assert d.reloads == 1


def test_new_partitions_bump_the_epoch_and_are_assigned() -> None:
    d = Driver()
    a = Member(d)
    a.beat()
    d.topics["orders"] = (T1, 8)
    r = a.beat()
    assert r.member_epoch == 2 and a.partitions() == {(T1, p) for p in range(8)}


def test_describe() -> None:
    d = Driver()
    a = Member(d, topics=("orders",), rack_id="r1")
    a.beat()
    desc = d.shard.describe_consumer_group("g")
    assert desc.error is None and desc.state == "Stable" and desc.assignor_name == "uniform"
    (m,) = desc.members
    assert m.member_id == a.member_id and m.rack_id == "r1" and m.assignment == m.target_assignment
    assert d.shard.describe_consumer_group("nope").error is kerr.GroupIdNotFoundError


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["beat", "join", "leave", "silence"]), st.integers(0, 4)), max_size=40))
def test_no_partition_ever_has_two_owners_and_the_group_converges(steps: list[tuple[str, int]]) -> None:
    d = Driver(topics={"orders": (T1, 7), "audit": (T2, 2)})
    members: list[Member] = []
    for action, i in steps:
        if action == "join" and len(members) < 5:
            topics = ("orders", "audit") if i % 2 else ("orders",)
            members.append(Member(d, topics=topics))
            members[-1].beat()
        elif members:
            m = members[i % len(members)]
            if action == "beat":
                if m.beat().error is not None:  # fenced: it gives up everything and rejoins
                    m.epoch, m.owned = 0, ()
            elif action == "leave":
                m.leave()
                members.remove(m)
            else:
                d.advance(SESSION_MS // 4)
        group = d.shard.consumer_groups.get("g")
        if group is not None:
            owners: dict[tuple[str, int], str] = {}
            for m in group.members.values():
                for t, ps in (*m.assigned, *m.pending_revocation):
                    for p in ps:
                        assert (t, p) not in owners, "a partition with two owners"
                        owners[(t, p)] = m.member_id
    for m in members:  # everyone rejoins if fenced, then the group settles
        m.epoch, m.owned = (0, ()) if m.member_id not in d.shard.consumer_groups["g"].members else (m.epoch, m.owned)
    for _ in range(8):
        for m in members:
            if m.beat().error is not None:
                m.epoch, m.owned = 0, ()
    if members:
        covered = set().union(*(m.partitions() for m in members))
        wanted = {(T1, p) for p in range(7)}
        if any("audit" in m.topics for m in members):
            wanted |= {(T2, p) for p in range(2)}
        assert covered == wanted
        assert d.shard.consumer_groups["g"].state.value == "Stable"


def test_an_answer_that_wrote_nothing_waits_for_the_writes_before_it() -> None:
    d = Driver()
    a = Member(d, group="h")
    a.beat()
    join = HeartbeatRequest("g", "b", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("orders",), owned=())
    pending = d.shard.consumer_heartbeat(join, "join-b", d.now, d.topics.get)  # its write is in flight
    assert pending.records and not pending.responses
    plain = d.shard.consumer_heartbeat(
        HeartbeatRequest("h", a.member_id, a.epoch, owned=a.owned), "beat-a", d.now, d.topics.get
    )
    assert not plain.responses and not plain.records  # parked until what was written before it is
    assert pending.then is not None
    done = pending.then(None, d.now)
    assert [t for t, _r in done.responses] == ["join-b", "beat-a"]


def test_a_failed_write_fails_the_answers_parked_behind_it() -> None:
    d = Driver()
    a = Member(d, group="h")
    a.beat()
    join = HeartbeatRequest("g", "b", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("orders",), owned=())
    pending = d.shard.consumer_heartbeat(join, "join-b", d.now, d.topics.get)
    d.shard.consumer_heartbeat(
        HeartbeatRequest("h", a.member_id, a.epoch, owned=a.owned), "beat-a", d.now, d.topics.get
    )
    assert pending.then is not None
    done = pending.then(kerr.NotLeaderOrFollowerError, d.now)
    assert done.reload
    errors = {t: r.error for t, r in done.responses}  # type: ignore[attr-defined]
    assert errors == {"join-b": kerr.NotCoordinatorError, "beat-a": kerr.NotCoordinatorError}


def test_an_empty_group_without_offsets_is_deleted_at_the_retention_check() -> None:
    d = Driver()
    a = Member(d)
    a.beat()
    a.leave()
    d.advance(600_000)  # offsets.retention.check.interval.ms
    assert "g" not in d.shard.consumer_groups
    assert "g" not in d.reloaded().consumer_groups
