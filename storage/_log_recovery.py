"""Loading a partition log and recovering it after an unclean shutdown (part of `storage._log.Log`)."""

from __future__ import annotations

import os

from kraftlog.storage._log_state import _LogState
from kraftlog.storage._log_types import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX

from ._index import IndexCorruptError
from ._segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, BatchLocation, LogSegment
from ._txn_index import TXN_INDEX_SUFFIX


class _LogRecovery(_LogState):
    """Opening a partition log: load its segments, finish or undo interrupted swaps, recover after a crash."""

    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            created_ms=self._clock_ms(),
            suffix=suffix,
        )

    def _load(self, had_clean_shutdown: bool) -> None:
        self._complete_or_discard_swaps()
        bases = sorted(
            int(p.name[:20])
            for p in self.dir.iterdir()
            if p.name.endswith(LOG_SUFFIX) and len(p.name) == 20 + len(LOG_SUFFIX) and p.name[:20].isdigit()
        )
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):  # indexes whose log is gone
            for p in self.dir.glob(f"*{suffix}"):
                if p.name[:20].isdigit() and int(p.name[:20]) not in bases:
                    p.unlink(missing_ok=True)
        self._segments = [self._new_segment(b) for b in bases]
        self._bases = list(bases)
        recovered_any = False
        if not self._segments:
            self._add_segment(self._new_segment(self._log_start_offset))
        else:
            needs_recovery_from = None if had_clean_shutdown else self._recovery_point
            i = 0
            while i < len(self._segments):
                seg = self._segments[i]
                next_base = self._bases[i + 1] if i + 1 < len(self._bases) else None
                must_recover = needs_recovery_from is not None and (
                    next_base is None or next_base > needs_recovery_from
                )
                if not must_recover:
                    try:
                        seg.sanity_check()
                        seg.load_time_state()
                    except IndexCorruptError as err:
                        self._bound.warning("rebuilding_index", segment=str(seg.log_path), reason=str(err))
                        must_recover = True
                if must_recover:
                    recovered_any = True
                    truncated = seg.recover(
                        max(self.config.max_message_bytes, self.config.segment_bytes) + 1,
                        self._assign_epoch_on_recovery,
                    )
                    if truncated:
                        self._bound.warning(
                            "truncated_invalid_tail", segment=str(seg.log_path), bytes_truncated=truncated
                        )
                        for later in self._segments[i + 1 :]:
                            later.delete()
                        del self._segments[i + 1 :]
                        del self._bases[i + 1 :]
                i += 1
        active = self._segments[-1]
        self._log_end_offset = active.read_next_offset()
        if self._log_end_offset < self._log_start_offset:
            # every byte up to the checkpointed start offset is gone: start there
            self._truncate_fully_locked(self._log_start_offset)
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self.epoch_cache.truncate_from_end(self._log_end_offset)
        self.epoch_cache.truncate_from_start(self._log_start_offset)
        if recovered_any or self._recovery_point > self._log_end_offset:
            self._recovery_point = self._log_end_offset
        self._high_watermark = min(max(self._high_watermark, self._log_start_offset), self._log_end_offset)
        self._unverified_end = self._log_end_offset
        self._bound.debug(
            "log_loaded",
            segments=len(self._segments),
            log_start_offset=self._log_start_offset,
            log_end_offset=self._log_end_offset,
            recovered=recovered_any,
        )

    def _assign_epoch_on_recovery(self, loc: BatchLocation) -> None:
        if loc.partition_leader_epoch > self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(loc.partition_leader_epoch, loc.base_offset)

    def _complete_or_discard_swaps(self) -> None:
        """Finish what a crash interrupted: drop half-written ``.cleaned`` and ``.deleted`` files,
        and install ``.swap`` segments (complete cleaner output) over the segments they replace."""
        swaps = []
        index_swaps = []
        for p in list(self.dir.iterdir()):
            if p.name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp", ".corrupt")):
                p.unlink(missing_ok=True)
            elif p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                swaps.append(p)
            elif p.name.endswith(SWAP_SUFFIX):
                index_swaps.append(p)
        for p in index_swaps:
            # an index swap whose log swap was already installed: drop it; the segment's sanity
            # check finds the index missing and rebuilds it from the log
            if not (self.dir / (p.name[:20] + LOG_SUFFIX + SWAP_SUFFIX)).exists():
                p.unlink(missing_ok=True)
        for swap in sorted(swaps):
            base = int(swap.name[:20])
            # the swap covers its own offsets up to the next swap or log segment it replaces
            seg = LogSegment(
                self.dir,
                base,
                index_interval_bytes=self.config.index_interval_bytes,
                max_index_size=self.config.segment_index_bytes,
                created_ms=self._clock_ms(),
                suffix=SWAP_SUFFIX,
            )
            last = seg.last_batch()
            end = base if last is None else last.last_offset + 1
            seg.close_without_flush()
            for p in self.dir.glob(f"*{LOG_SUFFIX}"):
                if p.name[:20].isdigit() and base <= int(p.name[:20]) < end:
                    for sfx in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                        (self.dir / (p.name[:20] + sfx)).unlink(missing_ok=True)
            for sfx in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                src = self.dir / (swap.name[:20] + sfx + SWAP_SUFFIX)
                if src.exists():
                    os.replace(src, self.dir / (swap.name[:20] + sfx))
                elif sfx != LOG_SUFFIX:
                    (self.dir / (swap.name[:20] + sfx)).unlink(missing_ok=True)

    def _add_segment(self, seg: LogSegment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
