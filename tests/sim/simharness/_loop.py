"""An asyncio event loop on simulated time: the real code's sleeps, timeouts and long polls run on a
`ManualClock`, and the loop jumps the clock to the next timer whenever nothing is ready.

Nothing blocks in real time: a wait for 30 s of back-off costs one loop iteration. The order in which
callbacks run is asyncio's own (FIFO for ready callbacks, earliest deadline for timers), so the same
seed gives the same run. No thread may touch the loop (a thread's wake-up would race the simulated
clock): the harness turns off everything that starts one (log cleaner threads).
"""

from __future__ import annotations

import asyncio
import math
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

from kraftlog.common import ManualClock

__all__ = ["SimulationStalled", "VirtualTimeLoop", "run_simulated"]

T = TypeVar("T")


class SimulationStalled(RuntimeError):
    """Every task waits and no timer is set: the run can never make progress."""


class _VirtualTimeSelector(selectors.SelectSelector):
    """Polls the loop's own wake-up socket without waiting; when nothing is ready, moves the clock
    to the loop's next timer instead of sleeping until it."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            raise SimulationStalled("no task can run and no timer is set")
        if timeout > 0:
            self._clock.advance(max(1, math.ceil(timeout * 1000)))
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """`asyncio.SelectorEventLoop` whose time is ``clock.monotonic_s()``."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(selector=_VirtualTimeSelector(clock))
        self._sim_clock = clock

    def time(self) -> float:
        return self._sim_clock.monotonic_s()


def run_simulated(main: Coroutine[Any, Any, T], clock: ManualClock) -> T:
    """Run ``main`` to completion on a fresh `VirtualTimeLoop`, then cancel what it left running."""
    loop = VirtualTimeLoop(clock)
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        except SimulationStalled:
            pass
        finally:
            asyncio.set_event_loop(None)
            loop.close()
