"""Shrinking a partition log: truncation (follower divergence), retention, and installing the cleaner's
segments (part of `storage._log.Log`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from kraftlog.storage._log_state import _LogState
from kraftlog.storage._log_types import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX

from ._errors import (
    OffsetOutOfRangeError,
)
from ._segment import LogSegment


class _LogRetention(_LogState):
    """Truncation, retention and the segment swaps of compaction."""

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or past ``offset``; returns True if anything was removed.

        Used by a follower whose log diverged from the leader's. The whole batch that holds
        ``offset`` is removed, so the new log end may fall below ``offset`` if it was mid-batch.
        """
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate to negative offset {offset}")
        with self._lock:
            self._ensure_open()
            if offset >= self._log_end_offset:
                return False
            if offset < self._segments[0].base_offset:
                self._truncate_fully_locked(offset)
                return True
            self._structure_version += 1
            while len(self._segments) > 1 and self._bases[-1] > offset:
                seg = self._segments.pop()
                self._bases.pop()
                seg.delete()
            seg = self.active_segment
            seg.truncate_to(offset)
            self._log_end_offset = seg.read_next_offset()
            if seg.size == 0 and self._log_end_offset != offset and len(self._segments) == 1:
                self._log_end_offset = seg.base_offset
            self.epoch_cache.truncate_from_end(self._log_end_offset)
            self._high_watermark = min(self._high_watermark, self._log_end_offset)
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self._unverified_end = min(self._unverified_end, self._log_end_offset)
            if self._log_start_offset > self._log_end_offset:
                self._log_start_offset = self._log_end_offset
            self.producer_state.delete_snapshots_from(self._log_end_offset + 1)
            self._rebuild_producer_state()  # the producers of the shorter log
            self._bound.info("truncated", to_offset=offset, log_end_offset=self._log_end_offset)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart empty at ``offset`` (a follower far behind the leader's
        log start)."""
        with self._lock:
            self._ensure_open()
            self._truncate_fully_locked(offset)

    def _truncate_fully_locked(self, offset: int) -> None:
        self._structure_version += 1
        for seg in self._segments:
            seg.delete()
        self._segments, self._bases = [], []
        self._add_segment(self._new_segment(offset))
        self._log_end_offset = offset
        self._log_start_offset = offset
        self._high_watermark = offset
        self._recovery_point = offset
        self._unverified_end = min(self._unverified_end, offset)
        self.cleaner_checkpoint = offset
        self.epoch_cache.clear()
        self.producer_state.delete_snapshots_from(0)
        self.producer_state.clear(offset)
        self._bound.info("truncated_fully", start_offset=offset)

    def maybe_increment_log_start_offset(self, new_start: int) -> bool:
        """DeleteRecords: advance the log start offset (never past the high watermark)."""
        with self._lock:
            self._ensure_open()
            if new_start > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move log start offset to {new_start}, past the high watermark {self._high_watermark}"
                )
            if new_start <= self._log_start_offset:
                return False
            self._log_start_offset = new_start
            self.epoch_cache.truncate_from_start(new_start)
            self.producer_state.truncate_head(new_start)
            self.cleaner_checkpoint = max(self.cleaner_checkpoint, new_start)
            return True

    def delete_old_segments(self) -> int:
        """Apply retention: by time and size when ``cleanup.policy`` has ``delete``, and by the log
        start offset always. Only segments wholly below the high watermark go. Returns how many
        segments were deleted.

        The lock is held only to take the segments out of the log (renamed ``.deleted``); their
        files are removed after it is released, so appends and reads wait for no unlink."""
        doomed: list[LogSegment] = []
        with self._lock:
            self._ensure_open()
            now = self._clock_ms()
            cfg = self.config
            if cfg.delete and cfg.retention_ms >= 0:
                doomed += self._delete_segments(
                    lambda seg, _next: now - seg.largest_timestamp > cfg.retention_ms, "retention_ms"
                )
            if cfg.delete and cfg.retention_bytes >= 0:
                excess = [sum(s.size for s in self._segments) - cfg.retention_bytes]

                def over_size(seg: LogSegment, _next: int) -> bool:
                    if excess[0] - seg.size >= 0:
                        excess[0] -= seg.size
                        return True
                    return False

                doomed += self._delete_segments(over_size, "retention_bytes")
            doomed += self._delete_segments(lambda _seg, nxt: nxt <= self._log_start_offset, "log_start_offset")
        for seg in doomed:
            seg.delete()
        return len(doomed)

    def _delete_segments(self, predicate: Callable[[LogSegment, int], bool], reason: str) -> list[LogSegment]:
        """Take the leading segments matching ``predicate`` out of the log (renamed ``.deleted``);
        the caller deletes their files once the lock is released."""
        doomed: list[LogSegment] = []
        for i, seg in enumerate(self._segments):
            is_active = i == len(self._segments) - 1
            upper = self._log_end_offset if is_active else self._bases[i + 1]
            if self._high_watermark < upper or (is_active and seg.size == 0):
                break
            if not predicate(seg, upper):
                break
            doomed.append(seg)
        if not doomed:
            return []
        if doomed[-1] is self.active_segment:
            self._roll_locked(self._log_end_offset)
        self._structure_version += 1
        for seg in doomed:
            self._segments.remove(seg)
            self._bases.remove(seg.base_offset)
            seg.rename_for_deletion(DELETED_SUFFIX)
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self.epoch_cache.truncate_from_start(self._log_start_offset)
        self.producer_state.truncate_head(self._log_start_offset)
        self.cleaner_checkpoint = max(self.cleaner_checkpoint, self._log_start_offset)
        self._bound.info("deleted_segments", reason=reason, count=len(doomed), log_start_offset=self._log_start_offset)
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
        files renamed ``.deleted``, ``.swap`` -> final name; `_complete_or_discard_swaps` finishes
        an interrupted swap at the next load.
        """
        with self._lock:
            if expected_version is not None and (
                self._closed
                or expected_version != self._structure_version
                or any(seg not in self._segments for seg in old)
            ):
                return False
            # the aborted transactions of the segments it replaces stay findable (the cleaner keeps
            # the batches; only read_committed fetches need the index)
            aborted = [t for seg in old for t in seg.txn_index.entries]
            if aborted:
                new_segment.txn_index.replace_with(aborted)
            new_segment.flush()
            new_segment.rename_all(CLEANED_SUFFIX, SWAP_SUFFIX)
            for seg in old:
                self._segments.remove(seg)
                self._bases.remove(seg.base_offset)
                seg.rename_for_deletion(DELETED_SUFFIX)
            new_segment.rename_all(SWAP_SUFFIX, "")
            i = bisect.bisect_left(self._bases, new_segment.base_offset)
            self._segments.insert(i, new_segment)
            self._bases.insert(i, new_segment.base_offset)
        for seg in old:
            seg.delete()
        return True

    def new_cleaned_segment(self, base_offset: int) -> LogSegment:
        seg = self._new_segment(base_offset, suffix=CLEANED_SUFFIX)
        seg.created_ms = self._clock_ms()
        return seg
