"""The metadata image: what the metadata log says, at one offset, as immutable values.

Modelled on KRaft's ``metadata/image`` package. A `MetadataImage` is the state obtained by replaying
every record of the metadata log up to (and including) ``offset``. It never changes: every part is a
frozen dataclass and every map is a `types.MappingProxyType` over a dict that nobody mutates after
construction, so any thread (a gRPC handler, the broker's replica manager, a snapshot writer) may
hold and read an image without locks.

The one way to get a new image is a `MetadataDelta`:

    delta = MetadataDelta(image)
    for entry in committed_entries:
        delta.replay(entry)          # the ONLY place state changes
    image = delta.apply()            # a new image; untouched parts are the same objects

`apply` shares every part of the old image the delta did not touch (the same `BrokerRegistration`,
`TopicImage`, `PartitionRegistration` and config-map objects), so a new image costs what changed,
not what exists, and consumers can compare parts with ``is`` to skip work.

Replay is deterministic (DESIGN.md §3): no clock, no randomness, no I/O. Every random or
time-dependent choice was made by the active controller and written into the record. A record that
would produce an impossible state (a change to an unknown topic, a stale broker epoch, a duplicate
topic name, producer ids going backwards, ...) raises `MetadataReplayError` and leaves the delta
exactly as it was before that record.

The delta also says what changed (`changed_topic_ids`, `deleted_topics`, `changed_partitions`,
`changed_broker_ids`, ...) so a broker can decide "become leader / follower / stop replica" from the
delta alone instead of diffing two images.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from kraftlog.metadata_log._records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    FencingChange,
    LeaderRecoveryState,
    LogEntry,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)

__all__ = [
    "MetadataReplayError",
    "BrokerRegistration",
    "PartitionRegistration",
    "TopicIdPartition",
    "TopicImage",
    "TopicsImage",
    "ClusterImage",
    "ConfigResource",
    "ConfigurationsImage",
    "ProducerIdsImage",
    "FeaturesImage",
    "MetadataImage",
    "MetadataDelta",
]

ConfigResource = tuple[int, str]
"""``(resource_type, resource_name)``: a `ConfigResourceType` id and, e.g., a topic name."""

_EMPTY_MAP: Mapping[Any, Any] = MappingProxyType({})


def _frozen_map(value: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """Return ``value`` as a read-only mapping, copying only when it is not one already.

    Images built by `MetadataDelta.apply` already hold `MappingProxyType`s over private dicts, so
    this costs one ``isinstance`` there; a caller building an image by hand with a plain dict gets
    a private copy, so mutating its dict later cannot change the image.
    """
    if isinstance(value, MappingProxyType):
        return value
    return MappingProxyType(dict(value))


class MetadataReplayError(ValueError):
    """A record that cannot be applied to the current state (unknown type or impossible change).

    Replaying committed records must never fail on a healthy cluster, so this signals a controller
    bug or a corrupt log. It carries Kafka's UNKNOWN_SERVER_ERROR attributes so a server that hits
    it while answering a request can still produce a well-formed error response.
    """

    error_code: ClassVar[int] = -1
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False


# --------------------------------------------------------------------------------------------------
# brokers


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """One broker as the controllers know it (KRaft's BrokerRegistration).

    ``broker_epoch`` identifies one registration: every fence/unfence/unregister record names the
    epoch it was decided against, so a decision about a previous incarnation cannot touch a newer one.
    """

    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[str, ...] = ()

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord) -> BrokerRegistration:
        return cls(
            broker_id=record.broker_id,
            incarnation_id=record.incarnation_id,
            broker_epoch=record.broker_epoch,
            endpoints=tuple(record.endpoints),
            rack=record.rack,
            fenced=bool(record.fenced),
            in_controlled_shutdown=bool(record.in_controlled_shutdown),
            log_dirs=tuple(record.log_dirs),
        )

    def to_record(self) -> RegisterBrokerRecord:
        """The record that recreates this registration, flags included (used by snapshots)."""
        return RegisterBrokerRecord(
            broker_id=self.broker_id,
            incarnation_id=self.incarnation_id,
            broker_epoch=self.broker_epoch,
            endpoints=self.endpoints,
            rack=self.rack,
            fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
            log_dirs=self.log_dirs,
        )

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        """The endpoint of the named listener, or None when the broker does not expose it."""
        for ep in self.endpoints:
            if ep.name == listener_name:
                return ep
        return None


@dataclass(frozen=True, slots=True)
class ClusterImage:
    """Registered brokers by id (the ``/brokers/ids`` subtree of ZooKeeper-mode Kafka)."""

    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[ClusterImage]

    def __post_init__(self) -> None:
        object.__setattr__(self, "brokers", _frozen_map(self.brokers))

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def broker_ids(self) -> list[int]:
        """Every registered broker id, ascending."""
        return sorted(self.brokers)

    def unfenced_broker_ids(self) -> list[int]:
        """Ids of brokers that may lead and be placed on (registered and not fenced), ascending."""
        return sorted(b for b, reg in self.brokers.items() if not reg.fenced)

    def fenced_broker_ids(self) -> list[int]:
        return sorted(b for b, reg in self.brokers.items() if reg.fenced)

    def is_unfenced(self, broker_id: int) -> bool:
        reg = self.brokers.get(broker_id)
        return reg is not None and not reg.fenced

    def __len__(self) -> int:
        return len(self.brokers)


ClusterImage.EMPTY = ClusterImage()


# --------------------------------------------------------------------------------------------------
# topics and partitions


class TopicIdPartition(NamedTuple):
    """One partition named both ways: by topic id (stable) and topic name (for people and files)."""

    topic_id: str
    topic_name: str
    partition_id: int


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """The state of one partition (KRaft's PartitionRegistration; ZooKeeper's ``.../state`` node).

    ``leader_epoch`` changes only with the leader, so it fences a deposed leader; ``partition_epoch``
    changes with every change, so an `AlterPartition` built on stale state is rejected.
    """

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED

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
        )

    def merge(self, change: PartitionChangeRecord) -> PartitionRegistration:
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


# --------------------------------------------------------------------------------------------------
# configs, producer ids, features


@dataclass(frozen=True, slots=True)
class ConfigurationsImage:
    """Dynamic configs by resource: ``(resource_type, resource_name) -> {name: value}``.

    Only explicitly set keys are here; defaults live in `common.config`. A resource whose
    last key is deleted disappears, so "no entry" and "empty map" never both mean the same thing.
    """

    resources: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[ConfigurationsImage]

    def __post_init__(self) -> None:
        resources = self.resources
        if not isinstance(resources, MappingProxyType):
            resources = MappingProxyType({k: _frozen_map(v) for k, v in resources.items()})
        object.__setattr__(self, "resources", resources)

    def config(self, resource_type: int, resource_name: str) -> Mapping[str, str]:
        """The explicitly set keys of one resource (an empty mapping when none are)."""
        return self.resources.get((resource_type, resource_name), _EMPTY_MAP)

    def topic_config(self, topic_name: str) -> Mapping[str, str]:
        return self.config(ConfigResourceType.TOPIC, topic_name)

    def broker_config(self, broker_id: int | str) -> Mapping[str, str]:
        """Per-broker dynamic configs; ``""`` names the cluster-wide default (as in Kafka)."""
        return self.config(ConfigResourceType.BROKER, str(broker_id))

    def __len__(self) -> int:
        return len(self.resources)


ConfigurationsImage.EMPTY = ConfigurationsImage()


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    """The first producer id not yet handed out (``/latest_producer_id_block`` in ZooKeeper mode)."""

    next_producer_id: int = 0

    EMPTY: ClassVar[ProducerIdsImage]


ProducerIdsImage.EMPTY = ProducerIdsImage()


@dataclass(frozen=True, slots=True)
class FeaturesImage:
    """Finalized feature levels by name; an absent feature is at level 0 (disabled)."""

    levels: Mapping[str, int] = field(default_factory=lambda: _EMPTY_MAP)

    EMPTY: ClassVar[FeaturesImage]

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", _frozen_map(self.levels))

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)


FeaturesImage.EMPTY = FeaturesImage()


# --------------------------------------------------------------------------------------------------
# the whole image


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The whole metadata state after replaying the log through ``offset``.

    Provenance (``offset``, ``epoch``, ``timestamp_ms`` of the last applied entry) is -1 for an
    image no entry produced. ``==`` compares content and provenance; `same_content` ignores
    provenance (a snapshot carries it separately from its records).
    """

    offset: int = -1
    epoch: int = -1
    timestamp_ms: int = -1
    features: FeaturesImage = FeaturesImage.EMPTY
    cluster: ClusterImage = ClusterImage.EMPTY
    topics: TopicsImage = TopicsImage.EMPTY
    configs: ConfigurationsImage = ConfigurationsImage.EMPTY
    producer_ids: ProducerIdsImage = ProducerIdsImage.EMPTY

    EMPTY: ClassVar[MetadataImage]

    @property
    def is_empty(self) -> bool:
        return self.same_content(MetadataImage.EMPTY)

    def same_content(self, other: MetadataImage) -> bool:
        """Equal state, whatever the provenance."""
        return (
            self.features == other.features
            and self.cluster == other.cluster
            and self.topics == other.topics
            and self.configs == other.configs
            and self.producer_ids == other.producer_ids
        )

    def with_provenance(self, offset: int, epoch: int, timestamp_ms: int) -> MetadataImage:
        """The same state stamped with another provenance (e.g. a snapshot's own offset)."""
        return replace(self, offset=offset, epoch=epoch, timestamp_ms=timestamp_ms)

    def to_records(self) -> list[MetadataRecord]:
        """This image as records, in a deterministic order (a snapshot's content).

        Order: features by name; brokers by id (RegisterBrokerRecord with their flags); the producer
        id block when one was handed out; topics by name, each TopicRecord followed by its
        PartitionRecords in partition order; ConfigRecords by (type, resource, key). Replaying them
        into an empty delta gives an image with the same content. Equal images give equal lists.
        """
        out: list[MetadataRecord] = []
        levels = self.features.levels
        for name in sorted(levels):
            out.append(FeatureLevelRecord(name=name, feature_level=levels[name]))
        brokers = self.cluster.brokers
        for broker_id in sorted(brokers):
            out.append(brokers[broker_id].to_record())
        if self.producer_ids.next_producer_id > 0:
            # Kafka's snapshot writes -1/-1: the requesting broker no longer matters.
            out.append(
                ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=self.producer_ids.next_producer_id)
            )
        by_name = self.topics.by_name
        for name in sorted(by_name):
            out.extend(by_name[name].to_records())
        resources = self.configs.resources
        for resource in sorted(resources):
            values = resources[resource]
            for key in sorted(values):
                out.append(
                    ConfigRecord(resource_type=resource[0], resource_name=resource[1], name=key, value=values[key])
                )
        return out

    @classmethod
    def from_records(
        cls, records: Iterable[MetadataRecord | LogEntry], offset: int = -1, epoch: int = -1, timestamp_ms: int = -1
    ) -> MetadataImage:
        """Replay ``records`` into an empty image and stamp it with the given provenance.

        This is how a snapshot is loaded: its records carry no offsets, its file name does.
        """
        delta = MetadataDelta(cls.EMPTY)
        replay = delta.replay
        for record in records:
            replay(record)
        return delta.apply().with_provenance(offset, epoch, timestamp_ms)


