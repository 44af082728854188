"""``kraftlog reassign``: move partition replicas, like ``kafka-reassign-partitions.sh``.

Plans use Kafka's JSON format::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3]}]}

(``log_dirs``, when present, must be ``"any"`` for every replica.)

* ``generate --topics-to-move-json-file F --broker-list 1,2,3`` proposes a plan, computed locally
  with Kafka's replica placement from DescribeTopics and DescribeCluster; nothing is changed;
* ``execute --reassignment-json-file F`` prints the current assignment (keep it to roll back),
  then starts the reassignments (AlterPartitionReassignments);
* ``verify`` says, per partition, whether its reassignment is completed or still in progress
  (exit 1 when a partition ended up with other replicas than the plan's);
* ``cancel`` cancels the plan's reassignments that are still in progress.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from typing import Any, NamedTuple

from kraftlog.cli._admin_command import (
    ClusterError,
    add_admin_options,
    error_failed,
    error_json,
    error_name,
    error_text,
    join_ids,
    make_admin,
    raise_if_error,
    read_json_file,
    report_error,
    run_with_admin,
    tp_name,
)
from kraftlog.cli._common import EXIT_FAILURE, EXIT_OK, Subparsers, UserError, described, json_dumps, print_json

__all__ = ["add_parser", "run", "make_admin", "parse_plan", "parse_topics_to_move", "plan_json", "PlanEntry"]

_SUPPORTED_VERSION = 1


class PlanEntry(NamedTuple):
    topic: str
    partition: int
    replicas: tuple[int, ...]


# ---------------------------------------------------------------------------- plan files


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_version(obj: dict[str, Any], path: str) -> None:
    version = obj.get("version", _SUPPORTED_VERSION)
    if not _is_int(version) or version != _SUPPORTED_VERSION:
        raise UserError(f"{path}: unsupported version {version!r} (only version 1 is supported)")


def parse_plan(obj: Any, path: str = "the plan") -> list[PlanEntry]:
    """Validate a reassignment plan (Kafka's JSON format); any problem is a UserError."""
    if not isinstance(obj, dict):
        raise UserError(f"{path}: a reassignment plan must be a JSON object with a 'partitions' list")
    _check_version(obj, path)
    partitions = obj.get("partitions")
    if not isinstance(partitions, list):
        raise UserError(f"{path}: 'partitions' must be a list")
    if not partitions:
        raise UserError(f"{path}: the partition reassignment list cannot be empty")
    out: list[PlanEntry] = []
    seen: set[tuple[str, int]] = set()
    duplicates: list[str] = []
    for i, item in enumerate(partitions):
        where = f"{path}: partitions[{i}]"
        if not isinstance(item, dict):
            raise UserError(f"{where} must be an object with topic, partition and replicas")
        topic, partition, replicas = item.get("topic"), item.get("partition"), item.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise UserError(f"{where}: 'topic' must be a non-empty string")
        if not isinstance(partition, int) or not _is_int(partition) or partition < 0:
            raise UserError(f"{where}: 'partition' must be a non-negative integer")
        if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
            raise UserError(f"{where}: 'replicas' must be a list of broker ids")
        if not replicas:
            raise UserError(f"{where}: the replica list of {tp_name(topic, partition)} cannot be empty")
        if any(r < 0 for r in replicas):
            raise UserError(f"{where}: broker ids cannot be negative")
        dup = sorted({r for r in replicas if replicas.count(r) > 1})
        if dup:
            raise UserError(
                f"{path}: partition replica lists may not contain duplicate entries: "
                f"{tp_name(topic, partition)} contains {join_ids(dup)}"
            )
        log_dirs = item.get("log_dirs")
        if log_dirs is not None:
            if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
                raise UserError(f"{where}: 'log_dirs' must list one directory per replica")
            if any(d != "any" for d in log_dirs):
                raise UserError(
                    f"{where}: moving replicas between log dirs is not supported "
                    f"(every 'log_dirs' entry must be \"any\")"
                )
        if (topic, partition) in seen:
            duplicates.append(tp_name(topic, partition))
        seen.add((topic, partition))
        out.append(PlanEntry(topic, partition, tuple(replicas)))
    if duplicates:
        raise UserError(f"{path}: the plan contains duplicate topic partitions: {', '.join(duplicates)}")
    return out


def parse_topics_to_move(obj: Any, path: str = "the topics file") -> list[str]:
    """``{"version": 1, "topics": [{"topic": "foo"}, ...]}`` -> ``["foo", ...]``."""
    if not isinstance(obj, dict):
        raise UserError(f"{path}: expected a JSON object with a 'topics' list")
    _check_version(obj, path)
    topics = obj.get("topics")
    if not isinstance(topics, list) or not topics:
        raise UserError(f"{path}: 'topics' must be a non-empty list")
    names: list[str] = []
    for i, item in enumerate(topics):
        name = item.get("topic") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            raise UserError(f"{path}: topics[{i}] must be an object with a non-empty 'topic'")
        if name in names:
            raise UserError(f"{path}: topic {name!r} is listed twice")
        names.append(name)
    return names


def plan_json(entries: Sequence[PlanEntry]) -> dict[str, Any]:
    """A plan in Kafka's format (with ``log_dirs`` all ``"any"``), sorted by topic and partition."""
    return {
        "version": _SUPPORTED_VERSION,
        "partitions": [
            {
                "topic": e.topic,
                "partition": e.partition,
                "replicas": list(e.replicas),
                "log_dirs": ["any"] * len(e.replicas),
            }
            for e in sorted(entries, key=lambda e: (e.topic, e.partition))
        ],
    }


def _broker_list(text: str) -> list[int]:
    out: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            broker = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a broker id") from None
        if broker < 0:
            raise argparse.ArgumentTypeError(f"broker id {broker} is negative")
        if broker in out:
            raise argparse.ArgumentTypeError(f"broker {broker} is listed twice")
        out.append(broker)
    if not out:
        raise argparse.ArgumentTypeError("expected a comma-separated list of broker ids")
    return out


# ---------------------------------------------------------------------------- parser


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "reassign",
        help="move partition replicas between brokers (kafka-reassign-partitions)",
        **described(__doc__),
    )
    sub = parser.add_subparsers(dest="reassign_command", metavar="ACTION")
    sub.required = True

    gen = sub.add_parser("generate", help="propose a plan moving topics onto a list of brokers")
    gen.add_argument(
        "--topics-to-move-json-file",
        required=True,
        metavar="FILE",
        help='JSON file: {"version":1,"topics":[{"topic":"foo"}]}',
    )
    gen.add_argument(
        "--broker-list",
        required=True,
        type=_broker_list,
        metavar="ID,ID,...",
        help="brokers the topics' partitions may be placed on",
    )
    gen.add_argument("--disable-rack-aware", action="store_true", help="ignore broker racks when placing replicas")
    add_admin_options(gen)

    for action, text in (
        ("execute", "start the reassignments of a plan"),
        ("verify", "report whether the reassignments of a plan are done"),
        ("cancel", "cancel the plan's reassignments that are in progress"),
    ):
        p = sub.add_parser(action, help=text)
        p.add_argument(
            "--reassignment-json-file",
            required=True,
            metavar="FILE",
            help='the plan: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}',
        )
        if action == "execute":
            p.add_argument(
                "--additional", action="store_true", help="start even if other reassignments are in progress"
            )
        add_admin_options(p)
    return parser


