"""The group coordinator of a broker: `GroupShard`s on the coordinator runtime (issue 14, 23).

Every partition of ``__consumer_offsets`` this broker leads has a shard; the runtime
(`kraftlog.broker.coordinator._coordinator_runtime`) follows leadership, loads and drops shards, appends their
records with acks=all and ``offsets.commit.timeout.ms`` and fires their timers. What is left here
is what is particular to groups: how a shard is made, how the partition's records (and the
transaction markers in it) replay into one, what loading and unloading do to its groups, and
creating ``__consumer_offsets`` on the first FindCoordinator (compacted, ``offsets.topic.*``), as
Kafka does.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import structlog

from kraftlog.broker.coordinator import (
    OFFSETS_TOPIC,
    CoordinatorResult,
    CoordinatorRuntime,
    LogEntry,
    ReplicaPartitionWriter,
    ShardUnavailable,
    TopicCreator,
)
from kraftlog.broker.groups._group_classic_types import ClassicGroupConfig
from kraftlog.broker.groups._group_consumer_types import ConsumerGroupConfig
from kraftlog.broker.groups._group_records import (
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownGroupRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kraftlog.broker.groups._group_shard import GroupShard, GroupShardConfig, ShardOutcome
from kraftlog.broker.groups._group_share_types import ShareGroupConfig, ShareInitJob, ShareMembersGone
from kraftlog.common import SYSTEM_CLOCK, coordinator_partition
from kraftlog.common import errors as kerr
from kraftlog.common.config import ConfigError, group_configs
from kraftlog.common.security import spawn
from kraftlog.metadata_log import ConfigResourceType, MetadataImage

__all__ = [
    "GroupCoordinator",
    "GroupShards",
    "OFFSETS_TOPIC",
    "ShareMembersRelease",
    "ShareStateInitializer",
    "initialized_at_once",
]

#: the share coordinator's InitializeShareGroupState for one job: the partitions that failed
#: (topic id -> partitions; empty: all initialized)
ShareStateInitializer = Callable[[ShareInitJob], Awaitable[dict[str, set[int]]]]


#: what gives back the records of members gone from a share group (the broker's share partitions)
ShareMembersRelease = Callable[[ShareMembersGone], Awaitable[None]]


async def _nothing_to_release(job: ShareMembersGone) -> None:
    """The release of a broker without share partitions."""


async def initialized_at_once(job: ShareInitJob) -> dict[str, set[int]]:
    """The initializer of a broker without a share coordinator: nothing to record, nothing failed."""
    return {}


_log = structlog.get_logger(__name__)


def shard_config(config: Any) -> GroupShardConfig:
    """The shard settings from the broker config (Kafka's key names)."""
    return GroupShardConfig(
        classic=ClassicGroupConfig(
            min_session_timeout_ms=config["group.min.session.timeout.ms"],
            max_session_timeout_ms=config["group.max.session.timeout.ms"],
            initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            max_size=config["group.max.size"],
        ),
        consumer=ConsumerGroupConfig(
            session_timeout_ms=config["group.consumer.session.timeout.ms"],
            heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
            max_size=config["group.consumer.max.size"],
            assignors=tuple(config["group.consumer.assignors"]) or ("uniform",),
            regex_refresh_interval_ms=config["group.consumer.regex.refresh.interval.ms"],
        ),
        share=ShareGroupConfig(
            session_timeout_ms=config["group.share.session.timeout.ms"],
            heartbeat_interval_ms=config["group.share.heartbeat.interval.ms"],
            max_size=config["group.share.max.size"],
            assignors=tuple(config["group.share.assignors"]),
            # Kafka's internal group.share.initialize.retry.interval.ms (30 s), at least the commit timeout
            initialize_retry_interval_ms=max(30_000, int(config["offsets.commit.timeout.ms"])),
        ),
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        offset_metadata_max_bytes=config["offset.metadata.max.bytes"],
    )


class GroupShards:
    """What the runtime needs to know about group shards (its `ShardHandler`)."""

    def __init__(
        self,
        config: GroupShardConfig,
        rng: random.Random,
        log: Any,
        topic_lookup: Callable[[str], tuple[str, int] | None] | None = None,
    ) -> None:
        self._config = config
        self._rng = rng
        self._log = log
        self._topic_lookup = topic_lookup

    def new_shard(self, partition: int, now_ms: int) -> GroupShard:
        return GroupShard(partition, self._config, self._rng, now_ms, self._topic_lookup)

    def encode(self, record: tuple[Any, Any]) -> tuple[bytes, bytes | None]:
        return encode_key(record[0]), None if record[1] is None else encode_value(record[1])

    def replay(self, shard: GroupShard, entry: LogEntry, now_ms: int) -> None:
        """One entry of the partition: a transaction marker ends a producer's pending offsets; an
        offset of a transactional batch (TxnOffsetCommit) is pending until its marker; any other
        record replays into the shard. Records of newer versions are skipped, as Kafka's loader
        does; corrupt ones are logged and skipped."""
        if entry.marker is not None:
            shard.complete_txn(entry.txn_producer_id, entry.marker)
            return
        if entry.key is None:
            return
        try:
            key = decode_key(entry.key)
            value = decode_value(key, entry.value)
        except UnknownGroupRecordError:
            return
        except kerr.CorruptMessageError as err:
            self._log.warning("group_record_skipped", partition=shard.partition, error=str(err))
            return
        if entry.txn_producer_id < 0:
            shard.replay(key, value, now_ms)
        elif isinstance(key, OffsetCommitKey) and (value is None or isinstance(value, OffsetCommitValue)):
            shard.replay_txn_offset(entry.txn_producer_id, key, value)

    def loaded(self, shard: GroupShard, now_ms: int) -> CoordinatorResult:
        shard.loaded(now_ms)
        self._log.info("group_partition_loaded", partition=shard.partition, groups=len(shard.groups))
        return CoordinatorResult()

    def unloaded(self, shard: GroupShard, now_ms: int) -> CoordinatorResult:
        """The partition moved away: every group's parked requests are answered (NOT_COORDINATOR)."""
        out = CoordinatorResult()
        for group in list(shard.groups.values()):
            out.responses.extend(group.mark_dead(now_ms).responses)
        return out


class GroupCoordinator:
    """Shards of the ``__consumer_offsets`` partitions this broker leads (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        config: Any,
        *,
        replicas: Callable[[], Any],
        create_offsets_topic: Callable[[int, int, dict[str, str]], Awaitable[None]],
        clock_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self._topic = TopicCreator(OFFSETS_TOPIC, create_offsets_topic)
        log = _log.bind(node_id=broker_id)
        writer = ReplicaPartitionWriter(
            replicas,
            OFFSETS_TOPIC,
            timeout_ms=lambda: int(config["offsets.commit.timeout.ms"]),
            read_chunk_bytes=lambda: int(config["offsets.load.buffer.size"]),
            clock_ms=clock_ms,
        )
        self.shard_config = shard_config(config)
        self._image: MetadataImage | None = None
        self._log = log
        handler = GroupShards(self.shard_config, rng or random.Random(), log, self._lookup_now)
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            "group-coordinator",
            OFFSETS_TOPIC,
            broker_id,
            writer,
            handler,
            clock_ms=clock_ms,
            on_jobs=self._start_jobs,
        )
        #: initializes share partitions' state for share groups (KIP-932): the share coordinator,
        #: once the broker has one (`ShareStateInitializer`); until then every partition counts as
        #: initialized at once, its state made by its share partition at first use
        self.share_state_initializer: ShareStateInitializer = initialized_at_once
        #: gives back the records of members that left or were fenced (the share partitions this
        #: broker leads; the others' leaders learn it from the member's closed connection)
        self.share_members_release: ShareMembersRelease = _nothing_to_release
        self._init_tasks: set[asyncio.Task[None]] = set()

    # ================================================================ leadership

    def start(self) -> None:
        self.runtime.start()

    async def stop(self) -> None:
        for task in list(self._init_tasks):
            task.cancel()
        await self.runtime.stop()

    def on_metadata(self, image: MetadataImage) -> None:
        """Load the partitions of ``__consumer_offsets`` this broker now leads, drop the others."""
        self._image = image
        self.runtime.on_metadata(image)

    def _lookup_now(self, name: str) -> tuple[str, int] | None:
        """Topic name -> (id, partition count) in the latest image (share groups' timers)."""
        return None if self._image is None else self.topic_lookup(self._image)(name)

    # =========================================================== share state

    def _start_jobs(self, shard: GroupShard, jobs: list[Any]) -> None:
        """Share-group heartbeats marked partitions "initializing" (written): have their state
        initialized, then write the outcome on the shard (Kafka's persisterInitialize). Members
        left or were fenced (written): have their records given back."""
        for job in jobs:
            if isinstance(job, ShareInitJob):
                task = spawn(self._initialize(shard, job), name=f"share-init-{shard.partition}")
            elif isinstance(job, ShareMembersGone):
                task = spawn(self._release(job), name=f"share-release-{shard.partition}")
            else:
                continue
            self._init_tasks.add(task)
            task.add_done_callback(self._init_tasks.discard)

    async def _release(self, job: ShareMembersGone) -> None:
        try:
            await self.share_members_release(job)
        except Exception as err:  # noqa: BLE001 - the records' locks still end on their own
            self._log.warning("share_members_release_failed", group_id=job.group_id, error=repr(err))

    async def _initialize(self, shard: GroupShard, job: ShareInitJob) -> None:
        try:
            failed = await self.share_state_initializer(job)
        except Exception as err:  # noqa: BLE001 - every partition of the job failed; asked again later
            self._log.warning("share_state_initialize_failed", group_id=job.group_id, error=repr(err))
            failed = job.partitions()
        names = {t: name for t, name, _ps in job.topics}
        if not self.runtime.is_current(shard):
            return
        try:
            self.run(shard, lambda: shard.share.initialized(job, failed, lambda t: names.get(t, "<UNKNOWN>")))
        except ShardUnavailable:
            return

    def on_txn_marker(self, topic: str, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written (and replicated) into a partition: the offsets that
        producer committed in it there become committed, or are dropped."""
        if topic != OFFSETS_TOPIC:
            return
        try:
            shard = self.runtime.shard(partition)
        except ShardUnavailable:
            return
        shard.complete_txn(producer_id, commit)

    # ================================================================== requests

    def shards(self) -> list[GroupShard]:
        """The loaded shards (ListGroups asks each)."""
        return self.runtime.shards()

    def partition_count(self, image: MetadataImage) -> int:
        topic = image.topics.get_by_name(OFFSETS_TOPIC)
        if topic is not None:
            return len(topic.partitions)
        n: int = self.config["offsets.topic.num.partitions"]
        return n

    @staticmethod
    def topic_lookup(image: MetadataImage) -> Callable[[str], tuple[str, int] | None]:
        """Topic name -> (topic id, partition count) in ``image``, for consumer-group assignors."""

        def lookup(name: str) -> tuple[str, int] | None:
            topic = image.topics.get_by_name(name)
            return None if topic is None else (topic.topic_id, len(topic.partitions))

        return lookup

    def consumer_group_config(self, image: MetadataImage, group_id: str) -> ConsumerGroupConfig:
        """The KIP-848 settings of ``group_id``: the broker's, with the group's own configs
        (config resource GROUP: consumer.session.timeout.ms, consumer.heartbeat.interval.ms) in
        their place. A stored value the bounds no longer admit (the broker's bounds changed since)
        leaves the broker's."""
        base = self.shard_config.consumer
        own = image.configs.config(ConfigResourceType.GROUP, group_id)
        if not own:
            return base
        try:
            values = group_configs(own, self.config.__getitem__)
        except ConfigError as err:
            _log.warning("group_config_ignored", group_id=group_id, error=str(err))
            return base
        return replace(
            base,
            session_timeout_ms=values["consumer.session.timeout.ms"],
            heartbeat_interval_ms=values["consumer.heartbeat.interval.ms"],
        )

    @staticmethod
    def topic_names(image: MetadataImage) -> Callable[[], list[str]]:
        """Every topic's name in ``image``, for subscriptions by regex (read only when asked)."""

        def names() -> list[str]:
            return list(image.topics.by_name)

        return names

    def shard_for(self, group_id: str, image: MetadataImage) -> GroupShard:
        """The shard of ``group_id`` on this broker, or `ShardUnavailable`."""
        return self.runtime.shard(coordinator_partition(group_id, self.partition_count(image)))

    async def ensure_offsets_topic(self, image: MetadataImage) -> None:
        """Create ``__consumer_offsets`` (once) when it does not exist yet."""
        await self._topic.ensure(
            image,
            self.config["offsets.topic.num.partitions"],
            self.config["offsets.topic.replication.factor"],
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
                "compression.type": "producer",
            },
        )

    def run(self, shard: GroupShard, call: Callable[[], ShardOutcome]) -> None:
        """Run one shard call and carry out its outcome (`CoordinatorRuntime.run`)."""
        self.runtime.run(shard, call)
