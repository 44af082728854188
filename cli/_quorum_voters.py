"""``kraftlog quorum add-controller`` and ``remove-controller`` (kafka-metadata-quorum's, KIP-853).

* ``add-controller -c NODE_CONFIG``: the controller of that config -- started from a metadata dir
  formatted with ``--no-initial-controllers``, running as an observer and caught up -- becomes a
  voter. Its id comes from ``node.id``, its directory id from the metadata dir's
  ``meta.properties``, its endpoint from its ``CONTROLLER`` listener; its Raft key is the one its
  own connection proved to the leader.
* ``remove-controller --controller-id N --controller-directory-id D``: voter ``(N, D)`` stops being
  one. Removing the active controller makes it hand leadership to another voter first: the
  command then answers NOT_CONTROLLER; run it again.

One change at a time: while the previous change is not committed the answer is REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kraftlog.cli._admin_command import add_admin_options, make_admin, raise_if_error, run_with_admin
from kraftlog.cli._common import EXIT_OK, Subparsers, UserError, print_json

__all__ = ["add_voter_parsers", "run_add_controller", "run_remove_controller"]


def add_voter_parsers(sub: Subparsers) -> None:
    add = sub.add_parser("add-controller", help="make a controller that observes the quorum a voter (KIP-853)")
    add.add_argument("-c", "--config", dest="node_config", required=True, metavar="NODE_CONFIG")
    add_admin_options(add)
    remove = sub.add_parser("remove-controller", help="remove a voter from the controller quorum (KIP-853)")
    remove.add_argument("--controller-id", type=int, required=True, metavar="N")
    remove.add_argument("--controller-directory-id", required=True, metavar="DIRECTORY_ID")
    add_admin_options(remove)


def _new_voter(path: str) -> tuple[int, str, str, int]:
    from kraftlog.common.config import ConfigError, load_node_config
    from kraftlog.storage import read_meta_properties

    try:
        cfg = load_node_config(path)
    except ConfigError as err:
        raise UserError(f"{path}: {err}") from err
    if not cfg.is_controller:
        raise UserError(f"{path}: node {cfg.node_id} is not a controller")
    endpoint = cfg.controller_endpoint
    if endpoint is None:
        raise UserError(f"{path}: list the controller's address in 'listeners' as CONTROLLER://host:port")
    meta = read_meta_properties(Path(cfg.metadata_log_dir))
    if meta is None or not meta.directory_id:
        raise UserError(
            f"{cfg.metadata_log_dir} is not formatted: run 'kraftlog storage format --no-initial-controllers'"
        )
    return cfg.node_id, meta.directory_id, endpoint[0], endpoint[1]


def _done(args: argparse.Namespace, response: Any, fields: dict[str, Any]) -> int:
    raise_if_error(response.error)
    if getattr(args, "output", None) == "json":
        print_json(fields)
    else:
        print(" ".join(f"{k}={v}" for k, v in fields.items()))
    return EXIT_OK


def run_add_controller(args: argparse.Namespace) -> int:
    node_id, directory_id, host, port = _new_voter(args.node_config)
    fields = {"added": node_id, "directory_id": directory_id, "endpoint": f"{host}:{port}"}
    return run_with_admin(
        args,
        make_admin,
        lambda admin: _done(
            args, admin.add_raft_voter(node_id, directory_id, host, port, timeout_ms=args.request_timeout_ms), fields
        ),
    )


def run_remove_controller(args: argparse.Namespace) -> int:
    fields = {"removed": args.controller_id, "directory_id": args.controller_directory_id}
    return run_with_admin(
        args,
        make_admin,
        lambda admin: _done(args, admin.remove_raft_voter(args.controller_id, args.controller_directory_id), fields),
    )