def run(args: argparse.Namespace) -> int:
    action = args.reassign_command
    if action == "generate":
        topics = parse_topics_to_move(
            read_json_file(args.topics_to_move_json_file, "topics file"), args.topics_to_move_json_file
        )
        return run_with_admin(args, make_admin, lambda admin: _generate(admin, args, topics))
    plan = parse_plan(read_json_file(args.reassignment_json_file, "reassignment plan"), args.reassignment_json_file)
    body = {"execute": _execute, "verify": _verify, "cancel": _cancel}[action]
    return run_with_admin(args, make_admin, lambda admin: body(admin, args, plan))


# ---------------------------------------------------------------------------- helpers


def _topic_partitions(plan: Sequence[PlanEntry]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for e in plan:
        out.setdefault(e.topic, []).append(e.partition)
    return out


def _describe(admin: Any, topics: Sequence[str]) -> dict[str, Any]:
    """Topic name -> DescribeTopics topic; an unknown topic is a ClusterError."""
    response = admin.describe_topics(list(topics))
    found: dict[str, Any] = {}
    for topic in response.topics:
        if error_failed(topic.error):
            raise ClusterError(error_name(topic.error), f"topic {topic.name!r}: {topic.error.message}")
        found[topic.name] = topic
    missing = [t for t in topics if t not in found]
    if missing:
        raise ClusterError("UNKNOWN_TOPIC_OR_PARTITION", f"topic(s) {', '.join(missing)} not found")
    return found


def _current_replicas(described: dict[str, Any]) -> dict[tuple[str, int], tuple[int, ...]]:
    return {(name, p.partition_index): tuple(p.replicas) for name, topic in described.items() for p in topic.partitions}


def _ongoing(admin: Any, partitions: dict[str, list[int]] | None) -> dict[tuple[str, int], Any]:
    response = admin.list_partition_reassignments(partitions)
    raise_if_error(response.error)
    return {(r.topic, r.partition): r for r in response.reassignments}


# ---------------------------------------------------------------------------- generate


def _generate(admin: Any, args: argparse.Namespace, topics: list[str]) -> int:
    from kraftlog import metadata_log

    described = _describe(admin, topics)
    cluster = admin.describe_cluster()
    raise_if_error(cluster.error)
    racks = {b.broker_id: (b.rack or None) for b in cluster.brokers}
    unknown = [b for b in args.broker_list if b not in racks]
    if unknown:
        raise UserError(f"unknown broker id(s) in --broker-list: {join_ids(unknown)}")
    brokers = {b: racks[b] for b in args.broker_list}
    mode = metadata_log.RackAwareMode.DISABLED if args.disable_rack_aware else metadata_log.RackAwareMode.ENFORCED
    current: list[PlanEntry] = []
    proposed: list[PlanEntry] = []
    rng = random.Random()
    for name in topics:
        parts = sorted(described[name].partitions, key=lambda p: p.partition_index)
        current += [PlanEntry(name, p.partition_index, tuple(p.replicas)) for p in parts]
        if not parts:
            continue
        rf = len(parts[0].replicas) - len(parts[0].adding_replicas)
        try:
            assignment = metadata_log.assign_replicas(brokers, len(parts), rf, rng, rack_aware_mode=mode)
        except metadata_log.PlacementError as err:
            hint = (
                " Add --disable-rack-aware to place replicas without rack information."
                if "rack" in str(err).lower() and not args.disable_rack_aware
                else ""
            )
            raise UserError(
                f"cannot place topic {name!r} on brokers {join_ids(args.broker_list)}: {err}{hint}"
            ) from None
        proposed += [PlanEntry(name, p.partition_index, tuple(assignment[i])) for i, p in enumerate(parts)]
    if args.output == "json":
        print_json({"current": plan_json(current), "proposed": plan_json(proposed)})
        return EXIT_OK
    print("Current partition replica assignment")
    print(json_dumps(plan_json(current)))
    print()
    print("Proposed partition reassignment configuration")
    print(json_dumps(plan_json(proposed)))
    return EXIT_OK


# ---------------------------------------------------------------------------- execute


def _execute(admin: Any, args: argparse.Namespace, plan: list[PlanEntry]) -> int:
    if not args.additional:
        ongoing = _ongoing(admin, None)
        if ongoing:
            raise ClusterError(
                "REASSIGNMENT_IN_PROGRESS",
                f"cannot execute because there is an existing partition assignment "
                f"({', '.join(tp_name(t, p) for t, p in sorted(ongoing))}); use --additional to "
                f"create a new partition assignment in addition to the existing one",
            )
    described = _describe(admin, list(_topic_partitions(plan)))
    replicas = _current_replicas(described)
    missing = [tp_name(e.topic, e.partition) for e in plan if (e.topic, e.partition) not in replicas]
    if missing:
        raise ClusterError("UNKNOWN_TOPIC_OR_PARTITION", f"partition(s) {', '.join(missing)} not found")
    current = [PlanEntry(e.topic, e.partition, replicas[(e.topic, e.partition)]) for e in plan]
    response = admin.alter_partition_reassignments(
        {(e.topic, e.partition): list(e.replicas) for e in plan}, timeout_ms=args.request_timeout_ms
    )
    raise_if_error(response.error)
    errors = {(r.topic, r.partition): r.error for r in response.results if error_failed(r.error)}
    started = [e for e in plan if (e.topic, e.partition) not in errors]
    if args.output == "json":
        print_json(
            {
                "current": plan_json(current),
                "results": [
                    {
                        "topic": e.topic,
                        "partition": e.partition,
                        "replicas": list(e.replicas),
                        "started": (e.topic, e.partition) not in errors,
                        "error": error_json(errors.get((e.topic, e.partition))),
                    }
                    for e in plan
                ],
            }
        )
    else:
        print("Current partition replica assignment")
        print()
        print(json_dumps(plan_json(current)))
        print()
        print("Save this to use as the --reassignment-json-file option during rollback")
        if started:
            print(
                "Successfully started partition reassignments for "
                + ",".join(tp_name(e.topic, e.partition) for e in started)
            )
    if errors:
        for (topic, partition), err in sorted(errors.items()):
            report_error(args, f"cannot reassign partition {tp_name(topic, partition)}: {error_text(err)}")
        return EXIT_FAILURE
    return EXIT_OK


# ---------------------------------------------------------------------------- verify


def _verify(admin: Any, args: argparse.Namespace, plan: list[PlanEntry]) -> int:
    ongoing = _ongoing(admin, _topic_partitions(plan))
    response = admin.describe_topics(list(_topic_partitions(plan)))
    replicas: dict[tuple[str, int], tuple[int, ...]] = {}
    for topic in response.topics:
        if not error_failed(topic.error):
            replicas.update({(topic.name, p.partition_index): tuple(p.replicas) for p in topic.partitions})
    results = []
    for e in plan:
        key = (e.topic, e.partition)
        name = tp_name(e.topic, e.partition)
        now = replicas.get(key)
        if key in ongoing:
            status, line = "in_progress", f"Reassignment of partition {name} is still in progress."
        elif now is None:
            status, line = "missing", f"Reassignment of partition {name} failed: the partition does not exist."
        elif now == e.replicas:
            status, line = "completed", f"Reassignment of partition {name} is completed."
        else:
            status = "mismatch"
            line = (
                f"There is no active reassignment of partition {name}, but replica set is "
                f"{join_ids(now)} rather than {join_ids(e.replicas)}."
            )
        results.append((e, status, now, line))
    failed = any(status in ("missing", "mismatch") for _, status, _, _ in results)
    if args.output == "json":
        print_json(
            {
                "complete": all(s == "completed" for _, s, _, _ in results),
                "partitions": [
                    {
                        "topic": e.topic,
                        "partition": e.partition,
                        "status": status,
                        "target_replicas": list(e.replicas),
                        "current_replicas": list(now) if now is not None else None,
                    }
                    for e, status, now, _ in results
                ],
            }
        )
    else:
        print("Status of partition reassignment:")
        for *_, line in results:
            print(line)
    return EXIT_FAILURE if failed else EXIT_OK


# ---------------------------------------------------------------------------- cancel


def _cancel(admin: Any, args: argparse.Namespace, plan: list[PlanEntry]) -> int:
    ongoing = _ongoing(admin, _topic_partitions(plan))
    targets = [e for e in plan if (e.topic, e.partition) in ongoing]
    cancelled: list[PlanEntry] = []
    errors: dict[tuple[str, int], Any] = {}
    if targets:
        response = admin.alter_partition_reassignments(
            {(e.topic, e.partition): None for e in targets}, timeout_ms=args.request_timeout_ms
        )
        raise_if_error(response.error)
        by_tp = {(r.topic, r.partition): r.error for r in response.results}
        for e in targets:
            err = by_tp.get((e.topic, e.partition))
            if not error_failed(err):
                cancelled.append(e)
            elif error_name(err) != "NO_REASSIGNMENT_IN_PROGRESS":  # finished meanwhile: nothing to cancel
                errors[(e.topic, e.partition)] = err
    if args.output == "json":
        done = {(e.topic, e.partition) for e in cancelled}
        print_json(
            {
                "partitions": [
                    {
                        "topic": e.topic,
                        "partition": e.partition,
                        "cancelled": (e.topic, e.partition) in done,
                        "was_active": (e.topic, e.partition) in ongoing,
                        "error": error_json(errors.get((e.topic, e.partition))),
                    }
                    for e in plan
                ]
            }
        )
    elif cancelled:
        print(
            "Successfully cancelled partition reassignments for: "
            + ",".join(tp_name(e.topic, e.partition) for e in cancelled)
        )
    elif not errors:
        print("None of the specified partition reassignments are active.")
    for (topic, partition), err in sorted(errors.items()):
        report_error(args, f"cannot cancel the reassignment of {tp_name(topic, partition)}: {error_text(err)}")
    return EXIT_FAILURE if errors else EXIT_OK
