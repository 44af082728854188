"""Durable files: the one fsync-file / fsync-directory / atomic-replace helper of kraftlog.

Why one module: the Raft journal, the metadata log, the partition logs' checkpoints, the log
manager and the offline quorum tools all need the same primitives, and getting their order right is
the whole point. A file is durable only after ``fsync`` on the file, and a *creation, rename or
deletion* inside a directory is durable only after ``fsync`` on that directory. Replacing a file is
always, in this order:

1. write the new bytes to a temporary file in the same directory,
2. ``fsync`` the temporary file,
3. ``os.replace`` it over the final name (atomic on POSIX),
4. ``fsync`` the directory.

With ``fsync=False`` (throwaway test clusters only) steps 2 and 4 are skipped; the rename stays
atomic against a process crash, not against power loss. Errors are ``OSError`` as the OS raised
them: each layer wraps them in its own Kafka error (KAFKA_STORAGE_ERROR and the like) at its
boundary.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["atomic_write", "fsync_directory", "fsync_file"]


def fsync_directory(directory: str | os.PathLike[str], *, missing_ok: bool = False) -> None:
    """Make creations, renames and deletions inside ``directory`` durable.

    ``missing_ok``: a directory that no longer exists (deleted concurrently, e.g. a partition being
    removed) is not an error; any other failure is.
    """
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike[str]) -> None:
    """``fsync`` a file by name (a new descriptor flushes the inode's dirty pages too)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    path: Path,
    data: bytes | bytearray | memoryview,
    *,
    fsync: bool = True,
    temp_suffix: str = ".tmp",
    mode: int = 0o600,
) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new content.

    Order: write ``<name><temp_suffix>``, fsync it, rename over ``path``, fsync the directory (the
    two fsyncs only when ``fsync``). A leftover temporary file of an earlier crash is replaced.
    """
    tmp = path.with_name(path.name + temp_suffix)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
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
