"""The chaos checker, the seeded fault choice and the systemd target's commands: pure, no cluster."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kraftlog.cli._chaos import parse_duration_s
from kraftlog.deploy.chaos import (
    FAULT_KINDS,
    Ack,
    ClusterView,
    ReadRecord,
    SystemdNode,
    SystemdTarget,
    check,
    choose_fault,
    encode_value,
    heal,
    inject,
    load_inventory,
    longest_gaps,
)


def _read(partition: int, offset: int, seq: int) -> ReadRecord:
    return ReadRecord(partition, offset, encode_value(partition, seq))


def test_clean_run_reports_nothing() -> None:
    acks = [Ack(0, s, s - 1, float(s)) for s in range(1, 6)]
    report = check(acks, [_read(0, s - 1, s) for s in range(1, 6)])
    assert report.ok and (report.acknowledged, report.lost, report.duplicates, report.reordered) == (5, 0, 0, 0)
    assert report.offset_mismatches == 0 and report.read == 5


def test_lost_duplicate_reordered_and_rewritten_offsets_are_counted() -> None:
    acks = [Ack(0, 1, 0, 1.0), Ack(0, 2, 1, 2.0), Ack(0, 3, 2, 3.0), Ack(1, 1, 0, 1.0)]
    records = [
        _read(0, 0, 1),
        _read(0, 1, 3),
        _read(0, 2, 2),
        _read(0, 3, 2),
        _read(0, 4, 9),
        ReadRecord(1, 0, b"someone else"),
    ]
    report = check(acks, records)
    assert report.lost == 1 and report.lost_examples == ["partition 1 sequence 1 offset 0"]
    assert report.duplicates == 1  # sequence 2 twice
    assert report.reordered == 1  # 2 after 3
    assert report.offset_mismatches == 2  # sequences 2 and 3 are not at their acknowledged offsets
    assert report.unacknowledged_present == 1 and report.foreign == 1
    assert not report.ok


def test_a_duplicate_alone_fails_the_run() -> None:
    acks = [Ack(0, 1, 0, 1.0), Ack(0, 2, 1, 2.0)]
    report = check(acks, [_read(0, 0, 1), _read(0, 1, 2), _read(0, 2, 2)])
    assert report.lost == 0 and report.duplicates == 1 and not report.ok


def test_longest_gap_includes_the_edges() -> None:
    gaps = longest_gaps({0: [1.0, 2.0, 6.5, 7.0], 1: []}, 0.0, 8.0)
    assert gaps[0] == (2.0, 6.5)
    assert gaps[1] == (0.0, 8.0)


VIEW = ClusterView(
    controllers=[1, 2, 3],
    brokers=[101, 102, 103],
    active_controller=2,
    partition_leaders=[102, 103, 101],
    session_timeout_ms=3000,
)


def test_fault_schedule_is_seeded_and_stays_a_minority() -> None:
    a = [choose_fault(random.Random(7), VIEW, FAULT_KINDS) for _ in range(1)]
    rng1, rng2 = random.Random(42), random.Random(42)
    seq1 = [choose_fault(rng1, VIEW, FAULT_KINDS) for _ in range(200)]
    seq2 = [choose_fault(rng2, VIEW, FAULT_KINDS) for _ in range(200)]
    assert seq1 == seq2 and a
    assert {f.kind for f in seq1} == set(FAULT_KINDS)
    for f in seq1:
        assert sum(n in VIEW.controllers for n in f.nodes) <= 1
        assert sum(n in VIEW.brokers for n in f.nodes) <= 1
        if f.kind in ("kill_active_controller", "partition_active_controller"):
            assert f.nodes == (2,)
        if f.kind == "pause":
            assert f.hold_s > VIEW.session_timeout_ms / 1000
        if f.kind == "partition_leader":
            assert f.nodes[0] in VIEW.partition_leaders


def test_combined_nodes_never_lose_two_at_once() -> None:
    combined = ClusterView([1, 2, 3], [1, 2, 3], 1, [1, 2, 3], 3000)
    rng = random.Random(3)
    for _ in range(100):
        assert len(choose_fault(rng, combined, ["kill_minority"]).nodes) == 1


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        choose_fault(random.Random(1), VIEW, ["unplug_the_moon"])


def test_systemd_target_commands() -> None:
    sent: list[list[str]] = []
    nodes = [
        SystemdNode(1, "controller", "10.0.0.1", 9093, "ops@c1"),
        SystemdNode(101, "broker", "10.0.0.11", 9092, "ops@b1"),
        SystemdNode(102, "broker", "10.0.0.12", 9092, "ops@b2"),
    ]
    target = SystemdTarget(nodes, sent.append)
    assert target.bootstrap_servers == "10.0.0.11:9092,10.0.0.12:9092"
    assert target.controller_addresses == "10.0.0.1:9093"
    from kraftlog.deploy.chaos import Fault

    inject(target, Fault("kill_broker", (101,), 1.0))
    assert not target.is_running(101)
    heal(target, Fault("kill_broker", (101,), 1.0))
    assert sent[0] == [
        "ssh",
        "-o",
        "BatchMode=yes",
        "ops@b1",
        "sudo",
        "systemctl",
        "kill",
        "--signal=SIGKILL",
        "kraftlog-broker@101.service",
    ]
    assert sent[1][-2:] == ["start", "kraftlog-broker@101.service"] and target.is_running(101)
    sent.clear()
    inject(target, Fault("partition_leader", (102,), 2.0))
    rules = [" ".join(argv[5:]) for argv in sent]
    assert "iptables -I INPUT -s 10.0.0.1 -j DROP -m comment --comment kraftlog-chaos" in rules
    assert "iptables -I OUTPUT -d 10.0.0.11 -j DROP -m comment --comment kraftlog-chaos" in rules
    assert len(rules) == 4
    sent.clear()
    heal(target, Fault("partition_leader", (102,), 2.0))
    assert all(argv[6] == "-D" for argv in sent) and len(sent) == 4


def test_inventory_is_validated(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[[node]]\nid = 1\nrole = "controller"\nhost = "h1"\nport = 9093\n', encoding="utf-8")
    assert load_inventory(good)[0].ssh == "h1"
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[[node]]\nid = 1\nrole = "controller"\nhost = "h1"\nport = 9093\ncolour = "red"\n', encoding="utf-8"
    )
    with pytest.raises(ValueError, match="colour"):
        load_inventory(bad)


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("90s", 90), ("30m", 1800), ("2h", 7200), ("500ms", 0.5)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds
