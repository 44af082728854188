"""``kraftlog metadata``: read the metadata log that replaced ZooKeeper.

* ``dump FILE...`` prints the entries of metadata log segments (``*.log``) and the records of
  snapshots (``*.checkpoint``), one line each::

      offset: 7 epoch: 2 timestamp: 1700000000000 TopicRecord {"name":"orders","topic_id":"..."}

  A torn tail (a crash in the middle of a write) is reported with its position; a directory
  argument dumps every segment and snapshot in it. Offline: reads the files, never a server.

* ``tree`` prints the metadata image as the ZooKeeper tree it replaced
  (``/brokers/ids/1``, ``/brokers/topics/t/partitions/0/state``, ``/config/topics/t``, ...), one
  ``path: data`` line per node. The image comes from files (``--snapshot FILE`` and/or
  ``--log-dir DIR``, replayed offline, optionally only up to ``--as-of-offset N``) or from a
  running cluster (``--bootstrap-server``); both are drawn by one builder, so the trees of one log
  are equal (online, nodes the caller may not describe are left out, with a warning).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kraftlog.cli._admin_command import (
    add_admin_options,
    make_admin,
    report_error,
    run_with_admin,
)
from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Subparsers,
    UserError,
    add_output_option,
    described,
    json_dumps,
    non_negative_int,
    print_json,
    print_table,
    security_kwargs,
    topic_id_text,
)
from kraftlog.cli._metadata_tree import (
    TreeView,
    _offline_tree,
    _online_tree,
    image_from_files,
)
from kraftlog.common import LOG_SUFFIX as _LOG_SUFFIX
from kraftlog.common import METADATA_PARTITION_DIR, PARTIAL_SUFFIX, SNAPSHOT_SUFFIX

__all__ = [
    "add_parser",
    "run",
    "make_admin",
    "TreeView",
    "image_from_files",
    "record_fields",
    "METADATA_PARTITION_DIR",
]

_SNAPSHOT_SUFFIXES = (SNAPSHOT_SUFFIX, SNAPSHOT_SUFFIX + PARTIAL_SUFFIX)
_NO_LEADER = -1


# ============================================================================== parser


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "metadata",
        help="dump metadata log files; print the metadata image as a ZooKeeper tree",
        **described(__doc__),
    )
    sub = parser.add_subparsers(dest="metadata_command", metavar="ACTION")
    sub.required = True

    dump = sub.add_parser("dump", help="print the records of metadata log segments and snapshots")
    dump.add_argument(
        "files", nargs="+", metavar="FILE", help="segment (.log) or snapshot (.checkpoint) files, or metadata log dirs"
    )
    add_output_option(dump)

    tree = sub.add_parser(
        "tree",
        help="print the metadata image as the ZooKeeper tree",
        description="Print the metadata image as the ZooKeeper tree it replaced, "
        "built offline from a snapshot and/or the log "
        "files of a metadata log dir, or read from a running cluster.",
    )
    tree.add_argument("--snapshot", default=None, metavar="FILE", help="start from this snapshot (.checkpoint) file")
    tree.add_argument(
        "--log-dir",
        default=None,
        metavar="DIR",
        help="replay the log segments of this metadata log dir (the dir holding "
        f"{METADATA_PARTITION_DIR}/, or that dir itself), starting from its "
        "latest snapshot unless --snapshot is given",
    )
    tree.add_argument(
        "--as-of-offset",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="the image as of log offset N (with --log-dir)",
    )
    tree.add_argument(
        "--path",
        default=None,
        metavar="/ZNODE",
        help="print only this node and the nodes below it (e.g. /brokers/topics)",
    )
    add_admin_options(tree, required=False)

    snap = sub.add_parser(
        "snapshot",
        help="make every given controller write a metadata snapshot now",
        description="Ask each controller named by --bootstrap-server to snapshot its "
        "metadata image now (otherwise done every "
        "metadata.log.max.record.bytes.between.snapshots).",
    )
    add_admin_options(snap, required=True)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.metadata_command == "dump":
        return dump_files(args.files, json=args.output == "json")
    if args.metadata_command == "snapshot":
        return _snapshot(args)
    return _tree(args)


def _snapshot(args: argparse.Namespace) -> int:
    """CreateMetadataSnapshot on each controller in turn (it is served locally, never forwarded)."""
    import grpc

    from kraftlog.client import client_security, parse_bootstrap_servers
    from kraftlog.proto import admin_pb2, admin_pb2_grpc

    try:
        servers = parse_bootstrap_servers(args.bootstrap_server)
    except ValueError as err:
        raise UserError(str(err)) from err
    rows = []
    failed = False
    security = client_security(**security_kwargs(args))  # --command-config, as every command
    for address in servers:
        with security.open(address, ()) as channel:
            try:
                resp = admin_pb2_grpc.AdminServiceStub(channel).CreateMetadataSnapshot(
                    admin_pb2.CreateMetadataSnapshotRequest(), timeout=args.request_timeout_ms / 1000
                )
            except grpc.RpcError as err:
                failed = True
                rows.append({"server": address, "error": err.code().name})
                continue
        rows.append(
            {
                "server": address,
                "node_id": resp.node_id,
                "snapshot_offset": resp.snapshot_offset,
                "snapshot_epoch": resp.snapshot_epoch,
                "path": resp.path,
            }
        )
    if args.output == "json":
        print_json({"snapshots": rows})
    else:
        print_table(
            ["server", "node_id", "snapshot_offset", "epoch", "path"],
            [
                [
                    r["server"],
                    r.get("node_id", "-"),
                    r.get("snapshot_offset", r.get("error")),
                    r.get("snapshot_epoch", "-"),
                    r.get("path", "-"),
                ]
                for r in rows
            ],
        )
    return 1 if failed else 0


# ============================================================================== dump


def record_fields(record: Any) -> dict[str, Any]:
    """A record's fields as JSON-ready values (without its type id and version)."""
    wire: dict[str, Any] = record.to_wire()
    wire.pop("type", None)
    wire.pop("version", None)
    for key in _UUID_FIELDS & wire.keys():  # shown as Kafka's metadata shell shows them
        wire[key] = topic_id_text(wire[key])
    for key in getattr(record, "SENSITIVE_FIELDS", ()):  # SCRAM salts and keys are never printed
        wire[key] = "[hidden]"
    return wire


