"""``kraftlog dump-log``: print the content of segment and index files, like ``kafka-dump-log.sh``.

An offline tool for operators: it reads files directly, never through a broker, so it works on a
stopped node, on a copy of a segment, and on damaged files. It must therefore never trust the bytes
it reads: a torn or corrupt tail is reported as the position where valid data ends, not a crash.

The output follows Kafka's ``DumpLogSegments`` line for line (same field names and order), so what
people know from Kafka, and the scripts they wrote against it, apply. ``--output json`` prints the
same fields with snake_case keys, one JSON object per file on one line.

Segments can be gigabytes: the ``.log`` file is read in bounded chunks, and JSON is streamed rather
than built in memory.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import crc32c
import structlog

from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    JsonObjectStream,
    UserError,
    add_output_option,
    json_dumps,
    non_negative_int,
)
from kraftlog.common import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from kraftlog.storage import (
    HEADER_SIZE,
    ControlRecordType,
    OffsetIndex,
    Record,
    RecordBatch,
    StorageError,
    TimeIndex,
    TimestampType,
    iter_batches,
)

__all__ = ["add_parser", "run", "dump_files", "DumpOptions"]

_log = structlog.get_logger(__name__)

_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)

# How much of a .log file is read at once. Batches larger than this are still handled (see
# `_LogScanner`), so it bounds memory, not what can be dumped. Tests shrink it to cross boundaries.
_CHUNK_BYTES = 4 * 1024 * 1024

_LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32: the bytes batchLength does not count
_MIN_BATCH_LENGTH = HEADER_SIZE - _LOG_OVERHEAD
_MAGIC_V2 = 2
_MAGIC_POS = 16
_ATTRIBUTES_POS = 21
_BATCH_LENGTH = struct.Struct(">i")
_CONTROL_VALUE = struct.Struct(">hi")  # version int16, coordinatorEpoch int32
_CONTROL_KEY = struct.Struct(">hh")  # version int16, type int16
_INT31_MASK = 0x7FFFFFFF

_TIMESTAMP_TYPE_NAMES = {TimestampType.CREATE_TIME: "CreateTime", TimestampType.LOG_APPEND_TIME: "LogAppendTime"}


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """What to print; built from the command line, or directly by other commands (``demo``)."""

    deep_iteration: bool = False
    print_data_log: bool = False
    verify_index_only: bool = False
    max_bytes: int | None = None
    output: str = "table"

    @property
    def deep(self) -> bool:
        return self.deep_iteration or self.print_data_log

    @property
    def json(self) -> bool:
        return self.output == "json"


# ------------------------------------------------------------------------------------- CLI


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "dump-log",
        help="print the batches of .log segments and the entries of .index/.timeindex files",
        description="Print the content of log segment (.log), offset index (.index) and time index "
        "(.timeindex) files, like Kafka's kafka-dump-log.sh. Reads the files directly; "
        "no broker is needed.",
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="segment or index files to dump (.log, .index, .timeindex)"
    )
    parser.add_argument("--deep-iteration", action="store_true", help="also print every record of each batch")
    parser.add_argument(
        "--print-data-log", action="store_true", help="also print record keys and payloads (implies --deep-iteration)"
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check .index/.timeindex files against their .log instead of printing "
        "their entries; exit 1 when an entry is wrong",
    )
    parser.add_argument(
        "--max-bytes",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="read at most N bytes of each .log file (default: the whole file); "
        "index verification always reads the whole log",
    )
    add_output_option(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    options = DumpOptions(
        deep_iteration=args.deep_iteration,
        print_data_log=args.print_data_log,
        verify_index_only=args.verify_index_only,
        max_bytes=args.max_bytes,
        output=args.output,
    )
    return dump_files([Path(f) for f in args.files], options)


def dump_files(paths: list[Path], options: DumpOptions) -> int:
    """Dump every file; returns 0, or 1 when a file could not be read or an index is wrong.

    Every path is checked before anything is printed, so a typo in the third argument does not
    leave half an output behind; problems found while reading one file do not stop the others.
    """
    for path in paths:
        _check_path(path)
    status = EXIT_OK
    for path in paths:
        try:
            if path.name.endswith(LOG_SUFFIX):
                ok = _dump_log_file(path, options)
            elif path.name.endswith(INDEX_SUFFIX):
                ok = _dump_offset_index(path, options)
            else:
                ok = _dump_time_index(path, options)
        except BrokenPipeError:
            raise  # the reader of our output went away (`| head`): `main` ends quietly
        except (OSError, StorageError) as err:
            # An unreadable file: say so and go on with the others (the exit code records it).
            # The error line is the report; the log entry (debug) only helps when tracing.
            _log.debug("dump_log_file_failed", file=str(path), error=str(err))
            print(f"kraftlog dump-log: error: cannot dump {path}: {_reason(err)}", file=sys.stderr)
            ok = False
        if not ok:
            status = EXIT_FAILURE
    return status


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err)


def _check_path(path: Path) -> None:
    if not path.name.endswith(_SUFFIXES):
        raise UserError(f"{path}: unsupported file type (expected a .log, .index or .timeindex file)")
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if path.is_dir():
        raise UserError(f"{path}: is a directory")
    if not path.name.endswith(LOG_SUFFIX) and _base_offset_from_name(path) is None:
        raise UserError(
            f"{path}: cannot tell the segment's base offset: index files are named "
            f"<base offset>{INDEX_SUFFIX} or <base offset>{TIME_INDEX_SUFFIX}"
        )


def _base_offset_from_name(path: Path) -> int | None:
    """The base offset a segment file's name carries (``00000000000000000042.log`` -> 42).

    Index entries store offsets relative to it, so an index cannot be read without it.
    """
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


# ---------------------------------------------------------------------------- log scanning


@dataclass(frozen=True, slots=True)
class _ScannedBatch:
    position: int
    batch: RecordBatch
    # None when the scan was asked not to check CRCs (index verification needs headers only).
    valid: bool | None
    # False when only the header was read (a batch larger than a chunk in a shallow scan).
    has_records: bool


class _LogScanner:
    """Walks the batches of a ``.log`` file in bounded chunks, stopping where valid data ends.

    Whole chunks go through `storage.iter_batches`; the scanner refills at chunk boundaries and,
    when ``iter_batches`` stops early, finds out why: the end of the data, a batch that goes past
    the end of the file (a torn tail), or a length or magic that cannot be a batch (corruption).

    A batch larger than a chunk is read in pieces to check its CRC; its records are loaded whole
    only when asked for (``need_records``), so memory stays bounded by one batch at most.
    """

    def __init__(
        self,
        fh: IO[bytes],
        file_size: int,
        *,
        limit: int | None = None,
        need_records: bool = True,
        check_crc: bool = True,
    ) -> None:
        self._fh = fh
        self.file_size = file_size
        self.end = file_size if limit is None else min(file_size, limit)
        self._need_records = need_records
        self._check_crc = check_crc
        self.valid_end = 0  # position just past the last batch yielded
        self.stop_reason = "end"  # "end" | "max_bytes" | "torn" | "corrupt"
        self.stop_detail = ""

    @property
    def invalid_bytes(self) -> int:
        """Bytes after the last whole batch that are not a batch (0 when stopped by max-bytes)."""
        if self.stop_reason in ("torn", "corrupt"):
            return self.file_size - self.valid_end
        return 0

    def _read(self, position: int, size: int) -> bytes:
        self._fh.seek(position)
        return self._fh.read(max(0, min(size, self.end - position)))

    def _stop(self, reason: str, detail: str) -> None:
        self.stop_reason, self.stop_detail = reason, detail

    def __iter__(self) -> Iterator[_ScannedBatch]:
        chunk = max(_CHUNK_BYTES, HEADER_SIZE)
        buf = b""
        buf_start = 0
        pos = 0
        while True:
            rel = pos - buf_start
            if len(buf) - rel < _LOG_OVERHEAD:
                if buf_start + len(buf) >= self.end or pos >= self.end:
                    self._finish_short_tail(pos)
                    return
                if buf_start == pos and buf:  # a fresh read came back short: the file shrank
                    self._stop("torn", f"the file ended early at position {pos + len(buf)}")
                    return
                buf, buf_start = self._read(pos, chunk), pos
                if not buf:
                    self._stop("torn", f"the file ended early at position {pos}")
                    return
                continue
            for batch_rel, batch in iter_batches(buf, rel):
                position = buf_start + batch_rel
                if batch.magic != _MAGIC_V2:
                    self._stop("corrupt", f"unsupported or invalid magic {batch.magic} at position {position}")
                    return
                valid = batch.is_valid() if self._check_crc else None
                yield _ScannedBatch(position, batch, valid, True)
                pos = position + batch.size_bytes
                self.valid_end = pos
            # iter_batches stopped: fewer than 12 bytes left, a bad length, or a partial batch.
            rel = pos - buf_start
            if len(buf) - rel < _LOG_OVERHEAD:
                continue
            (length,) = _BATCH_LENGTH.unpack_from(buf, rel + 8)
            size = length + _LOG_OVERHEAD
            if length < _MIN_BATCH_LENGTH:
                self._stop("corrupt", f"invalid batch length {length} at position {pos}")
                return
            if pos + size > self.file_size:
                self._stop("torn", f"batch at position {pos} claims {size} bytes, {self.file_size - pos} present")
                return
            if pos + size > self.end:
                self._stop("max_bytes", f"next batch at position {pos} ends past --max-bytes")
                return
            if size <= chunk:
                if buf_start == pos:  # the batch should have fit in a fresh read: the file shrank
                    self._stop("torn", f"the file ended early inside the batch at position {pos}")
                    return
                buf, buf_start = self._read(pos, chunk), pos
                continue
            scanned = self._large_batch(pos, size)
            if scanned is None:
                return
            yield scanned
            pos += size
            self.valid_end = pos
            buf, buf_start = b"", pos

    def _finish_short_tail(self, pos: int) -> None:
        if pos >= self.file_size:
            self._stop("end", "")
        elif pos >= self.end or self.end < self.file_size:
            self._stop("max_bytes", f"stopped at position {pos} by --max-bytes")
        else:
            self._stop("torn", f"{self.file_size - pos} bytes at position {pos} are too few for a batch header")

    def _large_batch(self, pos: int, size: int) -> _ScannedBatch | None:
        header = self._read(pos, HEADER_SIZE)
        if len(header) < HEADER_SIZE:
            self._stop("torn", f"the file ended early inside the batch at position {pos}")
            return None
        if header[_MAGIC_POS] != _MAGIC_V2:
            self._stop("corrupt", f"unsupported or invalid magic {header[_MAGIC_POS]} at position {pos}")
            return None
        if self._need_records:
            batch = RecordBatch(self._read(pos, size))
            valid = batch.is_valid() if self._check_crc else None
            return _ScannedBatch(pos, batch, valid, True)
        batch = RecordBatch(header)
        valid = None
        if self._check_crc:
            crc = crc32c.crc32c(header[_ATTRIBUTES_POS:])
            done = HEADER_SIZE
            while done < size:
                piece = self._read(pos + done, min(_CHUNK_BYTES, size - done))
                if not piece:
                    break
                crc = crc32c.crc32c(piece, crc)
                done += len(piece)
            valid = done == size and crc == batch.crc
        return _ScannedBatch(pos, batch, valid, False)


# ------------------------------------------------------------------------------- log dump


def _timestamp_type_name(batch: RecordBatch) -> str:
    return _TIMESTAMP_TYPE_NAMES.get(batch.timestamp_type, str(batch.timestamp_type))


def _codec_name(batch: RecordBatch) -> str:
    try:
        return batch.compression.name.lower()
    except StorageError:  # codec ids 5-7 are unassigned: show the id rather than fail
        return f"unknown({batch.attributes & 0x07})"


def _batch_fields(scanned: _ScannedBatch) -> dict[str, Any]:
    """The batch line's fields, in Kafka's order, under snake_case keys."""
    b = scanned.batch
    return {
        "base_offset": b.base_offset,
        "last_offset": b.last_offset,
        "count": b.records_count,
        "base_sequence": b.base_sequence,
        "last_sequence": b.last_sequence,
        "producer_id": b.producer_id,
        "producer_epoch": b.producer_epoch,
        "partition_leader_epoch": b.partition_leader_epoch,
        "is_transactional": b.is_transactional,
        "is_control": b.is_control,
        "delete_horizon_ms": b.delete_horizon_ms,
        "position": scanned.position,
        "timestamp_type": _timestamp_type_name(b),
        "max_timestamp": b.max_timestamp,
        "size": b.size_bytes,
        "magic": b.magic,
        "compresscodec": _codec_name(b),
        "crc": b.crc,
        "is_valid": scanned.valid,
    }


def _bool(value: bool | None) -> str:
    return "unknown" if value is None else str(value).lower()


def _batch_line(f: dict[str, Any]) -> str:
    return (
        f"baseOffset: {f['base_offset']} lastOffset: {f['last_offset']} count: {f['count']} "
        f"baseSequence: {f['base_sequence']} lastSequence: {f['last_sequence']} "
        f"producerId: {f['producer_id']} producerEpoch: {f['producer_epoch']} "
        f"partitionLeaderEpoch: {f['partition_leader_epoch']} "
        f"isTransactional: {_bool(f['is_transactional'])} isControl: {_bool(f['is_control'])} "
        f"deleteHorizonMs: {f['delete_horizon_ms']} position: {f['position']} "
        f"{f['timestamp_type']}: {f['max_timestamp']} size: {f['size']} magic: {f['magic']} "
        f"compresscodec: {f['compresscodec']} crc: {f['crc']} isvalid: {_bool(f['is_valid'])}"
    )


def _record_sequence(batch: RecordBatch, record: Record) -> int:
    """A record's producer sequence: the batch's base sequence plus the offset delta, wrapping at
    2^31 as the producer's counter does; -1 when the batch carries no sequence."""
    if batch.base_sequence < 0:
        return -1
    return (batch.base_sequence + (record.offset - batch.base_offset)) & _INT31_MASK


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _record_fields(batch: RecordBatch, record: Record, options: DumpOptions) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "offset": record.offset,
        "timestamp_type": _timestamp_type_name(batch),
        "timestamp": record.timestamp_ms,
        "key_size": -1 if record.key is None else len(record.key),
        "value_size": -1 if record.value is None else len(record.value),
        "sequence": _record_sequence(batch, record),
        "header_keys": [h.key for h in record.headers],
    }
    if batch.is_control:
        fields.update(_control_fields(record))
    elif options.print_data_log:
        fields["key"] = None if record.key is None else _text(record.key)
        fields["payload"] = None if record.value is None else _text(record.value)
    return fields


