"""On-disk format of the metadata log: segment files, snapshot files and their retention.

These files are the documented, stable interface of the metadata log (DESIGN.md §3): brokers fetch
them, operators archive them and the Spark snapshot job reads them without any kraftlog server code.
The format is therefore deliberately small and is fully specified here; changing it requires a new
snapshot ``version`` or a new file suffix, never a silent reinterpretation.

Directory
=========

The controller keeps one directory, ``<metadata.log.dir>/__cluster_metadata-0/``, holding:

* ``{base_offset:020d}.log`` -- log segments (``00000000000000000000.log``, ...);
* ``{offset:020d}-{epoch:010d}.checkpoint`` -- snapshots;
* ``{offset:020d}-{epoch:010d}.checkpoint.part`` -- a snapshot being written; never valid, ignored by
  every reader and removed when a `MetadataLogWriter` opens the directory.

Every other file name is ignored.

Frame
=====

Both file kinds are a plain concatenation of frames, with no file header::

    length  : uint32, big-endian   -- number of payload bytes, >= 1
    crc     : uint32, big-endian   -- CRC-32C (Castagnoli) of the payload bytes only
    payload : `length` bytes

A reader walks frames from position 0. The first frame whose header is incomplete (fewer than 8
bytes left), whose ``length`` is 0 or reaches past the end of the file, or whose CRC does not match,
ends the valid part of the file: its position is the *torn position* and nothing after it is read.
(A length of 0 is rejected because the CRC-32C of no bytes is 0, so a zero-filled tail left by a crash
would otherwise pass as valid frames.) A frame that passes the CRC but whose payload does not decode
is not torn: it is corruption or a newer writer, and readers raise instead of dropping it.

Log segment
===========

Each frame payload of a ``.log`` file is one log entry, a msgpack map (see `_records`)::

    {"offset": int, "epoch": int, "timestamp_ms": int, "record": {"type": int, "version": int, ...}}

Ordering rules:

* offsets are dense: the first entry of ``{B:020d}.log`` has offset ``B`` and each next entry the
  previous offset + 1;
* segments are contiguous: the base offset of a segment is the last offset of the previous segment
  + 1 (an empty segment -- only possible as the newest file -- records the next offset to write);
* any missing offset, between entries or between segments, is an error (`MetadataLogGapError`),
  never silently skipped; a torn tail only ever appears at the end of the newest segment, where the
  writer truncates it on open (a torn non-last segment is reported and shows up as a gap).

The writer rolls to a new segment before a frame would make the active segment exceed
``segment_bytes`` (a single frame larger than that still gets a segment of its own).

Snapshot
========

A snapshot holds the records that rebuild the metadata image as of log offset ``offset`` (the last
log offset it contains; the log continues at ``offset + 1``), written by a leader of ``epoch``. Its
frames are, in this order:

1. a header, msgpack map ``{"kind": "snapshot_header", "version": 0, "last_contained_offset": offset,
   "epoch": epoch, "timestamp_ms": ms, "record_count": n}``;
2. ``n`` record frames, each a bare record map ``{"type": ..., "version": ..., ...}`` (no offset);
3. a footer, msgpack map ``{"kind": "snapshot_footer", "record_count": n}``.

A snapshot without its footer, with a torn or corrupt frame anywhere, with bytes after the footer,
with a record count that disagrees, or whose header disagrees with its file name is invalid and
`read_snapshot` raises. Snapshots are written to ``.checkpoint.part``, fsynced, renamed to
``.checkpoint`` and the directory fsynced, so a complete name always means a complete file.

Retention
=========

A segment may be deleted only when every offset in it is <= the offset of the latest snapshot on disk
and it is not the newest segment; deletion goes oldest first (so the remaining segments stay one
contiguous range) while the segments total more than ``metadata.max.retention.bytes`` (-1: no limit,
nothing deleted). Snapshots older than ``oldest remaining base offset - 1`` cannot be followed by the
log any more and are deleted, except the latest. `oldest_available_offset` tells the server whether
a fetcher must load a snapshot first.

This module imports no other kraftlog package (DESIGN.md §2).
"""

from __future__ import annotations

import os
import re
import struct
import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import crc32c
import msgpack
import structlog

