"""The storage faults of the chaos run (issue 28) on real log files: each kind damages what it
says, the damage is seeded, and a log reopened after an unclean shutdown finds it (the recovery
truncates at the damage and the batches it keeps are all valid)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kraftlog.common import RECOVERY_POINT_CHECKPOINT
from kraftlog.deploy.chaos import (
    ALL_FAULT_KINDS,
    FAULT_KINDS,
    ClusterView,
    SystemdNode,
    SystemdTarget,
    choose_fault,
    heal,
    inject,
)
from kraftlog.deploy.chaos._storage_faults import STORAGE_KINDS, damage_node, damage_partition, set_no_space
from kraftlog.storage import NO_SPACE_FILE, Log, LogConfig, OffsetCheckpointFile, build_batch

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256)


def _clock() -> int:
    return NOW


def _log(directory: Path, records: int = 100) -> Log:
    log = Log(directory, CONFIG, clock_ms=_clock)
    for i in range(records):
        log.append_as_leader(build_batch([(None, f"v{i}".encode() * 20)], timestamp_ms=NOW), 0)
    return log


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_a_bitflip_changes_one_bit_of_the_newest_segment_and_recovery_cuts_there(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    end = log.log_end_offset
    newest = log.segments[-1].log_path
    log.close_without_flush()
    before = newest.read_bytes()
    damage = damage_partition(log.dir, "bitflip_segment", random.Random(1))
    after = newest.read_bytes()
    assert len(damage) == 1 and damage[0].file == str(newest)
    diff = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert len(diff) == 1 and bin(before[diff[0]] ^ after[diff[0]]).count("1") == 1
    again = Log(log.dir, CONFIG, had_clean_shutdown=False, recovery_point=0, clock_ms=_clock)
    assert again.log_end_offset < end  # the batch holding the flipped bit and every later one went
    assert all(b.is_valid() for b in again.batches())
    again.close()


def test_an_index_bitflip_lands_in_the_entries_of_the_newest_index_with_any(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    log.close()  # the active segment's index entries reach its file
    indexes = sorted(log.dir.glob("*.index"))
    before = {p.name: p.read_bytes() for p in indexes}
    damage = damage_partition(log.dir, "bitflip_index", random.Random(2))
    assert len(damage) == 1 and "entry" in damage[0].what
    changed = [p.name for p in indexes if p.read_bytes() != before[p.name]]
    assert changed == [Path(damage[0].file).name]
    assert changed[0] == next(p.name for p in reversed(indexes) if before[p.name])


def test_truncation_cuts_the_newest_segment_and_nothing_else(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    newest = log.segments[-1].log_path
    log.close_without_flush()
    before = _files(log.dir)
    damage = damage_partition(log.dir, "truncate_segment", random.Random(3))
    after = _files(log.dir)
    assert [name for name in before if before[name] != after[name]] == [newest.name]
    assert before[newest.name].startswith(after[newest.name]) and len(after[newest.name]) < len(before[newest.name])
    assert damage[0].what.startswith("cut ")


def test_losing_unsynced_writes_keeps_exactly_what_the_recovery_point_covers(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    bases = [s.base_offset for s in log.segments]
    recovery_point = bases[1] + 3  # inside the second segment
    log.close_without_flush()
    damage_partition(log.dir, "lose_unsynced", random.Random(4), recovery_point)
    sizes = {int(p.name[:20]): p.stat().st_size for p in log.dir.glob("*.log")}
    assert sizes[bases[0]] > 0 and all(sizes[b] == 0 for b in bases[2:])
    again = Log(log.dir, CONFIG, had_clean_shutdown=False, recovery_point=0, clock_ms=_clock)
    assert again.log_end_offset == recovery_point
    assert [b.base_offset for b in again.batches()] == list(range(recovery_point))
    again.close()


def test_damage_node_reads_each_dirs_recovery_point_and_skips_what_it_is_told(tmp_path: Path) -> None:
    data = tmp_path / "data"
    kept, other, skipped = _log(data / "t-0"), _log(data / "u-0"), _log(data / "t-1")
    for log in (kept, other, skipped):
        log.close_without_flush()
    OffsetCheckpointFile(data / RECOVERY_POINT_CHECKPOINT).write({("t", 0): 10, ("u", 0): 0, ("t", 1): 0})
    before = {d: _files(data / d) for d in ("u-0", "t-1")}
    damage = damage_node(
        [data], "lose_unsynced", random.Random(5), include=lambda t: t == "t", skip=lambda t, p: p == 1
    )
    assert damage and all("/t-0/" in d.file for d in damage)
    assert {d: _files(data / d) for d in ("u-0", "t-1")} == before


@pytest.mark.parametrize("kind", STORAGE_KINDS)
def test_the_damage_is_seeded(tmp_path: Path, kind: str) -> None:
    results = []
    for run in ("a", "b"):
        log = _log(tmp_path / run / "t-0")
        log.close()
        damage = damage_partition(log.dir, kind, random.Random(7), log.segments[1].base_offset)
        results.append(([d.what for d in damage], _files(log.dir)))
    assert results[0] == results[1] and results[0][0]


def test_an_unknown_kind_is_refused(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0", records=3)
    log.close()
    with pytest.raises(ValueError, match="unknown storage fault kind"):
        damage_partition(log.dir, "melt", random.Random(0))


# ------------------------------------------------------------------ the fault kinds in the schedule

VIEW = ClusterView(
    controllers=[1, 2, 3],
    brokers=[101, 102, 103],
    active_controller=1,
    partition_leaders=[101],
    session_timeout_ms=3000,
)


class _FakeTarget:
    """Records what the fault did to it, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.running = {101: True, 102: True, 103: True}

    def kill(self, node_id: int) -> None:
        self.calls.append(("kill", node_id))
        self.running[node_id] = False

    def damage(self, node_id: int, kind: str, seed: int) -> list[str]:
        assert not self.running[node_id], "damaged while running"
        self.calls.append((f"damage {kind} {seed}", node_id))
        return [f"file of {node_id}"]

    def start(self, node_id: int) -> None:
        self.calls.append(("start", node_id))
        self.running[node_id] = True


