"""``kraftlog share-groups``: list and describe share groups (KIP-932), like Kafka's
``kafka-share-groups.sh``.

``--bootstrap-server`` names brokers (groups live on their coordinators). Exactly one action:

- ``--list``: every share group of the cluster;
- ``--describe --group G`` with ``--offsets`` (the default: per partition the share-partition start
  offset the share coordinator holds), ``--members`` (each member, its client and its assigned
  partitions) or ``--state`` (the coordinator, state, epochs and member count).

Resetting and deleting a share group's offsets (AlterShareGroupOffsets, DeleteShareGroupOffsets)
are not served yet. Tables are for people; ``--output json`` prints one JSON object. Exit codes:
0 success, 1 the cluster answered with an error (Kafka's error named on stderr), 2 bad input.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kraftlog.cli._admin_command import add_admin_options, run_with_admin
from kraftlog.cli._common import EXIT_OK, Subparsers, UserError, print_json, print_table

__all__ = ["add_parser", "run", "make_share_group_admin"]


def make_share_group_admin(bootstrap_servers: Sequence[str], *, request_timeout_ms: int, **security: Any) -> Any:
    """The share-group admin client of this command (tests may replace it)."""
    from kraftlog.client.admin import ShareGroupAdmin

    return ShareGroupAdmin(bootstrap_servers, request_timeout_ms=request_timeout_ms, **security)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "share-groups",
        help="list and describe share groups (kafka-share-groups)",
        description="List and describe share groups (KIP-932), like Kafka's kafka-share-groups.sh. "
        "The bootstrap servers are brokers.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every share group")
    action.add_argument("--describe", action="store_true", help="describe a share group")
    parser.add_argument("--group", metavar="GROUP", help="the group")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="describe: start offset per partition (default)")
    view.add_argument("--members", action="store_true", help="describe: the members")
    view.add_argument("--state", action="store_true", help="describe: the state and the coordinator")
    add_admin_options(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.describe and not args.group:
        raise UserError("--describe needs --group")
    return run_with_admin(args, make_share_group_admin, lambda admin: _act(args, admin))


def _act(args: argparse.Namespace, admin: Any) -> int:
    as_json = args.output == "json"
    if args.list:
        groups = admin.list_share_groups()
        if as_json:
            print_json({"groups": [{"group": g.group_id, "state": g.state} for g in groups]})
        else:
            for g in groups:
                print(g.group_id)
        return EXIT_OK
    d = admin.describe_share_group(args.group)
    if args.state:
        row = {
            "group": d.group_id,
            "coordinator": d.coordinator,
            "state": d.state,
            "group_epoch": d.group_epoch,
            "assignment_epoch": d.assignment_epoch,
            "members": len(d.members),
        }
        if as_json:
            print_json(row)
        else:
            header = ["GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"]
            print_table(header, [tuple(row.values())])
        return EXIT_OK
    if args.members:
        members = [
            {
                "group": d.group_id,
                "consumer_id": m.member_id,
                "host": m.host,
                "client_id": m.client_id,
                "member_epoch": m.member_epoch,
                "assignment": [f"{tp.topic}:{tp.partition}" for tp in m.assignment],
            }
            for m in d.members
        ]
        if as_json:
            print_json({"group": d.group_id, "members": members})
        else:
            header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "MEMBER-EPOCH", "ASSIGNMENT"]
            print_table(header, [(*list(m.values())[:5], ",".join(m["assignment"]) or "-") for m in members])
        return EXIT_OK
    offsets = admin.share_group_offsets(args.group)
    rows = [
        {"group": d.group_id, "topic": tp.topic, "partition": tp.partition, "start_offset": o}
        for tp, o in offsets.items()
    ]
    if as_json:
        print_json({"group": d.group_id, "state": d.state, "offsets": rows})
    else:
        header = ["GROUP", "TOPIC", "PARTITION", "START-OFFSET"]
        print_table(header, [(r["group"], r["topic"], r["partition"], r["start_offset"]) for r in rows])
    return EXIT_OK
