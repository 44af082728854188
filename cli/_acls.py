"""``kraftlog acls``: add, remove and list ACLs, like Kafka's ``kafka-acls.sh``.

The same options: ``--add`` / ``--remove`` / ``--list``; principals with ``--allow-principal`` and
``--deny-principal`` (``User:alice``; repeatable), hosts with ``--allow-host`` / ``--deny-host``
(default ``*``), ``--operation`` (repeatable; default All), resources with ``--topic``, ``--group``,
``--transactional-id`` (repeatable) and ``--cluster``, ``--resource-pattern-type``
(literal, prefixed; for --list and --remove also any and match). ``--add`` creates every
combination of resource x principal x host x operation; ``--remove`` deletes what those
combinations name (without principals: every ACL of the resources), asking first on a terminal
unless ``--force``; ``--list`` shows the ACLs of the resources given (none: all), optionally only
those of ``--principal``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kraftlog.cli._admin_command import (
    ClusterError,
    add_admin_options,
    error_name,
    make_admin,
    raise_if_error,
    run_with_admin,
)
from kraftlog.cli._common import EXIT_OK, Subparsers, UserError, print_json, print_table
from kraftlog.common.security import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["add_parser", "make_admin", "run"]


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "acls",
        help="add, remove and list ACLs (kafka-acls)",
        description="Add, remove and list ACLs, like Kafka's kafka-acls.sh.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="create ACLs")
    action.add_argument("--remove", action="store_true", help="delete ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    for flag, what in (("--allow-principal", "allowed"), ("--deny-principal", "denied")):
        parser.add_argument(flag, action="append", default=[], metavar="PRINCIPAL", help=f"principal {what}")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="host allowed (default *)")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="host denied (default *)")
    parser.add_argument("--operation", action="append", default=[], metavar="OP", help="operation (default All)")
    parser.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic resource")
    parser.add_argument("--group", action="append", default=[], metavar="GROUP", help="a consumer group resource")
    parser.add_argument(
        "--transactional-id", action="append", default=[], metavar="ID", help="a transactional id resource"
    )
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        default=None,
        metavar="TYPE",
        help="literal (default of --add, --remove), prefixed; --list and --remove also any (default of --list), match",
    )
    parser.add_argument("--principal", default=None, help="with --list: only this principal's ACLs")
    parser.add_argument("--force", action="store_true", help="with --remove: do not ask for confirmation")
    add_admin_options(parser)
    return parser


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME))
    return out


def _pattern(args: argparse.Namespace, default: str, allowed: tuple[str, ...]) -> PatternType:
    text = (args.resource_pattern_type or default).lower()
    if text not in allowed:
        raise UserError(f"--resource-pattern-type {text!r} is not one of {', '.join(allowed)} here")
    return PatternType[text.upper()]


def _operations(args: argparse.Namespace) -> list[AclOperation]:
    ops = [AclOperation.from_string(op) for op in args.operation] or [AclOperation.ALL]
    for text, op in zip(args.operation, ops, strict=False):
        if op.is_unknown or op is AclOperation.ANY:
            names = ", ".join(o.display_name for o in AclOperation if o.value > 1)
            raise UserError(f"--operation {text!r} is not one of {names}")
    return ops


def _entries(args: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) of the principals given, each with its hosts."""
    out: list[tuple[str, str, AclPermissionType]] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host or ["*"], AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host or ["*"], AclPermissionType.DENY),
    ):
        for principal in principals:
            if ":" not in principal:
                raise UserError(f"principal {principal!r} must be Type:name (User:alice)")
            out.extend((principal, host, permission) for host in hosts)
    return out


