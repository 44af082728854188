"""Kafka's ``LogDirFailureChannel``: the log directories that failed an I/O operation.

A write to a partition's files that raises `OSError` (``ENOSPC``: the disk is full, ``EIO``: it is
failing) takes the whole directory offline, never just the partition: the other files of the
directory sit on the same device and would fail next. `add_offline` records the first failure of
a directory and tells every subscriber once (the broker's replica manager, which stops serving the
directory's partitions and tells the controller); later failures of the same directory are
ignored. A directory never comes back online in a running process: Kafka needs a restart for
that, and so does kraftlog (the restart loads the directory again when it is readable).

Ordering: the directory is offline (`is_offline` says so) before any subscriber is called, and
subscribers run on the thread that hit the error, outside this channel's lock.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import structlog

from kraftlog.storage._errors import KafkaStorageError

__all__ = ["LogDirFailureChannel", "reports_io_errors"]

_log = structlog.get_logger(__name__)


class LogDirFailureChannel:
    """The offline log directories of one node and who to tell of a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: dict[Path, str] = {}
        self._subscribers: list[Callable[[Path], None]] = []

    def subscribe(self, callback: Callable[[Path], None]) -> None:
        """Call ``callback(log_dir)`` once for every directory that goes offline from now on."""
        with self._lock:
            self._subscribers.append(callback)

    def add_offline(self, log_dir: Path, reason: str) -> bool:
        """Mark ``log_dir`` offline; True the first time (the subscribers were told)."""
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline[log_dir] = reason
            subscribers = list(self._subscribers)
        _log.error("log_dir_offline", log_dir=str(log_dir), reason=reason)
        for callback in subscribers:
            callback(log_dir)
        return True

    def is_offline(self, log_dir: Path) -> bool:
        with self._lock:
            return log_dir in self._offline

    def offline_dirs(self) -> dict[Path, str]:
        """Every offline directory with the error that took it offline."""
        with self._lock:
            return dict(self._offline)


class _ReportsIoErrors(Protocol):
    on_io_error: Callable[[BaseException], None] | None


_S = TypeVar("_S", bound=_ReportsIoErrors)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def reports_io_errors(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Decorate a `Log` method that writes: a `KafkaStorageError` caused by an `OSError` is
    handed to the log's ``on_io_error`` (its manager's: the directory goes offline) before it
    propagates (Kafka's ``maybeHandleIOException``). Other errors pass untouched."""

    @functools.wraps(method)
    def wrapper(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(self, *args, **kwargs)
        except KafkaStorageError as err:
            if isinstance(err.__cause__, OSError) and self.on_io_error is not None:
                self.on_io_error(err)
            raise

    return wrapper
