"""The one clock: the system clock reads the OS clocks; the manual clock moves only when told."""

from __future__ import annotations

import asyncio
import time

import pytest

from kraftlog.common import SYSTEM_CLOCK, Clock, ManualClock, SystemClock


def test_system_clock_is_the_one_default_and_reads_the_os_clocks() -> None:
    assert isinstance(SYSTEM_CLOCK, SystemClock) and isinstance(SYSTEM_CLOCK, Clock)
    before_wall, before_mono = time.time_ns() // 1_000_000, time.monotonic_ns() // 1_000_000
    wall, mono = SYSTEM_CLOCK.wall_ms(), SYSTEM_CLOCK.monotonic_ms()
    assert before_wall <= wall <= time.time_ns() // 1_000_000
    assert before_mono <= mono <= time.monotonic_ns() // 1_000_000
    assert abs(SYSTEM_CLOCK.monotonic_s() * 1000 - SYSTEM_CLOCK.monotonic_ms()) < 1000
    SYSTEM_CLOCK.sleep(0)  # no wait, no error
    SYSTEM_CLOCK.sleep(-1.0)


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(wall_start_ms=5_000, monotonic_start_ms=100)
    assert isinstance(clock, Clock)
    assert (clock.wall_ms(), clock.monotonic_ms(), clock.monotonic_s()) == (5_000, 100, 0.1)
    assert clock.wall_ms() == 5_000  # reading does not move it
    clock.advance(250)
    assert (clock.wall_ms(), clock.monotonic_ms()) == (5_250, 350)
    clock.advance(0)
    assert clock.monotonic_ms() == 350
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert clock.monotonic_ms() == 350


def test_manual_clock_sleep_advances_instead_of_blocking() -> None:
    clock = ManualClock(monotonic_start_ms=0, wall_start_ms=0)
    started = time.monotonic()
    clock.sleep(3600.0)  # an hour, instantly
    assert time.monotonic() - started < 1.0
    assert clock.monotonic_ms() == 3_600_000
    clock.sleep(0.0004)  # rounded up to a whole millisecond: a sleep always moves time
    assert clock.monotonic_ms() == 3_600_001
    clock.sleep(0)
    assert clock.monotonic_ms() == 3_600_001

    async def main() -> None:
        await clock.sleep_async(2.5)

    asyncio.run(main())
    assert clock.wall_ms() == 3_602_501