MetadataImage.EMPTY = MetadataImage()


# --------------------------------------------------------------------------------------------------
# the delta


class _TopicChange:
    """A topic touched in a delta: its base image (None if created here) and changed partitions."""

    __slots__ = ("base", "name", "topic_id", "partitions")

    def __init__(self, base: TopicImage | None, name: str, topic_id: str) -> None:
        self.base = base
        self.name = name
        self.topic_id = topic_id
        self.partitions: dict[int, PartitionRegistration] = {}

    def partition(self, partition_id: int) -> PartitionRegistration | None:
        reg = self.partitions.get(partition_id)
        if reg is None and self.base is not None:
            reg = self.base.partitions.get(partition_id)
        return reg


_DELETED = None  # value of a broker slot in MetadataDelta._brokers once it is unregistered


class MetadataDelta:
    """The changes on top of one image; `replay` records into it, `apply` makes a new image.

    A delta is mutable and owned by one thread. `apply` may be called more than once (e.g. a broker
    publishing every N records); each call returns an image that later replays do not affect.
    """

    __slots__ = (
        "_image",
        "_offset",
        "_epoch",
        "_timestamp_ms",
        "_features",
        "_brokers",
        "_topics",
        "_deleted_topics",
        "_created_names",
        "_configs",
        "_next_producer_id",
    )

    _DISPATCH: ClassVar[dict[type, Callable[[MetadataDelta, Any], None]]]

    def __init__(self, image: MetadataImage) -> None:
        self._image = image
        self._offset = image.offset
        self._epoch = image.epoch
        self._timestamp_ms = image.timestamp_ms
        self._features: dict[str, int] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[str, _TopicChange] = {}  # live topics created or changed here
        self._deleted_topics: dict[str, TopicImage] = {}  # base-image topics deleted here
        self._created_names: dict[str, str] = {}  # name -> id, live topics created here
        self._configs: dict[ConfigResource, dict[str, str]] = {}  # touched resources, full maps
        self._next_producer_id: int | None = None

    # ---- provenance and change sets

    @property
    def image(self) -> MetadataImage:
        """The image this delta started from."""
        return self._image

    @property
    def offset(self) -> int:
        return self._offset

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def timestamp_ms(self) -> int:
        return self._timestamp_ms

    @property
    def changed_topic_ids(self) -> set[str]:
        """Live topics created or with a partition written in this delta."""
        return set(self._topics)

    @property
    def created_topic_ids(self) -> set[str]:
        """Live topics created in this delta (a subset of `changed_topic_ids`)."""
        return {tid for tid, ch in self._topics.items() if ch.base is None}

    @property
    def deleted_topics(self) -> Mapping[str, TopicImage]:
        """Topics of the base image deleted in this delta, as they were before (their replicas'
        files are what brokers must delete). A topic created and deleted within the delta is absent:
        no broker ever saw it."""
        return MappingProxyType(dict(self._deleted_topics))

    @property
    def changed_partitions(self) -> dict[str, set[int]]:
        """topic id -> ids of partitions written (created or changed) in this delta."""
        return {tid: set(ch.partitions) for tid, ch in self._topics.items() if ch.partitions}

    @property
    def changed_broker_ids(self) -> set[int]:
        """Brokers registered, unregistered, fenced, unfenced or otherwise changed here."""
        return set(self._brokers)

    @property
    def changed_config_resources(self) -> set[ConfigResource]:
        return set(self._configs)

    @property
    def changed_features(self) -> set[str]:
        return set(self._features)

    @property
    def producer_ids_changed(self) -> bool:
        return self._next_producer_id is not None

    # ---- replay

    def replay(self, entry_or_record: LogEntry | MetadataRecord) -> None:
        """Apply one committed entry (advancing the provenance) or one bare record (a snapshot's).

        Raises `MetadataReplayError` on an unknown record type, an entry whose offset does not
        increase or whose epoch goes back, or an impossible change; the delta is then unchanged.
        """
        if isinstance(entry_or_record, LogEntry):
            entry = entry_or_record
            if entry.offset <= self._offset:
                raise MetadataReplayError(f"entry offset {entry.offset} does not follow offset {self._offset}")
            if entry.epoch < self._epoch:
                raise MetadataReplayError(
                    f"entry at offset {entry.offset} has epoch {entry.epoch} < epoch {self._epoch}"
                )
            self._replay_record(entry.record)
            self._offset = entry.offset
            self._epoch = entry.epoch
            self._timestamp_ms = entry.timestamp_ms
        else:
            self._replay_record(entry_or_record)

    def _replay_record(self, record: MetadataRecord) -> None:
        handler = self._DISPATCH.get(type(record))
        if handler is None:
            raise MetadataReplayError(f"cannot replay unknown record type {type(record).__name__}")
        handler(self, record)

    # brokers

    def _broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self._image.cluster.brokers.get(broker_id)

    def _broker_at_epoch(self, broker_id: int, broker_epoch: int, what: str) -> BrokerRegistration:
        reg = self._broker(broker_id)
        if reg is None:
            raise MetadataReplayError(f"cannot {what} broker {broker_id}: it is not registered")
        if reg.broker_epoch != broker_epoch:
            raise MetadataReplayError(
                f"cannot {what} broker {broker_id} at epoch {broker_epoch}: "
                f"its registration has epoch {reg.broker_epoch}"
            )
        return reg

    def _replay_register_broker(self, record: RegisterBrokerRecord) -> None:
        self._brokers[record.broker_id] = BrokerRegistration.from_record(record)

    def _replay_unregister_broker(self, record: UnregisterBrokerRecord) -> None:
        self._broker_at_epoch(record.broker_id, record.broker_epoch, "unregister")
        self._brokers[record.broker_id] = _DELETED

    def _replay_fence_broker(self, record: FenceBrokerRecord) -> None:
        reg = self._broker_at_epoch(record.broker_id, record.broker_epoch, "fence")
        self._brokers[record.broker_id] = replace(reg, fenced=True)

    def _replay_unfence_broker(self, record: UnfenceBrokerRecord) -> None:
        reg = self._broker_at_epoch(record.broker_id, record.broker_epoch, "unfence")
        self._brokers[record.broker_id] = replace(reg, fenced=False)

    def _replay_broker_registration_change(self, record: BrokerRegistrationChangeRecord) -> None:
        reg = self._broker_at_epoch(record.broker_id, record.broker_epoch, "change")
        if record.fenced == FencingChange.FENCE:
            fenced = True
        elif record.fenced == FencingChange.UNFENCE:
            fenced = False
        elif record.fenced == FencingChange.NONE:
            fenced = reg.fenced
        else:
            raise MetadataReplayError(f"unknown fencing change {record.fenced}")
        if record.in_controlled_shutdown == 1:
            shutting_down = True
        elif record.in_controlled_shutdown == 0:
            shutting_down = reg.in_controlled_shutdown
        else:
            raise MetadataReplayError(f"unknown controlled-shutdown change {record.in_controlled_shutdown}")
        self._brokers[record.broker_id] = replace(reg, fenced=fenced, in_controlled_shutdown=shutting_down)

    # topics

    def _live_topic_id_by_name(self, name: str) -> str | None:
        topic_id = self._created_names.get(name)
        if topic_id is not None:
            return topic_id
        base = self._image.topics.by_name.get(name)
        if base is not None and base.topic_id not in self._deleted_topics:
            return base.topic_id
        return None

    def _is_live_topic_id(self, topic_id: str) -> bool:
        return topic_id in self._topics or (
            topic_id in self._image.topics.by_id and topic_id not in self._deleted_topics
        )

    def _replay_topic(self, record: TopicRecord) -> None:
        if self._is_live_topic_id(record.topic_id):
            raise MetadataReplayError(f"topic id {record.topic_id} already exists")
        holder = self._live_topic_id_by_name(record.name)
        if holder is not None:
            raise MetadataReplayError(f"topic name {record.name!r} is taken by topic id {holder}")
        self._topics[record.topic_id] = _TopicChange(None, record.name, record.topic_id)
        self._created_names[record.name] = record.topic_id

    def _current_topic(self, topic_id: str, what: str) -> _TopicChange | TopicImage:
        change = self._topics.get(topic_id)
        if change is not None:
            return change
        base = None if topic_id in self._deleted_topics else self._image.topics.by_id.get(topic_id)
        if base is None:
            raise MetadataReplayError(f"cannot {what}: unknown topic id {topic_id}")
        return base

    def _topic_change(self, topic: _TopicChange | TopicImage) -> _TopicChange:
        if isinstance(topic, _TopicChange):
            return topic
        change = _TopicChange(topic, topic.name, topic.topic_id)
        self._topics[topic.topic_id] = change
        return change

    def _replay_partition(self, record: PartitionRecord) -> None:
        topic = self._current_topic(record.topic_id, f"create partition {record.partition_id}")
        if record.partition_id < 0:
            raise MetadataReplayError(f"negative partition id {record.partition_id}")
        reg = PartitionRegistration.from_record(record)
        reg.validate()
        self._topic_change(topic).partitions[record.partition_id] = reg

    def _replay_partition_change(self, record: PartitionChangeRecord) -> None:
        topic = self._current_topic(record.topic_id, f"change partition {record.partition_id}")
        current = topic.partition(record.partition_id)
        if current is None:
            raise MetadataReplayError(
                f"cannot change unknown partition {record.partition_id} of topic {record.topic_id}"
            )
        reg = current.merge(record)
        reg.validate()
        self._topic_change(topic).partitions[record.partition_id] = reg

    def _replay_remove_topic(self, record: RemoveTopicRecord) -> None:
        topic_id = record.topic_id
        change = self._topics.get(topic_id)
        if change is not None:
            del self._topics[topic_id]
            name = change.name
            if change.base is None:
                del self._created_names[name]
            else:
                self._deleted_topics[topic_id] = change.base
        else:
            base = self._current_topic(topic_id, "remove topic")
            assert isinstance(base, TopicImage)
            name = base.name
            self._deleted_topics[topic_id] = base
        # The topic's configs go with it (Kafka deletes them in the same step), so a topic
        # re-created under this name starts from the defaults.
        resource = (ConfigResourceType.TOPIC, name)
        if resource in self._configs or resource in self._image.configs.resources:
            self._configs[resource] = {}

    # configs, producer ids, features

    def _replay_config(self, record: ConfigRecord) -> None:
        resource = (record.resource_type, record.resource_name)
        values = self._configs.get(resource)
        if values is None:
            if record.value is None and record.name not in self._image.configs.config(*resource):
                return  # deleting an unset key changes nothing; leave the resource untouched
            values = dict(self._image.configs.config(*resource))
            self._configs[resource] = values
        if record.value is None:
            values.pop(record.name, None)
        else:
            values[record.name] = record.value

    def _replay_producer_ids(self, record: ProducerIdsRecord) -> None:
        current = (
            self._image.producer_ids.next_producer_id if self._next_producer_id is None else self._next_producer_id
        )
        if record.next_producer_id < current:
            raise MetadataReplayError(f"next producer id {record.next_producer_id} goes back from {current}")
        self._next_producer_id = record.next_producer_id

    def _replay_feature_level(self, record: FeatureLevelRecord) -> None:
        if record.feature_level < 0:
            raise MetadataReplayError(f"negative level {record.feature_level} for feature {record.name!r}")
        self._features[record.name] = record.feature_level

    def _replay_no_op(self, record: NoOpRecord) -> None:
        """Nothing to change: the entry's provenance is the point (a new epoch's first commit)."""

    # ---- apply

    def apply(self) -> MetadataImage:
        """A new image: the base with this delta's changes, sharing every untouched part."""
        base = self._image
        return MetadataImage(
            offset=self._offset,
            epoch=self._epoch,
            timestamp_ms=self._timestamp_ms,
            features=self._apply_features(base.features),
            cluster=self._apply_cluster(base.cluster),
            topics=self._apply_topics(base.topics),
            configs=self._apply_configs(base.configs),
            producer_ids=(
                base.producer_ids if self._next_producer_id is None else ProducerIdsImage(self._next_producer_id)
            ),
        )

    def _apply_features(self, base: FeaturesImage) -> FeaturesImage:
        if not self._features:
            return base
        levels = dict(base.levels)
        for name, level in self._features.items():
            if level == 0:
                levels.pop(name, None)
            else:
                levels[name] = level
        return FeaturesImage(MappingProxyType(levels))

    def _apply_cluster(self, base: ClusterImage) -> ClusterImage:
        if not self._brokers:
            return base
        brokers = dict(base.brokers)
        for broker_id, reg in self._brokers.items():
            if reg is _DELETED:
                brokers.pop(broker_id, None)
            else:
                brokers[broker_id] = reg
        return ClusterImage(MappingProxyType(brokers))

    def _apply_topics(self, base: TopicsImage) -> TopicsImage:
        if not self._topics and not self._deleted_topics:
            return base
        by_id = dict(base.by_id)
        by_name = dict(base.by_name)
        for topic_id, old in self._deleted_topics.items():
            del by_id[topic_id]
            del by_name[old.name]
        for topic_id, change in self._topics.items():
            # A base topic is in `_topics` only once a partition of it was written, so every entry
            # here needs a new TopicImage; its untouched partitions are carried over as they are.
            partitions = {} if change.base is None else dict(change.base.partitions)
            partitions.update(change.partitions)
            topic = TopicImage(change.name, topic_id, MappingProxyType(partitions))
            by_id[topic_id] = topic
            by_name[change.name] = topic
        return TopicsImage(MappingProxyType(by_id), MappingProxyType(by_name))

    def _apply_configs(self, base: ConfigurationsImage) -> ConfigurationsImage:
        if not self._configs:
            return base
        resources = dict(base.resources)
        for resource, values in self._configs.items():
            if values:
                resources[resource] = MappingProxyType(dict(values))
            else:
                resources.pop(resource, None)
        return ConfigurationsImage(MappingProxyType(resources))


MetadataDelta._DISPATCH = {
    RegisterBrokerRecord: MetadataDelta._replay_register_broker,
    UnregisterBrokerRecord: MetadataDelta._replay_unregister_broker,
    FenceBrokerRecord: MetadataDelta._replay_fence_broker,
    UnfenceBrokerRecord: MetadataDelta._replay_unfence_broker,
    BrokerRegistrationChangeRecord: MetadataDelta._replay_broker_registration_change,
    TopicRecord: MetadataDelta._replay_topic,
    PartitionRecord: MetadataDelta._replay_partition,
    PartitionChangeRecord: MetadataDelta._replay_partition_change,
    RemoveTopicRecord: MetadataDelta._replay_remove_topic,
    ConfigRecord: MetadataDelta._replay_config,
    ProducerIdsRecord: MetadataDelta._replay_producer_ids,
    FeatureLevelRecord: MetadataDelta._replay_feature_level,
    NoOpRecord: MetadataDelta._replay_no_op,
}
