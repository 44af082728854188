"""Reading what the quorum profile checks from disk: every controller's metadata log files and every
node's log file. The verdicts are `deploy.chaos._quorum_check`'s; this module only reads.

The metadata log is read straight from ``<metadata.log.dir>/__cluster_metadata-0/`` (the documented
file format, `metadata_log.log_files`), frame by frame, so the bytes compared between controllers
are exactly the bytes on disk. A node's log is read from the size it had when the run started, so a
``--dir`` cluster's earlier history does not count against this run.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from kraftlog.metadata_log import (
    LogEntry,
    MetadataRecord,
    MetadataRecordError,
    decode_entry,
    latest_snapshot,
    list_segments,
)
from kraftlog.metadata_log.log_files import iter_frames, read_snapshot
from kraftlog.quorum import METADATA_PARTITION_DIR

__all__ = ["ControllerLog", "metadata_dir_of", "read_controller_log", "log_sizes", "scan_node_logs"]

_log = structlog.get_logger("deploy.chaos")


@dataclass
class ControllerLog:
    """One controller's metadata log as on disk: entries after its latest snapshot (decoded, for the
    duplicate check), every entry's bytes by offset (for the divergence check), the snapshot's
    records, and the first read error, if any (the entries before it are kept)."""

    node_id: int
    entries: list[LogEntry] = field(default_factory=list)
    raw: dict[int, bytes] = field(default_factory=dict)
    snapshot_records: list[MetadataRecord] = field(default_factory=list)
    snapshot_offset: int = -1
    error: str | None = None

    @property
    def last_offset(self) -> int:
        return max(self.raw) if self.raw else self.snapshot_offset


def metadata_dir_of(config_path: Path) -> Path:
    """``<metadata.log.dir>/__cluster_metadata-0`` of a node from its TOML config (``metadata.log.dir``,
    else the first of ``log.dirs``, as Kafka)."""
    conf = tomllib.loads(config_path.read_text(encoding="utf-8"))
    base = conf.get("metadata.log.dir")
    if not base:
        dirs = conf.get("log.dirs", "")
        base = (dirs if isinstance(dirs, str) else ",".join(dirs)).split(",")[0].strip()
    return Path(base) / METADATA_PARTITION_DIR


def read_controller_log(node_id: int, directory: Path) -> ControllerLog:
    """Read every segment of ``directory`` in offset order; a torn tail (a crash mid-write, or the
    frame being written right now) ends a segment like it ends the reader's view of it."""
    out = ControllerLog(node_id)
    try:
        snap = latest_snapshot(directory)
        if snap is not None:
            s = read_snapshot(snap.path)
            out.snapshot_records, out.snapshot_offset = list(s.records), s.offset
        for segment in list_segments(directory):
            data = segment.path.read_bytes()
            frames = iter_frames(data)
            for position, payload in frames:
                try:
                    entry = decode_entry(payload)
                except MetadataRecordError as err:
                    raise MetadataRecordError(f"{segment.path} position {position}: {err}") from err
                out.raw[entry.offset] = payload
                if entry.offset > out.snapshot_offset:
                    out.entries.append(entry)
            if frames.bad_frame is not None:
                _log.info(
                    "chaos_metadata_torn_tail",
                    node_id=node_id,
                    file=str(segment.path),
                    position=frames.bad_frame.position,
                    reason=frames.bad_frame.reason,
                )
    except (OSError, MetadataRecordError) as err:
        out.error = f"{type(err).__name__}: {err}"
    return out


def log_sizes(paths: Mapping[int, Path]) -> dict[int, int]:
    """Each node log's current size (0 when it does not exist yet): where this run's lines begin."""
    sizes = {}
    for node, path in paths.items():
        try:
            sizes[node] = path.stat().st_size
        except OSError:
            sizes[node] = 0
    return sizes


def scan_node_logs(paths: Mapping[int, Path], since: Mapping[int, int]) -> dict[int, list[str]]:
    """Every node's log lines written since ``since[node]`` bytes (decoded leniently)."""
    out: dict[int, list[str]] = {}
    for node, path in sorted(paths.items()):
        try:
            with open(path, "rb") as f:
                f.seek(since.get(node, 0))
                data = f.read()
        except OSError as err:
            _log.warning("chaos_node_log_unreadable", node_id=node, path=str(path), error=str(err))
            out[node] = []
            continue
        out[node] = data.decode("utf-8", errors="replace").splitlines()
    return out