from kraftlog.common import LOG_SUFFIX, PARTIAL_SUFFIX, SNAPSHOT_SUFFIX, fsync_directory
from kraftlog.metadata_log._records import (
    LogEntry,
    MetadataRecord,
    MetadataRecordError,
    decode_entry,
    decode_record,
    encode_entry,
    encode_record,
)

__all__ = [
    "FRAME_HEADER_SIZE",
    "LOG_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "PARTIAL_SUFFIX",
    "SNAPSHOT_FORMAT_VERSION",
    "DEFAULT_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS",
    "DEFAULT_MAX_RETENTION_BYTES",
    "MetadataLogCorruptError",
    "MetadataLogGapError",
    "BadFrame",
    "FrameIterator",
    "iter_frames",
    "encode_frame",
    "SegmentId",
    "SnapshotId",
    "SegmentReadResult",
    "Snapshot",
    "RetentionResult",
    "SnapshotPolicy",
    "MetadataLogWriter",
    "segment_file_name",
    "snapshot_file_name",
    "parse_segment_file_name",
    "parse_snapshot_file_name",
    "list_segments",
    "list_snapshots",
    "latest_snapshot",
    "read_segment",
    "read_log_dir",
    "write_snapshot",
    "write_snapshot_payloads",
    "read_snapshot",
    "read_metadata_file",
    "remove_partial_snapshots",
    "should_snapshot",
    "delete_covered_segments",
    "oldest_available_offset",
]

_log = structlog.get_logger(__name__)

_FRAME_HEADER = struct.Struct(">II")
FRAME_HEADER_SIZE = _FRAME_HEADER.size  # 8
_MAX_UINT32 = 0xFFFFFFFF

SNAPSHOT_FORMAT_VERSION = 0
_HEADER_KIND = "snapshot_header"
_FOOTER_KIND = "snapshot_footer"

DEFAULT_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
DEFAULT_MAX_RETENTION_BYTES = 100 * 1024 * 1024  # metadata.max.retention.bytes

_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_PARTIAL_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint\.part$")


# ------------------------------------------------------------------------------------------ errors


class MetadataLogCorruptError(MetadataRecordError):
    """A metadata log or snapshot file whose content breaks the format although its CRCs may pass:
    overlapping segments, an invalid snapshot, a file that cannot be read back as written.

    Subclasses `MetadataRecordError` so callers that already map it to Kafka's CORRUPT_MESSAGE keep
    working.
    """


class MetadataLogGapError(MetadataLogCorruptError):
    """Offsets are missing: in an append, between entries of a segment, between segments, or before
    the oldest offset still on disk (the reader needs a snapshot first).

    ``expected_offset`` is the offset that should have come next; ``found_offset`` the one that did
    (None when the data simply is not there).
    """

    def __init__(self, message: str, *, expected_offset: int, found_offset: int | None) -> None:
        super().__init__(message)
        self.expected_offset = expected_offset
        self.found_offset = found_offset


# ------------------------------------------------------------------------------------------ frames


def encode_frame(payload: bytes) -> bytes:
    """Wrap ``payload`` in a frame: ``length:u32be | crc32c(payload):u32be | payload``."""
    if not payload:
        raise ValueError("a frame payload must not be empty")
    if len(payload) > _MAX_UINT32:
        raise ValueError(f"frame payload of {len(payload)} bytes does not fit a uint32 length")
    return _FRAME_HEADER.pack(len(payload), crc32c.crc32c(payload)) + payload


class BadFrame(NamedTuple):
    """Where and why frame reading stopped early."""

    position: int
    reason: str


def _frame_problem(position: int, end: int, length: int) -> str | None:
    """Why a frame at ``position`` of ``end`` bytes whose header says ``length`` is invalid before its
    CRC is even checked, or None."""
    if length == 0:
        return "zero-length frame"
    stop = position + FRAME_HEADER_SIZE + length
    if stop > end:
        return f"torn frame: length {length} reaches {stop - end} bytes past the end"
    return None


def _torn_header(position: int, end: int) -> str:
    return f"torn frame header: {end - position} of {FRAME_HEADER_SIZE} bytes"


def _crc_problem(payload: bytes | memoryview, stored: int) -> str | None:
    actual = crc32c.crc32c(payload)
    if actual != stored:
        return f"crc mismatch: stored {stored:#010x}, computed {actual:#010x}"
    return None


