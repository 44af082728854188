"""``kraftlog quorum check`` and ``kraftlog quorum repair``: a metadata log a controller cannot replay.

A committed metadata record that the image refuses (a controller bug, a corrupt log) stops every
controller that reaches it, at once and again at every restart: the node logs one
``metadata_replay_failed`` line naming the offset, the record type and the reason, and exits. These
two commands work on a stopped controller's files:

* ``check`` replays the metadata log (latest snapshot, then the segments) exactly as the controller
  does at start and reports the first entry that does not replay or decode -- or that the whole log
  replays, with its end offset. Exit 1 when it found one.
* ``repair --before OFFSET`` rebuilds the metadata state from everything *before* OFFSET and installs
  it as the node's whole state (the same procedure as ``quorum recover``: a snapshot at OFFSET - 1, an
  empty log from OFFSET, a reset Raft state). OFFSET and every entry after it are dropped, and the
  command lists them: nothing is ever skipped silently. Run it with the same OFFSET on **every**
  controller (their logs are identical up to the commit point, so they install identical snapshots),
  then start them all, then restart the brokers.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from kraftlog.cli._common import EXIT_FAILURE, EXIT_OK, Subparsers, UserError, add_output_option, described, print_json
from kraftlog.common import METADATA_PARTITION_DIR

__all__ = ["add_check_parser", "add_repair_parser", "check_metadata_log", "run_check", "run_repair"]


def add_check_parser(sub: Subparsers) -> argparse.ArgumentParser:
    from kraftlog.cli._storage import add_config_options

    check = sub.add_parser(
        "check",
        help="replay this controller's metadata log offline; name the first bad record",
        **described(__doc__),
    )
    add_config_options(check)
    add_output_option(check)
    return check


def add_repair_parser(sub: Subparsers) -> argparse.ArgumentParser:
    from kraftlog.cli._storage import add_config_options

    repair = sub.add_parser(
        "repair",
        help="rebuild this controller's metadata state from the entries before an offset",
        **described(__doc__),
    )
    repair.add_argument(
        "--before",
        type=int,
        required=True,
        metavar="OFFSET",
        help="the first offset to drop (the one 'quorum check' reported); everything after it goes too",
    )
    add_config_options(repair)
    add_output_option(repair)
    return repair


def check_metadata_log(mdir: Path, *, stop_at: int | None = None) -> tuple[Any, dict[str, Any] | None, list[Any]]:
    """Replay ``mdir`` like a starting controller. Returns ``(image, failure, rest)``: the image of
    every entry that replayed (below ``stop_at`` when given), the first failure as a report (None when
    there is none) and the entries from ``stop_at`` or the failure on (what a repair would drop)."""
    from kraftlog import metadata_log
    from kraftlog.metadata_log.image import MetadataDelta, MetadataReplayError

    snap = metadata_log.latest_snapshot(mdir)
    image = metadata_log.MetadataImage.EMPTY
    start = 0
    if snap is not None:
        s = metadata_log.read_snapshot(snap.path)
        image = metadata_log.MetadataImage.from_records(s.records, s.offset, s.epoch, s.timestamp_ms)
        start = s.offset + 1
    delta = MetadataDelta(image)
    failure: dict[str, Any] | None = None
    rest: list[Any] = []
    entries = metadata_log.read_log_dir(mdir, from_offset=start)
    try:
        for entry in entries:
            if failure is not None or (stop_at is not None and entry.offset >= stop_at):
                rest.append(entry)
                continue
            try:
                delta.replay(entry)
            except MetadataReplayError as err:
                failure = {
                    "offset": entry.offset,
                    "epoch": entry.epoch,
                    "record_type": type(entry.record).__name__,
                    "reason": str(err),
                }
                rest.append(entry)
    except metadata_log.MetadataRecordError as err:
        failure = failure or {
            "offset": delta.apply().offset + 1,
            "epoch": None,
            "record_type": None,
            "reason": f"undecodable entry: {err}",
        }
    return delta.apply(), failure, rest


def _metadata_dir(cfg: Any) -> Path:
    if not cfg.is_controller:
        raise UserError(f"node {cfg.node_id} has no controller role (process.roles = {list(cfg.roles)})")
    mdir = Path(cfg.metadata_log_dir) / METADATA_PARTITION_DIR
    if not mdir.is_dir():
        raise UserError(f"{mdir}: no metadata log here")
    return mdir


def run_check(args: argparse.Namespace) -> int:
    from kraftlog.cli._storage import load_config_args

    cfg = load_config_args(args)
    image, failure, rest = check_metadata_log(_metadata_dir(cfg))
    report = {
        "node_id": cfg.node_id,
        "ok": failure is None,
        "replayed_to_offset": image.offset,
        "failure": failure,
        "entries_after_failure": max(len(rest) - 1, 0),
    }
    if args.output == "json":
        print_json(report)
    elif failure is None:
        print(f"Node {cfg.node_id}: the metadata log replays to offset {image.offset}")
    else:
        print(
            f"Node {cfg.node_id}: the record at offset {failure['offset']} ({failure['record_type']}, "
            f"epoch {failure['epoch']}) does not replay: {failure['reason']}"
        )
        print(
            f"  {report['entries_after_failure']} entries follow it; 'kraftlog quorum repair --before "
            f"{failure['offset']}' on every controller drops them all"
        )
    return EXIT_OK if failure is None else EXIT_FAILURE


def run_repair(args: argparse.Namespace) -> int:
    from kraftlog import metadata_log
    from kraftlog.cli._quorum_recover import recover_controller
    from kraftlog.cli._storage import load_config_args

    cfg = load_config_args(args)
    mdir = _metadata_dir(cfg)
    if args.before < 1:
        raise UserError("--before must be at least 1 (offset 0 has nothing before it)")
    image, _failure, dropped = check_metadata_log(mdir, stop_at=args.before)
    if image.offset != args.before - 1:
        raise UserError(
            f"the entries before offset {args.before} do not replay to offset {args.before - 1} "
            f"(they end at {image.offset}); run 'kraftlog quorum check' first"
        )
    with tempfile.TemporaryDirectory(prefix="kraftlog-repair-") as tmp:
        snapshot = metadata_log.write_snapshot(tmp, image.offset, image.epoch, image.timestamp_ms, image.to_records())
        try:
            report = recover_controller(cfg, snapshot, force=True)
        except (metadata_log.MetadataRecordError, OSError) as err:
            print(f"kraftlog quorum repair: error: {err}", file=sys.stderr)
            return EXIT_FAILURE
    kinds = Counter(type(e.record).__name__ for e in dropped)
    report.update(
        {
            "dropped_from_offset": args.before,
            "dropped_entries": len(dropped),
            "dropped_record_types": dict(sorted(kinds.items())),
        }
    )
    if args.output == "json":
        print_json(report)
        return EXIT_OK
    print(f"Node {cfg.node_id}: metadata state rebuilt from offsets up to {image.offset} (epoch {image.epoch})")
    print(
        f"  dropped {len(dropped)} entries from offset {args.before} on: "
        + (", ".join(f"{n} x {k}" for k, n in sorted(kinds.items())) or "none")
    )
    print(f"  the metadata log continues at offset {report['next_offset']}; Raft state reset")
    print("Run this with the same --before on every controller, start them all, then restart the brokers.")
    return EXIT_OK