def _control_fields(record: Record) -> dict[str, Any]:
    """Decode a control record: a transaction marker (COMMIT/ABORT) with its coordinator epoch.

    Done per record from the key and value, as Kafka's tool does; a marker type from a newer
    version is shown by its id rather than rejected.
    """
    key = record.key or b""
    if len(key) < _CONTROL_KEY.size:
        return {"control_type": "INVALID"}
    _version, type_id = _CONTROL_KEY.unpack_from(key, 0)
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return {"control_type": f"UNKNOWN({type_id})"}
    value = record.value or b""
    epoch = _CONTROL_VALUE.unpack_from(value, 0)[1] if len(value) >= _CONTROL_VALUE.size else -1
    return {"end_txn_marker": ControlRecordType(type_id).name, "coordinator_epoch": epoch}


def _record_line(f: dict[str, Any]) -> str:
    line = (
        f"| offset: {f['offset']} {f['timestamp_type']}: {f['timestamp']} "
        f"keySize: {f['key_size']} valueSize: {f['value_size']} sequence: {f['sequence']} "
        f"headerKeys: [{','.join(f['header_keys'])}]"
    )
    if "end_txn_marker" in f:
        line += f" endTxnMarker: {f['end_txn_marker']} coordinatorEpoch: {f['coordinator_epoch']}"
    elif "control_type" in f:
        line += f" controlType: {f['control_type']}"
    else:
        if f.get("key") is not None:
            line += f" key: {f['key']}"
        if f.get("payload") is not None:
            line += f" payload: {f['payload']}"
    return line


