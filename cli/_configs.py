"""``kraftlog configs``: describe and alter topic, broker and group configs, like ``kafka-configs.sh``.

``describe`` shows the dynamic configs of one entity (``--all`` adds every effective config with
its source), in Kafka's ``name=value sensitive=... synonyms={SOURCE:name=value, ...}`` lines (every
layer the value could come from, in the cluster's order, as kafka-configs prints them);
``alter`` sends one IncrementalAlterConfigs request built from ``--add-config``,
``--delete-config``, ``--append-config`` and ``--subtract-config``.

Values with commas are written in square brackets, as in Kafka:
``--add-config cleanup.policy=[compact,delete],retention.ms=1000``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from kraftlog.cli._admin_command import (
    ClusterError,
    add_admin_options,
    make_admin,
    raise_if_error,
    run_with_admin,
)
from kraftlog.cli._common import EXIT_OK, Subparsers, UserError, print_json

__all__ = ["add_parser", "run", "make_admin", "parse_config_list", "parse_name_list"]

# ConfigResource types (proto/admin.proto): 2 = topic, 4 = broker, 32 = group (KIP-848's group configs).
RESOURCE_TYPES = {"topics": 2, "brokers": 4, "groups": 32}
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_DYNAMIC_SOURCE = {"topics": "DYNAMIC_TOPIC_CONFIG", "brokers": "DYNAMIC_BROKER_CONFIG", "groups": "GROUP_CONFIG"}
_SINGULAR = {"topics": "topic", "brokers": "broker", "groups": "group"}
_DEFAULT_BROKER_SOURCE = "DYNAMIC_DEFAULT_BROKER_CONFIG"


def _split_outside_brackets(text: str) -> list[str]:
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    return items


def parse_config_list(texts: Sequence[str], option: str) -> dict[str, str]:
    """``k1=v1,k2=[a,b]`` (repeatable) -> ``{"k1": "v1", "k2": "a,b"}``; bad input is a UserError."""
    out: dict[str, str] = {}
    for text in texts:
        for item in _split_outside_brackets(text):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key:
                raise UserError(
                    f"invalid {option} entry {item.strip()!r}: expected key=value "
                    f"(put values with commas in square brackets: key=[a,b])"
                )
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key] = value
    return out


def parse_name_list(texts: Sequence[str], option: str) -> list[str]:
    names: list[str] = []
    for text in texts:
        for name in text.split(","):
            name = name.strip()
            if name and name not in names:
                names.append(name)
    if texts and not names:
        raise UserError(f"{option} needs at least one config name")
    return names


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "configs",
        help="describe and alter topic, broker and group configs (kafka-configs)",
        description=(
            "Describe and alter the dynamic configs of topics, brokers and groups, like Kafka's kafka-configs.sh."
        ),
    )
    sub = parser.add_subparsers(dest="configs_command", metavar="ACTION")
    sub.required = True

    def entity_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--entity-type", required=True, choices=sorted(RESOURCE_TYPES), help="the kind of entity")
        p.add_argument("--entity-name", default=None, metavar="NAME", help="topic name, broker id or group id")
        p.add_argument(
            "--entity-default",
            action="store_true",
            help="the cluster-wide default broker configs (with --entity-type brokers)",
        )

    describe = sub.add_parser("describe", help="show the configs of a topic or broker")
    entity_options(describe)
    describe.add_argument("--all", action="store_true", help="every effective config, not only the dynamic ones")
    add_admin_options(describe)

    alter = sub.add_parser("alter", help="set or delete configs of a topic or broker")
    entity_options(alter)
    alter.add_argument("--add-config", action="append", default=[], metavar="K=V,K2=[A,B],...", help="configs to set")
    alter.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K,K2,...",
        help="configs to remove (back to their default)",
    )
    alter.add_argument(
        "--append-config", action="append", default=[], metavar="K=V,...", help="values to append to list configs"
    )
    alter.add_argument(
        "--subtract-config", action="append", default=[], metavar="K=V,...", help="values to remove from list configs"
    )
    add_admin_options(alter)
    return parser


def _entity(args: argparse.Namespace) -> tuple[int, str, str]:
    """``(resource_type, resource_name, description)`` from the entity options."""
    etype = args.entity_type
    if args.entity_default:
        if etype != "brokers":
            raise UserError("--entity-default is only valid with --entity-type brokers")
        if args.entity_name is not None:
            raise UserError("--entity-name and --entity-default cannot be used together")
        return RESOURCE_TYPES[etype], "", "default config for brokers in the cluster"
    if args.entity_name is None or not args.entity_name.strip():
        raise UserError(
            f"--entity-name is required with --entity-type {etype}"
            + (" (or --entity-default)" if etype == "brokers" else "")
        )
    name = args.entity_name.strip()
    if etype == "brokers":
        try:
            broker_id = int(name)
        except ValueError:
            raise UserError(f"the entity name for brokers must be a broker id, not {name!r}") from None
        if broker_id < 0:
            raise UserError(f"broker id {broker_id} is negative")
        return RESOURCE_TYPES[etype], str(broker_id), f"config for broker {broker_id}"
    return RESOURCE_TYPES[etype], name, f"config for {_SINGULAR[etype]} {name}"


def run(args: argparse.Namespace) -> int:
    rtype, rname, what = _entity(args)
    if args.configs_command == "describe":
        return run_with_admin(args, make_admin, lambda admin: _describe(admin, args, rtype, rname))
    sets = parse_config_list(args.add_config, "--add-config")
    deletes = parse_name_list(args.delete_config, "--delete-config")
    appends = parse_config_list(args.append_config, "--append-config")
    subtracts = parse_config_list(args.subtract_config, "--subtract-config")
    if not (sets or deletes or appends or subtracts):
        raise UserError(
            "at least one of --add-config, --delete-config, --append-config or --subtract-config is required"
        )
    seen: dict[str, str] = {}
    for option, keys in (
        ("--add-config", sets),
        ("--delete-config", deletes),
        ("--append-config", appends),
        ("--subtract-config", subtracts),
    ):
        for key in keys:
            if key in seen:
                raise UserError(f"config {key!r} is given to both {seen[key]} and {option}")
            seen[key] = option
    ops = (
        [(k, OP_SET, v) for k, v in sets.items()]
        + [(k, OP_DELETE, "") for k in deletes]
        + [(k, OP_APPEND, v) for k, v in appends.items()]
        + [(k, OP_SUBTRACT, v) for k, v in subtracts.items()]
    )

    def body(admin: Any) -> int:
        response = admin.incremental_alter_configs({(rtype, rname): ops})
        if not response.results:
            raise ClusterError("UNKNOWN_SERVER_ERROR", "the response has no result")
        for result in response.results:
            raise_if_error(result.error)
        if args.output == "json":
            print_json(
                {
                    "entity_type": args.entity_type,
                    "entity_name": rname or None,
                    "set": sets,
                    "deleted": deletes,
                    "appended": appends,
                    "subtracted": subtracts,
                }
            )
        else:
            print(f"Completed updating {what}.")
        return EXIT_OK

    return run_with_admin(args, make_admin, body)


def _heading(args: argparse.Namespace, rname: str) -> str:
    kind = "All" if args.all else "Dynamic"
    if args.entity_type == "brokers" and not rname:
        return f"{'All' if args.all else 'Default'} configs for brokers in the cluster are:"
    return f"{kind} configs for {_SINGULAR[args.entity_type]} {rname} are:"


def _synonyms(entry: Any, value: str) -> str:
    """kafka-configs' ``SOURCE:name=value, ...``: every layer the value could come from, first the
    one it comes from; a cluster that sends none (an older kraftlog) gets the entry's own source."""
    if entry.synonyms:
        return ", ".join(
            f"{s.source}:{s.name}={s.value if s.has_value and not entry.is_sensitive else 'null'}"
            for s in entry.synonyms
        )
    return f"{entry.source}:{entry.name}={value}" if entry.source else ""


def _describe(admin: Any, args: argparse.Namespace, rtype: int, rname: str) -> int:
    response = admin.describe_configs([(rtype, rname)], include_synonyms=True)
    result = next(iter(response.results), None)
    if result is None:
        raise ClusterError("UNKNOWN_SERVER_ERROR", "the response has no result")
    raise_if_error(result.error)
    source = (
        _DEFAULT_BROKER_SOURCE if (args.entity_type == "brokers" and not rname) else _DYNAMIC_SOURCE[args.entity_type]
    )
    entries = [e for e in result.configs if args.all or e.source == source]
    entries.sort(key=lambda e: e.name)
    if args.output == "json":
        print_json(
            {
                "entity_type": args.entity_type,
                "entity_name": rname or None,
                "configs": [
                    {
                        "name": e.name,
                        "value": e.value if e.has_value and not e.is_sensitive else None,
                        "source": e.source,
                        "is_default": e.is_default,
                        "read_only": e.read_only,
                        "is_sensitive": e.is_sensitive,
                    }
                    for e in entries
                ],
            }
        )
        return EXIT_OK
    print(_heading(args, rname))
    for e in entries:
        value = e.value if e.has_value and not e.is_sensitive else "null"
        print(f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} synonyms={{{_synonyms(e, value)}}}")
    return EXIT_OK
