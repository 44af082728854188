"""The harness's in-memory internal partition, read and written through the real
`ReplicaPartitionWriter`: what the coordinator scenarios rely on (appends land in the order they
were made, a failover keeps a prefix of what was in flight, a deposed leader writes nothing)."""

from __future__ import annotations

import asyncio
import random

from simharness import find_failing_seed_in_workers, run_simulated
from simharness._internal_log import InternalPartition, LeaderView

from kraftlog.broker.coordinator import LogEntry, ReplicaPartitionWriter
from kraftlog.common import ManualClock
from kraftlog.common import errors as kerr


def _writer(view: LeaderView, clock: ManualClock) -> ReplicaPartitionWriter:
    return ReplicaPartitionWriter(
        lambda: view, "internal", timeout_ms=lambda: 1_000, read_chunk_bytes=lambda: 64, clock_ms=clock.wall_ms
    )


async def _read(writer: ReplicaPartitionWriter, epoch: int) -> list[LogEntry]:
    return [entry async for entry in writer.read(0, epoch)]


def test_appends_commit_in_order_and_replay_through_the_real_reader() -> None:
    clock = ManualClock()
    part = InternalPartition("internal", random.Random(3), fail_rate=0.0, lost_ack_rate=0.0)

    async def main() -> list[LogEntry]:
        writer = _writer(part.view(), clock)
        appends = [writer.append(0, [(f"k{i}".encode(), f"v{i}".encode())] * (i + 1), None) for i in range(8)]
        assert await asyncio.gather(*appends) == [None] * 8
        return await _read(writer, 0)

    entries = run_simulated(main(), clock)
    assert [e.key for e in entries] == [f"k{i}".encode() for i in range(8) for _ in range(i + 1)]
    assert part.end_offset == sum(range(1, 9))


def test_a_failover_keeps_a_prefix_of_the_appends_in_flight_and_fences_the_old_leader() -> None:
    kept: set[int] = set()
    for seed in range(30):
        clock = ManualClock()
        part = InternalPartition("internal", random.Random(seed), fail_rate=0.0, lost_ack_rate=0.0)

        async def main(part: InternalPartition = part, clock: ManualClock = clock) -> list[LogEntry]:
            old = _writer(part.view(), clock)
            tasks = [asyncio.ensure_future(old.append(0, [(bytes([i]), b"")], None)) for i in range(4)]
            await asyncio.sleep(0)
            epoch = part.elect()
            answers = await asyncio.gather(*tasks)
            assert answers == [kerr.NotLeaderOrFollowerError] * 4
            assert await old.append(0, [(b"late", b"")], None) is kerr.NotLeaderOrFollowerError
            return await _read(_writer(part.view(), clock), epoch)

        keys = [e.key for e in run_simulated(main(), clock)]
        assert keys == [bytes([i]) for i in range(len(keys))]  # a prefix, in order
        kept.add(len(keys))
    assert len(kept) > 2  # sometimes none, sometimes some, sometimes all


def _fails_at_37_and_after_every_fifth(seed: int) -> None:
    if seed >= 37 and seed % 5 == 2:
        raise AssertionError(f"seed {seed} broke an invariant")


def test_workers_report_the_lowest_failing_seed() -> None:
    """Seeds spread over worker processes still name the lowest failing seed, with its traceback."""
    failure = find_failing_seed_in_workers(_fails_at_37_and_after_every_fifth, list(range(200)), workers=2)
    assert failure is not None and failure.seed == 37
    message = failure.describe("tests/sim/test_sim_internal_log.py::x")
    assert "seed 37 broke an invariant" in message and "_fails_at_37_and_after_every_fifth" in message
    assert find_failing_seed_in_workers(_fails_at_37_and_after_every_fifth, list(range(37)), workers=2) is None
