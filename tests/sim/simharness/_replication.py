"""Replication scenarios: one function per scenario, ``scenario(seed)`` raises when an invariant
breaks (an `InvariantViolation` naming the seed's history) and returns statistics otherwise.

Invariants, checked while the run goes (`Watcher`, every few simulated milliseconds) and at its end:
- a replica's high watermark never exceeds its log end offset;
- a leader's high watermark never goes backwards during its tenure (one broker, one leader epoch);
- a follower never exposes more than a leader committed: its HW stays at or below the highest HW
  any leader has had;
- no acknowledged acks=all record is lost: once the cluster heals, the leader's log holds each one
  at the offset its acknowledgement named;
- the replicas converge: after healing, every replica's log (records and leader-epoch cache) is
  the leader's, byte for byte.
"""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ._cluster import SimCluster, log_records
from ._loop import run_simulated

__all__ = ["InvariantViolation", "RunStats", "acks_all_leader_change", "unclean_election_truncation"]


class InvariantViolation(AssertionError):
    """The system under simulation broke one of its promises."""


@dataclass
class RunStats:
    acked: int = 0
    leader_changes: int = 0
    truncated_records: int = 0
    messages: int = 0
    dropped: int = 0
    simulated_ms: int = 0
    history: list[str] = field(default_factory=list)


@contextmanager
def _tmpdir() -> Iterator[Path]:
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="kraftlog-sim-", dir=base) as d:
        yield Path(d)


class Watcher:
    """Samples every live replica every ``every_ms`` of simulated time and checks the invariants
    that hold at every instant."""

    def __init__(self, cluster: SimCluster, pids: tuple[int, ...], every_ms: int = 5) -> None:
        self.c = cluster
        self.pids = pids
        self.every_ms = every_ms
        self.tenure_hw: dict[tuple[int, int, int, int], int] = {}  # (pid, broker, incarnation, epoch) -> HW
        self.follower_hw: dict[tuple[int, int], int] = {}  # (pid, broker) -> HW at the last sample
        self.violation: InvariantViolation | None = None
        self.leaders: set[tuple[int, int, int, int]] = set()

    def check(self) -> None:
        c = self.c
        for node in c.nodes.values():
            if not node.alive:
                continue
            for pid in self.pids:
                p = node.partition(pid)
                if p is None or p.stopped:
                    continue
                hw, leo = p.high_watermark, p.log_end_offset
                if hw > leo:
                    self.fail(f"broker {node.bid} partition {pid}: HW {hw} > LEO {leo}")
                if p.is_leader:
                    key = (pid, node.bid, node.epoch, p.leader_epoch)  # one process, one leader epoch
                    self.leaders.add(key)
                    last = self.tenure_hw.get(key, -1)
                    if hw < last:
                        self.fail(f"leader {node.bid} of {pid} in epoch {p.leader_epoch}: HW went back {last} -> {hw}")
                    self.tenure_hw[key] = hw
                else:
                    # a follower's HW only rises to what a leader sent it in a fetch answer
                    prev = self.follower_hw.get((pid, node.bid), -1)
                    top = max(c.max_hw_sent.get(pid, 0), c.max_leader_hw.get(pid, 0))
                    if hw > prev and hw > top:
                        self.fail(f"follower {node.bid} of {pid} exposes HW {hw}; no leader had more than {top}")
                self.follower_hw[(pid, node.bid)] = hw
            # a restarted process starts from its HW checkpoint: compare with its own answers only

    def fail(self, message: str) -> None:
        self.violation = InvariantViolation(f"{message}\nhistory:\n  " + "\n  ".join(self.c.history))
        raise self.violation

    def raise_if_violated(self) -> None:
        if self.violation is not None:
            raise self.violation

    async def run(self) -> None:
        try:
            while True:
                self.check()
                await asyncio.sleep(self.every_ms / 1000)
        except InvariantViolation:
            return  # kept in `violation`; the scenario raises it