def _batch_records(scanned: _ScannedBatch) -> tuple[list[Record], str | None]:
    """Decode a batch's records; a batch that cannot be decoded gives an error, not an exception."""
    if not scanned.has_records:
        return [], "batch is larger than the read chunk and was not loaded"
    try:
        return scanned.batch.records(), None
    except StorageError as err:
        return [], str(err)


def _dump_log_file(path: Path, options: DumpOptions) -> bool:
    """Dump one segment; returns True (damaged data is reported, not a failure of the tool)."""
    with open(path, "rb") as fh:
        file_size = os.fstat(fh.fileno()).st_size
        scanner = _LogScanner(fh, file_size, limit=options.max_bytes, need_records=options.deep, check_crc=True)
        batches = iter(scanner)
        first = next(batches, None)
        base = _base_offset_from_name(path)
        if base is None:  # a copied file without the usual name: the data says where it starts
            base = first.batch.base_offset if first is not None else 0

        def all_batches() -> Iterator[_ScannedBatch]:
            if first is not None:
                yield first
                yield from batches

        if options.json:
            _dump_log_json(path, base, all_batches(), scanner, options)
        else:
            _dump_log_table(path, base, all_batches(), scanner, options)
    return True


def _dump_log_table(
    path: Path, base: int, batches: Iterator[_ScannedBatch], scanner: _LogScanner, options: DumpOptions
) -> None:
    print(f"Dumping {path}")
    print(f"Log starting offset: {base}")
    for scanned in batches:
        print(_batch_line(_batch_fields(scanned)))
        if options.deep:
            records, error = _batch_records(scanned)
            for record in records:
                print(_record_line(_record_fields(scanned.batch, record, options)))
            if error is not None:
                print(f"| error: cannot decode the records of this batch: {error}")
    if scanner.invalid_bytes:
        print(
            f"Found {scanner.invalid_bytes} invalid bytes at the end of {path.name} "
            f"(valid data ends at position {scanner.valid_end}: {scanner.stop_detail})"
        )


def _dump_log_json(
    path: Path, base: int, batches: Iterator[_ScannedBatch], scanner: _LogScanner, options: DumpOptions
) -> None:
    stream = JsonObjectStream({"file": str(path), "type": "log", "log_starting_offset": base}, "batches")
    try:
        for scanned in batches:
            fields = _batch_fields(scanned)
            if options.deep:
                records, error = _batch_records(scanned)
                fields["records"] = [_record_fields(scanned.batch, r, options) for r in records]
                if error is not None:
                    fields["records_error"] = error
            stream.item(fields)
    finally:
        # Close the object even when reading fails half-way, so the line stays parseable.
        stream.close(
            {
                "file_size": scanner.file_size,
                "valid_bytes": scanner.valid_end,
                "invalid_bytes": scanner.invalid_bytes,
                "stop_reason": scanner.stop_reason,
                "stop_detail": scanner.stop_detail or None,
            }
        )


# ----------------------------------------------------------------------------- index dumps


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


# --------------------------------------------------------------------------- verification

# A problem found in an index: its kind (which decides the heading it is printed under, as in
# Kafka's tool) and its fields.
_Problem = tuple[str, dict[str, Any]]


def _log_batches(log_path: Path) -> Iterator[_ScannedBatch]:
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
