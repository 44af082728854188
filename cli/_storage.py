"""``kraftlog storage``: format a node's directories, like ``kafka-storage.sh``.

``format`` writes ``meta.properties`` (cluster id, node id, a directory id per dir) into every log dir
and the metadata log dir of the node's config; ``--add-scram`` (KIP-900) also writes SCRAM
credentials into the metadata log dir's ``bootstrap.checkpoint``, which the first active controller
commits, so a cluster whose listeners all ask for SCRAM has a user from its first second. The
cluster id replaces ZooKeeper's ``/cluster/id``: every node of a cluster is formatted with the same
one, and a node refuses to start unformatted or with another cluster's id.

The bootstrap metadata also finalizes the new cluster's feature levels, as Kafka's
``kafka-storage format`` does: ``share.version`` 1 by default (Kafka 4.2: share groups are on in a
new cluster); ``--feature share.version=0`` formats a cluster without share groups (turn them on
later with ``kraftlog features upgrade --feature share.version=1``), ``--feature
metadata.version=N`` pins the metadata version (below 28, 4.2-IV0, share groups default to off).
"""

from __future__ import annotations

import argparse
from typing import Any

from kraftlog import storage
from kraftlog.cli._common import Subparsers, UserError, add_output_option, described, print_json, print_table
from kraftlog.cli._features import parse_feature
from kraftlog.cli._storage_scram import parse_add_scram
from kraftlog.node import NodeStartupError, format_node_dirs, new_cluster_id, node_dirs

__all__ = ["add_parser", "run", "load_config_args", "add_config_options", "initial_voters_of"]


def add_config_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument(
        "-c", "--config", required=required, metavar="FILE", help="node config file (TOML or Java .properties)"
    )
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override one config key (repeatable)"
    )


def load_config_args(args: argparse.Namespace) -> Any:
    """Load the node config named by ``--config``/``--override``; a bad config is a user error."""
    from kraftlog.common import config as common_config

    try:
        return common_config.load_node_config(args.config, args.override)
    except common_config.ConfigError as err:
        raise UserError(str(err)) from err
    except FileNotFoundError as err:
        raise UserError(f"config file not found: {args.config}") from err


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "storage", help="format and inspect a node's storage directories", **described(__doc__)
    )
    sub = parser.add_subparsers(dest="storage_command", metavar="ACTION")
    sub.required = True
    fmt = sub.add_parser("format", help="write meta.properties into every dir of the node")
    add_config_options(fmt)
    fmt.add_argument("-t", "--cluster-id", required=True, help="cluster id (see 'storage random-uuid')")
    fmt.add_argument(
        "-g",
        "--ignore-formatted",
        action="store_true",
        help="succeed when the dirs are already formatted with this cluster id",
    )
    fmt.add_argument(
        "-S",
        "--add-scram",
        action="append",
        default=[],
        metavar="MECHANISM=[name=U,password=P]",
        help="a SCRAM credential for the bootstrap metadata (repeatable; also iterations=, salt=, "
        "saltedpassword=), so a SCRAM-only cluster has its first user (KIP-900)",
    )
    fmt.add_argument(
        "-f",
        "--feature",
        action="append",
        default=[],
        type=parse_feature,
        metavar="NAME=LEVEL",
        help="a feature level for the bootstrap metadata (repeatable), e.g. share.version=0; by default "
        "share.version is 1 as in Kafka 4.2",
    )
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument(
        "-s",
        "--standalone",
        action="store_true",
        help="a dynamic quorum (KIP-853) whose only voter is this controller, at its CONTROLLER listener",
    )
    quorum.add_argument(
        "-I",
        "--initial-controllers",
        metavar="ID@HOST:PORT:DIRECTORY_ID,...",
        help="the initial voters of a dynamic quorum, the same on every controller; this node's directory id "
        "becomes its metadata log dir's",
    )
    quorum.add_argument(
        "-N",
        "--no-initial-controllers",
        action="store_true",
        help="no initial voter set (a broker of a dynamic quorum)",
    )
    add_output_option(fmt)
    uuid = sub.add_parser("random-uuid", help="print a new random cluster id")
    add_output_option(uuid)
    info = sub.add_parser("info", help="show the meta.properties of every dir of the node")
    add_config_options(info)
    add_output_option(info)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.storage_command == "random-uuid":
        cluster_id = new_cluster_id()
        if args.output == "json":
            print_json({"cluster_id": cluster_id})
        else:
            print(cluster_id)
        return 0
    cfg = load_config_args(args)
    if args.storage_command == "info":
        rows = []
        for d in node_dirs(cfg):
            meta = storage.read_meta_properties(d)
            rows.append(
                {
                    "dir": str(d),
                    "formatted": meta is not None,
                    "cluster_id": meta.cluster_id if meta else None,
                    "node_id": meta.node_id if meta else None,
                    "directory_id": meta.directory_id if meta else None,
                }
            )
        if args.output == "json":
            print_json({"node_id": cfg.node_id, "dirs": rows})
        else:
            print_table(
                ["dir", "formatted", "cluster_id", "node_id", "directory_id"],
                [
                    [
                        r["dir"],
                        r["formatted"],
                        r["cluster_id"] or "-",
                        r["node_id"] if r["node_id"] is not None else "-",
                        r["directory_id"] or "-",
                    ]
                    for r in rows
                ],
            )
        return 0
    bootstrap = parse_add_scram(args.add_scram)
    initial_voters = initial_voters_of(
        cfg,
        standalone=args.standalone,
        initial_controllers=args.initial_controllers,
        no_initial_controllers=args.no_initial_controllers,
    )
    try:
        result = format_node_dirs(
            cfg,
            args.cluster_id,
            ignore_formatted=args.ignore_formatted,
            bootstrap_records=bootstrap,
            initial_voters=initial_voters,
            features=dict(args.feature),
        )
    except NodeStartupError as err:
        raise UserError(err.message) from err
    voter_key = _raft_identity(cfg)
    if args.output == "json":
        print_json(
            {
                "cluster_id": args.cluster_id,
                "node_id": cfg.node_id,
                "formatted": result.written,
                "already_formatted": result.already_formatted,
                "raft_voter_key": voter_key,
                "kraft_version": cfg.kraft_version,
                "features": result.features,
                "initial_voters": None if initial_voters is None else [str(v) for v in initial_voters.values()],
            }
        )
    else:
        for written in result.written:
            print(f"Formatting {written} with cluster.id {args.cluster_id} node.id {cfg.node_id}")
        if initial_voters is not None and result.written:
            voters = ",".join(str(v) for v in initial_voters.values())
            print(f"Formatting dynamic metadata voter directory {cfg.metadata_log_dir} with voters {voters}")
        for formatted in result.already_formatted:
            print(f"{formatted} is already formatted with cluster.id {args.cluster_id}")
        if voter_key is not None:
            print(f"Raft identity of voter {cfg.node_id}: {voter_key} (list it in controller.quorum.raft.voter.keys)")
    return 0


