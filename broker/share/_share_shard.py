"""One partition of ``__share_group_state`` as its share coordinator sees it (Kafka's
``ShareCoordinatorShard``): the state of every share partition whose key maps to it.

Pure, like the group shard: every call takes ``now_ms`` and returns a `CoordinatorResult` of
answers and records; nothing reads a clock or does I/O. A call that writes applies its record to
the shard at once (`replay`, as Kafka's runtime applies a record to its timeline state before the
write completes), so the next call already decides against it; the answer goes out once the
record is committed, and a write that failed answers the error (Kafka's mapping,
`coordinator_error`) and asks the runtime to reload the shard from its log.

Rules (Kafka 4.2's):
- a ShareSnapshot replaces a key's state; a ShareUpdate merges into it (`ShareGroupOffset.merge`);
  a tombstone deletes it. The leader epoch kept for fencing only grows, and so does the state
  epoch;
- Write of a key that was never initialized is INVALID_REQUEST; a leader epoch or state epoch
  below the stored one is FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH (-1: not given, not checked);
- a write is a ShareUpdate (its batches joined and clipped to its start offset) until enough
  updates followed the last snapshot, then a ShareSnapshot of the merged state (snapshot epoch
  + 1, fresh timestamps). Kafka's count: the first update after a key's first snapshot counts 0,
  each later one 1 more, and a snapshot resets it once it reached
  ``snapshot_update_records_per_snapshot``; so the first snapshot comes after N + 1 updates,
  later ones after N;
- a write never changes the leader epoch a record carries: only Read with a newer leader epoch
  records it (a ShareUpdate with no batches), and the old leader's writes are fenced from then on;
- Initialize writes a fresh snapshot (leader epoch 0, no batches, delivery-complete count -1 for
  an unknown start offset, else 0) at a state epoch not below the stored one
  (FENCED_STATE_EPOCH otherwise); Delete writes a tombstone (nothing for a key not stored);
- a topic or partition the metadata image does not have is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from collections.abc import Callable

from kraftlog.broker.coordinator import CoordinatorResult, coordinator_error
from kraftlog.broker.share._share_records import (
    ShareKey,
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
    ShareValue,
)
from kraftlog.broker.share._share_shard_types import (
    DeleteStateRequest,
    Error,
    InitializeStateRequest,
    ReadStateRequest,
    ReadStateSummaryRequest,
    ShareShardConfig,
    ShareStateResult,
    TopicPartitions,
    WriteStateRequest,
)
from kraftlog.broker.share._share_state import ShareGroupOffset, combine_state_batches
from kraftlog.common import errors as kerr

__all__ = ["ShareShard", "StateKey"]

StateKey = tuple[str, str, int]  # group, topic id, partition

NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."


class ShareShard:
    """Share partitions' states of one ``__share_group_state`` partition (see the module docstring)."""

    def __init__(self, partition: int, config: ShareShardConfig) -> None:
        self.partition = partition
        self.config = config
        self.states: dict[StateKey, ShareGroupOffset] = {}
        self.leader_epochs: dict[StateKey, int] = {}
        self.state_epochs: dict[StateKey, int] = {}
        self.updates_since_snapshot: dict[StateKey, int] = {}

    # ===================================================================== replay

    def replay(self, key: ShareKey, value: ShareValue | None) -> None:
        """One record of the partition, in log order (loading, and every write as it is made)."""
        k: StateKey = (key.group, key.topic_id, key.partition)
        if value is None:
            self.states.pop(k, None)
            self.leader_epochs.pop(k, None)
            self.state_epochs.pop(k, None)
            self.updates_since_snapshot.pop(k, None)
            return
        self.leader_epochs[k] = max(self.leader_epochs.get(k, value.leader_epoch), value.leader_epoch)
        if isinstance(value, ShareSnapshotValue):
            self.state_epochs[k] = max(self.state_epochs.get(k, value.state_epoch), value.state_epoch)
            self.states[k] = ShareGroupOffset.from_snapshot(value)
            # Kafka's count: reset by a snapshot only once it reached the limit, started (at 0) by
            # the first update after a key's first snapshot
            if self.updates_since_snapshot.get(k, 0) >= self.config.snapshot_update_records_per_snapshot:
                self.updates_since_snapshot[k] = 0
            return
        current = self.states.get(k)
        if current is None:  # an update whose snapshot compaction removed (deleted later)
            current = ShareGroupOffset(value.snapshot_epoch, 0, value.leader_epoch, value.start_offset, ())
        self.states[k] = current.merge(value)
        count = self.updates_since_snapshot.get(k)
        self.updates_since_snapshot[k] = 0 if count is None else count + 1

    # ===================================================================== handlers

    def initialize_state(
        self, req: InitializeStateRequest, token: object, now_ms: int, topics: TopicPartitions
    ) -> CoordinatorResult:
        """InitializeShareGroupState: a fresh snapshot at the request's state epoch and start offset."""
        k: StateKey = (req.group_id, req.topic_id, req.partition)
        refused = _invalid_partition(req.topic_id, req.partition)
        if refused is None and req.state_epoch != -1 and self.state_epochs.get(k, -1) > req.state_epoch:
            refused = _answer(req.topic_id, req.partition, kerr.FencedStateEpochError)
        refused = refused or _unknown_topic(req.topic_id, req.partition, topics)
        if refused is not None:
            return CoordinatorResult([(token, refused)])
        old = self.states.get(k)
        value = ShareSnapshotValue(
            0 if old is None else old.snapshot_epoch + 1,
            req.state_epoch,
            0,
            req.start_offset,
            now_ms,
            now_ms,
            (),
            -1 if req.start_offset == -1 else 0,
        )
        return self._write(ShareSnapshotKey(*k), value, token, lambda: ShareStateResult(req.topic_id, req.partition))

    def read_state(
        self, req: ReadStateRequest, token: object, now_ms: int, topics: TopicPartitions
    ) -> CoordinatorResult:
        """ReadShareGroupState (a leader loading the share partition): the state; a newer leader
        epoch is recorded first (answered once written)."""
        k: StateKey = (req.group_id, req.topic_id, req.partition)
        refused = _invalid_partition(req.topic_id, req.partition)
        if refused is None and k not in self.states:
            refused = _answer(req.topic_id, req.partition, kerr.InvalidRequestError, READ_UNINITIALIZED)
        refused = refused or self._fenced_leader(k, req.topic_id, req.partition, req.leader_epoch)
        refused = refused or _unknown_topic(req.topic_id, req.partition, topics)
        if refused is not None:
            return CoordinatorResult([(token, refused)])

        def answer() -> ShareStateResult:
            state = self.states[k]
            return ShareStateResult(
                req.topic_id,
                req.partition,
                state_epoch=state.state_epoch,
                leader_epoch=state.leader_epoch,
                start_offset=state.start_offset,
                delivery_complete_count=state.delivery_complete_count,
                state_batches=state.state_batches,
            )

        if req.leader_epoch == -1 or self.leader_epochs.get(k) == req.leader_epoch:
            return CoordinatorResult([(token, answer())])
        state = self.states[k]
        update = ShareUpdateValue(
            state.snapshot_epoch, req.leader_epoch, state.start_offset, (), state.delivery_complete_count
        )
        return self._write(ShareUpdateKey(*k), update, token, answer)

    def write_state(
        self, req: WriteStateRequest, token: object, now_ms: int, topics: TopicPartitions
    ) -> CoordinatorResult:
        """WriteShareGroupState: the leader's new start offset and changed state batches."""
        k: StateKey = (req.group_id, req.topic_id, req.partition)
        refused = _invalid_partition(req.topic_id, req.partition)
        if refused is None and k not in self.states:
            refused = _answer(req.topic_id, req.partition, kerr.InvalidRequestError, WRITE_UNINITIALIZED)
        refused = refused or self._fenced_leader(k, req.topic_id, req.partition, req.leader_epoch)
        if refused is None and req.state_epoch != -1 and self.state_epochs.get(k, -1) > req.state_epoch:
            refused = _answer(req.topic_id, req.partition, kerr.FencedStateEpochError)
        refused = refused or _unknown_topic(req.topic_id, req.partition, topics)
        if refused is not None:
            return CoordinatorResult([(token, refused)])
        state = self.states[k]
        value: ShareValue
        key: ShareKey
        if self.updates_since_snapshot.get(k, 0) >= self.config.snapshot_update_records_per_snapshot:
            start = state.start_offset if req.start_offset == -1 else req.start_offset
            key = ShareSnapshotKey(*k)
            value = ShareSnapshotValue(
                state.snapshot_epoch + 1,
                state.state_epoch,
                state.leader_epoch,
                start,
                now_ms,
                now_ms,
                combine_state_batches(state.state_batches, req.state_batches, start),
                req.delivery_complete_count,
            )
        else:
            key = ShareUpdateKey(*k)
            batches = combine_state_batches((), req.state_batches, req.start_offset)
            value = ShareUpdateValue(
                state.snapshot_epoch, state.leader_epoch, req.start_offset, batches, req.delivery_complete_count
            )
        return self._write(key, value, token, lambda: ShareStateResult(req.topic_id, req.partition))

    def delete_state(
        self, req: DeleteStateRequest, token: object, now_ms: int, topics: TopicPartitions
    ) -> CoordinatorResult:
        """DeleteShareGroupState: a tombstone for the key (nothing to write when it is not stored)."""
        k: StateKey = (req.group_id, req.topic_id, req.partition)
        refused = _invalid_partition(req.topic_id, req.partition) or _unknown_topic(req.topic_id, req.partition, topics)
        if refused is not None:
            return CoordinatorResult([(token, refused)])
        if k not in self.states:
            return CoordinatorResult([(token, ShareStateResult(req.topic_id, req.partition))])
        return self._write(ShareSnapshotKey(*k), None, token, lambda: ShareStateResult(req.topic_id, req.partition))

    def read_state_summary(self, req: ReadStateSummaryRequest, topics: TopicPartitions) -> ShareStateResult:
        """ReadShareGroupStateSummary (describing a share group's offsets): start offset, epochs and
        delivery-complete count; a key never initialized answers start offset -1. Writes nothing
        and fences nothing (the request's leader epoch is not checked, as in Kafka)."""
        k: StateKey = (req.group_id, req.topic_id, req.partition)
        refused = _invalid_partition(req.topic_id, req.partition) or _unknown_topic(req.topic_id, req.partition, topics)
        if refused is not None:
            return refused
        state = self.states.get(k)
        if state is None:
            return ShareStateResult(req.topic_id, req.partition)
        return ShareStateResult(
            req.topic_id,
            req.partition,
            state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch,
            start_offset=state.start_offset,
            delivery_complete_count=state.delivery_complete_count,
        )

    # ================================================================== the runtime

    def next_deadline(self) -> int | None:
        return None  # no timers (Kafka's cold-partition snapshots are not done here)

    def poll(self, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()

    # ===================================================================== helpers

    def _fenced_leader(self, k: StateKey, topic_id: str, partition: int, leader_epoch: int) -> ShareStateResult | None:
        if leader_epoch != -1 and self.leader_epochs.get(k, -1) > leader_epoch:
            return _answer(topic_id, partition, kerr.FencedLeaderEpochError)
        return None

    def _write(
        self, key: ShareKey, value: ShareValue | None, token: object, answer: Callable[[], ShareStateResult]
    ) -> CoordinatorResult:
        """Apply the record now and answer once it is committed (see the module docstring)."""
        self.replay(key, value)
        topic_id, partition = key.topic_id, key.partition
        success = answer()  # the state as this write leaves it

        def written(error: Error, _now_ms: int) -> CoordinatorResult:
            if error is None:
                return CoordinatorResult([(token, success)])
            failed = coordinator_error(error)
            return CoordinatorResult([(token, _answer(topic_id, partition, failed))], reload=True)

        return CoordinatorResult(records=[(key, value)], then=written)


def _answer(topic_id: str, partition: int, error: type[kerr.KafkaError], message: str = "") -> ShareStateResult:
    return ShareStateResult(topic_id, partition, error, message or error.error_name)


def _invalid_partition(topic_id: str, partition: int) -> ShareStateResult | None:
    if partition < 0:
        return _answer(topic_id, partition, kerr.InvalidRequestError, NEGATIVE_PARTITION_ID)
    return None


def _unknown_topic(topic_id: str, partition: int, topics: TopicPartitions) -> ShareStateResult | None:
    count = topics(topic_id)
    if count is None or partition >= count:
        return _answer(topic_id, partition, kerr.UnknownTopicOrPartitionError)
    return None
