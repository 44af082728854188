"""``kraftlog quorum``: the state of the controller quorum, like ``kafka-metadata-quorum.sh``.

* ``status`` (``describe --status``): ClusterId, LeaderId, LeaderEpoch, HighWatermark,
  MaxFollowerLag, MaxFollowerLagTimeMs, CurrentVoters, CurrentObservers;
* ``replication`` (``describe --replication``): per voter and observer its NodeId, LogEndOffset,
  Lag behind the leader, LastFetchTimestamp, LastCaughtUpTimestamp and Status (Leader, Follower,
  Observer);
* ``add-controller -c NODE_CONFIG`` / ``remove-controller --controller-id N
  --controller-directory-id D``: change the voter set of a dynamic quorum (KIP-853, one change at a
  time);
* ``recover --snapshot FILE --config NODE_CONFIG`` (offline, on a stopped controller): install a
  snapshot as the node's whole metadata state, to restart a quorum that lost every controller's
  state; run it on every controller with the same file (see ``kraftlog quorum recover --help``).

From DescribeQuorum, plus DescribeCluster for the cluster id. Unknown timestamps are -1, as in Kafka.
"""

from __future__ import annotations

import argparse
from typing import Any

from kraftlog.cli._admin_command import (
    ClusterError,
    add_admin_options,
    error_failed,
    error_name,
    make_admin,
    raise_if_error,
    run_with_admin,
)
from kraftlog.cli._common import EXIT_OK, Subparsers, UserError, described, print_json, print_table

__all__ = ["add_parser", "run", "make_admin", "quorum_status", "quorum_replication"]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "quorum",
        help="describe the controller quorum (kafka-metadata-quorum); check, repair or recover its metadata log",
        **described(__doc__),
    )
    sub = parser.add_subparsers(dest="quorum_command", metavar="ACTION")
    sub.required = True
    status = sub.add_parser("status", help="leader, epoch, high watermark, lag, voters and observers")
    add_admin_options(status)
    replication = sub.add_parser("replication", help="log end offset and lag of every replica")
    add_admin_options(replication)
    describe = sub.add_parser("describe", help="kafka-metadata-quorum's spelling: --status or --replication")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="same as 'quorum status'")
    what.add_argument("--replication", action="store_true", help="same as 'quorum replication'")
    add_admin_options(describe)
    from kraftlog.cli._quorum_recover import add_recover_parser
    from kraftlog.cli._quorum_repair import add_check_parser, add_repair_parser
    from kraftlog.cli._quorum_voters import add_voter_parsers

    add_voter_parsers(sub)
    add_recover_parser(sub)
    add_check_parser(sub)
    add_repair_parser(sub)
    return parser


def run(args: argparse.Namespace) -> int:
    action = args.quorum_command
    if action == "recover":
        from kraftlog.cli._quorum_recover import run_recover

        return run_recover(args)
    if action in ("check", "repair"):
        from kraftlog.cli._quorum_repair import run_check, run_repair

        return run_check(args) if action == "check" else run_repair(args)
    if action in ("add-controller", "remove-controller"):
        from kraftlog.cli._quorum_voters import run_add_controller, run_remove_controller

        return run_add_controller(args) if action == "add-controller" else run_remove_controller(args)
    if action == "describe":
        action = "status" if args.status else "replication"
    if action not in ("status", "replication"):
        raise UserError(f"unknown quorum action {action!r}")
    body = _status if action == "status" else _replication
    return run_with_admin(args, make_admin, lambda admin: body(admin, args))


def _leader(quorum: Any) -> Any | None:
    return next((v for v in quorum.voters if v.replica_id == quorum.leader_id), None)


def _leader_leo(quorum: Any) -> int:
    leader = _leader(quorum)
    return int(leader.log_end_offset if leader is not None else quorum.high_watermark)


def quorum_status(quorum: Any, cluster_id: str | None) -> dict[str, Any]:
    """The fields of ``kafka-metadata-quorum describe --status`` from a DescribeQuorumResponse."""
    leader = _leader(quorum)
    if quorum.voters:
        # the voter furthest behind; among equals the leader, so an idle quorum shows no lag time
        laggard = min(quorum.voters, key=lambda v: (v.log_end_offset, v.replica_id != quorum.leader_id))
        leader_leo = _leader_leo(quorum)
        max_lag = max(0, leader_leo - laggard.log_end_offset)
        if leader is not None and laggard.replica_id == leader.replica_id:
            lag_time = 0
        elif (
            leader is not None and leader.last_caught_up_timestamp_ms >= 0 and laggard.last_caught_up_timestamp_ms >= 0
        ):
            lag_time = leader.last_caught_up_timestamp_ms - laggard.last_caught_up_timestamp_ms
        else:
            lag_time = -1
    else:
        max_lag, lag_time = 0, -1
    return {
        "cluster_id": cluster_id,
        "leader_id": quorum.leader_id,
        "leader_epoch": quorum.leader_epoch,
        "high_watermark": quorum.high_watermark,
        "max_follower_lag": max_lag,
        "max_follower_lag_time_ms": lag_time,
        "current_voters": sorted(v.replica_id for v in quorum.voters),
        "current_observers": sorted(o.replica_id for o in quorum.observers),
        **(_dynamic_status(quorum) if _is_dynamic(quorum) else {}),
    }


