"""The server-side assignors of KIP-848 groups: ``range`` and ``uniform``."""

from __future__ import annotations

import pytest
from _hypothesis_budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from kraftlog.broker.groups._group_consumer_assignors import MemberSpec, PartitionAssignorError, assign


def spec(
    member_id: str, topics: set[str], current: dict[str, set[int]] | None = None, instance: str | None = None
) -> MemberSpec:
    return MemberSpec(member_id, instance, frozenset(topics), {t: frozenset(p) for t, p in (current or {}).items()})


def test_range_gives_consecutive_ranges_the_first_ones_one_more() -> None:
    members = {m: spec(m, {"a", "b"}) for m in ("m3", "m1", "m2")}
    out = assign("range", members, {"a": 7, "b": 2})
    assert out == {"m1": {"a": {0, 1, 2}, "b": {0}}, "m2": {"a": {3, 4}, "b": {1}}, "m3": {"a": {5, 6}}}


def test_range_orders_static_members_first_by_instance_id() -> None:
    members = {"x": spec("x", {"a"}), "y": spec("y", {"a"}, instance="i2"), "z": spec("z", {"a"}, instance="i1")}
    assert assign("range", members, {"a": 3}) == {"z": {"a": {0}}, "y": {"a": {1}}, "x": {"a": {2}}}


def test_uniform_homogeneous_keeps_what_members_own() -> None:
    first = assign("uniform", {"m1": spec("m1", {"a"})}, {"a": 6})
    assert first == {"m1": {"a": set(range(6))}}
    members = {"m1": spec("m1", {"a"}, first["m1"]), "m2": spec("m2", {"a"})}
    second = assign("uniform", members, {"a": 6})
    assert second["m1"] == {"a": {0, 1, 2}} and second["m2"] == {"a": {3, 4, 5}}
    members = {"m2": spec("m2", {"a"}, second["m2"]), "m3": spec("m3", {"a"})}  # m1 left
    third = assign("uniform", members, {"a": 6})
    assert third["m2"] == {"a": {3, 4, 5}} and third["m3"] == {"a": {0, 1, 2}}


def test_unknown_topics_are_an_error() -> None:
    with pytest.raises(PartitionAssignorError):
        assign("uniform", {"m": spec("m", {"zz"})}, {})
    with pytest.raises(PartitionAssignorError):
        assign("range", {"m": spec("m", {"zz"})}, {})


@settings(max_examples=examples(100), deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 9), min_size=1),
    st.lists(st.sets(st.sampled_from(["a", "b", "c"]), min_size=1), min_size=1, max_size=6),
    st.sampled_from(["uniform", "range"]),
)
def test_every_subscribed_partition_has_exactly_one_subscribed_owner(
    partitions: dict[str, int], subscriptions: list[set[str]], name: str
) -> None:
    subscriptions = [s & set(partitions) or {next(iter(partitions))} for s in subscriptions]
    members = {f"m{i}": spec(f"m{i}", s) for i, s in enumerate(subscriptions)}
    out = assign(name, members, partitions)
    seen: dict[tuple[str, int], str] = {}
    for member_id, assignment in out.items():
        for topic, ps in assignment.items():
            assert topic in members[member_id].subscribed_topic_ids
            for p in ps:
                assert (topic, p) not in seen
                seen[(topic, p)] = member_id
    wanted = {(t, p) for s in subscriptions for t in s for p in range(partitions[t])}
    assert set(seen) == wanted
    if name == "uniform" and len({frozenset(s) for s in subscriptions}) == 1:
        loads = [sum(len(ps) for ps in a.values()) for a in out.values()]
        assert max(loads) - min(loads) <= 1
