"""``kraftlog topics``: create, list, describe, delete and grow topics, like ``kafka-topics.sh``.

Every action talks to the cluster through `client.Admin` (the addresses given to
``--bootstrap-server`` are controllers' gRPC addresses for now). Output follows ``kafka-topics``:
``describe`` prints Kafka's tab-separated ``Topic: ... PartitionCount: ...`` header and one
``Topic: ... Partition: ... Leader: ...`` line per partition; ``--output json`` prints the same
facts as one JSON object.

Exit codes: 0 success, 1 when the cluster answered with an error (the line on stderr names Kafka's
error, e.g. ``TOPIC_ALREADY_EXISTS``), 2 for bad input (checked before anything is sent).

This module also holds the few helpers every admin subcommand shares (`add_admin_options`,
`run_with_admin`, `ClusterError`, `read_json_file`, ...). Each command module keeps its own
``make_admin`` factory, so a test can replace the client of one command with a fake.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any

from kraftlog.cli._admin_command import (
    ClusterError,
    _error_name,
    add_admin_options,
    error_failed,
    error_json,
    error_text,
    join_ids,
    make_admin,
    parse_key_values,
    parse_replica_assignment,
    positive_int,
    raise_if_error,
    report_error,
    run_with_admin,
)
from kraftlog.cli._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Subparsers,
    UserError,
    print_json,
    topic_id_arg,
    topic_id_text,
)
from kraftlog.common import is_internal_topic

__all__ = [
    "add_parser",
    "run",
    "make_admin",
]

NO_LEADER = -1


# =========================================================================== shared helpers


# =========================================================================== the command


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "topics",
        help="create, list, describe, delete and alter topics (kafka-topics)",
        description="Create, list, describe, delete and alter topics, like Kafka's kafka-topics.sh.",
    )
    sub = parser.add_subparsers(dest="topics_command", metavar="ACTION")
    sub.required = True

    create = sub.add_parser(
        "create",
        help="create a topic",
        description="Create a topic with a partition count and replication "
        "factor (the cluster's defaults when omitted) or an explicit "
        "replica assignment.",
    )
    create.add_argument("--topic", required=True, help="name of the topic to create")
    create.add_argument(
        "--partitions",
        type=positive_int,
        default=None,
        metavar="N",
        help="number of partitions (default: the cluster's num.partitions)",
    )
    create.add_argument(
        "--replication-factor",
        type=positive_int,
        default=None,
        metavar="R",
        help="replicas per partition (default: default.replication.factor)",
    )
    create.add_argument(
        "--replica-assignment",
        default=None,
        metavar="B1:B2,B3:B4,...",
        help="explicit replicas: partitions separated by ',', the replicas of one "
        "partition by ':' (preferred leader first); excludes --partitions and "
        "--replication-factor",
    )
    create.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config override (repeatable)"
    )
    create.add_argument("--if-not-exists", action="store_true", help="succeed quietly when the topic already exists")
    create.add_argument(
        "--validate-only", action="store_true", help="check the request on the controller without creating the topic"
    )
    add_admin_options(create)

    lst = sub.add_parser("list", help="list the names of all topics")
    lst.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics (names starting with '__')"
    )
    add_admin_options(lst)

    describe = sub.add_parser(
        "describe",
        help="describe topics and their partitions",
        description="Describe topics: id, partition count, replication factor "
        "and dynamic configs, then leader, replicas, ISR and "
        "offline replicas of every partition.",
    )
    describe.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="a topic to describe (repeatable; default: every topic)",
    )
    describe.add_argument(
        "--topic-id",
        action="append",
        default=[],
        type=topic_id_arg,
        metavar="ID",
        help="a topic to describe by its id, as Kafka shows ids (repeatable)",
    )
    describe.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their replica set",
    )
    describe.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="only partitions without a leader or whose leader is offline",
    )
    describe.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics (names starting with '__')"
    )
    describe.add_argument("--if-exists", action="store_true", help="ignore named topics that do not exist")
    add_admin_options(describe)

    delete = sub.add_parser("delete", help="delete topics")
    delete.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic to delete (repeatable)")
    delete.add_argument(
        "--topic-id",
        action="append",
        default=[],
        type=topic_id_arg,
        metavar="ID",
        help="a topic to delete by its id, as Kafka shows ids (repeatable)",
    )
    delete.add_argument("--if-exists", action="store_true", help="succeed quietly for topics that do not exist")
    add_admin_options(delete)

    alter = sub.add_parser(
        "alter",
        help="increase the partition count of a topic",
        description="Add partitions to a topic (CreatePartitions). With "
        "--replica-assignment, the list covers every partition, "
        "existing ones first, as in kafka-topics.",
    )
    alter.add_argument("--topic", required=True, help="the topic to grow")
    alter.add_argument(
        "--partitions", type=positive_int, required=True, metavar="N", help="the new total number of partitions"
    )
    alter.add_argument(
        "--replica-assignment",
        default=None,
        metavar="B1:B2,B3:B4,...",
        help="replicas of every partition (existing ones are skipped)",
    )
    alter.add_argument("--if-exists", action="store_true", help="succeed quietly when the topic does not exist")
    alter.add_argument(
        "--validate-only", action="store_true", help="check the request on the controller without adding partitions"
    )
    add_admin_options(alter)
    return parser


def run(args: argparse.Namespace) -> int:
    action = args.topics_command
    if action == "create":
        return _create(args)
    if action == "list":
        return run_with_admin(args, make_admin, lambda admin: _list(admin, args))
    if action == "describe":
        return run_with_admin(args, make_admin, lambda admin: _describe(admin, args))
    if action == "delete":
        return run_with_admin(args, make_admin, lambda admin: _delete(admin, args))
    return _alter(args)


# ---------------------------------------------------------------------------- create


def _create(args: argparse.Namespace) -> int:
    configs = parse_key_values(args.config, "--config")
    assignment: dict[int, list[int]] = {}
    if args.replica_assignment is not None:
        if args.partitions is not None or args.replication_factor is not None:
            raise UserError("--replica-assignment cannot be used with --partitions or --replication-factor")
        assignment = parse_replica_assignment(args.replica_assignment)
    if "." in args.topic and "_" in args.topic:
        print(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
            "('_') could collide. To avoid issues it is best to use either, but not both.",
            file=sys.stderr,
        )

    def body(admin: Any) -> int:
        from kraftlog.client import NewTopic

        topic = NewTopic(
            args.topic,
            num_partitions=args.partitions if args.partitions is not None else -1,
            replication_factor=(args.replication_factor if args.replication_factor is not None else -1),
            configs=configs,
            assignments=assignment,
        )
        response = admin.create_topics([topic], validate_only=args.validate_only, timeout_ms=args.request_timeout_ms)
        result = next((r for r in response.topics if r.name == args.topic), None)
        if result is None:
            raise ClusterError("UNKNOWN_SERVER_ERROR", f"no result for topic {args.topic!r} in the response")
        if error_failed(result.error):
            if args.if_not_exists and _error_name(result.error) == "TOPIC_ALREADY_EXISTS":
                if args.output == "json":
                    print_json({"name": args.topic, "created": False, "already_exists": True})
                return EXIT_OK
            raise_if_error(result.error)
        if args.output == "json":
            print_json(
                {
                    "name": result.name,
                    "topic_id": topic_id_text(result.topic_id),
                    "partitions": result.num_partitions,
                    "replication_factor": result.replication_factor,
                    "configs": configs,
                    "validate_only": args.validate_only,
                    "created": not args.validate_only,
                }
            )
        elif args.validate_only:
            print(
                f"Topic {result.name} is valid and would be created with {result.num_partitions} "
                f"partition(s) and replication factor {result.replication_factor} "
                f"(validate only: nothing was created)."
            )
        else:
            print(f"Created topic {result.name}.")
        return EXIT_OK

    return run_with_admin(args, make_admin, body)


# ---------------------------------------------------------------------------- list


def _list(admin: Any, args: argparse.Namespace) -> int:
    response = admin.describe_topics([])
    names = []
    for topic in response.topics:
        raise_if_error(topic.error)
        if args.exclude_internal and is_internal_topic(topic.name):
            continue
        names.append(topic.name)
    names.sort()
    if args.output == "json":
        print_json({"topics": names})
    else:
        for name in names:
            print(name)
    return EXIT_OK


# ---------------------------------------------------------------------------- describe


def _replication_factor(partition: Any) -> int:
    """Kafka's: the replica count without the replicas a reassignment is adding."""
    return len(partition.replicas) - len(partition.adding_replicas)


