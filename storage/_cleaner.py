"""Log compaction for ``cleanup.policy=compact``: keep the latest value of every key.

One pass over a log, as Kafka's cleaner does it:

1. The cleanable range ends at the first uncleanable offset: the active segment, a segment younger
   than ``min.compaction.lag.ms``, or anything at or past the last stable offset (the high
   watermark, or an open transaction's first offset: its outcome is not known yet).
2. The dirty part (from the cleaner checkpoint) is scanned into a map ``key -> last offset``.
3. Every cleanable segment is rewritten, grouped up to ``segment.bytes``, keeping a record only if
   no later offset holds its key. Tombstones (null values) stay until their batch's delete horizon
   (KIP-534: set to now + ``delete.retention.ms`` the first time the batch is cleaned) has passed.
   Untouched batches are copied byte for byte; changed ones are rebuilt with their original base
   and last offsets, producer fields and leader epoch, so offsets never move.
4. Each rewritten group replaces its segments through the ``.cleaned`` -> ``.swap`` protocol, and
   the cleaner checkpoint moves to the end of the cleaned range.

Transactions: the batches of an aborted transaction (the segments' transaction indexes say which)
neither count in the map (an aborted value must not hide the committed one before it) nor are
kept; markers are kept.

Only steps 1 and 4 hold the log's lock (planning, and each swap): steps 2 and 3, the expensive
part, read the segments through descriptors of their own while appends, reads and rolls go on.
The cleaner threads that run the passes are in `_log_cleaner`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from kraftlog.common.records import NO_TIMESTAMP, RecordBatch, RecordBatchBuilder
from kraftlog.storage._segment import BatchLocation, LogSegment

if TYPE_CHECKING:
    from kraftlog.storage._log import Log

__all__ = ["CleanerStats", "CleaningAbortedError", "clean_log", "dirty_ratio"]

_INT32_MAX = 2**31 - 1
_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class CleanerStats:
    topic: str
    partition: int
    first_dirty_offset: int
    end_offset: int
    segments_cleaned: int
    bytes_read: int
    bytes_written: int
    records_read: int
    records_retained: int
    tombstones_removed: int


class CleaningAbortedError(Exception):
    """A cleaning pass stopped because it was asked to (shutdown, the log is being deleted) or
    because the log changed under it (truncated, segments deleted, closed); nothing was installed
    from the groups not yet swapped, and the cleaner checkpoint did not move."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """What one pass cleans, decided under the log's lock."""

    cleanable: list[LogSegment]
    dirty: list[LogSegment]
    first_dirty: int
    end: int
    ratio: float
    log_start_offset: int
    version: int
    aborted: dict[int, list[tuple[int, int]]]  # producer id -> (first, last offset) of its aborted transactions


def _upper_bounds(log: Log, segments: list[LogSegment]) -> list[int]:
    bases = [s.base_offset for s in segments]
    return bases[1:] + [log.log_end_offset]


def _plan(log: Log, now_ms: int, force: bool) -> _Plan | None:
    """The cleanable range and whether it is dirty enough; the caller holds ``log.lock``."""
    cfg = log.config
    segments = log.segments
    uppers = _upper_bounds(log, segments)
    cleanable: list[LogSegment] = []
    for seg, upper in zip(segments[:-1], uppers[:-1], strict=False):
        if upper > log.last_stable_offset:
            break
        if now_ms - seg.largest_timestamp < cfg.min_compaction_lag_ms:
            break
        cleanable.append(seg)
    if not cleanable:
        return None
    end = uppers[len(cleanable) - 1]
    first_dirty = max(log.cleaner_checkpoint, log.log_start_offset)
    if first_dirty >= end:
        return None
    dirty = [s for s, u in zip(cleanable, uppers, strict=False) if u > first_dirty]
    total_bytes = sum(s.size for s in cleanable)
    dirty_bytes = sum(s.size for s in dirty)
    overdue = any(
        s.rolling_based_timestamp is not None
        and s.rolling_based_timestamp >= 0
        and now_ms - s.rolling_based_timestamp > cfg.max_compaction_lag_ms
        for s in dirty
    )
    ratio = dirty_bytes / total_bytes if total_bytes else 0.0
    if not force and not overdue and ratio < cfg.min_cleanable_dirty_ratio:
        return None
    aborted: dict[int, list[tuple[int, int]]] = {}
    for txn in log.collect_aborted(cleanable[0].base_offset, end):
        aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return _Plan(cleanable, dirty, first_dirty, end, ratio, log.log_start_offset, log.structure_version, aborted)


