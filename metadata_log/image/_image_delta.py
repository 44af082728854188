"""`MetadataImage`, the whole immutable image, and `MetadataDelta`, the one mutable change to it:
``replay(record)`` dispatches on the record type (an unknown type raises), ``apply()`` returns a new
image (see `metadata_log.image`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar

from kraftlog.metadata_log._control_records import KRaftVersionRecord, VotersRecord
from kraftlog.metadata_log._records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LogEntry,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from kraftlog.metadata_log.image._image_base import (
    ConfigResource,
    ConfigurationsImage,
    FeaturesImage,
    MetadataReplayError,
    ProducerIdsImage,
    apply_config,
    feature_level,
    next_producer_id,
)
from kraftlog.metadata_log.image._image_cluster import (
    BrokerRecord,
    BrokerRegistration,
    ClusterImage,
    next_broker_registration,
)
from kraftlog.metadata_log.image._image_quotas import ClientQuotasDelta, ClientQuotasImage, quota_to_records
from kraftlog.metadata_log.image._image_security import (
    AclsDelta,
    AclsImage,
    ScramDelta,
    ScramImage,
    acl_to_record,
    credential_to_record,
)
from kraftlog.metadata_log.image._image_topics import PartitionRegistration, TopicImage, TopicsImage


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
    acls: AclsImage = AclsImage.EMPTY
    scram: ScramImage = ScramImage.EMPTY
    quotas: ClientQuotasImage = ClientQuotasImage.EMPTY

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
            and self.acls == other.acls
            and self.scram == other.scram
            and self.quotas == other.quotas
        )

    def with_provenance(self, offset: int, epoch: int, timestamp_ms: int) -> MetadataImage:
        """The same state stamped with another provenance (e.g. a snapshot's own offset)."""
        return replace(self, offset=offset, epoch=epoch, timestamp_ms=timestamp_ms)

    def to_records(self) -> list[MetadataRecord]:
        """This image as records, in a deterministic order (a snapshot's content).

        Order: features by name; brokers by id (RegisterBrokerRecord with their flags); the producer
        id block when one was handed out; topics by name, each TopicRecord followed by its
        PartitionRecords in partition order; ConfigRecords by (type, resource, key); ACLs by id;
        SCRAM credentials by (mechanism, user); client quotas by entity then key. Replaying them
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
        acls = self.acls.acls
        for acl_id in sorted(acls):
            out.append(acl_to_record(acl_id, acls[acl_id]))
        mechanisms = self.scram.mechanisms
        for mechanism in sorted(mechanisms):
            users = mechanisms[mechanism]
            for user in sorted(users):
                out.append(credential_to_record(users[user], user, mechanism))
        out.extend(quota_to_records(self.quotas))
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
        "_acls",
        "_scram",
        "_quotas",
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
        self._acls = AclsDelta(image.acls)
        self._scram = ScramDelta(image.scram)
        self._quotas = ClientQuotasDelta(image.quotas)

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

    @property
    def acls_changed(self) -> bool:
        """ACLs were created or removed here: the authorizer must be rebuilt from the new image."""
        return self._acls.changed

    @property
    def changed_acl_ids(self) -> set[str]:
        """Ids of ACLs created or removed here (one created and removed here is absent)."""
        return self._acls.changed_ids

    @property
    def changed_scram_users(self) -> set[str]:
        """Users whose SCRAM credential for some mechanism was created, replaced or removed here."""
        return self._scram.changed_users

    @property
    def changed_quota_entities(self) -> set[tuple[tuple[str, str | None], ...]]:
        """Client quota entities with a key set or removed here: brokers re-resolve quotas."""
        return self._quotas.changed_entities

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

    def _replay_broker_record(self, record: BrokerRecord) -> None:
        reg = next_broker_registration(self._broker(record.broker_id), record)
        self._brokers[record.broker_id] = _DELETED if reg is None else reg

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
        apply_config(values, record)

    def _replay_producer_ids(self, record: ProducerIdsRecord) -> None:
        current = (
            self._image.producer_ids.next_producer_id if self._next_producer_id is None else self._next_producer_id
        )
        self._next_producer_id = next_producer_id(current, record)

    def _replay_feature_level(self, record: FeatureLevelRecord) -> None:
        self._features[record.name] = feature_level(record)

    # security

    def _replay_acl(self, record: AccessControlEntryRecord | RemoveAccessControlEntryRecord) -> None:
        self._acls.replay(record)

    def _replay_scram(self, record: UserScramCredentialRecord | RemoveUserScramCredentialRecord) -> None:
        self._scram.replay(record)

    def _replay_client_quota(self, record: ClientQuotaRecord) -> None:
        self._quotas.replay(record)

    def _replay_no_op(self, record: NoOpRecord) -> None:
        """Nothing to change: the entry's provenance is the point (a new epoch's first commit)."""

    def _replay_control(self, record: KRaftVersionRecord | VotersRecord) -> None:
        """Nothing to change: the voter set is the Raft layer's; the record only tells where it changed."""

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
            acls=self._acls.apply(),
            scram=self._scram.apply(),
            quotas=self._quotas.apply(),
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


MetadataImage.EMPTY = MetadataImage()


MetadataDelta._DISPATCH = {
    RegisterBrokerRecord: MetadataDelta._replay_broker_record,
    UnregisterBrokerRecord: MetadataDelta._replay_broker_record,
    FenceBrokerRecord: MetadataDelta._replay_broker_record,
    UnfenceBrokerRecord: MetadataDelta._replay_broker_record,
    BrokerRegistrationChangeRecord: MetadataDelta._replay_broker_record,
    TopicRecord: MetadataDelta._replay_topic,
    PartitionRecord: MetadataDelta._replay_partition,
    PartitionChangeRecord: MetadataDelta._replay_partition_change,
    RemoveTopicRecord: MetadataDelta._replay_remove_topic,
    ConfigRecord: MetadataDelta._replay_config,
    ProducerIdsRecord: MetadataDelta._replay_producer_ids,
    FeatureLevelRecord: MetadataDelta._replay_feature_level,
    NoOpRecord: MetadataDelta._replay_no_op,
    KRaftVersionRecord: MetadataDelta._replay_control,
    VotersRecord: MetadataDelta._replay_control,
    AccessControlEntryRecord: MetadataDelta._replay_acl,
    RemoveAccessControlEntryRecord: MetadataDelta._replay_acl,
    UserScramCredentialRecord: MetadataDelta._replay_scram,
    RemoveUserScramCredentialRecord: MetadataDelta._replay_scram,
    ClientQuotaRecord: MetadataDelta._replay_client_quota,
}
