"""KIP-848 subscriptions by regex (issue 25): ``SubscribedTopicRegex`` resolved by the coordinator
with RE2 (whole names, internal topics left out), invalid patterns refused with
INVALID_REGULAR_EXPRESSION, the resolved topics assigned like named ones, and re-resolved as topics
come and go."""

from __future__ import annotations

import time

from kraftlog.broker.groups._group_consumer_types import HeartbeatRequest, HeartbeatResponse
from kraftlog.broker.groups._group_regex import regex_error, resolve_regex
from kraftlog.common import errors as kerr
from tests.unit.broker.test_group_consumer import T1, T2, Driver

T3 = "33333333-3333-4333-8333-333333333333"


def test_resolve_matches_whole_names_with_re2_syntax_and_skips_internal_topics() -> None:
    names = ["orders", "orders-eu", "audit", "__consumer_offsets", "xorders"]
    assert resolve_regex("orders.*", names) == {"orders", "orders-eu"}
    assert resolve_regex(".*", names) == {"orders", "orders-eu", "audit", "xorders"}
    assert resolve_regex(r"\p{L}+", names) == {"orders", "audit", "xorders"}  # RE2's Unicode classes
    assert resolve_regex("(a", names) == frozenset()


def test_only_kafkas_internal_topics_are_left_out_not_every_double_underscore_name() -> None:
    """Kafka's Topic.INTERNAL_TOPICS, not a prefix: ``__audit`` is a user's topic (review, issue 24)."""
    names = ["__audit", "__consumer_offsets", "__transaction_state", "__share_group_state"]
    assert resolve_regex("__.*", names) == {"__audit"}


def test_invalid_and_catastrophic_patterns() -> None:
    assert isinstance(regex_error("(a"), kerr.InvalidRegularExpressionError)
    assert isinstance(regex_error(r"(a)\1"), kerr.InvalidRegularExpressionError)  # no backreferences in RE2
    assert regex_error("orders-[0-9]+") is None
    started = time.monotonic()  # exponential for a backtracking engine, linear for RE2
    assert resolve_regex("(a+)+b", ["a" * 5000]) == frozenset()
    assert time.monotonic() - started < 1.0


def _beat(d: Driver, req: HeartbeatRequest) -> HeartbeatResponse:
    token = object()
    d.absorb(d.shard.consumer_heartbeat(req, token, d.now, d.topics.get, lambda: list(d.topics)))
    answer = d.answers.pop(token)
    assert isinstance(answer, HeartbeatResponse)
    return answer


def _join_resolved(d: Driver, req: HeartbeatRequest) -> HeartbeatResponse:
    """A member joins by regex and heartbeats again once the refresh its join scheduled ran."""
    joined = _beat(d, req)
    d.advance(0)
    return _beat(d, HeartbeatRequest(req.group_id, joined.member_id, joined.member_epoch, owned=()))


def test_a_regex_member_is_assigned_the_matching_topics_and_follows_new_ones() -> None:
    """As in Kafka (GroupMetadataManager): a regex new to the group is resolved by a refresh the
    heartbeat schedules, not in the heartbeat itself; the refresh bumps the group epoch and the
    member's next heartbeat gets the topics. A topic created later is picked up by a refresh no
    sooner than 10 s after the last one; a deleted topic leaves the assignment at once."""
    d = Driver({"orders-a": (T1, 2), "audit": (T2, 1)})
    joined = _beat(
        d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="orders-.*", owned=())
    )
    group = d.shard.consumer_groups["g"]
    assert joined.error is None and joined.assignment == () and joined.member_epoch == 1
    assert not group.is_subscribed_to("orders-a")  # not resolved yet
    assert d.shard.next_deadline() == d.now  # the refresh is due at once, after the heartbeat
    d.advance(0)
    assert group.group_epoch == 2
    resolved = _beat(d, HeartbeatRequest("g", joined.member_id, joined.member_epoch, owned=()))
    assert resolved.error is None and resolved.assignment == ((T1, (0, 1)),) and resolved.member_epoch == 2
    assert group.is_subscribed_to("orders-a") and not group.is_subscribed_to("audit")
    epoch = group.group_epoch
    d.topics["orders-b"] = (T3, 1)  # a topic the regex matches is created
    d.advance(10_000)  # within Kafka's 10 s between two refreshes of a group: not yet
    same = _beat(d, HeartbeatRequest("g", joined.member_id, resolved.member_epoch, owned=resolved.assignment))
    d.advance(0)
    assert same.assignment is None and group.group_epoch == epoch
    d.advance(1)
    _beat(d, HeartbeatRequest("g", joined.member_id, resolved.member_epoch, owned=resolved.assignment))
    d.advance(0)
    assert group.group_epoch == epoch + 1
    again = _beat(d, HeartbeatRequest("g", joined.member_id, resolved.member_epoch, owned=resolved.assignment))
    assert again.assignment is not None and dict(again.assignment) == {T1: (0, 1), T3: (0,)}
    del d.topics["orders-a"]  # and one goes away: the subscription metadata drops it at once
    gone = _beat(d, HeartbeatRequest("g", joined.member_id, again.member_epoch, owned=again.assignment))
    assert gone.assignment == ((T3, (0,)),)


