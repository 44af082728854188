"""One share partition's state as the share coordinator keeps it (Kafka's ``ShareGroupOffset``),
and the merge of state batches (Kafka's ``PersisterStateBatchCombiner``).

A write carries the batches that changed; the coordinator's state is the union where a newer
batch wins for the offsets it covers, with everything below the start offset dropped. Merging is
what both a ShareUpdate's replay and the snapshot written after enough updates do, so a snapshot
always equals the state its updates built.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from kraftlog.broker.share._share_records import ShareSnapshotValue, ShareUpdateValue
from kraftlog.broker.share._share_types import StateBatch

__all__ = ["ShareGroupOffset", "combine_state_batches"]


def combine_state_batches(
    current: Iterable[StateBatch], newer: Iterable[StateBatch], start_offset: int
) -> tuple[StateBatch, ...]:
    """``current`` overlaid by ``newer`` (newer wins where they overlap, later batches of
    ``newer`` over earlier ones), clipped to ``start_offset`` and up, sorted, with adjacent batches
    of one state and delivery count joined."""
    pieces: list[StateBatch] = [b for b in current if b.last_offset >= start_offset]
    for nb in newer:
        if nb.last_offset < start_offset:
            continue
        kept: list[StateBatch] = []
        for b in pieces:
            if b.last_offset < nb.first_offset or b.first_offset > nb.last_offset:
                kept.append(b)
                continue
            if b.first_offset < nb.first_offset:
                kept.append(b._replace(last_offset=nb.first_offset - 1))
            if b.last_offset > nb.last_offset:
                kept.append(b._replace(first_offset=nb.last_offset + 1))
        kept.append(nb)
        pieces = kept
    out: list[StateBatch] = []
    for b in sorted(pieces):
        if b.last_offset < start_offset:
            continue  # a piece left below the start by a split
        b = b._replace(first_offset=max(b.first_offset, start_offset))
        if out and out[-1].last_offset + 1 == b.first_offset and out[-1][2:] == b[2:]:
            out[-1] = out[-1]._replace(last_offset=b.last_offset)
        else:
            out.append(b)
    return tuple(out)


class ShareGroupOffset(NamedTuple):
    """The coordinator's state of one (group, topic id, partition)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...]
    create_timestamp_ms: int = -1
    write_timestamp_ms: int = -1
    delivery_complete_count: int = -1

    @classmethod
    def from_snapshot(cls, value: ShareSnapshotValue) -> ShareGroupOffset:
        return cls(
            value.snapshot_epoch,
            value.state_epoch,
            value.leader_epoch,
            value.start_offset,
            value.state_batches,
            value.create_timestamp_ms,
            value.write_timestamp_ms,
            value.delivery_complete_count,
        )

    def to_snapshot(self) -> ShareSnapshotValue:
        return ShareSnapshotValue(
            self.snapshot_epoch,
            self.state_epoch,
            self.leader_epoch,
            self.start_offset,
            self.create_timestamp_ms,
            self.write_timestamp_ms,
            self.state_batches,
            self.delivery_complete_count,
        )

    def merge(self, update: ShareUpdateValue) -> ShareGroupOffset:
        """This state with ``update`` applied (a start offset of -1 leaves it; the timestamps are
        the snapshot's: an update carries none)."""
        start = self.start_offset if update.start_offset == -1 else update.start_offset
        return self._replace(
            leader_epoch=update.leader_epoch,
            start_offset=start,
            state_batches=combine_state_batches(self.state_batches, update.state_batches, start),
            delivery_complete_count=update.delivery_complete_count,
        )
