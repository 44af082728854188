"""When to snapshot and which segments a snapshot makes deletable (see `metadata_log.log_files`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kraftlog.common import fsync_directory
from kraftlog.metadata_log.log_files._log_frames import _log
from kraftlog.metadata_log.log_files._log_names import SegmentId, latest_snapshot, list_segments, list_snapshots

DEFAULT_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots


DEFAULT_MAX_RETENTION_BYTES = 100 * 1024 * 1024  # metadata.max.retention.bytes


def should_snapshot(
    bytes_since_last_snapshot: int, max_record_bytes_between_snapshots: int = DEFAULT_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS
) -> bool:
    """True once ``metadata.log.max.record.bytes.between.snapshots`` of records were appended since
    the last snapshot (KRaft compares with >=)."""
    return bytes_since_last_snapshot >= max_record_bytes_between_snapshots


@dataclass(frozen=True, slots=True)
class RetentionResult:
    deleted_segments: tuple[Path, ...]
    deleted_snapshots: tuple[Path, ...]


def oldest_available_offset(directory: str | os.PathLike[str]) -> int:
    """The lowest offset a reader can still get from the segments; a fetcher asking for less must load
    the latest snapshot first. Without segments: the latest snapshot's offset + 1, or 0."""
    return _oldest_available(directory, list_segments(directory))


def _oldest_available(directory: str | os.PathLike[str], segments: list[SegmentId]) -> int:
    if segments:
        return segments[0].base_offset
    snap = latest_snapshot(directory)
    return snap.offset + 1 if snap is not None else 0


def delete_covered_segments(
    directory: str | os.PathLike[str], snapshot_offset: int, max_retention_bytes: int = DEFAULT_MAX_RETENTION_BYTES
) -> RetentionResult:
    """Apply ``metadata.max.retention.bytes`` to the segments and drop snapshots nobody can use.

    Rules, in this order:

    1. the cover limit is ``min(snapshot_offset, offset of the latest snapshot file)``: nothing is
       deleted unless a complete snapshot holds it;
    2. segments are considered oldest first; one is deleted only if every offset in it (up to the
       next segment's base - 1) is <= the cover limit, it is not the newest segment, and the total
       size of segments still exceeds ``max_retention_bytes``; the first segment failing any test
       stops deletion, so the rest stays contiguous. ``max_retention_bytes`` < 0 (-1): unlimited;
    3. snapshots with offset < ``oldest remaining base - 1`` are deleted, except the latest.
    """
    d = Path(directory)
    snapshots = list_snapshots(d)
    if not snapshots:
        return RetentionResult((), ())
    latest = snapshots[-1]
    covered = min(snapshot_offset, latest.offset)
    segments = list_segments(d)
    sizes = [seg.path.stat().st_size for seg in segments]
    total = sum(sizes)
    deleted_segments: list[Path] = []
    first_kept = 0
    if max_retention_bytes >= 0:
        for i in range(len(segments) - 1):
            if total <= max_retention_bytes or segments[i + 1].base_offset - 1 > covered:
                break
            segments[i].path.unlink()
            deleted_segments.append(segments[i].path)
            total -= sizes[i]
            first_kept = i + 1
            _log.info(
                "metadata_log_segment_deleted",
                file=str(segments[i].path),
                last_offset=segments[i + 1].base_offset - 1,
                snapshot_offset=covered,
            )
    remaining = segments[first_kept:]
    oldest = remaining[0].base_offset if remaining else latest.offset + 1
    deleted_snapshots: list[Path] = []
    for snap in snapshots[:-1]:
        if snap.offset < oldest - 1:
            snap.path.unlink(missing_ok=True)
            deleted_snapshots.append(snap.path)
            _log.info("metadata_snapshot_deleted", file=str(snap.path), oldest_log_offset=oldest)
    if deleted_segments or deleted_snapshots:
        fsync_directory(d)
    return RetentionResult(tuple(deleted_segments), tuple(deleted_snapshots))


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """KRaft's snapshot and retention settings in one place (defaults are Kafka's)."""

    max_record_bytes_between_snapshots: int = DEFAULT_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS
    max_retention_bytes: int = DEFAULT_MAX_RETENTION_BYTES

    def should_snapshot(self, bytes_since_last_snapshot: int) -> bool:
        return should_snapshot(bytes_since_last_snapshot, self.max_record_bytes_between_snapshots)

    def clean(self, directory: str | os.PathLike[str], snapshot_offset: int) -> RetentionResult:
        return delete_covered_segments(directory, snapshot_offset, self.max_retention_bytes)