def initial_voters_of(
    cfg: Any, *, standalone: bool, initial_controllers: str | None, no_initial_controllers: bool
) -> dict[int, Any] | None:
    """The initial voter set ``storage format`` writes (None: a static quorum, or none), with the
    rules of Kafka's StorageTool; `UserError` with its messages otherwise.

    A controller formatted with ``--no-initial-controllers`` joins a running quorum as an observer
    (issue 26): it finds the voters through ``controller.quorum.bootstrap.servers`` at start,
    replicates without voting, and votes once ``quorum add-controller`` added it.
    """
    from kraftlog.common.config import ConfigError, parse_listeners
    from kraftlog.node import new_cluster_id
    from kraftlog.quorum import DynamicVoter, DynamicVoterError, parse_dynamic_voters

    dynamic = standalone or initial_controllers is not None
    if dynamic and cfg.quorum_voters:
        raise UserError(
            "You cannot specify controller.quorum.voters and format the node with --initial-controllers or "
            "--standalone. If you want to use dynamic quorum, please remove controller.quorum.voters and "
            "specify controller.quorum.bootstrap.servers instead."
        )
    if standalone and not cfg.is_controller:
        raise UserError("You can only use --standalone on a controller.")
    if cfg.is_controller and not cfg.quorum_voters and not dynamic:
        if no_initial_controllers:
            return None  # an observer: it finds the voters through the bootstrap servers at start
        raise UserError(
            "Because controller.quorum.voters is not set on this controller, you must specify one of the "
            "following: --standalone, --initial-controllers, or --no-initial-controllers."
        )
    if standalone:
        try:
            listeners = parse_listeners(cfg["listeners"] or [])
        except ConfigError as err:
            raise UserError(str(err)) from err
        endpoint = listeners.get("CONTROLLER")
        if endpoint is None or not endpoint[0]:
            raise UserError(
                "--standalone needs this controller's address: list it in 'listeners' as CONTROLLER://host:port"
            )
        host, port = endpoint
        return {cfg.node_id: DynamicVoter(cfg.node_id, host, port, new_cluster_id())}
    if initial_controllers is None:
        return None
    try:
        voters = parse_dynamic_voters(initial_controllers)
    except DynamicVoterError as err:
        raise UserError(f"--initial-controllers: {err}") from err
    if cfg.is_controller and cfg.node_id not in voters:
        raise UserError(
            f"--initial-controllers does not list this controller (node {cfg.node_id}): to join a running "
            "quorum, format it with --no-initial-controllers, start it and run 'kraftlog quorum add-controller'"
        )
    return voters


def _raft_identity(cfg: Any) -> str | None:
    """A controller in node-key mode gets its Raft identity key (0600) unless it has one; returns its
    ``id@public key`` entry for ``controller.quorum.raft.voter.keys`` (None for other nodes)."""
    from kraftlog.quorum.raft import (
        IdentityError,
        generate_identity_key,
        key_file_of,
        load_private_key,
        public_key_text,
    )

    if "controller" not in cfg["process.roles"] or cfg["controller.quorum.raft.authentication"] != "node-key":
        return None
    path = key_file_of(cfg, cfg.metadata_log_dir)
    try:
        if path.exists():
            public = public_key_text(load_private_key(path, config_key="controller.quorum.raft.identity.key.file"))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            public = generate_identity_key(path)
    except (IdentityError, OSError) as err:
        raise UserError(f"Raft identity key {path}: {err}") from err
    return f"{cfg.node_id}@{public}"
