"""Client-side partition assignors of the classic group protocol: ``range`` and ``roundrobin``.

In the classic protocol the group leader (a consumer) computes every member's assignment and hands
it to the coordinator in SyncGroup. Java and Python consumers may lead the same group, so these give
exactly the assignment Kafka's Java assignors give for the same members, subscriptions and
partitions (the rules below are Kafka 4.x's ``RangeAssignor`` and ``RoundRobinAssignor``, written
from their documentation and behaviour):

- Members are ordered as Java's ``MemberInfo``: static members (with a ``group.instance.id``) first,
  by instance id, then dynamic members by member id; strings compare as Java's ``String.compareTo``.
- ``range`` works per topic: the topic's subscribers in that order, partitions in numeric order;
  each takes ``partitions // subscribers``, the first ``partitions % subscribers`` one more. With
  racks (the consumer's ``client.rack`` and the racks of each partition's replicas) and only when
  some partitions lack replicas on some racks, it first gives each consumer partitions on its own
  rack within the same per-topic quotas (topics with the same subscribers and partition count stay
  co-partitioned: partition *i* of each goes to the same consumer), then fills up by range as above.
- ``roundrobin`` lays out the partitions of every subscribed topic (topics in Java string order)
  and deals them to the members in turn, skipping members not subscribed to the partition's topic.

Each member's list is sorted by (topic in Java order, partition): Kafka's lists carry no meaning in
their order (Java's follows HashMap iteration for ``range`` without racks), and a fixed order keeps
the SyncGroup payload deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from kraftlog.client._metadata import TopicPartition
from kraftlog.common import java_string_key

__all__ = [
    "Subscription",
    "PartitionAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "partitions_without_racks",
    "sorted_members",
]

#: topic -> one entry per partition (index = partition id): the racks of that partition's replicas
PartitionRacks: TypeAlias = Mapping[str, Sequence[Collection[str]]]


@dataclass(frozen=True)
class Subscription:
    """What a member sends in JoinGroup, as the assignors see it (ConsumerProtocolSubscription)."""

    topics: Sequence[str]
    user_data: bytes | None = None
    owned_partitions: Sequence[TopicPartition] = ()
    group_instance_id: str | None = None
    rack_id: str | None = None
    generation_id: int = -1

    def __post_init__(self) -> None:
        if isinstance(self.topics, str):  # a str is a Sequence[str] too: "ab" would be topics a and b
            raise TypeError("Subscription.topics is a sequence of topic names, not one string")


class PartitionAssignor(Protocol):
    """An assignor the group leader runs: ``name`` is what JoinGroup advertises
    (``partition.assignment.strategy``). Every member also calls ``subscription_user_data`` before
    it joins and ``on_assignment`` when SyncGroup hands it its partitions (Kafka's
    ``ConsumerPartitionAssignor``)."""

    name: str

    def assign(
        self, partitions: PartitionRacks, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]: ...

    def subscription_user_data(self) -> bytes | None: ...

    def on_assignment(self, partitions: Sequence[TopicPartition], generation: int) -> None: ...


class _StatelessAssignor:
    """An assignor that keeps nothing between rebalances and sends no user data."""

    def subscription_user_data(self) -> bytes | None:
        return None

    def on_assignment(self, partitions: Sequence[TopicPartition], generation: int) -> None:
        return None


def partitions_without_racks(partition_counts: Mapping[str, int]) -> dict[str, list[frozenset[str]]]:
    """`PartitionRacks` for topics whose replicas' racks are unknown."""
    return {topic: [frozenset()] * count for topic, count in partition_counts.items()}


def _member_key(member_id: str, group_instance_id: str | None) -> tuple[int, bytes]:
    if group_instance_id is not None:
        return (0, java_string_key(group_instance_id))
    return (1, java_string_key(member_id))


def sorted_members(subscriptions: Mapping[str, Subscription], member_ids: Collection[str] | None = None) -> list[str]:
    """Member ids in Java ``MemberInfo`` order: static members by instance id, then the others by
    member id."""
    ids = subscriptions.keys() if member_ids is None else member_ids
    return sorted(ids, key=lambda m: _member_key(m, subscriptions[m].group_instance_id))


def _sorted_assignment(assignment: dict[str, list[TopicPartition]]) -> dict[str, list[TopicPartition]]:
    return {m: sorted(tps, key=lambda tp: (java_string_key(tp.topic), tp.partition)) for m, tps in assignment.items()}


# ============================================================================================ range


