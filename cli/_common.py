"""Helpers shared by the ``kraftlog`` subcommands: the argument parser, user errors, output.

Every subcommand reports either as a table (for people) or as JSON (for scripts), like Kafka's
tools with ``--output``; the formatting lives here so that all commands look alike. Command output
goes to stdout and nothing else does: logs and error messages go to stderr, so ``kraftlog ... |
jq`` always sees clean JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from kraftlog.common import errors as kerr
from kraftlog.common import kafka_uuid, parse_bootstrap_servers, parse_uuid

__all__ = [
    "partition_entries",
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "COMMAND_METAVAR",
    "OUTPUT_FORMATS",
    "KraftlogArgumentParser",
    "LateStderr",
    "UserError",
    "JsonObjectStream",
    "Subparsers",
    "add_bootstrap_server_option",
    "report_failure",
    "wants_json",
    "add_output_option",
    "described",
    "topic_id_arg",
    "topic_id_text",
    "format_table",
    "json_dumps",
    "non_negative_int",
    "print_json",
    "print_table",
]

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction  # what add_subparsers returns, given to each command

EXIT_OK = 0
EXIT_FAILURE = 1  # the command ran and found a problem (a mismatch, an unreadable file)
EXIT_USAGE = 2  # the user asked for something we cannot do (bad option, missing file)

OUTPUT_FORMATS = ("table", "json")
COMMAND_METAVAR = "COMMAND"  # how the subcommand argument is named in usage and errors


class UserError(Exception):
    """Bad input from the user: `main` prints the message as one line on stderr and exits 2.

    Raised instead of letting an exception escape so that a typo never ends in a traceback. Under
    ``--output json`` it is reported as Kafka's ``error`` (INVALID_REQUEST unless the raiser names
    a closer one, such as INVALID_CONFIG for a bad config file).
    """

    def __init__(self, message: str, *, error: type[kerr.KafkaError] = kerr.InvalidRequestError) -> None:
        super().__init__(message)
        self.error = error


_PROG = "kraftlog"


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``argv`` asks for ``--output json``: read before parsing, so that even a usage error
    the parser reports reaches a script as JSON."""
    for i, arg in enumerate(argv):
        if arg == "--output=json" or (arg == "--output" and i + 1 < len(argv) and argv[i + 1] == "json"):
            return True
    return False


def report_failure(command: str | None, message: str, error: type[kerr.KafkaError], *, as_json: bool) -> None:
    """Report why a command failed: always one line on stderr (for people); under ``--output json``
    also one object ``{"error": {"name", "code", "message"}}`` on stdout, Kafka's error name and
    code, so that a script reading stdout sees the failure and not silence."""
    where = f"{_PROG} {command}" if command else _PROG
    print(f"{where}: error: {message}", file=sys.stderr)
    if as_json:
        print_json({"error": {"name": error.error_name, "code": error.error_code, "message": message}})


class KraftlogArgumentParser(argparse.ArgumentParser):
    """An `argparse.ArgumentParser` whose errors are one line on stderr, exit status 2.

    argparse's default prints the whole usage block before the message; for a tool with many
    subcommands that buries the one line that says what was wrong. The usage stays one ``--help``
    away, and the line names the command so the user knows which ``--help`` to run.
    """

    json_errors = False  # set by `main` from `wants_json` before parsing

    def error(self, message: str) -> NoReturn:
        prefix = f"argument {COMMAND_METAVAR}: invalid choice:"
        if message.startswith(prefix):
            message = "unknown command" + message[len(prefix) - 1 :]
        if KraftlogArgumentParser.json_errors:
            error = kerr.InvalidRequestError
            print_json(
                {"error": {"name": error.error_name, "code": error.error_code, "message": f"{self.prog}: {message}"}}
            )
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


class LateStderr:
    """A text stream that writes to whatever `sys.stderr` is at the time of each write.

    Logging handlers keep the stream they were given; when that is the ``sys.stderr`` of the
    moment, a later swap of ``sys.stderr`` (pytest's capture, a daemon redirecting output) leaves
    the handler writing to a stale or closed stream. Resolving it per write avoids that.
    """

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        try:
            return sys.stderr.isatty()
        except (AttributeError, ValueError):
            return False


_LITERAL = re.compile(r"``(.+?)``|`([^`]+)`|\*\*(.+?)\*\*", re.S)


def plain_text(doc: str) -> str:
    """A module docstring as ``--help`` shows it: the same paragraphs and bullets, without the
    reST markup (double backquotes, single backquotes, bold, ``::`` before a literal block) that
    reads well in the source and as noise in a terminal."""
    text = _LITERAL.sub(lambda m: next(g for g in m.groups() if g is not None), doc.strip())
    return re.sub(r"::$", ":", text, flags=re.M)


def described(doc: str | None) -> dict[str, Any]:
    """``add_parser`` keywords for a command described by its module docstring: plain text, with
    its paragraphs and bullets kept as written (argparse would run them together)."""
    return {"description": plain_text(doc or ""), "formatter_class": argparse.RawDescriptionHelpFormatter}


def add_output_option(parser: argparse.ArgumentParser) -> None:
    """``--output {table,json}``: tables for people (the default), JSON for scripts."""
    parser.add_argument(
        "--output",
        choices=OUTPUT_FORMATS,
        default="table",
        help="output format: 'table' for people (default), 'json' for scripts",
    )


