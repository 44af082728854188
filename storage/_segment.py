"""One log segment: ``{base_offset:020d}.log`` with its ``.index`` and ``.timeindex``.

A segment only appends; its batches are stored exactly as the log validated and stamped them. It
knows nothing of replication or retention: the `Log` decides when to roll, truncate or delete it.
"""

from __future__ import annotations

import copy
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import structlog

from kraftlog.common import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from kraftlog.common.records import HEADER_SIZE, LOG_OVERHEAD, RecordBatch
from kraftlog.storage._errors import CorruptRecordError, KafkaStorageError, UnsupportedForMessageFormatError
from kraftlog.storage._fault_hooks import check_space, fsync
from kraftlog.storage._file_region import FileRegion
from kraftlog.storage._index import IndexCorruptError, OffsetIndex, TimeIndex
from kraftlog.storage._txn_index import TXN_INDEX_SUFFIX, TransactionIndex

__all__ = ["LogSegment", "BatchLocation", "segment_file_name", "LOG_SUFFIX", "INDEX_SUFFIX", "TIME_INDEX_SUFFIX"]

_SCAN_CHUNK_BYTES = 8 * 1024 * 1024
_HEADER_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_LAST_DELTA = struct.Struct(">i")
_MAX_TS = struct.Struct(">q")
_MAX_IOV = 1000  # below Linux's IOV_MAX of 1024

_log = structlog.get_logger(__name__)


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


class BatchLocation(NamedTuple):
    """Where a batch lives in its segment file, with the header fields the log needs.

    A named tuple rather than a dataclass: one is built per appended batch on the hot path.
    """

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    partition_leader_epoch: int


