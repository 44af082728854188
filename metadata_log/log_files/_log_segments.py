"""Reading and writing the metadata log's segments: `read_segment`, `read_log_dir` and the one
`MetadataLogWriter` a controller appends with (see `metadata_log.log_files` for the rules).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import msgpack

from kraftlog.common import fsync_directory
from kraftlog.metadata_log._records import (
    LogEntry,
    MetadataRecordError,
    decode_entry,
    encode_entry,
)
from kraftlog.metadata_log.log_files._log_frames import (
    FRAME_HEADER_SIZE,
    BadFrame,
    MetadataLogCorruptError,
    MetadataLogGapError,
    _FileFrames,
    _log,
    encode_frame,
)
from kraftlog.metadata_log.log_files._log_names import (
    latest_snapshot,
    list_segments,
    parse_segment_file_name,
    remove_partial_snapshots,
    segment_file_name,
)
from kraftlog.metadata_log.log_files._log_retention import _oldest_available

#: Mode of segment files: owner read/write only, as they may hold SCRAM credentials
#: (``UserScramCredentialRecord``). Snapshot files get the same mode (`metadata_log.log_files._snapshots`).
SEGMENT_FILE_MODE = 0o600


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
            end: _SegmentEnd = stop.value
            return end
        if entry.offset >= from_offset:
            yield entry


def _payload_offset(path: Path, position: int, payload: bytes) -> int:
    """The ``offset`` of an entry payload without decoding its record, so the writer can open a log
    that holds record types this version does not know."""
    try:
        d = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as err:  # msgpack raises several unrelated types
        raise MetadataLogCorruptError(f"{path} position {position}: undecodable entry: {err}") from err
    offset = d.get("offset") if isinstance(d, dict) else None
    if not isinstance(offset, int):
        raise MetadataLogCorruptError(f"{path} position {position}: entry without an integer offset")
    return offset


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
        if os.fstat(self._fd).st_mode & 0o777 != SEGMENT_FILE_MODE:
            # written by an older version (0644): the entries appended from now on may be secrets
            os.fchmod(self._fd, SEGMENT_FILE_MODE)
        if frames.bad_frame is not None and self.fsync:
            os.fsync(self._fd)
        self._active_base = base
        self._active_size = frames.valid_bytes
        self._next_offset = next_offset

    def _create_segment(self, base: int) -> None:
        path = self.directory / segment_file_name(base)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, SEGMENT_FILE_MODE)
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
