"""The classic group core (issue 14): Kafka 4's JoinGroup/SyncGroup/Heartbeat/LeaveGroup semantics,
driven with a fake clock, no sockets."""

from __future__ import annotations

import random

import pytest

from kraftlog.broker.groups._group_classic import ClassicGroup, Outcome
from kraftlog.broker.groups._group_classic_types import (
    ClassicGroupConfig,
    GroupState,
    JoinRequest,
    JoinResponse,
    Protocol,
    SyncRequest,
    SyncResponse,
)
from kraftlog.broker.groups._group_records import GroupMetadataKey, decode_value, encode_value
from kraftlog.common import errors as kerr

CONFIG = ClassicGroupConfig(initial_rebalance_delay_ms=3000)
SESSION, REBALANCE = 10_000, 30_000


def req(
    member_id: str = "",
    *,
    instance: str | None = None,
    protocols: tuple[str, ...] = ("range",),
    meta: bytes = b"s",
    **kw: object,
) -> JoinRequest:
    return JoinRequest(
        "g",
        member_id,
        "consumer",
        tuple(Protocol(p, meta) for p in protocols),
        SESSION,
        REBALANCE,
        group_instance_id=instance,
        client_id="client",
        client_host="/127.0.0.1",
        **kw,  # type: ignore[arg-type]
    )


class Driver:
    """A group plus the answers it gave, by token, and the appends it asked for (committed at once
    unless told otherwise)."""

    def __init__(self) -> None:
        self.now = 0
        self.group = ClassicGroup("g", CONFIG, random.Random(1), self.now)
        self.answers: dict[object, list[JoinResponse | SyncResponse]] = {}
        self.records: list[object] = []
        self.fail_appends_with: type[kerr.KafkaError] | None = None

    def absorb(self, out: Outcome) -> None:
        for token, response in out.responses:
            self.answers.setdefault(token, []).append(response)
        if out.records:
            self.records.extend(out.records)
            assert out.then is not None
            self.absorb(out.then(self.fail_appends_with, self.now))

    def join(self, token: str, request: JoinRequest) -> JoinResponse | None:
        self.absorb(self.group.join(request, token, self.now))
        got = self.answers.get(token)
        return got[0] if got else None  # type: ignore[return-value]

    def sync(self, token: str, request: SyncRequest) -> SyncResponse | None:
        self.absorb(self.group.sync(request, token, self.now))
        got = self.answers.get(token)
        return got[0] if got else None  # type: ignore[return-value]

    def advance(self, ms: int) -> None:
        self.now += ms
        self.absorb(self.group.poll(self.now))

    def first(self, token: str) -> JoinResponse:
        return self.answers[token][0]  # type: ignore[return-value]


def join_two_members() -> tuple[Driver, str, str]:
    d = Driver()
    r1 = d.join("a0", req())
    assert r1 is not None and r1.error is kerr.MemberIdRequiredError  # KIP-394
    m1 = r1.member_id
    assert m1.startswith("client-")
    assert d.join("a1", req(m1)) is None  # parked: the initial rebalance waits 3 s
    assert d.group.state is GroupState.PREPARING_REBALANCE
    r2 = d.join("b0", req())
    assert r2 is not None and r2.error is kerr.MemberIdRequiredError
    m2 = r2.member_id
    assert d.join("b1", req(m2)) is None
    d.advance(2999)
    assert "a1" not in d.answers
    d.advance(1)  # a member arrived during the delay: another delay
    assert "a1" not in d.answers
    d.advance(3000)
    a, b = d.first("a1"), d.first("b1")
    assert a.error is None and b.error is None
    assert a.generation_id == b.generation_id == 1 and a.protocol_name == "range"
    assert a.leader == b.leader == m1  # the first member to join leads
    assert {m.member_id for m in a.members} == {m1, m2} and b.members == ()
    assert d.group.state is GroupState.COMPLETING_REBALANCE
    return d, m1, m2


def test_join_sync_stable() -> None:
    d, m1, m2 = join_two_members()
    assert d.sync("s2", SyncRequest("g", m2, 1)) is None  # a follower waits for the leader
    leader = d.sync("s1", SyncRequest("g", m1, 1, assignments=((m1, b"A1"), (m2, b"A2"))))
    assert leader == SyncResponse(None, "consumer", "range", b"A1")
    assert d.answers["s2"] == [SyncResponse(None, "consumer", "range", b"A2")]
    assert d.group.state is GroupState.STABLE
    key, value = d.records[-1]  # type: ignore[misc]
    assert key == GroupMetadataKey("g")
    assert decode_value(key, encode_value(value)) == value
    assert value.generation == 1 and {m.member_id: m.assignment for m in value.members} == {m1: b"A1", m2: b"A2"}
    assert d.group.heartbeat(m1, None, 1, d.now) is None
    assert d.group.heartbeat(m1, None, 0, d.now) is kerr.IllegalGenerationError
    assert d.group.heartbeat("nobody", None, 1, d.now) is kerr.UnknownMemberIdError


