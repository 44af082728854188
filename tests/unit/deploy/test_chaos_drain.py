"""The one drain of the consuming chaos workloads (deploy.chaos._drain): its ordering (stop after the
wait, final offsets after the stop), its bound, and the report keys both workloads print."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from kraftlog.deploy.chaos import _drain
from kraftlog.deploy.chaos._drain import DrainOutcome, drain_fields, drain_group, drain_row
from kraftlog.deploy.chaos._security import PLAINTEXT


class TP(NamedTuple):
    topic: str
    partition: int


class FakeGroupAdmin:
    """Answers ``list_offsets`` from ``committed`` and records when it was asked."""

    def __init__(self, log: list[str], committed: dict[int, int] | Exception) -> None:
        self.log = log
        self.committed = committed

    def __call__(self, *args: Any, **kwargs: Any) -> FakeGroupAdmin:
        return self

    def __enter__(self) -> FakeGroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def list_offsets(self, group_id: str, tps: list[tuple[str, int]]) -> dict[Any, int]:
        self.log.append(f"list_offsets {group_id}")
        if isinstance(self.committed, Exception):
            raise self.committed
        return {TP(t, p): self.committed[p] for t, p in tps}


@pytest.fixture
def cluster(monkeypatch):
    """Installs fake end offsets and a fake group admin; returns the call log and a setter."""
    log: list[str] = []
    state: dict[str, Any] = {"ends": {0: 5, 1: 0, 2: 3}, "committed": {0: 5, 1: 0, 2: 3}}

    def fake_end_offsets(bootstrap: str, topic: str, partitions: int, *, security: Any) -> dict[int, int]:
        log.append(f"end_offsets {topic}")
        if isinstance(state["ends"], Exception):
            raise state["ends"]
        return dict(state["ends"])

    monkeypatch.setattr(_drain, "log_end_offsets", fake_end_offsets)
    monkeypatch.setattr(_drain, "GroupAdmin", lambda *a, **k: FakeGroupAdmin(log, state["committed"]))
    return log, state


def run(highest: Any, log: list[str], timeout_s: float = 5.0) -> DrainOutcome:
    return drain_group(
        "b:1",
        "t",
        3,
        "g",
        highest_commits=highest,
        stop=lambda: log.append("stop"),
        security=PLAINTEXT,
        timeout_s=timeout_s,
        what="group",
    )


def test_drained_once_every_non_empty_partition_is_committed(cluster) -> None:
    log, _ = cluster
    looks = iter([{0: 2}, {0: 5}, {0: 5, 2: 3}])  # partition 1 is empty: it needs no commit
    outcome = run(lambda: next(looks), log)
    assert outcome.drained
    assert outcome.end_offsets == {0: 5, 1: 0, 2: 3}
    assert outcome.final_committed == {0: 5, 1: 0, 2: 3}
    assert outcome.error is None
    assert log == ["end_offsets t", "stop", "list_offsets g"]


def test_not_drained_within_the_bound_still_stops_and_reads(cluster) -> None:
    log, _ = cluster
    outcome = run(lambda: {0: 4, 2: 3}, log, timeout_s=0.3)
    assert not outcome.drained
    assert 0.3 <= outcome.drain_s < 5.0
    assert outcome.error is None
    assert log == ["end_offsets t", "stop", "list_offsets g"]


def test_errors_are_reported_not_raised(cluster) -> None:
    log, state = cluster
    state["ends"] = RuntimeError("no leader")
    state["committed"] = RuntimeError("coordinator moved")
    outcome = run(lambda: {}, log)
    assert not outcome.drained
    assert outcome.end_offsets == {} and outcome.final_committed == {}
    assert outcome.error is not None
    assert "no leader" in outcome.error and "final committed offsets" in outcome.error
    assert log == ["end_offsets t", "stop", "list_offsets g"]


def test_report_keys_are_the_prefix_and_partitions_as_strings_in_order() -> None:
    outcome = DrainOutcome(True, 1.23456, {2: 7, 0: 5}, {0: 5, 2: 6}, None)
    assert drain_fields("eos", outcome) == {
        "eos_drained": True,
        "eos_drain_s": 1.235,
        "eos_end_offsets": {"0": 5, "2": 7},
        "eos_final_committed": {"0": 5, "2": 6},
    }
    assert list(drain_fields("group", outcome)["group_end_offsets"]) == ["0", "2"]


def test_table_row_says_no_when_not_drained() -> None:
    drained = drain_fields("group", DrainOutcome(True, 2.5, {}, {}))
    stuck = drain_fields("group", DrainOutcome(False, 90.0, {}, {}))
    assert drain_row("group", drained) == ("group: drained to the log end (s)", 2.5)
    assert drain_row("group", stuck) == ("group: drained to the log end (s)", "NO")


def test_a_workload_is_drained_on_the_topic_its_group_consumes(cluster) -> None:
    from kraftlog.deploy.chaos import EosWorkload
    from kraftlog.deploy.chaos._drain import drain_workload

    log, _ = cluster
    eos = EosWorkload("b:1", "in", "out", 3, processors=0, group_id="g")
    eos.committed_offsets.update({0: 5, 2: 3})
    outcome = drain_workload(eos, "eos", 5.0)
    assert outcome.drained and outcome.final_committed == {0: 5, 1: 0, 2: 3}
    assert log == ["end_offsets in", "list_offsets g"]  # stopping a workload without threads logs nothing