@pytest.mark.parametrize("kind", STORAGE_KINDS)
def test_a_storage_fault_kills_one_broker_damages_it_down_and_starts_it_at_the_heal(kind: str) -> None:
    rng = random.Random(11)
    fault = choose_fault(rng, VIEW, [kind])
    assert fault.kind == kind and len(fault.nodes) == 1 and fault.nodes[0] in VIEW.brokers
    assert fault == choose_fault(random.Random(11), VIEW, [kind])  # seeded, the damage's seed too
    target = _FakeTarget()
    node = fault.nodes[0]
    assert inject(target, fault) == [f"file of {node}"]  # type: ignore[arg-type]
    heal(target, fault)  # type: ignore[arg-type]
    assert target.calls == [("kill", node), (f"damage {kind} {fault.seed}", node), ("start", node)]


def test_storage_kinds_are_named_only_and_systemd_targets_refuse_them() -> None:
    assert not set(STORAGE_KINDS) & set(FAULT_KINDS)  # the default schedule is unchanged
    assert set(STORAGE_KINDS) <= set(ALL_FAULT_KINDS)
    target = SystemdTarget([SystemdNode(101, "broker", "10.0.0.11", 9092, "ops@b1")], lambda argv: None)
    reason = target.storage_unavailable()
    assert reason is not None and "local cluster" in reason
    with pytest.raises(RuntimeError, match="local cluster"):
        target.damage(101, "bitflip_segment", 1)


def test_slow_fsync_delays_a_leaders_fsyncs_until_the_heal() -> None:
    fault = choose_fault(random.Random(3), VIEW, ["slow_fsync"])
    assert fault.nodes == (101,) and fault.seed in (200, 500, 1000)  # the only partition leader

    class Target:
        delays: list[tuple[int, int]] = []

        def set_fsync_delay(self, node_id: int, delay_ms: int) -> None:
            self.delays.append((node_id, delay_ms))

    target = Target()
    assert inject(target, fault) == []  # type: ignore[arg-type]
    heal(target, fault)  # type: ignore[arg-type]
    assert target.delays == [(101, fault.seed), (101, 0)]


@pytest.mark.parametrize("halted", [False, True])
def test_disk_full_fills_a_leaders_dir_and_the_heal_frees_it_and_restarts(halted: bool) -> None:
    fault = choose_fault(random.Random(5), VIEW, ["disk_full"])
    assert fault.kind == "disk_full" and fault.nodes == (101,) and 3.0 <= fault.hold_s <= 6.0

    class Target:
        def __init__(self) -> None:
            self.calls: list[tuple[str, int, object]] = []

        def set_no_space(self, node_id: int, full: bool) -> None:
            self.calls.append(("no_space", node_id, full))

        def is_running(self, node_id: int) -> bool:
            return not halted

        def restart(self, node_id: int) -> None:
            self.calls.append(("restart", node_id, None))

        def start(self, node_id: int) -> None:
            self.calls.append(("start", node_id, None))

    target = Target()
    assert inject(target, fault) == []  # type: ignore[arg-type]
    heal(target, fault)  # type: ignore[arg-type]
    again = ("start", 101, None) if halted else ("restart", 101, None)
    assert target.calls == [("no_space", 101, True), ("no_space", 101, False), again]


def test_set_no_space_writes_and_removes_the_control_file(tmp_path: Path) -> None:
    control = tmp_path / "faults"
    set_no_space(control, [tmp_path / "a"])
    assert (control / NO_SPACE_FILE).read_text(encoding="utf-8") == f"{tmp_path / 'a'}\n"
    set_no_space(control, [])
    assert not (control / NO_SPACE_FILE).exists()


def test_the_own_cluster_gives_brokers_two_log_dirs_only_for_disk_full() -> None:
    from kraftlog.deploy.chaos import own_cluster_node_overrides

    assert own_cluster_node_overrides(["kill_broker", "slow_fsync"], "/c") == {}
    two = own_cluster_node_overrides(["disk_full"], "/c")
    assert sorted(two) == [101, 102, 103] and two[101] == {"log.dirs": "/c/node101/data,/c/node101/data2"}
