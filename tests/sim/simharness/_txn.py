"""Transaction coordinator failover mid-transaction, on the pure `TxnShard` through its public
methods only (so the coordinator runtime of issue 23 can replace the small shell here later).

The model: one ``__transaction_state`` partition (`TxnStateLog`: committed prefix plus an
uncommitted tail), a coordinator shell that appends a shard's records and tells it the outcome
(`on_append`) once they are committed or failed, marker jobs that write COMMIT/ABORT markers into
data partitions (plain lists here) and then report `markers_written`, and transactional producers
that retry as a client does. Failover: the coordinator dies at a random moment; a random prefix of
its uncommitted tail turns out committed (it had reached the ISR), the rest is truncated; a fresh
shard on a new coordinator replays the committed records and resumes with `loaded()`.

Invariants:
- a transaction whose commit was acknowledged gets a COMMIT marker in each of its partitions and
  never an ABORT marker (and the other way round for an acknowledged abort);
- every partition of an acknowledged transaction is closed by a marker of that outcome;
- the epochs InitProducerId hands out for a transactional id only grow (a lost epoch bump would
  let a fenced zombie write);
- after the faults stop, every transaction completes (no id stays in a PREPARE state).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from kraftlog.broker.txn._txn_records import TransactionLogKey, TransactionLogValue, TxnState
from kraftlog.broker.txn._txn_shard import MarkerJob, TxnOutcome, TxnShard, TxnShardConfig
from kraftlog.common import ManualClock
from kraftlog.common import errors as kerr

from ._loop import run_simulated

__all__ = ["TxnRunStats", "txn_coordinator_failover"]

_PARTITIONS = (("t", 0), ("t", 1), ("t", 2))
Record = tuple[TransactionLogKey, TransactionLogValue | None]


class TxnInvariantViolation(AssertionError):
    pass


@dataclass
class TxnRunStats:
    committed: int = 0
    aborted: int = 0
    failovers: int = 0
    fenced: int = 0
    history: list[str] = field(default_factory=list)


class TxnStateLog:
    """The ``__transaction_state`` partition: committed records, then the uncommitted tail."""

    def __init__(self) -> None:
        self.committed: list[Record] = []
        self.tail: list[tuple[int, list[Record]]] = []  # (append id, records) not yet committed


class _NotCoordinator(Exception):
    pass


class Coordinator:
    """A minimal shell around one `TxnShard` (one generation: a failover makes a new one)."""

    def __init__(self, sim: TxnSim, generation: int) -> None:
        self.sim = sim
        self.generation = generation
        self.alive = True
        self.shard = TxnShard(0, TxnShardConfig())
        for key, value in sim.log.committed:
            self.shard.replay(key, value)
        self.waiters: dict[object, asyncio.Future[object]] = {}
        self._replicator = asyncio.get_running_loop().create_task(self._replicate())
        self._timer = asyncio.get_running_loop().create_task(self._poll())
        self.handle(self.shard.loaded())

    def handle(self, out: TxnOutcome) -> None:
        for token, answer in out.responses:
            fut = self.waiters.pop(token, None)
            if fut is not None and not fut.done():
                fut.set_result(answer)
        if out.records:
            assert out.append_id is not None
            self.sim.log.tail.append((out.append_id, list(out.records)))
        for job in out.markers:
            self.sim.spawn(self._write_markers(job))

    async def call(self, op: str, *args: Any) -> object:
        """A request from a client: runs on the shard; the answer comes when the shard gives it."""
        if not self.alive:
            raise _NotCoordinator
        token = object()
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.waiters[token] = fut
        now = self.sim.clock.wall_ms()
        if op == "init":
            (txn_id,) = args
            new_pid = -1
            if self.shard.needs_producer_id(str(txn_id)):
                new_pid = self.sim.next_producer_id
                self.sim.next_producer_id += 1
            self.handle(self.shard.init_producer_id(str(txn_id), 60_000, token, now, new_pid))
        elif op == "add":
            txn_id, pid, epoch, parts = args
            self.handle(self.shard.add_partitions(str(txn_id), int(pid), int(epoch), parts, token, now))
        else:
            txn_id, pid, epoch, commit = args
            self.handle(self.shard.end_txn(str(txn_id), int(pid), int(epoch), bool(commit), token, now))
        return await fut

    async def _replicate(self) -> None:
        """Commit the tail in order, each append after a seeded delay; some writes fail."""
        rng = self.sim.rng
        while self.alive:
            await asyncio.sleep(rng.randint(1, 15) / 1000)
            if not self.alive or not self.sim.log.tail:
                continue
            append_id, records = self.sim.log.tail.pop(0)
            if rng.random() < 0.05:
                # not enough replicas: the write fails, and so does everything queued behind it
                failed = [(append_id, records), *self.sim.log.tail]
                self.sim.log.tail.clear()
                for aid, _recs in failed:
                    self.handle(self.shard.on_append(aid, kerr.NotEnoughReplicasError, self.sim.clock.wall_ms()))
                continue
            self.sim.log.committed.extend(records)
            self.handle(self.shard.on_append(append_id, None, self.sim.clock.wall_ms()))

    async def _poll(self) -> None:
        while self.alive:
            await asyncio.sleep(0.05)
            if self.alive:
                self.handle(self.shard.poll(self.sim.clock.wall_ms()))

    async def _write_markers(self, job: MarkerJob) -> None:
        rng = self.sim.rng
        for tp in sorted(job.partitions):
            await asyncio.sleep(rng.randint(0, 10) / 1000)
            if not self.alive:
                return  # a dead coordinator's markers are refused (its coordinator epoch is stale)
            self.sim.data[tp].append(("commit" if job.commit else "abort", job.producer_id, -1))
        if self.alive:
            self.handle(self.shard.markers_written(job, self.sim.clock.wall_ms()))

    def die(self) -> None:
        """Crash: a random prefix of the uncommitted tail had been replicated (it is committed),
        the rest is gone; every waiting client is told NOT_COORDINATOR."""
        self.alive = False
        self._replicator.cancel()
        self._timer.cancel()
        tail = self.sim.log.tail
        keep = self.sim.rng.randint(0, len(tail))
        for _aid, records in tail[:keep]:
            self.sim.log.committed.extend(records)
        tail.clear()
        for fut in self.waiters.values():
            if not fut.done():
                fut.set_exception(_NotCoordinator())
        self.waiters.clear()


class TxnSim:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.log = TxnStateLog()
        # per data partition: ("data", producer id, transaction number) and ("commit"/"abort", producer id, -1)
        self.data: dict[tuple[str, int], list[tuple[str, int, int]]] = {tp: [] for tp in _PARTITIONS}
        self.transactions = 0
        self.next_producer_id = 1000
        self.coordinator: Coordinator | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.history: list[str] = []
        self.acked: dict[tuple[int, int], tuple[bool, frozenset[tuple[str, int]]]] = {}  # (pid, txn number)
        self.epochs: dict[str, tuple[int, int]] = {}  # txn id -> last (producer id, epoch) handed out
        self.stats = TxnRunStats()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(coro))

    def fail(self, message: str) -> None:
        raise TxnInvariantViolation(f"{message}\nhistory:\n  " + "\n  ".join(self.history))

    async def request(self, op: str, *args: object) -> object:
        """Client -> coordinator -> client, each hop delayed; NOT_COORDINATOR when it died."""
        await asyncio.sleep(self.rng.randint(0, 8) / 1000)
        coordinator = self.coordinator
        if coordinator is None or not coordinator.alive:
            return kerr.NotCoordinatorError
        try:
            answer = await coordinator.call(op, *args)
        except _NotCoordinator:
            return kerr.NotCoordinatorError
        await asyncio.sleep(self.rng.randint(0, 8) / 1000)
        return answer

    async def producer(self, txn_id: str, transactions: int) -> None:
        rng = random.Random(self.rng.getrandbits(64))
        pid, epoch = -1, -1
        done = 0
        while done < transactions:
            if pid < 0:
                answer = await self.request("init", txn_id)
                if not isinstance(answer, tuple) or answer[0] is not None:
                    await asyncio.sleep(0.02)
                    continue
                _e, pid, epoch = answer
                last = self.epochs.get(txn_id)
                if last is not None and (pid, epoch) <= last:
                    self.fail(f"{txn_id}: InitProducerId handed out ({pid}, {epoch}) after {last}")
                self.epochs[txn_id] = (pid, epoch)
                self.history.append(f"{self.clock.monotonic_ms()}: {txn_id} is ({pid}, {epoch})")
            parts = frozenset(rng.sample(_PARTITIONS, rng.randint(1, len(_PARTITIONS))))
            answer = await self.request("add", txn_id, pid, epoch, parts)
            if not isinstance(answer, tuple) or answer[0] is not None:
                fenced = (kerr.ProducerFencedError, kerr.InvalidProducerIdMappingError)
                if isinstance(answer, tuple) and answer[0] in fenced:
                    pid = -1
                    self.stats.fenced += 1
                await asyncio.sleep(0.02)
                continue
            self.transactions += 1
            number = self.transactions
            for tp in parts:
                self.data[tp].append(("data", pid, number))
            commit = rng.random() < 0.7
            while True:
                answer = await self.request("end", txn_id, pid, epoch, commit)
                if answer is None:
                    self.acked[(pid, number)] = (commit, parts)
                    self.history.append(f"{self.clock.monotonic_ms()}: {txn_id} ({pid}, {epoch}) ended commit={commit}")
                    if commit:
                        self.stats.committed += 1
                    else:
                        self.stats.aborted += 1
                    done += 1
                    break
                if answer in (kerr.ProducerFencedError, kerr.InvalidProducerIdMappingError, kerr.InvalidTxnStateError):
                    pid = -1  # fenced (the transaction timed out or was taken over): start again
                    self.stats.fenced += 1
                    break
                await asyncio.sleep(0.02)
            # the next transaction of the same producer needs the id free again
            if pid >= 0:
                pid = -1 if rng.random() < 0.2 else pid  # sometimes a new producer instance takes over

    async def chaos(self) -> None:
        for _ in range(self.rng.randint(1, 4)):
            await asyncio.sleep(self.rng.randint(10, 200) / 1000)
            assert self.coordinator is not None
            self.coordinator.die()
            self.history.append(f"{self.clock.monotonic_ms()}: coordinator {self.coordinator.generation} dies")
            await asyncio.sleep(self.rng.randint(0, 50) / 1000)
            self.coordinator = Coordinator(self, self.coordinator.generation + 1)
            self.stats.failovers += 1


def txn_coordinator_failover(seed: int) -> TxnRunStats:
    sim = TxnSim(seed)
    return run_simulated(_main(sim), sim.clock)


async def _main(sim: TxnSim) -> TxnRunStats:
    sim.coordinator = Coordinator(sim, 1)
    producers = [
        asyncio.get_running_loop().create_task(sim.producer(f"txn-{k}", sim.rng.randint(2, 4))) for k in range(3)
    ]
    await sim.chaos()
    try:
        await asyncio.wait_for(asyncio.gather(*producers), timeout=20)
    except TimeoutError:
        sim.fail("producers did not complete their transactions within 20 s (a transaction is stuck)")
    # quiet: let every ended transaction complete
    deadline = sim.clock.monotonic_ms() + 30_000
    coordinator = sim.coordinator
    assert coordinator is not None
    while (
        any(
            m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
            for m in coordinator.shard.txns.values()
        )
        or coordinator.shard.pending
    ):
        if sim.clock.monotonic_ms() > deadline:
            sim.fail(f"transactions did not complete after the faults stopped: {coordinator.shard.txns}")
        await asyncio.sleep(0.05)
    _check(sim)
    coordinator.die()
    sim.stats.history = sim.history
    return sim.stats


def _check(sim: TxnSim) -> None:
    """A marker closes every transaction of its producer still open in that partition."""
    outcome: dict[tuple[int, int], dict[tuple[str, int], str]] = {}  # (pid, txn number) -> tp -> marker
    for tp, entries in sim.data.items():
        open_txns: dict[int, set[int]] = {}
        for kind, pid, number in entries:
            if kind == "data":
                open_txns.setdefault(pid, set()).add(number)
                continue
            for n in sorted(open_txns.pop(pid, set())):
                outcome.setdefault((pid, n), {})[tp] = kind
    for (pid, number), (commit, parts) in sorted(sim.acked.items()):
        want = "commit" if commit else "abort"
        for tp in sorted(parts):
            got = outcome.get((pid, number), {}).get(tp)
            if got != want:
                sim.fail(f"producer {pid} transaction {number}: acknowledged {want}, but {tp} got {got or 'no marker'}")