class FrameIterator:
    """Iterates ``(position, payload)`` over the frames of a buffer; see `iter_frames`.

    After exhaustion, ``bad_frame`` is None when the buffer ended exactly at a frame boundary, else
    the position and reason of the first invalid frame; ``valid_bytes`` is the length of the valid
    prefix (the position after the last good frame) at any time.
    """

    def __init__(self, data: bytes | bytearray | memoryview, start: int = 0) -> None:
        self._view = memoryview(data)
        if self._view.ndim != 1 or self._view.itemsize != 1:
            self._view = self._view.cast("B")
        if not 0 <= start <= len(self._view):
            raise ValueError(f"start position {start} outside a buffer of {len(self._view)} bytes")
        self.valid_bytes = start
        self.bad_frame: BadFrame | None = None
        self.done = False

    def __iter__(self) -> FrameIterator:
        return self

    def __next__(self) -> tuple[int, bytes]:
        if self.done:
            raise StopIteration
        view = self._view
        pos = self.valid_bytes
        end = len(view)
        if pos == end:
            self._finish(None)
        if end - pos < FRAME_HEADER_SIZE:
            self._finish(BadFrame(pos, _torn_header(pos, end)))
        length, crc = _FRAME_HEADER.unpack_from(view, pos)
        problem = _frame_problem(pos, end, length)
        if problem is not None:
            self._finish(BadFrame(pos, problem))
        stop = pos + FRAME_HEADER_SIZE + length
        with view[pos + FRAME_HEADER_SIZE : stop] as payload:
            problem = _crc_problem(payload, crc)
            data = payload.tobytes() if problem is None else b""
        if problem is not None:
            self._finish(BadFrame(pos, problem))
        self.valid_bytes = stop
        return pos, data

    def _finish(self, bad: BadFrame | None) -> None:
        self.bad_frame = bad
        self.release()
        raise StopIteration

    def release(self) -> None:
        """Stop iterating and drop the reference to the buffer."""
        self._view.release()
        self.done = True


def iter_frames(data: bytes | bytearray | memoryview, start: int = 0) -> FrameIterator:
    """Low-level frame walk for tools and the Spark job: no decoding, only framing and CRC.

    Yields ``(position, payload_bytes)`` in file order and stops at the first bad frame; inspect the
    returned iterator's ``bad_frame`` (position and reason, or None) and ``valid_bytes`` afterwards::

        frames = iter_frames(data)
        for position, payload in frames:
            ...
        if frames.bad_frame is not None:
            report(frames.bad_frame.position, frames.bad_frame.reason)
    """
    return FrameIterator(data, start)


class _FileFrames:
    """`FrameIterator` over a file, read sequentially so gigabyte segments are never held in memory.

    Plain reads rather than a memory map: a file shrunk by a truncation while it is being read must
    end the walk as a torn tail, not kill the process with SIGBUS. The walk covers the size the file
    had when opened; a length is checked against that size before any payload is read, so a garbage
    length never makes it allocate.
    """

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "rb")
        self.size = os.fstat(self._fh.fileno()).st_size
        self.valid_bytes = 0
        self.bad_frame: BadFrame | None = None
        self.done = False

    def __iter__(self) -> _FileFrames:
        return self

    def __next__(self) -> tuple[int, bytes]:
        if self.done:
            raise StopIteration
        pos, end = self.valid_bytes, self.size
        if pos == end:
            self._finish(None)
        head = self._fh.read(FRAME_HEADER_SIZE) if end - pos >= FRAME_HEADER_SIZE else b""
        if len(head) < FRAME_HEADER_SIZE:
            self._finish(BadFrame(pos, _torn_header(pos, end)))
        length, crc = _FRAME_HEADER.unpack(head)
        problem = _frame_problem(pos, end, length)
        if problem is not None:
            self._finish(BadFrame(pos, problem))
        payload = self._fh.read(length)
        if len(payload) < length:
            self._finish(BadFrame(pos, "torn frame: the file shrank while being read"))
        problem = _crc_problem(payload, crc)
        if problem is not None:
            self._finish(BadFrame(pos, problem))
        self.valid_bytes = pos + FRAME_HEADER_SIZE + length
        return pos, payload

    def _finish(self, bad: BadFrame | None) -> None:
        self.bad_frame = bad
        self.release()
        raise StopIteration

    def release(self) -> None:
        self._fh.close()
        self.done = True

    def __enter__(self) -> _FileFrames:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# ------------------------------------------------------------------------------------------ names


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


