"""Test-only fault injection in the partition logs' write paths (issue 28: the ``slow_fsync`` and
``disk_full`` chaos faults): a delay before each fsync of a segment or an index, and writes into
chosen log directories failing with ``ENOSPC``, switched on and off while the node runs.

Why a control file named by an environment variable, not a config key: the fault must come and go
without a restart (a config change would need one), and nothing in a node's config can turn it
on by mistake. ``KRAFTLOG_TEST_FAULTS`` names a directory; while it holds ``fsync_delay_ms`` (an
integer), every `fsync` waits that long first; while it holds ``no_space_dirs`` (one directory a
line), every segment append, segment flush and checkpoint write into one of those directories
raises ``OSError(ENOSPC)`` as a full disk would (`check_space`). `kraftlog serve` refuses to start with the
variable set under systemd (the units of ``deploy/``: production), and logs a warning otherwise.
Without the variable (every production node) `fsync` is ``os.fsync`` and nothing is read.

The control file is read at most every `_REREAD_S` seconds, so an fsync-heavy path does not stat
it each time; a fault therefore starts and ends within that much of the file's change.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import structlog

from kraftlog.common import FAULTS_ENV

__all__ = ["FAULTS_ENV", "FSYNC_DELAY_FILE", "NO_SPACE_FILE", "check_space", "fault_dir", "fsync"]

#: the control file in that directory: milliseconds to wait before each fsync
FSYNC_DELAY_FILE = "fsync_delay_ms"
#: the control file naming the log directories whose writes fail with ENOSPC, one a line
NO_SPACE_FILE = "no_space_dirs"
_REREAD_S = 0.2

_log = structlog.get_logger(__name__)


def fault_dir() -> Path | None:
    """The control directory when fault injection is on (the variable is set), else None."""
    value = os.environ.get(FAULTS_ENV, "")
    return Path(value) if value else None


class _Delay:
    """The current fsync delay, re-read from the control file at most every `_REREAD_S`."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._delay_s = 0.0

    def current_s(self) -> float:
        if self.directory is None:
            return 0.0
        now = time.monotonic()
        with self._lock:
            if now - self._read_at >= _REREAD_S:
                self._read_at = now
                delay = self._read()
                if delay != self._delay_s:
                    _log.warning("test_fault_fsync_delay", delay_ms=round(delay * 1000), control=str(self.directory))
                self._delay_s = delay
            return self._delay_s

    def _read(self) -> float:
        assert self.directory is not None
        try:
            text = (self.directory / FSYNC_DELAY_FILE).read_text(encoding="utf-8").strip()
        except OSError:
            return 0.0
        try:
            return max(0, int(text)) / 1000.0
        except ValueError:
            return 0.0


_delay = _Delay(fault_dir())


def fsync(fd: int) -> None:
    """``os.fsync(fd)``, after the injected delay when a test turned one on."""
    delay = _delay.current_s()
    if delay > 0:
        time.sleep(delay)
    os.fsync(fd)


class _NoSpace:
    """The directories whose writes fail, re-read from the control file at most every `_REREAD_S`."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._dirs: tuple[str, ...] = ()

    def current(self) -> tuple[str, ...]:
        if self.directory is None:
            return ()
        now = time.monotonic()
        with self._lock:
            if now - self._read_at >= _REREAD_S:
                self._read_at = now
                try:
                    text = (self.directory / NO_SPACE_FILE).read_text(encoding="utf-8")
                except OSError:
                    text = ""
                dirs = tuple(os.path.abspath(line.strip()) for line in text.splitlines() if line.strip())
                if dirs != self._dirs:
                    _log.warning("test_fault_no_space", dirs=list(dirs), control=str(self.directory))
                self._dirs = dirs
            return self._dirs


_no_space = _NoSpace(fault_dir())


def check_space(path: Path) -> None:
    """Raise ``OSError(ENOSPC)`` when a test made ``path``'s log directory full; else nothing."""
    dirs = _no_space.current()
    if not dirs:
        return
    where = os.path.abspath(path)
    for d in dirs:
        if where == d or where.startswith(d + os.sep):
            raise OSError(errno.ENOSPC, f"No space left on device (test fault in {d})", str(path))
