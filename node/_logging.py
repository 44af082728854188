"""Process-wide logging setup: structlog for our code, stdlib logging for libraries, one format.

Nodes run under systemd, where journald stores whatever the process writes, so off a terminal every
line is a JSON object that tools can filter on (``node_id``, ``role``, ``level``); on a terminal a
person is reading, so lines are rendered as readable key=value text. Libraries we do not control
(pysyncobj, grpc) log through the stdlib ``logging`` module; their records go through the same
structlog processors (``ProcessorFormatter``) so a node never interleaves two formats.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Final, TextIO

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["configure_logging"]

# Marks the root handler we install, so a second call replaces it instead of adding another.
_HANDLER_MARK: Final = "_kraftlog_handler"

# Keys rendered first in JSON lines, in this order; the rest follow as logged.
_LEADING_KEYS: Final = ("timestamp", "level", "node_id", "role", "logger", "event")

_LEVELS: Final = {
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "notset": logging.NOTSET,
}

# Identity of this process, set by configure_logging. Read by a processor (not captured in a
# closure) so loggers structlog cached under an earlier configuration still see the current value.
_identity: dict[str, object] = {}


def _parse_level(level: str) -> int:
    text = str(level).strip().lower()
    if text in _LEVELS:
        return _LEVELS[text]
    if text.isdigit():
        return int(text)
    raise ValueError(f"unknown log level {level!r}: expected one of {', '.join(sorted(_LEVELS))}")


def _add_identity(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Add ``node_id`` and ``role`` unless the context already has them.

    ``structlog.contextvars`` carries them for code running in the configuring thread's context,
    but threads started by libraries (pysyncobj's Raft thread, grpc's pollers) do not inherit
    context variables; this fallback keeps the promise that every line names its node.
    """
    for key, value in _identity.items():
        event_dict.setdefault(key, value)
    return event_dict


def _order_keys(_logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
    """Put the keys people scan for first, so JSON lines read well in ``journalctl`` too."""
    ordered: dict[str, Any] = {key: event_dict.pop(key) for key in _LEADING_KEYS if key in event_dict}
    ordered.update(event_dict)
    return ordered


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or the stream is closed
        return False


def configure_logging(
    *,
    node_id: int | None,
    role: str,
    level: str = "info",
    stream: TextIO | None = None,
    force_json: bool | None = None,
) -> None:
    """Configure structlog and stdlib logging for this process; safe to call again.

    ``node_id`` and ``role`` (``"broker"``, ``"controller"``, ``"broker,controller"``, ``"cli"``...)
    are bound through ``structlog.contextvars`` and appear on every line, including lines from
    stdlib loggers and library threads. Output goes to ``stream`` (default: stderr, which journald
    captures) as JSON lines when it is not a TTY, or readable key=value text on a TTY;
    ``force_json`` overrides the detection. A second call replaces the previous configuration
    (handler, level, bound identity) rather than stacking on top of it.
    """
    out: TextIO = stream if stream is not None else sys.stderr
    as_json = (not _is_tty(out)) if force_json is None else force_json
    numeric_level = _parse_level(level)

    _identity.clear()
    _identity.update({"node_id": node_id, "role": role})
    structlog.contextvars.unbind_contextvars("node_id", "role")
    structlog.contextvars.bind_contextvars(node_id=node_id, role=role)

    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    # Processors shared by structlog events and foreign (stdlib) records, before rendering.
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        _add_identity,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        timestamper,
    ]

    renderer: Processor
    final_chain: list[Processor] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if as_json:
        final_chain += [
            structlog.processors.format_exc_info,
            _order_keys,
        ]
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=_is_tty(out))
    final_chain.append(renderer)

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.ExtraAdder()],
        processors=final_chain,
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    setattr(handler, _HANDLER_MARK, True)

    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _HANDLER_MARK, False):
            root.removeHandler(old)
            old.close()
    root.addHandler(handler)
    root.setLevel(numeric_level)
    logging.captureWarnings(True)

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.UnicodeDecoder(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        context_class=dict,
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: a module-level logger must follow a later reconfiguration (tests capture logs
        # with structlog.testing after a CLI run configured them); no hot path logs per record.
        cache_logger_on_first_use=False,
    )
