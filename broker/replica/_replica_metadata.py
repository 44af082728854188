"""`MetadataApplier`: how a broker's replicas follow the metadata log — leadership changes, new and
deleted partitions, stray logs, topic configs. `ReplicaManager` holds one; it is the only writer
of the `PartitionRegistry`.

Ordering rules: a delta is applied whole and synchronously (no request interleaves); a partition
whose leadership changed has its parked requests checked before this returns, so a deposed
leader fails its pending acks=all at once; files of a deleted topic go only after its removal was
applied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kraftlog import storage
from kraftlog.broker.replica._metrics import BrokerTopicMetrics
from kraftlog.broker.replica._partition import Partition, TopicPartition
from kraftlog.broker.replica._partition_types import AlterPartitionSender
from kraftlog.broker.replica._replica_changes import FollowTarget, ReplicaChanges
from kraftlog.broker.replica._replica_registry import PartitionRegistry, ReplicaPurgatories
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import (
    NO_LEADER,
    ConfigResourceType,
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)

__all__ = ["MetadataApplier"]


class MetadataApplier:
    """Applying metadata deltas: become leader or follower, create and delete logs, follow
    targets. It owns what only it needs: whether it has synced with an image yet, the topic
    defaults of the node's config, and the listener followers fetch through."""

    def __init__(
        self,
        registry: PartitionRegistry,
        purgatories: ReplicaPurgatories,
        log_manager: storage.LogManager,
        config: NodeConfig,
        *,
        metrics: BrokerTopicMetrics,
        alter_partition: AlterPartitionSender,
        clock_ms: Callable[[], int],
        replication_listener: str | None,
        log: Any,
    ) -> None:
        self._registry = registry
        self._purgatories = purgatories
        self.log_manager = log_manager
        self.node_id = registry.node_id
        self.metrics = metrics
        self.alter_partition = alter_partition
        self.clock_ms = clock_ms
        self.replica_lag_time_max_ms = int(config["replica.lag.time.max.ms"])
        self._replication_listener = replication_listener
        self._config = config
        self._topic_defaults: dict[str, object] = dict(config.topic_defaults())
        self._synced = False
        self._log = log

    def apply(self, delta: MetadataDelta, image: MetadataImage) -> ReplicaChanges:
        """Apply a published metadata delta: ``image`` is ``delta.apply()``.

        Deleted topics first (their replicas stop and their files go), then every changed
        partition with a replica here: become leader, become follower (and report where the
        leader is), or — when this broker is no longer a replica — stop and delete. When the delta
        does not start from the image this manager has (the first delta, or one it missed), every
        partition of ``image`` is reconciled, and logs on disk of topics that no longer exist are
        deleted.
        """
        full_sync = not self._synced or delta.image is not self._image
        self._registry.image = image
        changes = ReplicaChanges()
        local = self.node_id
        # dynamic broker configs (the cluster default, this broker's own) change the topics'
        # defaults: before partitions are made here, so new logs get them too
        broker_resources = {(ConfigResourceType.BROKER, ""), (ConfigResourceType.BROKER, str(local))}
        defaults_changed = False
        if full_sync or broker_resources & set(delta.changed_config_resources):
            defaults = self._config.topic_defaults(image.configs.broker_config(""), image.configs.broker_config(local))
            defaults_changed = defaults != self._topic_defaults
            self._topic_defaults = defaults

        for topic_id, old in delta.deleted_topics.items():
            self.metrics.remove_topic(old.name)
            for pid in old.partitions:
                tp = (old.name, pid)
                part = self._partitions.get(tp)
                if part is not None and part.topic_id == topic_id:
                    self._remove_partition(tp, changes, delete=True)
                elif part is None:
                    self._delete_unattached_log(old.name, pid, topic_id, changes)

        if full_sync:
            todo = [(t, pid) for t in image.topics.by_id.values() for pid in sorted(t.partitions)]
            for tp, part in list(self._partitions.items()):
                topic = image.topics.get_by_name(tp[0])
                reg = None if topic is None else topic.partition(tp[1])
                if topic is None or reg is None or topic.topic_id != part.topic_id:
                    self._remove_partition(tp, changes, delete=True)
        else:
            todo = []
            for topic_id, pids in delta.changed_partitions.items():
                topic = image.topics.get_by_id(topic_id)
                if topic is not None:
                    todo += [(topic, pid) for pid in sorted(pids)]

        for topic, pid in todo:
            reg = topic.partitions[pid]
            tp = (topic.name, pid)
            if self._registry.offline.get(tp) == topic.topic_id:
                continue  # its log dir failed: not served here until the next start (Kafka's)
            if reg.leader == local:
                self._become_leader(topic, pid, reg, changes)
            elif local in reg.replicas:
                self._become_follower(topic, pid, reg, changes)
            elif tp in self._partitions:
                self._remove_partition(tp, changes, delete=True)
            elif full_sync:
                self._delete_unattached_log(topic.name, pid, topic.topic_id, changes)

        if full_sync:
            self._delete_stray_logs(image, changes)
        elif delta.changed_broker_ids:
            self._refresh_leader_endpoints(delta.changed_broker_ids, changes)

        topics = {name for (rtype, name) in delta.changed_config_resources if rtype == ConfigResourceType.TOPIC}
        if defaults_changed:
            topics = {topic for topic, _pid in self._partitions}
        if topics:
            self._update_topic_configs(topics)

        self._synced = True
        if changes:
            self._log.info(
                "metadata_applied",
                offset=image.offset,
                leaders=len(changes.leaders),
                followers=len(changes.followers),
                stopped=len(changes.stopped),
                deleted=len(changes.deleted),
            )
        return changes

    # the registry's state, read here; written through its methods (this applier alone writes it)

    @property
    def _image(self) -> MetadataImage:
        return self._registry.image

    @property
    def _partitions(self) -> dict[TopicPartition, Partition]:
        return self._registry.partitions

    @property
    def _follow_targets(self) -> dict[TopicPartition, FollowTarget]:
        return self._registry.follow_targets

    def _topic_props(self, topic: str) -> dict[str, object]:
        props = dict(self._topic_defaults)
        props.update(self._image.configs.topic_config(topic))
        return props

    def _log_config(self, topic: str) -> storage.LogConfig:
        try:
            return storage.LogConfig.from_properties(self._topic_props(topic))
        except storage.StorageError as err:
            self._log.warning("invalid_topic_config", topic=topic, error=str(err))
            return self.log_manager.default_config

    def _min_isr(self, topic: str) -> int:
        try:
            raw = self._topic_props(topic).get("min.insync.replicas", 1)
            return max(1, int(raw if isinstance(raw, (int, str)) else 1))
        except (TypeError, ValueError):
            return 1

    def _is_replica_eligible(self, broker_id: int, broker_epoch: int) -> bool:
        """KIP-903/KIP-841: an ISR candidate must be registered, unfenced, not shutting down, and
        (when its fetch said) of the current broker epoch."""
        reg = self._image.cluster.broker(broker_id)
        if reg is None or reg.fenced or reg.in_controlled_shutdown:
            return False
        return broker_epoch <= 0 or broker_epoch == reg.broker_epoch

    def _registered_broker_epoch(self, broker_id: int) -> int:
        """The broker epoch of ``broker_id``'s registration in the image (-1 when unregistered):
        a replica fetch carrying an older one is from a previous incarnation (KIP-903)."""
        reg = self._image.cluster.broker(broker_id)
        return -1 if reg is None else reg.broker_epoch

    def _get_or_create_log(self, topic: TopicImage, pid: int) -> storage.Log:
        cfg = self._log_config(topic.name)
        try:
            return self.log_manager.get_or_create_log(topic.name, pid, cfg, topic.topic_id)
        except storage.InconsistentTopicIdError as err:
            self._log.warning(
                "deleting_log_of_other_topic_incarnation", topic=topic.name, partition=pid, error=str(err)
            )
            self.log_manager.delete_log(topic.name, pid)
            return self.log_manager.get_or_create_log(topic.name, pid, cfg, topic.topic_id)

    def _ensure_partition(self, topic: TopicImage, pid: int, changes: ReplicaChanges) -> Partition:
        tp = (topic.name, pid)
        part = self._partitions.get(tp)
        if part is not None and part.topic_id != topic.topic_id:
            self._remove_partition(tp, changes, delete=True)
            part = None
        if part is None:
            log = self._get_or_create_log(topic, pid)
            part = Partition(
                topic.name,
                pid,
                topic.topic_id,
                local_broker_id=self.node_id,
                log=log,
                alter_partition=self.alter_partition,
                clock_ms=self.clock_ms,
                replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                min_insync_replicas=self._min_isr(topic.name),
                listener=self._purgatories,
                is_replica_eligible=self._is_replica_eligible,
                registered_broker_epoch=self._registered_broker_epoch,
            )
            self._registry.add(part)
        return part

    def _become_leader(self, topic: TopicImage, pid: int, reg: PartitionRegistration, changes: ReplicaChanges) -> None:
        tp = (topic.name, pid)
        part = self._ensure_partition(topic, pid, changes)
        if part.make_leader(reg):
            self._registry.set_follow_target(tp, None)
            if tp not in changes.leaders:
                changes.leaders.append(tp)
            self._purgatories.check_all(tp)

    def _become_follower(
        self, topic: TopicImage, pid: int, reg: PartitionRegistration, changes: ReplicaChanges
    ) -> None:
        tp = (topic.name, pid)
        part = self._ensure_partition(topic, pid, changes)
        changed = part.make_follower(reg)
        if changed:
            # a deposed leader stops acknowledging now: pending acks=all fail, long polls answer
            self._purgatories.check_all(tp)
        target = self._follow_target(part, reg.leader, reg.leader_epoch)
        old = self._follow_targets.get(tp)
        if target is None:
            if old is not None or changed:
                self._registry.set_follow_target(tp, None)
                changes.stopped_fetching.append(tp)
        elif changed or old != target:
            self._registry.set_follow_target(tp, target)
            changes.followers.append(target)

    def _follow_target(self, part: Partition, leader_id: int, leader_epoch: int) -> FollowTarget | None:
        if leader_id == NO_LEADER or leader_id < 0:
            return None
        address = self._broker_address(leader_id, self._replication_listener)
        if address is None:
            return None
        return FollowTarget(part.topic, part.partition_id, part.topic_id, leader_id, leader_epoch, address)

    def _broker_address(self, broker_id: int, listener: str | None) -> str | None:
        reg = self._image.cluster.broker(broker_id)
        if reg is None or not reg.endpoints:
            return None
        ep = reg.endpoint(listener) if listener else None
        ep = ep or reg.endpoints[0]
        return f"{ep.host}:{ep.port}"

    def _refresh_leader_endpoints(self, broker_ids: set[int], changes: ReplicaChanges) -> None:
        for tp, old in list(self._follow_targets.items()):
            if old.leader_id not in broker_ids:
                continue
            part = self._partitions.get(tp)
            if part is None:
                continue
            target = self._follow_target(part, old.leader_id, old.leader_epoch)
            if target is None:
                self._registry.set_follow_target(tp, None)
                changes.stopped_fetching.append(tp)
            elif target != old:
                self._registry.set_follow_target(tp, target)
                changes.followers.append(target)

    def take_offline(self, tp: TopicPartition, changes: ReplicaChanges) -> None:
        """Stop serving a replica whose log dir failed (its log is closed by the log manager)."""
        part = self._registry.get(tp)
        if part is None:
            return
        self._registry.offline[tp] = part.topic_id
        self._remove_partition(tp, changes, delete=False)

    def _remove_partition(self, tp: TopicPartition, changes: ReplicaChanges, *, delete: bool) -> None:
        part = self._registry.remove(tp)
        if part is not None:
            part.stop()
            self._purgatories.check_all(tp)
        changes.stopped.append(tp)
        if delete and self.log_manager.delete_log(*tp):
            changes.deleted.append(tp)

    def _delete_unattached_log(self, topic: str, pid: int, topic_id: str, changes: ReplicaChanges) -> None:
        log = self.log_manager.get_log(topic, pid)
        if log is None:
            return
        try:
            on_disk = log.read_partition_metadata()
        except storage.StorageError:
            on_disk = None
        if on_disk == topic_id and self.log_manager.delete_log(topic, pid):
            changes.deleted.append((topic, pid))

    def _delete_stray_logs(self, image: MetadataImage, changes: ReplicaChanges) -> None:
        """Logs on disk whose topic id says they belong to a topic that no longer exists (deleted
        while this broker was down), or that this broker no longer hosts. Logs without a
        ``partition.metadata`` are kept (nothing proves they are stale)."""
        for (topic, pid), log in self.log_manager.all_logs().items():
            if (topic, pid) in self._partitions:
                continue
            try:
                on_disk = log.read_partition_metadata()
            except storage.StorageError:
                on_disk = None
            if on_disk is None:
                self._log.warning("log_without_topic_id_kept", topic=topic, partition=pid)
                continue
            t = image.topics.get_by_name(topic)
            reg = None if t is None else t.partition(pid)
            if t is None or t.topic_id != on_disk or reg is None or self.node_id not in reg.replicas:
                self._log.info("deleting_stray_log", topic=topic, partition=pid, topic_id=on_disk)
                if self.log_manager.delete_log(topic, pid):
                    changes.deleted.append((topic, pid))

    def _update_topic_configs(self, topics: set[str]) -> None:
        for (topic, _pid), part in self._partitions.items():
            if topic in topics:
                part.update_config(self._log_config(topic), self._min_isr(topic))
                self._purgatories.produce.check_and_complete(part.tp)
