"""Values of `GroupShard`'s calls: its configuration, the offset requests and answers, group
listings and descriptions; `ShardOutcome` is the coordinators' `CoordinatorResult`."""

from __future__ import annotations

from dataclasses import dataclass

from kraftlog.broker.coordinator import CoordinatorResult
from kraftlog.broker.groups._group_classic_types import ClassicGroupConfig, JoinResponse, SyncResponse
from kraftlog.broker.groups._group_consumer_types import ConsumerGroupConfig, HeartbeatResponse
from kraftlog.broker.groups._group_share_types import ShareGroupConfig
from kraftlog.common import errors as kerr

__all__ = [
    "GroupShardConfig",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "CommittedOffset",
    "GroupListing",
    "GroupDescription",
    "ShardOutcome",
    "ShardResponse",
]

Error = type[kerr.KafkaError] | None


@dataclass(frozen=True)
class GroupShardConfig:
    classic: ClassicGroupConfig = ClassicGroupConfig()
    consumer: ConsumerGroupConfig = ConsumerGroupConfig()
    share: ShareGroupConfig = ShareGroupConfig()
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes (10080)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes


@dataclass(frozen=True)
class OffsetCommitRequest:
    group_id: str
    offsets: tuple[tuple[str, int, int, int, str], ...]  # topic, partition, offset, leader epoch, metadata
    member_id: str = ""
    group_instance_id: str | None = None
    generation_id: int = -1
    retention_ms: int = -1  # OffsetCommit v2-v4's retention time; -1: the broker's


@dataclass(frozen=True)
class OffsetCommitResponse:
    partitions: tuple[tuple[str, int, Error], ...]


@dataclass(frozen=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int  # -1: none committed
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"  # or "consumer" (KIP-848), or "share" (KIP-932)


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[tuple[str, str | None, str, str, bytes, bytes], ...]  # id, instance, client, host, meta, assignment


ShardResponse = JoinResponse | SyncResponse | OffsetCommitResponse | HeartbeatResponse | tuple[tuple[str, Error], ...]


# What a shard call produced (answers, records to write, what runs once they are): the
# coordinators' one result type.
ShardOutcome = CoordinatorResult