def _is_dynamic(quorum: Any) -> bool:
    """A dynamic quorum (KIP-853, kraft.version 1): voters are (id, directory id) and are shown so."""
    return int(getattr(quorum, "kraft_version", 0)) >= 1


def _dynamic_status(quorum: Any) -> dict[str, Any]:
    """What ``describe --status`` adds for a dynamic quorum: kraft.version and every voter's and
    observer's id, directory id and controller endpoint (Kafka 4.x prints them as objects)."""

    def replica(r: Any) -> dict[str, Any]:
        return {
            "id": r.replica_id,
            "directory_id": r.replica_directory_id or None,
            "endpoints": [f"CONTROLLER://{r.endpoint}"] if r.endpoint else [],
        }

    return {
        "kraft_version": int(quorum.kraft_version),
        "voters": [replica(v) for v in sorted(quorum.voters, key=lambda v: v.replica_id)],
        "observers": [replica(o) for o in sorted(quorum.observers, key=lambda o: o.replica_id)],
    }


def _kafka_replicas(replicas: list[dict[str, Any]]) -> str:
    """Voters or observers as ``kafka-metadata-quorum`` 4.x prints them for a dynamic quorum."""
    items = []
    for r in replicas:
        fields = [f'"id": {r["id"]}']
        if r["directory_id"]:
            fields.append(f'"directoryId": "{r["directory_id"]}"')
        fields.append('"endpoints": [' + ", ".join(f'"{e}"' for e in r["endpoints"]) + "]")
        items.append("{" + ", ".join(fields) + "}")
    return "[" + ", ".join(items) + "]"


def quorum_replication(quorum: Any) -> list[dict[str, Any]]:
    """One row per replica (leader first, then voters, then observers, each by id)."""
    leader_leo = _leader_leo(quorum)
    rows = []
    voters = sorted(quorum.voters, key=lambda v: (v.replica_id != quorum.leader_id, v.replica_id))
    for status, replicas in (("voter", voters), ("Observer", sorted(quorum.observers, key=lambda o: o.replica_id))):
        for r in replicas:
            if status == "voter":
                label = "Leader" if r.replica_id == quorum.leader_id else "Follower"
            else:
                label = status
            rows.append(
                {
                    "node_id": r.replica_id,
                    "log_end_offset": r.log_end_offset,
                    "lag": max(0, leader_leo - r.log_end_offset),
                    "last_fetch_timestamp": r.last_fetch_timestamp_ms,
                    "last_caught_up_timestamp": r.last_caught_up_timestamp_ms,
                    "status": label,
                    **({"directory_id": r.replica_directory_id or None} if _is_dynamic(quorum) else {}),
                }
            )
    return rows


def _describe_quorum(admin: Any) -> Any:
    quorum = admin.describe_quorum()
    raise_if_error(quorum.error)
    return quorum


def _status(admin: Any, args: argparse.Namespace) -> int:
    quorum = _describe_quorum(admin)
    cluster = admin.describe_cluster()
    if error_failed(cluster.error):
        raise ClusterError(error_name(cluster.error), f"DescribeCluster: {cluster.error.message}")
    status = quorum_status(quorum, cluster.cluster_id or None)
    if args.output == "json":
        print_json(status)
        return EXIT_OK
    lines = [
        ("ClusterId", status["cluster_id"] or "unknown"),
        ("LeaderId", status["leader_id"]),
        ("LeaderEpoch", status["leader_epoch"]),
        ("HighWatermark", status["high_watermark"]),
        ("MaxFollowerLag", status["max_follower_lag"]),
        ("MaxFollowerLagTimeMs", status["max_follower_lag_time_ms"]),
        ("CurrentVoters", "[" + ",".join(str(v) for v in status["current_voters"]) + "]"),
        ("CurrentObservers", "[" + ",".join(str(o) for o in status["current_observers"]) + "]"),
    ]
    if "kraft_version" in status:  # a dynamic quorum: voters with their directory ids, as Kafka 4.x
        lines[-2:] = [
            ("CurrentVoters", _kafka_replicas(status["voters"])),
            ("CurrentObservers", _kafka_replicas(status["observers"])),
        ]
    width = max(len(k) for k, _ in lines) + 4  # "MaxFollowerLagTimeMs:" + 3 spaces, as Kafka
    for key, value in lines:
        print(f"{key + ':':<{width}}{value}")
    return EXIT_OK


def _replication(admin: Any, args: argparse.Namespace) -> int:
    rows = quorum_replication(_describe_quorum(admin))
    if args.output == "json":
        print_json({"replicas": rows})
        return EXIT_OK
    dynamic = any("directory_id" in r for r in rows)  # Kafka 4.x's DirectoryId column, KIP-853
    print_table(
        ["NodeId", *(["DirectoryId"] if dynamic else []), "LogEndOffset", "Lag"]
        + ["LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"],
        [
            [
                r["node_id"],
                *([r.get("directory_id") or "-"] if dynamic else []),
                r["log_end_offset"],
                r["lag"],
                r["last_fetch_timestamp"],
                r["last_caught_up_timestamp"],
                r["status"],
            ]
            for r in rows
        ],
    )
    return EXIT_OK
