"""`ReplicaManager`: the partitions this broker hosts, and the data path of its gRPC service.

Modelled on Kafka's ``ReplicaManager``. It owns the `storage.LogManager` and one `Partition` per
local replica, turns metadata deltas into become-leader / become-follower / stop / delete, and
serves Produce, Fetch, ListOffsets, OffsetForLeaderEpoch and DeleteRecords. Requests that must
wait (acks=all, long polls, DeleteRecords) park in purgatories keyed by ``(topic, partition)`` and
are completed by partition events (append, high-watermark advance, follower fetch, leadership
change) or by their own timer — never by polling.

Ordering rules:

- Persist before acknowledge: a produce is answered only after its records are in the leader's log
  (acks=1), or after the high watermark passed them (acks=all: every ISR member has them). Nothing
  acknowledged depends on the HW checkpoint, which is only a lower bound for restart.
- Metadata first: `apply_delta` applies a whole delta synchronously (no request interleaves), and a
  leader that loses leadership fails its pending acks=all at once, before the fetcher starts.
- Files of a deleted topic are removed only after its ``RemoveTopicRecord`` was applied (the delta
  says so); a directory of another incarnation of a topic (different topic id) is deleted before the
  new one is created.
- One bad partition never fails the others: every partition is answered with its own error.

What the server wires: ``alter_partition`` (an `AlterPartitionManager` whose ``send`` reaches the
active controller), ``fetcher_manager`` (a `ReplicaFetcherManager`; optional, `apply_delta` feeds
it), ``startup()`` before the first delta, ``apply_delta(delta, image)`` for every published delta
(pass the image object the next delta is built on), the gRPC handlers (``await produce``,
``await fetch``, ``list_offsets``, ``offset_for_leader_epoch``, ``await delete_records``),
``run_periodic()`` or the ``run_scheduler()`` task (ISR shrink checks, HW checkpoints, retention,
flush, compaction), and ``await shutdown()`` at exit (then shut the AlterPartitionManager down).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog

from kraftlog import storage
from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import (
    NO_LEADER,
    ConfigResourceType,
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
)
from kraftlog.proto import broker_pb2, errors_pb2

from ._metrics import BrokerTopicMetrics
from ._partition import (
    AlterPartitionSender,
    Partition,
    PartitionRead,
    TopicPartition,
    error_pb,
    error_pb_from_exception,
)
from ._purgatory import DelayedOperation, DelayedOperations

__all__ = ["FollowTarget", "ReplicaChanges", "ReplicaManager", "DelayedProduce", "DelayedFetch", "DelayedDeleteRecords"]

_log = structlog.get_logger(__name__)
_LONG_MAX = 2**63 - 1
_LEADER_HINT_CODES = frozenset({kerr.NotLeaderOrFollowerError.error_code, kerr.FencedLeaderEpochError.error_code})


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


# ------------------------------------------------------------------------------------ results of a delta


@dataclass(frozen=True, slots=True)
class FollowTarget:
    """A partition this broker follows, and where its leader is (``address`` = ``host:port``)."""

    topic: str
    partition: int
    topic_id: str
    leader_id: int
    leader_epoch: int
    address: str

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass
class ReplicaChanges:
    """What one `ReplicaManager.apply_delta` did, for the fetcher and for logs/tests.

    - ``leaders``: partitions this broker now leads (stop fetching them);
    - ``followers``: partitions to (re)start fetching from their leader;
    - ``stopped_fetching``: followers without a reachable leader (NO_LEADER, unknown endpoint);
    - ``stopped``: replicas no longer hosted here (deleted topic, reassigned away, re-created);
    - ``deleted``: partitions whose files were removed.
    """

    leaders: list[TopicPartition] = field(default_factory=list)
    followers: list[FollowTarget] = field(default_factory=list)
    stopped_fetching: list[TopicPartition] = field(default_factory=list)
    stopped: list[TopicPartition] = field(default_factory=list)
    deleted: list[TopicPartition] = field(default_factory=list)

    @property
    def not_fetching(self) -> list[TopicPartition]:
        """Every partition the fetchers must drop."""
        return [*self.leaders, *self.stopped_fetching, *self.stopped]

    def __bool__(self) -> bool:
        return bool(self.leaders or self.followers or self.stopped_fetching or self.stopped or self.deleted)


# ------------------------------------------------------------------------------------ delayed operations


@dataclass(slots=True)
class _ProduceStatus:
    tp: TopicPartition
    partition: Partition
    required_offset: int
    leader_epoch: int
    response: broker_pb2.ProduceResponse.PartitionResponse
    pending: bool = True
    error: type[kerr.KafkaError] | None = None


class DelayedProduce(DelayedOperation):
    """acks=all: done when, for every partition, the HW passed the batch or an error is known
    (no longer leader of the append's epoch, ISR below min.insync after the append); on timeout
    the pending partitions get REQUEST_TIMED_OUT."""

    def __init__(self, delay_ms: int, statuses: list[_ProduceStatus], rm: ReplicaManager) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self._rm = rm

    def try_complete(self) -> bool:
        pending = False
        for st in self.statuses:
            if not st.pending:
                continue
            part = self._rm._partitions.get(st.tp)
            if part is not st.partition:
                done, err = True, kerr.NotLeaderOrFollowerError
            else:
                done, err = part.check_enough_replicas_reach_offset(st.required_offset, st.leader_epoch)
            if done:
                st.pending = False
                st.error = err
            else:
                pending = True
        if pending:
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for st in self.statuses:
            if st.pending:
                st.pending = False
                st.error = kerr.RequestTimedOutError


class DelayedFetch(DelayedOperation):
    """A long poll: done when the readable bytes reach ``min_bytes``, or when a partition's
    situation changed so that the answer is an error (leadership, epoch, offset out of range);
    on timeout it answers with what there is."""

    def __init__(
        self, delay_ms: int, req: broker_pb2.FetchRequest, rm: ReplicaManager, parts: dict[TopicPartition, Partition]
    ) -> None:
        super().__init__(delay_ms)
        self.req = req
        self._rm = rm
        self._parts = parts

    def try_complete(self) -> bool:
        req = self.req
        is_replica = req.replica_id >= 0
        min_bytes = req.min_bytes
        accumulated = 0
        for t in req.topics:
            for p in t.partitions:
                tp = (t.topic, p.partition)
                part = self._rm._partitions.get(tp)
                if part is None or part is not self._parts.get(tp) or not part.is_leader:
                    return self.force_complete()
                if 0 <= p.current_leader_epoch != part.leader_epoch:
                    return self.force_complete()
                log = part.log
                if p.fetch_offset < log.log_start_offset or p.fetch_offset > log.log_end_offset:
                    return self.force_complete()
                end = log.log_end_offset if is_replica else log.high_watermark
                if p.fetch_offset >= end:
                    continue
                if min_bytes <= 1:
                    return self.force_complete()
                pmax = p.partition_max_bytes if p.partition_max_bytes > 0 else min_bytes
                try:
                    info = log.read(p.fetch_offset, pmax, max_offset=None if is_replica else end, min_one_message=True)
                except Exception:
                    return self.force_complete()
                accumulated += len(info.records)
                if accumulated >= min_bytes:
                    return self.force_complete()
        return False


@dataclass(slots=True)
class _DeleteStatus:
    tp: TopicPartition
    partition: Partition
    required_offset: int
    response: broker_pb2.DeleteRecordsResponse.Partition
    pending: bool = True
    error: type[kerr.KafkaError] | None = None


class DelayedDeleteRecords(DelayedOperation):
    """DeleteRecords: done when the low watermark (min log start offset over the leader and the
    ISR followers that reported one) reached the requested offset, for every partition."""

    def __init__(self, delay_ms: int, statuses: list[_DeleteStatus], rm: ReplicaManager) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self._rm = rm

    def try_complete(self) -> bool:
        pending = False
        for st in self.statuses:
            if not st.pending:
                continue
            part = self._rm._partitions.get(st.tp)
            if part is not st.partition or not part.is_leader:
                st.pending, st.error = False, kerr.NotLeaderOrFollowerError
                continue
            low = part.low_watermark()
            st.response.low_watermark = low
            if low >= st.required_offset:
                st.pending = False
            else:
                pending = True
        if pending:
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for st in self.statuses:
            if st.pending:
                st.pending, st.error = False, kerr.RequestTimedOutError


@dataclass(slots=True)
class _FetchResult:
    topic: str
    partition: int
    read: PartitionRead | None = None
    error: BaseException | None = None
    part: Partition | None = None


# ------------------------------------------------------------------------------------ ReplicaManager


class ReplicaManager:
    """The partitions of this broker and the Produce/Fetch/ListOffsets/... data path.

    ``config`` is the node's `NodeConfig` (``replica.*``, ``min.insync.replicas``,
    ``message.max.bytes`` and the ``log.*`` defaults come from it; topic overrides from the image).
    ``alter_partition`` receives ISR proposals. ``clock_ms`` drives lag and the periodic duties;
    request timeouts use the event loop's timers. ``metrics`` counts bytes and messages in and out
    and ISR changes (a private set when None).
    """

    def __init__(
        self,
        node_id: int,
        config: NodeConfig,
        log_manager: storage.LogManager,
        alter_partition: AlterPartitionSender,
        *,
        clock_ms: Callable[[], int] | None = None,
        replication_listener: str | None = None,
        client_listener: str | None = None,
        metrics: BrokerTopicMetrics | None = None,
    ) -> None:
        self.node_id = node_id
        self.metrics = metrics if metrics is not None else BrokerTopicMetrics()
        self.config = config
        self.log_manager = log_manager
        self.alter_partition = alter_partition
        self.clock_ms = clock_ms or _wall_clock_ms
        self.fetcher_manager: Any = None  # a ReplicaFetcherManager, set by the server (optional)
        listener = config["inter.broker.listener.name"]
        self._replication_listener = replication_listener or (listener if isinstance(listener, str) else None)
        self._client_listener = client_listener
        self._topic_defaults: dict[str, object] = dict(config.topic_defaults())
        self.replica_lag_time_max_ms = int(config["replica.lag.time.max.ms"])
        self._image = MetadataImage.EMPTY
        self._synced = False
        self._partitions: dict[TopicPartition, Partition] = {}
        self._follow_targets: dict[TopicPartition, FollowTarget] = {}
        self.produce_purgatory = DelayedOperations("produce")
        self.fetch_purgatory = DelayedOperations("fetch")
        self.delete_records_purgatory = DelayedOperations("delete_records")
        self._last_run: dict[str, int] = {}
        self._log = _log.bind(node_id=node_id)

    @classmethod
    def create(
        cls,
        node_id: int,
        config: NodeConfig,
        alter_partition: AlterPartitionSender,
        *,
        clock_ms: Callable[[], int] | None = None,
        metrics: BrokerTopicMetrics | None = None,
    ) -> ReplicaManager:
        """A replica manager with a `LogManager` over ``config.log_dirs`` and the topic defaults."""
        default = storage.LogConfig.from_properties(config.topic_defaults())
        lm = storage.LogManager(config.log_dirs, default, clock_ms=clock_ms)
        return cls(node_id, config, lm, alter_partition, clock_ms=clock_ms, metrics=metrics)

    # ============================================================== lifecycle

    def startup(self) -> None:
        """Load (and recover) the logs on disk and start the cleaner threads (``log.cleaner.*``).
        Call once, before the first `apply_delta`."""
        self.log_manager.startup()
        if self.config["log.cleaner.enable"]:
            self.log_manager.start_cleaner(
                threads=int(self.config["log.cleaner.threads"]),
                backoff_ms=int(self.config["log.cleaner.backoff.ms"]),
                io_max_bytes_per_second=float(self.config["log.cleaner.io.max.bytes.per.second"]),
            )

    async def shutdown(self) -> None:
        """Stop fetchers, answer every parked request, checkpoint and close the logs."""
        if self.fetcher_manager is not None:
            await self.fetcher_manager.shutdown()
        for _tp, part in list(self._partitions.items()):
            part.stop()
        for purgatory in (self.produce_purgatory, self.delete_records_purgatory):
            for key in list(purgatory._watchers):
                purgatory.check_and_complete(key)
            purgatory.shutdown()
        self.fetch_purgatory.shutdown()
        try:
            self.log_manager.checkpoint_high_watermarks()
        finally:
            self.log_manager.shutdown()
        self._partitions.clear()
        self._log.info("replica_manager_shut_down")

    # ============================================================== access

    @property
    def image(self) -> MetadataImage:
        return self._image

    def get_partition(self, topic: str, partition: int) -> Partition | None:
        return self._partitions.get((topic, partition))

    def partitions(self) -> dict[TopicPartition, Partition]:
        return dict(self._partitions)

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.is_leader]

    def follow_targets(self) -> dict[TopicPartition, FollowTarget]:
        return dict(self._follow_targets)

    # ============================================================== partition events

    def on_high_watermark_advanced(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)

    def on_records_appended(self, tp: TopicPartition) -> None:
        self.fetch_purgatory.check_and_complete(tp)

    def on_replica_state_changed(self, tp: TopicPartition) -> None:
        self.delete_records_purgatory.check_and_complete(tp)

    def on_isr_committed(self, tp: TopicPartition, old_isr: tuple[int, ...], new_isr: tuple[int, ...]) -> None:
        self.metrics.record_isr_change(old_isr, new_isr)

    def _check_all_purgatories(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)
        self.fetch_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    # ============================================================== metadata

    def apply_delta(self, delta: MetadataDelta, image: MetadataImage) -> ReplicaChanges:
        """Apply a published metadata delta: ``image`` is ``delta.apply()``.

        Deleted topics first (their replicas stop and their files go), then every changed
        partition with a replica here: become leader, become follower (and report where the
        leader is), or — when this broker is no longer a replica — stop and delete. When the delta
        does not start from the image this manager has (the first delta, or one it missed), every
        partition of ``image`` is reconciled, and logs on disk of topics that no longer exist are
        deleted. The fetcher manager, when set, gets the changes before this returns.
        """
        full_sync = not self._synced or delta.image is not self._image
        self._image = image
        changes = ReplicaChanges()
        local = self.node_id

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
        if self.fetcher_manager is not None:
            self.fetcher_manager.apply_changes(changes)
        return changes

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
            return max(1, int(self._topic_props(topic).get("min.insync.replicas", 1)))
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
                listener=self,
                is_replica_eligible=self._is_replica_eligible,
                registered_broker_epoch=self._registered_broker_epoch,
            )
            self._partitions[tp] = part
        return part

    def _become_leader(self, topic: TopicImage, pid: int, reg: PartitionRegistration, changes: ReplicaChanges) -> None:
        tp = (topic.name, pid)
        part = self._ensure_partition(topic, pid, changes)
        if part.make_leader(reg):
            self._follow_targets.pop(tp, None)
            if tp not in changes.leaders:
                changes.leaders.append(tp)
            self._check_all_purgatories(tp)

    def _become_follower(
        self, topic: TopicImage, pid: int, reg: PartitionRegistration, changes: ReplicaChanges
    ) -> None:
        tp = (topic.name, pid)
        part = self._ensure_partition(topic, pid, changes)
        changed = part.make_follower(reg)
        if changed:
            # a deposed leader stops acknowledging now: pending acks=all fail, long polls answer
            self._check_all_purgatories(tp)
        target = self._follow_target(part, reg.leader, reg.leader_epoch)
        old = self._follow_targets.get(tp)
        if target is None:
            if old is not None or changed:
                self._follow_targets.pop(tp, None)
                changes.stopped_fetching.append(tp)
        elif changed or old != target:
            self._follow_targets[tp] = target
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
                del self._follow_targets[tp]
                changes.stopped_fetching.append(tp)
            elif target != old:
                self._follow_targets[tp] = target
                changes.followers.append(target)

    def _remove_partition(self, tp: TopicPartition, changes: ReplicaChanges, *, delete: bool) -> None:
        part = self._partitions.pop(tp, None)
        self._follow_targets.pop(tp, None)
        if part is not None:
            part.stop()
            self._check_all_purgatories(tp)
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
                self.produce_purgatory.check_and_complete(part.tp)

    # ============================================================== leader hints

    def _leader_hint(self, topic: str, pid: int) -> tuple[int, int] | None:
        t = self._image.topics.get_by_name(topic)
        reg = None if t is None else t.partition(pid)
        if reg is None:
            return None
        return reg.leader, reg.leader_epoch

    def _node_endpoints(self, broker_ids: Iterable[int]) -> list[broker_pb2.NodeEndpoint]:
        out = []
        for b in sorted(set(broker_ids)):
            reg = self._image.cluster.broker(b)
            if reg is None or not reg.endpoints:
                continue
            ep = (reg.endpoint(self._client_listener) if self._client_listener else None) or reg.endpoints[0]
            out.append(broker_pb2.NodeEndpoint(node_id=b, host=ep.host, port=ep.port, rack=reg.rack or ""))
        return out

    def _error(self, exc: BaseException | type[kerr.KafkaError], what: str) -> errors_pb2.Error:
        if isinstance(exc, type):
            return error_pb(exc, exc.__doc__.strip().splitlines()[0] if exc.__doc__ else "")
        if getattr(exc, "error_code", None) is None:
            self._log.error("unexpected_error", what=what, error=repr(exc), exc_info=exc)
        return error_pb_from_exception(exc)

    def _lookup_error(self, topic: str, pid: int) -> kerr.KafkaError:
        hint = self._leader_hint(topic, pid)
        if hint is None:
            return kerr.UnknownTopicOrPartitionError(f"this server does not host {topic}-{pid}")
        return kerr.NotLeaderOrFollowerError(
            f"broker {self.node_id} is not the leader of {topic}-{pid}", leader_id=hint[0], leader_epoch=hint[1]
        )

    def _leader_partition(self, topic: str, pid: int) -> Partition:
        part = self._partitions.get((topic, pid))
        if part is not None and part.is_leader:
            return part
        raise self._lookup_error(topic, pid)

    def _hosted_partition(self, topic: str, pid: int) -> Partition:
        part = self._partitions.get((topic, pid))
        if part is None:
            raise self._lookup_error(topic, pid)
        return part

    # ============================================================== produce

    async def produce(self, req: broker_pb2.ProduceRequest) -> broker_pb2.ProduceResponse:
        """Produce: append each partition's batches to its leader log, then answer by ``acks``.

        acks=0 and acks=1 are answered once the records are in the log; acks=-1 waits (up to
        ``timeout_ms``) until the HW passed every appended batch. A partition that fails (unknown,
        not leader, too few in-sync replicas, corrupt or too large batch, storage error) gets its
        own error and does not fail the others. Any other acks value: INVALID_REQUIRED_ACKS.
        """
        R = broker_pb2.ProduceResponse
        resp = R()
        hinted: set[int] = set()
        acks = req.acks
        if acks not in (-1, 0, 1):
            err = error_pb(kerr.InvalidRequiredAcksError, f"acks must be -1, 0 or 1, not {acks}")
            resp.error.CopyFrom(err)
            for t in req.topics:
                resp.topics.append(
                    R.TopicResponse(
                        name=t.name,
                        partitions=[
                            R.PartitionResponse(
                                index=p.index, error=err, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1
                            )
                            for p in t.partitions
                        ],
                    )
                )
            return resp
        resp.error.CopyFrom(error_pb())
        statuses: list[_ProduceStatus] = []
        for t in req.topics:
            tr = resp.topics.add(name=t.name)
            appended_bytes = appended_records = 0
            for p in t.partitions:
                pr = tr.partitions.add(index=p.index)
                try:
                    part = self._leader_partition(t.name, p.index)
                    info = part.append_records_to_leader(p.records, acks)
                except Exception as exc:
                    self._set_produce_error(pr, exc, t.name, p.index, hinted)
                    continue
                appended_bytes += info.valid_bytes
                appended_records += info.num_records
                pr.error.CopyFrom(error_pb())
                pr.base_offset = info.first_offset
                pr.log_append_time_ms = info.log_append_time_ms
                pr.log_start_offset = info.log_start_offset
                if acks == -1:
                    statuses.append(
                        _ProduceStatus((t.name, p.index), part, info.last_offset + 1, part.leader_epoch, pr)
                    )
            if appended_records:
                self.metrics.record_produce(t.name, appended_bytes, appended_records)
        if statuses:
            op = DelayedProduce(req.timeout_ms, statuses, self)
            if not self.produce_purgatory.try_complete_else_watch(op, [st.tp for st in statuses]):
                await op.future
            for st in statuses:
                if st.error is not None:
                    self._set_produce_error(st.response, st.error, st.tp[0], st.tp[1], hinted, keep_offsets=True)
        if hinted:
            resp.node_endpoints.extend(self._node_endpoints(hinted))
        return resp

    def _set_produce_error(
        self,
        pr: broker_pb2.ProduceResponse.PartitionResponse,
        exc: BaseException | type[kerr.KafkaError],
        topic: str,
        pid: int,
        hinted: set[int],
        *,
        keep_offsets: bool = False,
    ) -> None:
        err = self._error(exc, "produce")
        pr.error.CopyFrom(err)
        # INVALID_RECORD / INVALID_TIMESTAMP from the validator name the refused records (Kafka's
        # RecordErrors); error.message carries Kafka's ErrorMessage
        for rec_err in getattr(exc, "record_errors", ()):
            pr.record_errors.add(batch_index=rec_err.batch_index, message=rec_err.message)
        if not keep_offsets:
            pr.base_offset = -1
            pr.log_append_time_ms = -1
            pr.log_start_offset = -1
        if err.code in _LEADER_HINT_CODES:
            hint = self._leader_hint(topic, pid)
            leader, epoch = hint if hint is not None else (-1, -1)
            pr.current_leader.CopyFrom(broker_pb2.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch))
            if leader >= 0:
                hinted.add(leader)

    # ============================================================== fetch

    async def fetch(self, req: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        """Fetch for consumers (``replica_id`` -1: up to the HW) and followers (up to the LEO).

        Answered at once when ``max_wait_ms`` <= 0, when ``min_bytes`` are readable, or when a
        partition has an error or a diverging epoch; otherwise parked in the fetch purgatory until
        new data, a leadership change, or ``max_wait_ms``. The answer is read when the request
        resumes, so it reflects the newest state. A follower fetch updates the follower's state
        (and may advance the HW and expand the ISR) each time it is read.
        """
        results = self._read_fetch(req, update_fetch_state=True)
        if req.max_wait_ms > 0 and results:
            total = 0
            immediate = False
            for r in results:
                if r.error is not None or (r.read is not None and r.read.diverging_epoch is not None):
                    immediate = True
                    break
                if r.read is not None:
                    total += len(r.read.records)
            if not immediate and total < req.min_bytes:
                parts = {(r.topic, r.partition): r.part for r in results if r.part is not None}
                op = DelayedFetch(req.max_wait_ms, req, self, parts)
                if not self.fetch_purgatory.try_complete_else_watch(op, list(parts)):
                    await op.future
                results = self._read_fetch(req, update_fetch_state=True)
        self._count_fetched(results, replica=req.replica_id >= 0)
        return self._fetch_response(results)

    def _count_fetched(self, results: list[_FetchResult], *, replica: bool) -> None:
        """Bytes out per topic of the answer actually sent (one counter step per topic)."""
        totals: dict[str, int] = {}
        for r in results:
            if r.read is not None and r.read.records:
                totals[r.topic] = totals.get(r.topic, 0) + len(r.read.records)
        for topic, num_bytes in totals.items():
            self.metrics.record_fetch(topic, num_bytes, replica=replica)

    def _read_fetch(self, req: broker_pb2.FetchRequest, *, update_fetch_state: bool) -> list[_FetchResult]:
        is_replica = req.replica_id >= 0
        if req.max_bytes > 0:
            limit = req.max_bytes
        else:
            key = "replica.fetch.response.max.bytes" if is_replica else "fetch.max.bytes"
            limit = int(self.config[key])
        min_one = True
        out: list[_FetchResult] = []
        for t in req.topics:
            for p in t.partitions:
                res = _FetchResult(t.topic, p.partition)
                out.append(res)
                try:
                    part = self._hosted_partition(t.topic, p.partition)
                    res.part = part
                    pmax = p.partition_max_bytes if p.partition_max_bytes > 0 else limit
                    res.read = part.fetch_records(
                        fetch_offset=p.fetch_offset,
                        max_bytes=min(pmax, limit),
                        min_one_message=min_one,
                        current_leader_epoch=p.current_leader_epoch,
                        replica_id=req.replica_id,
                        replica_epoch=req.replica_epoch,
                        last_fetched_epoch=p.last_fetched_epoch,
                        follower_log_start_offset=p.log_start_offset,
                        update_fetch_state=update_fetch_state,
                    )
                except Exception as exc:
                    res.error = exc
                    continue
                n = len(res.read.records)
                if n:
                    limit = max(0, limit - n)
                    min_one = False
        return out

    def _fetch_response(self, results: list[_FetchResult]) -> broker_pb2.FetchResponse:
        R = broker_pb2.FetchResponse
        resp = R(error=error_pb())
        by_topic: dict[str, broker_pb2.FetchResponse.FetchableTopicResponse] = {}
        hinted: set[int] = set()
        for r in results:
            tr = by_topic.get(r.topic)
            if tr is None:
                tr = resp.responses.add(topic=r.topic)
                by_topic[r.topic] = tr
            pd = tr.partitions.add(partition_index=r.partition, preferred_read_replica=-1)
            if r.read is not None:
                rd = r.read
                pd.error.CopyFrom(error_pb())
                pd.high_watermark = rd.high_watermark
                pd.last_stable_offset = rd.high_watermark
                pd.log_start_offset = rd.log_start_offset
                pd.records = rd.records
                if rd.diverging_epoch is not None:
                    pd.diverging_epoch.CopyFrom(
                        broker_pb2.EpochEndOffset(epoch=rd.diverging_epoch[0], end_offset=rd.diverging_epoch[1])
                    )
                continue
            assert r.error is not None
            err = self._error(r.error, "fetch")
            pd.error.CopyFrom(err)
            if r.part is not None and not r.part.stopped:
                log = r.part.log
                pd.high_watermark = log.high_watermark
                pd.last_stable_offset = log.high_watermark
                pd.log_start_offset = log.log_start_offset
            else:
                pd.high_watermark = pd.last_stable_offset = pd.log_start_offset = -1
            if err.code in _LEADER_HINT_CODES:
                hint = self._leader_hint(r.topic, r.partition)
                leader, epoch = hint if hint is not None else (-1, -1)
                pd.current_leader.CopyFrom(broker_pb2.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch))
                if leader >= 0:
                    hinted.add(leader)
        if hinted:
            resp.node_endpoints.extend(self._node_endpoints(hinted))
        return resp

    # ============================================================== offsets

    def list_offsets(self, req: broker_pb2.ListOffsetsRequest) -> broker_pb2.ListOffsetsResponse:
        """ListOffsets: earliest (-2), latest (-1: the HW for consumers, the LEO for replicas),
        max timestamp (-3), or the first offset with a timestamp >= the one given. Not found:
        offset and timestamp -1. Served by the leader (a ``replica_id`` of -2, Kafka's debug id,
        may read a follower)."""
        R = broker_pb2.ListOffsetsResponse
        resp = R()
        is_consumer = req.replica_id < 0
        require_leader = req.replica_id != -2
        for t in req.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partitions:
                pr = tr.partitions.add(partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1)
                try:
                    part = self._hosted_partition(t.name, p.partition_index)
                    found = part.fetch_offset_for_timestamp(
                        p.timestamp,
                        current_leader_epoch=p.current_leader_epoch,
                        is_consumer=is_consumer,
                        require_leader=require_leader,
                    )
                except Exception as exc:
                    pr.error.CopyFrom(self._error(exc, "list_offsets"))
                    continue
                pr.error.CopyFrom(error_pb())
                if found is not None:
                    pr.timestamp = found.timestamp
                    pr.offset = found.offset
                    pr.leader_epoch = found.leader_epoch
        return resp

    def offset_for_leader_epoch(
        self, req: broker_pb2.OffsetForLeaderEpochRequest
    ) -> broker_pb2.OffsetForLeaderEpochResponse:
        """OffsetForLeaderEpoch: the largest epoch <= the one asked and its end offset, from the
        leader's epoch cache (followers use it to truncate, consumers to validate positions)."""
        R = broker_pb2.OffsetForLeaderEpochResponse
        resp = R()
        require_leader = req.replica_id != -2
        for t in req.topics:
            tr = resp.topics.add(topic=t.topic)
            for p in t.partitions:
                pr = tr.partitions.add(partition=p.partition, leader_epoch=-1, end_offset=-1)
                try:
                    part = self._hosted_partition(t.topic, p.partition)
                    epoch, end = part.last_offset_for_leader_epoch(
                        p.current_leader_epoch, p.leader_epoch, require_leader=require_leader
                    )
                except Exception as exc:
                    pr.error.CopyFrom(self._error(exc, "offset_for_leader_epoch"))
                    continue
                pr.error.CopyFrom(error_pb())
                pr.leader_epoch = epoch
                pr.end_offset = end
        return resp

    # ============================================================== delete records

    async def delete_records(self, req: broker_pb2.DeleteRecordsRequest) -> broker_pb2.DeleteRecordsResponse:
        """DeleteRecords: the leader moves its log start offset to the requested offset (-1: the HW;
        past the HW: OFFSET_OUT_OF_RANGE), then the request waits (up to ``timeout_ms``) until the
        low watermark — the smallest log start offset over the leader and the ISR followers that
        reported one in their fetches — reaches it. Followers move their own log start when the
        leader's fetch answers carry it."""
        R = broker_pb2.DeleteRecordsResponse
        resp = R()
        statuses: list[_DeleteStatus] = []
        for t in req.topics:
            tr = resp.topics.add(name=t.name)
            for p in t.partitions:
                pr = tr.partitions.add(partition_index=p.partition_index, low_watermark=-1)
                try:
                    part = self._leader_partition(t.name, p.partition_index)
                    target = part.high_watermark if p.offset == -1 else p.offset
                    pr.low_watermark = part.delete_records_on_leader(p.offset)
                except Exception as exc:
                    pr.error.CopyFrom(self._error(exc, "delete_records"))
                    continue
                pr.error.CopyFrom(error_pb())
                statuses.append(_DeleteStatus((t.name, p.partition_index), part, target, pr))
                # long polls below the new log start answer OFFSET_OUT_OF_RANGE now
                self.fetch_purgatory.check_and_complete((t.name, p.partition_index))
        if statuses:
            op = DelayedDeleteRecords(req.timeout_ms, statuses, self)
            if not self.delete_records_purgatory.try_complete_else_watch(op, [st.tp for st in statuses]):
                await op.future
            for st in statuses:
                if st.error is not None:
                    st.response.error.CopyFrom(self._error(st.error, "delete_records"))
        return resp

    # ============================================================== periodic duties

    def maybe_shrink_isr(self, now_ms: int | None = None) -> int:
        """Propose ISR shrinks for every led partition with lagging followers; returns how many."""
        now = self.clock_ms() if now_ms is None else now_ms
        return sum(1 for p in list(self._partitions.values()) if p.is_leader and p.maybe_shrink_isr(now))

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` in every log dir."""
        self.log_manager.checkpoint_high_watermarks()

    def _due(self, name: str, interval_ms: int | None, now: int) -> bool:
        if interval_ms is None or interval_ms <= 0 or interval_ms >= _LONG_MAX:
            return False
        last = self._last_run.get(name)
        if last is None:
            self._last_run[name] = now
            return False
        if now - last >= interval_ms:
            self._last_run[name] = now
            return True
        return False

    def _cfg_int(self, key: str) -> int | None:
        value = self.config[key]
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def run_periodic(self, now_ms: int | None = None) -> dict[str, int]:
        """Run the duties that are due at ``now_ms`` (default: the clock); returns what ran.

        - ISR shrink checks every ``replica.lag.time.max.ms / 2``;
        - HW checkpoint every ``replica.high.watermark.checkpoint.interval.ms``;
        - recovery-point / log-start checkpoints every ``log.flush.offset.checkpoint.interval.ms``;
        - retention every ``log.retention.check.interval.ms``, handed to the log manager's
          retention thread (this method does not wait for it; 1 when a run was started);
        - ``flush.ms`` checks every ``log.flush.scheduler.interval.ms`` (when set).

        Compaction is not here: the cleaner threads started by `startup` run it on their own
        (``log.cleaner.backoff.ms`` between idle rounds), never on the event loop. The first call
        only starts the intervals.
        """
        now = self.clock_ms() if now_ms is None else now_ms
        ran: dict[str, int] = {}
        if self._due("isr_shrink", max(1, self.replica_lag_time_max_ms // 2), now):
            ran["isr_shrink"] = self.maybe_shrink_isr(now)
        if self._due("hw_checkpoint", self._cfg_int("replica.high.watermark.checkpoint.interval.ms"), now):
            self.checkpoint_high_watermarks()
            ran["hw_checkpoint"] = 1
        if self._due("offset_checkpoint", self._cfg_int("log.flush.offset.checkpoint.interval.ms"), now):
            self.log_manager.checkpoint()
            ran["offset_checkpoint"] = 1
        if self._due("retention", self._cfg_int("log.retention.check.interval.ms"), now):
            ran["retention"] = int(self.log_manager.submit_retention())
        if self._due("flush", self._cfg_int("log.flush.scheduler.interval.ms"), now):
            ran["flush"] = self.log_manager.flush_dirty_logs()
        return ran

    async def run_scheduler(self, tick_ms: int = 100) -> None:
        """Call `run_periodic` every ``tick_ms`` until cancelled (the server runs it as a task)."""
        while True:
            try:
                self.run_periodic()
            except Exception as err:  # a failing duty must not stop the others
                self._log.error("periodic_duty_failed", error=repr(err), exc_info=err)
            await asyncio.sleep(tick_ms / 1000)