def _under_replicated(partition: Any) -> bool:
    return len(partition.isr) < _replication_factor(partition)


def _unavailable(partition: Any) -> bool:
    return partition.leader_id == NO_LEADER or partition.leader_id in set(partition.offline_replicas)


def _partition_json(topic: str, p: Any) -> dict[str, Any]:
    """One partition; the KIP-966 fields only when the partition has any (as the table does)."""
    out = {
        "topic": topic,
        "partition": p.partition_index,
        "leader": None if p.leader_id == NO_LEADER else p.leader_id,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "offline": list(p.offline_replicas),
        "adding_replicas": list(p.adding_replicas),
        "removing_replicas": list(p.removing_replicas),
    }
    if p.eligible_leader_replicas or p.last_known_elr:
        out["eligible_leader_replicas"] = list(p.eligible_leader_replicas)
        out["last_known_elr"] = list(p.last_known_elr)
    return out


def _format_configs(configs: Mapping[str, str]) -> str:
    return ",".join(f"{k}={configs[k]}" for k in sorted(configs))


def format_topic_line(topic: Any) -> str:
    """Kafka's topic header line of ``kafka-topics --describe``."""
    parts = sorted(topic.partitions, key=lambda p: p.partition_index)
    rf = _replication_factor(parts[0]) if parts else 0
    return (
        f"Topic: {topic.name}\tTopicId: {topic_id_text(topic.topic_id) or ''}\tPartitionCount: {len(parts)}\t"
        f"ReplicationFactor: {rf}\tConfigs: {_format_configs(topic.configs)}"
    )