def _check_converged(c: SimCluster, watcher: Watcher, pid: int, acked: dict[int, bytes]) -> int:
    """The end-of-run checks; returns the leader's record count."""
    part = c.part(pid)
    leader = c.nodes[part.leader].partition(pid)
    assert leader is not None
    expected = log_records(leader)
    by_offset = dict(expected)
    for r in part.replicas:
        p = c.nodes[r].partition(pid)
        assert p is not None
        got = log_records(p)
        if got != expected:
            watcher.fail(
                f"replica {r} of {pid} did not converge to leader {part.leader}: {len(got)} vs {len(expected)}"
            )
        # an epoch the leader began without writing in it yet is only in the leader's cache
        leo = leader.log_end_offset
        if [e for e in p.log.epoch_cache.entries if e[1] < leo] != [
            e for e in leader.log.epoch_cache.entries if e[1] < leo
        ]:
            watcher.fail(
                f"replica {r} of {pid}: epoch cache {p.log.epoch_cache.entries} (log start {p.log_start_offset}) != "
                f"leader {part.leader}'s {leader.log.epoch_cache.entries} (log start {leader.log_start_offset}, "
                f"LEO {leader.log_end_offset})"
            )
    for offset, value in sorted(acked.items()):
        if by_offset.get(offset) != value:
            watcher.fail(
                f"acknowledged record lost: partition {pid} offset {offset} holds {by_offset.get(offset)!r}, "
                f"acknowledged {value!r}"
            )
    watcher.check()
    return len(expected)


async def _producer(
    c: SimCluster,
    rng: random.Random,
    pid: int,
    k: int,
    acks: int,
    acked: dict[int, bytes],
    stop: asyncio.Event,
    max_pause_ms: int = 20,
) -> None:
    i = 0
    while not stop.is_set():
        values = [f"p{k}-{i}-{j}".encode() for j in range(rng.randint(1, 3))]
        i += 1
        res = await c.produce(pid, values, acks=acks)
        if res is not None and acks == -1:
            _leader, base = res
            for j, v in enumerate(values):
                if acked.get(base + j, v) != v:
                    raise InvariantViolation(f"offset {base + j} acknowledged twice: {acked[base + j]!r} and {v!r}")
                acked[base + j] = v
        await asyncio.sleep(rng.randint(0, max_pause_ms) / 1000)


async def _heal_all(c: SimCluster) -> None:
    for bid in list(c.net.cut):
        c.heal(bid)
    for bid, node in list(c.nodes.items()):
        if not node.alive:
            c.restart(bid)
    for bid in c.nodes:
        c.unfence(bid)


def _finish(c: SimCluster, stats: RunStats, watcher: Watcher) -> RunStats:
    watcher.raise_if_violated()
    stats.messages, stats.dropped = c.net.messages, c.net.dropped
    stats.leader_changes = len(watcher.leaders)
    stats.history = c.history
    return stats


# ---------------------------------------------------------------------- scenario 1


def acks_all_leader_change(seed: int) -> RunStats:
    """Three brokers, one partition (replicas 1, 2, 3; min.insync.replicas 2), two acks=all
    producers; meanwhile the controller moves the leadership between ISR members, brokers are cut
    off and healed, fenced and unfenced. No unclean election: every acknowledged record survives."""
    with _tmpdir() as tmp:
        c = SimCluster(tmp, seed)
        return run_simulated(_acks_all_main(c), c.clock)


async def _acks_all_main(c: SimCluster) -> RunStats:
    rng = random.Random(c.rng.getrandbits(64))
    random.seed(c.seed)  # the retry back-off's jitter draws from the module's generator
    start_ms = c.clock.monotonic_ms()
    await c.start((1, 2, 3), [(1, 2, 3)], min_isr=2)
    watcher = Watcher(c, (0,), every_ms=10)
    tasks = [asyncio.get_running_loop().create_task(watcher.run())]
    acked: dict[int, bytes] = {}
    stop = asyncio.Event()
    producers = [
        asyncio.get_running_loop().create_task(_producer(c, random.Random(rng.getrandbits(64)), 0, k, -1, acked, stop))
        for k in range(2)
    ]
    later: list[asyncio.Task[None]] = []

    async def undo_after(ms: int, action: str, bid: int) -> None:
        await asyncio.sleep(ms / 1000)
        c.heal(bid) if action == "heal" else c.unfence(bid)

    for _ in range(rng.randint(2, 4)):
        await asyncio.sleep(rng.randint(20, 150) / 1000)
        action = rng.choice(("move", "move", "cut", "fence"))
        part = c.part(0)
        if action == "move":
            candidates = [r for r in part.isr if r != part.leader]
            if candidates:
                c.move_leader(0, rng.choice(candidates))
        elif action == "cut":
            bid = rng.choice((1, 2, 3))
            c.cut(bid)
            later.append(asyncio.get_running_loop().create_task(undo_after(rng.randint(50, 500), "heal", bid)))
        else:
            live = [b for b in (1, 2, 3) if not c.fenced(b)]
            if len(live) >= 2:
                bid = rng.choice(live)
                c.fence(bid)
                later.append(asyncio.get_running_loop().create_task(undo_after(rng.randint(50, 500), "unfence", bid)))
    await asyncio.gather(*later)
    await asyncio.sleep(rng.randint(0, 100) / 1000)
    stop.set()
    await asyncio.gather(*producers)
    watcher.raise_if_violated()
    await _heal_all(c)
    if not await c.wait_until(lambda: c.converged(0) or watcher.violation is not None, timeout_ms=60_000):
        watcher.fail(f"partition 0 did not converge within 60 s: {c.part(0)}")
    watcher.raise_if_violated()
    stats = RunStats(acked=len(acked))
    _check_converged(c, watcher, 0, acked)
    for t in tasks:
        t.cancel()
    await c.shutdown()
    stats.simulated_ms = c.clock.monotonic_ms() - start_ms
    return _finish(c, stats, watcher)