def _is_aborted(batch: RecordBatch, aborted: dict[int, list[tuple[int, int]]]) -> bool:
    """Whether the batch belongs to a transaction that was aborted."""
    if not batch.is_transactional or batch.is_control:
        return False
    return any(first <= batch.base_offset <= last for first, last in aborted.get(batch.producer_id, ()))


def dirty_ratio(log: Log, now_ms: int) -> float | None:
    """The dirty ratio of ``log`` when a pass would clean it now (dirty enough, or overdue by
    ``max.compaction.lag.ms``), else None; the cleaner threads clean the dirtiest log first."""
    with log.lock:
        if not log.config.compact:
            return None
        plan = _plan(log, now_ms, force=False)
    return None if plan is None else max(plan.ratio, 1e-9)


def clean_log(
    log: Log,
    now_ms: int,
    *,
    force: bool = False,
    abort: Callable[[], bool] | None = None,
    throttle: Callable[[int], None] | None = None,
) -> CleanerStats | None:
    """Compact ``log`` once if its dirty ratio reaches ``min.cleanable.dirty.ratio`` (or a dirty
    record is older than ``max.compaction.lag.ms``, or ``force``). Returns None when nothing ran.

    Runs on a cleaner thread, not under the log's lock: the lock is held to plan the pass (and
    open its own descriptors on the segments it reads), then once per segment group to swap the
    cleaned segment in. Appends, reads and rolls go on meanwhile; a truncation, a retention
    deletion or a close in between makes the swap refuse, and the pass ends with
    `CleaningAbortedError` (as does ``abort()`` returning True, checked between batches).
    ``throttle(bytes)`` is called after every batch read and written (``log.cleaner.io.max.bytes
    .per.second``).
    """
    with log.lock:
        plan = _plan(log, now_ms, force)
        if plan is None:
            return None
        views = [seg.read_only_view() for seg in plan.cleanable]
    by_segment = {id(seg): view for seg, view in zip(plan.cleanable, views, strict=False)}
    cfg = log.config
    outputs: list[LogSegment] = []
    counters = {"bytes_read": 0, "bytes_written": 0, "records_read": 0, "records_retained": 0, "tombstones_removed": 0}
    check = abort or (lambda: False)
    try:
        offset_map = _build_offset_map(
            [by_segment[id(s)] for s in plan.dirty], plan.first_dirty, check, throttle, plan.aborted
        )
        groups = _group_segments(plan.cleanable, cfg.segment_bytes)
        for group in groups:
            out = log.new_cleaned_segment(group[0].base_offset)
            outputs.append(out)
            for seg in group:
                view = by_segment[id(seg)]
                for loc in view.batches_from(0):
                    if check():
                        raise CleaningAbortedError("asked to stop")
                    counters["bytes_read"] += loc.size
                    batch = view.read_batch(loc)
                    data = (
                        None
                        if _is_aborted(batch, plan.aborted)
                        else _filter_batch(
                            batch,
                            offset_map,
                            plan.log_start_offset,
                            now_ms,
                            cfg.delete_retention_ms,
                            counters,
                        )
                    )
                    if throttle is not None:
                        throttle(loc.size + (len(data) if data is not None else 0))
                    if data is None:
                        continue
                    kept = RecordBatch(data)
                    out.append(
                        [data],
                        len(data),
                        [
                            BatchLocation(
                                0,
                                len(data),
                                kept.base_offset,
                                kept.last_offset,
                                kept.max_timestamp,
                                kept.partition_leader_epoch,
                            )
                        ],
                    )
                    counters["bytes_written"] += len(data)
            out.flush()  # fsync outside the lock; the swap only renames
        for group, out in zip(groups, list(outputs), strict=False):
            # from here the swap owns the files: if it fails half-way (a crash, an I/O error), the
            # next load completes or discards it from what is on disk, so they are not deleted here
            outputs.remove(out)
            if not log.replace_segments(out, group, expected_version=plan.version):
                out.delete()
                raise CleaningAbortedError("the log changed during the pass (truncated, segments deleted or closed)")
    except BaseException:
        for out in outputs:
            out.delete()
        raise
    finally:
        for view in views:
            view.close_without_flush()
    with log.lock:
        log.cleaner_checkpoint = max(log.cleaner_checkpoint, plan.end)
    stats = CleanerStats(log.topic, log.partition, plan.first_dirty, plan.end, len(plan.cleanable), **counters)
    _log.info(
        "log_cleaned",
        topic=log.topic,
        partition=log.partition,
        first_dirty_offset=plan.first_dirty,
        end_offset=plan.end,
        dirty_ratio=round(plan.ratio, 3),
        bytes_read=stats.bytes_read,
        bytes_written=stats.bytes_written,
    )
    return stats


