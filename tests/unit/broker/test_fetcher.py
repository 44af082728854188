"""Follower replication end to end, in one process: replica managers wired with in-memory fetch
functions, the real AlterPartitionManager, and the controller's own AlterPartition / fencing /
election logic (quorum.controller) as the metadata source. No sockets; waits are on events
(metadata commits, acknowledged produces), never on sleeps."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path

import kraftlog.quorum.controller as ctl
from kraftlog import storage
from kraftlog.broker.replica._alter_partition import AlterPartitionManager
from kraftlog.broker.replica._fetcher import ReplicaFetcherManager
from kraftlog.broker.replica._replica_manager import ReplicaManager
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    MetadataDelta,
    MetadataImage,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from kraftlog.proto import broker_pb2, controller_pb2

TOPIC_ID = "00000000-0000-4000-8000-0000000000aa"
VOTERS = "100@127.0.0.1:9999"


def batch(n: int, tag: str) -> bytes:
    return storage.build_batch([(None, f"{tag}-{i}".encode()) for i in range(n)], timestamp_ms=int(time.time() * 1000))


def values(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    for _pos, b in storage.iter_batches(data):
        out += [(r.offset, r.value) for r in b.records()]
    return out


class Node:
    def __init__(self, cluster: Cluster, bid: int, epoch: int) -> None:
        self.bid = bid
        self.epoch = epoch
        self.alive = True
        self.reachable = True
        self.image = MetadataImage.EMPTY
        cfg = NodeConfig.from_mapping(
            {
                "node.id": bid,
                "process.roles": "broker",
                "controller.quorum.voters": VOTERS,
                "log.dirs": str(cluster.tmp / f"node{bid}"),
                "replica.lag.time.max.ms": 10_000,
                "replica.fetch.wait.max.ms": 100,
            }
        )
        self.apm = AlterPartitionManager(bid, lambda: self.epoch, cluster.alter_partition, retry_backoff_ms=10)
        self.rm = ReplicaManager.create(bid, cfg, self.apm)
        self.rm.startup()
        self.fm = ReplicaFetcherManager(
            self.rm,
            fetch=cluster.fetch,
            offset_for_leader_epoch=cluster.ofle,
            broker_epoch=lambda: self.epoch,
            max_wait_ms=100,
            backoff_ms=20,
        )
        self.rm.fetcher_manager = self.fm

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


class Cluster:
    """Brokers plus a stand-in controller: commits records and publishes each delta to the
    brokers that can hear it. An unreachable broker (paused, partitioned) neither fetches, nor is
    fetched from, nor hears the metadata log, like a zombie; it can still reach the controller."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.image = MetadataImage.EMPTY
        self.nodes: dict[int, Node] = {}
        self.alter_answers: list[tuple[int, str]] = []  # (broker, partition-level error name)
        self.changed = asyncio.Condition()
        self.next_epoch = 10
        ccfg = NodeConfig.from_mapping(
            {
                "node.id": 100,
                "process.roles": "controller",
                "controller.quorum.voters": VOTERS,
                "log.dirs": str(tmp / "ctl"),
            }
        )
        self.ctx = ctl.ControllerContext(cluster_id="c", config=ccfg, now_ms=0, rng=random.Random(7))

    def add_node(self, bid: int) -> Node:
        self.next_epoch += 10
        node = Node(self, bid, self.next_epoch)
        self.nodes[bid] = node
        return node

    def by_address(self, address: str) -> Node:
        return next(n for n in self.nodes.values() if n.address == address)

    # -- transport (in memory)
    async def fetch(self, address: str, req: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        node = self.by_address(address)
        caller = self.nodes[req.replica_id]
        if not (node.alive and node.reachable and caller.reachable):
            raise ConnectionError(f"{address} unreachable")
        rm = node.rm
        resp = await rm.fetch(req)
        if not (node.alive and node.reachable and node.rm is rm and caller.reachable):
            raise ConnectionError(f"{address} went away")  # a dead broker's answer never arrives
        return resp

    async def ofle(
        self, address: str, req: broker_pb2.OffsetForLeaderEpochRequest
    ) -> broker_pb2.OffsetForLeaderEpochResponse:
        node = self.by_address(address)
        if not (node.alive and node.reachable):
            raise ConnectionError(f"{address} unreachable")
        return node.rm.offset_for_leader_epoch(req)

    async def alter_partition(self, req: controller_pb2.AlterPartitionRequest) -> controller_pb2.AlterPartitionResponse:
        sender = self.nodes.get(req.broker_id)
        if sender is None or not sender.alive:
            raise ConnectionError("controller unreachable")
        records, resp = ctl.alter_partition(self.image, req, self.ctx)
        if records:
            self.commit(*records)
        self.alter_answers += [(req.broker_id, p.error.name) for t in resp.topics for p in t.partitions]
        asyncio.get_running_loop().create_task(self._notify())
        return resp

    # -- metadata
    def commit(self, *records: object) -> None:
        delta = MetadataDelta(self.image)
        for r in records:
            delta.replay(r)
        image = delta.apply()
        self.image = image
        for node in self.nodes.values():
            if node.alive and node.reachable and node.image is delta.image:
                node.rm.apply_delta(delta, image)
                node.image = image
        asyncio.get_running_loop().create_task(self._notify())

    def catch_up(self, node: Node) -> None:
        """A node that missed deltas gets the whole image (as a snapshot would bring it)."""
        delta = MetadataDelta(MetadataImage.EMPTY)
        for r in self.image.to_records():
            delta.replay(r)
        node.rm.apply_delta(delta, self.image)
        node.image = self.image

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        async def waiter() -> None:
            async with self.changed:
                await self.changed.wait_for(predicate)

        await asyncio.wait_for(waiter(), timeout)

    def fence(self, bid: int) -> None:
        fence = FenceBrokerRecord(broker_id=bid, broker_epoch=self.image.cluster.broker(bid).broker_epoch)
        self.commit(fence, *ctl._remove_from_isrs(ctl.apply_records(self.image, [fence]), self.ctx, {bid}))

    def unfence(self, bid: int) -> None:
        unfence = UnfenceBrokerRecord(broker_id=bid, broker_epoch=self.nodes[bid].epoch)
        self.commit(unfence, *ctl._elect_offline_partitions(ctl.apply_records(self.image, [unfence]), self.ctx, {bid}))

    def part(self, pid: int):
        return self.image.topics.get_by_id(TOPIC_ID).partition(pid)

    async def crash(self, bid: int) -> None:
        node = self.nodes[bid]
        node.alive = False
        await node.fm.shutdown()
        await node.apm.shutdown()
        for log in node.rm.log_manager.all_logs().values():
            log.close_without_flush()

    async def restart(self, bid: int) -> Node:
        """A new process over the same log dirs (recovery from the last recovery point)."""
        old = self.nodes[bid]
        assert not old.alive
        node = self.add_node(bid)
        self.commit(node.register_record(fenced=True))
        self.catch_up(node)
        return node

    async def shutdown(self) -> None:
        for node in self.nodes.values():
            if node.alive:
                await node.apm.shutdown()
                await node.rm.shutdown()


async def produce(
    node: Node, pid: int, data: bytes, acks: int = -1, timeout_ms: int = 5000
) -> broker_pb2.ProduceResponse.PartitionResponse:
    R = broker_pb2.ProduceRequest
    resp = await node.rm.produce(
        R(
            acks=acks,
            timeout_ms=timeout_ms,
            topics=[R.TopicData(name="t", partitions=[R.PartitionData(index=pid, records=data)])],
        )
    )
    return resp.topics[0].partitions[0]


def log_bytes(node: Node, pid: int) -> bytes:
    log = node.rm.get_partition("t", pid).log
    return log.read(log.log_start_offset, 1 << 30, min_one_message=True).records


async def start_cluster(tmp: Path, ids: tuple[int, ...], assignments: list[tuple[int, ...]], min_isr: int) -> Cluster:
    c = Cluster(tmp)
    for bid in ids:
        c.add_node(bid)
    recs: list[object] = [c.nodes[b].register_record(fenced=False) for b in ids]
    recs.append(TopicRecord(name="t", topic_id=TOPIC_ID))
    recs.append(
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC, resource_name="t", name="min.insync.replicas", value=str(min_isr)
        )
    )
    for pid, replicas in enumerate(assignments):
        recs.append(
            PartitionRecord(partition_id=pid, topic_id=TOPIC_ID, replicas=replicas, isr=replicas, leader=replicas[0])
        )
    c.commit(*recs)
    return c