def test_sync_errors() -> None:
    d, m1, m2 = join_two_members()
    assert d.sync("x", SyncRequest("g", "nobody", 1)).error is kerr.UnknownMemberIdError  # type: ignore[union-attr]
    assert d.sync("y", SyncRequest("g", m1, 7)).error is kerr.IllegalGenerationError  # type: ignore[union-attr]
    bad = SyncRequest("g", m1, 1, protocol_name="roundrobin")
    assert d.sync("z", bad).error is kerr.InconsistentGroupProtocolError  # type: ignore[union-attr]


def test_a_silent_member_is_removed_and_the_group_rebalances() -> None:
    d, m1, m2 = join_two_members()
    d.sync("s1", SyncRequest("g", m1, 1, assignments=((m1, b"A1"), (m2, b"A2"))))
    d.sync("s2", SyncRequest("g", m2, 1))
    for _ in range(2):  # m1 heartbeats, m2 does not
        d.advance(4000)
        assert d.group.heartbeat(m1, None, 1, d.now) is None
    d.advance(2000)  # m2's session (10 s since the join completed) ends
    assert d.group.member(m2) is None
    assert d.group.state is GroupState.PREPARING_REBALANCE
    assert d.group.heartbeat(m1, None, 1, d.now) is kerr.RebalanceInProgressError
    assert d.join("a2", req(m1)) is None or d.first("a2").error is None
    got = d.first("a2")
    assert got.generation_id == 2 and [m.member_id for m in got.members] == [m1]


def test_a_member_that_does_not_rejoin_in_time_is_dropped() -> None:
    d, m1, m2 = join_two_members()
    d.sync("s1", SyncRequest("g", m1, 1, assignments=((m1, b"A1"), (m2, b"A2"))))
    d.sync("s2", SyncRequest("g", m2, 1))
    assert d.join("j1", req(m1, protocols=("range", "roundrobin"))) is None  # protocols changed: rebalance
    assert d.group.state is GroupState.PREPARING_REBALANCE
    for _ in range(7):  # m2 keeps heartbeating but never rejoins
        d.advance(4000)
        d.group.heartbeat(m2, None, 1, d.now)
    d.advance(REBALANCE)
    got = d.first("j1")
    assert got.error is None and got.generation_id == 2 and [m.member_id for m in got.members] == [m1]
    assert d.group.member(m2) is None


def test_leader_must_sync_within_the_rebalance_timeout() -> None:
    d, m1, m2 = join_two_members()
    d.sync("s2", SyncRequest("g", m2, 1))
    d.advance(REBALANCE)  # the leader never synced: it is removed and the group rebalances
    assert d.group.member(m1) is None
    assert d.answers["s2"][0].error is kerr.RebalanceInProgressError


def test_leave_group() -> None:
    d, m1, m2 = join_two_members()
    d.sync("s1", SyncRequest("g", m1, 1, assignments=((m1, b"A1"), (m2, b"A2"))))
    d.sync("s2", SyncRequest("g", m2, 1))
    results, out = d.group.leave([(m2, None), ("ghost", None)], d.now)
    d.absorb(out)
    assert results == [(m2, None, None), ("ghost", None, kerr.UnknownMemberIdError)]
    assert d.group.state is GroupState.PREPARING_REBALANCE
    d.join("j1", req(m1))  # the only member left rejoins: the rebalance completes at once
    assert d.first("j1").generation_id == 2
    results, out = d.group.leave([(m1, None)], d.now)
    d.absorb(out)
    # no member left: every (zero) member has rejoined, so the group empties at once, a generation on
    assert d.group.state is GroupState.EMPTY and d.group.members == [] and d.group.generation_id == 3
    assert d.records[-1][1].members == ()  # type: ignore[index]


def test_static_member_restart_keeps_the_assignment_without_rebalance() -> None:
    d = Driver()
    r = d.join("a", req(instance="i1"))  # static members get their id at once (no KIP-394 round)
    assert r is None
    d.advance(3000)
    first = d.first("a")
    old_id = first.member_id
    assert first.error is None and old_id.startswith("i1-")
    d.sync("s", SyncRequest("g", old_id, 1, group_instance_id="i1", assignments=((old_id, b"A"),)))
    assert d.group.state is GroupState.STABLE
    again = d.join("b", req(instance="i1"))  # restarted: unknown member id, known instance id
    assert again is not None and again.error is None and again.member_id != old_id
    assert again.generation_id == 1 and again.skip_assignment  # the leader keeps its assignment
    assert d.group.state is GroupState.STABLE
    assert d.group.heartbeat(old_id, "i1", 1, d.now) is kerr.FencedInstanceIdError
    assert d.sync("s2", SyncRequest("g", again.member_id, 1, group_instance_id="i1")) == SyncResponse(
        None, "consumer", "range", b"A"
    )


