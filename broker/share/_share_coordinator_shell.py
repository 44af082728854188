"""The share coordinator of a broker (KIP-932): `ShareShard`s on the coordinator runtime, its third
user after the group and transaction coordinators.

Every partition of ``__share_group_state`` this broker leads has a shard; the runtime follows
leadership, loads and drops shards, appends their records with acks=all within
``share.coordinator.write.timeout.ms`` and answers a call once its record is committed. What is
here is what is particular to the share coordinator: which partition keeps a share partition's
state (`share_state_partition`), the topic's creation on first use (Kafka's configs:
``cleanup.policy=delete`` with no retention limit, ``compression.type=producer``, the
``share.coordinator.state.topic.*`` keys; the replication factor capped by the brokers there
are, as a small cluster's internal topics are), and one awaitable call per API and partition that
answers a `ShareStateResult`, an unavailable shard as its error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import structlog

from kraftlog.broker.coordinator import (
    CoordinatorResult,
    CoordinatorRuntime,
    ReplicaPartitionWriter,
    ShardUnavailable,
    TopicCreator,
)
from kraftlog.broker.share._share_coordinator import ShareShards, share_state_partition
from kraftlog.broker.share._share_records import SHARE_STATE_TOPIC
from kraftlog.broker.share._share_shard import ShareShard
from kraftlog.broker.share._share_shard_types import (
    DeleteStateRequest,
    InitializeStateRequest,
    ReadStateRequest,
    ReadStateSummaryRequest,
    ShareShardConfig,
    ShareStateResult,
    WriteStateRequest,
)
from kraftlog.common import SYSTEM_CLOCK
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import MetadataImage

__all__ = ["ShareCoordinator", "StateRequest"]

_log = structlog.get_logger(__name__)

StateRequest: TypeAlias = InitializeStateRequest | ReadStateRequest | WriteStateRequest | DeleteStateRequest


class ShareCoordinator:
    """Shards of the ``__share_group_state`` partitions this broker leads (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        config: Any,
        *,
        replicas: Callable[[], Any],
        image: Callable[[], MetadataImage],
        create_topic: Callable[[int, int, dict[str, str]], Awaitable[None]],
        clock_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.image = image
        self._topic = TopicCreator(SHARE_STATE_TOPIC, create_topic)
        self._log = _log.bind(node_id=broker_id)
        writer = ReplicaPartitionWriter(
            replicas,
            SHARE_STATE_TOPIC,
            timeout_ms=lambda: int(config["share.coordinator.write.timeout.ms"]),
            read_chunk_bytes=lambda: int(config["share.coordinator.load.buffer.size"]),
            clock_ms=clock_ms,
        )
        shard_config = ShareShardConfig(config["share.coordinator.snapshot.update.records.per.snapshot"])
        self.runtime: CoordinatorRuntime[ShareShard] = CoordinatorRuntime(
            "share-coordinator",
            SHARE_STATE_TOPIC,
            broker_id,
            writer,
            ShareShards(shard_config, self._log),
            clock_ms=clock_ms,
        )

    # ================================================================ leadership

    def start(self) -> None:
        self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()

    def on_metadata(self, image: MetadataImage) -> None:
        """Load the ``__share_group_state`` partitions this broker now leads, drop the others."""
        self.runtime.on_metadata(image)

    # ================================================================== topic

    def partition_count(self, image: MetadataImage) -> int:
        topic = image.topics.get_by_name(SHARE_STATE_TOPIC)
        n: int = (
            len(topic.partitions) if topic is not None else self.config["share.coordinator.state.topic.num.partitions"]
        )
        return n

    def partition_for(self, group_id: str, topic_id: str, partition: int, image: MetadataImage) -> int:
        """The ``__share_group_state`` partition that keeps (group, topic, partition)'s state."""
        return share_state_partition(group_id, topic_id, partition, self.partition_count(image))

    async def ensure_topic(self) -> None:
        """Create ``__share_group_state`` (once) when it does not exist yet."""
        image = self.image()
        brokers = max(1, len(image.cluster.unfenced_broker_ids()))
        await self._topic.ensure(
            image,
            self.config["share.coordinator.state.topic.num.partitions"],
            min(self.config["share.coordinator.state.topic.replication.factor"], brokers),
            {
                "cleanup.policy": "delete",
                "retention.ms": "-1",
                "compression.type": "producer",
                "segment.bytes": str(self.config["share.coordinator.state.topic.segment.bytes"]),
                "min.insync.replicas": str(min(self.config["share.coordinator.state.topic.min.isr"], brokers)),
            },
        )

    # ================================================================== calls

    def _topics(self) -> Callable[[str], int | None]:
        image = self.image()

        def count(topic_id: str) -> int | None:
            topic = image.topics.get_by_id(topic_id)
            return None if topic is None else len(topic.partitions)

        return count

    async def handle(self, req: StateRequest) -> ShareStateResult:
        """Initialize, Read, Write or Delete one share partition's state on this broker's shard;
        NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as the answer's error when it cannot."""
        image = self.image()
        partition = self.partition_for(req.group_id, req.topic_id, req.partition, image)
        topics = self._topics()

        def operation(shard: ShareShard, token: object, now_ms: int) -> CoordinatorResult:
            if isinstance(req, InitializeStateRequest):
                return shard.initialize_state(req, token, now_ms, topics)
            if isinstance(req, ReadStateRequest):
                return shard.read_state(req, token, now_ms, topics)
            if isinstance(req, WriteStateRequest):
                return shard.write_state(req, token, now_ms, topics)
            return shard.delete_state(req, token, now_ms, topics)

        try:
            result: ShareStateResult = await self.runtime.call(partition, operation)
        except ShardUnavailable as err:
            return ShareStateResult(req.topic_id, req.partition, err.error, err.error.error_name)
        except kerr.KafkaError as err:
            return ShareStateResult(req.topic_id, req.partition, type(err), str(err))
        return result

    def read_summary(self, req: ReadStateSummaryRequest) -> ShareStateResult:
        """ReadShareGroupStateSummary on this broker's shard (it writes nothing)."""
        image = self.image()
        partition = self.partition_for(req.group_id, req.topic_id, req.partition, image)
        try:
            shard = self.runtime.shard(partition)
        except ShardUnavailable as err:
            return ShareStateResult(req.topic_id, req.partition, err.error, err.error.error_name)
        return shard.read_state_summary(req, self._topics())