def test_a_new_regex_comes_after_the_literal_topics_and_a_resolved_one_at_once() -> None:
    """librdkafka's 0045 do_test_resubscribe_with_regex (consumer): the literal topics are assigned
    by the heartbeat that brings a new regex, its topics at a later one; a second member with a
    regex the group resolved already bumps the epoch at once, with no refresh."""
    d = Driver({"orders-a": (T1, 2), "audit": (T2, 1)})
    a = _beat(
        d,
        HeartbeatRequest(
            "g",
            "",
            0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=("audit",),
            subscribed_topic_regex="orders-.*",
            owned=(),
        ),
    )
    assert a.assignment == ((T2, (0,)),)
    d.advance(0)
    a2 = _beat(d, HeartbeatRequest("g", a.member_id, a.member_epoch, owned=a.assignment))
    assert a2.assignment is not None and dict(a2.assignment) == {T1: (0, 1), T2: (0,)}
    group = d.shard.consumer_groups["g"]
    epoch = group.group_epoch
    b = _beat(
        d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="orders-.*", owned=())
    )
    assert group.group_epoch == epoch + 1 and group.regexes.pending is None
    assert group.target[b.member_id] != ()  # the resolved regex's partitions are shared at once


def test_a_regex_nobody_subscribes_to_is_forgotten_and_resolved_afresh() -> None:
    d = Driver({"orders-a": (T1, 2)})
    joined = _beat(
        d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="orders-.*", owned=())
    )
    d.advance(0)
    group = d.shard.consumer_groups["g"]
    assert group.regexes.resolved == {"orders-.*": {"orders-a"}}
    _beat(d, HeartbeatRequest("g", joined.member_id, -1))  # it leaves
    assert group.regexes.resolved == {} and group.regexes.refreshed_ms is None
    d.advance(1_000)  # within 10 s of the last refresh, but nothing is resolved: no wait
    back = _beat(
        d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="orders-.*", owned=())
    )
    assert back.assignment == () and group.regexes.pending is not None
    d.advance(0)
    assert _beat(d, HeartbeatRequest("g", back.member_id, back.member_epoch, owned=())).assignment == ((T1, (0, 1)),)


def test_a_loaded_group_resolves_its_members_regexes_at_its_first_heartbeat() -> None:
    """Kafka reads the resolutions from its records; a reloaded shard here resolves them at
    once, so the member keeps its partitions (no epoch bump, no revocation)."""
    d = Driver({"orders-a": (T1, 2)})
    joined = _beat(
        d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="orders-.*", owned=())
    )
    d.advance(0)
    got = _beat(d, HeartbeatRequest("g", joined.member_id, joined.member_epoch, owned=()))
    d.shard = d.reloaded()
    group = d.shard.consumer_groups["g"]
    epoch = group.group_epoch
    after = _beat(d, HeartbeatRequest("g", joined.member_id, got.member_epoch, owned=got.assignment))
    assert after.error is None and after.member_epoch == got.member_epoch and group.group_epoch == epoch
    assert group.is_subscribed_to("orders-a")


def test_an_invalid_regex_is_refused_and_a_first_heartbeat_needs_a_subscription() -> None:
    d = Driver()
    bad = _beat(d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="(", owned=()))
    assert bad.error is kerr.InvalidRegularExpressionError and "(" in bad.message
    none = _beat(d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, owned=()))
    assert none.error is kerr.InvalidRequestError


def test_an_empty_regex_clears_the_members_regex() -> None:
    d = Driver()
    joined = _join_resolved(
        d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="aud.*", owned=())
    )
    assert joined.assignment == ((T2, (0, 1, 2)),)
    moved = _beat(
        d,
        HeartbeatRequest(
            "g",
            joined.member_id,
            joined.member_epoch,
            subscribed_topic_names=("orders",),
            subscribed_topic_regex="",
            owned=joined.assignment,
        ),
    )
    assert moved.error is None
    member = d.shard.consumer_groups["g"].members[joined.member_id]
    assert member.subscribed_topic_regex is None and member.subscribed_topic_names == ("orders",)


def test_a_heartbeat_with_the_same_topics_reuses_the_resolution_and_new_topics_are_seen() -> None:
    from kraftlog.broker.groups._group_regex import _resolved

    _resolved.cache_clear()
    names = tuple(f"t{i}" for i in range(1000))
    assert len(resolve_regex("t1.*", names)) == 111
    assert len(resolve_regex("t1.*", tuple(names))) == 111  # an equal list of topics: no new matching
    assert _resolved.cache_info().hits == 1
    assert resolve_regex("t1.*", (*names, "t1-new")) >= {"t1-new"}  # a topic that came is matched


def test_a_regex_resolves_only_to_the_topics_its_member_may_describe() -> None:
    """KAFKA-18813: a topic the heartbeating member may not Describe is neither subscribed nor
    assigned, so a regex does not reveal its existence, id or partitions."""
    d = Driver({"orders-a": (T1, 2), "orders-secret": (T2, 1)})
    joined = _join_resolved(
        d,
        HeartbeatRequest(
            "g",
            "",
            0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_regex="orders-.*",
            owned=(),
            describable=lambda topics: frozenset(t for t in topics if t != "orders-secret"),
        ),
    )
    assert joined.error is None and joined.assignment == ((T1, (0, 1)),)
    assert not d.shard.consumer_groups["g"].is_subscribed_to("orders-secret")


def test_a_loaded_group_resolves_its_regexes_to_what_the_heartbeating_member_may_describe() -> None:
    d = Driver({"orders-a": (T1, 2), "orders-secret": (T2, 1)})

    def hidden(topics: frozenset[str]) -> frozenset[str]:
        return frozenset(t for t in topics if t != "orders-secret")

    req = HeartbeatRequest(
        "g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="orders-.*", owned=(), describable=hidden
    )
    got = _join_resolved(d, req)
    assert got.assignment == ((T1, (0, 1)),)
    d.shard = d.reloaded()
    again = _beat(d, HeartbeatRequest("g", got.member_id, got.member_epoch, owned=got.assignment, describable=hidden))
    group = d.shard.consumer_groups["g"]
    assert again.error is None and not group.is_subscribed_to("orders-secret") and group.is_subscribed_to("orders-a")
