"""Durable and private files: the one fsync-file / fsync-directory / atomic-replace helper of kraftlog,
and the one way to write a file that holds a secret or make a directory only its owner may enter.

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

Private files (keys, passwords, configs holding passwords, cluster state) go through
`write_private_file`: the temporary file is created new (``O_EXCL``, never a leftover with wider
permissions) with mode 0600 set exactly, so the content is never readable by anyone else, not even
between the write and the rename. Directories kraftlog lays out for a cluster go through
`private_directory` (0700: nobody else may list or enter them, whatever the files inside).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = [
    "PRIVATE_DIRECTORY_MODE",
    "PRIVATE_FILE_MODE",
    "atomic_write",
    "fsync_directory",
    "fsync_file",
    "private_directory",
    "write_private_file",
]

#: a file holding a secret: its owner reads and writes it, nobody else sees it
PRIVATE_FILE_MODE = 0o600
#: a directory kraftlog creates for a cluster: only its owner lists or enters it
PRIVATE_DIRECTORY_MODE = 0o700


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


def _write_all(fd: int, data: bytes | bytearray | memoryview, *, fsync: bool) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less than asked), then fsync it
    when ``fsync``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if fsync:
        os.fsync(fd)


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
        _write_all(fd, data, fsync=fsync)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_directory(path.parent)


def write_private_file(path: str | os.PathLike[str], data: bytes | str, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` (str: UTF-8), readable by its owner only (0600, exactly).

    Order: a new temporary file ``.<name>.<random>.tmp`` is created with ``O_EXCL | O_NOFOLLOW``
    (so neither a leftover nor a planted symlink is written through) and ``fchmod`` 0600 (the umask
    may only have narrowed it), written, fsynced, renamed over ``path``, and the directory fsynced
    (both fsyncs only when ``fsync``). A failure removes the temporary file.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, PRIVATE_FILE_MODE)
    try:
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)
            _write_all(fd, payload, fsync=fsync)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_directory(target.parent)


def private_directory(path: str | os.PathLike[str]) -> Path:
    """Make ``path`` (and missing parents) a directory only its owner may enter: 0700.

    The directory itself is set to 0700 even when it existed (a cluster directory made by an older
    kraftlog, or by the user, is closed now); parents created here are 0700 too, parents that
    existed are left as they are (they are not kraftlog's).
    """
    directory = Path(path)
    missing: list[Path] = []
    probe = directory
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for item in reversed(missing):
        try:
            item.mkdir(mode=PRIVATE_DIRECTORY_MODE)
        except FileExistsError:
            pass
        os.chmod(item, PRIVATE_DIRECTORY_MODE)  # mkdir's mode goes through the umask
    if directory.is_symlink() or not directory.is_dir():
        raise NotADirectoryError(f"{directory} is not a directory")
    os.chmod(directory, PRIVATE_DIRECTORY_MODE)
    return directory
