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


def test_a_regex_member_is_assigned_the_matching_topics_and_follows_new_ones() -> None:
    d = Driver({"orders-a": (T1, 2), "audit": (T2, 1)})
    joined = _beat(
        d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="orders-.*", owned=())
    )
    assert joined.error is None and joined.assignment == ((T1, (0, 1)),)
    group = d.shard.consumer_groups["g"]
    assert group.is_subscribed_to("orders-a") and not group.is_subscribed_to("audit")
    epoch = group.group_epoch
    d.topics["orders-b"] = (T3, 1)  # a topic the regex matches is created
    again = _beat(d, HeartbeatRequest("g", joined.member_id, joined.member_epoch, owned=joined.assignment))
    assert group.group_epoch == epoch + 1
    assert again.assignment is not None and dict(again.assignment) == {T1: (0, 1), T3: (0,)}
    del d.topics["orders-a"]  # and one goes away
    gone = _beat(d, HeartbeatRequest("g", joined.member_id, again.member_epoch, owned=again.assignment))
    assert gone.assignment == ((T3, (0,)),)


def test_an_invalid_regex_is_refused_and_a_first_heartbeat_needs_a_subscription() -> None:
    d = Driver()
    bad = _beat(d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_regex="(", owned=()))
    assert bad.error is kerr.InvalidRegularExpressionError and "(" in bad.message
    none = _beat(d, HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, owned=()))
    assert none.error is kerr.InvalidRequestError


def test_an_empty_regex_clears_the_members_regex() -> None:
    d = Driver()
    joined = _beat(
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
    joined = _beat(
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