class LogSegment:
    """Append-only file of batches plus its sparse indexes.

    Not thread-safe: the owning `Log` serialises mutations.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.log_path = directory / (segment_file_name(base_offset) + suffix)
        try:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
            self.size = os.fstat(self._fd).st_size
        except OSError as err:
            raise KafkaStorageError(f"cannot open segment {self.log_path}: {err}") from err
        self.index_problem: str | None = None  # why the indexes must be rebuilt, found at open
        self._is_view = False  # a `read_only_view`: never rebuilds the indexes it shares
        self.offset_index = self._open_index(
            OffsetIndex, directory / (segment_file_name(base_offset, INDEX_SUFFIX) + suffix), max_index_size
        )
        self.time_index = self._open_index(
            TimeIndex, directory / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + suffix), max_index_size
        )
        self.txn_index = TransactionIndex(directory / (segment_file_name(base_offset, TXN_INDEX_SUFFIX) + suffix))
        if self.index_problem is None and self.size > 0 and (self.offset_index.missing or self.time_index.missing):
            self.index_problem = "index file missing"
        self.created_ms = created_ms
        self._bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = base_offset
        self.rolling_based_timestamp: int | None = None
        self.next_offset_hint: int | None = None  # next offset after the last batch, once known
        self._dirty = False

    def _open_index(self, cls: type[OffsetIndex] | type[TimeIndex], path: Path, max_index_size: int) -> Any:
        """Open an index; a torn file is set aside (renamed ``.corrupt``) and replaced by an empty
        index, and `index_problem` tells the log to rebuild it from the segment."""
        try:
            return cls(path, self.base_offset, max_index_size)
        except IndexCorruptError as err:
            self.index_problem = str(err)
            _log.warning("index_corrupt", index=str(path), error=str(err))
            os.replace(path, path.with_name(path.name + ".corrupt"))
            return cls(path, self.base_offset, max_index_size)

    # ------------------------------------------------------------------ basic I/O

    def read_at(self, position: int, size: int) -> bytes:
        try:
            return os.pread(self._fd, size, position)
        except OSError as err:
            raise KafkaStorageError(f"cannot read {self.log_path}: {err}") from err

    def batches_from(self, position: int = 0, end: int | None = None) -> Iterator[BatchLocation]:
        """Walk batch headers from ``position`` without reading record data.

        Stops at the end of the file or at the first header that cannot be a batch; recovery uses
        `recover` for full validation.
        """
        limit = self.size if end is None else min(end, self.size)
        pos = position
        while pos + HEADER_SIZE <= limit:
            head = self.read_at(pos, HEADER_SIZE)
            if len(head) < HEADER_SIZE:
                return
            base, length, epoch, _magic = _HEADER_PREFIX.unpack_from(head, 0)
            size = length + LOG_OVERHEAD
            if length < HEADER_SIZE - LOG_OVERHEAD or pos + size > limit:
                return
            (delta,) = _LAST_DELTA.unpack_from(head, 23)
            (max_ts,) = _MAX_TS.unpack_from(head, 35)
            yield BatchLocation(pos, size, base, base + delta, max_ts, epoch)
            pos += size

    # ------------------------------------------------------------------ append

    def append(
        self, buffers: list[bytes | bytearray | memoryview], total_bytes: int, batches: list[BatchLocation]
    ) -> None:
        """Append already-validated batches given as consecutive buffers (one vectored write);
        ``batches`` positions are relative to the start of the first buffer.

        The file write comes first; index entries follow, and become durable only at `flush`.
        A failed write truncates the file back, so a partial batch never stays visible.
        """
        start = self.size
        try:
            check_space(self.log_path)
            if len(buffers) == 1:
                written = os.pwrite(self._fd, buffers[0], start)
            else:
                if len(buffers) > _MAX_IOV:
                    buffers = [b"".join(buffers)]
                written = os.pwritev(self._fd, buffers, start)
            if written < total_bytes:
                rest = memoryview(b"".join(buffers))[written:]
                while rest:
                    n = os.pwrite(self._fd, rest, start + written)
                    written += n
                    rest = rest[n:]
        except OSError as err:
            try:
                os.ftruncate(self._fd, start)
            except OSError:
                pass
            raise KafkaStorageError(f"cannot append to {self.log_path}: {err}") from err
        self.size = start + total_bytes
        self._dirty = True
        # `_index_batch` inlined over locals: this runs once per appended batch, and at 16 KiB
        # batches the attribute traffic of a method call per batch cost as much as the CRC check
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = batches[0].max_timestamp
        max_ts, max_ts_offset = self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
        since, interval = self._bytes_since_last_index_entry, self.index_interval_bytes
        last = max_ts_offset
        for position, size, _base, last, batch_max_ts, _epoch in batches:
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, last
            if since > interval:
                self.offset_index.append(last, start + position)
                self.time_index.maybe_append(max_ts, max_ts_offset)
                since = 0
            since += size
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = max_ts, max_ts_offset
        self._bytes_since_last_index_entry = since
        self.next_offset_hint = last + 1

    def _index_batch(self, position: int, b: BatchLocation) -> None:
        """Index one batch at ``position`` (recovery's path; `append` inlines the same rules)."""
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = b.max_timestamp
        if b.max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = b.max_timestamp
            self.offset_of_max_timestamp_so_far = b.last_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(b.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += b.size

    # ------------------------------------------------------------------ lookups

    def find_batch(self, offset: int, start_position: int = 0) -> BatchLocation | None:
        """The first batch at or after ``start_position`` whose last offset is >= ``offset``.

        The index entry it starts from must name the batch found at its position (the entry's
        offset is that batch's last one): an entry that does not (a flipped bit the load's sanity
        check, which reads only the last entry, let through) would make the read start past
        ``offset`` and skip records, so the indexes are rebuilt from the log and the lookup redone.
        """
        idx_off, idx_pos = self.offset_index.lookup(offset)
        check = 0 < idx_pos and start_position <= idx_pos
        for loc in self.batches_from(max(idx_pos, start_position)):
            if check:
                check = False
                if loc.position != idx_pos or loc.last_offset != idx_off:
                    return self._after_false_entry(offset, start_position, idx_off, idx_pos)
            if loc.last_offset >= offset:
                return loc
        if check and idx_pos < self.size:
            return self._after_false_entry(offset, start_position, idx_off, idx_pos)
        return None

    def _after_false_entry(self, offset: int, start_position: int, idx_off: int, idx_pos: int) -> BatchLocation | None:
        """`find_batch` once an index entry proved false: rebuild and look again (a view, which
        shares the indexes outside the log's lock, walks from ``start_position`` instead)."""
        if self._is_view:
            return next((loc for loc in self.batches_from(start_position) if loc.last_offset >= offset), None)
        self.rebuild_indexes(f"entry ({idx_off}, {idx_pos}) names no batch ending there")
        return self.find_batch(offset, start_position)

    def _entry_holds(self, entry_offset: int, position: int) -> bool:
        """Whether the batch at ``position`` ends at ``entry_offset`` (an index entry is true)."""
        loc = next(self.batches_from(position), None)
        return loc is not None and loc.position == position and loc.last_offset == entry_offset

    def rebuild_indexes(self, reason: str) -> None:
        """Rebuild the offset and time indexes from the batch headers (a read found an entry
        that is not true). The log is fsynced before the rebuilt entries are written (data
        before index)."""
        _log.warning("rebuilding_corrupt_index", segment=str(self.log_path), reason=reason)
        self.offset_index.reset()
        self.time_index.reset()
        self._bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.rolling_based_timestamp = None
        for loc in self.batches_from(0):
            self._index_batch(loc.position, loc)
        self.flush()

    def read(
        self, start_offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_message: bool = True
    ) -> tuple[bytes, int, int] | None:
        """Whole batches starting with the one that holds ``start_offset``, up to ``max_bytes``.

        Returns ``(data, first_batch_base_offset, next_offset)``, where ``next_offset`` follows the
        last batch returned. Batches whose last offset is at or past ``max_offset`` (the high
        watermark for consumers) are not returned. With ``min_one_message`` the first batch is
        returned even when it is larger than ``max_bytes``, so a consumer never stalls on a large
        batch. Returns None when this segment has no batch at or after ``start_offset``.
        """
        span = self.read_span(start_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message)
        if span is None:
            return None
        position, size, first_base, next_offset = span
        return (self.read_at(position, size) if size else b""), first_base, next_offset

    def region(self, position: int, size: int) -> FileRegion:
        """``size`` bytes at ``position`` as a `FileRegion` (its own descriptor; for sendfile)."""
        return FileRegion(self._fd, position, size, str(self.log_path))

    def read_span(
        self, start_offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_message: bool = True
    ) -> tuple[int, int, int, int] | None:
        """Where `read` would read: ``(position, size, first_batch_base_offset, next_offset)``,
        ``size`` 0 when nothing is readable; None when no batch is at or after ``start_offset``."""
        first = self.find_batch(start_offset)
        if first is None:
            return None
        if (max_offset is not None and first.last_offset >= max_offset) or (
            first.size > max_bytes and not min_one_message
        ):
            return first.position, 0, first.base_offset, start_offset
        end = first.position + first.size
        next_offset = first.last_offset + 1
        limit = min(first.position + max_bytes, self.size)
        if max_offset is not None and end < limit:
            bound = self.find_batch(max_offset, end)
            if bound is not None:
                limit = min(limit, bound.position)
        if end < limit:
            # Jump to the last indexed batch start within the limit, then walk the few batches
            # after it: the boundaries come from the index, so one pread returns exactly the
            # whole batches and nothing is copied twice.
            idx_off, pos = self.offset_index.lookup_position(limit)
            if pos > end and not self._entry_holds(idx_off, pos):
                if self._is_view:
                    pos = end
                else:
                    self.rebuild_indexes(f"entry ({idx_off}, {pos}) names no batch ending there")
                    idx_off, pos = self.offset_index.lookup_position(limit)
            for loc in self.batches_from(max(pos, end), limit):
                if loc.position > end:
                    end, next_offset = loc.position, loc.base_offset
                end = loc.position + loc.size
                next_offset = loc.last_offset + 1
            if pos > end and pos <= limit:
                head = self.read_at(pos, LOG_OVERHEAD)
                end, next_offset = pos, struct.unpack_from(">q", head, 0)[0]
        return first.position, end - first.position, first.base_offset, next_offset

    def batches_from_timestamp(self, timestamp: int, start_offset: int) -> Iterator[BatchLocation]:
        """Batches (ending at or after ``start_offset``) whose max timestamp is >= ``timestamp``,
        starting from where the time index says the first one may be."""
        _ts, idx_offset = self.time_index.lookup(timestamp)
        _off, pos = self.offset_index.lookup(max(idx_offset, start_offset))
        for loc in self.batches_from(pos):
            if loc.max_timestamp >= timestamp and loc.last_offset >= start_offset:
                yield loc

    def read_batch(self, loc: BatchLocation) -> RecordBatch:
        return RecordBatch(self.read_at(loc.position, loc.size))

    def last_batch(self) -> BatchLocation | None:
        """The last whole batch, found from the last index entry."""
        _off, pos = self.offset_index.lookup_position(self.size)
        last = None
        for loc in self.batches_from(pos):
            last = loc
        if last is None and pos:
            for loc in self.batches_from(0):
                last = loc
        return last

    def read_next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        if self.next_offset_hint is None:
            last = self.last_batch()
            self.next_offset_hint = self.base_offset if last is None else last.last_offset + 1
        return self.next_offset_hint

    @property
    def largest_timestamp(self) -> int:
        """Max batch timestamp, or the file's mtime when no batch carries one (Kafka's rule)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except OSError:
            return 0

    # ------------------------------------------------------------------ load / recovery

    def load_time_state(self) -> None:
        """Restore max timestamp and rolling timestamp after a clean open (no full scan)."""
        ts, off = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = ts, off
        _idx_off, pos = self.offset_index.lookup_position(self.size)
        for loc in self.batches_from(pos):
            if loc.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = loc.max_timestamp
                self.offset_of_max_timestamp_so_far = loc.last_offset
        first = next(self.batches_from(0), None)
        self.rolling_based_timestamp = None if first is None else first.max_timestamp

    def sanity_check(self) -> None:
        """Raise `IndexCorruptError` when an index was torn or missing at open, or disagrees with
        the log."""
        if self.index_problem is not None:
            raise IndexCorruptError(self.index_problem)
        self.offset_index.sanity_check(self.size)
        self.time_index.sanity_check(self.read_next_offset())
        for off, pos in self.offset_index.items()[-1:]:
            head = self.read_at(pos, HEADER_SIZE)
            if len(head) < HEADER_SIZE:
                raise IndexCorruptError(f"index {self.offset_index.path} points past {self.log_path}")
            base, length, _epoch, _magic = _HEADER_PREFIX.unpack_from(head, 0)
            (delta,) = _LAST_DELTA.unpack_from(head, 23)
            if base + delta != off:
                raise IndexCorruptError(
                    f"index {self.offset_index.path}: entry for offset {off} points at a batch ending at {base + delta}"
                )
        self._check_last_time_entry()

    def _check_last_time_entry(self) -> None:
        """The last time-index entry is ``(max timestamp so far, last offset of the batch that
        carried it)``: that batch must exist with that max timestamp. Found from the (already
        checked) offset index, so it costs a few header reads; a negative timestamp (no batch had
        one yet) belongs to the segment's base offset."""
        if not self.time_index.entries:
            return
        ts, off = self.time_index.last_entry
        if ts < 0:
            ok = off == self.base_offset
        else:
            loc = self.find_batch(off)
            ok = loc is not None and loc.last_offset == off and loc.max_timestamp == ts
        if not ok:
            raise IndexCorruptError(
                f"time index {self.time_index.path}: last entry ({ts}, {off}) matches no batch of {self.log_path}"
            )

    def recover(self, max_batch_bytes: int, on_batch: Callable[[BatchLocation], None] | None = None) -> int:
        """Validate every batch (size, magic, CRC), rebuild both indexes, and truncate the file at
        the first invalid batch. Returns the number of bytes truncated.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.index_problem = None
        self._bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.rolling_based_timestamp = None
        self.next_offset_hint = None
        prev_last = self.base_offset - 1
        file_size = self.size
        buf = b""
        buf_start = 0
        pos = 0
        while pos + LOG_OVERHEAD <= file_size:
            if pos + LOG_OVERHEAD > buf_start + len(buf):
                buf, buf_start = self.read_at(pos, min(_SCAN_CHUNK_BYTES, file_size - pos)), pos
            base, length = struct.unpack_from(">qi", buf, pos - buf_start)
            size = length + LOG_OVERHEAD
            if (
                length < HEADER_SIZE - LOG_OVERHEAD
                or size > max_batch_bytes
                or pos + size > file_size
                or base <= prev_last
            ):
                _log.warning(
                    "segment_recovery_invalid_batch",
                    segment=str(self.log_path),
                    position=pos,
                    base_offset=base,
                    batch_bytes=size,
                )
                break
            if pos + size > buf_start + len(buf):
                buf, buf_start = self.read_at(pos, max(size, min(_SCAN_CHUNK_BYTES, file_size - pos))), pos
            rel = pos - buf_start
            batch = RecordBatch(memoryview(buf)[rel : rel + size])
            try:
                batch.ensure_valid()
            except (CorruptRecordError, UnsupportedForMessageFormatError) as err:
                _log.warning("segment_recovery_invalid_batch", segment=str(self.log_path), position=pos, error=str(err))
                break
            loc = BatchLocation(pos, size, base, batch.last_offset, batch.max_timestamp, batch.partition_leader_epoch)
            if loc.last_offset < base:
                break
            self._index_batch(pos, loc)
            if on_batch is not None:
                on_batch(loc)
            prev_last = loc.last_offset
            self.next_offset_hint = loc.last_offset + 1
            pos += size
        valid_end = pos
        truncated = file_size - valid_end
        if truncated:
            self._truncate_file(valid_end)
        if self.next_offset_hint is None:
            self.next_offset_hint = self.base_offset
        self.flush()
        return truncated

    # ------------------------------------------------------------------ truncate / roll / flush

    def _truncate_file(self, size: int) -> None:
        try:
            os.ftruncate(self._fd, size)
        except OSError as err:
            raise KafkaStorageError(f"cannot truncate {self.log_path}: {err}") from err
        self.size = size
        self._dirty = True

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        loc = self.find_batch(offset)
        if loc is None:
            return 0
        removed = self.size - loc.position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self._truncate_file(loc.position)
        self.next_offset_hint = None
        self.load_time_state()
        _idx_off, pos = self.offset_index.lookup_position(self.size)
        self._bytes_since_last_index_entry = self.size - pos if self.offset_index.entries else self.size
        return removed

    def flush(self) -> None:
        """fsync the log, then write and fsync the indexes (log first: an index never points past
        durable data)."""
        try:
            check_space(self.log_path)
            if self._dirty:
                fsync(self._fd)
                self._dirty = False
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()
        except OSError as err:
            raise KafkaStorageError(f"cannot flush {self.log_path}: {err}") from err

    def on_become_inactive(self) -> None:
        """Called at roll: the segment will not grow again."""
        self.flush()

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.offset_index.flush()
                self.time_index.flush()
            finally:
                os.close(self._fd)
                self._fd = -1

    def close_without_flush(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close_without_flush()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def read_only_view(self) -> LogSegment:
        """This segment as a reader outside the log's lock sees it (the cleaner threads): the same
        file through a descriptor of its own and the size of this moment. A concurrent deletion or
        truncation then cannot make the view read a closed (or reused) descriptor; what it reads
        may be stale, and the reader must check that the log did not change before using it.
        Close it with `close_without_flush`; never append through it."""
        view = copy.copy(self)
        view._is_view = True
        try:
            view._fd = os.dup(self._fd)
        except OSError as err:
            raise KafkaStorageError(f"cannot open {self.log_path} for reading: {err}") from err
        return view

    def rename_for_deletion(self, suffix: str) -> None:
        """Rename the log and index files to ``<name><suffix>`` without flushing anything: the
        log takes a segment out of its list and renames it under its lock (fast), and `delete`
        removes the files later, outside the lock (unlinking a large file is slow). A crash in
        between leaves the renamed files, which the next load removes."""
        new_log = self.log_path.with_name(self.log_path.name + suffix)
        try:
            os.replace(self.log_path, new_log)
        except FileNotFoundError:
            pass
        self.log_path = new_log
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.rename(index.path.with_name(index.path.name + suffix))

    def rename_all(self, suffix_from: str, suffix_to: str) -> None:
        """Rename the log and both indexes (e.g. ``.cleaned`` -> ``.swap`` -> ``""``)."""

        def _swap(p: Path) -> Path:
            name = p.name[: -len(suffix_from)] if suffix_from and p.name.endswith(suffix_from) else p.name
            return p.with_name(name + suffix_to)

        new_log = _swap(self.log_path)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self.offset_index.flush()
        self.time_index.flush()
        self.offset_index.rename(_swap(self.offset_index.path))
        self.time_index.rename(_swap(self.time_index.path))
        self.txn_index.flush()
        self.txn_index.rename(_swap(self.txn_index.path))

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
