"""The ``simple`` share-group assignor (KIP-932): every assignable partition of a subscribed topic
goes to at least one subscribed member, members may outnumber partitions, the result is
deterministic, sticky (a fixed point) and balanced as Kafka's SimpleAssignor is."""

from __future__ import annotations

from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlog.broker.groups._group_share_assignor import ShareMemberSpec, simple_assign

T1, T2, T3 = (f"00000000-0000-0000-0000-00000000000{i}" for i in (1, 2, 3))


def spec(member: str, topics: set[str], current: dict[str, set[int]] | None = None) -> ShareMemberSpec:
    return ShareMemberSpec(member, frozenset(topics), {t: frozenset(ps) for t, ps in (current or {}).items()})


def as_current(
    result: dict[str, dict[str, set[int]]], members: dict[str, ShareMemberSpec]
) -> dict[str, ShareMemberSpec]:
    return {m: spec(m, set(s.subscribed_topic_ids), result[m]) for m, s in members.items()}


def test_three_members_on_one_partition_all_get_it() -> None:
    members = {m: spec(m, {T1}) for m in ("a", "b", "c")}
    assert simple_assign(members, {T1: frozenset({0})}) == {m: {T1: {0}} for m in ("a", "b", "c")}


def test_five_members_on_two_partitions_share_each_three_ways() -> None:
    members = {f"m{i}": spec(f"m{i}", {T1}) for i in range(5)}
    out = simple_assign(members, {T1: frozenset({0, 1})})
    holders = {p: sum(1 for m in out if p in out[m].get(T1, set())) for p in (0, 1)}
    assert holders == {0: 3, 1: 3}
    assert sorted(len(out[m][T1]) for m in out) == [1, 1, 1, 1, 2]


def test_fewer_members_than_partitions_split_them_without_sharing() -> None:
    members = {m: spec(m, {T1}) for m in ("a", "b")}
    out = simple_assign(members, {T1: frozenset(range(5))})
    assert out["a"][T1] | out["b"][T1] == set(range(5))
    assert not out["a"][T1] & out["b"][T1]
    assert sorted(len(out[m][T1]) for m in out) == [2, 3]


def test_a_member_keeps_what_it_holds_when_a_member_joins() -> None:
    before = {"a": spec("a", {T1}, {T1: {0, 1}}), "b": spec("b", {T1}, {T1: {2, 3}})}
    members = {**before, "c": spec("c", {T1})}
    out = simple_assign(members, {T1: frozenset(range(4))})
    assert out["a"][T1] <= {0, 1} and out["b"][T1] <= {2, 3}
    assert out["a"][T1] | out["b"][T1] | out["c"][T1] == set(range(4))


def test_heterogeneous_subscriptions_get_only_their_topics() -> None:
    members = {"a": spec("a", {T1}), "b": spec("b", {T1, T2}), "c": spec("c", {T2})}
    out = simple_assign(members, {T1: frozenset({0}), T2: frozenset({0, 1})})
    assert set(out["a"]) == {T1} and set(out["c"]) == {T2}
    assert out["a"][T1] == {0} and 0 in out["b"].get(T1, set())


def test_partitions_not_assignable_and_topics_unsubscribed_are_dropped() -> None:
    members = {"a": spec("a", {T1}, {T1: {0, 7}, T2: {0}})}
    assert simple_assign(members, {T1: frozenset({0, 1}), T2: frozenset({0})}) == {"a": {T1: {0, 1}}}
    assert simple_assign({"a": spec("a", {T1})}, {}) == {"a": {}}
    assert simple_assign({}, {T1: frozenset({0})}) == {}


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, ShareMemberSpec], dict[str, frozenset[int]]]:
    topics = [T1, T2, T3][: draw(st.integers(1, 3))]
    assignable = {t: frozenset(draw(st.sets(st.integers(0, 7), max_size=8))) for t in topics}
    names = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=0, max_size=9, unique=True))
    homogeneous = draw(st.booleans())
    members = {}
    for name in names:
        subscribed = set(topics) if homogeneous else draw(st.sets(st.sampled_from(topics), min_size=1))
        current = {t: draw(st.sets(st.integers(0, 9), max_size=4)) for t in draw(st.sets(st.sampled_from(topics)))}
        members[name] = spec(name, subscribed, current)
    return members, assignable


@settings(max_examples=examples(500), deadline=None)
@given(groups())
def test_every_subscribed_partition_goes_to_a_subscriber_and_only_to_subscribers(
    case: tuple[dict[str, ShareMemberSpec], dict[str, frozenset[int]]],
) -> None:
    members, assignable = case
    out = simple_assign(members, assignable)
    assert set(out) == set(members)
    for m, topics in out.items():
        for t, ps in topics.items():
            assert t in members[m].subscribed_topic_ids
            assert ps and ps <= assignable.get(t, frozenset())
    for t, ps in assignable.items():
        subscribers = [m for m in members if t in members[m].subscribed_topic_ids]
        for p in ps:
            holders = [m for m in subscribers if p in out[m].get(t, set())]
            if subscribers:
                assert holders, f"partition {t}:{p} was assigned to no member"
                assert (
                    len(holders) <= -(-len(subscribers) // len(ps))
                    or len({frozenset(members[m].subscribed_topic_ids) for m in members}) == 1
                )


@settings(max_examples=examples(300), deadline=None)
@given(groups())
def test_deterministic_whatever_the_order_and_a_fixed_point(
    case: tuple[dict[str, ShareMemberSpec], dict[str, frozenset[int]]],
) -> None:
    members, assignable = case
    out = simple_assign(members, assignable)
    reordered = dict(reversed(list(members.items())))
    assert simple_assign(reordered, dict(reversed(list(assignable.items())))) == out
    # nothing changed: the assignment stays as it is (stickiness)
    assert simple_assign(as_current(out, members), assignable) == out


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(1, 12), st.integers(1, 12))
def test_homogeneous_from_nothing_is_balanced(n_members: int, n_partitions: int) -> None:
    members = {f"m{i:02d}": spec(f"m{i:02d}", {T1}) for i in range(n_members)}
    out = simple_assign(members, {T1: frozenset(range(n_partitions))})
    sharing = -(-n_members // n_partitions)
    counts = [len(out[m].get(T1, set())) for m in members]
    assert max(counts) - min(counts) <= 1
    assert sum(counts) == sharing * n_partitions
    for p in range(n_partitions):
        assert sum(1 for m in members if p in out[m].get(T1, set())) == sharing
