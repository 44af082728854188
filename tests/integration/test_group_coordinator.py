"""The group coordinator on real brokers (issue 14): three combined nodes on 127.0.0.1 serve
GroupService; a group joins, syncs and commits; its coordinator is killed -9 and the new leader of
the ``__consumer_offsets`` partition loads the group and its offsets and carries on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc, group_pb2, group_pb2_grpc

pytestmark = pytest.mark.integration

OVERRIDES = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 3000,
    "controller.quorum.election.timeout.ms": 1000,
    "offsets.topic.num.partitions": 3,
    "offsets.topic.replication.factor": 3,
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.session.timeout.ms": 6000,
    "group.consumer.heartbeat.interval.ms": 300,
}
GROUP = "orders-readers"


class Groups:
    """GroupService stubs by node, and the coordinator lookup a client does."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.channels: dict[int, grpc.Channel] = {}

    def stub(self, node_id: int) -> group_pb2_grpc.GroupServiceStub:
        if node_id not in self.channels:
            self.channels[node_id] = grpc.insecure_channel(f"127.0.0.1:{self.cluster.nodes[node_id].broker_port}")
        return group_pb2_grpc.GroupServiceStub(self.channels[node_id])

    def coordinator(self) -> int | None:
        for nid in self.cluster.nodes:
            if not self.cluster.is_running(nid):
                continue
            try:
                r = self.stub(nid).FindCoordinator(group_pb2.FindCoordinatorRequest(keys=[GROUP]), timeout=5)
            except grpc.RpcError:
                continue
            c = r.coordinators[0]
            if c.error.code == 0 and self.cluster.is_running(c.node_id):
                return int(c.node_id)
        return None

    def call(self, method: str, request: Any, *, ok: set[str] | None = None, timeout_s: float = 40) -> Any:
        """Call the coordinator, finding it again on NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS."""
        retriable = {"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE"}
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            node = self.coordinator()
            if node is None:
                time.sleep(0.1)
                continue
            try:
                last = getattr(self.stub(node), method)(request, timeout=20)
            except grpc.RpcError as err:
                last = err
                time.sleep(0.1)
                continue
            name = _error_name(last)
            if name in retriable:
                time.sleep(0.1)
                continue
            if ok is None or name in ok:
                return last
            return last
        raise AssertionError(f"{method} did not succeed in {timeout_s}s: {last}")


def _error_name(response: Any) -> str:
    if hasattr(response, "error") and response.HasField("error"):
        return str(response.error.name)
    for t in getattr(response, "topics", []):
        for p in t.partitions:
            if p.error.code:
                return str(p.error.name)
    return "NONE"


@pytest.fixture
def cluster(tmp_path: Path):
    c = LocalCluster(tmp_path / "c", controllers=3, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=60)
    try:
        with c.admin(request_timeout_ms=20_000) as admin:
            wait_until(
                lambda: sum(not b.fenced for b in admin.describe_cluster().brokers) == 3,
                30,
                what="three unfenced brokers",
            )
        yield c
    finally:
        c.stop()


def _create_orders(cluster: LocalCluster, partitions: int = 3) -> None:
    """The topic the tests commit offsets for, known to every broker's metadata: a commit to a
    topic or partition that does not exist is refused (issue 25, as Kafka answers)."""
    from kraftlog.client import NewTopic

    with cluster.admin(request_timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic("orders", num_partitions=partitions, replication_factor=3)])

    def known_everywhere() -> bool:
        for node in cluster.nodes.values():
            with grpc.insecure_channel(f"127.0.0.1:{node.broker_port}") as channel:
                try:
                    md = broker_pb2_grpc.BrokerServiceStub(channel).Metadata(
                        broker_pb2.MetadataRequest(topics=["orders"]), timeout=2
                    )
                except grpc.RpcError:
                    return False
            if not md.topics or len(md.topics[0].partitions) != partitions or md.topics[0].error.code:
                return False
        return True

    wait_until(known_everywhere, 30, what="orders in every broker's metadata")


def _join(groups: Groups, member_id: str = "") -> Any:
    req = group_pb2.JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[group_pb2.JoinGroupRequest.Protocol(name="range", metadata=b"subscription")],
        client_id="it",
    )
    return groups.call("JoinGroup", req)


