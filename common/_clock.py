"""The one clock: every place that reads time or waits takes a `Clock`, so tests can drive time.

Two kinds of time, never mixed:

- *monotonic* time (``monotonic_ms`` / ``monotonic_s``) measures durations: timeouts, deadlines,
  backoffs, sessions. It never goes backwards and has no meaning across processes.
- *wall* time (``wall_ms``, milliseconds since the Unix epoch) is what Kafka stores and compares across
  nodes: record timestamps, retention, broker heartbeat ages in the metadata log, group and transaction
  expiry.

`SYSTEM_CLOCK` is the one default of the whole code base (a module that needs a clock takes
``clock: Clock = SYSTEM_CLOCK``). `ManualClock` is the test clock: it moves only when told
(``advance(ms)``), and its ``sleep`` advances it instead of blocking, so code that sleeps runs
instantly and deterministically under a seeded simulation.

Clock faults (issue 28, the chaos nemeses ``clock_skew`` and ``clock_jump``): in a process started
with ``KRAFTLOG_TEST_FAULTS`` naming a control directory (test clusters only; `kraftlog serve`
refuses it under systemd), `SystemClock.wall_ms` adds the integer in its ``clock_offset_ms``
file, reread at most every 0.2 s: a node's wall clock runs ahead or behind the others', and
changing the file makes it jump forward or back, as an NTP step or a wrong clock would. Monotonic
time is left alone, as a real clock step leaves ``CLOCK_MONOTONIC`` alone. Without the variable
(every production node) nothing is read and `wall_ms` is the system's.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["CLOCK_OFFSET_FILE", "FAULTS_ENV", "SYSTEM_CLOCK", "Clock", "ManualClock", "SystemClock"]

#: the environment variable naming a test node's fault control directory (storage's hooks too)
FAULTS_ENV = "KRAFTLOG_TEST_FAULTS"
#: the control file in that directory: milliseconds added to this process's wall clock
CLOCK_OFFSET_FILE = "clock_offset_ms"
_REREAD_S = 0.2


@runtime_checkable
class Clock(Protocol):
    """Where time comes from. Implementations are safe to call from any thread."""

    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never goes backwards (durations only)."""
        ...

    def monotonic_s(self) -> float:
        """Seconds on the same monotonic clock as `monotonic_ms`."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the Unix epoch (timestamps stored or compared across nodes)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` (a test clock advances instead)."""
        ...

    async def sleep_async(self, seconds: float) -> None:
        """Suspend the calling coroutine for ``seconds`` (a test clock advances instead)."""
        ...


class _WallOffset:
    """The test-only wall clock offset, reread from the control file at most every `_REREAD_S`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._read_at = float("-inf")
        self._offset_ms = 0

    def current_ms(self) -> int:
        now = time.monotonic()
        with self._lock:
            if now - self._read_at >= _REREAD_S:
                self._read_at = now
                try:
                    with open(self.path, encoding="utf-8") as fh:
                        self._offset_ms = int(fh.read().strip() or 0)
                except (OSError, ValueError):
                    self._offset_ms = 0
            return self._offset_ms


def _wall_offset_from_env() -> _WallOffset | None:
    control = os.environ.get(FAULTS_ENV, "")
    return _WallOffset(os.path.join(control, CLOCK_OFFSET_FILE)) if control else None


class SystemClock:
    """The operating system's clocks: ``time.monotonic_ns`` and ``time.time_ns`` (plus a test
    node's clock fault, see the module's docstring)."""

    def __init__(self) -> None:
        self._offset = _wall_offset_from_env()

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def monotonic_s(self) -> float:
        return time.monotonic()

    def wall_ms(self) -> int:
        if self._offset is None:
            return time.time_ns() // 1_000_000
        return time.time_ns() // 1_000_000 + self._offset.current_ms()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    async def sleep_async(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK: Clock = SystemClock()
"""The one default clock of the code base."""


class ManualClock:
    """A clock that moves only when told: `advance` (or `sleep`, which advances by the time asked).

    Monotonic and wall time move together; they start at ``monotonic_start_ms`` and ``wall_start_ms``
    so that wall timestamps look like real ones (retention and expiry compare them with record
    timestamps). Time never goes backwards: advancing by a negative amount is refused.
    """

    def __init__(self, *, wall_start_ms: int = 1_700_000_000_000, monotonic_start_ms: int = 1_000_000) -> None:
        self._lock = threading.Lock()
        self._monotonic_ms = monotonic_start_ms
        self._wall_ms = wall_start_ms

    def advance(self, ms: int) -> None:
        """Move both clocks ``ms`` milliseconds forward."""
        if ms < 0:
            raise ValueError(f"a clock does not go backwards (advance by {ms} ms)")
        with self._lock:
            self._monotonic_ms += ms
            self._wall_ms += ms

    def monotonic_ms(self) -> int:
        with self._lock:
            return self._monotonic_ms

    def monotonic_s(self) -> float:
        with self._lock:
            return self._monotonic_ms / 1000.0

    def wall_ms(self) -> int:
        with self._lock:
            return self._wall_ms

    def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` (rounded up to whole milliseconds) instead of blocking."""
        if seconds > 0:
            self.advance(max(1, math.ceil(seconds * 1000)))

    async def sleep_async(self, seconds: float) -> None:
        """Advance by ``seconds`` and yield once to the event loop, so other tasks run."""
        self.sleep(seconds)
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"ManualClock(monotonic_ms={self._monotonic_ms}, wall_ms={self._wall_ms})"
