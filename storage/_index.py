"""Sparse offset and time indexes of a log segment, in Kafka's file formats.

``.index``: entries of ``relative_offset:int32, position:int32`` — the last offset of a batch and the
byte position where that batch starts. ``.timeindex``: ``timestamp:int64, relative_offset:int32`` —
the largest timestamp seen so far and the offset of the batch that carried it. Both are sparse: the
segment adds an entry after every ``index.interval.bytes`` of log data.

Entries are kept in memory and written to the file at `flush` (Kafka keeps them in an mmap that is
flushed at the same points). An index therefore never claims more than the flushed log holds; after
a crash the log's recovery rebuilds the index of every segment past the recovery point, and a
sanity check at load rebuilds any index that is torn or disagrees with its log.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

from kraftlog.storage._errors import CorruptRecordError
from kraftlog.storage._fault_hooks import fsync

__all__ = ["OffsetIndex", "TimeIndex", "IndexCorruptError"]

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_INT32_MAX = 2**31 - 1


class IndexCorruptError(CorruptRecordError):
    """An index file is torn or disagrees with its log; the caller rebuilds it."""


class _Index:
    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self._flushed_entries = 0
        self._pending = bytearray()
        # a missing file is legal for a new segment; at load the log rebuilds it for a non-empty one
        self.missing = not path.exists()
        self._load()

    def _load(self) -> None:
        raise NotImplementedError

    def _reset_memory(self) -> None:
        raise NotImplementedError

    @property
    def entries(self) -> int:
        raise NotImplementedError

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries  # type: ignore[attr-defined]

    def _read_file(self) -> bytes:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return b""
        if len(data) % self.entry.size:
            raise IndexCorruptError(f"index {self.path} has {len(data)} bytes, not a multiple of {self.entry.size}")
        return data

    def flush(self) -> None:
        """Write pending entries and fsync: called when the log itself is flushed."""
        if self._pending:
            with open(self.path, "ab") as fh:
                fh.write(self._pending)
                fh.flush()
                fsync(fh.fileno())
            self._pending.clear()
            self._flushed_entries = self.entries
        elif not self.path.exists():
            self.path.touch()
        self.missing = False

    def _rewrite(self, entries_bytes: bytes) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as fh:
            fh.write(entries_bytes)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._pending.clear()
        self._flushed_entries = self.entries

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._pending.clear()

    def rename(self, new_path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = new_path


class OffsetIndex(_Index):
    """Maps an offset to the position of the batch to start scanning from."""

    entry = _OFFSET_ENTRY

    def _load(self) -> None:
        data = self._read_file()
        self._offsets: list[int] = []
        self._positions: list[int] = []
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            self._offsets.append(self.base_offset + rel)
            self._positions.append(pos)
        self._flushed_entries = len(self._offsets)

    def _reset_memory(self) -> None:
        self._offsets = []
        self._positions = []

    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def last_offset(self) -> int:
        return self._offsets[-1] if self._offsets else self.base_offset

    def append(self, offset: int, position: int) -> None:
        """Add ``offset -> position``; entries must increase in both offset and position."""
        if self._offsets and (offset <= self._offsets[-1] or position <= self._positions[-1]):
            return
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise ValueError(f"offset {offset} out of range for index at base {self.base_offset}")
        self._offsets.append(offset)
        self._positions.append(position)
        self._pending += _OFFSET_ENTRY.pack(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry whose offset is <= ``offset``; ``(base_offset, 0)`` when there is none."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self._offsets[i], self._positions[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """Largest entry whose position is <= ``position``."""
        i = bisect.bisect_right(self._positions, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self._offsets[i], self._positions[i]

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for offsets >= ``offset``."""
        i = bisect.bisect_left(self._offsets, offset)
        if i == len(self._offsets):
            return
        del self._offsets[i:]
        del self._positions[i:]
        self._rewrite(
            b"".join(
                _OFFSET_ENTRY.pack(o - self.base_offset, p)
                for o, p in zip(self._offsets, self._positions, strict=False)
            )
        )

    def reset(self) -> None:
        self._reset_memory()
        self._rewrite(b"")
        self.missing = False

    def sanity_check(self, log_size: int) -> None:
        """Raise `IndexCorruptError` if entries are not increasing or point past the log."""
        prev_off, prev_pos = self.base_offset - 1, -1
        for off, pos in zip(self._offsets, self._positions, strict=False):
            if off <= prev_off or pos <= prev_pos or pos >= log_size:
                raise IndexCorruptError(
                    f"offset index {self.path}: entry ({off}, {pos}) breaks ordering or exceeds log size {log_size}"
                )
            prev_off, prev_pos = off, pos

    def items(self) -> list[tuple[int, int]]:
        return list(zip(self._offsets, self._positions, strict=False))


class TimeIndex(_Index):
    """Maps a timestamp to the offset of the first batch that may hold it."""

    entry = _TIME_ENTRY

    def _load(self) -> None:
        data = self._read_file()
        self._timestamps: list[int] = []
        self._offsets: list[int] = []
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            self._timestamps.append(ts)
            self._offsets.append(self.base_offset + rel)
        self._flushed_entries = len(self._offsets)

    def _reset_memory(self) -> None:
        self._timestamps = []
        self._offsets = []

    @property
    def entries(self) -> int:
        return len(self._offsets)

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, ``(-1, base_offset)`` when empty."""
        if not self._offsets:
            return -1, self.base_offset
        return self._timestamps[-1], self._offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry only when the timestamp grows (the index is monotonic in both columns)."""
        if self._timestamps and (timestamp <= self._timestamps[-1] or offset <= self._offsets[-1]):
            return
        rel = offset - self.base_offset
        if rel < 0 or rel > _INT32_MAX:
            raise ValueError(f"offset {offset} out of range for time index at base {self.base_offset}")
        self._timestamps.append(timestamp)
        self._offsets.append(offset)
        self._pending += _TIME_ENTRY.pack(timestamp, rel)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry whose timestamp is <= ``timestamp``; ``(-1, base_offset)`` if none."""
        i = bisect.bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self._offsets[i]

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for offsets >= ``offset``."""
        i = bisect.bisect_left(self._offsets, offset)
        if i == len(self._offsets):
            return
        del self._timestamps[i:]
        del self._offsets[i:]
        self._rewrite(
            b"".join(
                _TIME_ENTRY.pack(t, o - self.base_offset) for t, o in zip(self._timestamps, self._offsets, strict=False)
            )
        )

    def reset(self) -> None:
        self._reset_memory()
        self._rewrite(b"")
        self.missing = False

    def sanity_check(self, next_offset: int) -> None:
        """Raise `IndexCorruptError` if entries are not increasing or name offsets past the log."""
        prev_ts, prev_off = None, self.base_offset - 1
        for ts, off in zip(self._timestamps, self._offsets, strict=False):
            if (prev_ts is not None and ts <= prev_ts) or off <= prev_off or off >= next_offset:
                raise IndexCorruptError(
                    f"time index {self.path}: entry ({ts}, {off}) breaks ordering or exceeds the log end {next_offset}"
                )
            prev_ts, prev_off = ts, off

    def items(self) -> list[tuple[int, int]]:
        return list(zip(self._timestamps, self._offsets, strict=False))
