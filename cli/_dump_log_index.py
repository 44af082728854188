"""Dumping and verifying ``.index`` and ``.timeindex`` files against their segment, as Kafka's
``kafka-dump-log --index-sanity-check`` / ``--verify-index-only`` do (see `cli._dump_log`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

from kraftlog.cli._common import (
    JsonObjectStream,
    json_dumps,
)
from kraftlog.cli._dump_log_scan import DumpOptions, _base_offset_from_name, _LogScanner, _ScannedBatch
from kraftlog.common import LOG_SUFFIX
from kraftlog.storage import (
    OffsetIndex,
    TimeIndex,
)


def _open_offset_index(path: Path) -> OffsetIndex:
    base = _base_offset_from_name(path)
    assert base is not None  # checked by _check_path
    return OffsetIndex(path, base, max(path.stat().st_size, 8))


def _open_time_index(path: Path) -> TimeIndex:
    base = _base_offset_from_name(path)
    assert base is not None  # checked by _check_path
    return TimeIndex(path, base, max(path.stat().st_size, 12))


def _log_path_for(index_path: Path) -> Path:
    return index_path.with_name(index_path.name.split(".", 1)[0] + LOG_SUFFIX)


def _dump_offset_index(path: Path, options: DumpOptions) -> bool:
    entries = _open_offset_index(path).items()
    if options.verify_index_only:
        return _verify_and_report(
            path, "offset_index", len(entries), _verify_offset_index(entries, _log_path_for(path)), options
        )
    if options.json:
        stream = JsonObjectStream(
            {"file": str(path), "type": "offset_index", "base_offset": _base_offset_from_name(path)}, "entries"
        )
        for offset, position in entries:
            stream.item({"offset": offset, "position": position})
        stream.close()
    else:
        print(f"Dumping {path}")
        for offset, position in entries:
            print(f"offset: {offset} position: {position}")
    return True


def _dump_time_index(path: Path, options: DumpOptions) -> bool:
    entries = _open_time_index(path).items()
    if options.verify_index_only:
        return _verify_and_report(
            path, "time_index", len(entries), _verify_time_index(entries, _log_path_for(path)), options
        )
    if options.json:
        stream = JsonObjectStream(
            {"file": str(path), "type": "time_index", "base_offset": _base_offset_from_name(path)}, "entries"
        )
        for timestamp, offset in entries:
            stream.item({"timestamp": timestamp, "offset": offset})
        stream.close()
    else:
        print(f"Dumping {path}")
        for timestamp, offset in entries:
            print(f"timestamp: {timestamp} offset: {offset}")
    return True


# A problem found in an index: its kind (which decides the heading it is printed under, as in
# Kafka's tool) and its fields.
_Problem = tuple[str, dict[str, Any]]


def _log_batches(log_path: Path) -> Generator[_ScannedBatch, None, None]:
    """Headers of every batch of ``log_path`` up to where valid data ends (no CRC check: an index
    entry is about where batches are, not whether their bytes are intact)."""
    if not log_path.is_file():
        raise FileNotFoundError(2, f"log file {log_path} not found (needed to verify the index)")
    with open(log_path, "rb") as fh:
        scanner = _LogScanner(fh, os.fstat(fh.fileno()).st_size, need_records=False, check_crc=False)
        yield from scanner


def _verify_offset_index(entries: list[tuple[int, int]], log_path: Path) -> list[_Problem]:
    """Every entry must name the start of a batch whose last offset is the entry's offset, and
    entries must increase in both columns (lookups bisect on them)."""
    problems: list[_Problem] = []
    prev: tuple[int, int] | None = None
    for offset, position in entries:
        if prev is not None and offset <= prev[0]:
            problems.append(("offset_out_of_order", {"index_offset": offset, "previous_offset": prev[0]}))
        if prev is not None and position <= prev[1]:
            problems.append(
                (
                    "position_out_of_order",
                    {"index_offset": offset, "index_position": position, "previous_position": prev[1]},
                )
            )
        prev = (offset, position)

    # Merge the entries, sorted by position, with the batches as they come from the file: one
    # pass over the log whatever the number of entries.
    by_position = sorted(entries, key=lambda e: e[1])
    i = 0
    with contextlib.closing(_log_batches(log_path)) as batches:
        for scanned in batches:
            if i == len(by_position):
                break
            i = _match_offset_entries(scanned, by_position, i, problems)
    for offset, position in by_position[i:]:
        problems.append(
            (
                "offset_mismatch",
                {
                    "index_offset": offset,
                    "log_offset": -1,
                    "position": position,
                    "detail": "position is past the end of the valid log data",
                },
            )
        )
    return problems


def _match_offset_entries(
    scanned: _ScannedBatch, by_position: list[tuple[int, int]], i: int, problems: list[_Problem]
) -> int:
    """Check the offset-index entries (sorted by position, from ``i``) that point at or before
    this batch; returns the index of the first entry left for later batches."""
    pos = scanned.position
    while i < len(by_position) and by_position[i][1] < pos:
        offset, position = by_position[i]
        problems.append(
            (
                "offset_mismatch",
                {
                    "index_offset": offset,
                    "log_offset": -1,
                    "position": position,
                    "detail": "position is not the start of a batch",
                },
            )
        )
        i += 1
    while i < len(by_position) and by_position[i][1] == pos:
        offset, position = by_position[i]
        if offset != scanned.batch.last_offset:
            problems.append(
                (
                    "offset_mismatch",
                    {
                        "index_offset": offset,
                        "log_offset": scanned.batch.last_offset,
                        "position": position,
                        "detail": None,
                    },
                )
            )
        i += 1
    return i


def _match_time_entries(
    scanned: _ScannedBatch, by_offset: list[tuple[int, int]], i: int, problems: list[_Problem]
) -> int:
    """Check the time-index entries (sorted by offset, from ``i``) whose offset is at or before
    this batch's last offset; returns the index of the first entry left for later batches."""
    b = scanned.batch
    while i < len(by_offset) and by_offset[i][1] <= b.last_offset:
        timestamp, offset = by_offset[i]
        if offset != b.last_offset:
            # Inside this batch (or in a gap before it): not a batch's last offset.
            problems.append(("offset_not_found", {"indexed_offset": offset, "found_log_offset": b.last_offset}))
        elif timestamp != b.max_timestamp:
            problems.append(
                (
                    "timestamp_mismatch",
                    {"index_timestamp": timestamp, "log_timestamp": b.max_timestamp, "offset": offset},
                )
            )
        i += 1
    return i


