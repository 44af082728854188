"""Coordinator failover under a seeded scheduler: the real transaction and group coordinators
(`TxnCoordinator`, `GroupCoordinator` on the `CoordinatorRuntime`) over an in-memory internal
partition whose appends the seed delays and fails, with failover = a new coordinator that loads
the partition by replaying it through the runtime."""

from __future__ import annotations

import pytest
from simharness import find_failing_seed, run_seeds
from simharness._group import group_coordinator_failover
from simharness._txn import txn_coordinator_failover

from kraftlog.broker.groups._group_records import OffsetCommitKey
from kraftlog.broker.groups._group_shard import GroupShard
from kraftlog.broker.txn._txn_shard import TxnOutcome, TxnShard


def test_txn_coordinator_fails_over_mid_transaction(request: pytest.FixtureRequest) -> None:
    assert run_seeds(txn_coordinator_failover, request.node.nodeid) > 0


def test_txn_scenario_exercises_failover() -> None:
    runs = [txn_coordinator_failover(seed) for seed in range(20)]
    assert all(r.failovers >= 1 for r in runs)
    assert sum(r.committed for r in runs) > 20 and sum(r.aborted for r in runs) > 5
    assert sum(r.failed_writes for r in runs) > 5 and sum(r.lost_acks for r in runs) > 0


def test_harness_finds_a_coordinator_that_does_not_resume_prepared_transactions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Proof that the failover scenario bites: a new coordinator that forgets to write the markers
    of transactions it loaded in a PREPARE state leaves them unfinished, and a seed says so."""
    monkeypatch.setattr(TxnShard, "loaded", lambda self: TxnOutcome())
    failure = find_failing_seed(txn_coordinator_failover, range(200))
    assert failure is not None
    assert "did not complete" in str(failure.error)


def test_group_coordinator_fails_over_mid_rebalance(request: pytest.FixtureRequest) -> None:
    assert run_seeds(group_coordinator_failover, request.node.nodeid) > 0


def test_group_scenario_fails_over_during_rebalances() -> None:
    runs = [group_coordinator_failover(seed) for seed in range(30)]
    assert sum(r.mid_rebalance for r in runs) >= 5
    assert sum(r.generations > 1 for r in runs) >= 10
    assert sum(r.commits for r in runs) > 50
    assert sum(r.failed_writes for r in runs) > 5 and sum(r.lost_acks for r in runs) > 0


def test_harness_finds_a_coordinator_that_forgets_committed_offsets_on_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proof that the group scenario bites: a shard whose replay skips offset commits loses
    acknowledged offsets across a failover, and a seed says so."""
    replay = GroupShard.replay

    def forgetful(self: GroupShard, key: object, value: object, now_ms: int) -> None:
        if not isinstance(key, OffsetCommitKey):
            replay(self, key, value, now_ms)  # type: ignore[arg-type]

    monkeypatch.setattr(GroupShard, "replay", forgetful)
    failure = find_failing_seed(group_coordinator_failover, range(200))
    assert failure is not None and "offset commit lost" in str(failure.error)


def test_one_seed_is_one_coordinator_run() -> None:
    txn = [txn_coordinator_failover(5) for _ in range(2)]
    assert txn[0].history == txn[1].history and txn[0].committed == txn[1].committed
    group = [group_coordinator_failover(5) for _ in range(2)]
    assert group[0].history == group[1].history and group[0].commits == group[1].commits
