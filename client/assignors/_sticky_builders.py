"""The two builders of Kafka's ``AbstractStickyAssignor``, step by step (see `kraftlog.client.assignors._sticky`):
the constrained one for groups whose members all subscribe to the same topics, and the general one."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Sequence

from kraftlog.client._metadata import TopicPartition
from kraftlog.client.assignors._assignors import PartitionRacks, Subscription
from kraftlog.client.assignors._sticky_common import (
    DEFAULT_GENERATION,
    MemberData,
    RackInfo,
    topic_partitions,
    tp_hash,
    tp_java_order,
    unassigned_partitions,
)
from kraftlog.common import JavaHashTable, java_string_key

__all__ = ["ConstrainedBuilder", "GeneralBuilder"]


# ============================================================================ constrained


class ConstrainedBuilder:
    """Every member subscribes to the same topics: quotas of floor/ceil partitions per member."""

    def __init__(
        self,
        partitions: PartitionRacks,
        racks: RackInfo,
        owned: dict[str, list[TopicPartition]],
        multi_owned: set[TopicPartition],
    ) -> None:
        self.partitions = partitions
        self.racks = racks
        self.owned = owned  # in Java's HashMap order
        self.multi_owned = multi_owned
        total = sum(len(v) for v in partitions.values())
        n = len(owned)
        self.min_quota = total // n
        self.max_quota = -(-total // n)
        self.expected_over = total % n
        self.current_over = 0
        self.assignment: dict[str, list[TopicPartition]] = {c: [] for c in owned}
        self.assigned: list[TopicPartition] = []
        self.maybe_revoked: dict[TopicPartition, str] = {}
        self.under: list[str] = []
        self.exactly: list[str] = []
        self.transferring: dict[TopicPartition, str] = {}

    def build(self) -> dict[str, list[TopicPartition]]:
        self._assign_owned()
        topics = sorted(self.partitions, key=java_string_key)
        all_sorted = topic_partitions(self.partitions, topics)
        if self.assigned:
            unassigned = unassigned_partitions(all_sorted, sorted(self.assigned, key=tp_java_order))
        else:
            unassigned = all_sorted
        self.under.sort(key=java_string_key)
        self.exactly.sort(key=java_string_key)
        unassigned = self.racks.sort_by_rack_consumers(unassigned)
        unassigned = self._rack_aware_round_robin(unassigned)
        self._round_robin(unassigned)
        self._verify()
        return self.assignment

    def _assign_owned(self) -> None:
        for consumer, owned in self.owned.items():
            kept = []
            for tp in owned:
                if self.racks.racks_mismatch(consumer, tp):
                    self.maybe_revoked[tp] = consumer
                else:
                    kept.append(tp)
            kept.sort(key=lambda tp: (tp.partition, java_string_key(tp.topic)))
            for tp in self.multi_owned:
                if tp in kept:
                    kept.remove(tp)
            target = self.assignment[consumer]
            if len(kept) < self.min_quota:
                target.extend(kept)
                self.assigned.extend(kept)
                self.under.append(consumer)
            elif len(kept) >= self.max_quota and self.current_over < self.expected_over:
                self.current_over += 1
                if self.current_over == self.expected_over:
                    self.exactly.clear()
                target.extend(kept[: self.max_quota])
                self.assigned.extend(kept[: self.max_quota])
                for tp in kept[self.max_quota :]:
                    self.maybe_revoked[tp] = consumer
            else:
                target.extend(kept[: self.min_quota])
                self.assigned.extend(kept[: self.min_quota])
                for tp in kept[self.min_quota :]:
                    self.maybe_revoked[tp] = consumer
                if self.current_over < self.expected_over:
                    self.exactly.append(consumer)

    def _rack_aware_round_robin(self, unassigned: list[TopicPartition]) -> list[TopicPartition]:
        if not self.racks.consumer_racks:
            return unassigned
        left: list[TopicPartition] = []
        next_index = 0
        for tp in unassigned:
            consumer = None
            index = self.racks.next_rack_consumer(tp, self.under, next_index)
            if index >= 0:
                consumer = self.under[index]
                count = len(self.assignment[consumer]) + 1
                if count >= self.min_quota:
                    self.under.remove(consumer)
                    if count < self.max_quota and self.current_over < self.expected_over:
                        self.exactly.append(consumer)
                else:
                    index += 1
                next_index = index % len(self.under) if self.under else 0
            elif self.exactly:
                first = self.racks.next_rack_consumer(tp, self.exactly, 0)
                if first >= 0:
                    consumer = self.exactly[first]
                    if len(self.assignment[consumer]) + 1 == self.max_quota:
                        del self.exactly[first]
                        self.current_over += 1
                        if self.current_over == self.expected_over:
                            self.exactly.clear()
            if consumer is not None:
                self._assign_new(tp, consumer)
            else:
                left.append(tp)
        return left

    def _round_robin(self, unassigned: list[TopicPartition]) -> None:
        # an iterator over `under` that can remove what it returned last, as Java's ListIterator
        pos, last = 0, -1
        for tp in unassigned:
            if pos < len(self.under):
                consumer = self.under[pos]
                last, pos = pos, pos + 1
            elif not self.under and not self.exactly:
                raise RuntimeError(f"no more unfilled consumers for {tp} (sticky assignment inconsistent)")
            elif not self.under:
                consumer = self.exactly.pop(0)
            else:
                consumer = self.under[0]
                last, pos = 0, 1
            count = self._assign_new(tp, consumer)
            if count == self.min_quota:
                del self.under[last]
                pos = last
                self.exactly.append(consumer)
            elif count == self.max_quota:
                self.current_over += 1

    def _assign_new(self, tp: TopicPartition, consumer: str) -> int:
        target = self.assignment[consumer]
        target.append(tp)
        previous = self.maybe_revoked.get(tp)
        if (previous is not None and previous != consumer) or tp in self.multi_owned:
            self.transferring[tp] = consumer
        return len(target)

    def _verify(self) -> None:
        if not self.under:
            return
        if self.current_over != self.expected_over:
            raise RuntimeError("sticky assignment left members under quota with no partitions to give")
        for member in self.under:
            if len(self.assignment[member]) != self.min_quota:
                raise RuntimeError(f"member {member} did not reach its quota of {self.min_quota} partitions")


# ================================================================================= general


class _SortedMembers:
    """Java's ``TreeSet`` of members ordered by (current assignment size, member id)."""

    def __init__(self, assignment: dict[str, list[TopicPartition]]) -> None:
        self._assignment = assignment
        self._keys: list[tuple[int, bytes, str]] = []
        self._key_of: dict[str, tuple[int, bytes, str]] = {}

    def add(self, member: str) -> None:
        if member in self._key_of:
            return
        key = (len(self._assignment[member]), java_string_key(member), member)
        self._key_of[member] = key
        insort(self._keys, key)

    def remove(self, member: str) -> None:
        key = self._key_of.pop(member, None)
        if key is not None:
            del self._keys[bisect_left(self._keys, key)]

    def first(self) -> str:
        return self._keys[0][2]

    def last(self) -> str:
        return self._keys[-1][2]

    def members(self) -> list[str]:
        return [k[2] for k in self._keys]


