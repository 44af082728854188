"""The leader-epoch cache of a partition and its ``leader-epoch-checkpoint`` file.

Entries map each leader epoch to the first offset written in it. A follower asks the leader for the
end offset of its latest epoch (OffsetForLeaderEpoch) and truncates where the logs diverge
(KIP-101 / KIP-279); this cache answers that question.

Every change is persisted before the method returns (persist before acknowledge): an append in a new
epoch is only acknowledged after the epoch is on disk.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import structlog

from kraftlog.common import LEADER_EPOCH_CHECKPOINT
from kraftlog.storage._checkpoint import read_checkpoint_lines, write_checkpoint_lines
from kraftlog.storage._errors import KafkaStorageError

__all__ = ["LeaderEpochCache", "EpochEntry", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "LEADER_EPOCH_CHECKPOINT"]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

EpochEntry = tuple[int, int]  # (epoch, start_offset)

_log = structlog.get_logger(__name__)


def _parse_entry(entry: list[str], path: Path) -> EpochEntry:
    """``epoch start_offset``, both non-negative integers (Kafka refuses a negative entry)."""
    try:
        epoch, start = (int(v) for v in entry) if len(entry) == 2 else (-1, -1)
    except ValueError:
        epoch = start = -1
    if epoch < 0 or start < 0:
        raise KafkaStorageError(f"malformed line {' '.join(entry)!r} in {path}")
    return epoch, start


class LeaderEpochCache:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._epochs: list[int] = []
        self._starts: list[int] = []
        if path is not None:
            lines = read_checkpoint_lines(path)
            for entry in lines:
                epoch, start = _parse_entry(entry, path)
                # As Kafka loads the file: each entry goes through `assign`'s rule (nothing is
                # written back), so entries out of order replace the ones they conflict with and
                # both columns stay strictly increasing for the lookups' bisection.
                self._assign_in_memory(epoch, start)
            if len(self._epochs) < len(lines):
                _log.warning(
                    "leader_epoch_checkpoint_not_monotonic",
                    file=str(path),
                    entries_read=len(lines),
                    entries_kept=len(self._epochs),
                )

    # -- queries
    @property
    def entries(self) -> list[EpochEntry]:
        return list(zip(self._epochs, self._starts, strict=False))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in which ``offset`` was written (UNDEFINED_EPOCH if before the cache)."""
        i = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def previous_epoch(self, epoch: int) -> int:
        i = bisect.bisect_left(self._epochs, epoch) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end_offset)`` for OffsetForLeaderEpoch.

        The end offset of ``requested_epoch`` is the start offset of the first higher epoch, or the
        log end when it is the latest epoch. The epoch returned is the largest one <= the requested
        epoch, so a follower that saw an epoch this leader never had truncates to the right place.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = higher - 1
        if floor < 0:
            return requested_epoch, self._starts[higher]
        return self._epochs[floor], self._starts[higher]

    # -- changes (each persisted before returning)
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns True when the cache changed.

        As in Kafka, entries stay monotonic in both columns: any entry whose epoch is >= ``epoch``
        or whose start offset is >= ``start_offset`` is removed first (it was never committed).
        Re-assigning the latest epoch at a later offset changes nothing.
        """
        if not self._assign_in_memory(epoch, start_offset):
            return False
        self._flush()
        return True

    def _assign_in_memory(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            return False
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries whose start offset is >= ``end_offset`` (the log was truncated there)."""
        i = bisect.bisect_left(self._starts, end_offset)
        if i < len(self._starts):
            del self._epochs[i:]
            del self._starts[i:]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: drop older entries, keeping the epoch that
        covers ``start_offset`` with its start moved up to it."""
        i = bisect.bisect_right(self._starts, start_offset) - 1
        if i < 0:
            return
        changed = i > 0 or self._starts[i] != start_offset
        del self._epochs[:i]
        del self._starts[:i]
        self._starts[0] = start_offset
        if changed:
            self._flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self._flush()

    def _flush(self) -> None:
        if self.path is not None:
            write_checkpoint_lines(self.path, (f"{e} {s}" for e, s in zip(self._epochs, self._starts, strict=False)))
