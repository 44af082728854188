"""``kraftlog dump-log``: the command, and the dump of ``.log`` segments (see `cli._dump_log`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    JsonObjectStream,
    Subparsers,
    UserError,
    add_output_option,
    non_negative_int,
)
from kraftlog.cli._dump_log_index import _dump_offset_index, _dump_time_index
from kraftlog.cli._dump_log_scan import (
    _CONTROL_KEY,
    _CONTROL_VALUE,
    _INT31_MASK,
    _SUFFIXES,
    _TIMESTAMP_TYPE_NAMES,
    DumpOptions,
    _base_offset_from_name,
    _log,
    _LogScanner,
    _ScannedBatch,
)
from kraftlog.cli._dump_log_snapshot import SNAPSHOT_SUFFIX, dump_producer_snapshot
from kraftlog.common import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from kraftlog.storage import (
    ControlRecordType,
    Record,
    RecordBatch,
    StorageError,
)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "dump-log",
        help="print the batches of .log segments and the entries of .index/.timeindex files",
        description="Print the content of log segment (.log), offset index (.index) and time index "
        "(.timeindex) files, like Kafka's kafka-dump-log.sh. Reads the files directly; "
        "no broker is needed.",
    )
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="segment, index or producer snapshot files to dump (.log, .index, .timeindex, .snapshot)",
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
            elif path.name.endswith(SNAPSHOT_SUFFIX):
                ok = dump_producer_snapshot(path, options)
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
    if not path.name.endswith((*_SUFFIXES, SNAPSHOT_SUFFIX)):
        raise UserError(f"{path}: unsupported file type (expected a .log, .index, .timeindex or .snapshot file)")
    if not path.exists():
        raise UserError(f"{path}: no such file")
    if path.is_dir():
        raise UserError(f"{path}: is a directory")
    if not path.name.endswith((LOG_SUFFIX, SNAPSHOT_SUFFIX)) and _base_offset_from_name(path) is None:
        raise UserError(
            f"{path}: cannot tell the segment's base offset: index files are named "
            f"<base offset>{INDEX_SUFFIX} or <base offset>{TIME_INDEX_SUFFIX}"
        )


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
