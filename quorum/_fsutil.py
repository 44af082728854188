"""Small durable-file helpers shared by the Raft journal (`quorum._journal`) and the full-dump
serializer (`quorum._serializer`).

Why a module of its own: both files need the same three primitives, and getting their order right
is the whole point. A file is durable only after ``fsync`` on the file, and a *rename* of it (or its
creation) is durable only after ``fsync`` on the directory that holds it. The order is always:

1. write the new bytes to a temporary file in the same directory,
2. ``fsync`` the temporary file,
3. ``os.replace`` it over the final name (atomic on POSIX),
4. ``fsync`` the directory.

With ``fsync=False`` (``controller.quorum.fsync=false``, throwaway test clusters only) steps 2 and 4
are skipped; the rename stays atomic against a process crash, not against power loss.

Frames: every length-prefixed record of ours is ``u32 length | u32 crc32c(payload) | payload``
(little endian), so a torn or flipped record is detected instead of being decoded.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Final

import crc32c

__all__ = ["FRAME", "fsync_directory", "fsync_file", "atomic_write", "frame", "crc"]

#: ``u32 payload length | u32 crc32c(payload)``, little endian.
FRAME: Final = struct.Struct("<II")


def crc(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum Kafka uses for record batches."""
    return crc32c.crc32c(data) & 0xFFFFFFFF


def frame(payload: bytes) -> bytes:
    """``payload`` preceded by its length and CRC-32C."""
    return FRAME.pack(len(payload), crc(payload)) + payload


def fsync_directory(directory: Path) -> None:
    """Make creations, renames and deletions inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """``fsync`` a file by name (a new descriptor flushes the inode's dirty pages too)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, fsync: bool) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new content.

    Order: write ``<name>.tmp``, fsync it, rename over ``path``, fsync the directory (the two fsyncs
    only when ``fsync``).
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_directory(path.parent)
