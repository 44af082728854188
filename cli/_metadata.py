"""``kraftlog metadata``: read the metadata log that replaced ZooKeeper (DESIGN.md §3).

* ``dump FILE...`` prints the entries of metadata log segments (``*.log``) and the records of
  snapshots (``*.checkpoint``), one line each::

      offset: 7 epoch: 2 timestamp: 1700000000000 TopicRecord {"name":"orders","topic_id":"..."}

  A torn tail (a crash in the middle of a write) is reported with its position; a directory
  argument dumps every segment and snapshot in it. Offline: reads the files, never a server.

* ``tree`` prints the metadata image as the ZooKeeper tree the seed documents describe
  (``/brokers/ids/1``, ``/brokers/topics/t/partitions/0/state``, ``/config/topics/t``, ...), one
  ``path: data`` line per node. The image comes from files (``--snapshot FILE`` and/or
  ``--log-dir DIR``, replayed offline, optionally only up to ``--as-of-offset N``) or from a
  running cluster (``--bootstrap-server``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlog.cli._admin_command import (
    DEFAULT_REQUEST_TIMEOUT_MS,
    add_admin_options,
    error_failed,
    error_name,
    raise_if_error,
    report_error,
    run_with_admin,
)
from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    UserError,
    add_output_option,
    json_dumps,
    non_negative_int,
    print_json,
    print_table,
)
from kraftlog.common import LOG_SUFFIX as _LOG_SUFFIX
from kraftlog.common import METADATA_PARTITION_DIR, PARTIAL_SUFFIX, SNAPSHOT_SUFFIX

__all__ = [
    "add_parser",
    "run",
    "make_admin",
    "TreeImage",
    "image_from_files",
    "tree_nodes",
    "record_fields",
    "METADATA_PARTITION_DIR",
]

_SNAPSHOT_SUFFIXES = (SNAPSHOT_SUFFIX, SNAPSHOT_SUFFIX + PARTIAL_SUFFIX)
_TOPIC, _BROKER = 2, 4  # ConfigResource types
_NO_LEADER = -1


def make_admin(bootstrap_servers: Sequence[str], *, request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS) -> Any:
    """The admin client of this command (tests replace this function with a fake)."""
    from kraftlog.client import Admin

    return Admin(bootstrap_servers, request_timeout_ms=request_timeout_ms)


# ============================================================================== parser


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "metadata",
        help="dump metadata log files; print the metadata image as a ZooKeeper tree",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
        description="Print the metadata image as the ZooKeeper tree of "
        "DESIGN.md §3, built offline from a snapshot and/or the log "
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

    from kraftlog.client import parse_bootstrap_servers
    from kraftlog.proto import admin_pb2, admin_pb2_grpc

    try:
        servers = parse_bootstrap_servers(args.bootstrap_server)
    except ValueError as err:
        raise UserError(str(err)) from err
    rows = []
    failed = False
    for address in servers:
        with grpc.insecure_channel(address) as channel:
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
    wire = record.to_wire()
    wire.pop("type", None)
    wire.pop("version", None)
    return wire


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


@dataclass
class TreeImage:
    """What the tree is drawn from, offline or online, in one shape.

    Offline it is filled from a replayed `MetadataImage`; online from admin responses. Fields that
    one side cannot know stay None (offline: the current controller; online: producer ids).
    """

    source: str
    offset: int | None = None
    epoch: int | None = None
    timestamp_ms: int | None = None
    cluster_id: str | None = None
    controller_id: int | None = None
    controller_epoch: int | None = None
    brokers: dict[int, dict[str, Any]] = field(default_factory=dict)
    # name -> {"topic_id": str, "partitions": {pid: state dict with replicas/adding/removing}}
    topics: dict[str, dict[str, Any]] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)  # "" = cluster default
    next_producer_id: int | None = None


def _endpoint_text(ep: Any) -> str:
    return f"{ep.name}://{ep.host}:{ep.port}"


def _tree_from_image(
    image: Any, partition_controller_epochs: dict[tuple[str, int], int], source: str, cluster_id: str | None
) -> TreeImage:
    tree = TreeImage(
        source=source,
        offset=image.offset,
        epoch=image.epoch,
        timestamp_ms=image.timestamp_ms,
        cluster_id=cluster_id,
        controller_epoch=image.epoch if image.epoch >= 0 else None,
    )
    for bid in sorted(image.cluster.brokers):
        reg = image.cluster.brokers[bid]
        tree.brokers[bid] = {
            "endpoints": [_endpoint_text(ep) for ep in reg.endpoints],
            "listener_security_protocol_map": {ep.name: ep.security_protocol for ep in reg.endpoints},
            "rack": reg.rack,
            "epoch": reg.broker_epoch,
            "fenced": reg.fenced,
            "in_controlled_shutdown": reg.in_controlled_shutdown,
            "incarnation_id": reg.incarnation_id,
        }
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        parts = {}
        for pid in sorted(topic.partitions):
            p = topic.partitions[pid]
            parts[pid] = {
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
                "controller_epoch": partition_controller_epochs.get((topic.topic_id, pid)),
            }
        tree.topics[name] = {"topic_id": topic.topic_id, "partitions": parts}
    for (rtype, rname), values in image.configs.resources.items():
        if rtype == _TOPIC:
            tree.topic_configs[rname] = dict(values)
        elif rtype == _BROKER:
            tree.broker_configs[rname] = dict(values)
    if image.producer_ids.next_producer_id > 0:
        tree.next_producer_id = image.producer_ids.next_producer_id
    return tree


def _path_order(path: str) -> tuple[Any, ...]:
    """Sort key: path components, numbers numerically (partition 10 after 9)."""
    return tuple((0, int(c), "") if c.isdigit() else (1, 0, c) for c in path.split("/"))


def tree_nodes(tree: TreeImage) -> list[tuple[str, Any]]:
    """The ZooKeeper nodes of ``tree`` as ``(path, data)``, in tree order."""
    nodes: list[tuple[str, Any]] = []
    reassigning = []
    for name, topic in tree.topics.items():
        for pid, p in topic["partitions"].items():
            if p["adding_replicas"] or p["removing_replicas"]:
                reassigning.append(
                    {
                        "topic": name,
                        "partition": pid,
                        "replicas": p["replicas"],
                        "target_replicas": [r for r in p["replicas"] if r not in p["removing_replicas"]],
                        "adding_replicas": p["adding_replicas"],
                        "removing_replicas": p["removing_replicas"],
                    }
                )
    if reassigning:
        reassigning.sort(key=lambda r: (r["topic"], r["partition"]))
        nodes.append(("/admin/reassign_partitions", {"version": 1, "partitions": reassigning}))
    for bid, data in tree.brokers.items():
        nodes.append((f"/brokers/ids/{bid}", data))
    for name, topic in tree.topics.items():
        parts = topic["partitions"]
        data = {
            "topic_id": topic["topic_id"],
            "partitions": {str(pid): p["replicas"] for pid, p in parts.items()},
            "adding_replicas": {str(pid): p["adding_replicas"] for pid, p in parts.items() if p["adding_replicas"]},
            "removing_replicas": {
                str(pid): p["removing_replicas"] for pid, p in parts.items() if p["removing_replicas"]
            },
        }
        nodes.append((f"/brokers/topics/{name}", data))
        for pid, p in parts.items():
            nodes.append(
                (
                    f"/brokers/topics/{name}/partitions/{pid}/state",
                    {
                        "controller_epoch": p["controller_epoch"],
                        "leader": p["leader"],
                        "leader_epoch": p["leader_epoch"],
                        "isr": p["isr"],
                        "partition_epoch": p["partition_epoch"],
                    },
                )
            )
    if tree.cluster_id:
        nodes.append(("/cluster/id", {"version": "1", "id": tree.cluster_id}))
    for name in tree.topics:  # every topic has a config node, as in ZooKeeper (empty: defaults)
        nodes.append((f"/config/topics/{name}", dict(sorted(tree.topic_configs.get(name, {}).items()))))
    for rname, values in tree.broker_configs.items():
        if values:
            nodes.append((f"/config/brokers/{rname or '<default>'}", dict(sorted(values.items()))))
    if tree.controller_id is not None:
        nodes.append(("/controller", {"controller_id": tree.controller_id}))
    if tree.controller_epoch is not None:
        nodes.append(("/controller_epoch", tree.controller_epoch))
    if tree.next_producer_id is not None:
        nodes.append(("/latest_producer_id_block", {"next_producer_id": tree.next_producer_id}))
    nodes.sort(key=lambda n: _path_order(n[0]))
    return nodes


# ---------------------------------------------------------------------------- offline


def _metadata_dir(text: str) -> Path:
    d = Path(text)
    if not d.exists():
        raise UserError(f"--log-dir {d}: no such directory")
    if not d.is_dir():
        raise UserError(f"--log-dir {d}: not a directory")
    return d / METADATA_PARTITION_DIR if (d / METADATA_PARTITION_DIR).is_dir() else d


def _cluster_id_near(*dirs: Path) -> str | None:
    """The cluster id of the ``meta.properties`` in one of ``dirs`` (or their parents), if any."""
    try:
        from kraftlog import storage
    except ImportError:
        return None
    seen: set[Path] = set()
    for d in dirs:
        for candidate in (d, d.parent):
            if candidate in seen:
                continue
            seen.add(candidate)
            try:
                meta = storage.read_meta_properties(candidate)
            except Exception:  # a damaged meta.properties does not stop the tree
                meta = None
            if meta is not None:
                return meta.cluster_id
    return None


def image_from_files(
    snapshot: str | None, log_dir: str | None, as_of_offset: int | None = None
) -> tuple[Any, dict[tuple[str, int], int], list[str]]:
    """Replay a snapshot and/or a metadata log dir offline.

    Returns the image, the controller epoch that last wrote each partition (ZooKeeper's
    ``controller_epoch`` of the partition state; a snapshot's own epoch for partitions it holds),
    and notes for stderr (torn tails, a log that ends before ``as_of_offset``). Raises UserError for
    bad arguments and lets the readers' errors (corrupt files, gaps) through.
    """
    from kraftlog import metadata_log

    notes: list[str] = []
    part_epochs: dict[tuple[str, int], int] = {}
    mdir = _metadata_dir(log_dir) if log_dir is not None else None
    if (
        mdir is not None
        and snapshot is None
        and not metadata_log.list_segments(mdir)
        and not metadata_log.list_snapshots(mdir)
    ):
        raise UserError(
            f"--log-dir {log_dir}: no metadata log segments or snapshots there (give the "
            f"node's metadata.log.dir or its {METADATA_PARTITION_DIR} directory)"
        )
    snap = None
    if snapshot is not None:
        p = Path(snapshot)
        if not p.is_file():
            raise UserError(f"--snapshot {p}: no such file")
        snap = metadata_log.read_snapshot(p)
        if as_of_offset is not None and as_of_offset < snap.offset:
            raise UserError(f"--as-of-offset {as_of_offset} is before the snapshot's offset {snap.offset}")
    elif mdir is not None:
        candidates = sorted(metadata_log.list_snapshots(mdir), key=lambda s: s.offset)
        if as_of_offset is not None:
            candidates = [s for s in candidates if s.offset <= as_of_offset]
        if candidates:
            snap = metadata_log.read_snapshot(candidates[-1].path)
    image = metadata_log.MetadataImage.EMPTY
    start = 0
    if snap is not None:
        image = metadata_log.MetadataImage.from_records(snap.records, snap.offset, snap.epoch, snap.timestamp_ms)
        for r in snap.records:
            if isinstance(r, metadata_log.PartitionRecord):
                part_epochs[(r.topic_id, r.partition_id)] = snap.epoch
        start = snap.offset + 1
    if mdir is None:
        return image, part_epochs, notes

    def on_torn(path: Path, bad: Any) -> None:
        notes.append(f"torn tail in {path} at position {bad.position} ({bad.reason}); the entries after it are ignored")

    delta = metadata_log.MetadataDelta(image)
    replayed = 0
    for entry in metadata_log.read_log_dir(mdir, from_offset=start, on_torn=on_torn):
        if as_of_offset is not None and entry.offset > as_of_offset:
            break
        delta.replay(entry)
        replayed += 1
        record = entry.record
        if isinstance(record, (metadata_log.PartitionRecord, metadata_log.PartitionChangeRecord)):
            part_epochs[(record.topic_id, record.partition_id)] = entry.epoch
        elif isinstance(record, metadata_log.RemoveTopicRecord):
            for key in [k for k in part_epochs if k[0] == record.topic_id]:
                del part_epochs[key]
    if replayed:
        image = delta.apply()
    if as_of_offset is not None and image.offset < as_of_offset:
        notes.append(f"the metadata log ends at offset {image.offset}, before --as-of-offset {as_of_offset}")
    return image, part_epochs, notes


def _offline_tree(args: argparse.Namespace) -> TreeImage:
    image, part_epochs, notes = image_from_files(args.snapshot, args.log_dir, args.as_of_offset)
    for note in notes:
        print(f"kraftlog metadata: warning: {note}", file=sys.stderr)
    sources = []
    dirs: list[Path] = []
    if args.snapshot is not None:
        sources.append(f"snapshot {args.snapshot}")
        dirs.append(Path(args.snapshot).resolve().parent)
    if args.log_dir is not None:
        sources.append(f"log dir {args.log_dir}")
        d = Path(args.log_dir).resolve()
        dirs += [d, d / METADATA_PARTITION_DIR]
    return _tree_from_image(image, part_epochs, " + ".join(sources), _cluster_id_near(*dirs))


# ---------------------------------------------------------------------------- online


def _online_tree(admin: Any, args: argparse.Namespace) -> TreeImage:
    cluster = admin.describe_cluster()
    raise_if_error(cluster.error)
    quorum = admin.describe_quorum()
    raise_if_error(quorum.error)
    topics = admin.describe_topics([])
    tree = TreeImage(
        source="cluster " + ",".join(args.bootstrap_server),
        cluster_id=cluster.cluster_id or None,
        controller_id=quorum.leader_id if quorum.leader_id >= 0 else None,
        controller_epoch=quorum.leader_epoch,
    )
    for b in sorted(cluster.brokers, key=lambda b: b.broker_id):
        tree.brokers[b.broker_id] = {
            "endpoints": [f"{b.host}:{b.port}"] if b.host else [],
            "rack": b.rack or None,
            "epoch": b.broker_epoch,
            "fenced": b.fenced,
            "in_controlled_shutdown": b.in_controlled_shutdown,
        }
    for t in sorted(topics.topics, key=lambda t: t.name):
        raise_if_error(t.error)
        parts = {}
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            parts[p.partition_index] = {
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "leader": p.leader_id,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "adding_replicas": list(p.adding_replicas),
                "removing_replicas": list(p.removing_replicas),
                "controller_epoch": None,
            }  # not served over the admin API
        tree.topics[t.name] = {"topic_id": t.topic_id, "partitions": parts}
        if t.configs:
            tree.topic_configs[t.name] = dict(t.configs)
    resources = [(_BROKER, str(bid)) for bid in tree.brokers] + [(_BROKER, "")]
    configs = admin.describe_configs(resources)
    for result in configs.results:
        if error_failed(result.error):
            report_error(
                args,
                f"configs of broker {result.resource.resource_name or '<default>'}: "
                f"{error_name(result.error)}: {result.error.message}",
            )
            continue
        wanted = "DYNAMIC_BROKER_CONFIG" if result.resource.resource_name else "DYNAMIC_DEFAULT_BROKER_CONFIG"
        values = {
            e.name: (e.value if e.has_value and not e.is_sensitive else None)
            for e in result.configs
            if e.source == wanted
        }
        if values:
            tree.broker_configs[result.resource.resource_name] = values
    return tree


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
        holder: list[TreeImage] = []

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
    nodes = tree_nodes(tree)
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