# ------------------------------------------------------------------------------ tests


def test_follower_replicates_and_acks_all_completes(tmp_path: Path) -> None:
    async def main() -> None:
        c = await start_cluster(tmp_path, (1, 2), [(1, 2)], min_isr=2)
        n1, n2 = c.nodes[1], c.nodes[2]
        for i in range(5):
            pr = await produce(n1, 0, batch(3, f"r{i}"))
            assert pr.error.code == 0 and pr.base_offset == 3 * i
        leader, follower = n1.rm.get_partition("t", 0), n2.rm.get_partition("t", 0)
        assert leader.high_watermark == 15
        assert log_bytes(n1, 0) == log_bytes(n2, 0)
        assert n2.fm.fetched_partitions() == {("t", 0): 1}
        assert follower.log.latest_epoch == 0
        await c.shutdown()

    asyncio.run(main())


def test_follower_behind_leader_log_start_truncates_fully(tmp_path: Path) -> None:
    async def main() -> None:
        c = await start_cluster(tmp_path, (1, 2), [(1, 2)], min_isr=1)
        n1, n2 = c.nodes[1], c.nodes[2]
        n2.reachable = False  # 2 is cut off; the leader drops it from the ISR
        records = [r for r in c.part(0).isr if r != 2]
        from kraftlog.metadata_log import PartitionChangeRecord

        c.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=tuple(records)))
        for i in range(4):
            assert (await produce(n1, 0, batch(2, f"x{i}"))).error.code == 0
        D = broker_pb2.DeleteRecordsRequest
        resp = await n1.rm.delete_records(
            D(timeout_ms=1000, topics=[D.Topic(name="t", partitions=[D.Partition(partition_index=0, offset=6)])])
        )
        assert resp.topics[0].partitions[0].error.code == 0
        # 2 comes back at offset 0 < leader log start 6: OFFSET_OUT_OF_RANGE -> start over at 6
        n2.reachable = True
        c.catch_up(n2)
        await c.wait_for(lambda: 2 in c.part(0).isr)
        follower = n2.rm.get_partition("t", 0)
        assert follower.log_start_offset == 6 and follower.log_end_offset == 8
        assert values(log_bytes(n2, 0)) == values(log_bytes(n1, 0))
        await c.shutdown()

    asyncio.run(main())


