"""A byte range of a segment file, handed out by a read instead of the bytes themselves.

The Kafka listener sends a fetch answer's record batches with ``sendfile`` (zero copy: the kernel
moves page-cache pages to the socket, no Python bytes object is ever made). For that a read returns
where the batches are, not what they are. The region holds its *own* duplicate of the segment's
file descriptor: retention may delete the segment, or a roll close its descriptor, between the read
and the send, and the duplicate keeps the (unlinked) file readable until the region is closed.

Ordering: the region is made under the log's lock, from offsets the segment index gave, so it
covers whole batches that were complete when it was made. Appends after that do not change those
bytes; a truncation (a follower's, never below the high watermark a consumer reads to) may shorten
the file, which `read` and a short ``sendfile`` report.
"""

from __future__ import annotations

import os

from kraftlog.storage._errors import KafkaStorageError

__all__ = ["FileRegion"]


class FileRegion:
    """``size`` bytes at ``position`` of an open file; owns its descriptor until `close`."""

    __slots__ = ("_fd", "position", "size", "path")

    def __init__(self, fd: int, position: int, size: int, path: str) -> None:
        self._fd = os.dup(fd)
        self.position = position
        self.size = size
        self.path = path

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __repr__(self) -> str:
        return f"FileRegion({self.path!r}, position={self.position}, size={self.size})"

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError("the file region is closed")
        return self._fd

    def read(self, offset: int = 0, size: int | None = None) -> bytes:
        """The bytes of the region (the copy path), or ``size`` of them from ``offset`` into it (a
        region sent piece by piece); raises when the file was cut short."""
        if size is None:
            size = self.size - offset
        if offset < 0 or size < 0 or offset + size > self.size:
            raise ValueError(f"bytes {offset}..{offset + size} are outside a region of {self.size}")
        position = self.position + offset
        try:
            data = os.pread(self.fileno(), size, position)
        except OSError as err:
            raise KafkaStorageError(f"cannot read {self.path}: {err}") from err
        if len(data) != size:
            raise KafkaStorageError(
                f"{self.path} ended at {position + len(data)}, before the {size} bytes read at {position}"
            )
        return data

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __del__(self) -> None:  # a region dropped without close (an error path) must not leak its fd
        try:
            self.close()
        except OSError:
            pass