class _Movements:
    """Partition moves made while balancing, so that a move that would undo another (A->B after
    B->A in one topic) moves the partition that came over instead."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashTable[TopicPartition]]] = {}
        self.moves: dict[TopicPartition, tuple[str, str]] = {}

    def _forget(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.moves.pop(tp)
        for_topic = self.by_topic[tp.topic]
        for_topic[pair].remove(tp)
        if not len(for_topic[pair]):
            del for_topic[pair]
        if not for_topic:
            del self.by_topic[tp.topic]
        return pair

    def _record(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.moves[tp] = pair
        self.by_topic.setdefault(tp.topic, {}).setdefault(pair, JavaHashTable(tp_hash)).add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.moves:
            src, _dst = self._forget(tp)
            if src != new:
                self._record(tp, (src, new))
        else:
            self._record(tp, (old, new))

    def partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        for_topic = self.by_topic.get(tp.topic)
        if for_topic is None:
            return tp
        if tp in self.moves:
            old = self.moves[tp][0]
        reverse = for_topic.get((new, old))
        if reverse is None:
            return tp
        return next(iter(reverse))


class GeneralBuilder:
    """Members subscribe to different topics: keep, fill the least loaded, then rebalance."""

    def __init__(
        self,
        partitions: PartitionRacks,
        racks: RackInfo,
        current: dict[str, list[TopicPartition]],
        subscriptions: dict[str, Subscription],
        member_data: dict[str, MemberData],
        max_generation: int,
        *,
        guarded: bool = False,
    ) -> None:
        self.partitions = partitions
        self.racks = racks
        self.current = current  # in Java's HashMap order
        self.subscriptions = subscriptions  # in Java's HashMap order
        self.member_data = member_data
        self.max_generation = max_generation
        self.guarded = guarded
        self.total = sum(len(v) for v in partitions.values())
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in partitions}
        self.consumer_topics: dict[str, list[str]] = {}
        for consumer, sub in subscriptions.items():
            topics = [t for t in sub.topics if t in partitions]
            self.consumer_topics[consumer] = topics
            for t in topics:
                self.topic_consumers[t].append(consumer)
            current.setdefault(consumer, [])
        self.partition_consumer = {tp: c for c, tps in current.items() for tp in tps}
        sorted_topics = sorted(self.topic_consumers, key=lambda t: (len(self.topic_consumers[t]), java_string_key(t)))
        self.sorted_all = topic_partitions(partitions, sorted_topics)
        self.sorted_members = _SortedMembers(current)
        self.revocation_required = False
        self.movements = _Movements()

    def build(self) -> dict[str, list[TopicPartition]]:
        previous: dict[TopicPartition, tuple[str, int]] = {}
        for consumer in self.subscriptions:
            data = self.member_data[consumer]
            if data.generation is not None and data.generation < self.max_generation:
                self._remember(previous, data.partitions, consumer, data.generation)
            elif data.generation is None and self.max_generation > DEFAULT_GENERATION:
                self._remember(previous, data.partitions, consumer, DEFAULT_GENERATION)
        assigned = self._assign_owned()
        if assigned:
            order = {t: (len(c), java_string_key(t)) for t, c in self.topic_consumers.items()}
            assigned.sort(key=lambda tp: (order[tp.topic], tp.partition))
            unassigned = unassigned_partitions(self.sorted_all, assigned)
        else:
            unassigned = self.sorted_all  # the same list, as in Java: both shrink together below
        for member in self.current:
            self.sorted_members.add(member)
        self._balance(previous, unassigned)
        return self.current

    @staticmethod
    def _remember(
        previous: dict[TopicPartition, tuple[str, int]], tps: Sequence[TopicPartition], consumer: str, generation: int
    ) -> None:
        for tp in tps:
            if tp not in previous or generation > previous[tp][1]:
                previous[tp] = (consumer, generation)

    def _assign_owned(self) -> list[TopicPartition]:
        assigned: list[TopicPartition] = []
        for consumer, tps in self.current.items():
            sub = self.subscriptions[consumer]
            kept = []
            for tp in tps:
                if tp.topic not in self.topic_consumers:
                    self.partition_consumer.pop(tp, None)
                elif tp.topic not in sub.topics or self.racks.racks_mismatch(consumer, tp):
                    self.revocation_required = True
                else:
                    kept.append(tp)
                    assigned.append(tp)
            tps[:] = kept
        return assigned

    def _max_size(self, topics: list[str]) -> int:
        if len(topics) == len(self.partitions):
            return self.total
        return sum(len(self.partitions[t]) for t in topics)

    def _is_balanced(self) -> bool:
        smallest = len(self.current[self.sorted_members.first()])
        largest = len(self.current[self.sorted_members.last()])
        if smallest >= largest - 1:
            return True
        owner = {tp: c for c, tps in self.current.items() for tp in tps}
        for consumer in self.sorted_members.members():
            mine = self.current[consumer]
            count = len(mine)
            topics = self.consumer_topics[consumer]
            if count == self._max_size(topics):
                continue
            held = set(mine)
            for topic in topics:
                for p in range(len(self.partitions[topic])):
                    tp = TopicPartition(topic, p)
                    if tp not in held and count + 1 < len(self.current[owner[tp]]):
                        return False
        return True

    def _score(self, assignment: dict[str, list[TopicPartition]]) -> int:
        sizes = [len(v) for v in assignment.values()]
        return sum(abs(a - b) for i, a in enumerate(sizes) for b in sizes[i + 1 :])

    def _maybe_assign_partition(self, tp: TopicPartition, racks: RackInfo | None) -> bool:
        for consumer in self.sorted_members.members():
            if tp.topic in self.consumer_topics[consumer] and (racks is None or not racks.racks_mismatch(consumer, tp)):
                self.sorted_members.remove(consumer)
                self.current[consumer].append(tp)
                self.partition_consumer[tp] = consumer
                self.sorted_members.add(consumer)
                return True
        return False

    def _maybe_assign(self, tps: list[TopicPartition], racks: RackInfo | None, remove_assigned: bool) -> None:
        left = []
        for tp in tps:
            if not self.topic_consumers[tp.topic]:
                left.append(tp)
                continue
            if not (self._maybe_assign_partition(tp, racks) and remove_assigned):
                left.append(tp)
        if remove_assigned:
            tps[:] = left

    def _topic_movable(self, topic: str) -> bool:
        return len(self.topic_consumers[topic]) >= 2

    def _consumer_movable(self, consumer: str) -> bool:
        tps = self.current[consumer]
        if len(tps) < self._max_size(self.consumer_topics[consumer]):
            return True
        return any(self._topic_movable(tp.topic) for tp in tps)

    def _balance(self, previous: dict[TopicPartition, tuple[str, int]], unassigned: list[TopicPartition]) -> None:
        initializing = not self.current[self.sorted_members.last()]
        to_assign = unassigned
        if self.racks.consumer_racks:
            to_assign = list(unassigned)
            self._maybe_assign(to_assign, self.racks, True)
        self._maybe_assign(to_assign, None, False)
        fixed = {
            TopicPartition(t, p)
            for t in self.topic_consumers
            if not self._topic_movable(t)
            for p in range(len(self.partitions[t]))
        }
        self.sorted_all[:] = [tp for tp in self.sorted_all if tp not in fixed]
        unassigned[:] = [tp for tp in unassigned if tp not in fixed]
        fixed_assignments: dict[str, list[TopicPartition]] = {}
        for consumer in list(self.consumer_topics):
            if not self._consumer_movable(consumer):
                self.sorted_members.remove(consumer)
                fixed_assignments[consumer] = self.current.pop(consumer)
        before = {c: list(tps) for c, tps in self.current.items()}
        before_owner = dict(self.partition_consumer)
        if not self.revocation_required:
            self._reassign_all(unassigned, previous)
        moved = self._reassign_all(self.sorted_all, previous)
        if not initializing and moved and self._score(self.current) >= self._score(before):
            self.current.clear()
            self.current.update(before)
            self.partition_consumer = before_owner
        for consumer, tps in fixed_assignments.items():
            self.current[consumer] = tps
            self.sorted_members.add(consumer)

    def _reassign_all(self, tps: list[TopicPartition], previous: dict[TopicPartition, tuple[str, int]]) -> bool:
        performed = False
        while True:
            modified = False
            for tp in tps:
                if self._is_balanced():
                    break
                consumer = self.partition_consumer[tp]
                prior = previous.get(tp)
                # guarded (see _sticky.py): a previous owner that was set aside (Java throws a
                # NullPointerException) or no longer subscribes to the topic is passed over
                if (
                    prior is not None
                    and (not self.guarded or (prior[0] in self.current and tp.topic in self.consumer_topics[prior[0]]))
                    and len(self.current[consumer]) > len(self.current[prior[0]]) + 1
                ):
                    self._reassign(tp, prior[0])
                    performed = modified = True
                    continue
                rack = self.racks.consumer_racks.get(consumer)
                replica_racks = self.racks.partition_racks.get(tp)
                found = False
                if rack is not None and replica_racks and rack in replica_racks:
                    for other in self.topic_consumers[tp.topic]:
                        other_rack = self.racks.consumer_racks.get(other)
                        if other_rack is None or other_rack not in replica_racks:
                            continue
                        if len(self.current[consumer]) > len(self.current[other]) + 1:
                            self._reassign(tp, None)
                            performed = modified = found = True
                            break
                if not found:
                    for other in self.topic_consumers[tp.topic]:
                        if len(self.current[consumer]) > len(self.current[other]) + 1:
                            self._reassign(tp, None)
                            performed = modified = True
                            break
            if not modified:
                return performed

    def _reassign(self, tp: TopicPartition, new: str | None) -> None:
        if new is None:
            new = next(c for c in self.sorted_members.members() if tp.topic in self.consumer_topics[c])
        moving = self.movements.partition_to_move(tp, self.partition_consumer[tp], new)
        old = self.partition_consumer[moving]
        self.sorted_members.remove(old)
        self.sorted_members.remove(new)
        self.movements.move(moving, old, new)
        self.current[old].remove(moving)
        self.current[new].append(moving)
        self.partition_consumer[moving] = new
        self.sorted_members.add(new)
        self.sorted_members.add(old)