def test_zombie_leader_truncates_divergent_suffix_and_matches_leader(tmp_path: Path) -> None:
    async def main() -> None:
        c = await start_cluster(tmp_path, (1, 2), [(1, 2)], min_isr=1)
        n1, n2 = c.nodes[1], c.nodes[2]
        for i in range(3):
            assert (await produce(n1, 0, batch(2, f"a{i}"))).error.code == 0
        committed = values(log_bytes(n1, 0))
        assert len(committed) == 6
        # broker 1 is cut off (paused); it still believes it leads in epoch 0
        n1.reachable = False
        zombie_suffix = await produce(n1, 0, batch(4, "zombie"), acks=1)
        assert zombie_suffix.error.code == 0 and zombie_suffix.base_offset == 6
        # the controller fences it and elects 2 (epoch 1); 1 does not hear about it
        c.fence(1)
        assert (c.part(0).leader, c.part(0).leader_epoch, c.part(0).isr) == (2, 1, (2,))
        assert n1.rm.get_partition("t", 0).is_leader
        # the zombie acknowledges no acks=all write: 2 no longer fetches from it, and its
        # AlterPartition is refused with FENCED_LEADER_EPOCH
        zombie_all = await produce(n1, 0, batch(1, "never"), acks=-1, timeout_ms=200)
        assert zombie_all.error.name == "REQUEST_TIMED_OUT"
        zp = n1.rm.get_partition("t", 0)
        assert n1.rm.maybe_shrink_isr(now_ms=int(time.time() * 1000) + 60_000) == 1  # 2 "lags" behind it
        await c.wait_for(lambda: (1, "FENCED_LEADER_EPOCH") in c.alter_answers)
        assert zp.isr == (1, 2) and zp.isr_state.inflight  # nothing applied: awaits metadata
        pending = asyncio.create_task(produce(n1, 0, batch(1, "never2"), acks=-1, timeout_ms=30_000))
        for i in range(2):
            assert (await produce(n2, 0, batch(3, f"b{i}"))).error.code == 0
        # heal: 1 learns it lost leadership (the pending acks=all fails at once), truncates to the
        # end of epoch 0 on the leader (offset 6), refetches, and rejoins the ISR
        n1.reachable = True
        c.unfence(1)  # missed by 1, which is still behind ...
        c.catch_up(n1)  # ... until it catches up with the metadata log
        failed = await asyncio.wait_for(pending, 1)
        assert failed.error.name == "NOT_LEADER_OR_FOLLOWER" and failed.current_leader.leader_id == 2
        await c.wait_for(lambda: set(c.part(0).isr) == {1, 2})
        assert (await produce(n2, 0, batch(1, "last"))).error.code == 0
        assert log_bytes(n1, 0) == log_bytes(n2, 0)  # byte for byte
        got = values(log_bytes(n1, 0))
        assert got[:6] == committed
        assert all(not v.startswith(b"zombie") and not v.startswith(b"never") for _o, v in got)
        assert n1.rm.get_partition("t", 0).log.epoch_cache.entries == [(0, 0), (1, 6)]
        await c.shutdown()

    asyncio.run(main())