# ------------------------------------------------------------------------------------------ segments


@dataclass(frozen=True, slots=True)
class SegmentReadResult:
    """Everything a tool needs to know about one segment file.

    ``entries`` are the decoded entries of the valid prefix (``valid_bytes`` long); ``torn_at`` is
    the position of the first bad frame (None when the file ends on a frame boundary) and ``error``
    its reason.
    """

    path: Path
    base_offset: int | None
    entries: tuple[LogEntry, ...]
    valid_bytes: int
    size_bytes: int
    torn_at: int | None
    error: str | None

    @property
    def last_offset(self) -> int | None:
        return self.entries[-1].offset if self.entries else None

    @property
    def next_offset(self) -> int | None:
        """Offset the entry after this segment must have (None for an unnamed, empty file)."""
        if self.entries:
            return self.entries[-1].offset + 1
        return self.base_offset


class _SegmentEnd(NamedTuple):
    valid_bytes: int
    size_bytes: int
    bad_frame: BadFrame | None
    next_offset: int | None


def _entry_at(path: Path, position: int, payload: bytes) -> LogEntry:
    try:
        return decode_entry(payload)
    except MetadataRecordError as err:
        raise MetadataRecordError(f"{path} position {position}: {err}") from err


def _iter_segment(path: Path, base_offset: int | None) -> Generator[tuple[int, LogEntry], None, _SegmentEnd]:
    """Yield ``(position, entry)`` of one segment, checking density; return how the file ended.

    ``base_offset`` None (a file not named like a segment) takes the first entry's offset as base.
    """
    expected = base_offset
    with _FileFrames(path) as frames:
        for pos, payload in frames:
            entry = _entry_at(path, pos, payload)
            if expected is not None and entry.offset != expected:
                raise MetadataLogGapError(
                    f"{path} position {pos}: offset {entry.offset} where {expected} was expected",
                    expected_offset=expected,
                    found_offset=entry.offset,
                )
            expected = entry.offset + 1
            yield pos, entry
    return _SegmentEnd(frames.valid_bytes, frames.size, frames.bad_frame, expected)


def read_segment(path: str | os.PathLike[str]) -> SegmentReadResult:
    """Read one segment file completely; a torn tail or bad CRC is reported, not raised.

    Raises `MetadataLogGapError` when CRC-valid entries are not dense from the base offset in the
    file name, and `MetadataRecordError` when a CRC-valid payload does not decode.
    """
    p = Path(path)
    base = parse_segment_file_name(p.name)
    gen = _iter_segment(p, base)
    entries: list[LogEntry] = []
    while True:
        try:
            entries.append(next(gen)[1])
        except StopIteration as stop:
            end: _SegmentEnd = stop.value
            break
    bad = end.bad_frame
    return SegmentReadResult(
        p,
        base,
        tuple(entries),
        end.valid_bytes,
        end.size_bytes,
        bad.position if bad else None,
        bad.reason if bad else None,
    )


