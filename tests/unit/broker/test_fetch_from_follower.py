"""KIP-392 (fetch from the closest replica): the rack-aware selection as Kafka's
``RackAwareReplicaSelector`` and ``ReplicaManager.findPreferredReadReplica`` make it, the leader's
``preferred_read_replica`` answer, and a follower serving consumers up to its high watermark.
No sockets; an injected clock; storage logs in tmp_path."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kraftlog import storage
from kraftlog.broker.replica._replica_selector import (
    RACK_AWARE_REPLICA_SELECTOR,
    RackAwareReplicaSelector,
    ReplicaView,
    find_preferred_read_replica,
    replica_selector,
)
from kraftlog.broker.replica._replica_types import DelayedFetch
from kraftlog.common import errors as kerr
from kraftlog.common.config import ConfigError, NodeConfig
from kraftlog.metadata_log import BrokerEndpoint, BrokerRegistrationChangeRecord, PartitionRecord, RegisterBrokerRecord
from kraftlog.metadata_log import TopicRecord as _TopicRecord
from tests.unit.broker.test_partition import Clock as PClock
from tests.unit.broker.test_partition import FakeSender as PSender
from tests.unit.broker.test_partition import batch as pbatch
from tests.unit.broker.test_partition import new_partition, reg
from tests.unit.broker.test_replica_manager import (
    TOPIC_ID,
    Clock,
    Meta,
    batch,
    count_records,
    fetch_req,
    fresp,
    new_rm,
    produce_req,
)

# ------------------------------------------------------------------------------ the selector


def view(broker_id: int, rack: str | None, leo: int = 10, since_ms: int = 0) -> ReplicaView:
    return ReplicaView(broker_id, rack, leo, since_ms)


def test_rack_aware_selector_picks_as_kafka_does() -> None:
    sel = RackAwareReplicaSelector()
    leader = view(1, "r1")
    f2, f3 = view(2, "r2", 10, 500), view(3, "r2", 10, 100)
    replicas = [leader, f2, f3, view(4, "r3", 12)]
    assert sel.select("", replicas, leader) is leader  # no client rack
    assert sel.select("r9", replicas, leader) is leader  # nobody in the client's rack
    assert sel.select("r1", replicas + [view(5, "r1", 99)], leader) is leader  # the leader is in the rack
    assert sel.select("r3", replicas, leader).broker_id == 4
    # same LEO: the more recently caught up; then the larger id
    assert sel.select("r2", replicas, leader).broker_id == 3
    assert sel.select("r2", [leader, view(2, "r2", 11, 900), f3], leader).broker_id == 2
    assert sel.select("r2", [leader, view(2, "r2"), view(3, "r2")], leader).broker_id == 3


def test_preferred_read_replica_never_names_the_leader_or_a_broker_without_endpoint() -> None:
    racks = {1: "r1", 2: "r2", 3: "r3"}
    sel = RackAwareReplicaSelector()

    def pick(client_rack: str, reachable: set[int], candidates: list[tuple[int, int, int]]) -> int | None:
        return find_preferred_read_replica(
            sel,
            client_rack=client_rack,
            leader_id=1,
            leader_log_end_offset=10,
            candidates=candidates,
            rack_of=racks.get,
            has_endpoint=reachable.__contains__,
        )

    everyone = [(2, 10, 0), (3, 10, 0)]
    assert pick("r2", {1, 2, 3}, everyone) == 2
    assert pick("r1", {1, 2, 3}, everyone) is None  # the leader: read there
    assert pick("r2", {1, 3}, everyone) is None  # 2 is fenced / has no client endpoint
    assert pick("r2", {1, 2, 3}, [(3, 10, 0)]) is None  # 2 is no candidate (out of the ISR, or behind)


def test_replica_selector_class_config() -> None:
    base = {"node.id": 1, "process.roles": "broker", "controller.quorum.voters": "100@127.0.0.1:9999"}
    assert NodeConfig({**base})["replica.selector.class"] is None
    cfg = NodeConfig({**base, "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR, "broker.rack": "r1"})
    assert isinstance(replica_selector(cfg["replica.selector.class"]), RackAwareReplicaSelector)
    assert replica_selector(None) is None
    with pytest.raises(ConfigError) as info:
        NodeConfig({**base, "replica.selector.class": "com.example.ClosestSelector"})
    assert info.value.key == "replica.selector.class"


# ------------------------------------------------------------------------------ the leader's answer


def racked(bid: int, rack: str) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=bid,
        incarnation_id=f"inc-{bid}",
        broker_epoch=10 + bid,
        endpoints=(BrokerEndpoint("PLAINTEXT", f"host{bid}", 9090 + bid),),
        rack=rack,
        fenced=False,
    )


def consumer_fetch(offset: int, rack: str, *, v11: bool = True, max_wait_ms: int = 0, epoch: int = -1):
    req = fetch_req({0: offset}, max_wait_ms=max_wait_ms, current_leader_epoch=epoch)
    req.rack_id = rack
    req.fetch_from_follower = v11
    return req


def run(coro_fn) -> None:
    asyncio.run(coro_fn())


async def leader_with_isr(tmp_path: Path, clock: Clock, **extra: object):
    """Broker 1 leads t-0 on brokers 1, 2, 3 (racks r1, r2, r3); 5 records, every follower caught up."""
    rm = new_rm(tmp_path, 1, clock, **extra)
    meta = Meta()
    meta.rms.append(rm)
    meta.commit(
        racked(1, "r1"),
        racked(2, "r2"),
        racked(3, "r3"),
        _TopicRecord(name="t", topic_id=TOPIC_ID),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=0),
    )
    await rm.produce(produce_req({0: batch(5)}, acks=1))
    for follower in (2, 3):
        await rm.fetch(fetch_req({0: 5}, replica_id=follower))
    return rm, meta


def test_leader_sends_a_racked_consumer_to_its_rack_follower(tmp_path: Path) -> None:
    async def main() -> None:
        clock = Clock()
        rm, meta = await leader_with_isr(tmp_path, clock, **{"replica.selector.class": RACK_AWARE_REPLICA_SELECTOR})
        pd = fresp(await rm.fetch(consumer_fetch(0, "r2")))
        assert pd.error.code == 0 and pd.preferred_read_replica == 2 and pd.records == b""
        assert pd.high_watermark == 5
        # a long poll with a preferred replica is answered at once
        start = time.monotonic()
        pd = fresp(await rm.fetch(consumer_fetch(5, "r3", max_wait_ms=5000)))
        assert pd.preferred_read_replica == 3 and time.monotonic() - start < 1.0
        # the leader's rack, an unknown rack, no rack, or Fetch < v11: read from the leader
        for rack, v11 in (("r1", True), ("r9", True), ("", True), ("r2", False)):
            pd = fresp(await rm.fetch(consumer_fetch(0, rack, v11=v11)))
            assert pd.preferred_read_replica == -1 and count_records(pd.records) == 5, (rack, v11)
        # the epoch is checked before the follower is named
        assert fresp(await rm.fetch(consumer_fetch(0, "r2", epoch=7))).error.name == "UNKNOWN_LEADER_EPOCH"
        # a follower that lacks the fetch offset is not named; neither is a fenced one
        await rm.produce(produce_req({0: batch(2)}, acks=1))
        await rm.fetch(fetch_req({0: 7}, replica_id=3))
        assert fresp(await rm.fetch(consumer_fetch(6, "r2"))).preferred_read_replica == -1
        assert fresp(await rm.fetch(consumer_fetch(6, "r3"))).preferred_read_replica == 3
        meta.commit(BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=13, fenced=1))
        assert fresp(await rm.fetch(consumer_fetch(6, "r3"))).preferred_read_replica == -1
        await rm.shutdown()

    run(main)


def test_without_a_selector_the_leader_serves_every_consumer(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = await leader_with_isr(tmp_path, Clock())
        pd = fresp(await rm.fetch(consumer_fetch(0, "r2")))
        assert pd.preferred_read_replica == -1 and count_records(pd.records) == 5
        await rm.shutdown()

    run(main)


# ------------------------------------------------------------------------------ the follower's reads


def test_follower_serves_consumers_up_to_its_high_watermark(tmp_path: Path) -> None:
    async def main() -> None:
        leader = new_partition(tmp_path, PClock(), PSender(), local=1)
        leader.make_leader(reg((1, 2), (1, 2), 1, 3, 1))
        leader.append_records_to_leader(pbatch(3), 1)
        leader.append_records_to_leader(pbatch(2), 1)
        follower = new_partition(tmp_path, PClock(), PSender(), local=2)
        follower.make_follower(reg((1, 2), (1, 2), 1, 3, 1))
        follower.append_records_to_follower(
            leader.fetch_records(fetch_offset=0, max_bytes=1 << 20, replica_id=2).records
        )
        follower.update_follower_high_watermark(3, 0)
        assert follower.log_end_offset == 5 and follower.high_watermark == 3

        def read(offset: int, *, only_leader: bool = False, epoch: int = 3, isolation: int = 0):
            return follower.fetch_records(
                fetch_offset=offset,
                max_bytes=1 << 20,
                current_leader_epoch=epoch,
                fetch_only_leader=only_leader,
                isolation_level=isolation,
            )

        first = read(0)
        assert first.high_watermark == 3 and first.log_end_offset == 5
        # whole batches below the HW only: the first batch (3 records), never the unacknowledged 2
        assert sum(b.records_count for _p, b in storage.iter_batches(first.records)) == 3
        assert read(0, isolation=1).records == first.records
        assert read(3).records == b"" and read(5).records == b""  # above the HW, not above the LEO
        with pytest.raises(kerr.OffsetOutOfRangeError):
            read(6)
        with pytest.raises(kerr.FencedLeaderEpochError):
            read(0, epoch=2)
        with pytest.raises(kerr.UnknownLeaderEpochError):
            read(0, epoch=4)
        with pytest.raises(kerr.NotLeaderOrFollowerError):
            read(0, only_leader=True)  # Fetch < v11
        follower.update_follower_high_watermark(5, 0)
        assert read(3).records != b""

    run(main)


class _Listener:
    def __init__(self) -> None:
        self.advanced: list[tuple[str, int]] = []

    def on_high_watermark_advanced(self, tp: tuple[str, int]) -> None:
        self.advanced.append(tp)

    def on_records_appended(self, tp: tuple[str, int]) -> None:
        pass

    def on_replica_state_changed(self, tp: tuple[str, int]) -> None:
        pass

    def on_isr_committed(self, tp: tuple[str, int], old_isr: tuple[int, ...], new_isr: tuple[int, ...]) -> None:
        pass


def test_a_consumer_long_poll_on_a_follower_completes_as_its_high_watermark_moves(tmp_path: Path) -> None:
    async def main() -> None:
        leader = new_partition(tmp_path, PClock(), PSender(), local=1)
        leader.make_leader(reg((1, 2), (1, 2), 1, 3, 1))
        leader.append_records_to_leader(pbatch(3), 1)
        follower = new_partition(tmp_path, PClock(), PSender(), local=2)
        listener = _Listener()
        follower._listener = listener
        follower.make_follower(reg((1, 2), (1, 2), 1, 3, 1))
        follower.append_records_to_follower(
            leader.fetch_records(fetch_offset=0, max_bytes=1 << 20, replica_id=2).records
        )
        parts = {("t", 0): follower}
        registry = type("Registry", (), {"get": lambda _self, tp: parts.get(tp)})()
        req = fetch_req({0: 0}, max_wait_ms=5000)
        req.fetch_from_follower = True
        op = DelayedFetch(5000, req, registry, dict(parts))  # type: ignore[arg-type]
        assert not op.try_complete()  # HW 0: nothing a consumer may read yet, and no error
        follower.update_follower_high_watermark(3, 0)
        assert listener.advanced == [("t", 0)]  # the purgatory is told
        assert op.try_complete()
        follower.update_follower_high_watermark(3, 0)
        assert listener.advanced == [("t", 0)]  # unchanged: no event
        # a fetch that only a leader may serve (Fetch < v11) is answered at once, with its error
        req.fetch_from_follower = False
        assert DelayedFetch(5000, req, registry, dict(parts)).try_complete()  # type: ignore[arg-type]

    run(main)