_UUID_FIELDS = frozenset({"topic_id", "incarnation_id"})


def _record_json(record: Any) -> dict[str, Any]:
    return {"record_type": type(record).__name__, "version": record.VERSION, "record": record_fields(record)}


def _expand(paths: Iterable[str]) -> list[Path]:
    """Check every argument before anything is printed; directories become their files."""
    from kraftlog import metadata_log

    out: list[Path] = []
    for text in paths:
        p = Path(text)
        if not p.exists():
            raise UserError(f"{p}: no such file or directory")
        if p.is_dir():
            d = p / METADATA_PARTITION_DIR if (p / METADATA_PARTITION_DIR).is_dir() else p
            found = [s.path for s in sorted(metadata_log.list_snapshots(d), key=lambda s: s.offset)] + [
                s.path for s in sorted(metadata_log.list_segments(d), key=lambda s: s.base_offset)
            ]
            if not found:
                raise UserError(f"{p}: no metadata log segments or snapshots in this directory")
            out.extend(found)
            continue
        if not (p.name.endswith(_LOG_SUFFIX) or p.name.endswith(_SNAPSHOT_SUFFIXES)):
            raise UserError(f"{p}: not a metadata log file (expected a .log segment or a .checkpoint snapshot)")
        out.append(p)
    return out


def dump_files(paths: Sequence[str], *, json: bool = False) -> int:
    """Dump every file; 0, or 1 when a file could not be read (the others are still dumped)."""
    from kraftlog import metadata_log

    files = _expand(paths)
    status = EXIT_OK
    for path in files:
        try:
            content = metadata_log.read_metadata_file(path)
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as err:  # MetadataRecordError and friends are ValueErrors
            reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            print(f"kraftlog metadata: error: cannot dump {path}: {reason}", file=sys.stderr)
            if json:
                print_json({"file": str(path), "error": reason})
            status = EXIT_FAILURE
            continue
        if isinstance(content, metadata_log.Snapshot):
            _dump_snapshot(path, content, json)
        else:
            _dump_segment(path, content, json)
    return status


