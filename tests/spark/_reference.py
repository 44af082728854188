"""In-process replay: what a controller would write, the reference the Spark job must equal."""

from __future__ import annotations

from pathlib import Path

from kraftlog.metadata_log import MetadataDelta, MetadataImage, read_log_dir, read_snapshot, write_snapshot

__all__ = ["replay_image", "replay_snapshot"]


def replay_image(
    log_dir: str | Path,
    *,
    base_snapshot: str | Path | None = None,
    as_of_offset: int | None = None,
    as_of_time_ms: int | None = None,
) -> MetadataImage:
    """Replay the base snapshot and the log entries up to the cut, exactly as a controller does."""
    image = MetadataImage.EMPTY
    start = 0
    if base_snapshot is not None:
        snap = read_snapshot(base_snapshot)
        image = MetadataImage.from_records(snap.records, snap.offset, snap.epoch, snap.timestamp_ms)
        start = snap.offset + 1
    delta = MetadataDelta(image)
    replayed = 0
    for entry in read_log_dir(log_dir, from_offset=start):
        if as_of_offset is not None and entry.offset > as_of_offset:
            break
        if as_of_time_ms is not None and entry.timestamp_ms > as_of_time_ms:
            break
        delta.replay(entry)
        replayed += 1
        if as_of_offset is not None and entry.offset >= as_of_offset:
            break  # do not read on: a gap after the cut does not matter
    return delta.apply() if replayed else image


def replay_snapshot(log_dir: str | Path, out_dir: str | Path, **kwargs) -> Path:
    """`replay_image` written the way `quorum._server` writes snapshots."""
    image = replay_image(log_dir, **kwargs)
    return write_snapshot(out_dir, image.offset, image.epoch, image.timestamp_ms, image.to_records())