def run(args: argparse.Namespace) -> int:
    from kraftlog.proto import security_pb2 as pb

    resources = _resources(args)
    if args.list:
        pattern = _pattern(args, "any", ("any", "match", "literal", "prefixed"))
        filters = [
            pb.AclBindingFilter(
                resource_type=int(rtype), resource_name=name, pattern_type=int(pattern), operation=1, permission_type=1
            )
            for rtype, name in resources
        ] or [pb.AclBindingFilter(resource_type=1, pattern_type=1, operation=1, permission_type=1)]
        if args.principal:
            for f in filters:
                f.principal = args.principal
        return run_with_admin(args, make_admin, lambda admin: _list(admin, args, filters))
    if not resources:
        raise UserError("name at least one resource: --topic, --group, --transactional-id or --cluster")
    operations = _operations(args)
    entries = _entries(args)
    if args.add:
        if not entries:
            raise UserError("--add needs --allow-principal or --deny-principal")
        pattern = _pattern(args, "literal", ("literal", "prefixed"))
        bindings = [
            pb.AclBinding(
                resource_type=int(rtype),
                resource_name=name,
                pattern_type=int(pattern),
                principal=principal,
                host=host,
                operation=int(op),
                permission_type=int(permission),
            )
            for rtype, name in resources
            for principal, host, permission in entries
            for op in operations
        ]
        return run_with_admin(args, make_admin, lambda admin: _add(admin, args, bindings))
    pattern = _pattern(args, "literal", ("any", "match", "literal", "prefixed"))
    filters = []
    for rtype, name in resources:
        if not entries:
            filters.append(
                pb.AclBindingFilter(
                    resource_type=int(rtype),
                    resource_name=name,
                    pattern_type=int(pattern),
                    operation=1,
                    permission_type=1,
                )
            )
        for principal, host, permission in entries:
            filters.extend(
                pb.AclBindingFilter(
                    resource_type=int(rtype),
                    resource_name=name,
                    pattern_type=int(pattern),
                    principal=principal,
                    host=host,
                    operation=int(op),
                    permission_type=int(permission),
                )
                for op in (operations if args.operation else [AclOperation.ANY])
            )
    if not args.force and sys.stdin.isatty():
        answer = input(f"Are you sure you want to remove ACLs matching {len(filters)} filter(s)? (y/n) ")
        if answer.strip().lower() not in ("y", "yes"):
            return EXIT_OK
    return run_with_admin(args, make_admin, lambda admin: _remove(admin, args, filters))


def _row(acl: Any) -> dict[str, Any]:
    return {
        "resource_type": ResourceType.from_code(acl.resource_type).display_name,
        "resource_name": acl.resource_name,
        "pattern_type": PatternType.from_code(acl.pattern_type).name,
        "principal": acl.principal,
        "host": acl.host,
        "operation": AclOperation.from_code(acl.operation).display_name,
        "permission_type": AclPermissionType.from_code(acl.permission_type).name,
    }


def _print(args: argparse.Namespace, rows: list[dict[str, Any]], key: str) -> None:
    if args.output == "json":
        print_json({key: rows})
        return
    headers = ["RESOURCE", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
    print_table(
        headers,
        [
            [
                f"{r['resource_type']}:{r['resource_name']}",
                r["pattern_type"],
                r["principal"],
                r["host"],
                r["operation"],
                r["permission_type"],
            ]
            for r in rows
        ],
    )


def _add(admin: Any, args: argparse.Namespace, bindings: list[Any]) -> int:
    response = admin.create_acls(bindings)
    raise_if_error(response.error)
    for binding, result in zip(bindings, response.results, strict=False):
        if result.error.code:
            raise ClusterError(error_name(result.error), f"{result.error.message} ({_row(binding)})")
    _print(args, [_row(b) for b in bindings], "created")
    return EXIT_OK


def _remove(admin: Any, args: argparse.Namespace, filters: list[Any]) -> int:
    response = admin.delete_acls(filters)
    raise_if_error(response.error)
    removed: list[dict[str, Any]] = []
    for result in response.filter_results:
        raise_if_error(result.error)
        removed.extend(_row(m.acl) for m in result.matching)
    _print(args, removed, "removed")
    return EXIT_OK


def _list(admin: Any, args: argparse.Namespace, filters: list[Any]) -> int:
    rows: list[dict[str, Any]] = []
    for acl_filter in filters:
        response = admin.describe_acls(acl_filter)
        raise_if_error(response.error)
        rows.extend(r for r in map(_row, response.acls) if r not in rows)
    _print(args, rows, "acls")
    return EXIT_OK
