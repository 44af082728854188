"""What the admin commands (``topics``, ``configs``, ``reassign``, ``elect-leaders``, ``quorum``,
``metadata``, ``acls``, ``user-scram-credentials``) share: the admin client they make (`make_admin`),
the admin options, one way to report Kafka errors, JSON files and ``key=value`` arguments, replica
assignments.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from kraftlog.cli._common import (
    EXIT_FAILURE,
    UserError,
    add_bootstrap_server_option,
    add_output_option,
    report_failure,
    security_kwargs,
)

_PROG = "kraftlog"


DEFAULT_REQUEST_TIMEOUT_MS = 30_000


class ClusterError(Exception):
    """The cluster answered with an error: the command prints Kafka's name and message, exits 1."""

    def __init__(self, name: str, message: str = "") -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.name = name
        self.message = message


def positive_int(text: str) -> int:
    """argparse type for counts that must be at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def add_admin_options(parser: argparse.ArgumentParser, *, required: bool = True, output: bool = True) -> None:
    """``--bootstrap-server``, ``--request-timeout-ms`` and (by default) ``--output``."""
    add_bootstrap_server_option(parser, required=required)
    parser.add_argument(
        "--request-timeout-ms",
        type=positive_int,
        default=DEFAULT_REQUEST_TIMEOUT_MS,
        metavar="MS",
        help=f"how long to keep trying to reach the active controller (default: {DEFAULT_REQUEST_TIMEOUT_MS})",
    )
    if output:
        add_output_option(parser)


def _error_name(err: Any) -> str:
    name = getattr(err, "name", "") or ""
    if name:
        return name
    try:
        from kraftlog.common import errors as kerr

        return kerr.error_for_code(err.code).error_name
    except Exception:  # an unknown code still deserves a readable line
        return f"ERROR_{err.code}"


def _error_class(name: str) -> type[Any]:
    from kraftlog.common import errors as kerr

    try:
        return kerr.error_for_name(name)
    except (KeyError, ValueError):  # a name this version does not know still fails the command
        return kerr.UnknownServerError


def error_name(err: Any) -> str:
    """Kafka's error name of an ``Error`` message (looked up by code when the name is empty)."""
    return _error_name(err)


def error_failed(err: Any) -> bool:
    """True when a response's ``Error`` message (possibly unset) carries a non-zero code."""
    return err is not None and getattr(err, "code", 0) != 0


def error_text(err: Any) -> str:
    """``NAME: message`` of an ``Error`` message (just the name when there is no message)."""
    name = _error_name(err)
    return f"{name}: {err.message}" if getattr(err, "message", "") else name


def error_json(err: Any) -> dict[str, Any] | None:
    """An ``Error`` message as JSON (None for NONE), for ``--output json``."""
    if not error_failed(err):
        return None
    return {"code": err.code, "name": _error_name(err), "message": err.message}


def raise_if_error(err: Any) -> None:
    if error_failed(err):
        raise ClusterError(_error_name(err), err.message)


def report_error(args: argparse.Namespace, text: str) -> None:
    """One error line on stderr, named after the command (as `cli.__main__` does for UserError)."""
    print(f"{_PROG} {args.command}: error: {text}", file=sys.stderr)


AdminFactory = Callable[..., Any]


def make_admin(
    bootstrap_servers: Sequence[str], *, request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS, **security: Any
) -> Any:
    """The admin client of an admin command.

    Each command module imports this function under its own name ``make_admin`` and passes that
    module global to `run_with_admin` when it runs, so a test replaces the client of one command
    (``monkeypatch.setattr(module, "make_admin", fake)``) without touching the others.
    """
    from kraftlog.client import Admin

    return Admin(bootstrap_servers, request_timeout_ms=request_timeout_ms, **security)


def run_with_admin(args: argparse.Namespace, factory: AdminFactory, body: Callable[[Any], int]) -> int:
    """Create an admin client with ``factory``, run ``body(admin)``, close the client.

    A `ClusterError`, or a `common.errors.KafkaError` raised by the client (no controller answered
    in time), becomes one line on stderr and exit status 1. `UserError` passes through to `main`.
    """
    from kraftlog.common import errors as kerr

    as_json = getattr(args, "output", None) == "json"
    admin = factory(args.bootstrap_server, request_timeout_ms=args.request_timeout_ms, **security_kwargs(args))
    try:
        return body(admin)
    except ClusterError as err:
        report_failure(args.command, str(err), _error_class(err.name), as_json=as_json)
        return EXIT_FAILURE
    except kerr.KafkaError as err:
        report_failure(args.command, f"{err.error_name}: {err.message}", type(err), as_json=as_json)
        return EXIT_FAILURE
    finally:
        close = getattr(admin, "close", None)
        if close is not None:
            close()


def read_json_file(path: str, what: str) -> Any:
    """The parsed content of a JSON file named on the command line; any problem is a UserError."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{what} {path}: is a directory") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{what} {path}: cannot read it: {getattr(err, 'strerror', None) or err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{what} {path} is not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None


def parse_key_values(items: Iterable[str], option: str) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{k: v}`` (the value may contain ``=``); a malformed item is a UserError."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"invalid {option} {item!r}: expected key=value")
        out[key] = value.strip()
    return out


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's ``--replica-assignment`` syntax: ``1:2,2:3,3:1`` -> ``{0: [1, 2], 1: [2, 3], 2: [3, 1]}``.

    Partitions are separated by commas, the replicas of one partition (preferred leader first) by
    colons. Every partition needs the same number of replicas and no broker twice.
    """
    out: dict[int, list[int]] = {}
    for pid, part in enumerate(text.split(",")):
        part = part.strip()
        if not part:
            raise UserError(f"invalid --replica-assignment {text!r}: partition {pid} has no replicas")
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise UserError(
                f"invalid --replica-assignment {text!r}: {part!r} is not a list of broker ids separated by ':'"
            ) from None
        if any(b < 0 for b in brokers):
            raise UserError(f"invalid --replica-assignment {text!r}: broker ids cannot be negative")
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise UserError(
                f"invalid --replica-assignment {text!r}: partition replica lists may not "
                f"contain duplicate entries: {join_ids(duplicates)}"
            )
        if out and len(brokers) != len(out[0]):
            raise UserError(
                f"invalid --replica-assignment {text!r}: partition {pid} has different "
                f"replication factor: {join_ids(brokers)}"
            )
        out[pid] = brokers
    return out


def tp_name(topic: str, partition: int) -> str:
    """Kafka's ``TopicPartition.toString``: ``topic-partition``."""
    return f"{topic}-{partition}"


def join_ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)