# ---------------------------------------------------------------------- scenario 2


def unclean_election_truncation(seed: int, crash_rate: float = 0.0, *, long_run: bool = False) -> RunStats:
    """Two brokers, one partition (replicas 1, 2; unclean election on, min.insync.replicas 1), an
    acks=1 and an acks=all producer. In each round the follower is cut off until the leader drops
    it from the ISR, the leader keeps appending alone, then the leader is fenced (or crashes) and
    the controller elects the out-of-sync follower (with ``crash_rate``, the old leader crashes
    first and restarts over its directories; ``long_run``: up to three rounds with longer pauses).
    When the old leader returns it must truncate
    the suffix the new leader never had and converge to the new leader's log."""
    with _tmpdir() as tmp:
        c = SimCluster(tmp, seed)
        return run_simulated(_unclean_main(c, crash_rate, long_run), c.clock)


async def _unclean_main(c: SimCluster, crash_rate: float, long_run: bool) -> RunStats:
    rng = random.Random(c.rng.getrandbits(64))
    random.seed(c.seed)
    start_ms = c.clock.monotonic_ms()
    await c.start((1, 2), [(1, 2)], min_isr=1, unclean=True)
    watcher = Watcher(c, (0,), every_ms=5 if long_run else 10)
    tasks = [asyncio.get_running_loop().create_task(watcher.run())]
    stop = asyncio.Event()
    ignored: dict[int, bytes] = {}  # acks=1 and acks=all records may go with an unclean election
    producers = [
        asyncio.get_running_loop().create_task(
            _producer(c, random.Random(rng.getrandbits(64)), 0, k, acks, ignored, stop, 20 if long_run else 40)
        )
        for k, acks in enumerate((1, 1))
    ]
    stats = RunStats()
    for _ in range(rng.randint(1, 3 if long_run else 2)):
        await asyncio.sleep(rng.randint(20, 200 if long_run else 150) / 1000)
        part = c.part(0)
        if part.leader < 0:
            continue
        leader, follower = part.leader, next(r for r in part.replicas if r != part.leader)
        c.cut(follower)
        # the leader drops the silent follower from the ISR, and keeps appending alone
        await c.wait_until(lambda: c.part(0).isr == (leader,), timeout_ms=3_000)
        await asyncio.sleep(rng.randint(10, 300 if long_run else 150) / 1000)
        old_part = c.nodes[leader].partition(0)
        old_leo = old_part.log_end_offset if c.nodes[leader].alive and old_part is not None else -1
        if rng.random() < crash_rate:
            await c.crash(leader)
        c.fence(leader)  # session expired: the only live replica is the out-of-sync follower
        await asyncio.sleep(rng.randint(0, 100) / 1000)
        c.heal(follower)
        await asyncio.sleep(rng.randint(50, 400 if long_run else 250) / 1000)
        if not c.nodes[leader].alive:
            c.restart(leader)
        c.unfence(leader)
        new_leader = c.nodes[follower]
        if new_leader.alive and (p := new_leader.partition(0)) is not None and old_leo > p.log_end_offset:
            stats.truncated_records += old_leo - p.log_end_offset
    stop.set()
    await asyncio.gather(*producers)
    watcher.raise_if_violated()
    await _heal_all(c)
    if not await c.wait_until(lambda: c.converged(0) or watcher.violation is not None, timeout_ms=60_000):
        watcher.fail(f"partition 0 did not converge within 60 s: {c.part(0)}")
    watcher.raise_if_violated()
    stats.acked = _check_converged(c, watcher, 0, {})
    for t in tasks:
        t.cancel()
    await c.shutdown()
    stats.simulated_ms = c.clock.monotonic_ms() - start_ms
    return _finish(c, stats, watcher)
