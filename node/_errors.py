"""Why a node cannot start, as one error of kraftlog's tree."""

from __future__ import annotations

from kraftlog.common import errors as kerr

__all__ = ["NodeStartupError"]


class NodeStartupError(kerr.KafkaError):
    """The node cannot start: a listener's address is taken, or its data dirs are not its own.

    Kafka has no protocol code for this (the broker exits with a ``KafkaException``), so it keeps the
    tree's UNKNOWN_SERVER_ERROR; the message names the config key or directory to fix, and
    ``kraftlog serve`` prints it as one line and exits 2 instead of showing a traceback.
    """
