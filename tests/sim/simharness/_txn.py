"""Transaction coordinator failover mid-transaction, on the real coordinator: a `TxnCoordinator`
(its `CoordinatorRuntime`, `TxnShards` handler and marker writing) whose ``__transaction_state``
partition is an `InternalPartition` (real record batches, appends delayed, failed, or committed
with their answer lost, as the seed says), whose producer ids come from controller blocks and whose
WriteTxnMarkers requests cross a seeded network to the data partitions' leaders.

Transactional producers retry as a client does. Failover: the partition's leadership moves (a
random prefix of the in-flight appends turns out committed, the rest is truncated), the old
coordinator stops, and a new one loads the partition by replaying it through the runtime, then
resumes the transactions it finds prepared. A data partition refuses markers of a coordinator epoch
older than one it took for the same producer (a deposed coordinator's late markers).

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
from dataclasses import dataclass, field
from typing import Any

from kraftlog.broker.coordinator import TXN_TOPIC, ShardUnavailable
from kraftlog.broker.replica import error_pb
from kraftlog.broker.txn import ProducerIdManager, TxnCoordinator, TxnState
from kraftlog.common import ManualClock
from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import MetadataDelta, MetadataImage, PartitionRecord, TopicRecord
from kraftlog.proto import broker_pb2

from ._internal_log import InternalPartition
from ._loop import run_simulated

__all__ = ["TxnRunStats", "txn_coordinator_failover"]

_PARTITIONS = (("t", 0), ("t", 1), ("t", 2))
_PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
_PID_BLOCK = 10


class TxnInvariantViolation(AssertionError):
    pass


@dataclass
class TxnRunStats:
    committed: int = 0
    aborted: int = 0
    failovers: int = 0
    fenced: int = 0
    failed_writes: int = 0  # appends to the internal partition answered with an error
    lost_acks: int = 0  # of which committed all the same
    history: list[str] = field(default_factory=list)


def _image() -> MetadataImage:
    """``__transaction_state`` (one partition) and the data topic, each partition led by its own
    broker (1..3): a job's markers go out to several leaders."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    txn_topic_id = "00000000-0000-4000-8000-0000000000bb"
    data_topic_id = "00000000-0000-4000-8000-0000000000cc"
    delta.replay(TopicRecord(name=TXN_TOPIC, topic_id=txn_topic_id))
    delta.replay(PartitionRecord(partition_id=0, topic_id=txn_topic_id, replicas=(1,), isr=(1,), leader=1))
    delta.replay(TopicRecord(name="t", topic_id=data_topic_id))
    for _t, p in _PARTITIONS:
        delta.replay(
            PartitionRecord(partition_id=p, topic_id=data_topic_id, replicas=(p + 1,), isr=(p + 1,), leader=p + 1)
        )
    return delta.apply()


class Coordinator:
    """One broker's real `TxnCoordinator`, leading ``__transaction_state`` at one leader epoch
    (a failover makes a new one)."""

    def __init__(self, sim: TxnSim, generation: int) -> None:
        self.sim = sim
        self.generation = generation
        self.alive = True
        view = sim.log.view()
        self.epoch = view.leader_epoch
        self.txn = TxnCoordinator(
            generation,
            sim.config,
            replicas=lambda: view,
            image=lambda: sim.image,
            create_topic=_no_topic_creation,
            producer_ids=ProducerIdManager(sim.allocate_producer_ids),
            send_markers=self._send_markers,
            clock_ms=sim.clock.wall_ms,
        )
        self.txn.start()
        self.txn.runtime.follow({0: self.epoch})

    async def _send_markers(
        self, leader: int, request: broker_pb2.WriteTxnMarkersRequest
    ) -> broker_pb2.WriteTxnMarkersResponse:
        """WriteTxnMarkers to the leader of data partitions: a hop there, the markers appended
        (unless a newer coordinator epoch wrote for that producer there), a hop back."""
        await self.sim.hop()
        response = broker_pb2.WriteTxnMarkersResponse()
        for marker in request.markers:
            answered = response.markers.add(producer_id=marker.producer_id)
            for topic in marker.topics:
                out = answered.topics.add(name=topic.name)
                for index in topic.partition_indexes:
                    error = self.sim.write_marker(
                        (topic.name, index), marker.producer_id, marker.transaction_result, marker.coordinator_epoch
                    )
                    out.partitions.add(partition_index=index, error=error_pb(error))
        await self.sim.hop()
        return response

    async def call(self, op: str, *args: Any) -> object:
        """A request from a client on the real coordinator's API; errors as a client sees them."""
        txn = self.txn
        try:
            if op == "init":
                (txn_id,) = args
                return await txn.init_producer_id(str(txn_id), 60_000)
            if op == "add":
                txn_id, pid, epoch, parts = args
                return await txn.call(
                    str(txn_id), lambda s, token, now: s.add_partitions(str(txn_id), pid, epoch, parts, token, now)
                )
            txn_id, pid, epoch, commit = args
            return await txn.call(
                str(txn_id), lambda s, token, now: s.end_txn(str(txn_id), pid, epoch, commit, token, now)
            )
        except ShardUnavailable as err:
            return (err.error, -1, -1) if op == "init" else (err.error, ()) if op == "add" else err.error
        except kerr.KafkaError as err:
            return (type(err), -1, -1) if op == "init" else (type(err), ()) if op == "add" else type(err)

    def unfinished(self) -> list[str]:
        """Transactional ids still being ended (or written) on this coordinator."""
        shards = self.txn.shards()
        if not shards:
            return ["the partition is not loaded"]
        shard = shards[0]
        return sorted(
            [i for i, m in shard.txns.items() if m.state in _PREPARED] + [f"{i} (pending)" for i in shard.pending]
        )

    async def die(self) -> None:
        """Crash: the partition's leadership moves on (`InternalPartition.elect` decides what of
        the in-flight appends was committed); every waiting client is told NOT_COORDINATOR."""
        self.alive = False
        self.sim.log.elect()
        await self.txn.stop()


