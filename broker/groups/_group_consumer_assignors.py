"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (the default) and ``range``.

An assignor sees each member's subscribed topic ids and its current target assignment, and the
partition count of every subscribed topic; it returns every member's new target. Pure and
deterministic: members in id order (static members by instance id first, as Kafka's range
assignor sorts them), topics by id, partitions ascending.

- ``range`` is Kafka's server-side range assignor: per topic, the members subscribed to it (in the
  order above) get consecutive ranges, the first ``partitions % members`` one extra. Not sticky.
- ``uniform`` is Kafka's uniform assignor. Homogeneous subscriptions follow its homogeneous builder:
  each member keeps up to its quota (``total / members``, the first ``total % members`` members one
  more) of what it has, and the unassigned partitions fill the members below quota in order.
  Heterogeneous subscriptions: every member keeps what it has and is still subscribed to; each
  unassigned partition then goes to the least-loaded member subscribed to its topic; then partitions
  move from the most to the least loaded member that can take them while that narrows the gap by two
  or more, so the result is balanced as far as the subscriptions allow and moves as little as it can.
  (Kafka's heterogeneous builder reaches the same kind of balance; which partition moves may differ,
  since Kafka's order is that of its hash maps.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MemberSpec", "ASSIGNORS", "assign", "PartitionAssignorError"]

TopicPartitions = dict[str, set[int]]


class PartitionAssignorError(Exception):
    """The assignment cannot be made (a subscribed topic has no metadata)."""


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    subscribed_topic_ids: frozenset[str]
    current: Mapping[str, frozenset[int]]  # the member's present target assignment


def _order(members: Mapping[str, MemberSpec]) -> list[MemberSpec]:
    def key(m: MemberSpec) -> tuple[int, str]:
        return (0, m.instance_id) if m.instance_id is not None else (1, m.member_id)

    return sorted(members.values(), key=key)


def _range(members: Mapping[str, MemberSpec], partitions: Mapping[str, int]) -> dict[str, TopicPartitions]:
    ordered = _order(members)
    out: dict[str, TopicPartitions] = {m.member_id: {} for m in ordered}
    for topic_id in sorted({t for m in ordered for t in m.subscribed_topic_ids}):
        n = partitions.get(topic_id, -1)
        if n < 0:
            raise PartitionAssignorError(f"a member is subscribed to topic {topic_id}, which has no metadata")
        subscribers = [m for m in ordered if topic_id in m.subscribed_topic_ids]
        quota, extra = divmod(n, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            end = min(start + quota + (1 if i < extra else 0), n)
            if start < end:
                out[m.member_id][topic_id] = set(range(start, end))
            start = end
    return out


def _uniform_homogeneous(
    members: Mapping[str, MemberSpec], partitions: Mapping[str, int], topics: frozenset[str]
) -> dict[str, TopicPartitions]:
    owned = {(t, p) for m in members.values() for t, ps in m.current.items() if t in topics for p in ps}
    unassigned = [(t, p) for t in sorted(topics) for p in range(partitions[t]) if (t, p) not in owned]
    total = sum(partitions[t] for t in topics)
    minimum, extra = divmod(total, len(members))
    out: dict[str, TopicPartitions] = {}
    unfilled: list[tuple[str, int]] = []
    for m in _order(members):
        quota = minimum + (1 if extra > 0 else 0)
        extra -= 1 if extra > 0 else 0
        kept: TopicPartitions = {}
        for topic_id in sorted(m.current):
            if topic_id not in topics:
                continue  # no longer subscribed: given up
            for p in sorted(m.current[topic_id]):
                if p >= partitions[topic_id]:
                    continue  # the topic has fewer partitions now (cannot happen in Kafka, kept safe)
                if quota > 0:
                    kept.setdefault(topic_id, set()).add(p)
                    quota -= 1
                else:
                    unassigned.append((topic_id, p))
        out[m.member_id] = kept
        if quota > 0:
            unfilled.append((m.member_id, quota))
    i = 0
    for member_id, quota in unfilled:
        for _ in range(quota):
            if i >= len(unassigned):
                break
            t, p = unassigned[i]
            i += 1
            out[member_id].setdefault(t, set()).add(p)
    if i < len(unassigned):
        raise PartitionAssignorError("partitions were left unassigned")
    return out


def _uniform_heterogeneous(
    members: Mapping[str, MemberSpec], partitions: Mapping[str, int]
) -> dict[str, TopicPartitions]:
    ordered = _order(members)
    rank = {m.member_id: i for i, m in enumerate(ordered)}
    out: dict[str, TopicPartitions] = {m.member_id: {} for m in ordered}
    load = {m.member_id: 0 for m in ordered}
    owner: dict[tuple[str, int], str] = {}
    for m in ordered:
        for topic_id in sorted(m.current):
            if topic_id not in m.subscribed_topic_ids:
                continue
            for p in sorted(m.current[topic_id]):
                if p < partitions[topic_id] and (topic_id, p) not in owner:
                    owner[(topic_id, p)] = m.member_id
                    out[m.member_id].setdefault(topic_id, set()).add(p)
                    load[m.member_id] += 1
    subscribers = {
        t: [m.member_id for m in ordered if t in m.subscribed_topic_ids]
        for t in sorted({t for m in ordered for t in m.subscribed_topic_ids})
    }
    for topic_id, candidates in subscribers.items():
        for p in range(partitions[topic_id]):
            if (topic_id, p) in owner:
                continue
            target = min(candidates, key=lambda c: (load[c], rank[c]))
            owner[(topic_id, p)] = target
            out[target].setdefault(topic_id, set()).add(p)
            load[target] += 1
    # balance: move a partition from a heavier member to a lighter one subscribed to its topic while
    # that narrows their gap; each move lowers the sum of squared loads, so this ends
    moved = True
    while moved:
        moved = False
        for heavy in sorted(load, key=lambda c: (-load[c], rank[c])):
            for topic_id in sorted(out[heavy]):
                lighter = [c for c in subscribers[topic_id] if load[c] + 1 < load[heavy]]
                if not lighter or not out[heavy][topic_id]:
                    continue
                light = min(lighter, key=lambda c: (load[c], rank[c]))
                p = max(out[heavy][topic_id])
                out[heavy][topic_id].discard(p)
                if not out[heavy][topic_id]:
                    del out[heavy][topic_id]
                out[light].setdefault(topic_id, set()).add(p)
                load[heavy] -= 1
                load[light] += 1
                moved = True
                break
            if moved:
                break
    return out


def _uniform(members: Mapping[str, MemberSpec], partitions: Mapping[str, int]) -> dict[str, TopicPartitions]:
    subscriptions = {m.subscribed_topic_ids for m in members.values()}
    for topic_id in {t for s in subscriptions for t in s}:
        if partitions.get(topic_id, -1) < 0:
            raise PartitionAssignorError(f"members are subscribed to topic {topic_id}, which has no metadata")
    if len(subscriptions) == 1:
        (topics,) = subscriptions
        if not topics:
            return {m: {} for m in members}
        return _uniform_homogeneous(members, partitions, topics)
    return _uniform_heterogeneous(members, partitions)


ASSIGNORS = {"uniform": _uniform, "range": _range}


def assign(name: str, members: Mapping[str, MemberSpec], partitions: Mapping[str, int]) -> dict[str, TopicPartitions]:
    """Every member's target assignment by assignor ``name`` (one of `ASSIGNORS`); ``partitions``
    maps each subscribed topic id to its partition count."""
    if not members:
        return {}
    return ASSIGNORS[name](members, partitions)