def _dump_segment(path: Path, seg: Any, json: bool) -> None:
    if json:
        print_json(
            {
                "file": str(path),
                "type": "segment",
                "base_offset": seg.base_offset,
                "entries": [
                    {"offset": e.offset, "epoch": e.epoch, "timestamp_ms": e.timestamp_ms, **_record_json(e.record)}
                    for e in seg.entries
                ],
                "valid_bytes": seg.valid_bytes,
                "size_bytes": seg.size_bytes,
                "torn_at": seg.torn_at,
                "torn_reason": seg.error,
            }
        )
        return
    print(f"Dumping {path}")
    print(f"Metadata log segment, base offset: {seg.base_offset if seg.base_offset is not None else 'unknown'}")
    for e in seg.entries:
        print(
            f"offset: {e.offset} epoch: {e.epoch} timestamp: {e.timestamp_ms} "
            f"{type(e.record).__name__} {json_dumps(record_fields(e.record))}"
        )
    if seg.torn_at is not None:
        print(
            f"Found torn tail at position {seg.torn_at}: {seg.error} "
            f"(valid data ends at position {seg.valid_bytes} of {seg.size_bytes} bytes; "
            f"{seg.size_bytes - seg.valid_bytes} bytes ignored)"
        )


def _dump_snapshot(path: Path, snap: Any, json: bool) -> None:
    if json:
        print_json(
            {
                "file": str(path),
                "type": "snapshot",
                "offset": snap.offset,
                "epoch": snap.epoch,
                "timestamp_ms": snap.timestamp_ms,
                "record_count": len(snap.records),
                "records": [_record_json(r) for r in snap.records],
            }
        )
        return
    print(f"Dumping {path}")
    print(
        f"Snapshot offset: {snap.offset} epoch: {snap.epoch} timestamp: {snap.timestamp_ms} "
        f"records: {len(snap.records)}"
    )
    for i, r in enumerate(snap.records):
        print(f"record: {i} {type(r).__name__} {json_dumps(record_fields(r))}")


# ============================================================================== tree


# ---------------------------------------------------------------------------- offline


# ---------------------------------------------------------------------------- online


# ---------------------------------------------------------------------------- print


def _tree(args: argparse.Namespace) -> int:
    online = args.bootstrap_server is not None
    if online and (args.snapshot is not None or args.log_dir is not None):
        raise UserError("--bootstrap-server cannot be combined with --snapshot or --log-dir")
    if not online and args.snapshot is None and args.log_dir is None:
        raise UserError("give --snapshot FILE, --log-dir DIR or --bootstrap-server HOST:PORT")
    if args.as_of_offset is not None and args.log_dir is None:
        raise UserError("--as-of-offset needs --log-dir")
    if args.path is not None and not args.path.startswith("/"):
        raise UserError(f"--path {args.path!r} must start with '/'")
    if online:
        holder: list[TreeView] = []

        def body(admin: Any) -> int:
            holder.append(_online_tree(admin, args))
            return EXIT_OK

        status = run_with_admin(args, make_admin, body)
        if status != EXIT_OK:
            return status
        tree = holder[0]
    else:
        from kraftlog import metadata_log

        try:
            tree = _offline_tree(args)
        except (metadata_log.MetadataRecordError, metadata_log.MetadataReplayError) as err:
            report_error(args, f"cannot rebuild the metadata image: {err}")
            return EXIT_FAILURE
    nodes = tree.nodes
    if args.path is not None:
        prefix = args.path.rstrip("/") or "/"
        nodes = [(p, d) for p, d in nodes if prefix == "/" or p == prefix or p.startswith(prefix + "/")]
    if args.output == "json":
        print_json(
            {
                "source": tree.source,
                "offset": tree.offset,
                "epoch": tree.epoch,
                "timestamp_ms": tree.timestamp_ms,
                "nodes": dict(nodes),
            }
        )
        return EXIT_OK
    header = f"# metadata image from {tree.source}"
    if tree.offset is not None and tree.offset >= 0:
        header += f" at offset {tree.offset}"
        if tree.epoch is not None and tree.epoch >= 0:
            header += f" (epoch {tree.epoch})"
    elif tree.offset is not None:
        header += " (empty: no entries)"
    print(header)
    for path, data in nodes:
        print(f"{path}: {json_dumps(data)}")
    return EXIT_OK