def test_three_replicas_failover_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    async def main() -> None:
        c = await start_cluster(tmp_path, (1, 2, 3), [(1, 2, 3), (2, 3, 1)], min_isr=2)
        acked: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}

        def leader(pid: int) -> Node:
            return c.nodes[c.part(pid).leader]

        async def produce_acked(pid: int, tag: str, n: int = 3) -> None:
            data = batch(n, tag)
            pr = await produce(leader(pid), pid, data)
            assert pr.error.code == 0, pr.error
            acked[pid] += [(pr.base_offset + i, f"{tag}-{i}".encode()) for i in range(n)]

        # concurrent acks=all production to both partitions
        await asyncio.gather(*(produce_acked(pid, f"p{pid}-{i}") for i in range(6) for pid in (0, 1)))
        # leader 1 of partition 0 gets cut off, writes an unreplicated acks=1 suffix, then crashes
        c.nodes[1].reachable = False
        lost = await produce(c.nodes[1], 0, batch(5, "lost"), acks=1)
        assert lost.error.code == 0
        await c.crash(1)
        c.nodes[1].reachable = True
        c.fence(1)  # the controller: out of every ISR, partition 0 moves to 2
        assert c.part(0).leader == 2 and set(c.part(0).isr) == {2, 3}
        assert set(c.part(1).isr) == {2, 3}
        # acks=all still works with 2 of 3 in sync (min.insync.replicas=2)
        await asyncio.gather(*(produce_acked(pid, f"q{pid}-{i}") for i in range(4) for pid in (0, 1)))
        # broker 1 restarts (recovers its logs), catches up, truncates the lost suffix, rejoins
        n1 = await c.restart(1)
        c.unfence(1)
        await c.wait_for(lambda: set(c.part(0).isr) == {1, 2, 3} and set(c.part(1).isr) == {1, 2, 3})
        for pid in (0, 1):
            await produce_acked(pid, f"final{pid}")  # all three in the ISR have it once acked
        for pid in (0, 1):
            logs = [log_bytes(c.nodes[b], pid) for b in (1, 2, 3)]
            assert logs[0] == logs[1] == logs[2], f"partition {pid} did not converge"
            got = dict(values(logs[0]))
            for offset, value in acked[pid]:
                assert got.get(offset) == value, (pid, offset)
            assert not any(v.startswith(b"lost") for v in got.values())
            assert len(got) == len(acked[pid])
        # a consumer reads every acknowledged record, in order, from the current leader
        for pid in (0, 1):
            F = broker_pb2.FetchRequest
            resp = await leader(pid).rm.fetch(
                F(
                    replica_id=-1,
                    max_bytes=1 << 20,
                    topics=[
                        F.FetchTopic(
                            topic="t",
                            partitions=[
                                F.FetchPartition(
                                    partition=pid,
                                    fetch_offset=0,
                                    current_leader_epoch=-1,
                                    last_fetched_epoch=-1,
                                    partition_max_bytes=1 << 20,
                                )
                            ],
                        )
                    ],
                )
            )
            assert values(resp.responses[0].partitions[0].records) == sorted(acked[pid])
        assert n1.rm.get_partition("t", 0).log.recovery_point <= n1.rm.get_partition("t", 0).log_end_offset
        await c.shutdown()

    asyncio.run(main())


def test_leader_epoch_without_data_does_not_block_the_follower(tmp_path: Path) -> None:
    """Broker 2 leads epoch 1 but writes nothing before 1 leads again (epoch 2): 2's cache holds a
    dataless epoch 1 that the leader never had. The leader answers diverging (0, 3); 2 has nothing
    to truncate but must drop that epoch entry, or it would be told to diverge forever."""

    async def main() -> None:
        from kraftlog.metadata_log import PartitionChangeRecord

        c = await start_cluster(tmp_path, (1, 2), [(1, 2)], min_isr=2)
        n1, n2 = c.nodes[1], c.nodes[2]
        assert (await produce(n1, 0, batch(3, "a"))).error.code == 0
        c.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2))
        assert n2.rm.get_partition("t", 0).log.epoch_cache.entries == [(0, 0), (1, 3)]
        c.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1))
        start = time.monotonic()
        pr = await produce(n1, 0, batch(2, "b"), timeout_ms=3000)
        assert pr.error.code == 0 and time.monotonic() - start < 1.0
        assert n2.rm.get_partition("t", 0).log.epoch_cache.entries == [(0, 0), (2, 3)]
        assert log_bytes(n1, 0) == log_bytes(n2, 0)
        await c.shutdown()

    asyncio.run(main())
