"""`LogRetention`: what removes data from the front of a partition log — retention by time and
size, DeleteRecords' log start offset — and the cleaner's side of compaction (its checkpoint, and
installing the segments it wrote). It works on the log's `LocalLog` and keeps the leader-epoch
cache and the producer state in step with the new log start.

Ordering rules: nothing past the high watermark is deleted, and the log start offset never passes
it. Segments leave the list under the lock (renamed ``.deleted``); their files are removed after
it is released.
"""

from __future__ import annotations

from collections.abc import Callable

from kraftlog.storage._epoch_cache import LeaderEpochCache
from kraftlog.storage._errors import OffsetOutOfRangeError
from kraftlog.storage._local_log import LocalLog
from kraftlog.storage._log_producers import LogProducers
from kraftlog.storage._log_types import CLEANED_SUFFIX, SWAP_SUFFIX
from kraftlog.storage._segment import LogSegment

__all__ = ["LogRetention"]


class LogRetention:
    """Retention, DeleteRecords and compaction swaps of one log."""

    def __init__(self, local: LocalLog, epoch_cache: LeaderEpochCache, producers: LogProducers) -> None:
        self._local = local
        self._epoch_cache = epoch_cache
        self._producers = producers
        self.cleaner_checkpoint = 0  # offsets below it were compacted (the cleaner's checkpoint)

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """DeleteRecords: advance the log start offset (never past the high watermark)."""
        with self._local.lock:
            self._local.ensure_open()
            if new_start > self._local.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move log start offset to {new_start}, past the high watermark {self._local.high_watermark}"
                )
            if new_start <= self._local.log_start_offset:
                return False
            self._local.advance_log_start(new_start)
            self._epoch_cache.truncate_from_start(new_start)
            self._producers.state.truncate_head(new_start)
            self.cleaner_checkpoint = max(self.cleaner_checkpoint, new_start)
            return True

    def delete_old_segments(self) -> int:
        """Apply retention: by time and size when ``cleanup.policy`` has ``delete``, and by the log
        start offset always. Only segments wholly below the high watermark go. Returns how many
        segments were deleted.

        The lock is held only to take the segments out of the log (renamed ``.deleted``); their
        files are removed after it is released, so appends and reads wait for no unlink."""
        doomed: list[LogSegment] = []
        with self._local.lock:
            self._local.ensure_open()
            now = self._local.clock_ms()
            cfg = self._local.config
            if cfg.delete and cfg.retention_ms >= 0:
                doomed += self._delete_segments(
                    lambda seg, _next: now - seg.largest_timestamp > cfg.retention_ms, "retention_ms"
                )
            if cfg.delete and cfg.retention_bytes >= 0:
                excess = [sum(s.size for s in self._local.segments) - cfg.retention_bytes]

                def over_size(seg: LogSegment, _next: int) -> bool:
                    if excess[0] - seg.size >= 0:
                        excess[0] -= seg.size
                        return True
                    return False

                doomed += self._delete_segments(over_size, "retention_bytes")
            doomed += self._delete_segments(lambda _seg, nxt: nxt <= self._local.log_start_offset, "log_start_offset")
        for seg in doomed:
            seg.delete()
        return len(doomed)

    def _delete_segments(self, predicate: Callable[[LogSegment, int], bool], reason: str) -> list[LogSegment]:
        """Take the leading segments matching ``predicate`` out of the log (renamed ``.deleted``);
        the caller deletes their files once the lock is released."""
        local = self._local
        doomed: list[LogSegment] = []
        for i, seg in enumerate(local.segments):
            nxt = local.next_base(i)
            upper = local.log_end_offset if nxt is None else nxt
            if local.high_watermark < upper or (nxt is None and seg.size == 0):
                break
            if not predicate(seg, upper):
                break
            doomed.append(seg)
        if not doomed:
            return []
        if doomed[-1] is local.active_segment:
            local.roll(local.log_end_offset)
        local.delete_leading(doomed)
        start = local.log_start_offset
        self._epoch_cache.truncate_from_start(start)
        self._producers.state.truncate_head(start)
        self.cleaner_checkpoint = max(self.cleaner_checkpoint, start)
        local.bound.info("deleted_segments", reason=reason, count=len(doomed), log_start_offset=start)
        return doomed

    def replace_segments(
        self, new_segment: LogSegment, old: list[LogSegment], *, expected_version: int | None = None
    ) -> bool:
        """Install a cleaned segment (written with suffix ``.cleaned``) in place of ``old``;
        returns False (and changes nothing) when the log moved on since the pass was planned:
        it was closed, ``expected_version`` is no longer `structure_version`, or an old segment
        is no longer in the log.

        Readers never see a half-swapped log: the list changes in one step under the lock. Only
        renames happen under it (the caller flushed the new segment before); the old files are
        deleted after it is released. Crash-safe order: ``.cleaned`` -> ``.swap`` (complete), old
        files renamed ``.deleted``, ``.swap`` -> final name; `complete_or_discard_swaps` finishes
        an interrupted swap at the next load.
        """
        with self._local.lock:
            if expected_version is not None and (
                self._local.closed
                or expected_version != self._local.structure_version
                or any(seg not in self._local.segments for seg in old)
            ):
                return False
            # the aborted transactions of the segments it replaces stay findable (the cleaner keeps
            # the batches; only read_committed fetches need the index)
            aborted = [t for seg in old for t in seg.txn_index.entries]
            if aborted:
                new_segment.txn_index.replace_with(aborted)
            new_segment.flush()
            new_segment.rename_all(CLEANED_SUFFIX, SWAP_SUFFIX)
            self._local.swap_in(new_segment, old)
        for seg in old:
            seg.delete()
        return True

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        seg = self._local.new_segment(base_offset, suffix=CLEANED_SUFFIX)
        seg.created_ms = self._local.clock_ms()
        return seg
