"""What the coordinator runtime needs to run share coordinator shards on ``__share_group_state``
(its `ShardHandler`), and which partition of that topic holds a share partition's state.

Kafka's rule for the partition: ``abs(key.hashCode()) % partitions`` of the coordinator key
``group:topicId:partition``, the topic id in Kafka's text form (URL-safe base64 without padding,
not the canonical uuid form kraftlog keeps ids in), so both place a key on the same partition.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

from kraftlog.broker.coordinator import CoordinatorResult, LogEntry
from kraftlog.broker.share._share_records import (
    UnknownShareRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kraftlog.broker.share._share_shard import ShareShard
from kraftlog.broker.share._share_shard_types import ShareShardConfig
from kraftlog.common import coordinator_partition
from kraftlog.common import errors as kerr

__all__ = ["ShareShards", "share_state_partition", "kafka_uuid_text"]


def kafka_uuid_text(topic_id: str) -> str:
    """Kafka's ``Uuid.toString``: the 16 bytes in URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(uuid.UUID(topic_id).bytes).rstrip(b"=").decode()


def share_state_partition(group_id: str, topic_id: str, partition: int, partitions: int) -> int:
    """The ``__share_group_state`` partition that keeps the state of (group, topic, partition)."""
    return coordinator_partition(f"{group_id}:{kafka_uuid_text(topic_id)}:{partition}", partitions)


class ShareShards:
    """The share coordinator's `ShardHandler`: shards, their replay and their records' encoding."""

    def __init__(self, config: ShareShardConfig, log: Any) -> None:
        self._config = config
        self._log = log

    def new_shard(self, partition: int, now_ms: int) -> ShareShard:
        return ShareShard(partition, self._config)

    def encode(self, record: tuple[Any, Any]) -> tuple[bytes, bytes | None]:
        return encode_key(record[0]), None if record[1] is None else encode_value(record[1])

    def replay(self, shard: ShareShard, entry: LogEntry, now_ms: int) -> None:
        """One entry of the partition; transaction markers and records of key types this broker
        does not know are skipped (the share coordinator writes no transactions), corrupt ones
        logged and skipped."""
        if entry.marker is not None or entry.key is None:
            return
        try:
            key = decode_key(entry.key)
            value = decode_value(key, entry.value)
        except UnknownShareRecordError:
            return
        except kerr.CorruptMessageError as err:
            self._log.warning("share_state_record_skipped", partition=shard.partition, error=str(err))
            return
        shard.replay(key, value)

    def loaded(self, shard: ShareShard, now_ms: int) -> CoordinatorResult:
        self._log.info("share_state_partition_loaded", partition=shard.partition, keys=len(shard.states))
        return CoordinatorResult()

    def unloaded(self, shard: ShareShard, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()  # nothing parked: every call is answered by its write
