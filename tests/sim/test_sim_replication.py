"""Replication under a seeded scheduler: each scenario over KRAFTLOG_SIM_SEEDS seeds (default 1,000);
a failure prints the seed and the command that replays it (see simharness/_seeds.py)."""

from __future__ import annotations

import pytest
from simharness import find_failing_seed, run_seeds
from simharness._replication import RunStats, acks_all_leader_change, unclean_election_truncation

from kraftlog.broker.replica._partition import Partition


def test_leader_change_during_acks_all_produce(request: pytest.FixtureRequest) -> None:
    assert run_seeds(acks_all_leader_change, request.node.nodeid) > 0


def test_follower_truncates_after_unclean_election(request: pytest.FixtureRequest) -> None:
    assert run_seeds(unclean_election_truncation, request.node.nodeid) > 0


def test_scenarios_exercise_what_they_claim() -> None:
    """Over a few seeds the faults happen: leaders change, unclean elections leave a divergent
    suffix that a follower truncates, and the network loses messages."""
    runs = [acks_all_leader_change(seed) for seed in range(10)]
    assert sum(r.acked for r in runs) > 100
    assert sum(r.leader_changes > 1 for r in runs) >= 5
    assert sum(r.dropped for r in runs) > 0
    unclean = [unclean_election_truncation(seed) for seed in range(10)]
    assert sum(r.truncated_records > 0 for r in unclean) >= 5


def test_one_seed_is_one_run() -> None:
    """The same seed replays the same run: same history, same messages, same simulated time."""

    def fingerprint(r: RunStats) -> tuple[object, ...]:
        return (r.acked, r.messages, r.dropped, r.simulated_ms, tuple(r.history))

    assert fingerprint(acks_all_leader_change(3)) == fingerprint(acks_all_leader_change(3))
    assert fingerprint(unclean_election_truncation(4)) == fingerprint(unclean_election_truncation(4))


def _hw_before_the_isr_acknowledged(self: Partition) -> bool:
    """The broken rule: the leader's HW follows its own LEO, not the ISR's."""
    if not self.is_leader:
        return False
    log = self.log
    if log.log_end_offset > log.high_watermark:
        log.update_high_watermark(log.log_end_offset)
        self._listener.on_high_watermark_advanced(self.tp)
        return True
    return False


def test_harness_finds_a_high_watermark_advanced_before_the_isr_acknowledged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proof that the harness bites: with the HW rule broken, a seed within the first 1,000 loses an
    acknowledged acks=all record (or breaks another invariant) and is reported."""
    monkeypatch.setattr(Partition, "maybe_increment_high_watermark", _hw_before_the_isr_acknowledged)
    failure = find_failing_seed(acks_all_leader_change, range(1000))
    assert failure is not None, "the broken HW rule went unnoticed over 1,000 seeds"
    message = failure.describe("tests/sim/test_sim_replication.py::test_leader_change_during_acks_all_produce")
    assert f"KRAFTLOG_SIM_SEED={failure.seed}" in message
    print(f"broken HW rule caught at seed {failure.seed}: {str(failure.error).splitlines()[0]}")


def _unclean_with_crashes(seed: int) -> RunStats:
    return unclean_election_truncation(seed, crash_rate=0.3, long_run=True)


def test_unclean_election_with_crashed_leader(request: pytest.FixtureRequest) -> None:
    """The unclean scenario, longer, with the old leader crashing (kill -9) and restarting over its
    directories. Seeds 7, 18 and 56 failed before issue 23's fix: the restarted broker replayed the
    metadata log from the start and published each batch to its replica manager before it had
    caught up, so an old PartitionRecord made it leader in epoch 0 and ``Partition.make_leader``
    wiped every newer entry of its leader-epoch cache (it ended as [(3, 146)] over a log starting
    at 0). Now, as in Kafka, nothing is published before the initial catch-up
    (broker/_metadata_follower.py `MetadataLoader`, which the harness's brokers use too).
    Fewer seeds by default than the short scenarios: each run is about twice as long."""
    assert run_seeds(_unclean_with_crashes, request.node.nodeid, default=200) > 0


def test_the_crash_scenario_restarts_the_old_leader() -> None:
    """The seeds that found the defect do crash and restart the old leader after it led."""
    for seed in (7, 18, 56):
        history = _unclean_with_crashes(seed).history
        crashes = [i for i, h in enumerate(history) if h.split(": ", 1)[1].startswith("crash ")]
        restarts = [i for i, h in enumerate(history) if h.split(": ", 1)[1].startswith("restart ")]
        assert crashes and restarts and restarts[0] > crashes[0], history
