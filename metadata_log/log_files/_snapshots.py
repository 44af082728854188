"""Metadata snapshots: writing them whole or not at all (``.part``, fsync, rename, fsync the dir) and
reading them back with their header and footer checked (see `metadata_log.log_files`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from kraftlog.common import LOG_SUFFIX, PARTIAL_SUFFIX, SNAPSHOT_SUFFIX, fsync_directory
from kraftlog.metadata_log._records import (
    MetadataRecord,
    MetadataRecordError,
    decode_record,
    encode_record,
)
from kraftlog.metadata_log.log_files._log_frames import MetadataLogCorruptError, _FileFrames, _log, encode_frame
from kraftlog.metadata_log.log_files._log_names import parse_snapshot_file_name, snapshot_file_name
from kraftlog.metadata_log.log_files._log_segments import SegmentReadResult, read_segment

SNAPSHOT_FORMAT_VERSION = 0


_HEADER_KIND = "snapshot_header"


_FOOTER_KIND = "snapshot_footer"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The content of one snapshot file: the image as of log offset ``offset`` (inclusive)."""

    offset: int
    epoch: int
    timestamp_ms: int
    records: tuple[MetadataRecord, ...]


#: Mode of snapshot files: owner read/write only, as they may hold SCRAM credentials.
SNAPSHOT_FILE_MODE = 0o600


def _create_private(path: Path) -> BinaryIO:
    """Open ``path`` for writing from scratch with mode `SNAPSHOT_FILE_MODE` (a leftover file of
    another mode, e.g. a ``.part`` of a crashed older version, is truncated and tightened)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, SNAPSHOT_FILE_MODE)
    try:
        os.fchmod(fd, SNAPSHOT_FILE_MODE)  # also when the umask or an existing file said otherwise
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def _pack(d: dict[str, Any]) -> bytes:
    packed: bytes = msgpack.packb(d, use_bin_type=True)
    return packed


def write_snapshot(
    directory: str | os.PathLike[str], offset: int, epoch: int, timestamp_ms: int, records: Iterable[MetadataRecord]
) -> Path:
    """Write ``{offset:020d}-{epoch:010d}.checkpoint`` atomically and durably; return its path.

    Order: write ``.checkpoint.part`` (replacing any leftover), fsync it, rename it to the final
    name, fsync the directory. ``offset`` is the last log offset the records contain. The file is
    mode 0600 (`SNAPSHOT_FILE_MODE`): it may hold SCRAM credentials.
    """
    d = Path(directory)
    final = d / snapshot_file_name(offset, epoch)
    part = final.with_name(final.name + PARTIAL_SUFFIX)
    encoded = [encode_record(r) for r in records]
    header = {
        "kind": _HEADER_KIND,
        "version": SNAPSHOT_FORMAT_VERSION,
        "last_contained_offset": offset,
        "epoch": epoch,
        "timestamp_ms": timestamp_ms,
        "record_count": len(encoded),
    }
    footer = {"kind": _FOOTER_KIND, "record_count": len(encoded)}
    d.mkdir(parents=True, exist_ok=True)
    try:
        with _create_private(part) as fh:
            fh.write(encode_frame(_pack(header)))
            for payload in encoded:
                fh.write(encode_frame(payload))
            fh.write(encode_frame(_pack(footer)))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(part, final)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    fsync_directory(d)
    _log.info(
        "metadata_snapshot_written",
        file=str(final),
        offset=offset,
        epoch=epoch,
        records=len(encoded),
        size_bytes=final.stat().st_size,
    )
    return final


def write_snapshot_payloads(
    path: str | os.PathLike[str], offset: int, epoch: int, timestamp_ms: int, payloads: Sequence[bytes]
) -> Path:
    """Write a snapshot of already-encoded record payloads (`encode_record` output) to ``path``.

    The bytes are exactly what `write_snapshot` writes for the same records and provenance (header,
    one frame per payload, footer); the file may have any name (e.g. a Spark-built snapshot written
    for an operator), is written to ``<path>.part`` (mode 0600, as `write_snapshot`), fsynced and
    renamed, and its directory fsynced.
    """
    final = Path(path)
    part = final.with_name(final.name + PARTIAL_SUFFIX)
    header = {
        "kind": _HEADER_KIND,
        "version": SNAPSHOT_FORMAT_VERSION,
        "last_contained_offset": offset,
        "epoch": epoch,
        "timestamp_ms": timestamp_ms,
        "record_count": len(payloads),
    }
    footer = {"kind": _FOOTER_KIND, "record_count": len(payloads)}
    if offset < 0 or epoch < 0:
        raise ValueError(f"snapshot offset and epoch must be >= 0, got {offset} and {epoch}")
    try:
        with _create_private(part) as fh:
            fh.write(encode_frame(_pack(header)))
            for payload in payloads:
                fh.write(encode_frame(payload))
            fh.write(encode_frame(_pack(footer)))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(part, final)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    fsync_directory(final.parent)
    _log.info(
        "metadata_snapshot_written",
        file=str(final),
        offset=offset,
        epoch=epoch,
        records=len(payloads),
        size_bytes=final.stat().st_size,
    )
    return final


def snapshot_header_map(path: Path, position: int, payload: bytes) -> Any:
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as err:
        raise MetadataLogCorruptError(f"{path} position {position}: undecodable frame: {err}") from err


def _is_footer(d: Any) -> bool:
    return isinstance(d, dict) and d.get("kind") == _FOOTER_KIND and "type" not in d


def read_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read and fully validate one snapshot file (see the module docstring for what is invalid).

    Raises `MetadataLogCorruptError` for a torn, corrupt, truncated or inconsistent file and
    `MetadataRecordError` for a header version or record this version cannot decode.
    """
    p = Path(path)
    with _FileFrames(p) as frames:
        return parse_snapshot_frames(frames, str(p), p)


