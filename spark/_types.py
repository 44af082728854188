"""What the Spark snapshot job reports and raises, and the time forms of ``--as-of-time``."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kraftlog.metadata_log import MetadataRecordError
from kraftlog.metadata_log.image import MetadataReplayError
from kraftlog.metadata_log.log_files import MetadataLogCorruptError

_ERROR_CLASSES: dict[str, type[Exception]] = {
    "MetadataRecordError": MetadataRecordError,
    "MetadataLogCorruptError": MetadataLogCorruptError,
    "MetadataReplayError": MetadataReplayError,
}


class SnapshotRebuildError(ValueError):
    """The job cannot produce a snapshot with these inputs (no entries before the cut, a cut past
    the end of the log, a base snapshot the log does not continue, ...)."""


SPARK_EXTRA = "pip install 'kraftlog[spark]'"


class SparkNotInstalledError(ImportError):
    """pyspark is not installed. Spark is the ``[spark]`` extra (a broker or controller host needs
    neither pyspark nor a JRE), so only the snapshot job needs it, and it names the install command."""


def require_pyspark() -> None:
    """Import pyspark or raise `SparkNotInstalledError`; call it before any ``from pyspark ...``."""
    try:
        import pyspark  # noqa: F401 - only whether it imports
    except ImportError as err:
        raise SparkNotInstalledError(
            f"the Spark snapshot job needs pyspark, which kraftlog installs as an extra: {SPARK_EXTRA} "
            f"(and a Java runtime); {err}"
        ) from err


@dataclass(frozen=True, slots=True)
class TornTail:
    """A segment whose valid part ends before its end: where and why."""

    file: str
    position: int
    reason: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class RebuildResult:
    path: Path
    offset: int
    epoch: int
    timestamp_ms: int
    record_count: int
    entries_replayed: int
    first_offset: int | None
    files_read: int
    torn_tails: tuple[TornTail, ...]
    base_snapshot: str | None
    cut_reason: str
    seconds: float
    phases: dict[str, float] = dataclasses.field(default_factory=dict)  # seconds per job step


def parse_time_ms(text: str) -> int:
    """``--as-of-time``: ISO 8601 (``2024-05-01T03:00:00Z``, ``2024-05-01 03:00+02:00``; a time
    without an offset is UTC) or milliseconds since the epoch."""
    s = text.strip()
    if re.fullmatch(r"-?\d+", s):
        return int(s)
    try:
        dt = datetime.fromisoformat(s.replace("z", "Z"))
    except ValueError as err:
        raise ValueError(
            f"{text!r} is not an ISO 8601 time (e.g. 2024-05-01T03:00:00Z) nor milliseconds since the epoch"
        ) from err
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def format_time_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
