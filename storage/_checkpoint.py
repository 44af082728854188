"""Kafka's checkpoint files: a version line, a count line, then one entry per line.

Used for ``recovery-point-offset-checkpoint``, ``replication-offset-checkpoint`` (high watermarks),
``log-start-offset-checkpoint``, ``cleaner-offset-checkpoint`` (entries ``topic partition offset``)
and each partition's ``leader-epoch-checkpoint`` (entries ``epoch start_offset``).

Writes go to a temporary file that is fsynced and renamed over the old one, and the directory is
fsynced, so a crash leaves either the old or the new file, never a torn one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from kraftlog.common import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    fsync_directory,
)
from kraftlog.storage._errors import KafkaStorageError
from kraftlog.storage._fault_hooks import check_space

__all__ = [
    "write_checkpoint_lines",
    "read_checkpoint_lines",
    "OffsetCheckpointFile",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "CLEANER_OFFSET_CHECKPOINT",
]

_VERSION = 0


def write_checkpoint_lines(path: Path, lines: Iterable[str]) -> None:
    """Atomically replace ``path`` with a version-0 checkpoint of ``lines``."""
    entries = list(lines)
    text = f"{_VERSION}\n{len(entries)}\n" + "".join(f"{line}\n" for line in entries)
    tmp = path.with_name(path.name + ".tmp")
    try:
        check_space(path)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        fsync_directory(path.parent)
    except OSError as err:
        raise KafkaStorageError(f"cannot write checkpoint {path}: {err}") from err


def read_checkpoint_lines(path: Path) -> list[list[str]]:
    """Entries of a checkpoint split on whitespace; a missing file is empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as err:
        raise KafkaStorageError(f"cannot read checkpoint {path}: {err}") from err
    except UnicodeDecodeError as err:
        raise KafkaStorageError(f"checkpoint {path} is not UTF-8 text: {err}") from err
    lines = text.splitlines()
    try:
        version = int(lines[0])
        count = int(lines[1])
    except (IndexError, ValueError) as err:
        raise KafkaStorageError(f"malformed checkpoint header in {path}") from err
    if version != _VERSION:
        raise KafkaStorageError(f"unrecognised checkpoint version {version} in {path}")
    entries = [line.split() for line in lines[2:] if line.strip()]
    if len(entries) != count:
        raise KafkaStorageError(f"checkpoint {path} declares {count} entries, holds {len(entries)}")
    return entries


class OffsetCheckpointFile:
    """``topic partition offset`` entries for one log dir."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[tuple[str, int], int]) -> None:
        write_checkpoint_lines(self.path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))

    def read(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for entry in read_checkpoint_lines(self.path):
            if len(entry) != 3:
                raise KafkaStorageError(f"malformed line {' '.join(entry)!r} in {self.path}")
            try:
                out[(entry[0], int(entry[1]))] = int(entry[2])
            except ValueError as err:
                raise KafkaStorageError(f"malformed line {' '.join(entry)!r} in {self.path}") from err
        return out
