"""What the sticky assignors' two builders share: a member's history, rack information, and the
partition orders Kafka's ``AbstractStickyAssignor`` uses (see `kraftlog.client.assignors._sticky`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kraftlog.client._metadata import TopicPartition
from kraftlog.client.assignors._assignors import PartitionRacks, Subscription
from kraftlog.common import java_int32, java_string_hash, java_string_key

__all__ = [
    "DEFAULT_GENERATION",
    "MemberData",
    "RackInfo",
    "tp_hash",
    "tp_java_order",
    "topic_partitions",
    "unassigned_partitions",
]

DEFAULT_GENERATION = -1


def tp_hash(tp: TopicPartition) -> int:
    """Java's ``TopicPartition.hashCode``."""
    return java_int32(31 * (31 + tp.partition) + java_string_hash(tp.topic))


def tp_java_order(tp: TopicPartition) -> tuple[bytes, int]:
    return (java_string_key(tp.topic), tp.partition)


@dataclass(frozen=True)
class MemberData:
    """What the leader knows of a member's previous assignment."""

    partitions: Sequence[TopicPartition]
    generation: int | None  # None: the member sent none


# ==================================================================================== racks


class RackInfo:
    """Consumer racks and partition replica racks, as far as rack-aware assignment applies."""

    def __init__(self, partitions: PartitionRacks, subscriptions: Mapping[str, Subscription]) -> None:
        consumers_by_rack: dict[str, list[str]] = {}
        for member, sub in subscriptions.items():
            if sub.rack_id:
                consumers_by_rack.setdefault(sub.rack_id, []).append(member)
        partition_racks: dict[TopicPartition, frozenset[str]] = {}
        partition_rack_names: set[str] = set()
        if consumers_by_rack:
            for topic, racks in partitions.items():
                for p, replica_racks in enumerate(racks):
                    rs = frozenset(replica_racks)
                    partition_racks[TopicPartition(topic, p)] = rs
                    partition_rack_names |= rs
        use = (
            bool(consumers_by_rack)
            and not partition_rack_names.isdisjoint(consumers_by_rack)
            and not all(rs == partition_rack_names for rs in partition_racks.values())
        )
        self.consumer_racks: dict[str, str] = (
            {c: rack for rack, members in consumers_by_rack.items() for c in members} if use else {}
        )
        self.partition_racks: dict[TopicPartition, frozenset[str]] = partition_racks if use else {}
        # as in Java, counted even when rack-aware assignment is off (it then only orders partitions)
        self.consumers_by_partition = {
            tp: sum(len(consumers_by_rack.get(r, ())) for r in rs) for tp, rs in partition_racks.items()
        }

    def racks_mismatch(self, consumer: str, tp: TopicPartition) -> bool:
        rack = self.consumer_racks.get(consumer)
        if rack is None:
            return False
        replica_racks = self.partition_racks.get(tp)
        return replica_racks is None or rack not in replica_racks

    def sort_by_rack_consumers(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        if not self.consumers_by_partition:
            return tps
        return sorted(tps, key=lambda tp: self.consumers_by_partition.get(tp, 0))  # stable, as Java's

    def next_rack_consumer(self, tp: TopicPartition, consumers: list[str], first: int) -> int:
        racks = self.partition_racks.get(tp)
        if not racks:
            return -1
        for i in range(len(consumers)):
            index = (first + i) % len(consumers)
            rack = self.consumer_racks.get(consumers[index])
            if rack is not None and rack in racks:
                return index
        return -1


def topic_partitions(partitions: PartitionRacks, sorted_topics: list[str]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t in sorted_topics for p in range(len(partitions[t]))]


def unassigned_partitions(
    all_sorted: list[TopicPartition], assigned_sorted: list[TopicPartition]
) -> list[TopicPartition]:
    """Java's two-pointer difference of two lists in the same order (all minus assigned)."""
    out: list[TopicPartition] = []
    it = iter(assigned_sorted)
    nxt = next(it)
    direct = False
    for tp in all_sorted:
        if direct or tp != nxt:
            out.append(tp)
        else:
            try:
                nxt = next(it)
            except StopIteration:
                direct = True
    return out
