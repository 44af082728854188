"""Opening a partition log (Kafka's ``LogLoader``): finish or undo interrupted cleaner swaps, load
the segments of a `LocalLog`, and recover those past the recovery point after an unclean
shutdown. `Log` runs it once, before anything else touches the log.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from kraftlog.storage._config import LogConfig
from kraftlog.storage._index import IndexCorruptError
from kraftlog.storage._local_log import LocalLog
from kraftlog.storage._log_types import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from kraftlog.storage._segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, BatchLocation, LogSegment
from kraftlog.storage._txn_index import TXN_INDEX_SUFFIX

__all__ = ["load_segments", "complete_or_discard_swaps"]


def load_segments(local: LocalLog, had_clean_shutdown: bool, on_batch: Callable[[BatchLocation], None]) -> bool:
    """Open every segment file of ``local``'s directory; after an unclean shutdown, recover the
    segments from the recovery point on (``on_batch`` sees each batch recovered: the owner records
    its leader epoch) and drop everything after an invalid tail or a hole left by unflushed
    writes (`_unflushed_gap`). Sets the log end offset and
    brings the recovery point down to it; returns whether any segment was recovered."""
    complete_or_discard_swaps(local.dir, local.config, local.clock_ms)
    bases = sorted(
        int(p.name[:20])
        for p in local.dir.iterdir()
        if p.name.endswith(LOG_SUFFIX) and len(p.name) == 20 + len(LOG_SUFFIX) and p.name[:20].isdigit()
    )
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):  # indexes whose log is gone
        for p in local.dir.glob(f"*{suffix}"):
            if p.name[:20].isdigit() and int(p.name[:20]) not in bases:
                p.unlink(missing_ok=True)
    local.segments = [local.new_segment(b) for b in bases]
    local.bases = list(bases)
    recovered_any = False
    if not local.segments:
        local.add_segment(local.new_segment(local.log_start_offset))
    else:
        needs_recovery_from = None if had_clean_shutdown else local.recovery_point
        i = 0
        while i < len(local.segments):
            seg = local.segments[i]
            next_base = local.next_base(i)
            must_recover = needs_recovery_from is not None and (next_base is None or next_base > needs_recovery_from)
            if not must_recover:
                try:
                    seg.sanity_check()
                    seg.load_time_state()
                except IndexCorruptError as err:
                    local.bound.warning("rebuilding_index", segment=str(seg.log_path), reason=str(err))
                    must_recover = True
            if must_recover:
                recovered_any = True
                truncated = seg.recover(max(local.config.max_message_bytes, local.config.segment_bytes) + 1, on_batch)
                if truncated:
                    local.bound.warning("truncated_invalid_tail", segment=str(seg.log_path), bytes_truncated=truncated)
                gap = _unflushed_gap(local, seg, next_base)
                if gap is not None:
                    local.bound.warning(
                        "truncated_after_unflushed_gap", segment=str(seg.log_path), ends_at=gap, next_base=next_base
                    )
                if truncated or gap is not None:
                    for later in local.segments[i + 1 :]:
                        later.delete()
                    del local.segments[i + 1 :]
                    del local.bases[i + 1 :]
            i += 1
    local.log_end_offset = local.active_segment.read_next_offset()
    if recovered_any or local.recovery_point > local.log_end_offset:
        local.recovery_point = local.log_end_offset  # what was recovered is what the files hold now
    return recovered_any


def _unflushed_gap(local: LocalLog, seg: LogSegment, next_base: int | None) -> int | None:
    """Where a recovered segment ends when that is below the next segment's base in a log whose
    offsets are dense (not compacted), else None.

    A rolled segment is fsynced in the background, after the next one has started: a power loss
    in between can leave it without its tail while the next segment's file (and some of its data)
    survived. Its offsets are then a hole the log would claim to hold and never refetch, so the
    recovery keeps only what comes before the hole. A compacted log has legitimate holes.
    """
    if next_base is None or local.config.compact:
        return None
    end = seg.read_next_offset()
    return end if end < next_base else None


def complete_or_discard_swaps(directory: Path, config: LogConfig, clock_ms: Callable[[], int]) -> None:
    """Finish what a crash interrupted: drop half-written ``.cleaned`` and ``.deleted`` files,
    and install ``.swap`` segments (complete cleaner output) over the segments they replace."""
    swaps = []
    index_swaps = []
    for p in list(directory.iterdir()):
        if p.name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp", ".corrupt")):
            p.unlink(missing_ok=True)
        elif p.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            swaps.append(p)
        elif p.name.endswith(SWAP_SUFFIX):
            index_swaps.append(p)
    for p in index_swaps:
        # an index swap whose log swap was already installed: drop it; the segment's sanity
        # check finds the index missing and rebuilds it from the log
        if not (directory / (p.name[:20] + LOG_SUFFIX + SWAP_SUFFIX)).exists():
            p.unlink(missing_ok=True)
    for swap in sorted(swaps):
        base = int(swap.name[:20])
        # the swap covers its own offsets up to the next swap or log segment it replaces
        seg = LogSegment(
            directory,
            base,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            created_ms=clock_ms(),
            suffix=SWAP_SUFFIX,
        )
        last = seg.last_batch()
        end = base if last is None else last.last_offset + 1
        seg.close_without_flush()
        for p in directory.glob(f"*{LOG_SUFFIX}"):
            if p.name[:20].isdigit() and base <= int(p.name[:20]) < end:
                for sfx in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    (directory / (p.name[:20] + sfx)).unlink(missing_ok=True)
        for sfx in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            src = directory / (swap.name[:20] + sfx + SWAP_SUFFIX)
            if src.exists():
                os.replace(src, directory / (swap.name[:20] + sfx))
            elif sfx != LOG_SUFFIX:
                (directory / (swap.name[:20] + sfx)).unlink(missing_ok=True)
