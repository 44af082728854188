"""Group coordinator failover mid-rebalance, on the real coordinator: a `GroupCoordinator` (its
`CoordinatorRuntime` and `GroupShards` handler, classic protocol) whose ``__consumer_offsets``
partition is an `InternalPartition` (real record batches; appends delayed, failed, or committed
with their answer lost, as the seed says). Requests go in as the group service sends them. A
failover moves the partition's leadership at a random moment (a random prefix of the in-flight
appends turns out committed, the rest is lost), stops the old coordinator, and a new one loads
the partition by replaying it through the runtime.

Members join, sync (the leader assigns the topic's partitions round robin), heartbeat and commit
offsets; now and then one leaves or a new one joins, so rebalances are under way when the
coordinator fails over.

Invariants:
- one generation, one assignment: the partitions handed out in a generation never overlap, and a
  generation id is never reused with another assignment (not even by the next coordinator);
- no acknowledged offset commit is lost: the final committed offset of each partition is at least
  the highest acknowledged one (commits carry increasing offsets);
- after the faults stop, the live members settle in one generation that covers every partition.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any, cast

from kraftlog.broker.coordinator import OFFSETS_TOPIC, ShardUnavailable
from kraftlog.broker.groups import GroupCoordinator, JoinRequest, Protocol
from kraftlog.broker.groups._group_classic_types import GroupState, SyncRequest
from kraftlog.broker.groups._group_shard import GroupShard, OffsetCommitRequest, ShardOutcome
from kraftlog.common import ManualClock
from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig

from ._internal_log import InternalPartition
from ._loop import run_simulated

__all__ = ["GroupRunStats", "group_coordinator_failover"]

_GROUP = "g"
_PARTITIONS = tuple(("t", p) for p in range(6))
_SESSION_MS = 600
_REBALANCE_MS = 800


class GroupInvariantViolation(AssertionError):
    pass


@dataclass
class GroupRunStats:
    generations: int = 0
    failovers: int = 0
    mid_rebalance: int = 0  # failovers while the group was rebalancing
    commits: int = 0
    failed_writes: int = 0  # appends to the internal partition answered with an error
    lost_acks: int = 0  # of which committed all the same
    history: list[str] = field(default_factory=list)


class SimGroupCoordinator:
    """One broker's real `GroupCoordinator`, leading ``__consumer_offsets`` at one leader epoch
    (a failover makes a new one)."""

    def __init__(self, sim: GroupSim, number: int) -> None:
        self.sim = sim
        self.number = number
        self.alive = True
        view = sim.log.view()
        self.group = GroupCoordinator(
            number,
            sim.config,
            replicas=lambda: view,
            create_offsets_topic=_no_topic_creation,
            clock_ms=sim.clock.wall_ms,
            rng=random.Random(sim.rng.getrandbits(64)),
        )
        self.group.start()
        self.group.runtime.follow({0: view.leader_epoch})

    def shard(self) -> GroupShard | None:
        shards = self.group.shards()
        return shards[0] if shards else None

    async def call(self, op: str, request: object) -> object:
        """A request as the group service sends it; errors as a client sees them."""
        runtime = self.group.runtime
        now = self.sim.clock.wall_ms
        try:
            if op == "join":
                assert isinstance(request, JoinRequest)
                return await runtime.call(0, lambda s, t, n: s.join(request, t, n))
            if op == "sync":
                assert isinstance(request, SyncRequest)
                return await runtime.call(0, lambda s, t, n: s.sync(request, t, n))
            if op == "commit":
                assert isinstance(request, OffsetCommitRequest)
                return await runtime.call(0, lambda s, t, n: s.commit_offsets(request, t, n))
            shard = runtime.shard(0)
            if op == "heartbeat":
                member_id, generation = cast(tuple[str, int], request)
                error, out = shard.heartbeat(_GROUP, member_id, None, generation, now())
            else:
                error, _results, out = shard.leave(_GROUP, [(str(request), None)], now())
            self._carry_out(shard, out)
            return error
        except ShardUnavailable as err:
            return err.error

    def _carry_out(self, shard: GroupShard, out: ShardOutcome) -> None:
        try:
            self.group.run(shard, lambda: out)
        except ShardUnavailable:
            pass  # the partition moved away meanwhile

    async def die(self) -> None:
        """Crash: the partition's leadership moves on (`InternalPartition.elect` decides what of
        the in-flight appends was committed); every waiting client is told NOT_COORDINATOR."""
        self.alive = False
        self.sim.log.elect()
        await self.group.stop()


async def _no_topic_creation(partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
    raise AssertionError("the coordinator follows its partition directly")


class GroupSim:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.config = NodeConfig.from_mapping(
            {
                "node.id": 1,
                "process.roles": "broker",
                "controller.quorum.voters": "100@127.0.0.1:9999",
                "group.min.session.timeout.ms": 100,
                "group.initial.rebalance.delay.ms": 50,
            }
        )
        self.log = InternalPartition(OFFSETS_TOPIC, self.rng, fail_rate=0.03)
        self.coordinator: SimGroupCoordinator | None = None
        self.history: list[str] = []
        self.assignments: dict[int, dict[str, frozenset[tuple[str, int]]]] = {}  # generation -> member -> tps
        self.acked_offsets: dict[tuple[str, int], int] = {}
        self.next_offset = 0
        self.member_state: dict[int, tuple[int, frozenset[tuple[str, int]]]] = {}  # member k -> (generation, tps)
        self.stats = GroupRunStats()
        self._failing_over = False

    def fail(self, message: str) -> None:
        raise GroupInvariantViolation(f"{message}\nhistory:\n  " + "\n  ".join(self.history[-40:]))

    async def failover(self, why: str) -> None:
        if self._failing_over or self.coordinator is None:
            return
        self._failing_over = True
        old = self.coordinator
        shard = old.shard()
        group = shard.groups.get(_GROUP) if shard is not None else None
        if group is not None and group.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
            self.stats.mid_rebalance += 1
        await old.die()
        self.history.append(f"{self.clock.monotonic_ms()}: coordinator {old.number} dies ({why})")
        await asyncio.sleep(self.rng.randint(0, 50) / 1000)
        self.coordinator = SimGroupCoordinator(self, old.number + 1)
        self.stats.failovers += 1
        self._failing_over = False

    async def request(self, op: str, req: object) -> Any:
        await asyncio.sleep(self.rng.randint(0, 8) / 1000)
        c = self.coordinator
        if c is None or not c.alive:
            return kerr.NotCoordinatorError
        answer = await c.call(op, req)
        await asyncio.sleep(self.rng.randint(0, 8) / 1000)
        return answer

    def record_sync(self, k: int, member_id: str, generation: int, tps: frozenset[tuple[str, int]]) -> None:
        gen = self.assignments.setdefault(generation, {})
        if member_id in gen and gen[member_id] != tps:
            self.fail(f"generation {generation}: member {member_id} got {sorted(tps)} after {sorted(gen[member_id])}")
        for other, theirs in gen.items():
            if other != member_id and theirs & tps:
                self.fail(f"generation {generation}: {member_id} and {other} both own {sorted(theirs & tps)}")
        gen[member_id] = tps
        self.member_state[k] = (generation, tps)
        self.history.append(f"{self.clock.monotonic_ms()}: member {k} ({member_id}) gen {generation}: {sorted(tps)}")

    async def member(self, k: int, stop: asyncio.Event, lifetime_ms: int | None) -> None:
        rng = random.Random(self.rng.getrandbits(64))
        member_id, generation = "", -1
        born = self.clock.monotonic_ms()
        protocols = (Protocol("range", b""),)
        while not stop.is_set():
            if lifetime_ms is not None and self.clock.monotonic_ms() - born > lifetime_ms:
                await self.request("leave", member_id)
                self.member_state.pop(k, None)
                self.history.append(f"{self.clock.monotonic_ms()}: member {k} leaves")
                return
            join = JoinRequest(_GROUP, member_id, "consumer", protocols, _SESSION_MS, _REBALANCE_MS)
            join = JoinRequest(
                join.group_id,
                join.member_id,
                join.protocol_type,
                join.protocols,
                join.session_timeout_ms,
                join.rebalance_timeout_ms,
                requires_known_member_id=False,
            )
            answer = await self.request("join", join)
            if not hasattr(answer, "generation_id"):
                await asyncio.sleep(0.02)
                continue
            if answer.error is not None:
                if answer.error is kerr.UnknownMemberIdError:
                    member_id = ""
                await asyncio.sleep(0.02)
                continue
            member_id, generation = answer.member_id, answer.generation_id
            assignments: tuple[tuple[str, bytes], ...] = ()
            if answer.leader == member_id:
                members = sorted(m.member_id for m in answer.members)
                owned: dict[str, list[str]] = {m: [] for m in members}
                for i, (t, p) in enumerate(_PARTITIONS):
                    owned[members[i % len(members)]].append(f"{t}:{p}")
                assignments = tuple((m, ",".join(v).encode()) for m, v in owned.items())
            sync = await self.request("sync", SyncRequest(_GROUP, member_id, generation, assignments=assignments))
            if not hasattr(sync, "assignment") or sync.error is not None:
                await asyncio.sleep(0.02)
                continue
            raw = sync.assignment.decode()
            tps = frozenset((t, int(p)) for t, p in (x.split(":") for x in raw.split(",") if x))
            self.record_sync(k, member_id, generation, tps)
            # stable: heartbeat and commit until the group rebalances or the member leaves
            while not stop.is_set():
                if lifetime_ms is not None and self.clock.monotonic_ms() - born > lifetime_ms:
                    break
                await asyncio.sleep(rng.randint(20, 100) / 1000)
                if tps and rng.random() < 0.5:
                    offsets = []
                    for tp in sorted(tps):
                        self.next_offset += 1
                        offsets.append((tp[0], tp[1], self.next_offset, -1, ""))
                    req = OffsetCommitRequest(_GROUP, tuple(offsets), member_id, None, generation)
                    resp = await self.request("commit", req)
                    if hasattr(resp, "partitions"):
                        for t, p, err in resp.partitions:
                            if err is None:
                                off = next(o for tt, pp, o, _e, _m in offsets if (tt, pp) == (t, p))
                                self.acked_offsets[(t, p)] = max(self.acked_offsets.get((t, p), -1), off)
                                self.stats.commits += 1
                error = await self.request("heartbeat", (member_id, generation))
                if error is kerr.RebalanceInProgressError or error is kerr.IllegalGenerationError:
                    break  # rejoin
                if error is kerr.UnknownMemberIdError:
                    member_id = ""
                    break

    async def chaos(self) -> None:
        for _ in range(self.rng.randint(1, 3)):
            await asyncio.sleep(self.rng.randint(50, 400) / 1000)
            await self.failover("chaos")


def group_coordinator_failover(seed: int) -> GroupRunStats:
    sim = GroupSim(seed)
    return run_simulated(_main(sim), sim.clock)


async def _main(sim: GroupSim) -> GroupRunStats:
    sim.coordinator = SimGroupCoordinator(sim, 1)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    members = [loop.create_task(sim.member(k, stop, None)) for k in range(2)]
    # a member that leaves after a while and one that joins late: rebalances during the chaos
    members.append(loop.create_task(sim.member(2, stop, sim.rng.randint(100, 600))))

    async def late_joiner() -> None:
        await asyncio.sleep(sim.rng.randint(50, 500) / 1000)
        await sim.member(3, stop, None)

    members.append(loop.create_task(late_joiner()))
    await sim.chaos()
    # quiet: the live members (0, 1, 3) settle in one generation covering every partition
    deadline = sim.clock.monotonic_ms() + 30_000
    while not _settled(sim):
        if sim.clock.monotonic_ms() > deadline:
            sim.fail(f"the group did not settle: {sim.member_state}")
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.gather(*members, return_exceptions=False)
    coordinator = sim.coordinator
    assert coordinator is not None
    # let the last commits land, then compare with a freshly loaded coordinator
    await asyncio.sleep(0.2)
    await sim.failover("final check")
    coordinator = sim.coordinator
    deadline = sim.clock.monotonic_ms() + 10_000
    while (shard := coordinator.shard()) is None:
        if sim.clock.monotonic_ms() > deadline:
            sim.fail("the last coordinator did not load its partition")
        await asyncio.sleep(0.01)
    _error, offsets = shard.fetch_offsets(_GROUP, _PARTITIONS)
    stored = {(o.topic, o.partition): o.offset for o in offsets}
    for tp, acked in sorted(sim.acked_offsets.items()):
        if stored.get(tp, -1) < acked:
            sim.fail(f"acknowledged offset commit lost: {tp} acknowledged {acked}, stored {stored.get(tp, -1)}")
    await coordinator.die()
    sim.stats.generations = len(sim.assignments)
    sim.stats.history = sim.history
    sim.stats.failed_writes = sim.log.failed + sim.log.lost_acks
    sim.stats.lost_acks = sim.log.lost_acks
    return sim.stats


def _settled(sim: GroupSim) -> bool:
    live = {k: v for k, v in sim.member_state.items() if k != 2}
    if set(live) != {0, 1, 3}:
        return False
    generations = {g for g, _tps in live.values()}
    if len(generations) != 1:
        return False
    owned = [tp for _g, tps in live.values() for tp in tps]
    return sorted(owned) == sorted(_PARTITIONS)