def parse_snapshot_frames(frames: Any, label: str, name: Path) -> Snapshot:
    """Decode and validate the frames of one snapshot (header, records, footer, counts).

    ``frames`` yields ``(position, payload)`` and has ``bad_frame`` once exhausted (`iter_frames`
    over bytes, or a file's frames); ``label`` names the snapshot in errors and ``name`` is checked
    against the header (its file name). Shared by `read_snapshot` and the Spark job.
    """
    records: list[MetadataRecord] = []
    header: dict[str, Any] | None = None
    footer: dict[str, Any] | None = None
    for position, payload in frames:
        if footer is not None:
            raise MetadataLogCorruptError(f"{label} position {position}: data after the snapshot footer")
        if header is None:
            header = check_snapshot_header(name, snapshot_header_map(name, position, payload))
            continue
        d = snapshot_header_map(name, position, payload)
        if _is_footer(d):
            footer = d
            continue
        try:
            records.append(decode_record(payload))
        except MetadataRecordError as err:
            raise MetadataRecordError(f"{label} position {position}: {err}") from err
    if frames.bad_frame is not None:
        raise MetadataLogCorruptError(
            f"{label}: invalid frame at position {frames.bad_frame.position}: {frames.bad_frame.reason}"
        )
    if header is None:
        raise MetadataLogCorruptError(f"{label}: empty snapshot, no header")
    if footer is None:
        raise MetadataLogCorruptError(f"{label}: snapshot footer missing (incomplete snapshot)")
    if not (footer.get("record_count") == header["record_count"] == len(records)):
        raise MetadataLogCorruptError(
            f"{label}: record count mismatch: header {header['record_count']}, footer "
            f"{footer.get('record_count')}, records {len(records)}"
        )
    return Snapshot(header["last_contained_offset"], header["epoch"], header["timestamp_ms"], tuple(records))


def check_snapshot_header(path: Path, d: Any) -> dict[str, Any]:
    if not isinstance(d, dict) or d.get("kind") != _HEADER_KIND:
        raise MetadataLogCorruptError(f"{path}: first frame is not a snapshot header")
    version = d.get("version")
    if not isinstance(version, int):
        raise MetadataLogCorruptError(f"{path}: snapshot header without a version")
    if version > SNAPSHOT_FORMAT_VERSION:
        raise MetadataRecordError(
            f"{path}: snapshot version {version} is newer than supported version {SNAPSHOT_FORMAT_VERSION}"
        )
    for key in ("last_contained_offset", "epoch", "timestamp_ms", "record_count"):
        if not isinstance(d.get(key), int):
            raise MetadataLogCorruptError(f"{path}: snapshot header field {key!r} missing or not an integer")
    name = path.name[: -len(PARTIAL_SUFFIX)] if path.name.endswith(PARTIAL_SUFFIX) else path.name
    parsed = parse_snapshot_file_name(name)
    if parsed is not None and parsed != (d["last_contained_offset"], d["epoch"]):
        raise MetadataLogCorruptError(
            f"{path}: header says offset {d['last_contained_offset']} epoch {d['epoch']}, "
            f"the file name says offset {parsed[0]} epoch {parsed[1]}"
        )
    return d


def read_metadata_file(path: str | os.PathLike[str]) -> SegmentReadResult | Snapshot:
    """Decode any metadata log file by its name: ``.log`` -> `read_segment`, ``.checkpoint`` (and a
    ``.checkpoint.part`` being inspected) -> `read_snapshot`."""
    p = Path(path)
    if p.name.endswith(LOG_SUFFIX):
        return read_segment(p)
    if p.name.endswith(SNAPSHOT_SUFFIX) or p.name.endswith(SNAPSHOT_SUFFIX + PARTIAL_SUFFIX):
        return read_snapshot(p)
    raise ValueError(f"{p}: not a metadata log file (expected a .log or .checkpoint name)")
