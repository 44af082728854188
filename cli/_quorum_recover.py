"""``kraftlog quorum recover --snapshot FILE --config NODE_CONFIG``: restart a quorum that lost its state.

When every controller lost its metadata log (disks replaced, a bad rollout wiped the dirs), the
metadata can be rebuilt from archived segments with ``kraftlog snapshot rebuild`` and installed on
every controller with this command. On the node named by ``--config`` (it must be stopped) it:

1. checks the snapshot (full validation) and that the node is a formatted controller
   (``kraftlog storage format`` with the cluster's id first if ``meta.properties`` was lost too);
2. replaces ``<metadata.log.dir>/__cluster_metadata-0/``: removes its segments and snapshots,
   installs the snapshot under its canonical name ``{offset:020d}-{epoch:010d}.checkpoint`` and an
   empty segment ``{offset+1:020d}.log``, so the controller loads its image from the snapshot and
   continues the log at offset + 1;
3. clears ``<metadata.log.dir>/raft/`` and seeds it with a Raft journal and full dump that say
   "nothing applied yet, the next metadata offset is snapshot offset + 1, term = snapshot epoch".
   A fresh Raft state alone is not enough: its state machine would number new entries from offset
   0 again, and every controller would skip them as already durable; and
   an election in a term below the snapshot's epoch would write entries whose epoch goes back.

Run it on **every** controller with **the same** snapshot file before starting any of them: the
seeded Raft states are then identical, so the controllers agree on the log from the first
election on (the new active controller's epoch is the snapshot's epoch + 1). Restart the brokers too:
they then fetch the image from the recovered controllers instead of holding on to offsets the new
log will reuse. Existing metadata state is only replaced with ``--force``.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from kraftlog.cli._common import EXIT_FAILURE, EXIT_OK, Subparsers, UserError, add_output_option, described, print_json
from kraftlog.common import METADATA_PARTITION_DIR, RAFT_DIR, fsync_directory

__all__ = ["add_recover_parser", "run_recover", "recover_controller", "seed_raft_state"]

_NOOP_COMMAND = b"\x01"  # pysyncobj's _COMMAND_TYPE.NO_OP


def add_recover_parser(sub: Subparsers) -> argparse.ArgumentParser:
    from kraftlog.cli._storage import add_config_options

    recover = sub.add_parser(
        "recover",
        help="install a (Spark-rebuilt) snapshot as this controller's whole metadata state",
        **described(__doc__),
    )
    recover.add_argument(
        "--snapshot",
        required=True,
        metavar="FILE",
        help="the snapshot to restart from (the same file on every controller)",
    )
    add_config_options(recover)
    recover.add_argument(
        "--force", action="store_true", help="replace the metadata log and Raft state this node still has"
    )
    add_output_option(recover)
    return recover


def run_recover(args: argparse.Namespace) -> int:
    from kraftlog import metadata_log
    from kraftlog.cli._storage import load_config_args

    cfg = load_config_args(args)
    try:
        report = recover_controller(cfg, args.snapshot, force=args.force)
    except (metadata_log.MetadataRecordError, OSError) as err:
        print(f"kraftlog quorum recover: error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    if args.output == "json":
        print_json(report)
        return EXIT_OK
    print(f"Node {report['node_id']}: metadata state recovered from {report['snapshot']}")
    print(
        f"  snapshot offset {report['offset']} epoch {report['epoch']} ({report['records']} records) "
        f"installed as {report['installed']}"
    )
    print(f"  the metadata log continues at offset {report['next_offset']} ({report['segment']})")
    print(f"  Raft state reset in {report['raft_dir']} (term {report['raft_term']})")
    if report["removed"]:
        print(f"  removed: {', '.join(report['removed'])}")
    print("Run this on every controller with the same snapshot, then start them all.")
    return EXIT_OK


def _raft_port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as err:
            return err.errno == errno.EADDRINUSE
    return False


def _existing_state(mdir: Path, raft_dir: Path) -> list[Path]:
    from kraftlog import metadata_log
    from kraftlog.common import PARTIAL_SUFFIX

    found: list[Path] = []
    for seg in metadata_log.list_segments(mdir):
        if seg.path.stat().st_size > 0:
            found.append(seg.path)
    found += [s.path for s in metadata_log.list_snapshots(mdir)]
    if mdir.is_dir():
        found += [p for p in mdir.iterdir() if p.name.endswith(PARTIAL_SUFFIX)]
    if raft_dir.is_dir():
        found += sorted(p for p in raft_dir.iterdir())
    return found


def seed_raft_state(
    raft_dir: Path,
    *,
    next_offset: int,
    term: int,
    voters: dict[int, str],
    fsync: bool = True,
    raft_voters: dict[int, Any] | None = None,
) -> None:
    """Write a Raft journal and full dump in which nothing is applied yet and the metadata state
    machine's next offset is ``next_offset``; the journal holds two NO_OP entries of ``term``.

    Every controller seeded with the same arguments has the same Raft log, so they can elect a
    leader (in term ``term + 1``) and replicate from there; pysyncobj loads the dump at start and
    `MetadataStateMachine.from_state` continues numbering at ``next_offset``.

    ``raft_voters`` (a dynamic quorum, issue 26: the snapshot's voter set as `quorum.raft.RaftVoter`s):
    the dump carries them as its committed voter set and ``raft/voters.msgpack`` keeps them, as a
    controller's own Raft dir would after the voter changes the snapshot replaced.
    """
    from kraftlog.quorum.raft import DUMP_FILE, JOURNAL_FILE, FullDump, RaftJournal, encode_dump, write_voters_file

    raft_dir.mkdir(parents=True, exist_ok=True)
    prev = (_NOOP_COMMAND, 1, term)
    last = (_NOOP_COMMAND, 2, term)
    journal = RaftJournal(raft_dir / JOURNAL_FILE, fsync=fsync)
    try:
        journal.add(*prev)
        journal.add(*last)
        journal.setRaftCommitIndex(2)
        journal.setCurrentTerm(term, None)
    finally:
        journal.close()
    state = {"next_offset": next_offset, "entries": [], "index_map": [], "index_floor": [2, next_offset]}
    listed = tuple(v for _vid, v in sorted((raft_voters or {}).items()))
    dump = FullDump(raft_last=last, raft_prev=prev, cluster=tuple(sorted(voters.values())), state=state, voters=listed)
    dump_path = raft_dir / DUMP_FILE
    tmp = dump_path.with_name(dump_path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(encode_dump(dump))
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
    os.replace(tmp, dump_path)
    if raft_voters:
        write_voters_file(raft_dir, raft_voters)
    if fsync:
        fsync_directory(raft_dir)


def _snapshot_raft_voters(cfg: Any, records: Any, raft_dir: Path) -> dict[int, Any] | None:
    """The voter set a snapshot's control records name (issue 26), as the Raft layer keeps it: the
    Raft endpoint is the controller port plus ``controller.quorum.raft.port.offset``; each public key
    is the one this node's voter file kept for that (id, directory id), else the configured one.
    None for a snapshot without a voter set (a static quorum, or one written by an older build)."""
    from kraftlog.common.errors import CorruptMessageError
    from kraftlog.metadata_log import QuorumControlState
    from kraftlog.quorum.raft import RaftVoter, parse_voter_keys, public_key_text, read_voters_file

    control = QuorumControlState.of(records)
    if control.voters is None:
        return None
    try:
        kept = read_voters_file(raft_dir) or {}
    except CorruptMessageError:
        kept = {}
    configured = {
        vid: public_key_text(k) for vid, k in parse_voter_keys(cfg["controller.quorum.raft.voter.keys"]).items()
    }
    offset = int(cfg["controller.quorum.raft.port.offset"])
    voters: dict[int, Any] = {}
    for v in control.voters.voters:
        endpoint = next((e for e in v.endpoints if e.name == "CONTROLLER"), v.endpoints[0])
        old = kept.get(v.voter_id)
        key = old.public_key if old is not None and old.directory_id == v.voter_directory_id else None
        if cfg["controller.quorum.raft.authentication"] != "password":
            key = key or configured.get(v.voter_id)
        else:
            key = None
        voters[v.voter_id] = RaftVoter(
            v.voter_id, endpoint.host, endpoint.port + offset, v.voter_directory_id or None, key
        )
    return voters


def _install_snapshot(source: Path, mdir: Path, offset: int, epoch: int) -> Path:
    """Copy the snapshot bytes under their canonical name: .part, fsync, rename, fsync the dir."""
    from kraftlog.common import PARTIAL_SUFFIX
    from kraftlog.metadata_log.log_files import snapshot_file_name

    final = mdir / snapshot_file_name(offset, epoch)
    part = final.with_name(final.name + PARTIAL_SUFFIX)
    with open(source, "rb") as src, open(part, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(part, final)
    fsync_directory(mdir)
    return final


def recover_controller(cfg: Any, snapshot: str | os.PathLike[str], *, force: bool = False) -> dict[str, Any]:
    """Install ``snapshot`` as the whole metadata state of the controller configured by ``cfg``
    (see the module docstring). Raises `UserError` for a node or snapshot that cannot be used."""
    from kraftlog import metadata_log
    from kraftlog.node import NodeStartupError, check_formatted, resolve_quorum

    if not cfg.is_controller:
        raise UserError(f"node {cfg.node_id} has no controller role (process.roles = {list(cfg.roles)})")
    source = Path(snapshot)
    if not source.is_file():
        raise UserError(f"--snapshot {source}: no such file")
    snap = metadata_log.read_snapshot(source)  # full validation before anything is touched
    metadata_log.MetadataImage.from_records(snap.records, snap.offset, snap.epoch, snap.timestamp_ms)
    check_formatted(cfg)  # a lost meta.properties: format again with the cluster's id first
    try:
        cfg = resolve_quorum(cfg)  # a dynamic quorum: the formatted voter set
    except NodeStartupError as err:
        raise UserError(err.message) from err
    # a controller formatted --no-initial-controllers is in no configured voter set: its own listener
    host, port = cfg.quorum_voters.get(cfg.node_id) or cfg.controller_endpoint
    offset_cfg = cfg["controller.quorum.raft.port.offset"]
    if _raft_port_in_use(host, port + offset_cfg) or _raft_port_in_use(host, port):
        raise UserError(
            f"node {cfg.node_id} seems to be running ({host}:{port} or its Raft port is in use): stop it first"
        )
    base = Path(cfg.metadata_log_dir)
    mdir = base / METADATA_PARTITION_DIR
    raft_dir = base / RAFT_DIR
    existing = _existing_state(mdir, raft_dir)
    if existing and not force:
        listing = ", ".join(str(p) for p in existing[:6]) + (" ..." if len(existing) > 6 else "")
        raise UserError(
            f"node {cfg.node_id} still has metadata state ({listing}); pass --force to replace it with the snapshot"
        )
    removed: list[str] = []
    mdir.mkdir(parents=True, exist_ok=True)
    # Segments newest first, so an interruption leaves a shorter but valid log; then snapshots.
    for seg in reversed(metadata_log.list_segments(mdir)):
        seg.path.unlink()
        removed.append(seg.path.name)
    for snap_id in metadata_log.list_snapshots(mdir):
        if snap_id.path.resolve() == source.resolve():
            continue
        snap_id.path.unlink()
        removed.append(snap_id.path.name)
    metadata_log.log_files.remove_partial_snapshots(mdir)
    # the voter set as of the snapshot, read before the Raft dir (and the keys its voter file kept) goes
    raft_voters = _snapshot_raft_voters(cfg, snap.records, raft_dir)
    if raft_dir.exists():
        shutil.rmtree(raft_dir)
        removed.append(f"{RAFT_DIR}/")
    installed = (
        source
        if source.parent.resolve() == mdir.resolve()
        and source.name == metadata_log.log_files.snapshot_file_name(snap.offset, snap.epoch)
        else None
    )
    if installed is None:
        installed = _install_snapshot(source, mdir, snap.offset, snap.epoch)
    fsync = bool(cfg["controller.quorum.fsync"])
    with metadata_log.MetadataLogWriter(mdir, segment_bytes=cfg["metadata.log.segment.bytes"], fsync=fsync) as w:
        next_offset = w.next_offset
        segment = w.active_segment
    if next_offset != snap.offset + 1:  # pragma: no cover - the writer starts after the snapshot
        raise UserError(f"the metadata log would continue at {next_offset}, not {snap.offset + 1}")
    voters = {vid: f"{h}:{p + offset_cfg}" for vid, (h, p) in cfg.quorum_voters.items()}
    if raft_voters:
        voters = {vid: v.address for vid, v in raft_voters.items()}
    seed_raft_state(
        raft_dir, next_offset=next_offset, term=max(snap.epoch, 0), voters=voters, fsync=fsync, raft_voters=raft_voters
    )
    return {
        "node_id": cfg.node_id,
        "snapshot": str(source),
        "offset": snap.offset,
        "epoch": snap.epoch,
        "timestamp_ms": snap.timestamp_ms,
        "records": len(snap.records),
        "installed": str(installed),
        "next_offset": next_offset,
        "segment": str(segment),
        "raft_dir": str(raft_dir),
        "raft_term": max(snap.epoch, 0),
        "voters": sorted(raft_voters or cfg.quorum_voters),
        "removed": removed,
    }