def format_partition_line(topic: str, p: Any) -> str:
    """Kafka's partition line of ``kafka-topics --describe`` (plus ``Offline:``)."""
    leader = "none" if p.leader_id == NO_LEADER else str(p.leader_id)
    line = (
        f"\tTopic: {topic}\tPartition: {p.partition_index}\tLeader: {leader}\t"
        f"Replicas: {join_ids(p.replicas)}\tIsr: {join_ids(p.isr)}\t"
        f"Offline: {join_ids(p.offline_replicas)}"
    )
    if p.adding_replicas or p.removing_replicas:
        line += f"\tAdding Replicas: {join_ids(p.adding_replicas)}\tRemoving Replicas: {join_ids(p.removing_replicas)}"
    if p.eligible_leader_replicas or p.last_known_elr:  # KIP-966, as Kafka 4's tool prints them
        line += f"\tElr: {join_ids(p.eligible_leader_replicas)}\tLastKnownElr: {join_ids(p.last_known_elr)}"
    return line


def _describe(admin: Any, args: argparse.Namespace) -> int:
    wanted = list(dict.fromkeys(args.topic))  # keep the order, drop repeats
    status = EXIT_OK
    out: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    if args.topic_id:  # DescribeTopics names topics: find the names of the ids first
        names_by_id = {t.topic_id: t.name for t in admin.describe_topics([]).topics if not error_failed(t.error)}
        for topic_id in dict.fromkeys(args.topic_id):
            name = names_by_id.get(topic_id)
            if name is not None:
                wanted += [name] if name not in wanted else []
                continue
            if args.if_exists:
                continue
            shown = topic_id_text(topic_id)
            report_error(args, f"topic id {shown}: UNKNOWN_TOPIC_ID: no topic has this id")
            errors.append({"topic_id": shown, "error": {"code": 100, "name": "UNKNOWN_TOPIC_ID", "message": ""}})
            status = EXIT_FAILURE
        if not wanted:
            if args.output == "json":
                print_json({"topics": [], **({"errors": errors} if errors else {})})
            return status
    response = admin.describe_topics(wanted)
    filtering = args.under_replicated_partitions or args.unavailable_partitions
    if wanted:  # in the order asked for
        by_name = {t.name: t for t in response.topics}
        topics = [by_name[n] for n in wanted if n in by_name]
    else:
        topics = sorted(response.topics, key=lambda t: t.name)
    for topic in topics:
        if error_failed(topic.error):
            if args.if_exists and _error_name(topic.error) == "UNKNOWN_TOPIC_OR_PARTITION":
                continue
            report_error(args, f"topic {topic.name!r}: {error_text(topic.error)}")
            errors.append({"name": topic.name, "error": error_json(topic.error)})
            status = EXIT_FAILURE
            continue
        if args.exclude_internal and is_internal_topic(topic.name):
            continue
        parts = sorted(topic.partitions, key=lambda p: p.partition_index)
        if filtering:
            parts = [
                p
                for p in parts
                if (args.under_replicated_partitions and _under_replicated(p))
                or (args.unavailable_partitions and _unavailable(p))
            ]
        if args.output == "json":
            all_parts = list(topic.partitions)
            out.append(
                {
                    "name": topic.name,
                    "topic_id": topic_id_text(topic.topic_id),
                    "partition_count": len(all_parts),
                    "replication_factor": (
                        _replication_factor(min(all_parts, key=lambda p: p.partition_index)) if all_parts else 0
                    ),
                    "configs": dict(sorted(topic.configs.items())),
                    "partitions": [_partition_json(topic.name, p) for p in parts],
                }
            )
            continue
        if not filtering:  # Kafka prints the topic line only when no partition filter is on
            print(format_topic_line(topic))
        for p in parts:
            print(format_partition_line(topic.name, p))
    if args.output == "json":
        obj: dict[str, Any] = {"topics": out}
        if errors:
            obj["errors"] = errors
        print_json(obj)
    return status