async def _no_topic_creation(partitions: int, replication_factor: int, configs: dict[str, str]) -> None:
    raise AssertionError("the topic exists in the image")


class TxnSim:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.config = NodeConfig.from_mapping(
            {"node.id": 1, "process.roles": "broker", "controller.quorum.voters": "100@127.0.0.1:9999"}
        )
        self.image = _image()
        self.log = InternalPartition(TXN_TOPIC, self.rng)
        # per data partition: ("data", producer id, transaction number) and ("commit"/"abort", producer id, -1)
        self.data: dict[tuple[str, int], list[tuple[str, int, int]]] = {tp: [] for tp in _PARTITIONS}
        self.transactions = 0
        self.next_producer_id = 1000  # the controller's next producer-id block starts here
        # per (data partition, producer id): the newest coordinator epoch whose marker it took
        self.marker_epochs: dict[tuple[tuple[str, int], int], int] = {}
        self.coordinator: Coordinator | None = None
        self.history: list[str] = []
        self.acked: dict[tuple[int, int], tuple[bool, frozenset[tuple[str, int]]]] = {}  # (pid, txn number)
        self.epochs: dict[str, tuple[int, int]] = {}  # txn id -> last (producer id, epoch) handed out
        self.stats = TxnRunStats()

    async def allocate_producer_ids(self) -> tuple[int, int]:
        """AllocateProducerIds at the controller: a block no other coordinator gets (a lost
        request is a timeout, as the controller channel reports it)."""
        try:
            await self.hop()
        except ConnectionError as err:
            raise kerr.RequestTimedOutError("AllocateProducerIds lost") from err
        start = self.next_producer_id
        self.next_producer_id += _PID_BLOCK
        return start, _PID_BLOCK

    async def hop(self) -> None:
        """One message between brokers: 0..10 ms, lost (a ConnectionError, after the delay) 2% of the time."""
        delay_ms = self.rng.randint(0, 10)
        lost = self.rng.random() < 0.02
        await asyncio.sleep(delay_ms / 1000)
        if lost:
            raise ConnectionError("message lost")

    def write_marker(
        self, tp: tuple[str, int], producer_id: int, commit: bool, coordinator_epoch: int
    ) -> type[kerr.KafkaError] | None:
        """A data partition's leader takes a COMMIT/ABORT marker, unless a newer coordinator
        wrote one for the producer there (TRANSACTION_COORDINATOR_FENCED)."""
        if tp not in self.data:
            return kerr.UnknownTopicOrPartitionError
        newest = self.marker_epochs.get((tp, producer_id), -1)
        if coordinator_epoch < newest:
            return kerr.TransactionCoordinatorFencedError
        self.marker_epochs[(tp, producer_id)] = coordinator_epoch
        self.data[tp].append(("commit" if commit else "abort", producer_id, -1))
        return None

    def fail(self, message: str) -> None:
        raise TxnInvariantViolation(f"{message}\nhistory:\n  " + "\n  ".join(self.history))

    async def request(self, op: str, *args: object) -> object:
        """Client -> coordinator -> client, each hop delayed; NOT_COORDINATOR when it died."""
        await asyncio.sleep(self.rng.randint(0, 8) / 1000)
        coordinator = self.coordinator
        if coordinator is None or not coordinator.alive:
            return kerr.NotCoordinatorError
        answer = await coordinator.call(op, *args)
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
            await self.coordinator.die()
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
    while unfinished := coordinator.unfinished():
        if sim.clock.monotonic_ms() > deadline:
            sim.fail(f"transactions did not complete after the faults stopped: {unfinished}")
        await asyncio.sleep(0.05)
    _check(sim)
    await coordinator.die()
    sim.stats.history = sim.history
    sim.stats.failed_writes = sim.log.failed + sim.log.lost_acks
    sim.stats.lost_acks = sim.log.lost_acks
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
