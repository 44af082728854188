"""``kraftlog storage``: format a node's directories, like ``kafka-storage.sh``.

``format`` writes ``meta.properties`` (cluster id, node id, a directory id per dir) into every log dir
and the metadata log dir of the node's config. The cluster id replaces ZooKeeper's ``/cluster/id``:
every node of a cluster is formatted with the same one, and a node refuses to start unformatted or
with another cluster's id (`check_formatted`).
"""

from __future__ import annotations

import argparse
import base64
import uuid
from pathlib import Path
from typing import Any

from kraftlog import storage
from kraftlog.cli._common import UserError, add_output_option, print_json, print_table

__all__ = ["add_parser", "run", "new_cluster_id", "check_formatted", "node_dirs", "load_config_args",
           "add_config_options"]


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form: 16 random bytes, URL-safe base64 without padding.

    Like Kafka's Uuid.randomUuid, never one starting with '-', which a command line would take for
    an option.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cid.startswith("-"):
            return cid


def _valid_cluster_id(value: str) -> bool:
    try:
        return len(base64.urlsafe_b64decode(value + "==")) == 16
    except (ValueError, TypeError):
        return False


def add_config_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument("-c", "--config", required=required, metavar="FILE",
                        help="node config file (TOML or Java .properties)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="override one config key (repeatable)")


def load_config_args(args: argparse.Namespace) -> Any:
    """Load the node config named by ``--config``/``--override``; a bad config is a user error."""
    from kraftlog.common import config as common_config

    try:
        return common_config.load_node_config(args.config, args.override)
    except common_config.ConfigError as err:
        raise UserError(str(err)) from err
    except FileNotFoundError as err:
        raise UserError(f"config file not found: {args.config}") from err


def node_dirs(cfg: Any) -> list[Path]:
    """Every directory a node stores data in: its log dirs and its metadata log dir."""
    dirs = [Path(d) for d in cfg.log_dirs]
    meta = cfg.metadata_log_dir
    if meta and Path(meta) not in dirs:
        dirs.append(Path(meta))
    return dirs


def check_formatted(cfg: Any) -> str:
    """The cluster id every dir of the node agrees on; raises `UserError` when a dir is unformatted,
    belongs to another node, or to another cluster."""
    cluster_ids = set()
    for d in node_dirs(cfg):
        meta = storage.read_meta_properties(d)
        if meta is None:
            raise UserError(f"{d} is not formatted: run 'kraftlog storage format -t CLUSTER_ID -c CONFIG'")
        if meta.node_id != cfg.node_id:
            raise UserError(f"{d} belongs to node {meta.node_id}, this node is {cfg.node_id}")
        cluster_ids.add(meta.cluster_id)
    if len(cluster_ids) != 1:
        raise UserError(f"the node's dirs belong to different clusters: {sorted(cluster_ids)}")
    return cluster_ids.pop()


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("storage", help="format and inspect a node's storage directories",
                                   description=__doc__)
    sub = parser.add_subparsers(dest="storage_command", metavar="ACTION")
    sub.required = True
    fmt = sub.add_parser("format", help="write meta.properties into every dir of the node")
    add_config_options(fmt)
    fmt.add_argument("-t", "--cluster-id", required=True, help="cluster id (see 'storage random-uuid')")
    fmt.add_argument("-g", "--ignore-formatted", action="store_true",
                     help="succeed when the dirs are already formatted with this cluster id")
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
            rows.append({"dir": str(d), "formatted": meta is not None,
                         "cluster_id": meta.cluster_id if meta else None,
                         "node_id": meta.node_id if meta else None,
                         "directory_id": meta.directory_id if meta else None})
        if args.output == "json":
            print_json({"node_id": cfg.node_id, "dirs": rows})
        else:
            print_table(["dir", "formatted", "cluster_id", "node_id", "directory_id"],
                        [[r["dir"], r["formatted"], r["cluster_id"] or "-", r["node_id"] if r["node_id"] is not None else "-",
                          r["directory_id"] or "-"] for r in rows])
        return 0
    cluster_id = args.cluster_id
    if not _valid_cluster_id(cluster_id):
        raise UserError(f"invalid cluster id {cluster_id!r}: expected 16 bytes in URL-safe base64 "
                        "(22 characters), e.g. from 'kraftlog storage random-uuid'")
    written, skipped = [], []
    dirs = node_dirs(cfg)
    for d in dirs:  # check every dir before writing any, so a refusal leaves nothing half-formatted
        meta = storage.read_meta_properties(d)
        if meta is None:
            continue
        if meta.cluster_id != cluster_id or meta.node_id != cfg.node_id:
            raise UserError(f"{d} is already formatted for cluster {meta.cluster_id} node {meta.node_id}")
        if not args.ignore_formatted:
            raise UserError(f"{d} is already formatted; use --ignore-formatted to accept that")
    for d in dirs:
        if storage.read_meta_properties(d) is not None:
            skipped.append(str(d))
            continue
        storage.write_meta_properties(d, storage.MetaProperties(
            cluster_id=cluster_id, node_id=cfg.node_id, directory_id=new_cluster_id()))
        written.append(str(d))
    if args.output == "json":
        print_json({"cluster_id": cluster_id, "node_id": cfg.node_id, "formatted": written,
                    "already_formatted": skipped})
    else:
        for d in written:
            print(f"Formatting {d} with cluster.id {cluster_id} node.id {cfg.node_id}")
        for d in skipped:
            print(f"{d} is already formatted with cluster.id {cluster_id}")
    return 0
