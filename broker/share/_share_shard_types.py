"""Requests and answers of the share coordinator's shard: one (group, topic id, partition) per
call, as Kafka's ``ShareCoordinatorShard`` takes them (the service splits a request of many
partitions by the ``__share_group_state`` partition each key maps to).

APIs: InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86), ReadShareGroupStateSummary (87).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kraftlog.broker.share._share_types import StateBatch
from kraftlog.common import errors as kerr

__all__ = [
    "Error",
    "ShareShardConfig",
    "InitializeStateRequest",
    "ReadStateRequest",
    "WriteStateRequest",
    "DeleteStateRequest",
    "ReadStateSummaryRequest",
    "ShareStateResult",
    "TopicPartitions",
]

Error = type[kerr.KafkaError] | None

#: topic id -> its partition count, None for a topic the metadata image does not have
TopicPartitions = Callable[[str], int | None]


@dataclass(frozen=True)
class ShareShardConfig:
    """``share.coordinator.snapshot.update.records.per.snapshot`` (Kafka's default 500): after that
    many ShareUpdate records of a key, its next write is a ShareSnapshot."""

    snapshot_update_records_per_snapshot: int = 500


@dataclass(frozen=True)
class InitializeStateRequest:
    group_id: str
    topic_id: str
    partition: int
    state_epoch: int
    start_offset: int = -1  # -1: share.auto.offset.reset decides on the leader


@dataclass(frozen=True)
class ReadStateRequest:
    group_id: str
    topic_id: str
    partition: int
    leader_epoch: int = -1  # -1: no leader epoch to record or fence with


@dataclass(frozen=True)
class WriteStateRequest:
    group_id: str
    topic_id: str
    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class DeleteStateRequest:
    group_id: str
    topic_id: str
    partition: int


@dataclass(frozen=True)
class ReadStateSummaryRequest:
    group_id: str
    topic_id: str
    partition: int
    leader_epoch: int = -1


@dataclass(frozen=True)
class ShareStateResult:
    """One partition's answer. Read fills ``state_epoch``, ``start_offset`` and ``state_batches``;
    the summary ``state_epoch``, ``leader_epoch``, ``start_offset`` and
    ``delivery_complete_count``; the others only the error."""

    topic_id: str
    partition: int
    error: Error = None
    message: str = ""
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    delivery_complete_count: int = -1
    state_batches: tuple[StateBatch, ...] = ()
