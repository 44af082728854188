"""What ``kraftlog dump-log`` shares: its options, and the scanner that walks a ``.log`` segment batch
by batch, tolerating what a damaged file holds (see `cli._dump_log`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import crc32c
import structlog

from kraftlog.common import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from kraftlog.storage import (
    HEADER_SIZE,
    RecordBatch,
    TimestampType,
    iter_batches,
)

_log = structlog.get_logger(__name__)


_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


# How much of a .log file is read at once. Batches larger than this are still handled (see
# `_LogScanner`), so it bounds memory, not what can be dumped. Tests shrink it to cross boundaries.
_CHUNK_BYTES = 4 * 1024 * 1024


_LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32: the bytes batchLength does not count


_MIN_BATCH_LENGTH = HEADER_SIZE - _LOG_OVERHEAD


_MAGIC_V2 = 2


_MAGIC_POS = 16


_ATTRIBUTES_POS = 21


_BATCH_LENGTH = struct.Struct(">i")


_CONTROL_VALUE = struct.Struct(">hi")  # version int16, coordinatorEpoch int32


_CONTROL_KEY = struct.Struct(">hh")  # version int16, type int16


_INT31_MASK = 0x7FFFFFFF


_TIMESTAMP_TYPE_NAMES = {TimestampType.CREATE_TIME: "CreateTime", TimestampType.LOG_APPEND_TIME: "LogAppendTime"}


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """What to print; built from the command line, or directly by other commands (``demo``)."""

    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    max_bytes: int | None = None
    output: str = "table"

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_data_log

    @property
    def json(self) -> bool:
        return self.output == "json"


@dataclass(frozen=True, slots=True)
class _ScannedBatch:
    position: int
    batch: RecordBatch
    # None when the scan was asked not to check CRCs (index verification needs headers only).
    valid: bool | None
    # False when only the header was read (a batch larger than a chunk in a shallow scan).
    has_records: bool


class _LogScanner:
    """Walks the batches of a ``.log`` file in bounded chunks, stopping where valid data ends.

    Whole chunks go through `storage.iter_batches`; the scanner refills at chunk boundaries and,
    when ``iter_batches`` stops early, finds out why: the end of the data, a batch that goes past
    the end of the file (a torn tail), or a length or magic that cannot be a batch (corruption).

    A batch larger than a chunk is read in pieces to check its CRC; its records are loaded whole
    only when asked for (``need_records``), so memory stays bounded by one batch at most.
    """

    def __init__(
        self,
        fh: IO[bytes],
        file_size: int,
        *,
        limit: int | None = None,
        need_records: bool = True,
        check_crc: bool = True,
    ) -> None:
        self._fh = fh
        self.file_size = file_size
        self.end = file_size if limit is None else min(file_size, limit)
        self._need_records = need_records
        self._check_crc = check_crc
        self.valid_end = 0  # position just past the last batch yielded
        self.stop_reason = "end"  # "end" | "max_bytes" | "torn" | "corrupt"
        self.stop_detail = ""

    @property
    def invalid_bytes(self) -> int:
        """Bytes after the last whole batch that are not a batch (0 when stopped by max-bytes)."""
        if self.stop_reason in ("torn", "corrupt"):
            return self.file_size - self.valid_end
        return 0

    def _read(self, position: int, size: int) -> bytes:
        self._fh.seek(position)
        return self._fh.read(max(0, min(size, self.end - position)))

    def _stop(self, reason: str, detail: str) -> None:
        self.stop_reason, self.stop_detail = reason, detail

    def __iter__(self) -> Iterator[_ScannedBatch]:
        chunk = max(_CHUNK_BYTES, HEADER_SIZE)
        buf = b""
        buf_start = 0
        pos = 0
        while True:
            rel = pos - buf_start
            if len(buf) - rel < _LOG_OVERHEAD:
                if buf_start + len(buf) >= self.end or pos >= self.end:
                    self._finish_short_tail(pos)
                    return
                if buf_start == pos and buf:  # a fresh read came back short: the file shrank
                    self._stop("torn", f"the file ended early at position {pos + len(buf)}")
                    return
                buf, buf_start = self._read(pos, chunk), pos
                if not buf:
                    self._stop("torn", f"the file ended early at position {pos}")
                    return
                continue
            for batch_rel, batch in iter_batches(buf, rel):
                position = buf_start + batch_rel
                if batch.magic != _MAGIC_V2:
                    self._stop("corrupt", f"unsupported or invalid magic {batch.magic} at position {position}")
                    return
                valid = batch.is_valid() if self._check_crc else None
                yield _ScannedBatch(position, batch, valid, True)
                pos = position + batch.size_bytes
                self.valid_end = pos
            # iter_batches stopped: fewer than 12 bytes left, a bad length, or a partial batch.
            rel = pos - buf_start
            if len(buf) - rel < _LOG_OVERHEAD:
                continue
            (length,) = _BATCH_LENGTH.unpack_from(buf, rel + 8)
            size = length + _LOG_OVERHEAD
            if length < _MIN_BATCH_LENGTH:
                self._stop("corrupt", f"invalid batch length {length} at position {pos}")
                return
            if pos + size > self.file_size:
                self._stop("torn", f"batch at position {pos} claims {size} bytes, {self.file_size - pos} present")
                return
            if pos + size > self.end:
                self._stop("max_bytes", f"next batch at position {pos} ends past --max-bytes")
                return
            if size <= chunk:
                if buf_start == pos:  # the batch should have fit in a fresh read: the file shrank
                    self._stop("torn", f"the file ended early inside the batch at position {pos}")
                    return
                buf, buf_start = self._read(pos, chunk), pos
                continue
            scanned = self._large_batch(pos, size)
            if scanned is None:
                return
            yield scanned
            pos += size
            self.valid_end = pos
            buf, buf_start = b"", pos

    def _finish_short_tail(self, pos: int) -> None:
        if pos >= self.file_size:
            self._stop("end", "")
        elif pos >= self.end or self.end < self.file_size:
            self._stop("max_bytes", f"stopped at position {pos} by --max-bytes")
        else:
            self._stop("torn", f"{self.file_size - pos} bytes at position {pos} are too few for a batch header")

    def _large_batch(self, pos: int, size: int) -> _ScannedBatch | None:
        header = self._read(pos, HEADER_SIZE)
        if len(header) < HEADER_SIZE:
            self._stop("torn", f"the file ended early inside the batch at position {pos}")
            return None
        if header[_MAGIC_POS] != _MAGIC_V2:
            self._stop("corrupt", f"unsupported or invalid magic {header[_MAGIC_POS]} at position {pos}")
            return None
        if self._need_records:
            batch = RecordBatch(self._read(pos, size))
            valid = batch.is_valid() if self._check_crc else None
            return _ScannedBatch(pos, batch, valid, True)
        batch = RecordBatch(header)
        valid = None
        if self._check_crc:
            crc = crc32c.crc32c(header[_ATTRIBUTES_POS:])
            done = HEADER_SIZE
            while done < size:
                piece = self._read(pos + done, min(_CHUNK_BYTES, size - done))
                if not piece:
                    break
                crc = crc32c.crc32c(piece, crc)
                done += len(piece)
            valid = done == size and crc == batch.crc
        return _ScannedBatch(pos, batch, valid, False)


def _base_offset_from_name(path: Path) -> int | None:
    """The base offset a segment file's name carries (``00000000000000000042.log`` -> 42).

    Index entries store offsets relative to it, so an index cannot be read without it.
    """
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None
