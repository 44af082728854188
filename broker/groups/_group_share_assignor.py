"""The server-side assignor of share groups (KIP-932): ``simple``, as Kafka 4.2's SimpleAssignor.

A share group's members share partitions: a partition may go to several members, and there may be
more members than partitions. The assignor sees each member's subscribed topic ids and its current
target assignment, and the assignable partitions of each subscribed topic (those whose share-group
state is initialized); it returns every member's new target. Pure and deterministic: members in id
order, partitions by (topic id, partition).

How it shares, as Kafka's builders do:

- Homogeneous subscriptions (every member subscribed to the same topics): over all P assignable
  partitions and M members, each partition is wanted by ``ceil(M / P)`` members (the sharing), and
  member ``i`` (of the id order) is to hold ``ceil(S*P*(i+1)/M) - ceil(S*P*i/M)`` partitions, so
  the counts add up to ``S * P`` exactly (integer arithmetic: Kafka's doubles cannot drift here).
- Heterogeneous subscriptions: the same, topic by topic, among the members subscribed to it.

Each round keeps what members hold and may still hold (stickiness), takes partitions from members
above their count and members from partitions above the sharing, then fills: partitions are
visited fewest holders first, and each is offered to the members still below their count in
rotation. Visiting unheld partitions first is kraftlog's order where Kafka's is a hash map's: the
capacity left always equals the sharing still missing, so every assignable partition of a
subscribed topic ends up with at least one member (the guarantee a queue needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ShareMemberSpec", "simple_assign", "SHARE_ASSIGNORS"]

SHARE_ASSIGNORS: tuple[str, ...] = ("simple",)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ShareMemberSpec:
    member_id: str
    subscribed_topic_ids: frozenset[str]
    current: Mapping[str, frozenset[int]]  # the member's present target assignment


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _share(
    members: list[str], targets: list[TopicPartition], held: dict[str, set[TopicPartition]]
) -> dict[str, set[TopicPartition]]:
    """One builder's round over ``targets`` (sorted) among ``members`` (sorted); ``held``: what each
    member holds of ``targets`` now. Returns what each member holds of them afterwards."""
    m, p = len(members), len(targets)
    out = {member: set(held.get(member, set())) for member in members}
    if m == 0 or p == 0:
        return {member: set() for member in members}
    sharing = _ceil_div(m, p)
    desired = {
        member: _ceil_div(sharing * p * (i + 1), m) - _ceil_div(sharing * p * i, m) for i, member in enumerate(members)
    }
    holders: dict[TopicPartition, set[str]] = {tp: set() for tp in targets}
    for member in members:
        for tp in out[member]:
            holders[tp].add(member)
    # members above their count give up the partitions shared most, then the highest
    for member in members:
        excess = len(out[member]) - desired[member]
        if excess > 0:
            for tp in sorted(out[member], key=lambda t: (-len(holders[t]), t))[:excess]:
                out[member].discard(tp)
                holders[tp].discard(member)
    # partitions above the sharing lose the members holding the most
    for tp in targets:
        excess = len(holders[tp]) - sharing
        if excess > 0:
            for member in sorted(holders[tp], key=lambda x: (-len(out[x]), x))[:excess]:
                holders[tp].discard(member)
                out[member].discard(tp)
    # fill: unheld partitions first, each offered to the members below their count in rotation
    unfilled = [member for member in members if len(out[member]) < desired[member]]
    turn = 0
    for tp in sorted(targets, key=lambda t: (len(holders[t]), t)):
        if not unfilled:
            break
        tried = 0
        while len(holders[tp]) < sharing and unfilled and tried < len(unfilled):
            turn %= len(unfilled)
            member = unfilled[turn]
            if member in holders[tp]:
                turn += 1
                tried += 1
                continue
            out[member].add(tp)
            holders[tp].add(member)
            tried = 0
            if len(out[member]) >= desired[member]:
                unfilled.pop(turn)
            else:
                turn += 1
    return out


def simple_assign(
    members: Mapping[str, ShareMemberSpec], assignable: Mapping[str, frozenset[int]]
) -> dict[str, dict[str, set[int]]]:
    """Every member's target (topic id -> partitions) by the ``simple`` assignor; ``assignable``
    maps each topic id to its assignable partitions (a subscribed topic missing from it has none
    yet). A member's target holds only partitions of topics it is subscribed to."""
    ordered = sorted(members)
    result: dict[str, dict[str, set[int]]] = {member: {} for member in ordered}
    if not ordered:
        return result
    subscriptions = {members[x].subscribed_topic_ids for x in ordered}

    def held_of(topics: frozenset[str] | set[str], among: list[str]) -> dict[str, set[TopicPartition]]:
        return {
            x: {
                (t, p)
                for t, ps in members[x].current.items()
                if t in topics and t in members[x].subscribed_topic_ids
                for p in ps
                if p in assignable.get(t, frozenset())
            }
            for x in among
        }

    def targets_of(topics: frozenset[str] | set[str]) -> list[TopicPartition]:
        return [(t, p) for t in sorted(topics) for p in sorted(assignable.get(t, frozenset()))]

    if len(subscriptions) == 1:
        (topics,) = subscriptions
        rounds = [(ordered, topics)]
    else:
        every = sorted({t for s in subscriptions for t in s})
        rounds = [([x for x in ordered if t in members[x].subscribed_topic_ids], frozenset({t})) for t in every]
    for among, topics in rounds:
        for member, tps in _share(among, targets_of(topics), held_of(topics, among)).items():
            for t, p in tps:
                result[member].setdefault(t, set()).add(p)
    return result
