"""``kraftlog metadata tree``: the metadata image laid out as the ZooKeeper tree it replaces, from
a running cluster (online) or from log segments and snapshots on disk (offline, also as of an
earlier offset); see `cli._metadata` for the command.

Both ways draw the tree with one builder, `kraftlog.metadata_log.zk_tree_nodes` (ZooKeeper-mode
Kafka's node formats; it says what goes where): offline over the image replayed here, online over
the active controller's committed image (AdminService ``DescribeMetadataTree``), so the two trees of
one log are equal. Online, the nodes the caller may not describe are left out (with ACLs on, a
principal that is no super user sees what its Describe and DescribeConfigs ACLs allow) and a
warning says what is missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftlog.cli._admin_command import raise_if_error
from kraftlog.cli._common import UserError
from kraftlog.common import METADATA_PARTITION_DIR


@dataclass
class TreeView:
    """A drawn tree and where it came from: ``nodes`` are ``(path, data)`` in tree order; offset,
    epoch and time are the image's (None when unknown); ``omitted`` says what the caller was not
    allowed to see (online only)."""

    source: str
    nodes: list[tuple[str, Any]]
    offset: int | None = None
    epoch: int | None = None
    timestamp_ms: int | None = None
    omitted: list[str] = field(default_factory=list)


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
) -> tuple[Any, Any, list[str]]:
    """Replay a snapshot and/or a metadata log dir offline.

    Returns the image, its `MetadataProvenance` (the controller epoch that last wrote each
    partition, ZooKeeper's ``controller_epoch`` of the partition state, and each broker's
    registration time), and notes for stderr (torn tails, a log that ends before ``as_of_offset``). Raises UserError for
    bad arguments and lets the readers' errors (corrupt files, gaps) through.
    """
    from kraftlog import metadata_log

    notes: list[str] = []
    provenance = metadata_log.MetadataProvenance()
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
        provenance = metadata_log.MetadataProvenance.from_snapshot(snap.records, snap.epoch, snap.timestamp_ms)
        start = snap.offset + 1
    if mdir is None:
        return image, provenance, notes

    def on_torn(path: Path, bad: Any) -> None:
        notes.append(f"torn tail in {path} at position {bad.position} ({bad.reason}); the entries after it are ignored")

    delta = metadata_log.MetadataDelta(image)
    replayed = 0
    for entry in metadata_log.read_log_dir(mdir, from_offset=start, on_torn=on_torn):
        if as_of_offset is not None and entry.offset > as_of_offset:
            break
        delta.replay(entry)
        provenance.observe(entry)
        replayed += 1
    if replayed:
        image = delta.apply()
    if as_of_offset is not None and image.offset < as_of_offset:
        notes.append(f"the metadata log ends at offset {image.offset}, before --as-of-offset {as_of_offset}")
    return image, provenance, notes


def _offline_tree(args: argparse.Namespace) -> TreeView:
    from kraftlog import metadata_log

    image, provenance, notes = image_from_files(args.snapshot, args.log_dir, args.as_of_offset)
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
    nodes = metadata_log.zk_tree_nodes(image, provenance, cluster_id=_cluster_id_near(*dirs))
    return TreeView(" + ".join(sources), nodes, image.offset, image.epoch, image.timestamp_ms)


def _online_tree(admin: Any, args: argparse.Namespace) -> TreeView:
    """The active controller's tree (AdminService ``DescribeMetadataTree``)."""
    from kraftlog.proto import admin_pb2

    response = admin.call("DescribeMetadataTree", admin_pb2.DescribeMetadataTreeRequest())
    raise_if_error(response.error)
    for what in response.omitted:
        print(f"kraftlog metadata: warning: not authorized, left out: {what}", file=sys.stderr)
    return TreeView(
        "cluster " + ",".join(args.bootstrap_server),
        [(node.path, json.loads(node.data_json)) for node in response.nodes],
        response.offset,
        response.epoch,
        response.timestamp_ms,
        list(response.omitted),
    )
