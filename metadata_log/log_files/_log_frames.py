"""Frames of the metadata log's files: ``u32 length | u32 crc32c | payload``, big endian (the CRC
frame of `kraftlog.common`, in the byte order these files have always had), the iterator that stops at
the first torn or corrupt frame, and the errors that name where (see `metadata_log.log_files`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import structlog

from kraftlog.common import CRC_FRAME_HEADER_SIZE, crc_frame_header, crc_frame_problem, encode_crc_frame
from kraftlog.metadata_log._records import (
    MetadataRecordError,
)

_log = structlog.get_logger(__name__)


FRAME_HEADER = crc_frame_header("big")


FRAME_HEADER_SIZE = CRC_FRAME_HEADER_SIZE  # 8


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


def encode_frame(payload: bytes) -> bytes:
    """Wrap ``payload`` in a frame: ``length:u32be | crc32c(payload):u32be | payload``."""
    if not payload:
        raise ValueError("a frame payload must not be empty")
    return encode_crc_frame(payload, "big")


class BadFrame(NamedTuple):
    """Where and why frame reading stopped early."""

    position: int
    reason: str


def frame_length_problem(position: int, end: int, length: int) -> str | None:
    """Why a frame at ``position`` of ``end`` bytes whose header says ``length`` is invalid before its
    CRC is even checked, or None."""
    if length == 0:
        return "zero-length frame"
    stop = position + FRAME_HEADER_SIZE + length
    if stop > end:
        return f"torn frame: length {length} reaches {stop - end} bytes past the end"
    return None


def torn_frame_header(position: int, end: int) -> str:
    return f"torn frame header: {end - position} of {FRAME_HEADER_SIZE} bytes"


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
            self._finish(BadFrame(pos, torn_frame_header(pos, end)))
        length, crc = FRAME_HEADER.unpack_from(view, pos)
        problem = frame_length_problem(pos, end, length)
        if problem is not None:
            self._finish(BadFrame(pos, problem))
        stop = pos + FRAME_HEADER_SIZE + length
        with view[pos + FRAME_HEADER_SIZE : stop] as payload:
            problem = crc_frame_problem(payload, crc)
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
            self._finish(BadFrame(pos, torn_frame_header(pos, end)))
        length, crc = FRAME_HEADER.unpack(head)
        problem = frame_length_problem(pos, end, length)
        if problem is not None:
            self._finish(BadFrame(pos, problem))
        payload = self._fh.read(length)
        if len(payload) < length:
            self._finish(BadFrame(pos, "torn frame: the file shrank while being read"))
        problem = crc_frame_problem(payload, crc)
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
