"""Offsets committed inside a transaction (TxnOffsetCommit, KIP-98): `TxnOffsets`, a collaborator
of `GroupShard`, keeps them *pending* per producer until that producer's transaction ends, when the
COMMIT marker written into this ``__consumer_offsets`` partition makes them the group's committed
offsets (the shard replays them) and an ABORT drops them (Kafka's pending transactional offsets).

The records are written in a transactional batch of the producer (`ShardOutcome.producer`), so a
reload finds them as such and replays them as pending until the marker that follows them; a
marker arriving while the shard runs comes from WriteTxnMarkers (`complete_txn`). OffsetFetch with
``require_stable`` answers UNSTABLE_OFFSET_COMMIT (retriable) while a partition has offsets pending.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kraftlog.broker.coordinator import coordinator_error
from kraftlog.broker.groups._group_records import OffsetCommitKey, OffsetCommitValue
from kraftlog.broker.groups._group_shard_types import OffsetCommitResponse, ShardOutcome
from kraftlog.common import errors as kerr

__all__ = ["TxnOffsets", "TxnOffsetCommitRequest"]

Error = type[kerr.KafkaError] | None


@dataclass(frozen=True)
class TxnOffsetCommitRequest:
    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[tuple[str, int, int, int, str], ...]  # topic, partition, offset, leader epoch, metadata
    member_id: str = ""
    group_instance_id: str | None = None
    generation_id: int = -1


class TxnOffsets:
    """The pending transactional offsets of one shard (see the module docstring). ``member_error``
    is the shard's membership check of a commit (its groups are the shard's)."""

    def __init__(self, member_error: Callable[[TxnOffsetCommitRequest, int], Error]) -> None:
        self._member_error = member_error
        # producer id -> group -> partition -> offset, waiting for the producer's marker
        self.pending: dict[int, dict[str, dict[tuple[str, int], OffsetCommitValue]]] = {}

    def commit(self, request: TxnOffsetCommitRequest, token: object, now_ms: int) -> ShardOutcome:
        """TxnOffsetCommit: written in the producer's transaction, pending until it ends."""
        if not request.group_id:
            refused = tuple((t, p, kerr.InvalidGroupIdError) for t, p, *_rest in request.offsets)
            return ShardOutcome([(token, OffsetCommitResponse(refused))])
        error = self._member_error(request, now_ms)
        if error is not None:
            return ShardOutcome([(token, OffsetCommitResponse(tuple((t, p, error) for t, p, *_r in request.offsets)))])
        records: list[tuple[OffsetCommitKey, OffsetCommitValue]] = []
        for topic, partition, offset, leader_epoch, metadata in request.offsets:
            value = OffsetCommitValue(offset, metadata, now_ms, leader_epoch, -1)
            records.append((OffsetCommitKey(request.group_id, topic, partition), value))
        if not records:
            return ShardOutcome([(token, OffsetCommitResponse(()))])

        # pending at once, as Kafka records them before the write: the producer's marker may
        # follow quickly (its transaction's timeout abort), and must find them
        for key, value in records:
            self._pend(request.producer_id, key, value)

        def written(write_error: Error, _t: int) -> ShardOutcome:
            if write_error is not None:
                for key, value in records:  # never written: not pending either
                    self._unpend(request.producer_id, key, value)
                failed = coordinator_error(write_error)
                answer = tuple((k.topic, k.partition, failed) for k, _v in records)
                return ShardOutcome([(token, OffsetCommitResponse(answer))])
            return ShardOutcome(
                [(token, OffsetCommitResponse(tuple((k.topic, k.partition, None) for k, _v in records)))]
            )

        return ShardOutcome(records=list(records), then=written, producer=(request.producer_id, request.producer_epoch))

    def _pend(self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue) -> None:
        self.pending.setdefault(producer_id, {}).setdefault(key.group, {})[(key.topic, key.partition)] = value

    def _unpend(self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue) -> None:
        pending = self.pending.get(producer_id, {}).get(key.group, {})
        if pending.get((key.topic, key.partition)) is value:
            del pending[(key.topic, key.partition)]

    def complete(self, producer_id: int, commit: bool) -> list[tuple[OffsetCommitKey, OffsetCommitValue]]:
        """The producer's transaction ended (its marker is in this partition): its pending offsets
        are no longer pending; on a commit they are returned, for the shard to make committed."""
        pending = self.pending.pop(producer_id, {})
        if not commit:
            return []
        return [
            (OffsetCommitKey(group_id, topic, partition), value)
            for group_id, offsets in pending.items()
            for (topic, partition), value in offsets.items()
        ]

    def replay(self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        """Loading: an offset record of a transactional batch (pending until its marker)."""
        if value is not None:
            self._pend(producer_id, key, value)

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The group's partitions with offsets of an open transaction pending."""
        return {key for by_group in self.pending.values() for key in by_group.get(group_id, {})}

    def unstable(self, group_id: str, partitions: Iterable[tuple[str, int]] | None) -> bool:
        """Whether any of the group's partitions (all, with None) has offsets pending."""
        wanted = None if partitions is None else set(partitions)
        for by_group in self.pending.values():
            pending = by_group.get(group_id)
            if pending and (wanted is None or wanted & set(pending)):
                return True
        return False
