"""A seeded in-process cluster: real brokers, a committed metadata log, a network that drops,
delays and reorders — on simulated time.

Each broker is the real thing below the sockets: a `ReplicaManager` over `Log`s in a temporary
directory, its `ReplicaFetcherManager` and `AlterPartitionManager`. The controller is the real
decision logic (``quorum.controller``: AlterPartition, fencing, elections) over a committed metadata
log whose images are built by the real `MetadataDelta` / `MetadataImage`. Every message between
nodes — fetches and their answers, OffsetForLeaderEpoch, AlterPartition, metadata records reaching
each broker, produce requests — travels through `SimNetwork`, which draws from one
``random.Random(seed)`` whether it is lost and how long it takes (so messages overtake each other).
Time is a `ManualClock` driven by `VirtualTimeLoop`: no sockets, no sleeps, one seed = one run.

Rules of the model (what a real deployment guarantees, so what the harness may assume):
- the metadata log is delivered to each broker in order, possibly late and in chunks;
- a "cut" broker (paused, partitioned) reaches no broker and hears no metadata, but may still reach
  the controller (the zombie-leader case: its AlterPartition is answered with FENCED_LEADER_EPOCH);
- a crashed broker loses what it had not flushed and restarts over the same directories.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import kraftlog.quorum.controller as ctl
from kraftlog import storage
from kraftlog.broker.replica._alter_partition import AlterPartitionManager
from kraftlog.broker.replica._fetcher import ReplicaFetcherManager
from kraftlog.broker.replica._metadata_follower import MetadataLoader
from kraftlog.broker.replica._partition import Partition
from kraftlog.broker.replica._replica_manager import ReplicaManager
from kraftlog.common import ManualClock
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    LogEntry,
    MetadataDelta,
    MetadataImage,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from kraftlog.proto import broker_pb2, controller_pb2

__all__ = ["CLIENT", "CONTROLLER", "TOPIC", "TOPIC_ID", "SimBroker", "SimCluster", "SimNetwork", "log_records"]

T = TypeVar("T")

CONTROLLER = 0  # the controller's id on the simulated network
CLIENT = -1  # producers' id on the simulated network
TOPIC = "t"
TOPIC_ID = "00000000-0000-4000-8000-0000000000aa"
_VOTERS = "100@127.0.0.1:9999"


class SimNetwork:
    """Seeded message delivery: each hop takes ``min_delay_ms..max_delay_ms`` and is lost with
    probability ``drop_rate`` (the sender sees a ConnectionError after the delay, as a timeout).
    ``cut`` holds brokers that neither reach nor are reached by other brokers."""

    def __init__(
        self, rng: random.Random, *, drop_rate: float = 0.02, min_delay_ms: int = 0, max_delay_ms: int = 15
    ) -> None:
        self.rng = rng
        self.drop_rate = drop_rate
        self.min_delay_ms = min_delay_ms
        self.max_delay_ms = max_delay_ms
        self.cut: set[int] = set()
        self.messages = 0
        self.dropped = 0

    def reachable(self, src: int, dst: int) -> bool:
        """Brokers reach each other unless one is cut; the controller's RPCs and clients always get
        through (a cut broker still hears no metadata: see `hears_metadata`)."""
        if src in (CONTROLLER, CLIENT) or dst in (CONTROLLER, CLIENT):
            return True
        return src not in self.cut and dst not in self.cut

    def hears_metadata(self, bid: int) -> bool:
        return bid not in self.cut

    async def hop(self, src: int, dst: int) -> None:
        """One message from ``src`` to ``dst``: wait its delay; raise when it is lost."""
        self.messages += 1
        delay_ms = self.rng.randint(self.min_delay_ms, self.max_delay_ms)
        lost = self.rng.random() < self.drop_rate
        await asyncio.sleep(delay_ms / 1000)
        if lost or not self.reachable(src, dst):
            self.dropped += 1
            raise ConnectionError(f"message {src} -> {dst} lost")


class SimBroker:
    """One broker process: replica manager, fetchers, AlterPartition channel, metadata position."""

    def __init__(self, cluster: SimCluster, bid: int, epoch: int) -> None:
        self.cluster = cluster
        self.bid = bid
        self.epoch = epoch
        self.alive = True
        self.image = MetadataImage.EMPTY  # what the replica manager was given
        self.applied = 0  # metadata batches delivered (loaded; published once caught up)
        # the broker's own rule: nothing reaches the replica manager before the initial catch-up
        self.metadata = MetadataLoader(self._on_metadata)
        self.metadata_waiting = asyncio.Event()  # set when batches may be waiting for this broker
        cfg = NodeConfig.from_mapping(
            {
                "node.id": bid,
                "process.roles": "broker",
                "controller.quorum.voters": _VOTERS,
                "log.dirs": str(cluster.tmp / f"node{bid}"),
                "log.cleaner.enable": False,
                "replica.lag.time.max.ms": cluster.replica_lag_time_max_ms,
                "replica.fetch.wait.max.ms": 50,
            }
        )
        self.apm = AlterPartitionManager(bid, lambda: self.epoch, self._alter_partition, retry_backoff_ms=20)
        self.rm = ReplicaManager.create(bid, cfg, self.apm, clock_ms=cluster.clock.wall_ms)
        self.rm.startup()
        self.fm = ReplicaFetcherManager(
            self.rm,
            fetch=self._fetch,
            offset_for_leader_epoch=self._ofle,
            broker_epoch=lambda: self.epoch,
            max_wait_ms=50,
            backoff_ms=40,
        )
        self.rm.fetcher_manager = self.fm
        self._watch_leader_hw()
        self.tasks: list[asyncio.Task[None]] = []

    def _on_metadata(self, delta: MetadataDelta | None, image: MetadataImage, old: MetadataImage) -> None:
        """What broker._server does with a published change."""
        self.rm.apply_delta(delta if delta is not None else MetadataDelta(image), image)
        self.image = image

    def _watch_leader_hw(self) -> None:
        """Record every HW a leader reaches (the partition tells its listener, the replica
        manager's purgatories, each time it advances), so the invariants compare with exact values."""
        rm = self.rm
        listener = rm._purgatories  # the PartitionListener every Partition of this broker reports to
        advanced = listener.on_high_watermark_advanced
        top = self.cluster.max_leader_hw

        def on_high_watermark_advanced(tp: tuple[str, int]) -> None:
            p = rm.get_partition(*tp)
            if p is not None:
                top[tp[1]] = max(top.get(tp[1], 0), p.high_watermark)
            advanced(tp)

        listener.on_high_watermark_advanced = on_high_watermark_advanced  # type: ignore[method-assign]

    @property
    def address(self) -> str:
        return f"host{self.bid}:{9090 + self.bid}"

    def register_record(self, fenced: bool) -> RegisterBrokerRecord:
        return RegisterBrokerRecord(
            broker_id=self.bid,
            incarnation_id=f"inc-{self.bid}-{self.epoch}",
            broker_epoch=self.epoch,
            endpoints=(BrokerEndpoint("PLAINTEXT", f"host{self.bid}", 9090 + self.bid),),
            fenced=fenced,
        )

    def partition(self, pid: int) -> Partition | None:
        return self.rm.get_partition(TOPIC, pid)

    # -- transport: every call is a request hop, the callee's work, and an answer hop
    async def _call(self, dst: int, work: Callable[[], Awaitable[T]]) -> T:
        net = self.cluster.net
        await net.hop(self.bid, dst)
        target = self.cluster.nodes.get(dst) if dst != CONTROLLER else None
        if target is not None and not target.alive:
            raise ConnectionError(f"{dst} is down")
        rm = None if target is None else target.rm
        result = await work()
        if target is not None and not (target.alive and target.rm is rm):
            raise ConnectionError(f"{dst} went away")  # a dead broker's answer never arrives
        await net.hop(dst, self.bid)
        if not self.alive:
            raise ConnectionError("caller is down")
        return result

    async def _fetch(self, address: str, req: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        leader = self.cluster.by_address(address)

        async def work() -> broker_pb2.FetchResponse:
            resp = await leader.rm.fetch(req)
            sent = self.cluster.max_hw_sent
            for t in resp.responses:
                for pd in t.partitions:
                    sent[pd.partition_index] = max(sent.get(pd.partition_index, 0), pd.high_watermark)
            return resp

        return await self._call(leader.bid, work)

    async def _ofle(
        self, address: str, req: broker_pb2.OffsetForLeaderEpochRequest
    ) -> broker_pb2.OffsetForLeaderEpochResponse:
        leader = self.cluster.by_address(address)

        async def work() -> broker_pb2.OffsetForLeaderEpochResponse:
            return leader.rm.offset_for_leader_epoch(req)

        return await self._call(leader.bid, work)

    async def _alter_partition(
        self, req: controller_pb2.AlterPartitionRequest
    ) -> controller_pb2.AlterPartitionResponse:
        async def work() -> controller_pb2.AlterPartitionResponse:
            return self.cluster.controller_alter_partition(req)

        return await self._call(CONTROLLER, work)


class SimCluster:
    """Brokers, the controller's decisions over a committed metadata log, and the network."""

    def __init__(
        self,
        tmp: Path,
        seed: int,
        *,
        drop_rate: float = 0.02,
        max_delay_ms: int = 15,
        replica_lag_time_max_ms: int = 400,
    ) -> None:
        self.tmp = tmp
        self.seed = seed
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.net = SimNetwork(random.Random(self.rng.getrandbits(64)), drop_rate=drop_rate, max_delay_ms=max_delay_ms)
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.image = MetadataImage.EMPTY
        self.batches: list[list[LogEntry]] = []  # the committed metadata log, one batch per commit
        self.nodes: dict[int, SimBroker] = {}
        self.next_epoch = 10
        self.alter_answers: list[tuple[int, str]] = []
        self.max_leader_hw: dict[int, int] = {}  # partition -> the highest HW any leader reached
        self.max_hw_sent: dict[int, int] = {}  # partition -> the highest HW a leader sent a follower
        ccfg = NodeConfig.from_mapping(
            {
                "node.id": 100,
                "process.roles": "controller",
                "controller.quorum.voters": _VOTERS,
                "log.dirs": str(tmp / "c"),
            }
        )
        self.ctx = ctl.ControllerContext(cluster_id="sim", config=ccfg, now_ms=0, rng=random.Random(seed))
        self._tasks: list[asyncio.Task[Any]] = []
        self.history: list[str] = []  # what chaos did, for the failure message

    # ------------------------------------------------------------------ setup

    async def start(
        self,
        ids: Iterable[int],
        assignments: list[tuple[int, ...]],
        *,
        min_isr: int,
        unclean: bool = False,
    ) -> None:
        ids = list(ids)
        for bid in ids:
            self._add_node(bid)
        recs: list[Any] = [self.nodes[b].register_record(fenced=False) for b in ids]
        recs.append(TopicRecord(name=TOPIC, topic_id=TOPIC_ID))
        recs.append(
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=TOPIC,
                name="min.insync.replicas",
                value=str(min_isr),
            )
        )
        if unclean:
            recs.append(
                ConfigRecord(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name=TOPIC,
                    name="unclean.leader.election.enable",
                    value="true",
                )
            )
        for pid, replicas in enumerate(assignments):
            recs.append(
                PartitionRecord(
                    partition_id=pid, topic_id=TOPIC_ID, replicas=replicas, isr=replicas, leader=replicas[0]
                )
            )
        self.commit(*recs)

    def _add_node(self, bid: int) -> SimBroker:
        self.next_epoch += 10
        node = SimBroker(self, bid, self.next_epoch)
        self.nodes[bid] = node
        node.metadata_waiting.set()
        node.tasks.append(asyncio.get_running_loop().create_task(self._metadata_pump(node)))
        node.tasks.append(asyncio.get_running_loop().create_task(self._isr_timer(node)))
        return node

    def by_address(self, address: str) -> SimBroker:
        return next(n for n in self.nodes.values() if n.address == address)

    # ------------------------------------------------------------------ the controller

    def commit(self, *records: Any) -> None:
        """Append one batch to the committed metadata log (the controller's image moves at once;
        brokers learn it when the network delivers it)."""
        if not records:
            return
        first = self.image.offset + 1
        entries = [LogEntry(first + i, 1, self.clock.wall_ms(), r) for i, r in enumerate(records)]
        delta = MetadataDelta(self.image)
        for e in entries:
            delta.replay(e)
        self.image = delta.apply()
        self.batches.append(entries)
        for node in self.nodes.values():
            node.metadata_waiting.set()

    def controller_alter_partition(
        self, req: controller_pb2.AlterPartitionRequest
    ) -> controller_pb2.AlterPartitionResponse:
        records, resp = ctl.alter_partition(self.image, req, self.ctx)
        self.commit(*records)
        self.alter_answers += [(req.broker_id, p.error.name) for t in resp.topics for p in t.partitions]
        return resp

    def part(self, pid: int) -> Any:
        topic = self.image.topics.get_by_id(TOPIC_ID)
        assert topic is not None
        return topic.partition(pid)

    def fenced(self, bid: int) -> bool:
        reg = self.image.cluster.broker(bid)
        return reg is None or reg.fenced

    def fence(self, bid: int) -> None:
        """The controller fences ``bid`` (its session expired): out of every ISR, leaderships move."""
        if self.fenced(bid):
            return
        reg = self.image.cluster.broker(bid)
        assert reg is not None
        fence = FenceBrokerRecord(broker_id=bid, broker_epoch=reg.broker_epoch)
        self.commit(fence, *ctl._remove_from_isrs(ctl.apply_records(self.image, [fence]), self.ctx, {bid}))
        self.history.append(f"{self.clock.monotonic_ms()}: fence {bid}")

    def unfence(self, bid: int) -> None:
        if not self.fenced(bid) or self.image.cluster.broker(bid) is None:
            return
        unfence = UnfenceBrokerRecord(broker_id=bid, broker_epoch=self.nodes[bid].epoch)
        self.commit(unfence, *ctl._elect_offline_partitions(ctl.apply_records(self.image, [unfence]), self.ctx, {bid}))
        self.history.append(f"{self.clock.monotonic_ms()}: unfence {bid}")

    def move_leader(self, pid: int, to: int) -> bool:
        """A clean leader change (preferred-leader election, reassignment): only to an unfenced ISR
        member."""
        part = self.part(pid)
        if to == part.leader or to not in part.isr or self.fenced(to):
            return False
        self.commit(PartitionChangeRecord(partition_id=pid, topic_id=TOPIC_ID, leader=to))
        self.history.append(f"{self.clock.monotonic_ms()}: move leader of {pid} to {to}")
        return True

    # ------------------------------------------------------------------ broker loops

    async def _metadata_pump(self, node: SimBroker) -> None:
        """Deliver the committed metadata log to ``node`` in order, some batches at a time, late,
        with the controller's committed offset (the broker publishes once it has reached it)."""
        rng = random.Random(self.rng.getrandbits(64))
        while node.alive:
            await node.metadata_waiting.wait()
            await asyncio.sleep(rng.randint(1, 20) / 1000)
            pending = len(self.batches) - node.applied
            if pending <= 0 or not self.net.hears_metadata(node.bid) or not node.alive:
                if pending <= 0 or not self.net.hears_metadata(node.bid):
                    node.metadata_waiting.clear()  # `commit` or `heal` sets it again
                continue
            upto = node.applied + rng.randint(1, pending)
            node.metadata.replay(e for batch in self.batches[node.applied : upto] for e in batch)
            node.applied = upto
            node.metadata.publish(self.image.offset)

    async def _isr_timer(self, node: SimBroker) -> None:
        """The replica manager's ISR-shrink duty (half the lag time, as its scheduler runs it)."""
        while node.alive:
            await asyncio.sleep(max(1, self.replica_lag_time_max_ms // 2) / 1000)
            if node.alive:
                node.rm.maybe_shrink_isr()

    # ------------------------------------------------------------------ faults

    def cut(self, bid: int) -> None:
        self.net.cut.add(bid)
        self.history.append(f"{self.clock.monotonic_ms()}: cut {bid}")

    def heal(self, bid: int) -> None:
        self.net.cut.discard(bid)
        self.nodes[bid].metadata_waiting.set()
        self.history.append(f"{self.clock.monotonic_ms()}: heal {bid}")

    async def crash(self, bid: int) -> None:
        """kill -9: tasks stop, unflushed data is lost (the logs close without flush)."""
        node = self.nodes[bid]
        if not node.alive:
            return
        node.alive = False
        self.history.append(f"{self.clock.monotonic_ms()}: crash {bid}")
        for t in node.tasks:
            t.cancel()
        await node.fm.shutdown()
        await node.apm.shutdown()
        for part in list(node.rm.partitions().values()):
            part.stop()
        for purgatory in (node.rm.produce_purgatory, node.rm.delete_records_purgatory, node.rm.fetch_purgatory):
            purgatory.shutdown()
        for log in node.rm.log_manager.all_logs().values():
            log.close_without_flush()

    def restart(self, bid: int) -> SimBroker:
        """A new process over the same directories; it registers with a new broker epoch (fenced
        until `unfence`) and recovers its logs."""
        old = self.nodes[bid]
        assert not old.alive
        node = self._add_node(bid)
        self.commit(node.register_record(fenced=True))
        self.history.append(f"{self.clock.monotonic_ms()}: restart {bid}")
        return node

    # ------------------------------------------------------------------ clients

    async def produce(
        self, pid: int, values: list[bytes], *, acks: int, timeout_ms: int = 1000
    ) -> tuple[int, int] | None:
        """Send one batch to the leader the controller names; (leader, base offset) once it is
        acknowledged, None when it failed (lost, refused, timed out: it may or may not be in a log)."""
        leader_id = self.part(pid).leader
        node = self.nodes.get(leader_id)
        if node is None or not node.alive:
            return None
        data = storage.build_batch([(None, v) for v in values], timestamp_ms=self.clock.wall_ms())
        R = broker_pb2.ProduceRequest
        req = R(
            acks=acks,
            timeout_ms=timeout_ms,
            topics=[R.TopicData(name=TOPIC, partitions=[R.PartitionData(index=pid, records=data)])],
        )
        try:
            await self.net.hop(CLIENT, node.bid)
            rm = node.rm
            resp = await rm.produce(req)
            if not node.alive or node.rm is not rm:
                return None
            await self.net.hop(node.bid, CLIENT)
        except ConnectionError:
            return None
        pr = resp.topics[0].partitions[0]
        if pr.error.code != 0:
            return None
        return leader_id, pr.base_offset

    # ------------------------------------------------------------------ waiting

    async def wait_until(self, predicate: Callable[[], bool], *, timeout_ms: int, poll_ms: int = 10) -> bool:
        """Poll ``predicate`` on simulated time; False when ``timeout_ms`` passed first."""
        deadline = self.clock.monotonic_ms() + timeout_ms
        while not predicate():
            if self.clock.monotonic_ms() >= deadline:
                return False
            await asyncio.sleep(poll_ms / 1000)
        return True

    def converged(self, pid: int) -> bool:
        """Every replica alive, in the ISR, on the latest metadata, with the leader's LEO and HW."""
        part = self.part(pid)
        if part.leader < 0 or set(part.isr) != set(part.replicas):
            return False
        leader = self.nodes[part.leader].partition(pid)
        if leader is None or not leader.is_leader:
            return False
        for r in part.replicas:
            node = self.nodes[r]
            p = node.partition(pid)
            if not node.alive or node.applied != len(self.batches) or p is None:
                return False
            if p.log_end_offset != leader.log_end_offset or p.high_watermark != leader.log_end_offset:
                return False
        return True

    async def shutdown(self) -> None:
        for node in self.nodes.values():
            if node.alive:
                node.alive = False
                for t in node.tasks:
                    t.cancel()
                await node.apm.shutdown()
                await node.rm.shutdown()


def log_records(part: Partition) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in ``part``'s log, from its log start offset."""
    log = part.log
    data = log.read(log.log_start_offset, 1 << 30, min_one_message=True).records
    out: list[tuple[int, bytes]] = []
    for _pos, b in storage.iter_batches(bytes(data)):
        out += [(r.offset, r.value or b"") for r in b.records()]
    return out