def read_log_dir(
    directory: str | os.PathLike[str], from_offset: int = 0, *, on_torn: Callable[[Path, BadFrame], None] | None = None
) -> Iterator[LogEntry]:
    """All entries with offset >= ``from_offset``, over every segment in offset order.

    A torn tail is logged (file and position), passed to ``on_torn`` and ends that segment; the
    newest segment's torn tail ends the iteration. Missing offsets -- ``from_offset`` below the
    oldest offset on disk (load a snapshot first), a segment that does not start where the previous
    one ended, or a segment deleted by retention while iterating -- raise `MetadataLogGapError`.
    Offsets past the end yield nothing. Reading a live log, the newest segment may end in a frame
    the writer is still writing; it is reported like a torn tail.
    """
    d = Path(directory)
    segments = list_segments(d)
    oldest = _oldest_available(d, segments)
    if from_offset < oldest:
        raise MetadataLogGapError(
            f"{d}: offsets from {from_offset} to {oldest - 1} are no longer in the log; read a snapshot first",
            expected_offset=from_offset,
            found_offset=oldest,
        )
    if not segments:
        return
    start = 0
    for i, seg in enumerate(segments):
        if seg.base_offset <= from_offset:
            start = i
    expected = segments[start].base_offset
    for seg in segments[start:]:
        if seg.base_offset != expected:
            if seg.base_offset > expected:
                raise MetadataLogGapError(
                    f"{seg.path}: segment starts at {seg.base_offset}, offsets {expected} to "
                    f"{seg.base_offset - 1} are missing",
                    expected_offset=expected,
                    found_offset=seg.base_offset,
                )
            raise MetadataLogCorruptError(
                f"{seg.path}: segment starts at {seg.base_offset}, overlapping the previous segment "
                f"which ends at {expected - 1}"
            )
        try:
            gen = _iter_segment(seg.path, seg.base_offset)
            end = yield from _skip_below(gen, from_offset)
        except FileNotFoundError as err:
            raise MetadataLogGapError(
                f"{seg.path} was deleted while reading (retention); read a snapshot first",
                expected_offset=expected,
                found_offset=None,
            ) from err
        if end.bad_frame is not None:
            _log.warning(
                "metadata_log_torn_tail",
                file=str(seg.path),
                position=end.bad_frame.position,
                reason=end.bad_frame.reason,
                size_bytes=end.size_bytes,
            )
            if on_torn is not None:
                on_torn(seg.path, end.bad_frame)
        assert end.next_offset is not None
        expected = end.next_offset


def _skip_below(
    gen: Generator[tuple[int, LogEntry], None, _SegmentEnd], from_offset: int
) -> Generator[LogEntry, None, _SegmentEnd]:
    while True:
        try:
            _pos, entry = next(gen)
        except StopIteration as stop:
            return stop.value
        if entry.offset >= from_offset:
            yield entry


def _payload_offset(path: Path, position: int, payload: bytes) -> int:
    """The ``offset`` of an entry payload without decoding its record, so the writer can open a log
    that holds record types this version does not know."""
    try:
        d = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as err:  # msgpack raises several unrelated types
        raise MetadataLogCorruptError(f"{path} position {position}: undecodable entry: {err}") from err
    if not isinstance(d, dict) or not isinstance(d.get("offset"), int):
        raise MetadataLogCorruptError(f"{path} position {position}: entry without an integer offset")
    return d["offset"]


