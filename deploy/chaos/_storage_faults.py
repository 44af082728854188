"""Storage faults (issue 28): damage a stopped node's partition files the way a disk or a power
loss would, so that the chaos run (and the integration tests) can check that the node detects the
damage at load, truncates to its last valid batch and refetches from the leader.

Every function here works on files of a node that is down (the caller killed it with SIGKILL
first: an unclean shutdown, so the log loader recovers every segment past the recovery point, the
newest one always). The damage is seeded (``rng``), and each function returns what it did, one
`Damage` per file touched, for the run's report.

Kinds:

- ``bitflip_segment``: one bit of the newest segment flipped inside a batch's CRC-covered bytes
  (attributes to the end). The bytes before the CRC (base offset, length, leader epoch, magic)
  are not covered by it in Kafka's format either; a flip there is a different fault.
- ``bitflip_index``: one bit flipped within the entries of the newest offset index that has any
  (the active segment's entries reach its file only when the log is flushed or rolled, so this is
  usually the index of a rolled segment below the recovery point, which load does not rebuild).
- ``truncate_segment``: the newest segment cut at a random byte (usually inside a batch).
- ``lose_unsynced``: a power loss: every log file cut back to what its directory's
  ``recovery-point-offset-checkpoint`` says was fsynced (segments wholly past it emptied). The
  checkpoint is written after the fsyncs it names, so this keeps no more than a power loss would
  (it may keep less: the checkpoint lags the last fsync by up to
  ``log.flush.offset.checkpoint.interval.ms``).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kraftlog.common import INDEX_SUFFIX, LOG_SUFFIX, RECOVERY_POINT_CHECKPOINT
from kraftlog.common.records import iter_batches
from kraftlog.storage import NO_SPACE_FILE, OffsetCheckpointFile, parse_topic_partition

__all__ = [
    "STORAGE_KINDS",
    "Damage",
    "set_no_space",
    "damage_node",
    "damage_partition",
    "partition_dirs",
]

STORAGE_KINDS: tuple[str, ...] = ("bitflip_segment", "bitflip_index", "truncate_segment", "lose_unsynced")

#: bytes of a v2 batch before its CRC-covered part: base offset 8, length 4, leader epoch 4, magic 1, CRC 4
_CRC_COVERED_FROM = 21
#: one offset index entry: relative offset int32, position int32
_INDEX_ENTRY_BYTES = 8


@dataclass(frozen=True)
class Damage:
    """One file damaged: ``what`` says how, in bytes."""

    file: str
    what: str

    def as_dict(self) -> dict[str, str]:
        return {"file": self.file, "what": self.what}


def partition_dirs(log_dir: Path, include: Callable[[str], bool]) -> list[Path]:
    """The partition directories of ``log_dir`` whose topic ``include`` accepts, in name order."""
    out = []
    for p in sorted(log_dir.iterdir()) if log_dir.is_dir() else []:
        if not p.is_dir():
            continue
        try:
            topic, _partition = parse_topic_partition(p.name)
        except Exception:  # noqa: BLE001 - not a partition directory (a stray dir, a .delete one)
            continue
        if include(topic):
            out.append(p)
    return out


def _segments(directory: Path) -> list[Path]:
    """The ``.log`` files of a partition directory, oldest first."""
    return sorted(
        p for p in directory.glob(f"*{LOG_SUFFIX}") if p.name[:20].isdigit() and len(p.name) == 20 + len(LOG_SUFFIX)
    )


def _batch_spans(data: bytes) -> list[tuple[int, int, int]]:
    """``(position, size, base_offset)`` of every whole batch in ``data``."""
    return [(pos, b.size_bytes, b.base_offset) for pos, b in iter_batches(data)]


def _flip(path: Path, position: int, bit: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(position)
        byte = fh.read(1)[0]
        fh.seek(position)
        fh.write(bytes([byte ^ (1 << bit)]))


def _cut(path: Path, size: int) -> Damage | None:
    before = path.stat().st_size
    if size >= before:
        return None
    os.truncate(path, size)
    return Damage(str(path), f"cut {before} -> {size} bytes")


def damage_partition(directory: Path, kind: str, rng: random.Random, recovery_point: int = 0) -> list[Damage]:
    """Damage one partition directory of a stopped node; ``recovery_point`` (its checkpointed
    value) is used by ``lose_unsynced`` only. Returns nothing when there is nothing to damage (an
    empty newest segment)."""
    segments = _segments(directory)
    if not segments:
        return []
    newest = segments[-1]
    if kind == "bitflip_segment":
        spans = _batch_spans(newest.read_bytes())
        if not spans:
            return []
        pos, size, base = rng.choice(spans)
        at = rng.randrange(pos + _CRC_COVERED_FROM, pos + size)
        bit = rng.randrange(8)
        _flip(newest, at, bit)
        return [Damage(str(newest), f"bit {bit} of byte {at} flipped (batch at offset {base}, byte {pos})")]
    if kind == "bitflip_index":
        # the newest index holding entries: the active segment's reaches the disk only at a flush
        indexes = [p.with_name(p.name[:20] + INDEX_SUFFIX) for p in reversed(segments)]
        index = next((p for p in indexes if p.exists() and p.stat().st_size >= _INDEX_ENTRY_BYTES), None)
        if index is None:
            return []
        used = index.stat().st_size // _INDEX_ENTRY_BYTES * _INDEX_ENTRY_BYTES
        at = rng.randrange(0, used)
        bit = rng.randrange(8)
        _flip(index, at, bit)
        entry, field = divmod(at, _INDEX_ENTRY_BYTES)
        what = "relative offset" if field < 4 else "position"
        return [Damage(str(index), f"bit {bit} of byte {at} flipped (the {what} of entry {entry} of {used // 8})")]
    if kind == "truncate_segment":
        size = newest.stat().st_size
        if size == 0:
            return []
        cut = _cut(newest, rng.randrange(0, size))
        return [cut] if cut else []
    if kind == "lose_unsynced":
        return _lose_unsynced(segments, recovery_point)
    raise ValueError(f"unknown storage fault kind {kind!r}")


def _lose_unsynced(segments: Sequence[Path], recovery_point: int) -> list[Damage]:
    """Cut the segments back to ``recovery_point``: the one holding it at the first batch at or
    past it, the later ones to nothing."""
    out = []
    bases = [int(p.name[:20]) for p in segments]
    for i, path in enumerate(segments):
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        if next_base is not None and next_base <= recovery_point:
            continue  # wholly below the recovery point: fsynced
        keep = 0
        if bases[i] < recovery_point:
            starts = [pos for pos, _size, base in _batch_spans(path.read_bytes()) if base >= recovery_point]
            keep = starts[0] if starts else path.stat().st_size
        cut = _cut(path, keep)
        if cut is not None:
            out.append(cut)
    return out


def damage_node(
    log_dirs: Iterable[Path],
    kind: str,
    rng: random.Random,
    *,
    include: Callable[[str], bool],
    skip: Callable[[str, int], bool] = lambda _t, _p: False,
) -> list[Damage]:
    """Damage every partition of a stopped node's ``log_dirs`` whose topic ``include`` accepts and
    that ``skip`` (topic, partition) does not name. Partitions are visited in name order, each
    with its own draw from ``rng``, so a seed replays the same damage on the same files."""
    out: list[Damage] = []
    for log_dir in log_dirs:
        recovery = OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT).read() if kind == "lose_unsynced" else {}
        for directory in partition_dirs(log_dir, include):
            topic, partition = parse_topic_partition(directory.name)
            if skip(topic, partition):
                continue
            out += damage_partition(directory, kind, rng, recovery.get((topic, partition), 0))
    return out


def set_no_space(fault_dir: Path, log_dirs: Sequence[Path]) -> None:
    """Make every write of a running node into ``log_dirs`` fail with ENOSPC (none: writes work
    again), through its test-only control directory ``fault_dir`` (`storage.fault_dir`: the node
    rereads it within 0.2 s). The ``disk_full`` fault: a full disk under one log dir, without a
    tmpfs or loop mount per node (which a test machine may not allow)."""
    fault_dir.mkdir(parents=True, exist_ok=True)
    path = fault_dir / NO_SPACE_FILE
    if log_dirs:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(f"{os.path.abspath(d)}\n" for d in log_dirs), encoding="utf-8")
        os.replace(tmp, path)
    else:
        path.unlink(missing_ok=True)