# ---------------------------------------------------------------------------- delete


def _delete(admin: Any, args: argparse.Namespace) -> int:
    names = list(dict.fromkeys(args.topic))
    ids = list(dict.fromkeys(args.topic_id))
    if not names and not ids:
        raise UserError("name the topics to delete with --topic or --topic-id")
    response = admin.delete_topics(names, ids, timeout_ms=args.request_timeout_ms)
    status = EXIT_OK
    results = []
    for result in response.topics:
        name = result.name or topic_id_text(result.topic_id)
        if error_failed(result.error):
            if args.if_exists and _error_name(result.error) == "UNKNOWN_TOPIC_OR_PARTITION":
                results.append({"name": name, "deleted": False, "exists": False})
                continue
            report_error(args, f"cannot delete topic {name!r}: {error_text(result.error)}")
            results.append({"name": name, "deleted": False, "error": error_json(result.error)})
            status = EXIT_FAILURE
            continue
        results.append({"name": name, "topic_id": topic_id_text(result.topic_id), "deleted": True})
        if args.output != "json":
            print(f"Deleted topic {name}.")
    if args.output == "json":
        print_json({"topics": results})
    return status


# ---------------------------------------------------------------------------- alter


def _alter(args: argparse.Namespace) -> int:
    full_assignment = parse_replica_assignment(args.replica_assignment) if args.replica_assignment is not None else None
    if full_assignment is not None and len(full_assignment) != args.partitions:
        raise UserError(
            f"--replica-assignment lists {len(full_assignment)} partitions but "
            f"--partitions is {args.partitions}: list every partition, existing ones first"
        )

    def body(admin: Any) -> int:
        assignments = None
        if full_assignment is not None:
            # kafka-topics takes the assignment of every partition and sends only the new ones.
            described = admin.describe_topics([args.topic])
            topic = next((t for t in described.topics if t.name == args.topic), None)
            if topic is not None and not error_failed(topic.error):
                current = len(topic.partitions)
                new = [full_assignment[p] for p in sorted(full_assignment) if p >= current]
                assignments = {args.topic: new}
        response = admin.create_partitions(
            {args.topic: args.partitions},
            validate_only=args.validate_only,
            assignments=assignments,
            timeout_ms=args.request_timeout_ms,
        )
        result = next((r for r in response.results if r.name == args.topic), None)
        if result is None:
            raise ClusterError("UNKNOWN_SERVER_ERROR", f"no result for topic {args.topic!r} in the response")
        if error_failed(result.error):
            if args.if_exists and _error_name(result.error) == "UNKNOWN_TOPIC_OR_PARTITION":
                if args.output == "json":
                    print_json({"name": args.topic, "altered": False, "exists": False})
                return EXIT_OK
            raise_if_error(result.error)
        if args.output == "json":
            print_json(
                {
                    "name": args.topic,
                    "partitions": args.partitions,
                    "validate_only": args.validate_only,
                    "altered": not args.validate_only,
                }
            )
        elif args.validate_only:
            print(
                f"Topic {args.topic} can be grown to {args.partitions} partitions (validate only: nothing was changed)."
            )
        else:
            print(f"Adding partitions succeeded! Topic {args.topic} now has {args.partitions} partitions.")
        return EXIT_OK

    return run_with_admin(args, make_admin, body)
