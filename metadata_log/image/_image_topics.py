"""The topics part of the metadata image: topics and their partitions' registrations (leader, epochs,
replicas, ISR) (see `metadata_log.image`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, NamedTuple, Protocol

from kraftlog.metadata_log._records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    LeaderRecoveryState,
    MetadataRecord,
    PartitionRecord,
    TopicRecord,
)
from kraftlog.metadata_log.image._image_base import _EMPTY_MAP, MetadataReplayError, _frozen_map
from kraftlog.metadata_log.image._image_cluster import BrokerRegistration, ClusterImage


class TopicIdPartition(NamedTuple):
    """One partition named both ways: by topic id (stable) and topic name (for people and files)."""

    topic_id: str
    topic_name: str
    partition_id: int


class PartitionChange(Protocol):
    """What `PartitionRegistration.merge` reads of a change: a `PartitionChangeRecord`, or the
    Spark job's lighter tuple of the same fields."""

    @property
    def leader(self) -> int: ...
    @property
    def replicas(self) -> Sequence[int] | None: ...
    @property
    def isr(self) -> Sequence[int] | None: ...
    @property
    def removing_replicas(self) -> Sequence[int] | None: ...
    @property
    def adding_replicas(self) -> Sequence[int] | None: ...
    @property
    def leader_recovery_state(self) -> int: ...
    @property
    def eligible_leader_replicas(self) -> Sequence[int] | None: ...
    @property
    def last_known_elr(self) -> Sequence[int] | None: ...


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """The state of one partition (KRaft's PartitionRegistration; ZooKeeper's ``.../state`` node).

    ``leader_epoch`` changes only with the leader, so it fences a deposed leader; ``partition_epoch``
    changes with every change, so an `AlterPartition` built on stale state is rejected.

    ``elr`` (KIP-966's eligible leader replicas) are replicas that were in the ISR when it shrank
    below ``min.insync.replicas``: they hold every record acknowledged with acks=all, so one may lead
    cleanly when the ISR is empty. ``last_known_elr`` are former ELR members kept for an operator's
    last-resort choice. Both are empty unless ``eligible.leader.replicas.version`` >= 1.
    """

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionRegistration:
        return cls(
            replicas=tuple(record.replicas),
            isr=tuple(record.isr),
            leader=record.leader,
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            removing_replicas=tuple(record.removing_replicas),
            adding_replicas=tuple(record.adding_replicas),
            leader_recovery_state=record.leader_recovery_state,
            elr=tuple(record.eligible_leader_replicas),
            last_known_elr=tuple(record.last_known_elr),
        )

    def to_record(self, topic_id: str, partition_id: int) -> PartitionRecord:
        """The record that recreates this partition exactly, epochs included (used by snapshots)."""
        return PartitionRecord(
            partition_id=partition_id,
            topic_id=topic_id,
            replicas=self.replicas,
            isr=self.isr,
            leader=self.leader,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            removing_replicas=self.removing_replicas,
            adding_replicas=self.adding_replicas,
            leader_recovery_state=self.leader_recovery_state,
            eligible_leader_replicas=self.elr,
            last_known_elr=self.last_known_elr,
        )

    def merge(self, change: PartitionChange) -> PartitionRegistration:
        """Apply a partial `PartitionChangeRecord` (KRaft's PartitionRegistration.merge).

        Fields left at their "unchanged" marker (None, ``NO_LEADER_CHANGE``,
        ``LeaderRecoveryState.NO_CHANGE``) keep their value. Naming a leader, even ``NO_LEADER`` or
        the current one, bumps the leader epoch: the controller writes a leader only when it wants
        the old epoch fenced. Every change bumps the partition epoch.
        """
        if change.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = change.leader, self.leader_epoch + 1
        return PartitionRegistration(
            replicas=self.replicas if change.replicas is None else tuple(change.replicas),
            isr=self.isr if change.isr is None else tuple(change.isr),
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=(
                self.removing_replicas if change.removing_replicas is None else tuple(change.removing_replicas)
            ),
            adding_replicas=(self.adding_replicas if change.adding_replicas is None else tuple(change.adding_replicas)),
            leader_recovery_state=(
                self.leader_recovery_state
                if change.leader_recovery_state == LeaderRecoveryState.NO_CHANGE
                else change.leader_recovery_state
            ),
            elr=self.elr if change.eligible_leader_replicas is None else tuple(change.eligible_leader_replicas),
            last_known_elr=self.last_known_elr if change.last_known_elr is None else tuple(change.last_known_elr),
        )

    def validate(self) -> None:
        """Raise `MetadataReplayError` unless this is a possible partition state.

        Replay calls it for every partition it writes; the controller can call it on a proposed
        state before proposing the record, since a committed bad record would break every node.
        """
        replicas = self.replicas
        replica_set = set(replicas)
        if not replicas:
            raise MetadataReplayError("a partition needs at least one replica")
        if len(replica_set) != len(replicas):
            raise MetadataReplayError(f"duplicate broker in replicas {list(replicas)}")
        if self.leader != NO_LEADER and self.leader not in replica_set:
            raise MetadataReplayError(f"leader {self.leader} is not a replica of {list(replicas)}")
        isr_set = set(self.isr)
        if len(isr_set) != len(self.isr) or not isr_set <= replica_set:
            raise MetadataReplayError(
                f"isr {list(self.isr)} is not a duplicate-free subset of replicas {list(replicas)}"
            )
        if self.adding_replicas or self.removing_replicas:
            adding, removing = set(self.adding_replicas), set(self.removing_replicas)
            if (
                len(adding) != len(self.adding_replicas)
                or len(removing) != len(self.removing_replicas)
                or not adding <= replica_set
                or not removing <= replica_set
                or adding & removing
            ):
                raise MetadataReplayError(
                    f"adding {list(self.adding_replicas)} / removing {list(self.removing_replicas)}"
                    f" must be disjoint subsets of replicas {list(replicas)}"
                )
        elr, last_known = set(self.elr), set(self.last_known_elr)
        if (
            len(elr) != len(self.elr)
            or len(last_known) != len(self.last_known_elr)
            or not elr <= replica_set
            or not last_known <= replica_set
        ):
            # (an ELR member also in the ISR is not refused: Kafka's replay does not, and the
            # controller never writes one, `_change` takes a rejoining member out of the ELR)
            raise MetadataReplayError(
                f"eligible leader replicas {list(self.elr)} / last known {list(self.last_known_elr)} must be"
                f" duplicate-free subsets of replicas {list(replicas)}"
            )
        if self.leader_epoch < 0 or self.partition_epoch < 0:
            raise MetadataReplayError("leader and partition epochs must not be negative")
        if self.leader_recovery_state not in (LeaderRecoveryState.RECOVERED, LeaderRecoveryState.RECOVERING):
            raise MetadataReplayError(f"unknown leader recovery state {self.leader_recovery_state}")

    @property
    def has_leader(self) -> bool:
        """True when some broker leads (a property, so ``if p.has_leader()`` fails loudly)."""
        return self.leader != NO_LEADER

    @property
    def is_reassigning(self) -> bool:
        """True while a reassignment is adding or removing replicas."""
        return bool(self.adding_replicas or self.removing_replicas)

    def offline_replicas(self, brokers: ClusterImage | Mapping[int, BrokerRegistration]) -> tuple[int, ...]:
        """Replicas whose broker is unregistered or fenced, in assignment order.

        Those are what Kafka's metadata response reports as offline: they neither serve nor fetch.
        """
        regs = brokers.brokers if isinstance(brokers, ClusterImage) else brokers
        offline = []
        for replica in self.replicas:
            reg = regs.get(replica)
            if reg is None or reg.fenced:
                offline.append(replica)
        return tuple(offline)


