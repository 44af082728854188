"""``kraftlog demo``: exercise the partition log end to end on local disk and show the result.

This is what ``make run`` runs until the cluster exists: it proves on a fresh machine that the
storage layer works (append with every codec, a transaction marker, read back, segment roll, clean
close) and shows what the files look like, through the same code ``dump-log`` uses. It writes only
under ``--dir`` and finishes in a few seconds.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import structlog

from kraftlog.cli._common import EXIT_FAILURE, Subparsers, UserError, add_output_option, print_json, print_table
from kraftlog.cli._dump_log import DumpOptions, dump_files
from kraftlog.storage import (
    AppendOrigin,
    CompressionType,
    ControlRecordType,
    Header,
    Log,
    LogConfig,
    StorageError,
    build_batch,
    build_control_batch,
    iter_batches,
)

__all__ = ["add_parser", "run", "PARTITION_DIR"]

PARTITION_DIR = "demo-0"  # topic "demo", partition 0
_LEADER_EPOCH = 0
_PRODUCER_ID = 4000
_COORDINATOR_EPOCH = 3

_log = structlog.get_logger(__name__)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo",
        help="write, read and roll a demo partition log on local disk, then dump it",
        description="Create the partition log DIR/demo-0 (removed first, so reruns start clean), "
        "append batches with keys, headers and every compression codec plus a "
        "committed transaction, read them back, roll a segment, print a summary and "
        "the dump of the first segment.",
    )
    parser.add_argument(
        "--dir", required=True, type=Path, metavar="DIR", help="directory to create the demo partition log in"
    )
    add_output_option(parser)
    return parser


@dataclass(frozen=True, slots=True)
class _Appended:
    description: str
    codec: str
    first_offset: int
    last_offset: int
    records: int
    bytes: int


def _batches(now_ms: int) -> list[tuple[str, CompressionType, bytes, AppendOrigin]]:
    """The demo's writes: one batch per codec, then a transaction (data + COMMIT marker)."""
    out: list[tuple[str, CompressionType, bytes, AppendOrigin]] = []
    codecs = [
        CompressionType.NONE,
        CompressionType.GZIP,
        CompressionType.SNAPPY,
        CompressionType.LZ4,
        CompressionType.ZSTD,
    ]
    for n, codec in enumerate(codecs):
        records = [
            (
                f"user-{n}-{i}".encode(),
                f'{{"event": "click", "n": {n * 10 + i}}}'.encode(),
                [Header("source", b"kraftlog-demo"), Header("codec", codec.name.lower().encode())],
            )
            for i in range(3)
        ]
        data = build_batch(records, timestamp_ms=now_ms + n, compression=codec)
        out.append(("3 keyed records", codec, data, AppendOrigin.CLIENT))
    txn = build_batch(
        [(b"order-1", b"created"), (b"order-1", b"paid")],
        timestamp_ms=now_ms + 10,
        producer_id=_PRODUCER_ID,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    out.append(("transactional records", CompressionType.NONE, txn, AppendOrigin.CLIENT))
    marker = build_control_batch(
        ControlRecordType.COMMIT,
        producer_id=_PRODUCER_ID,
        producer_epoch=0,
        coordinator_epoch=_COORDINATOR_EPOCH,
        timestamp_ms=now_ms + 11,
    )
    out.append(("COMMIT marker", CompressionType.NONE, marker, AppendOrigin.COORDINATOR))
    return out


def run(args: argparse.Namespace) -> int:
    base_dir: Path = args.dir
    if base_dir.exists() and not base_dir.is_dir():
        raise UserError(f"{base_dir} exists and is not a directory")
    part_dir = base_dir / PARTITION_DIR
    try:
        if part_dir.exists():
            shutil.rmtree(part_dir)
        part_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot prepare {part_dir}: {err.strerror or err}") from None
    _log.info("demo_started", dir=str(part_dir))

    # Small index interval: the demo's batches are tiny, and the dump should show index entries.
    config = LogConfig(index_interval_bytes=100)
    try:
        summary, first_segment = _exercise_log(part_dir, config)
    except StorageError as err:  # a disk problem (or a storage bug): one line, not a traceback
        print(f"kraftlog demo: error: the partition log failed: {err}", file=sys.stderr)
        return EXIT_FAILURE
    _log.info("demo_finished", log_end_offset=summary["log_end_offset"])

    if args.output == "json":
        print_json(summary)
    else:
        _print_summary(summary)
        print()
    sys.stdout.flush()
    return dump_files([first_segment], DumpOptions(print_data_log=True, output=args.output))


def _exercise_log(part_dir: Path, config: LogConfig) -> tuple[dict[str, Any], Path]:
    """Append, read back, roll and close; returns the summary and the first segment's path."""
    now_ms = time.time_ns() // 1_000_000
    log = Log(part_dir, config)
    try:
        appended = _append_all(log, now_ms)
        read_back = _read_back(log)
        log.roll()
        extra = build_batch(
            [(b"user-9-0", b'{"event": "after-roll"}')], timestamp_ms=now_ms + 20, compression=CompressionType.ZSTD
        )
        info = log.append_as_leader(extra, _LEADER_EPOCH)
        appended.append(
            _Appended(
                "1 record after the roll",
                "zstd",
                info.first_offset,
                info.last_offset,
                info.num_records,
                info.valid_bytes,
            )
        )
        summary = {
            "partition_dir": str(part_dir),
            "log_start_offset": log.log_start_offset,
            "log_end_offset": log.log_end_offset,
            "size_bytes": log.size_bytes,
            "records_read_back": read_back,
            "appended": [asdict(a) for a in appended],
            "segments": [
                {
                    "base_offset": seg.base_offset,
                    "file": seg.log_path.name,
                    "size_bytes": seg.size,
                    "index_entries": seg.offset_index.entries,
                    "time_index_entries": seg.time_index.entries,
                }
                for seg in log.segments
            ],
        }
        first_segment = log.segments[0].log_path
    finally:
        log.close()  # flushes data and indexes: the dump reads complete files
    return summary, first_segment


def _append_all(log: Log, now_ms: int) -> list[_Appended]:
    appended = []
    for description, codec, data, origin in _batches(now_ms):
        info = log.append_as_leader(data, _LEADER_EPOCH, origin=origin)
        appended.append(
            _Appended(
                description, codec.name.lower(), info.first_offset, info.last_offset, info.num_records, info.valid_bytes
            )
        )
    return appended


def _read_back(log: Log) -> int:
    """Read everything back through the fetch path and check it decodes; returns the records."""
    count = 0
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1024 * 1024)
        if not info.records:
            break
        for _pos, batch in iter_batches(info.records):
            batch.ensure_valid()
            count += 0 if batch.is_control else len(batch.records())
            offset = batch.next_offset
    return count


def _print_summary(summary: dict[str, Any]) -> None:
    print(f"Demo partition log: {summary['partition_dir']}")
    print(
        f"Offsets: start {summary['log_start_offset']}, end {summary['log_end_offset']}; "
        f"{summary['size_bytes']} bytes on disk; "
        f"{summary['records_read_back']} data records read back"
    )
    print()
    print_table(
        ["DESCRIPTION", "CODEC", "OFFSETS", "RECORDS", "BYTES"],
        [
            (a["description"], a["codec"], f"{a['first_offset']}-{a['last_offset']}", a["records"], a["bytes"])
            for a in summary["appended"]
        ],
    )
    print()
    print_table(
        ["SEGMENT", "BASE OFFSET", "SIZE", "INDEX ENTRIES", "TIME INDEX ENTRIES"],
        [
            (s["file"], s["base_offset"], s["size_bytes"], s["index_entries"], s["time_index_entries"])
            for s in summary["segments"]
        ],
    )
