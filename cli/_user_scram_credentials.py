"""``kraftlog user-scram-credentials``: SCRAM credentials of users, like
``kafka-configs.sh --entity-type users`` with ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` configs.

``alter --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'``
sets a credential (iterations default 4096, Kafka's minimum); ``--delete-config SCRAM-SHA-512``
removes one. The password is salted and iterated by this command (RFC 5802 Hi()): only the salted
password reaches the cluster, and the metadata log keeps the derived keys, never the password.
``describe [--entity-name alice]`` lists mechanisms and iterations.
"""

from __future__ import annotations

import argparse
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
from kraftlog.cli._configs import parse_config_list, parse_name_list
from kraftlog.common.security import SCRAM_DEFAULT_ITERATIONS, ScramMechanism

__all__ = ["add_parser", "make_admin", "run"]

_DEFAULT_ITERATIONS = SCRAM_DEFAULT_ITERATIONS  # Kafka's kafka-configs default, and an unknown name's


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "user-scram-credentials",
        help="set, delete and describe users' SCRAM credentials (kafka-configs --entity-type users)",
        description="SCRAM-SHA-256 / SCRAM-SHA-512 credentials of users, kept in the metadata log.",
    )
    sub = parser.add_subparsers(dest="scram_command", metavar="ACTION")
    sub.required = True
    describe = sub.add_parser("describe", help="mechanisms and iterations of users' credentials")
    describe.add_argument("--entity-name", action="append", default=[], metavar="USER", help="a user (default: all)")
    add_admin_options(describe)
    alter = sub.add_parser("alter", help="set or delete a user's credentials")
    alter.add_argument("--entity-name", required=True, metavar="USER", help="the user")
    alter.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="MECHANISM=[iterations=N,password=P]",
        help="set a credential (SCRAM-SHA-256 or SCRAM-SHA-512)",
    )
    alter.add_argument("--delete-config", action="append", default=[], metavar="MECHANISM", help="delete a credential")
    add_admin_options(alter)
    return parser


def _mechanism(name: str) -> ScramMechanism:
    try:
        return ScramMechanism.from_name(name)
    except ValueError as err:
        raise UserError(str(err)) from None


def _upsertions(user: str, texts: list[str]) -> list[tuple[str, int, str, int]]:
    out = []
    for name, spec in parse_config_list(texts, "--add-config").items():
        mechanism = _mechanism(name)
        settings = parse_config_list([spec], f"--add-config {name}")
        unknown = set(settings) - {"iterations", "password"}
        if unknown:
            raise UserError(f"--add-config {name}: unknown setting(s) {sorted(unknown)} (iterations, password)")
        if "password" not in settings:
            raise UserError(f"--add-config {name} needs password=...")
        try:
            iterations = int(settings.get("iterations", _DEFAULT_ITERATIONS))
        except ValueError:
            raise UserError(f"--add-config {name}: iterations must be an integer") from None
        out.append((user, int(mechanism), settings["password"], iterations))
    return out


def run(args: argparse.Namespace) -> int:
    if args.scram_command == "describe":
        return run_with_admin(args, make_admin, lambda admin: _describe(admin, args))
    upserts = _upsertions(args.entity_name, args.add_config)
    deletes = [(args.entity_name, int(_mechanism(m))) for m in parse_name_list(args.delete_config, "--delete-config")]
    if not upserts and not deletes:
        raise UserError("give --add-config or --delete-config")
    return run_with_admin(args, make_admin, lambda admin: _alter(admin, args, upserts, deletes))


def _alter(admin: Any, args: argparse.Namespace, upserts: list[Any], deletes: list[Any]) -> int:
    response = admin.alter_user_scram_credentials(upserts, deletes)
    raise_if_error(response.error)
    for result in response.results:
        if result.error.code:
            raise ClusterError(error_name(result.error), result.error.message)
    if args.output == "json":
        print_json({"user": args.entity_name, "altered": True})
    else:
        print(f"Completed updating SCRAM credentials for user {args.entity_name}.")
    return EXIT_OK


def _describe(admin: Any, args: argparse.Namespace) -> int:
    response = admin.describe_user_scram_credentials(args.entity_name)
    raise_if_error(response.error)
    users = []
    for result in response.results:
        if result.error.code:
            raise ClusterError(error_name(result.error), result.error.message)
        users.append(
            {
                "user": result.user,
                "credentials": [
                    {"mechanism": ScramMechanism(c.mechanism).mechanism_name, "iterations": c.iterations}
                    for c in result.credential_infos
                ],
            }
        )
    if args.output == "json":
        print_json({"users": users})
    else:
        print_table(
            ["USER", "MECHANISM", "ITERATIONS"],
            [[u["user"], c["mechanism"], c["iterations"]] for u in users for c in u["credentials"]],
        )
    return EXIT_OK
