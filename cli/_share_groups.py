"""``kraftlog share-groups``: list, describe, reset and delete share groups (KIP-932), like Kafka's
``kafka-share-groups.sh``.

``--bootstrap-server`` names brokers (groups live on their coordinators). Exactly one action:

- ``--list``: every share group of the cluster;
- ``--describe --group G`` with ``--offsets`` (the default: per partition the share-partition start
  offset the share coordinator holds), ``--members`` (each member, its client and its assigned
  partitions) or ``--state`` (the coordinator, state, epochs and member count).

- ``--reset-offsets --group G (--topic T[:P,...] | --all-topics)`` with one of ``--to-earliest``,
  ``--to-latest``, ``--to-offset N``, ``--to-datetime YYYY-MM-DDTHH:mm:SS.sss`` (UTC unless an offset
  is given), clamped to each log's range; ``--dry-run`` (the default) prints the plan, ``--execute``
  writes it (AlterShareGroupOffsets; the group must have no members);
- ``--delete-offsets --group G --topic T``: the group forgets the topic's share partitions
  (DeleteShareGroupOffsets; an empty group);
- ``--delete --group G``: deletes an empty share group with its share partitions' state.

Tables are for people; ``--output json`` prints one JSON object. Exit codes:
0 success, 1 the cluster answered with an error (Kafka's error named on stderr), 2 bad input.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kraftlog.cli._admin_command import add_admin_options, run_with_admin
from kraftlog.cli._common import EXIT_OK, Subparsers, UserError, print_json, print_table, security_kwargs
from kraftlog.cli._consumer_groups import _millis, _partitions, _topics, make_consumer

__all__ = ["add_parser", "run", "make_share_group_admin"]


def make_share_group_admin(bootstrap_servers: Sequence[str], *, request_timeout_ms: int, **security: Any) -> Any:
    """The share-group admin client of this command (tests may replace it)."""
    from kraftlog.client.admin import ShareGroupAdmin

    return ShareGroupAdmin(bootstrap_servers, request_timeout_ms=request_timeout_ms, **security)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "share-groups",
        help="list, describe, reset and delete share groups (kafka-share-groups)",
        description="List, describe, reset the offsets of and delete share groups (KIP-932), like Kafka's "
        "kafka-share-groups.sh. "
        "The bootstrap servers are brokers.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every share group")
    action.add_argument("--describe", action="store_true", help="describe a share group")
    action.add_argument("--reset-offsets", action="store_true", help="reset an empty group's start offsets")
    action.add_argument("--delete-offsets", action="store_true", help="an empty group forgets topics")
    action.add_argument("--delete", action="store_true", help="delete an empty share group")
    parser.add_argument("--group", metavar="GROUP", help="the group")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="describe: start offset per partition (default)")
    view.add_argument("--members", action="store_true", help="describe: the members")
    view.add_argument("--state", action="store_true", help="describe: the state and the coordinator")
    parser.add_argument("--topic", action="append", default=[], metavar="T[:P,...]", help="reset/delete: a topic")
    parser.add_argument("--all-topics", action="store_true", help="reset: every topic the group has state for")
    to = parser.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    to.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    to.add_argument("--to-datetime", metavar="WHEN", help="reset to the first record at or after WHEN (UTC)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="reset: only print the plan (the default)")
    mode.add_argument("--execute", action="store_true", help="reset: write the new start offsets")
    add_admin_options(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    if not args.list and not args.group:
        raise UserError("--group is required with --describe, --reset-offsets, --delete and --delete-offsets")
    topics = _topics(args.topic)
    if args.reset_offsets:
        if not (topics or args.all_topics):
            raise UserError("--reset-offsets needs --topic or --all-topics")
        if not (args.to_earliest or args.to_latest or args.to_offset is not None or args.to_datetime):
            raise UserError("--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    if args.delete_offsets and not topics:
        raise UserError("--delete-offsets needs --topic")
    return run_with_admin(args, make_share_group_admin, lambda admin: _act(args, admin, topics))


def _act(args: argparse.Namespace, admin: Any, topics: list[tuple[str, list[int] | None]]) -> int:
    as_json = args.output == "json"
    if args.delete:
        admin.delete_share_group(args.group)
        if as_json:
            print_json({"group": args.group, "deleted": True})
        else:
            print(f"Deletion of requested share groups ('{args.group}') was successful.")
        return EXIT_OK
    if args.delete_offsets:
        names = [name for name, _parts in topics]
        admin.delete_share_group_offsets(args.group, names)
        if as_json:
            print_json({"group": args.group, "deleted": [{"topic": t} for t in names]})
        else:
            print_table(["TOPIC", "STATUS"], [(t, "Successful") for t in names])
        return EXIT_OK
    if args.reset_offsets:
        return _reset(args, admin, topics, as_json)
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


def _reset(args: argparse.Namespace, admin: Any, topics: list[tuple[str, list[int] | None]], as_json: bool) -> int:
    """The new start offsets (printed; written with --execute), as kafka-share-groups computes them."""
    from kraftlog.client import TopicPartition

    with make_consumer(args.bootstrap_server, **security_kwargs(args)) as consumer:
        if args.all_topics:
            parts = sorted((tp.topic, tp.partition) for tp in admin.share_group_offsets(args.group))
        else:
            parts = sorted(_partitions(consumer, topics))
        begin = consumer.beginning_offsets(parts) if parts else {}
        end = consumer.end_offsets(parts) if parts else {}
        targets: dict[tuple[str, int], int] = {}
        if args.to_datetime:
            when = _millis(args.to_datetime)
            found = consumer.offsets_for_times({tp: when for tp in parts})
            targets = {(tp[0], tp[1]): (f.offset if f is not None else end[tp]) for tp, f in found.items()}
        for tp in parts:
            key = (tp[0], tp[1])
            if args.to_earliest:
                targets[key] = begin[tp]
            elif args.to_latest:
                targets[key] = end[tp]
            elif args.to_offset is not None:
                targets[key] = args.to_offset
            targets[key] = min(max(targets[key], begin[tp]), end[tp])  # clamped to the log's range
    if args.execute:
        admin.alter_share_group_offsets(args.group, {TopicPartition(t, p): o for (t, p), o in targets.items()})
    rows = [(args.group, t, p, off) for (t, p), off in sorted(targets.items())]
    if as_json:
        print_json(
            {
                "group": args.group,
                "executed": bool(args.execute),
                "offsets": [{"topic": t, "partition": p, "new_offset": o} for _g, t, p, o in rows],
            }
        )
    else:
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-START-OFFSET"], rows)
    return EXIT_OK
