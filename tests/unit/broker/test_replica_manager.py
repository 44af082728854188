"""ReplicaManager: metadata deltas, Produce, Fetch (long polls), ListOffsets, OffsetForLeaderEpoch,
DeleteRecords, periodic duties. Real asyncio loop, no sockets; followers are simulated with replica
Fetch requests sent straight to the leader's replica manager."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kraftlog import storage
from kraftlog.broker.replica._alter_partition import AlterPartitionResult
from kraftlog.broker.replica._replica_manager import ReplicaManager
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import (
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    MetadataDelta,
    MetadataImage,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kraftlog.proto import broker_pb2

TOPIC_ID = "00000000-0000-4000-8000-000000000001"


class Clock:
    """A manual clock, starting at the wall clock (storage checks batch timestamps against it)."""

    def __init__(self, now: int | None = None) -> None:
        self.now = int(time.time() * 1000) if now is None else now

    def __call__(self) -> int:
        return self.now


class FakeSender:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int, int, tuple[int, ...], asyncio.Future[AlterPartitionResult]]] = []

    def submit(
        self, topic_id: str, partition: int, leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
    ) -> asyncio.Future[AlterPartitionResult]:
        fut: asyncio.Future[AlterPartitionResult] = asyncio.get_running_loop().create_future()
        self.calls.append((topic_id, partition, leader_epoch, partition_epoch, tuple(new_isr), fut))
        return fut


class Meta:
    """A stand-in for the metadata log: commits records and publishes deltas."""

    def __init__(self) -> None:
        self.image = MetadataImage.EMPTY
        self.rms: list[ReplicaManager] = []

    def commit(self, *records: object) -> list[object]:
        delta = MetadataDelta(self.image)
        for r in records:
            delta.replay(r)
        image = delta.apply()
        self.image = image
        return [rm.apply_delta(delta, image) for rm in self.rms]

    def partition(self, topic: str, pid: int):
        return self.image.topics.get_by_name(topic).partition(pid)


def broker(bid: int, epoch: int | None = None) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=bid,
        incarnation_id=f"inc-{bid}",
        broker_epoch=epoch or 10 + bid,
        endpoints=(BrokerEndpoint("PLAINTEXT", f"host{bid}", 9090 + bid),),
        fenced=False,
    )


def node_config(node_id: int, log_dir: Path, **extra: object) -> NodeConfig:
    settings: dict[str, object] = {
        "node.id": node_id,
        "process.roles": "broker",
        "controller.quorum.voters": "100@127.0.0.1:9999",
        "log.dirs": str(log_dir),
        "replica.lag.time.max.ms": 1000,
        "replica.fetch.wait.max.ms": 100,
    }
    settings.update(extra)
    return NodeConfig.from_mapping(settings)


def batch(n: int, tag: str = "v", ts: int | None = None) -> bytes:
    now = int(time.time() * 1000) if ts is None else ts
    return storage.build_batch([(None, f"{tag}{i}".encode()) for i in range(n)], timestamp_ms=now)


def new_rm(
    tmp_path: Path, node_id: int = 1, clock: Clock | None = None, sender: FakeSender | None = None, **extra: object
) -> ReplicaManager:
    cfg = node_config(node_id, tmp_path / f"node{node_id}", **extra)
    rm = ReplicaManager.create(node_id, cfg, sender or FakeSender(), clock_ms=clock)
    rm.startup()
    return rm


def setup(
    tmp_path: Path,
    *,
    replicas: tuple[int, ...] = (1,),
    isr: tuple[int, ...] | None = None,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    clock: Clock | None = None,
    sender: FakeSender | None = None,
) -> tuple[ReplicaManager, Meta]:
    rm = new_rm(tmp_path, 1, clock, sender)
    meta = Meta()
    meta.rms.append(rm)
    recs: list[object] = [broker(b) for b in (1, 2, 3)]
    recs.append(TopicRecord(name="t", topic_id=TOPIC_ID))
    for k, v in (configs or {}).items():
        recs.append(ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name="t", name=k, value=v))
    for pid in range(partitions):
        recs.append(
            PartitionRecord(
                partition_id=pid,
                topic_id=TOPIC_ID,
                replicas=replicas,
                isr=isr or replicas,
                leader=replicas[0],
                leader_epoch=0,
                partition_epoch=0,
            )
        )
    meta.commit(*recs)
    return rm, meta


def produce_req(
    parts: dict[int, bytes], acks: int = -1, timeout_ms: int = 2000, topic: str = "t"
) -> broker_pb2.ProduceRequest:
    R = broker_pb2.ProduceRequest
    return R(
        acks=acks,
        timeout_ms=timeout_ms,
        topics=[R.TopicData(name=topic, partitions=[R.PartitionData(index=i, records=r) for i, r in parts.items()])],
    )


def fetch_req(
    parts: dict[int, int],
    *,
    replica_id: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    current_leader_epoch: int = -1,
    last_fetched_epoch: int = -1,
    log_start_offset: int = -1,
    topic: str = "t",
    replica_epoch: int = -1,
) -> broker_pb2.FetchRequest:
    R = broker_pb2.FetchRequest
    return R(
        replica_id=replica_id,
        replica_epoch=replica_epoch,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=[
            R.FetchTopic(
                topic=topic,
                partitions=[
                    R.FetchPartition(
                        partition=p,
                        fetch_offset=o,
                        current_leader_epoch=current_leader_epoch,
                        last_fetched_epoch=last_fetched_epoch,
                        log_start_offset=log_start_offset,
                        partition_max_bytes=partition_max_bytes,
                    )
                    for p, o in parts.items()
                ],
            )
        ],
    )


def presp(resp: broker_pb2.ProduceResponse, pid: int = 0) -> broker_pb2.ProduceResponse.PartitionResponse:
    return next(p for t in resp.topics for p in t.partitions if p.index == pid)


def fresp(resp: broker_pb2.FetchResponse, pid: int = 0) -> broker_pb2.FetchResponse.PartitionData:
    return next(p for t in resp.responses for p in t.partitions if p.partition_index == pid)


def count_records(data: bytes) -> int:
    return sum(b.records_count for _pos, b in storage.iter_batches(data))


def run(coro_fn) -> None:
    asyncio.run(coro_fn())


async def settle() -> None:
    """Let ready callbacks and tasks run (a yield, not a timed wait)."""
    for _ in range(5):
        await asyncio.sleep(0)


# ------------------------------------------------------------------------------ metadata


def test_apply_delta_creates_leader_and_follower_partitions(tmp_path: Path) -> None:
    async def main() -> None:
        rm = new_rm(tmp_path, 2)
        meta = Meta()
        meta.rms.append(rm)
        (changes,) = meta.commit(
            broker(1),
            broker(2),
            broker(3),
            TopicRecord(name="t", topic_id=TOPIC_ID),
            PartitionRecord(
                partition_id=0,
                topic_id=TOPIC_ID,
                replicas=(1, 2),
                isr=(1, 2),
                leader=1,
                leader_epoch=4,
                partition_epoch=5,
            ),
            PartitionRecord(
                partition_id=1,
                topic_id=TOPIC_ID,
                replicas=(2, 3),
                isr=(2, 3),
                leader=2,
                leader_epoch=1,
                partition_epoch=1,
            ),
            PartitionRecord(partition_id=2, topic_id=TOPIC_ID, replicas=(1, 3), isr=(1, 3), leader=1),
        )
        assert changes.leaders == [("t", 1)]
        assert [(f.tp, f.leader_id, f.leader_epoch, f.address) for f in changes.followers] == [
            (("t", 0), 1, 4, "host1:9091")
        ]
        assert set(rm.partitions()) == {("t", 0), ("t", 1)}
        p0 = rm.get_partition("t", 0)
        assert not p0.is_leader and p0.leader_epoch == 4
        assert p0.log.read_partition_metadata() == TOPIC_ID
        # leadership moves here: the fetcher must drop the partition
        (changes,) = meta.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2, isr=(2,)))
        assert changes.leaders == [("t", 0)] and not changes.followers
        assert rm.get_partition("t", 0).is_leader
        # the same partition epoch twice changes nothing; a leader endpoint change re-targets
        (changes,) = meta.commit(PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=3))
        assert [(f.tp, f.leader_id, f.leader_epoch) for f in changes.followers] == [(("t", 1), 3, 2)]
        (changes,) = meta.commit(
            RegisterBrokerRecord(
                broker_id=3,
                incarnation_id="inc-3b",
                broker_epoch=99,
                endpoints=(BrokerEndpoint("PLAINTEXT", "elsewhere", 7000),),
                fenced=False,
            )
        )
        assert [(f.tp, f.address) for f in changes.followers] == [(("t", 1), "elsewhere:7000")]
        await rm.shutdown()

    run(main)


def test_topic_deletion_removes_files_and_other_incarnation_is_replaced(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = setup(tmp_path)
        await rm.produce(produce_req({0: batch(3)}, acks=1))
        pdir = rm.get_partition("t", 0).log.dir
        assert pdir.exists()
        (changes,) = meta.commit(RemoveTopicRecord(topic_id=TOPIC_ID))
        assert changes.deleted == [("t", 0)]
        assert not pdir.exists() and rm.get_partition("t", 0) is None
        # a stale directory of an older incarnation of "t" (e.g. left by a crash) is replaced
        old = rm.log_manager.get_or_create_log("t", 0, None, "11111111-0000-4000-8000-000000000000")
        old.append_as_leader(batch(2), 0)
        new_id = "22222222-0000-4000-8000-000000000000"
        meta.commit(
            TopicRecord(name="t", topic_id=new_id),
            PartitionRecord(partition_id=0, topic_id=new_id, replicas=(1,), isr=(1,), leader=1),
        )
        p = rm.get_partition("t", 0)
        assert p.topic_id == new_id and p.log.read_partition_metadata() == new_id and p.log_end_offset == 0
        await rm.shutdown()

    run(main)


def test_restart_deletes_logs_of_topics_deleted_while_down(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = setup(tmp_path)
        await rm.produce(produce_req({0: batch(1)}, acks=1))
        pdir = rm.get_partition("t", 0).log.dir
        await rm.shutdown()
        meta.rms.clear()
        meta.commit(RemoveTopicRecord(topic_id=TOPIC_ID))  # while broker 1 is down
        rm2 = new_rm(tmp_path, 1)
        assert pdir.exists()
        delta = MetadataDelta(MetadataImage.EMPTY)
        for r in meta.image.to_records():
            delta.replay(r)
        changes = rm2.apply_delta(delta, delta.apply())
        assert changes.deleted == [("t", 0)] and not pdir.exists()
        await rm2.shutdown()

    run(main)


# ------------------------------------------------------------------------------ produce


def test_produce_acks_0_1_all_single_replica(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path)
        r0 = await rm.produce(produce_req({0: batch(2)}, acks=0))
        r1 = await rm.produce(produce_req({0: batch(3)}, acks=1))
        ra = await rm.produce(produce_req({0: batch(1)}, acks=-1))
        assert [presp(r).base_offset for r in (r0, r1, ra)] == [0, 2, 5]
        assert all(presp(r).error.code == 0 and presp(r).error.name == "NONE" for r in (r0, r1, ra))
        assert rm.get_partition("t", 0).high_watermark == 6  # the leader alone is the ISR
        await rm.shutdown()

    run(main)


def test_acks_all_completes_when_hw_passes_the_batch_and_not_before(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path, replicas=(1, 2))
        task = asyncio.create_task(rm.produce(produce_req({0: batch(3)}, acks=-1)))
        await settle()
        assert not task.done()
        assert rm.produce_purgatory.watched(("t", 0)) == 1
        # the follower fetches the batch: its LEO on the leader is still 0
        r = await rm.fetch(fetch_req({0: 0}, replica_id=2))
        assert count_records(fresp(r).records) == 3
        await settle()
        assert not task.done()
        # the next fetch says it has everything: HW = 3, the produce is acknowledged
        await rm.fetch(fetch_req({0: 3}, replica_id=2))
        resp = await asyncio.wait_for(task, 1)
        assert presp(resp).error.code == 0 and presp(resp).base_offset == 0
        assert rm.get_partition("t", 0).high_watermark == 3
        assert rm.produce_purgatory.watched() == 0
        await rm.shutdown()

    run(main)


def test_leader_that_loses_leadership_fails_pending_acks_all(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = setup(tmp_path, replicas=(1, 2))
        task = asyncio.create_task(rm.produce(produce_req({0: batch(3)}, acks=-1, timeout_ms=30_000)))
        poll = asyncio.create_task(rm.fetch(fetch_req({0: 0}, max_wait_ms=30_000)))
        await settle()
        assert not task.done() and not poll.done()
        meta.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=2, isr=(2,)))
        pd = fresp(await asyncio.wait_for(poll, 1))  # a parked consumer poll answers at once too
        assert pd.error.name == "NOT_LEADER_OR_FOLLOWER" and pd.current_leader.leader_id == 2
        resp = await asyncio.wait_for(task, 1)  # at once, not after the 30 s timeout
        pr = presp(resp)
        assert pr.error.name == "NOT_LEADER_OR_FOLLOWER"
        assert (pr.current_leader.leader_id, pr.current_leader.leader_epoch) == (2, 1)
        assert [(e.node_id, e.host, e.port) for e in resp.node_endpoints] == [(2, "host2", 9092)]
        # and it answers new produces with the leader hint
        resp = await rm.produce(produce_req({0: batch(1)}, acks=1))
        assert presp(resp).error.name == "NOT_LEADER_OR_FOLLOWER"
        assert presp(resp).current_leader.leader_id == 2
        await rm.shutdown()

    run(main)


def test_produce_errors_are_per_partition(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = setup(tmp_path, partitions=3, configs={"max.message.bytes": "300"})
        meta.commit(PartitionChangeRecord(partition_id=2, topic_id=TOPIC_ID, leader=2, replicas=(1, 2), isr=(2,)))
        corrupt = bytearray(batch(2))
        corrupt[-1] ^= 0xFF
        big = batch(1, tag="x" * 400)
        resp = await rm.produce(produce_req({0: batch(2), 1: bytes(corrupt), 2: batch(1), 7: batch(1)}, acks=1))
        assert presp(resp, 0).error.code == 0 and presp(resp, 0).base_offset == 0
        assert presp(resp, 1).error.name == "CORRUPT_MESSAGE" and presp(resp, 1).base_offset == -1
        assert presp(resp, 2).error.name == "NOT_LEADER_OR_FOLLOWER"
        assert presp(resp, 2).current_leader.leader_id == 2
        assert presp(resp, 7).error.name == "UNKNOWN_TOPIC_OR_PARTITION"
        resp = await rm.produce(produce_req({0: big}, acks=1))
        assert presp(resp).error.name == "MESSAGE_TOO_LARGE"
        resp = await rm.produce(produce_req({0: batch(1)}, acks=1, topic="nope"))
        assert presp(resp).error.name == "UNKNOWN_TOPIC_OR_PARTITION"
        resp = await rm.produce(produce_req({0: batch(1)}, acks=2))
        assert resp.error.name == "INVALID_REQUIRED_ACKS" and presp(resp).error.name == "INVALID_REQUIRED_ACKS"
        # nothing of the failed partitions reached a log; partition 0 kept its record
        assert rm.get_partition("t", 1).log_end_offset == 0
        assert rm.get_partition("t", 0).log_end_offset == 2
        await rm.shutdown()

    run(main)


def test_not_enough_replicas_and_request_timeout(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = setup(tmp_path, replicas=(1, 2), isr=(1,), partitions=2, configs={"min.insync.replicas": "2"})
        resp = await rm.produce(produce_req({0: batch(1), 1: batch(1)}, acks=-1))
        assert presp(resp, 0).error.name == "NOT_ENOUGH_REPLICAS"
        assert rm.get_partition("t", 0).log_end_offset == 0  # checked before the append
        resp = await rm.produce(produce_req({0: batch(1)}, acks=1))
        assert presp(resp).error.code == 0
        meta.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(1, 2)))
        start = time.monotonic()
        resp = await rm.produce(produce_req({0: batch(1)}, acks=-1, timeout_ms=50))
        assert presp(resp).error.name == "REQUEST_TIMED_OUT"
        assert 0.04 <= time.monotonic() - start < 1.0
        assert rm.produce_purgatory.watched() == 0
        await rm.shutdown()

    run(main)


# ------------------------------------------------------------------------------ fetch


def test_fetch_long_poll_completes_on_new_data(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path)
        start = time.monotonic()
        task = asyncio.create_task(rm.fetch(fetch_req({0: 0}, max_wait_ms=5000, min_bytes=1)))
        await settle()
        assert not task.done() and rm.fetch_purgatory.watched(("t", 0)) == 1
        await rm.produce(produce_req({0: batch(4)}, acks=1))
        resp = await asyncio.wait_for(task, 1)
        assert time.monotonic() - start < 1.0
        pd = fresp(resp)
        assert pd.error.code == 0 and count_records(pd.records) == 4
        assert (pd.high_watermark, pd.last_stable_offset, pd.log_start_offset) == (4, 4, 0)
        assert rm.fetch_purgatory.watched() == 0
        await rm.shutdown()

    run(main)


def test_fetch_long_poll_times_out_and_min_bytes(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path)
        start = time.monotonic()
        resp = await rm.fetch(fetch_req({0: 0}, max_wait_ms=60))
        assert 0.05 <= time.monotonic() - start < 1.0
        assert fresp(resp).error.code == 0 and fresp(resp).records == b""
        # min_bytes larger than one small batch: the first batch does not complete the poll
        first = batch(1)
        task = asyncio.create_task(rm.fetch(fetch_req({0: 0}, max_wait_ms=5000, min_bytes=2 * len(first) + 1)))
        await settle()
        await rm.produce(produce_req({0: first}, acks=1))
        await settle()
        assert not task.done()
        await rm.produce(produce_req({0: batch(1)}, acks=1))
        await rm.produce(produce_req({0: batch(1)}, acks=1))
        resp = await asyncio.wait_for(task, 1)
        assert count_records(fresp(resp).records) == 3
        await rm.shutdown()

    run(main)


def test_consumers_read_to_hw_replicas_to_leo(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path, replicas=(1, 2))
        await rm.produce(produce_req({0: batch(3)}, acks=1))
        consumer = fresp(await rm.fetch(fetch_req({0: 0})))
        assert consumer.records == b"" and consumer.high_watermark == 0
        replica = fresp(await rm.fetch(fetch_req({0: 0}, replica_id=2)))
        assert count_records(replica.records) == 3
        await rm.fetch(fetch_req({0: 3}, replica_id=2))
        consumer = fresp(await rm.fetch(fetch_req({0: 0})))
        assert count_records(consumer.records) == 3 and consumer.high_watermark == 3
        # a replica long poll completes on new data, a consumer one only when the HW moves
        rtask = asyncio.create_task(rm.fetch(fetch_req({0: 3}, replica_id=2, max_wait_ms=5000)))
        ctask = asyncio.create_task(rm.fetch(fetch_req({0: 3}, max_wait_ms=5000)))
        await settle()
        await rm.produce(produce_req({0: batch(2)}, acks=1))
        assert count_records(fresp(await asyncio.wait_for(rtask, 1)).records) == 2
        await settle()
        assert not ctask.done()
        await rm.fetch(fetch_req({0: 5}, replica_id=2))
        assert count_records(fresp(await asyncio.wait_for(ctask, 1)).records) == 2
        await rm.shutdown()

    run(main)


def test_fetch_errors(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = setup(tmp_path, partitions=2)
        meta.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1, isr=(1,)))  # epoch 1
        await rm.produce(produce_req({0: batch(3)}, acks=1))
        pd = fresp(await rm.fetch(fetch_req({0: 0}, current_leader_epoch=0)))
        assert pd.error.name == "FENCED_LEADER_EPOCH" and pd.current_leader.leader_epoch == 1
        assert fresp(await rm.fetch(fetch_req({0: 0}, current_leader_epoch=2))).error.name == "UNKNOWN_LEADER_EPOCH"
        assert fresp(await rm.fetch(fetch_req({0: 0}, current_leader_epoch=1))).error.code == 0
        pd = fresp(await rm.fetch(fetch_req({0: 10})))
        assert pd.error.name == "OFFSET_OUT_OF_RANGE" and pd.log_start_offset == 0 and pd.high_watermark == 3
        pd = fresp(await rm.fetch(fetch_req({0: 0}, topic="nope")))
        assert pd.error.name == "UNKNOWN_TOPIC_OR_PARTITION"
        # an error answers at once, even in a long poll, and does not fail the other partition
        start = time.monotonic()
        resp = await rm.fetch(fetch_req({0: 10, 1: 0}, max_wait_ms=5000))
        assert time.monotonic() - start < 1.0
        assert fresp(resp, 0).error.name == "OFFSET_OUT_OF_RANGE" and fresp(resp, 1).error.code == 0
        await rm.shutdown()

    run(main)


def test_fetch_max_bytes_and_partition_max_bytes(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path, partitions=2)
        b = batch(5)
        for _ in range(3):
            await rm.produce(produce_req({0: b, 1: b}, acks=1))
        # per partition: two batches fit
        resp = await rm.fetch(fetch_req({0: 0, 1: 0}, partition_max_bytes=2 * len(b) + 10))
        assert count_records(fresp(resp, 0).records) == 10 and count_records(fresp(resp, 1).records) == 10
        # whole response: the first partition gets at least one batch, the rest what is left
        resp = await rm.fetch(fetch_req({0: 0, 1: 0}, max_bytes=len(b) + 10))
        assert count_records(fresp(resp, 0).records) == 5 and fresp(resp, 1).records == b""
        resp = await rm.fetch(fetch_req({0: 0, 1: 0}, max_bytes=10))
        assert count_records(fresp(resp, 0).records) == 5  # min one message
        await rm.shutdown()

    run(main)


def test_replica_divergence_answer(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = setup(tmp_path, replicas=(1, 2))
        await rm.produce(produce_req({0: batch(3)}, acks=1))  # epoch 0: 0..2
        meta.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1))  # epoch 1
        await rm.produce(produce_req({0: batch(2)}, acks=1))  # epoch 1: 3..4
        pd = fresp(await rm.fetch(fetch_req({0: 5}, replica_id=2, last_fetched_epoch=0, current_leader_epoch=1)))
        assert pd.error.code == 0 and pd.HasField("diverging_epoch")
        assert (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == (0, 3) and pd.records == b""
        pd = fresp(await rm.fetch(fetch_req({0: 3}, replica_id=2, last_fetched_epoch=0, current_leader_epoch=1)))
        assert not pd.HasField("diverging_epoch") and count_records(pd.records) == 2
        await rm.shutdown()

    run(main)


# ------------------------------------------------------------------------------ offsets and deletes


def test_list_offsets_and_offset_for_leader_epoch(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = setup(tmp_path, replicas=(1, 2))
        base = int(time.time() * 1000) - 10_000
        for _i, ts in enumerate([base, base + 500, base + 100]):
            await rm.produce(produce_req({0: batch(2, ts=ts)}, acks=1))
        await rm.fetch(fetch_req({0: 4}, replica_id=2))  # HW = 4
        L = broker_pb2.ListOffsetsRequest

        def lo(ts: int, replica_id: int = -1, epoch: int = -1) -> broker_pb2.ListOffsetsResponse.Partition:
            req = L(
                replica_id=replica_id,
                topics=[
                    L.Topic(
                        name="t", partitions=[L.Partition(partition_index=0, timestamp=ts, current_leader_epoch=epoch)]
                    )
                ],
            )
            return rm.list_offsets(req).topics[0].partitions[0]

        assert lo(-2).offset == 0
        assert lo(-1).offset == 4  # consumers: the HW
        assert lo(-1, replica_id=2).offset == 6  # replicas: the LEO
        assert (lo(-3).offset, lo(-3).timestamp) == (2, base + 500)
        assert lo(base + 50).offset == 2
        assert lo(base + 200).offset == 2
        assert (lo(base + 600).offset, lo(base + 600).timestamp) == (-1, -1)
        assert lo(base + 300, replica_id=2).offset == 2
        assert lo(-1, epoch=5).error.name == "UNKNOWN_LEADER_EPOCH"
        meta.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=1))
        await rm.produce(produce_req({0: batch(1)}, acks=1))
        assert lo(-1, epoch=0).error.name == "FENCED_LEADER_EPOCH"
        # new epoch started at 6 while the HW is 4: "latest" is not available to consumers yet
        assert lo(-1).error.name == "OFFSET_NOT_AVAILABLE"
        OFL = broker_pb2.OffsetForLeaderEpochRequest
        req = OFL(
            replica_id=2,
            topics=[
                OFL.Topic(
                    topic="t",
                    partitions=[
                        OFL.Partition(partition=0, current_leader_epoch=1, leader_epoch=0),
                        OFL.Partition(partition=0, current_leader_epoch=1, leader_epoch=1),
                        OFL.Partition(partition=0, current_leader_epoch=0, leader_epoch=1),
                    ],
                )
            ],
        )
        parts = rm.offset_for_leader_epoch(req).topics[0].partitions
        assert [(p.leader_epoch, p.end_offset) for p in parts[:2]] == [(0, 6), (1, 7)]
        assert parts[2].error.name == "FENCED_LEADER_EPOCH"
        await rm.shutdown()

    run(main)


def test_delete_records_waits_for_the_low_watermark(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path, replicas=(1, 2))
        await rm.produce(produce_req({0: batch(5)}, acks=1))
        await rm.fetch(fetch_req({0: 5}, replica_id=2, log_start_offset=0))
        D = broker_pb2.DeleteRecordsRequest

        def req(offset: int, timeout_ms: int = 5000) -> broker_pb2.DeleteRecordsRequest:
            return D(
                timeout_ms=timeout_ms,
                topics=[D.Topic(name="t", partitions=[D.Partition(partition_index=0, offset=offset)])],
            )

        assert (await rm.delete_records(req(9))).topics[0].partitions[0].error.name == "OFFSET_OUT_OF_RANGE"
        task = asyncio.create_task(rm.delete_records(req(3)))
        await settle()
        assert not task.done() and rm.get_partition("t", 0).log_start_offset == 3
        # the follower reports its new log start in its next fetch
        await rm.fetch(fetch_req({0: 5}, replica_id=2, log_start_offset=3))
        pr = (await asyncio.wait_for(task, 1)).topics[0].partitions[0]
        assert pr.error.code == 0 and pr.low_watermark == 3
        pr = (await rm.delete_records(req(4, timeout_ms=30))).topics[0].partitions[0]
        assert pr.error.name == "REQUEST_TIMED_OUT" and pr.low_watermark == 3
        await rm.shutdown()

    run(main)


def test_delete_records_is_refused_on_a_compact_only_topic(tmp_path: Path) -> None:
    """As Kafka: the log start moves only where cleanup.policy includes delete (POLICY_VIOLATION)."""

    async def main() -> None:
        rm, _meta = setup(tmp_path, configs={"cleanup.policy": "compact"})
        await rm.produce(produce_req({0: batch(5)}, acks=1))
        D = broker_pb2.DeleteRecordsRequest
        req = D(timeout_ms=1000, topics=[D.Topic(name="t", partitions=[D.Partition(partition_index=0, offset=3)])])
        assert (await rm.delete_records(req)).topics[0].partitions[0].error.name == "POLICY_VIOLATION"
        assert rm.get_partition("t", 0).log_start_offset == 0
        await rm.shutdown()

    run(main)


# ------------------------------------------------------------------------------ periodic duties


def test_periodic_isr_shrink_and_hw_checkpoint(tmp_path: Path) -> None:
    async def main() -> None:
        clock, sender = Clock(), FakeSender()
        rm, meta = setup(tmp_path, replicas=(1, 2), clock=clock, sender=sender)
        await rm.produce(produce_req({0: batch(2)}, acks=1))
        await rm.fetch(fetch_req({0: 2}, replica_id=2))
        assert rm.run_periodic() == {}  # the first call starts the intervals
        await rm.produce(produce_req({0: batch(2)}, acks=1))
        clock.now += 600
        assert rm.run_periodic() == {"isr_shrink": 0}
        clock.now += 600
        ran = rm.run_periodic()
        assert ran["isr_shrink"] == 1
        assert sender.calls[-1][4] == (1,) and sender.calls[-1][:4] == (TOPIC_ID, 0, 0, 0)
        clock.now += 5000
        assert "hw_checkpoint" in rm.run_periodic()
        ckpt = (tmp_path / "node1" / "replication-offset-checkpoint").read_text().split()
        assert ckpt[-3:] == ["t", "0", "2"]
        # the controller commits the shrink through the metadata log: HW = LEO
        meta.commit(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(1,)))
        assert rm.get_partition("t", 0).high_watermark == 4
        await rm.shutdown()

    run(main)


def test_isr_expansion_through_fetch_uses_image_eligibility(tmp_path: Path) -> None:
    async def main() -> None:
        sender = FakeSender()
        rm, meta = setup(tmp_path, replicas=(1, 2), isr=(1,), sender=sender)
        await rm.produce(produce_req({0: batch(2)}, acks=1))
        await rm.fetch(fetch_req({0: 2}, replica_id=2, replica_epoch=5))  # a stale broker epoch
        assert not sender.calls
        await rm.fetch(fetch_req({0: 2}, replica_id=2, replica_epoch=12))
        assert sender.calls[-1][4] == (1, 2)
        await rm.shutdown()

    run(main)


def test_fetch_with_a_stale_broker_epoch_counts_for_nothing(tmp_path: Path) -> None:
    """KIP-903: broker 2 restarted and registered again (epoch 12); a fetch of its previous
    incarnation (epoch 5, still in flight) may overstate what its log holds now. It must neither
    move the HW (and so acknowledge acks=all) nor keep 2 in the ISR; it is answered
    NOT_LEADER_OR_FOLLOWER, as Kafka does."""

    async def main() -> None:
        clock, sender = Clock(), FakeSender()
        rm, _meta = setup(tmp_path, replicas=(1, 2), clock=clock, sender=sender)
        await rm.fetch(fetch_req({0: 0}, replica_id=2, replica_epoch=12))
        produce = asyncio.create_task(rm.produce(produce_req({0: batch(2)}, acks=-1, timeout_ms=30_000)))
        await settle()
        stale = await rm.fetch(fetch_req({0: 2}, replica_id=2, replica_epoch=5))
        assert fresp(stale).error.name == "NOT_LEADER_OR_FOLLOWER"
        part = rm.get_partition("t", 0)
        assert part.high_watermark == 0 and not produce.done()
        # the stale incarnation keeps "catching up": it must still leave the ISR after the lag time
        for _ in range(3):
            clock.now += 600
            await rm.fetch(fetch_req({0: 2}, replica_id=2, replica_epoch=5))
        assert rm.maybe_shrink_isr() == 1 and sender.calls[-1][4] == (1,)
        # the current incarnation's fetch counts (and -1, "not checked", is accepted as in Kafka)
        await rm.fetch(fetch_req({0: 2}, replica_id=2, replica_epoch=12))
        assert part.high_watermark == 2
        resp = await asyncio.wait_for(produce, 1)
        assert presp(resp).error.name == "NONE"
        ok = await rm.fetch(fetch_req({0: 2}, replica_id=2, replica_epoch=-1))
        assert fresp(ok).error.name == "NONE"
        await rm.shutdown()

    run(main)


@pytest.mark.parametrize("acks", [1, -1])
def test_shutdown_answers_parked_requests(tmp_path: Path, acks: int) -> None:
    async def main() -> None:
        rm, _meta = setup(tmp_path, replicas=(1, 2))
        produce = asyncio.create_task(rm.produce(produce_req({0: batch(1)}, acks=acks, timeout_ms=30_000)))
        fetch = asyncio.create_task(rm.fetch(fetch_req({0: 1}, max_wait_ms=30_000)))
        await settle()
        await rm.shutdown()
        resp = await asyncio.wait_for(produce, 1)
        assert presp(resp).error.name == ("NONE" if acks == 1 else "NOT_LEADER_OR_FOLLOWER")
        await asyncio.wait_for(fetch, 1)

    run(main)