def _build_offset_map(
    dirty: list[LogSegment],
    first_dirty: int,
    abort: Callable[[], bool],
    throttle: Callable[[int], None] | None,
    aborted: dict[int, list[tuple[int, int]]],
) -> dict[bytes, int]:
    """``key -> last offset`` over the dirty part of the cleanable range (read through views)."""
    offset_map: dict[bytes, int] = {}
    for seg in dirty:
        for loc in seg.batches_from(0):
            if loc.last_offset < first_dirty:
                continue
            if abort():
                raise CleaningAbortedError("asked to stop")
            batch = seg.read_batch(loc)
            if throttle is not None:
                throttle(loc.size)
            if batch.is_control or _is_aborted(batch, aborted):
                continue
            for rec in batch.records():
                if rec.offset >= first_dirty and rec.key is not None:
                    offset_map[rec.key] = rec.offset
    return offset_map


def _group_segments(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    current: list[LogSegment] = []
    size = 0
    for seg in segments:
        if current and (size + seg.size > max_bytes or seg.read_next_offset() - current[0].base_offset > _INT32_MAX):
            groups.append(current)
            current, size = [], 0
        current.append(seg)
        size += seg.size
    if current:
        groups.append(current)
    return groups


def _filter_batch(
    batch: RecordBatch,
    offset_map: dict[bytes, int],
    log_start_offset: int,
    now_ms: int,
    delete_retention_ms: int,
    counters: dict[str, int],
) -> bytes | None:
    """The batch's bytes to keep (unchanged when nothing was dropped), or None to drop it."""
    if batch.last_offset < log_start_offset:
        return None
    if batch.is_control:
        return batch.to_bytes()
    records = batch.records()
    counters["records_read"] += len(records)
    horizon = batch.delete_horizon_ms
    kept = []
    has_tombstone = False
    for rec in records:
        if rec.offset < log_start_offset or rec.key is None:
            continue
        latest = offset_map.get(rec.key)
        if latest is not None and rec.offset < latest:
            continue
        if rec.value is None:
            if horizon != NO_TIMESTAMP and now_ms > horizon:
                counters["tombstones_removed"] += 1
                continue
            has_tombstone = True
        kept.append(rec)
    counters["records_retained"] += len(kept)
    if not kept:
        return None
    needs_horizon = has_tombstone and horizon == NO_TIMESTAMP
    if len(kept) == len(records) and not needs_horizon:
        return batch.to_bytes()
    new_horizon = now_ms + delete_retention_ms if needs_horizon else (horizon if has_tombstone else NO_TIMESTAMP)
    builder = RecordBatchBuilder(
        base_offset=batch.base_offset,
        compression=batch.compression,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        partition_leader_epoch=batch.partition_leader_epoch,
        delete_horizon_ms=new_horizon,
    )
    for rec in kept:
        builder.append(rec.timestamp_ms, rec.key, rec.value, rec.headers, offset=rec.offset)
    builder.set_last_offset(batch.last_offset)
    return builder.build()