@dataclass(frozen=True, slots=True)
class TopicImage:
    """One topic: its name, its id, and its partitions by id."""

    name: str
    topic_id: str
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=lambda: _EMPTY_MAP)

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", _frozen_map(self.partitions))

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    def partition(self, partition_id: int) -> PartitionRegistration | None:
        return self.partitions.get(partition_id)

    def to_records(self) -> list[MetadataRecord]:
        """The TopicRecord followed by its PartitionRecords in partition order."""
        out: list[MetadataRecord] = [TopicRecord(name=self.name, topic_id=self.topic_id)]
        for pid in sorted(self.partitions):
            out.append(self.partitions[pid].to_record(self.topic_id, pid))
        return out


@dataclass(frozen=True, slots=True)
class TopicsImage:
    """Every live topic, indexed by id and by name (both views hold the same `TopicImage`s)."""

    by_id: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY_MAP)
    by_name: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[TopicsImage]

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_id", _frozen_map(self.by_id))
        object.__setattr__(self, "by_name", _frozen_map(self.by_name))

    @classmethod
    def of(cls, topics: Iterable[TopicImage]) -> TopicsImage:
        """Build both indexes from a list of topics (handy in tests and tools)."""
        topics = list(topics)
        return cls(MappingProxyType({t.topic_id: t for t in topics}), MappingProxyType({t.name: t for t in topics}))

    def get_by_id(self, topic_id: str) -> TopicImage | None:
        return self.by_id.get(topic_id)

    def get_by_name(self, name: str) -> TopicImage | None:
        return self.by_name.get(name)

    def partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        topic = self.by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    @property
    def topic_count(self) -> int:
        return len(self.by_id)

    @property
    def partition_count(self) -> int:
        """Partitions over all topics."""
        return sum(len(t.partitions) for t in self.by_id.values())

    @property
    def offline_partition_count(self) -> int:
        """Partitions without a leader: not writable or readable (Kafka's OfflinePartitionsCount)."""
        return sum(1 for t in self.by_id.values() for p in t.partitions.values() if not p.has_leader)

    def _select(self, keep: Callable[[PartitionRegistration], bool]) -> list[TopicIdPartition]:
        out = []
        for name in sorted(self.by_name):
            topic = self.by_name[name]
            for pid in sorted(topic.partitions):
                if keep(topic.partitions[pid]):
                    out.append(TopicIdPartition(topic.topic_id, name, pid))
        return out

    def partitions_led_by(self, broker_id: int) -> list[TopicIdPartition]:
        """Partitions whose leader is ``broker_id``, sorted by (topic name, partition)."""
        return self._select(lambda p: p.leader == broker_id)

    def partitions_with_replica(self, broker_id: int) -> list[TopicIdPartition]:
        """Partitions that have a replica on ``broker_id``, sorted by (topic name, partition)."""
        return self._select(lambda p: broker_id in p.replicas)

    def __len__(self) -> int:
        return len(self.by_id)


TopicsImage.EMPTY = TopicsImage()
