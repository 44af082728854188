"""The ``kraftlog`` command: one entry point whose subcommands mirror Kafka's tools.

Each subcommand lives in its own module ``cli/_<name>.py`` exposing ``add_parser(subparsers)``
(which returns its parser) and ``run(args) -> int``; this module only wires them together, sets up
logging, and turns failures into exit codes: 0 success, 1 the command found a problem, 2 bad input.
Bad input never ends in a traceback: it is one line on stderr.

Options that a subcommand needs to reach a cluster (``--bootstrap-server``) are declared by that
subcommand, as Kafka's tools do, not globally; see `cli._common.add_bootstrap_server_option`.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

import structlog

from kraftlog import __version__
from kraftlog.cli._common import (
    COMMAND_METAVAR,
    EXIT_FAILURE,
    EXIT_USAGE,
    KraftlogArgumentParser,
    LateStderr,
    UserError,
    report_failure,
    wants_json,
)
from kraftlog.common import errors as kerr
from kraftlog.node import NodeStartupError

__all__ = ["main", "build_parser"]

# Subcommand modules, in the order `kraftlog --help` lists them.
_COMMAND_MODULES: tuple[str, ...] = (
    "kraftlog.cli._serve",
    "kraftlog.cli._local",
    "kraftlog.cli._chaos",
    "kraftlog.cli._storage",
    "kraftlog.cli._dump_log",
    "kraftlog.cli._demo",
    "kraftlog.cli._topics",
    "kraftlog.cli._configs",
    "kraftlog.cli._acls",
    "kraftlog.cli._user_scram_credentials",
    "kraftlog.cli._client_quotas",
    "kraftlog.cli._reassign",
    "kraftlog.cli._elect_leaders",
    "kraftlog.cli._features",
    "kraftlog.cli._delete_records",
    "kraftlog.cli._quorum",
    "kraftlog.cli._metadata",
    "kraftlog.cli._snapshot",
    "kraftlog.cli._produce",
    "kraftlog.cli._consume",
    "kraftlog.cli._consumer_groups",
    "kraftlog.cli._share_groups",
    "kraftlog.cli._transactions",
    "kraftlog.cli._perf",
)
_LOG_LEVELS = ("debug", "info", "warning", "error")
_PROG = "kraftlog"

_log = structlog.get_logger(__name__)


def _load_commands() -> list[ModuleType]:
    return [importlib.import_module(name) for name in _COMMAND_MODULES]


def build_parser() -> argparse.ArgumentParser:
    """The full parser: global options plus one subparser per command module."""
    parser = KraftlogArgumentParser(
        prog=_PROG,
        description="kraftlog: a Kafka-style distributed commit log. "
        "Run 'kraftlog COMMAND --help' for a command's options.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"{_PROG} {__version__}",
        help="print the installed kraftlog version and exit",
    )
    parser.add_argument(
        "--log-level",
        choices=_LOG_LEVELS,
        default="warning",
        help="level of the diagnostic log written to stderr (default: warning)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar=COMMAND_METAVAR, title="commands")
    subparsers.required = True
    for module in _load_commands():
        sub = module.add_parser(subparsers)
        sub.set_defaults(_run=module.run)
    return parser


def _configure_logging(level: str) -> None:
    """Send structlog output to stderr at ``level``, through `node._logging` when it exists.

    Imported lazily so that a half-written or missing logging module cannot break the CLI's
    offline tools; the fallback keeps the promise that logs never mix with command output.
    """
    configure: Callable[..., None] | None
    try:
        from kraftlog.node import configure_logging as configure
    except ImportError:
        configure = None
    if configure is not None:
        try:
            configure(node_id=None, role="cli", level=level, stream=LateStderr())
            return
        except Exception as err:  # a bug in the logging setup must not stop the tool
            print(f"{_PROG}: warning: logging setup failed ({err}); using plain stderr logging", file=sys.stderr)
    _fallback_logging(level)


def _fallback_logging(level: str) -> None:
    renderer: Callable[..., object]
    stream = LateStderr()
    if stream.isatty():
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    else:
        renderer = structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=stream),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.bind_contextvars(node_id=None, role="cli")


def _exit_code(code: object) -> int:
    """What `sys.exit` would make of ``code`` (argparse exits with ints, None or messages)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kraftlog`` with ``argv`` (default: the process arguments); returns the exit code."""
    if argv is None:
        # This process's own command line: the process ends when the command returns, and the
        # command closed what it opened. The interpreter's last collection would only run the
        # finalizers of objects left in cycles (grpc's channels among them): measured 0.2-0.4 s
        # of CPU and up to a second of wall time per `kraftlog topics list`, paid by every command
        # a test or script runs (issue 23). Freezing the heap at exit skips it.
        atexit.register(gc.freeze)
    arguments = list(argv) if argv is not None else sys.argv[1:]
    KraftlogArgumentParser.json_errors = wants_json(arguments)
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exit_:  # --help, or a usage error already printed by the parser
        return _exit_code(exit_.code)
    _configure_logging(args.log_level)
    run: Callable[[argparse.Namespace], int] = args._run
    as_json = getattr(args, "output", None) == "json"
    _log.debug("command_started", command=args.command)
    try:
        return run(args)
    except UserError as err:
        report_failure(args.command, str(err), err.error, as_json=as_json)
        return EXIT_USAGE
    except NodeStartupError as err:
        report_failure(args.command, str(err), type(err), as_json=as_json)
        return EXIT_USAGE
    except kerr.KafkaError as err:  # the cluster or the client gave up: Kafka's name, no traceback
        report_failure(args.command, f"{err.error_name}: {err.message}", type(err), as_json=as_json)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``kraftlog dump-log big.log | head``): not an error of ours.
        # Point stdout at /dev/null so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        finally:
            os.close(devnull)
        return EXIT_FAILURE
    except OSError as err:
        # The environment failed (disk full, permission denied): a report, not a stack trace.
        error = kerr.NetworkError if isinstance(err, ConnectionError) else kerr.KafkaStorageError
        report_failure(args.command, str(err), error, as_json=as_json)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
