"""Names of the metadata log's files: segments ``<20-digit base offset>.log`` and snapshots
``<20-digit end offset>-<10-digit epoch>.checkpoint``, and listing them (see `metadata_log.log_files`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

from kraftlog.common import LOG_SUFFIX, SNAPSHOT_SUFFIX
from kraftlog.metadata_log.log_files._log_frames import _log

_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")


_SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


_PARTIAL_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint\.part$")


class SegmentId(NamedTuple):
    base_offset: int
    path: Path


class SnapshotId(NamedTuple):
    """A snapshot file; sorts by (offset, epoch)."""

    offset: int
    epoch: int
    path: Path


def segment_file_name(base_offset: int) -> str:
    if base_offset < 0:
        raise ValueError(f"negative segment base offset {base_offset}")
    return f"{base_offset:020d}{LOG_SUFFIX}"


def snapshot_file_name(offset: int, epoch: int) -> str:
    if offset < 0 or epoch < 0:
        raise ValueError(f"snapshot offset and epoch must be >= 0, got {offset} and {epoch}")
    return f"{offset:020d}-{epoch:010d}{SNAPSHOT_SUFFIX}"


def parse_segment_file_name(name: str) -> int | None:
    """Base offset of a segment file name, or None when ``name`` is not one."""
    m = _SEGMENT_RE.match(name)
    return int(m.group(1)) if m else None


def parse_snapshot_file_name(name: str) -> tuple[int, int] | None:
    """``(offset, epoch)`` of a complete snapshot file name, or None when ``name`` is not one."""
    m = _SNAPSHOT_RE.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def list_segments(directory: str | os.PathLike[str]) -> list[SegmentId]:
    """Segment files of ``directory`` by ascending base offset (empty when it does not exist)."""
    d = Path(directory)
    if not d.is_dir():
        return []
    out = []
    for p in d.iterdir():
        base = parse_segment_file_name(p.name)
        if base is not None:
            out.append(SegmentId(base, p))
    out.sort()
    return out


def list_snapshots(directory: str | os.PathLike[str]) -> list[SnapshotId]:
    """Complete snapshot files of ``directory`` sorted by (offset, epoch); ``.part`` files ignored."""
    d = Path(directory)
    if not d.is_dir():
        return []
    out = []
    for p in d.iterdir():
        parsed = parse_snapshot_file_name(p.name)
        if parsed is not None:
            out.append(SnapshotId(parsed[0], parsed[1], p))
    out.sort()
    return out


def latest_snapshot(directory: str | os.PathLike[str]) -> SnapshotId | None:
    """The snapshot with the highest (offset, epoch), or None."""
    snaps = list_snapshots(directory)
    return snaps[-1] if snaps else None


def remove_partial_snapshots(directory: str | os.PathLike[str]) -> list[Path]:
    """Delete ``.checkpoint.part`` leftovers of snapshot writes interrupted by a crash.

    Call only when no snapshot write can be running in ``directory`` (the writer does, on open).
    """
    d = Path(directory)
    removed: list[Path] = []
    if not d.is_dir():
        return removed
    for p in d.iterdir():
        if _PARTIAL_RE.match(p.name):
            p.unlink(missing_ok=True)
            removed.append(p)
            _log.info("metadata_snapshot_partial_removed", file=str(p))
    return removed
