"""The clock and link nemeses (issue 28): the house clock's test-only offset, the seeded choice
of clock_skew / clock_jump / delay_link, and what inject and heal ask of the target."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kraftlog.common import CLOCK_OFFSET_FILE, _clock
from kraftlog.deploy.chaos._clock_faults import set_clock_offset
from kraftlog.deploy.chaos._faults import (
    ALL_FAULT_KINDS,
    DELAY_LINK_MS_KBIT,
    FAULT_KINDS,
    NETWORK_KINDS,
    ClusterView,
    choose_fault,
    heal,
    inject,
)

VIEW = ClusterView(
    controllers=[1, 2, 3],
    brokers=[101, 102, 103],
    active_controller=2,
    partition_leaders=[101],
    session_timeout_ms=9000,
)


def test_the_wall_clock_follows_the_control_file_and_monotonic_time_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(_clock.FAULTS_ENV, str(tmp_path))
    monkeypatch.setattr(_clock, "_REREAD_S", 0.0)
    clock = _clock.SystemClock()
    assert abs(clock.wall_ms() - _clock.time.time_ns() // 1_000_000) < 1_000  # no file: true time
    set_clock_offset(tmp_path, 3_600_000)
    assert (tmp_path / CLOCK_OFFSET_FILE).read_text(encoding="utf-8") == "3600000"
    ahead = clock.wall_ms() - _clock.time.time_ns() // 1_000_000
    assert 3_599_000 < ahead < 3_601_000
    mono = clock.monotonic_ms()
    set_clock_offset(tmp_path, -600_000)  # a jump back
    assert -601_000 < clock.wall_ms() - _clock.time.time_ns() // 1_000_000 < -599_000
    assert clock.monotonic_ms() >= mono
    set_clock_offset(tmp_path, 0)
    assert not (tmp_path / CLOCK_OFFSET_FILE).exists()
    assert abs(clock.wall_ms() - _clock.time.time_ns() // 1_000_000) < 1_000


def test_without_the_variable_no_offset_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_clock.FAULTS_ENV, raising=False)
    assert _clock.SystemClock()._offset is None


@pytest.mark.parametrize("kind", ["clock_skew", "clock_jump"])
def test_clock_faults_shift_one_node_and_the_heal_sets_it_right(kind: str) -> None:
    fault = choose_fault(random.Random(11), VIEW, [kind])
    assert len(fault.nodes) == 1 and fault.seed != 0
    assert abs(fault.seed) <= 12_000 if kind == "clock_skew" else abs(fault.seed) >= 600_000
    calls: list[tuple[int, int]] = []

    class Target:
        def set_clock_offset(self, node_id: int, offset_ms: int) -> None:
            calls.append((node_id, offset_ms))

    inject(Target(), fault)  # type: ignore[arg-type]
    heal(Target(), fault)  # type: ignore[arg-type]
    assert calls == [(fault.nodes[0], fault.seed), (fault.nodes[0], 0)]


def test_delay_link_slows_a_leader_and_another_broker_both_ways_until_the_heal() -> None:
    assert "delay_link" in NETWORK_KINDS and "delay_link" in ALL_FAULT_KINDS and "delay_link" not in FAULT_KINDS
    fault = choose_fault(random.Random(4), VIEW, ["delay_link"])
    first, second = fault.nodes
    assert first == 101 and second in (102, 103) and fault.seed in DELAY_LINK_MS_KBIT
    calls: list[object] = []

    class Target:
        def slow_link(self, a: int, b: int, delay_ms: int, rate_kbit: int) -> str:
            calls.append(("slow", a, b, delay_ms, rate_kbit))
            return "netem"

        def unslow_link(self, a: int, b: int) -> None:
            calls.append(("unslow", a, b))

    assert inject(Target(), fault) == ["netem"]  # type: ignore[arg-type]
    heal(Target(), fault)  # type: ignore[arg-type]
    assert calls == [("slow", first, second, fault.seed, DELAY_LINK_MS_KBIT[fault.seed]), ("unslow", first, second)]