def test_static_replacement_is_undone_when_its_record_is_not_written() -> None:
    d = Driver()
    d.join("a", req(instance="i1"))
    d.advance(3000)
    old_id = d.first("a").member_id
    d.sync("s", SyncRequest("g", old_id, 1, group_instance_id="i1", assignments=((old_id, b"A"),)))
    d.fail_appends_with = kerr.NotLeaderOrFollowerError
    failed = d.join("b", req(instance="i1"))
    assert failed is not None and failed.error is kerr.NotCoordinatorError
    assert d.group.heartbeat(old_id, "i1", 1, d.now) is None  # the old id stands


def test_inconsistent_protocols_and_max_size() -> None:
    d, m1, m2 = join_two_members()
    other = JoinRequest("g", "", "connect", (Protocol("x", b""),), SESSION, REBALANCE, requires_known_member_id=False)
    assert d.join("c", other).error is kerr.InconsistentGroupProtocolError  # type: ignore[union-attr]
    small = Driver()
    small.group = ClassicGroup("g", ClassicGroupConfig(max_size=1), random.Random(2), 0)
    small.join("a", req(requires_known_member_id=False))
    small.advance(3000)
    assert small.join("b", req(requires_known_member_id=False)).error is kerr.GroupMaxSizeReachedError  # type: ignore[union-attr]


def test_protocol_is_chosen_by_vote() -> None:
    d = Driver()
    d.join("a", req(protocols=("roundrobin", "range"), requires_known_member_id=False))
    d.join("b", req(protocols=("range", "roundrobin"), requires_known_member_id=False))
    d.join("c", req(protocols=("range",), requires_known_member_id=False))
    d.advance(9000)
    assert d.first("a").protocol_name == "range"  # the only protocol every member supports


@pytest.mark.parametrize("silent_ms", [SESSION - 1, SESSION])
def test_pending_member_id_expires_after_the_session_timeout(silent_ms: int) -> None:
    d = Driver()
    r = d.join("a", req())
    assert r is not None and r.error is kerr.MemberIdRequiredError
    d.advance(silent_ms)
    late = d.join("b", req(r.member_id))
    if silent_ms < SESSION:
        assert late is None  # accepted, waiting in the rebalance
    else:
        assert late is not None and late.error is kerr.UnknownMemberIdError


# ======================================================================= Kafka's exact behaviour


def _stable_pair(d: Driver) -> tuple[str, str]:
    """Two dynamic members (no KIP-394 round), joined; the group waits for SyncGroup."""
    d.join("a", req(requires_known_member_id=False))
    d.join("b", req(requires_known_member_id=False))
    d.advance(6000)
    a, b = d.first("a"), d.first("b")
    follower = b.member_id if b.member_id != a.leader else a.member_id
    return a.leader, follower


def test_answered_sync_restarts_the_session() -> None:
    """Kafka's propagateAssignment restarts the session of every member whose SyncGroup it answers:
    a follower whose deadline passed while it waited is removed once it then stays silent."""
    d = Driver()
    leader, follower = _stable_pair(d)
    d.sync("sf", SyncRequest("g", follower, 1))
    d.advance(5000)
    assert d.group.heartbeat(leader, None, 1, d.now) is None
    d.advance(6000)  # the follower's deadline passes while its SyncGroup is parked: no removal
    d.sync("sl", SyncRequest("g", leader, 1, assignments=((leader, b"L"), (follower, b"F"))))
    assert d.group.state is GroupState.STABLE and d.answers["sf"][0].error is None
    for _ in range(6):
        d.advance(3000)
        d.group.heartbeat(leader, None, 1, d.now)
    assert d.group.member(follower) is None and d.group.state is GroupState.PREPARING_REBALANCE


def test_a_request_sees_timers_that_came_due_before_it() -> None:
    d = Driver()
    leader, follower = _stable_pair(d)
    d.sync("sl", SyncRequest("g", leader, 1, assignments=()))
    d.sync("sf", SyncRequest("g", follower, 1))
    # the follower's session ended 10 s after the sync; its heartbeat comes 2 s later, before any poll
    assert d.group.heartbeat(follower, None, 1, d.now + 12_000) is kerr.UnknownMemberIdError


