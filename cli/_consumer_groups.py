"""``kraftlog consumer-groups``: list, describe, reset and delete consumer groups, like Kafka's
``kafka-consumer-groups.sh``.

``--bootstrap-server`` names brokers (groups live on their coordinators). Exactly one action:

- ``--list``: every group of the cluster;
- ``--describe --group G`` with ``--offsets`` (the default: per partition the committed offset,
  the log end offset and the LAG, with the owning member), ``--members`` or ``--state``;
- ``--reset-offsets --group G (--topic T[:P,...] | --all-topics)`` with one of ``--to-earliest``,
  ``--to-latest``, ``--to-offset N``, ``--to-datetime YYYY-MM-DDTHH:mm:SS.sss``, ``--shift-by N``,
  ``--by-duration PnDTnHnMnS``, and ``--dry-run`` (the default: print the plan) or ``--execute``;
  only while the group has no active members, as in Kafka;
- ``--delete --group G``: the group and its committed offsets (only an empty group);
- ``--delete-offsets --group G --topic T[:P,...]``: some committed offsets of an empty group;
- ``--tree [--group G]``: the groups as the ZooKeeper era kept them, beside ``metadata tree``:
  ``/consumers/<group>/offsets/<topic>/<partition>`` (the committed offset), ``.../owners/<topic>/
  <partition>`` (the member owning it) and ``.../ids/<member>`` (its subscription).

Tables are for people; ``--output json`` prints one JSON object. Exit codes: 0 success, 1 the
cluster answered with an error (Kafka's error named on stderr), 2 bad input.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from kraftlog.cli._admin_command import add_admin_options, run_with_admin
from kraftlog.cli._common import EXIT_OK, Subparsers, UserError, print_json, print_table, security_kwargs

__all__ = ["add_parser", "run", "make_group_admin", "make_consumer"]

_DURATION = re.compile(r"^-?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def make_group_admin(bootstrap_servers: Sequence[str], *, request_timeout_ms: int, **security: Any) -> Any:
    """The group admin client of this command (tests may replace it)."""
    from kraftlog.client import GroupAdmin

    return GroupAdmin(bootstrap_servers, request_timeout_ms=request_timeout_ms, **security)


def make_consumer(bootstrap_servers: Sequence[str], **security: Any) -> Any:
    """A consumer without a group, for log end offsets and timestamps."""
    from kraftlog.client import Consumer

    return Consumer(bootstrap_servers, allow_auto_topic_creation=False, **security)


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "consumer-groups",
        help="list, describe, reset and delete consumer groups (kafka-consumer-groups)",
        description="List, describe, reset the offsets of and delete consumer groups, like Kafka's "
        "kafka-consumer-groups.sh. The bootstrap servers are brokers.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list every group")
    action.add_argument("--describe", action="store_true", help="describe a group")
    action.add_argument("--reset-offsets", action="store_true", help="reset a group's committed offsets")
    action.add_argument("--delete", action="store_true", help="delete a group and its committed offsets")
    action.add_argument("--delete-offsets", action="store_true", help="delete some committed offsets of a group")
    action.add_argument("--tree", action="store_true", help="the groups as the ZooKeeper-era /consumers tree")
    parser.add_argument("--group", metavar="GROUP", help="the group")
    parser.add_argument(
        "--type",
        action="append",
        default=[],
        choices=["classic", "consumer"],
        help="list: only groups of this protocol (classic, or consumer for KIP-848), and show each group's type",
    )
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--offsets", action="store_true", help="describe: offsets and lag per partition (default)")
    view.add_argument("--members", action="store_true", help="describe: the members")
    view.add_argument("--state", action="store_true", help="describe: the state and the coordinator")
    parser.add_argument("--topic", action="append", default=[], metavar="T[:P,...]", help="topic (and partitions)")
    parser.add_argument("--all-topics", action="store_true", help="reset: every topic the group committed for")
    to = parser.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="reset to the log start offset")
    to.add_argument("--to-latest", action="store_true", help="reset to the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    to.add_argument("--to-datetime", metavar="WHEN", help="reset to the first record at or after WHEN (UTC)")
    to.add_argument("--shift-by", type=int, metavar="N", help="move the committed offset by N (may be negative)")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS", help="reset to the records of that long ago")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="reset: only print the plan (the default)")
    mode.add_argument("--execute", action="store_true", help="reset: commit the new offsets")
    add_admin_options(parser)
    return parser


def _topics(specs: Sequence[str]) -> list[tuple[str, list[int] | None]]:
    out: list[tuple[str, list[int] | None]] = []
    for spec in specs:
        name, _, parts = spec.partition(":")
        if not name:
            raise UserError(f"--topic {spec!r}: no topic name")
        try:
            out.append((name, [int(p) for p in parts.split(",")] if parts else None))
        except ValueError:
            raise UserError(f"--topic {spec!r}: partitions are numbers separated by commas") from None
    return out


def _millis(text: str) -> int:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _duration_ms(text: str) -> int:
    m = _DURATION.match(text)
    if not m or text in ("P", "PT", "-P", "-PT"):
        raise UserError(f"--by-duration {text!r}: expected an ISO-8601 duration such as PT1H or P1DT30M")
    days, hours, minutes, seconds = (float(x) if x else 0.0 for x in m.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def run(args: argparse.Namespace) -> int:
    if not (args.list or args.tree) and not args.group:
        raise UserError("--group is required with --describe, --reset-offsets, --delete and --delete-offsets")
    if args.reset_offsets and not (args.topic or args.all_topics):
        raise UserError("--reset-offsets needs --topic or --all-topics")
    if args.reset_offsets and not any(
        [
            args.to_earliest,
            args.to_latest,
            args.to_offset is not None,
            args.to_datetime,
            args.shift_by is not None,
            args.by_duration,
        ]
    ):
        raise UserError(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
            "--shift-by, --by-duration"
        )
    if args.delete_offsets and not args.topic:
        raise UserError("--delete-offsets needs --topic")
    topics = _topics(args.topic)
    if args.to_datetime:
        _millis(args.to_datetime)
    if args.by_duration:
        _duration_ms(args.by_duration)
    return run_with_admin(args, make_group_admin, lambda admin: _act(args, admin, topics))


def _act(args: argparse.Namespace, admin: Any, topics: list[tuple[str, list[int] | None]]) -> int:
    as_json = args.output == "json"
    if args.list:
        groups = admin.list_groups(types=args.type)
        if as_json:
            print_json(
                {
                    "groups": [
                        {"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type, "type": g.group_type}
                        for g in groups
                    ]
                }
            )
        elif args.type:
            print_table(["GROUP", "TYPE"], [(g.group_id, g.group_type.capitalize()) for g in groups])
        else:
            for g in groups:
                print(g.group_id)
        return EXIT_OK
    if args.delete:
        admin.delete_group(args.group)
        if as_json:
            print_json({"group": args.group, "deleted": True})
        else:
            print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
        return EXIT_OK
    if args.delete_offsets:
        with make_consumer(args.bootstrap_server, **security_kwargs(args)) as consumer:
            parts = _partitions(consumer, topics)
        admin.delete_offsets(args.group, parts)
        if as_json:
            print_json({"group": args.group, "deleted": [{"topic": t, "partition": p} for t, p in parts]})
        else:
            print_table(["TOPIC", "PARTITION", "STATUS"], [(t, p, "Successful") for t, p in parts])
        return EXIT_OK
    if args.reset_offsets:
        return _reset(args, admin, topics, as_json)
    if args.tree:
        return _tree(args, admin, as_json)
    return _describe(args, admin, as_json)


def _tree(args: argparse.Namespace, admin: Any, as_json: bool) -> int:
    from kraftlog.cli._common import json_dumps

    groups = [args.group] if args.group else [g.group_id for g in admin.list_groups()]
    nodes: list[tuple[str, Any]] = []
    for group in groups:
        d = admin.describe_group(group)
        for m in d.members:
            subscription = {t: 1 for t in m.topics}  # ZooKeeper's ids node: topic -> stream count
            nodes.append(
                (
                    f"/consumers/{group}/ids/{m.member_id}",
                    {"version": 1, "subscription": subscription, "pattern": "static"},
                )
            )
            for tp in m.assignment:
                nodes.append((f"/consumers/{group}/owners/{tp.topic}/{tp.partition}", m.member_id))
        for tp, offset in sorted(admin.list_offsets(group).items()):
            nodes.append((f"/consumers/{group}/offsets/{tp.topic}/{tp.partition}", offset))
    nodes.sort(key=lambda n: tuple((0, int(c), "") if c.isdigit() else (1, 0, c) for c in n[0].split("/")))
    if as_json:
        print_json({"nodes": dict(nodes)})
    else:
        for path, data in nodes:
            print(f"{path}: {json_dumps(data)}")
    return EXIT_OK


def _partitions(consumer: Any, topics: list[tuple[str, list[int] | None]]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for name, parts in topics:
        out.extend((name, p) for p in (parts if parts is not None else consumer.partitions_for_topic(name)))
    return out


def _describe(args: argparse.Namespace, admin: Any, as_json: bool) -> int:
    d = admin.describe_group(args.group)
    modern = d.group_type == "consumer"
    if args.state:
        row = {
            "group": d.group_id,
            "coordinator": d.coordinator,
            "assignment_strategy": d.assignment_strategy,
            "state": d.state,
            "members": len(d.members),
            "type": d.group_type,
        }
        if modern:
            row |= {"group_epoch": d.group_epoch, "target_assignment_epoch": d.assignment_epoch}
        if as_json:
            print_json(row)
        elif modern:  # as Kafka 4 shows a consumer-protocol group
            header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH"]
            header += ["TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
            values = (d.group_id, d.coordinator, d.assignment_strategy, d.state, d.group_epoch)
            print_table(header, [(*values, d.assignment_epoch, len(d.members))])
        else:
            print_table(
                ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                [(d.group_id, d.coordinator, d.assignment_strategy, d.state, len(d.members))],
            )
        return EXIT_OK
    if args.members:
        member_rows = [(d.group_id, m.member_id, m.host, m.client_id, len(m.assignment)) for m in d.members]
        if as_json:
            print_json(
                {
                    "group": d.group_id,
                    "state": d.state,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "host": m.host,
                            "client_id": m.client_id,
                            "partitions": [f"{tp.topic}-{tp.partition}" for tp in m.assignment],
                        }
                        | (
                            {
                                "member_epoch": m.member_epoch,
                                "target_partitions": [f"{tp.topic}-{tp.partition}" for tp in m.target_assignment],
                            }
                            if modern
                            else {}
                        )
                        for m in d.members
                    ],
                }
            )
        elif modern:
            print_table(
                ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH"],
                [(*row, m.member_epoch) for row, m in zip(member_rows, d.members, strict=True)],
            )
        else:
            print_table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"], member_rows)
        return EXIT_OK
    committed = admin.list_offsets(args.group)
    owner = {tp: m for m in d.members for tp in m.assignment}
    tps = sorted(set(committed) | set(owner))
    with make_consumer(args.bootstrap_server, **security_kwargs(args)) as consumer:
        ends = consumer.end_offsets(tps) if tps else {}
    rows: list[dict[str, Any]] = []
    for tp in tps:
        current = committed.get(tp, -1)
        end = ends.get(tp, -1)
        m = owner.get(tp)
        rows.append(
            {
                "group": d.group_id,
                "topic": tp.topic,
                "partition": tp.partition,
                "current_offset": current if current >= 0 else None,
                "log_end_offset": end,
                "lag": end - current if current >= 0 and end >= 0 else None,
                "consumer_id": m.member_id if m else None,
                "host": m.host if m else None,
                "client_id": m.client_id if m else None,
            }
        )
    if as_json:
        print_json({"group": d.group_id, "state": d.state, "partitions": rows})
    else:
        if not d.members:
            print(f"Consumer group '{d.group_id}' has no active members.")
        print_table(
            [
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ],
            [
                [
                    _dash(r[k])
                    for k in (
                        "group",
                        "topic",
                        "partition",
                        "current_offset",
                        "log_end_offset",
                        "lag",
                        "consumer_id",
                        "host",
                        "client_id",
                    )
                ]
                for r in rows
            ],
        )
    return EXIT_OK


def _dash(value: Any) -> Any:
    return "-" if value is None else value


def _reset(args: argparse.Namespace, admin: Any, topics: list[tuple[str, list[int] | None]], as_json: bool) -> int:
    committed = admin.list_offsets(args.group)
    with make_consumer(args.bootstrap_server, **security_kwargs(args)) as consumer:
        if args.all_topics:
            parts = sorted(committed)
        else:
            parts = sorted(_partitions(consumer, topics))
        begin = consumer.beginning_offsets(parts) if parts else {}
        end = consumer.end_offsets(parts) if parts else {}
        targets: dict[tuple[str, int], int] = {}
        if args.to_datetime or args.by_duration:
            from time import time as now

            when = _millis(args.to_datetime) if args.to_datetime else int(now() * 1000) - _duration_ms(args.by_duration)
            found = consumer.offsets_for_times({tp: when for tp in parts})
            targets = {tp: (f.offset if f is not None else end[tp]) for tp, f in found.items()}
        for tp in parts:
            key = (tp[0], tp[1])
            if args.to_earliest:
                targets[key] = begin[tp]
            elif args.to_latest:
                targets[key] = end[tp]
            elif args.to_offset is not None:
                targets[key] = args.to_offset
            elif args.shift_by is not None:
                targets[key] = committed.get(tp, end[tp]) + args.shift_by
            targets[key] = min(max(targets[key], begin[tp]), end[tp])  # Kafka clamps to the log's range
    if args.execute:
        admin.alter_offsets(args.group, targets)
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
        print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows)
    return EXIT_OK
