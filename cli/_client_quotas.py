"""``kraftlog client-quotas``: client quotas (KIP-546), like ``kafka-configs.sh --entity-type
users|clients`` with quota configs.

An entity is one or two ``--entity-type users|clients`` each followed by ``--entity-name NAME``
or ``--entity-default`` (kafka-configs' pairing, in order)::

    kraftlog client-quotas --alter --entity-type users --entity-name alice \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    kraftlog client-quotas --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-default --delete-config request_percentage
    kraftlog client-quotas --describe [--entity-type clients [--entity-name app]] [--output json]

``--describe`` with an entity type and no name lists every entity of that type; with no entity
at all, every quota. Keys: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage
(% of one request thread), controller_mutation_rate (partition mutations/s).
"""

from __future__ import annotations

import argparse
from typing import Any

from kraftlog.cli._admin_command import ClusterError, add_admin_options, error_name, make_admin, run_with_admin
from kraftlog.cli._common import EXIT_OK, Subparsers, UserError, print_json, print_table
from kraftlog.cli._configs import parse_config_list, parse_name_list

__all__ = ["add_parser", "make_admin", "run"]

_TYPES = {"users": "user", "clients": "client-id", "user": "user", "client-id": "client-id"}
_DEFAULT_TEXT = "<default>"


class _EntityPart(argparse.Action):
    """Keeps ``--entity-type`` / ``--entity-name`` / ``--entity-default`` in the order given."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        parts = list(getattr(namespace, "entity_parts", None) or [])
        parts.append((self.const, values))
        namespace.entity_parts = parts


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "client-quotas",
        help="set, delete and describe client quotas (kafka-configs --entity-type users|clients)",
        description="Produce/fetch byte rates, request percentage and controller mutation rate per user, "
        "client id, or both, kept in the metadata log as ClientQuotaRecords.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list quotas")
    action.add_argument("--alter", action="store_true", help="set or delete quotas of one entity")
    parser.set_defaults(entity_parts=[])
    parser.add_argument(
        "--entity-type", action=_EntityPart, const="type", metavar="users|clients", help="an entity type"
    )
    parser.add_argument("--entity-name", action=_EntityPart, const="name", metavar="NAME", help="the entity's name")
    parser.add_argument(
        "--entity-default", action=_EntityPart, const="default", nargs=0, help="the type's default entity"
    )
    parser.add_argument(
        "--add-config", action="append", default=[], metavar="K=V[,K=V]", help="quotas to set (with --alter)"
    )
    parser.add_argument(
        "--delete-config", action="append", default=[], metavar="K[,K]", help="quotas to remove (with --alter)"
    )
    add_admin_options(parser)
    return parser


def _entity(parts: list[tuple[str, Any]]) -> list[tuple[str, str | None, bool]]:
    """``(entity_type, name, named)`` per ``--entity-type``; named False: no name or default given."""
    out: list[tuple[str, str | None, bool]] = []
    for kind, value in parts:
        if kind == "type":
            entity_type = _TYPES.get(value)
            if entity_type is None:
                raise UserError(f"--entity-type {value!r}: use users or clients (ip quotas are not supported)")
            if any(t == entity_type for t, _n, _named in out):
                raise UserError(f"--entity-type {value} given twice")
            out.append((entity_type, None, False))
        else:
            if not out or out[-1][2]:
                raise UserError(f"--entity-{'name' if kind == 'name' else 'default'} must follow an --entity-type")
            name = None if kind == "default" or value == _DEFAULT_TEXT else value
            out[-1] = (out[-1][0], name, True)
    return out


def _parse_value(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UserError(f"--add-config {key}={text}: the value must be a number") from None


def run(args: argparse.Namespace) -> int:
    entity = _entity(args.entity_parts)
    if args.describe:
        if args.add_config or args.delete_config:
            raise UserError("--add-config and --delete-config go with --alter")
        components = [(t, 0 if n is not None else 1, n) if named else (t, 2, None) for t, n, named in entity]
        return run_with_admin(args, make_admin, lambda admin: _describe(admin, args, components))
    if not entity:
        raise UserError("--alter needs --entity-type users|clients with --entity-name or --entity-default")
    for t, _n, named in entity:
        if not named:
            raise UserError(f"--entity-type {t} needs --entity-name NAME or --entity-default")
    ops: dict[str, float | None] = {
        k: _parse_value(k, v) for k, v in parse_config_list(args.add_config, "--add-config").items()
    }
    for key in parse_name_list(args.delete_config, "--delete-config"):
        if key in ops:
            raise UserError(f"{key} is both added and deleted")
        ops[key] = None
    if not ops:
        raise UserError("give --add-config or --delete-config")
    alteration = ({t: n for t, n, _named in entity}, ops)
    return run_with_admin(args, make_admin, lambda admin: _alter(admin, args, alteration))


def _entity_text(entity: Any) -> str:
    return ", ".join(f"{t}={_DEFAULT_TEXT if n is None else n}" for t, n in entity)


def _alter(admin: Any, args: argparse.Namespace, alteration: Any) -> int:
    response = admin.alter_client_quotas([alteration])
    if response.error.code:
        raise ClusterError(error_name(response.error), response.error.message)
    for result in response.results:
        if result.error.code:
            raise ClusterError(error_name(result.error), result.error.message)
    entity = sorted(alteration[0].items())
    if args.output == "json":
        print_json({"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "altered": True})
    else:
        print(f"Completed updating quotas for {_entity_text(entity)}.")
    return EXIT_OK


def _describe(admin: Any, args: argparse.Namespace, components: list[Any]) -> int:
    found = admin.describe_client_quotas(components, strict=bool(components))
    if args.output == "json":
        print_json(
            {
                "quotas": [
                    {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity], "values": values}
                    for entity, values in found
                ]
            }
        )
    else:
        rows = [
            [_entity_text(entity), key, _format(value)]
            for entity, values in found
            for key, value in sorted(values.items())
        ]
        print_table(["ENTITY", "QUOTA", "VALUE"], rows)
    return EXIT_OK


def _format(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