def test_group_joins_commits_and_survives_its_coordinator(cluster: LocalCluster) -> None:
    _create_orders(cluster)
    groups = Groups(cluster)
    wait_until(lambda: groups.coordinator() is not None, 40, what="a coordinator for the group")
    first = _join(groups)
    assert first.error.name == "MEMBER_ID_REQUIRED" and first.member_id.startswith("it-")
    joined = _join(groups, first.member_id)
    assert joined.error.code == 0 and joined.generation_id == 1 and joined.leader == first.member_id
    assert [m.member_id for m in joined.members] == [first.member_id]
    synced = groups.call(
        "SyncGroup",
        group_pb2.SyncGroupRequest(
            group_id=GROUP,
            generation_id=1,
            member_id=first.member_id,
            assignments=[group_pb2.SyncGroupRequest.Assignment(member_id=first.member_id, assignment=b"p0,p1")],
        ),
    )
    assert synced.error.code == 0 and synced.assignment == b"p0,p1"
    committed = groups.call(
        "OffsetCommit",
        group_pb2.OffsetCommitRequest(
            group_id=GROUP,
            generation_id=1,
            member_id=first.member_id,
            topics=[
                group_pb2.OffsetCommitRequest.Topic(
                    name="orders",
                    partitions=[group_pb2.OffsetCommitRequest.Partition(partition_index=0, committed_offset=42)],
                )
            ],
        ),
    )
    assert _error_name(committed) == "NONE"

    old = groups.coordinator()
    assert old is not None
    cluster.kill(old)
    # the new leader of the group's partition loads the group and its offsets
    wait_until(lambda: groups.coordinator() not in (None, old), 40, what="a new coordinator")
    fetched = groups.call(
        "OffsetFetch",
        group_pb2.OffsetFetchRequest(
            group_id=GROUP, topics=[group_pb2.OffsetFetchRequest.Topic(name="orders", partition_indexes=[0, 1])]
        ),
    )
    offsets = {p.partition_index: p.committed_offset for t in fetched.topics for p in t.partitions}
    assert offsets == {0: 42, 1: -1}
    described = groups.call("DescribeGroups", group_pb2.DescribeGroupsRequest(groups=[GROUP]))
    group = described.groups[0]
    assert group.group_state == "Stable" and [m.member_id for m in group.members] == [first.member_id]
    assert group.members[0].member_assignment == b"p0,p1"
    beat = groups.call(
        "Heartbeat", group_pb2.HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=first.member_id)
    )
    assert beat.error.code == 0  # the member carries on with the new coordinator
    listed = groups.call("ListGroups", group_pb2.ListGroupsRequest())
    assert [(g.group_id, g.group_state) for g in listed.groups] == [(GROUP, "Stable")]


def test_offsets_survive_a_restart_of_every_broker(cluster: LocalCluster) -> None:
    _create_orders(cluster)
    groups = Groups(cluster)
    wait_until(lambda: groups.coordinator() is not None, 40, what="a coordinator for the group")
    commit = group_pb2.OffsetCommitRequest(
        group_id=GROUP,
        generation_id=-1,  # a consumer without group management: the group stays empty
        topics=[
            group_pb2.OffsetCommitRequest.Topic(
                name="orders",
                partitions=[
                    group_pb2.OffsetCommitRequest.Partition(partition_index=p, committed_offset=100 + p)
                    for p in range(3)
                ],
            )
        ],
    )
    assert _error_name(groups.call("OffsetCommit", commit)) == "NONE"
    for nid in sorted(cluster.nodes):  # every node down (kill -9), then all up again
        cluster.kill(nid)
    for nid in sorted(cluster.nodes):
        cluster.start_node(nid)
    fetched = groups.call(
        "OffsetFetch",
        group_pb2.OffsetFetchRequest(
            group_id=GROUP, topics=[group_pb2.OffsetFetchRequest.Topic(name="orders", partition_indexes=[0, 1, 2])]
        ),
        timeout_s=90,
    )
    assert {p.partition_index: p.committed_offset for t in fetched.topics for p in t.partitions} == {
        0: 100,
        1: 101,
        2: 102,
    }


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_rebalance_completes_across_a_coordinator_failover(cluster: LocalCluster, protocol: str) -> None:
    """Members of a real client group; the coordinator dies while a second member is joining:
    both end up sharing the topic's partitions (one generation of the classic protocol; with
    KIP-848's, the new coordinator loads the epochs and carries the reconciliation on)."""
    import threading

    from kraftlog.client import Consumer, NewTopic

    with cluster.admin(request_timeout_ms=20_000) as admin:
        admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=3)])
    groups = Groups(cluster)
    wait_until(lambda: groups.coordinator() is not None, 40, what="a coordinator for the group")
    stop = threading.Event()
    consumers: list[Consumer] = []
    errors: list[BaseException] = []

    def member(name: str) -> None:
        timing: dict[str, object] = (
            {"session_timeout_ms": 6000, "heartbeat_interval_ms": 300}
            if protocol == "classic"
            else {"group_protocol": "consumer"}
        )
        c = Consumer(
            cluster.bootstrap_servers,
            group_id=GROUP,
            max_poll_interval_ms=20_000,
            client_id=name,
            **timing,  # type: ignore[arg-type]
        )
        consumers.append(c)
        c.subscribe(["orders"])
        try:
            while not stop.is_set():
                c.poll(100)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)
        finally:
            c.close()

    first = threading.Thread(target=member, args=("a",), daemon=True)
    first.start()
    wait_until(lambda: consumers and len(consumers[0].assignment()) == 6, 60, what="the first member owning all")
    coordinator = groups.coordinator()
    second = threading.Thread(target=member, args=("b",), daemon=True)
    second.start()
    wait_until(lambda: len(consumers) == 2, 10, what="the second member started")
    assert coordinator is not None
    cluster.kill(coordinator)  # while the second member's join is in flight
    try:
        wait_until(
            lambda: (
                len(consumers[0].assignment() | consumers[1].assignment()) == 6
                and len(consumers[0].assignment()) == 3
                and len(consumers[1].assignment()) == 3
            ),
            90,
            what="both members sharing the partitions under the new coordinator",
        )
    finally:
        stop.set()
        first.join(30)
        second.join(30)
    assert not errors, errors
