"""Log compaction for ``cleanup.policy=compact``: keep the latest value of every key.

One pass over a log, as Kafka's cleaner does it:

1. The cleanable range ends at the first uncleanable offset: the active segment, a segment younger
   than ``min.compaction.lag.ms``, or anything at or past the high watermark.
2. The dirty part (from the cleaner checkpoint) is scanned into a map ``key -> last offset``.
3. Every cleanable segment is rewritten, grouped up to ``segment.bytes``, keeping a record only if
   no later offset holds its key. Tombstones (null values) stay until their batch's delete horizon
   (KIP-534: set to now + ``delete.retention.ms`` the first time the batch is cleaned) has passed.
   Untouched batches are copied byte for byte; changed ones are rebuilt with their original base
   and last offsets, producer fields and leader epoch, so offsets never move.
4. Each rewritten group replaces its segments through the ``.cleaned`` -> ``.swap`` protocol, and
   the cleaner checkpoint moves to the end of the cleaned range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from ._records import NO_TIMESTAMP, RecordBatch, RecordBatchBuilder
from ._segment import BatchLocation, LogSegment

if TYPE_CHECKING:
    from ._log import Log

__all__ = ["CleanerStats", "clean_log"]

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


def _upper_bounds(log: "Log", segments: list[LogSegment]) -> list[int]:
    bases = [s.base_offset for s in segments]
    return bases[1:] + [log.log_end_offset]


def clean_log(log: "Log", now_ms: int, *, force: bool = False) -> CleanerStats | None:
    """Compact ``log`` once if its dirty ratio reaches ``min.cleanable.dirty.ratio`` (or a dirty
    record is older than ``max.compaction.lag.ms``, or ``force``). Returns None when nothing ran."""
    with log.lock:
        cfg = log.config
        segments = log.segments
        uppers = _upper_bounds(log, segments)
        cleanable: list[LogSegment] = []
        for seg, upper in zip(segments[:-1], uppers[:-1]):
            if upper > log.high_watermark:
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
        dirty = [s for s, u in zip(cleanable, uppers) if u > first_dirty]
        total_bytes = sum(s.size for s in cleanable)
        dirty_bytes = sum(s.size for s in dirty)
        overdue = any(s.rolling_based_timestamp is not None and s.rolling_based_timestamp >= 0
                      and now_ms - s.rolling_based_timestamp > cfg.max_compaction_lag_ms for s in dirty)
        ratio = dirty_bytes / total_bytes if total_bytes else 0.0
        if not force and not overdue and ratio < cfg.min_cleanable_dirty_ratio:
            return None

        offset_map: dict[bytes, int] = {}
        for seg in dirty:
            for loc in seg.batches_from(0):
                if loc.last_offset < first_dirty:
                    continue
                batch = seg.read_batch(loc)
                if batch.is_control:
                    continue
                for rec in batch.records():
                    if rec.offset >= first_dirty and rec.key is not None:
                        offset_map[rec.key] = rec.offset

        counters = {"bytes_read": 0, "bytes_written": 0, "records_read": 0, "records_retained": 0,
                    "tombstones_removed": 0}
        for group in _group_segments(cleanable, cfg.segment_bytes):
            out = log.new_cleaned_segment(group[0].base_offset)
            try:
                for seg in group:
                    for loc in seg.batches_from(0):
                        counters["bytes_read"] += loc.size
                        data = _filter_batch(seg.read_batch(loc), offset_map, log.log_start_offset,
                                             now_ms, cfg.delete_retention_ms, counters)
                        if data is None:
                            continue
                        kept = RecordBatch(data)
                        out.append([data], len(data), [BatchLocation(0, len(data), kept.base_offset, kept.last_offset,
                                                        kept.max_timestamp, kept.partition_leader_epoch)])
                        counters["bytes_written"] += len(data)
            except BaseException:
                out.delete()
                raise
            log.replace_segments(out, group)
        log.cleaner_checkpoint = end
        stats = CleanerStats(log.topic, log.partition, first_dirty, end, len(cleanable), **counters)
        _log.info("log_cleaned", topic=log.topic, partition=log.partition, first_dirty_offset=first_dirty,
                  end_offset=end, dirty_ratio=round(ratio, 3), bytes_read=stats.bytes_read,
                  bytes_written=stats.bytes_written)
        return stats


def _group_segments(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    current: list[LogSegment] = []
    size = 0
    for seg in segments:
        if current and (size + seg.size > max_bytes
                        or seg.read_next_offset() - current[0].base_offset > _INT32_MAX):
            groups.append(current)
            current, size = [], 0
        current.append(seg)
        size += seg.size
    if current:
        groups.append(current)
    return groups


def _filter_batch(batch: RecordBatch, offset_map: dict[bytes, int], log_start_offset: int,
                  now_ms: int, delete_retention_ms: int, counters: dict[str, int]) -> bytes | None:
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
    builder = RecordBatchBuilder(base_offset=batch.base_offset, compression=batch.compression,
                                 timestamp_type=batch.timestamp_type, producer_id=batch.producer_id,
                                 producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                                 is_transactional=batch.is_transactional,
                                 partition_leader_epoch=batch.partition_leader_epoch,
                                 delete_horizon_ms=new_horizon)
    for rec in kept:
        builder.append(rec.timestamp_ms, rec.key, rec.value, rec.headers, offset=rec.offset)
    builder.set_last_offset(batch.last_offset)
    return builder.build()