def _verify_time_index(entries: list[tuple[int, int]], log_path: Path) -> list[_Problem]:
    """Every entry must name the last offset of a batch whose max timestamp is the entry's
    timestamp, and entries must increase (lookups bisect on timestamps)."""
    problems: list[_Problem] = []
    prev: tuple[int, int] | None = None
    for timestamp, offset in entries:
        if prev is not None and timestamp <= prev[0]:
            problems.append(("timestamp_out_of_order", {"index_timestamp": timestamp, "previous_timestamp": prev[0]}))
        if prev is not None and offset <= prev[1]:
            problems.append(("offset_out_of_order", {"index_offset": offset, "previous_offset": prev[1]}))
        prev = (timestamp, offset)

    by_offset = sorted(entries, key=lambda e: e[1])
    i = 0
    with contextlib.closing(_log_batches(log_path)) as batches:
        for scanned in batches:
            if i == len(by_offset):
                break
            i = _match_time_entries(scanned, by_offset, i, problems)
    for _timestamp, offset in by_offset[i:]:
        problems.append(("offset_not_found", {"indexed_offset": offset, "found_log_offset": -1}))
    return problems


# Headings and lines of each kind of problem, following Kafka's DumpLogSegments wording.
_HEADINGS = {
    "offset_mismatch": "Mismatches in :{file}",
    "offset_out_of_order": "Found out of order offset in :{file}",
    "position_out_of_order": "Found out of order position in :{file}",
    "timestamp_mismatch": "Found timestamp mismatch in :{file}",
    "timestamp_out_of_order": "Found out of order timestamp in :{file}",
    "offset_not_found": "The following indexed offsets are not found in the log of {file}.",
}


def _problem_line(kind: str, f: dict[str, Any]) -> str:
    if kind == "offset_mismatch":
        line = f"  Index offset: {f['index_offset']}, log offset: {f['log_offset']}"
        if f.get("detail"):
            line += f" (position {f['position']}: {f['detail']})"
        return line
    if kind == "offset_out_of_order":
        return f"  Index offset: {f['index_offset']}, Previously indexed offset: {f['previous_offset']}"
    if kind == "position_out_of_order":
        return (
            f"  Index offset: {f['index_offset']}, position: {f['index_position']}, "
            f"Previously indexed position: {f['previous_position']}"
        )
    if kind == "timestamp_mismatch":
        return f"  Index timestamp: {f['index_timestamp']}, log timestamp: {f['log_timestamp']}"
    if kind == "timestamp_out_of_order":
        return f"  Index timestamp: {f['index_timestamp']}, Previously indexed timestamp: {f['previous_timestamp']}"
    return f"Indexed offset: {f['indexed_offset']}, found log offset: {f['found_log_offset']}"


def _verify_and_report(
    path: Path, index_type: str, checked: int, problems: list[_Problem], options: DumpOptions
) -> bool:
    log_path = _log_path_for(path)
    if options.json:
        print(
            json_dumps(
                {
                    "file": str(path),
                    "type": index_type,
                    "log_file": str(log_path),
                    "consistent": not problems,
                    "entries_checked": checked,
                    "mismatches": [{"kind": kind, **fields} for kind, fields in problems],
                }
            )
        )
        return not problems
    print(f"Dumping {path}")
    if not problems:
        print(f"Index {path} is consistent with {log_path} ({checked} entries checked)")
        return True
    for kind, heading in _HEADINGS.items():
        of_kind = [fields for k, fields in problems if k == kind]
        if of_kind:
            print(heading.format(file=path))
            for fields in of_kind:
                print(_problem_line(kind, fields))
    return False