class MetadataLogWriter:
    """Appends committed entries to the segments of one directory; the only writer of its files.

    Ordering rules: entries are written in offset order, densely; an entry at or below `last_offset`
    is skipped (pysyncobj replays its journal on every restart and re-applies old entries, so append
    is idempotent by offset); an entry beyond `next_offset` raises `MetadataLogGapError` and nothing
    of that call is written. With ``fsync`` the data (and the directory entry of a new segment) is on
    disk before `append` returns, so the caller may acknowledge it.

    On open, any ``.checkpoint.part`` leftovers are removed and the newest segment is scanned; a torn
    or corrupt tail is truncated (logged with file and position): with ``fsync`` a torn write was
    never acknowledged, and in every case the replayed Raft journal writes the lost entries again.
    CRC-valid frames that break density are never truncated: opening raises instead. An empty
    directory starts at the latest snapshot's offset + 1 (or 0),
    recorded at once as an empty segment file so that the next offset survives a restart.

    Methods are serialised by a lock; readers may read the files concurrently (they stop at the
    current end, and a partly written frame looks like a torn tail to them).
    """

    def __init__(self, directory: str | os.PathLike[str], *, segment_bytes: int, fsync: bool) -> None:
        if segment_bytes <= FRAME_HEADER_SIZE:
            raise ValueError(f"segment_bytes must exceed {FRAME_HEADER_SIZE}, got {segment_bytes}")
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self._lock = threading.Lock()
        self._fd: int | None = None
        self.directory.mkdir(parents=True, exist_ok=True)
        remove_partial_snapshots(self.directory)
        segments = list_segments(self.directory)
        if segments:
            self._open_segment(segments[-1].base_offset)
        else:
            snap = latest_snapshot(self.directory)
            self._create_segment(snap.offset + 1 if snap is not None else 0)
        _log.info(
            "metadata_log_opened",
            directory=str(self.directory),
            segments=max(len(segments), 1),
            next_offset=self._next_offset,
        )

    # ----------------------------------------------------------------- state

    @property
    def last_offset(self) -> int:
        """Offset of the last entry on disk (``next_offset - 1``; -1 for an empty log)."""
        return self._next_offset - 1

    @property
    def next_offset(self) -> int:
        """Offset the next appended entry must have."""
        return self._next_offset

    @property
    def active_segment(self) -> Path:
        return self.directory / segment_file_name(self._active_base)

    @property
    def closed(self) -> bool:
        return self._fd is None

    # ----------------------------------------------------------------- open / create

    def _open_segment(self, base: int) -> None:
        path = self.directory / segment_file_name(base)
        next_offset = base
        with _FileFrames(path) as frames:
            size = frames.size
            for position, payload in frames:
                offset = _payload_offset(path, position, payload)
                if offset != next_offset:
                    raise MetadataLogGapError(
                        f"{path} position {position}: offset {offset} where {next_offset} was expected",
                        expected_offset=next_offset,
                        found_offset=offset,
                    )
                next_offset += 1
        if frames.bad_frame is not None:
            _log.warning(
                "metadata_log_tail_truncated",
                file=str(path),
                position=frames.valid_bytes,
                reason=frames.bad_frame.reason,
                dropped_bytes=size - frames.valid_bytes,
                next_offset=next_offset,
            )
            os.truncate(path, frames.valid_bytes)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        if frames.bad_frame is not None and self.fsync:
            os.fsync(self._fd)
        self._active_base = base
        self._active_size = frames.valid_bytes
        self._next_offset = next_offset

    def _create_segment(self, base: int) -> None:
        path = self.directory / segment_file_name(base)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError as err:
            raise MetadataLogCorruptError(f"{path} already exists past the end of the log") from err
        if self.fsync:
            fsync_directory(self.directory)
        self._fd = fd
        self._active_base = base
        self._active_size = 0
        self._next_offset = base

    def _check_open(self) -> int:
        if self._fd is None:
            raise ValueError(f"metadata log writer for {self.directory} is closed")
        return self._fd

    # ----------------------------------------------------------------- append

    def append(self, entries: Sequence[LogEntry]) -> int:
        """Write the entries not yet on disk; return how many were written.

        Validation comes first (skip entries at or below `last_offset`, then require exact density),
        so an invalid call writes nothing. A write error truncates the active segment back to its
        previous size and raises; entries already flushed to an earlier segment of the same call
        stay (they are valid), and retrying the call skips them.
        """
        with self._lock:
            self._check_open()
            expected = self._next_offset
            frames: list[bytes] = []
            for entry in entries:
                if entry.offset < self._next_offset:
                    continue
                if entry.offset != expected:
                    if entry.offset > expected:
                        raise MetadataLogGapError(
                            f"append to {self.directory}: offset {entry.offset} where {expected} was expected",
                            expected_offset=expected,
                            found_offset=entry.offset,
                        )
                    raise ValueError(
                        f"append to {self.directory}: offset {entry.offset} out of order (expected {expected})"
                    )
                frames.append(encode_frame(encode_entry(entry)))
                expected += 1
            if not frames:
                return 0
            pending: list[bytes] = []
            pending_bytes = 0
            for frame in frames:
                used = self._active_size + pending_bytes
                if used > 0 and used + len(frame) > self.segment_bytes:
                    self._write(pending, pending_bytes)
                    pending, pending_bytes = [], 0
                    self._roll()
                pending.append(frame)
                pending_bytes += len(frame)
            self._write(pending, pending_bytes)
            if self.fsync:
                os.fsync(self._check_open())
            return len(frames)

    def _write(self, frames: list[bytes], total: int) -> None:
        if not frames:
            return
        fd = self._check_open()
        data = memoryview(b"".join(frames))
        done = 0
        try:
            while done < total:
                done += os.write(fd, data[done:])
        except BaseException:
            try:
                os.ftruncate(fd, self._active_size)
            except OSError:
                _log.exception("metadata_log_truncate_after_failed_write_failed", file=str(self.active_segment))
            raise
        self._active_size += total
        self._next_offset += len(frames)

    def _roll(self) -> None:
        """Close the active segment (fsynced first, so every rolled segment is durable) and start one
        at `next_offset`."""
        fd = self._check_open()
        if self.fsync:
            os.fsync(fd)
        os.close(fd)
        self._fd = None
        previous = self.active_segment
        self._create_segment(self._next_offset)
        _log.info("metadata_log_rolled", previous=str(previous), segment=str(self.active_segment))

    # ----------------------------------------------------------------- truncation

    def truncate_after(self, offset: int) -> None:
        """Remove every entry with offset > ``offset`` (tests and recovery; committed entries are
        never truncated in normal operation).

        Newer segments are deleted newest first, so a crash midway leaves a shorter but valid log.
        Truncating below the oldest segment leaves an empty segment at ``offset + 1``.
        """
        with self._lock:
            self._check_open()
            if offset >= self.last_offset:
                return
            if offset < -1:
                raise ValueError(f"cannot truncate after offset {offset}")
            os.close(self._fd)  # type: ignore[arg-type]
            self._fd = None
            segments = list_segments(self.directory)
            for seg in reversed(segments):
                if seg.base_offset > offset:
                    seg.path.unlink()
            remaining = [s for s in segments if s.base_offset <= offset]
            if not remaining:
                self._create_segment(offset + 1)
            else:
                last = remaining[-1]
                cut = self._cut_position(last.path, offset)
                os.truncate(last.path, cut)
                self._open_segment(last.base_offset)
                if self.fsync:
                    os.fsync(self._check_open())
                    fsync_directory(self.directory)
            _log.warning(
                "metadata_log_truncated",
                directory=str(self.directory),
                after_offset=offset,
                next_offset=self._next_offset,
            )

    @staticmethod
    def _cut_position(path: Path, offset: int) -> int:
        with _FileFrames(path) as frames:
            for position, payload in frames:
                if _payload_offset(path, position, payload) > offset:
                    return position
        return frames.valid_bytes

    def truncate_fully_and_start_at(self, next_offset: int) -> None:
        """Delete every segment and continue at ``next_offset`` (installing a snapshot from the
        leader that is ahead of this log). Segments are deleted newest first; the new empty segment
        is created last, so a crash midway leaves a valid prefix and the caller repeats the install.
        """
        with self._lock:
            self._check_open()
            if next_offset < 0:
                raise ValueError(f"negative next offset {next_offset}")
            os.close(self._fd)  # type: ignore[arg-type]
            self._fd = None
            for seg in reversed(list_segments(self.directory)):
                seg.path.unlink()
            self._create_segment(next_offset)
            _log.warning("metadata_log_reset", directory=str(self.directory), next_offset=next_offset)

    # ----------------------------------------------------------------- close

    def close(self) -> None:
        """Close the active segment (fsynced first when ``fsync`` is on). Idempotent."""
        with self._lock:
            if self._fd is None:
                return
            try:
                if self.fsync:
                    os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> MetadataLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------------------ snapshots


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The content of one snapshot file: the image as of log offset ``offset`` (inclusive)."""

    offset: int
    epoch: int
    timestamp_ms: int
    records: tuple[MetadataRecord, ...]


def _pack(d: dict[str, Any]) -> bytes:
    return msgpack.packb(d, use_bin_type=True)


def write_snapshot(
    directory: str | os.PathLike[str], offset: int, epoch: int, timestamp_ms: int, records: Iterable[MetadataRecord]
) -> Path:
    """Write ``{offset:020d}-{epoch:010d}.checkpoint`` atomically and durably; return its path.

    Order: write ``.checkpoint.part`` (replacing any leftover), fsync it, rename it to the final
    name, fsync the directory. ``offset`` is the last log offset the records contain.
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
        with open(part, "wb") as fh:
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
    for an operator), is written to ``<path>.part``, fsynced and renamed, and its directory fsynced.
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
        with open(part, "wb") as fh:
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


def _snapshot_map(path: Path, position: int, payload: bytes) -> Any:
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
            header = _check_header(name, _snapshot_map(name, position, payload))
            continue
        d = _snapshot_map(name, position, payload)
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


def _check_header(path: Path, d: Any) -> dict[str, Any]:
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


# ------------------------------------------------------------------------------------------ retention


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