def add_bootstrap_server_option(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--bootstrap-server host:port[,host:port...]``, per subcommand as in Kafka's tools.

    Offline tools (``dump-log``, ``demo``) do not take it; commands that talk to a cluster do.
    """
    parser.add_argument(
        "--bootstrap-server",
        required=required,
        metavar="HOST:PORT[,HOST:PORT...]",
        type=_bootstrap_servers,
        help="comma-separated addresses of brokers or controllers to connect to",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        default=None,
        help="client properties for a secured cluster, as Kafka's tools take them "
        "(security.protocol=SSL, ssl.truststore.location, ssl.keystore.location, ...)",
    )


def security_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The client arguments of ``--command-config`` (empty without one): ``security_protocol``
    and ``tls`` for `Admin`, `Producer`, `Consumer`. A key this command cannot use is refused."""
    path = getattr(args, "command_config", None)
    if path is None:
        return {}
    from kraftlog.client import security_from_properties
    from kraftlog.common.config import read_config_file

    try:
        properties = {k: str(v) for k, v in read_config_file(path).items()}
    except (OSError, ValueError) as err:
        raise UserError(f"--command-config {path}: {err}") from None
    other = sorted(
        k for k in properties if k != "security.protocol" and not k.startswith("ssl.") and not k.startswith("sasl.")
    )
    if other:
        raise UserError(
            f"--command-config {path}: {', '.join(other)} not supported here (security.protocol, ssl.*, sasl.*)"
        )
    try:
        security = security_from_properties(properties)
    except ValueError as err:
        raise UserError(f"--command-config {path}: {err}") from None
    return {} if security.tls is None and security.sasl is None else {"security": security}


def _bootstrap_servers(text: str) -> list[str]:
    try:
        return parse_bootstrap_servers(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def topic_id_text(value: str | None) -> str | None:
    """A topic id as Kafka's tools show it (22-character URL-safe base64); None for none. An id that
    is not a UUID at all is shown as it came rather than hidden."""
    if not value:
        return None
    try:
        return kafka_uuid(value)
    except ValueError:
        return value


def topic_id_arg(text: str) -> str:
    """argparse type for a topic id: Kafka's base64 form or the hex form, kept in the canonical form
    the cluster speaks."""
    try:
        return str(parse_uuid(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def non_negative_int(text: str) -> int:
    """argparse type for sizes and counts: a clear message instead of ``invalid int value``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def json_dumps(obj: Any) -> str:
    """One compact JSON line: what scripts (and ``jq``) read best, one object per line."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def print_json(obj: Any, *, file: TextIO | None = None) -> None:
    print(json_dumps(obj), file=file if file is not None else sys.stdout)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain, left-aligned text table: header line, then one line per row.

    No borders: the output stays easy to read in a terminal and to cut with ``awk``.
    """
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, file: TextIO | None = None) -> None:
    print(format_table(headers, rows), file=file if file is not None else sys.stdout)


class JsonObjectStream:
    """Writes one JSON object holding a long list without keeping the list in memory.

    ``dump-log`` on a multi-gigabyte segment yields millions of batches; building the whole object
    first would hold them all. The object is written as ``head`` fields, then the list items as they
    come, then ``tail`` fields, and the result is the same single line `json_dumps` would produce.
    """

    def __init__(self, head: Mapping[str, Any], list_key: str, *, file: TextIO | None = None) -> None:
        self._file = file if file is not None else sys.stdout
        prefix = json_dumps(dict(head))[:-1]  # drop the closing brace
        sep = "," if head else ""
        self._file.write(f"{prefix}{sep}{json_dumps(list_key)}:[")
        self._first = True
        self._closed = False

    def item(self, obj: Any) -> None:
        self._file.write(("" if self._first else ",") + json_dumps(obj))
        self._first = False

    def close(self, tail: Mapping[str, Any] | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        rest = json_dumps(dict(tail or {}))[1:]  # drop the opening brace
        self._file.write("]" + ("," + rest if tail else "}") + "\n")


def partition_entries(obj: Any, path: str, *, duplicates_in: str) -> list[tuple[int, dict[str, Any], str, int]]:
    """The entries of a Kafka tool's ``{"partitions": [{"topic": "t", "partition": 0, ...}]}``
    file as ``(index, entry, topic, partition)``; a missing list, an entry that is not an object or
    lacks a topic or partition, a partition named twice (``duplicates_in`` names the file's
    kind in that message) and an empty list are UserErrors naming the entry."""
    if not isinstance(obj, dict) or not isinstance(obj.get("partitions"), list):
        raise UserError(f"{path}: expected a JSON object with a 'partitions' list")
    out: list[tuple[int, dict[str, Any], str, int]] = []
    seen: set[tuple[str, int]] = set()
    duplicates: list[str] = []
    for i, item in enumerate(obj["partitions"]):
        if not isinstance(item, dict):
            raise UserError(f"{path}: partitions[{i}] is not an object")
        topic, partition = item.get("topic"), item.get("partition")
        if not isinstance(topic, str) or not topic:
            raise UserError(f"{path}: partitions[{i}] needs a non-empty 'topic'")
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise UserError(f"{path}: partitions[{i}] needs a non-negative integer 'partition'")
        if (topic, partition) in seen:
            duplicates.append(f"{topic}-{partition}")
            continue
        seen.add((topic, partition))
        out.append((i, item, topic, partition))
    if duplicates:
        raise UserError(f"{path}: {duplicates_in} contains duplicate partitions: {', '.join(duplicates)}")
    if not out:
        raise UserError(f"{path}: the partition list is empty")
    return out