class _TopicState:
    """One topic's progress through a range assignment: per-consumer quotas and what is left."""

    def __init__(
        self, topic: str, racks: Sequence[Collection[str]], consumers: list[str], consumer_racks: Mapping[str, str]
    ) -> None:
        self.topic = topic
        self.consumers = consumers  # in member order
        self.consumer_rack = {c: consumer_racks.get(c) for c in consumers}
        self.unassigned: dict[TopicPartition, None] = {TopicPartition(topic, p): None for p in range(len(racks))}
        self.assigned_count = dict.fromkeys(consumers, 0)
        n = len(consumers)
        self.per_consumer = len(racks) // n if n else 0
        self.with_extra = len(racks) % n if n else 0
        topic_consumer_racks = {r for c in consumers if (r := self.consumer_rack[c]) is not None}
        self.partition_racks: dict[TopicPartition, frozenset[str]] = {}
        all_partition_racks: set[str] = set()
        if topic_consumer_racks:
            for p, replica_racks in enumerate(racks):
                rs = frozenset(replica_racks)
                self.partition_racks[TopicPartition(topic, p)] = rs
                all_partition_racks |= rs
        # Kafka's useRackAwareAssignment: racks on both sides that meet, and not every partition
        # on every rack (then any consumer is as close as any other)
        self.needs_rack_aware = (
            bool(topic_consumer_racks)
            and not topic_consumer_racks.isdisjoint(all_partition_racks)
            and not all(rs == all_partition_racks for rs in self.partition_racks.values())
        )

    def racks_match(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.consumer_rack[consumer]
        if rack is None:
            return True
        replica_racks = self.partition_racks.get(tp)
        return replica_racks is not None and rack in replica_racks

    def max_assignable(self, consumer: str) -> int:
        most = self.per_consumer + (1 if self.with_extra > 0 else 0) - self.assigned_count[consumer]
        return max(0, most)

    def on_assigned(self, consumer: str, partitions: list[TopicPartition]) -> None:
        self.assigned_count[consumer] += len(partitions)
        if self.assigned_count[consumer] > self.per_consumer:
            self.with_extra -= 1
        for tp in partitions:
            del self.unassigned[tp]


class RangeAssignor(_StatelessAssignor):
    """Kafka's ``range`` assignor (the default ``partition.assignment.strategy``)."""

    name = "range"

    def assign(
        self, partitions: PartitionRacks, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        consumer_racks = {m: s.rack_id for m, s in subscriptions.items() if s.rack_id}
        subscribers: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            for topic in dict.fromkeys(sub.topics):  # a topic listed twice counts once, as in Java's map
                subscribers.setdefault(topic, []).append(member)
        states = [
            _TopicState(topic, racks, sorted_members(subscriptions, subscribers.get(topic, [])), consumer_racks)
            for topic, racks in partitions.items()
            if racks
        ]
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        if any(s.needs_rack_aware for s in states):
            self._assign_with_rack_matching(states, assignment)
        for state in states:
            self._assign_ranges(state, lambda _c, _tp: True, assignment)
        return _sorted_assignment(assignment)

    @staticmethod
    def _assign(
        consumer: str, tps: list[TopicPartition], state: _TopicState, out: dict[str, list[TopicPartition]]
    ) -> None:
        out[consumer].extend(tps)
        state.on_assigned(consumer, tps)

    def _assign_ranges(
        self,
        state: _TopicState,
        may_assign: Callable[[str, TopicPartition], bool],
        out: dict[str, list[TopicPartition]],
    ) -> None:
        for consumer in state.consumers:
            if not state.unassigned:
                break
            limit = state.max_assignable(consumer)
            picked = [tp for tp in state.unassigned if may_assign(consumer, tp)][:limit]
            if picked:
                self._assign(consumer, picked, state, out)

    def _assign_with_rack_matching(self, states: list[_TopicState], out: dict[str, list[TopicPartition]]) -> None:
        # topics with the same subscribers (and racks) and the same partition count are assigned
        # together, partition i of each to one consumer, so that they stay co-partitioned
        groups: dict[tuple[tuple[str, str | None], ...], dict[int, list[_TopicState]]] = {}
        for state in states:
            key = tuple((c, state.consumer_rack[c]) for c in state.consumers)
            groups.setdefault(key, {}).setdefault(len(state.partition_racks), []).append(state)
        for by_count in groups.values():
            for count, same in by_count.items():
                if len(same) > 1:
                    self._assign_co_partitioned(same[0].consumers, count, same, out)
                elif same[0].needs_rack_aware:
                    self._assign_ranges(same[0], same[0].racks_match, out)

    def _assign_co_partitioned(
        self, consumers: list[str], count: int, states: list[_TopicState], out: dict[str, list[TopicPartition]]
    ) -> None:
        remaining = list(consumers)
        for p in range(count):
            match = next(
                (
                    c
                    for c in remaining
                    if all(s.racks_match(c, TopicPartition(s.topic, p)) and s.max_assignable(c) > 0 for s in states)
                ),
                None,
            )
            if match is None:
                continue
            for s in states:
                self._assign(match, [TopicPartition(s.topic, p)], s, out)
            if not any(s.max_assignable(match) > 0 for s in states):
                remaining.remove(match)
                if not remaining:
                    break


# ======================================================================================= roundrobin


class RoundRobinAssignor(_StatelessAssignor):
    """Kafka's ``roundrobin`` assignor."""

    name = "roundrobin"

    def assign(
        self, partitions: PartitionRacks, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        members = sorted_members(subscriptions)
        if not members:
            return assignment
        subscribed = {m: set(subscriptions[m].topics) for m in members}
        topics = sorted({t for s in subscriptions.values() for t in s.topics}, key=java_string_key)
        turn = 0
        for topic in topics:
            racks = partitions.get(topic)
            if not racks:
                continue
            for p in range(len(racks)):
                while topic not in subscribed[members[turn]]:
                    turn = (turn + 1) % len(members)
                assignment[members[turn]].append(TopicPartition(topic, p))
                turn = (turn + 1) % len(members)
        return _sorted_assignment(assignment)