def test_failed_static_write_after_a_second_restart_only_answers() -> None:
    d = Driver()
    d.join("a", req(instance="i1"))
    d.advance(3000)
    old = d.first("a").member_id
    d.sync("s", SyncRequest("g", old, 1, group_instance_id="i1", assignments=((old, b"A"),)))
    out1 = d.group.join(req(instance="i1"), "r1", d.now)
    out2 = d.group.join(req(instance="i1"), "r2", d.now)
    d.absorb(Outcome(out1.responses + out2.responses))
    pending = [out1.then, out2.then]
    assert d.first("r1").error is kerr.FencedInstanceIdError  # the second restart fenced the first
    assert pending[0] is not None and pending[1] is not None
    failed = pending[0](kerr.NotLeaderOrFollowerError, d.now)
    assert [r.error for _t, r in failed.responses] == [kerr.NotCoordinatorError]
    d.absorb(pending[1](None, d.now))
    assert d.first("r2").error is None


def test_static_leader_replaced_during_a_rebalance_waits_for_it() -> None:
    d = Driver()
    d.join("l", req(instance="i1"))
    d.join("f1", req(requires_known_member_id=False))
    d.join("f2", req(requires_known_member_id=False))  # does not rejoin below: the rebalance stays open
    d.advance(6000)  # members arrived during the initial delay: it ran twice
    lid, f1 = d.first("l").member_id, d.first("f1").member_id
    assert d.first("l").leader == lid
    d.sync("sl", SyncRequest("g", lid, 1, group_instance_id="i1", assignments=()))
    out = d.group.join(req(instance="i1"), "l2", d.now)  # the leader restarts: its write is pending
    d.join("f1b", req(f1, protocols=("range", "roundrobin")))  # a protocol change starts a rebalance
    assert d.group.state is GroupState.PREPARING_REBALANCE
    assert out.then is not None
    d.absorb(out.then(None, d.now))
    assert "l2" not in d.answers  # parked until the rebalance completes, as in Kafka


def test_pending_member_id_with_an_instance_id_is_a_server_error() -> None:
    d = Driver()
    first = d.join("a", req())
    assert first is not None
    got = d.join("b", req(first.member_id, instance="i1"))
    assert got == JoinResponse(kerr.UnknownServerError, "")


def test_sync_protocol_is_only_checked_against_a_known_one() -> None:
    d = Driver()
    d.join("a", req(requires_known_member_id=False))
    mid = d.group.members[0].member_id
    got = d.sync("s", SyncRequest("g", mid, 0, protocol_type="consumer", protocol_name="range"))
    assert got is not None and got.error is kerr.RebalanceInProgressError


def test_a_new_rebalance_cancels_the_sync_deadline() -> None:
    d = Driver()
    leader, follower = _stable_pair(d)
    d.advance(1000)
    results, out = d.group.leave([(follower, None)], d.now)
    d.absorb(out)
    d.join("x", req(requires_known_member_id=False))
    assert d.group.state is GroupState.PREPARING_REBALANCE
    assert ("sync",) not in d.group._timers and not d.group._pending_sync  # Kafka's removeSyncExpiration


def test_a_zero_rebalance_timeout_does_not_spin() -> None:
    """A join phase that no member rejoined waits another rebalance timeout; one of 0 ms must wait
    for the next round of timers, not fire again and again in this one (it froze the event loop)."""
    d = Driver()

    def static(instance: str, rebalance_timeout_ms: int) -> JoinRequest:
        protocols = (Protocol("range", b"s"),)
        return JoinRequest("g", "", "consumer", protocols, SESSION, rebalance_timeout_ms, group_instance_id=instance)

    d.join("a", static("A", REBALANCE))
    d.join("c", static("C", REBALANCE))
    d.advance(6000)
    ra, rc = d.first("a"), d.first("c")
    d.sync("sa", SyncRequest("g", ra.member_id, ra.generation_id, group_instance_id="A"))
    d.sync("sc", SyncRequest("g", rc.member_id, rc.generation_id, group_instance_id="C"))
    assert d.group.state is GroupState.STABLE
    a2, c2 = d.join("a2", static("A", 0)), d.join("c2", static("C", 0))  # restarts: no rebalance
    assert a2 is not None and c2 is not None and d.group.state is GroupState.STABLE
    results, out = d.group.leave([(c2.member_id, "C")], d.now)  # a rebalance nobody rejoins
    d.absorb(out)
    d.now += 1
    assert d.group.heartbeat(a2.member_id, "A", a2.generation_id, d.now) is kerr.RebalanceInProgressError
    d.advance(1)
    d.advance(1)  # each round moves on; nothing loops
    assert d.group.state is GroupState.PREPARING_REBALANCE
