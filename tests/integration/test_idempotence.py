"""The idempotent producer on real brokers (issue 15): producer ids from the controller's blocks,
a retried batch written once (also by a new leader after the old one was killed -9, and after a
restart, from the producer snapshot), out-of-order and fenced epochs refused with Kafka's errors,
and `kraftlog`'s client idempotent by default."""

from __future__ import annotations

import time
from collections import Counter

import grpc
import pytest

from kraftlog import storage
from kraftlog.client import Admin, Consumer, NewTopic, Producer
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.integration

OVERRIDES = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 3000,
    "controller.quorum.election.timeout.ms": 1000,
}
TOPIC = "ledger"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("idem") / "c", controllers=3, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=120)
    try:
        c.wait_unfenced_brokers(3)
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=3)])
        yield c
    finally:
        c.stop()


def stub(cluster: LocalCluster, node_id: int) -> broker_pb2_grpc.BrokerServiceStub:
    return broker_pb2_grpc.BrokerServiceStub(grpc.insecure_channel(f"127.0.0.1:{cluster.nodes[node_id].broker_port}"))


def leader(cluster: LocalCluster, topic: str = TOPIC) -> int | None:
    for nid in cluster.nodes:
        if not cluster.is_running(nid):
            continue
        try:
            md = stub(cluster, nid).Metadata(broker_pb2.MetadataRequest(topics=[topic]), timeout=2)
        except grpc.RpcError:
            continue
        p = md.topics[0].partitions[0] if md.topics and md.topics[0].partitions else None
        if p is not None and p.leader_id >= 0 and cluster.is_running(p.leader_id):
            return int(p.leader_id)
    return None


def batch(pid: int, epoch: int, seq: int, n: int = 2, tag: str = "r") -> bytes:
    now = int(time.time() * 1000)
    return storage.build_batch(
        [(None, f"{tag}{seq + i}".encode()) for i in range(n)],
        timestamp_ms=now,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def produce(cluster: LocalCluster, node: int, records: bytes) -> broker_pb2.ProduceResponse.PartitionResponse:
    R = broker_pb2.ProduceRequest
    r = stub(cluster, node).Produce(
        R(
            acks=-1,
            timeout_ms=10_000,
            topics=[R.TopicData(name=TOPIC, partitions=[R.PartitionData(index=0, records=records)])],
        ),
        timeout=15,
    )
    return r.topics[0].partitions[0]


def produce_on_leader(cluster: LocalCluster, records: bytes) -> broker_pb2.ProduceResponse.PartitionResponse:
    """To whichever broker leads now: after restarts leadership may still move (NOT_LEADER)."""

    def once() -> broker_pb2.ProduceResponse.PartitionResponse | None:
        node = leader(cluster)
        if node is None:
            return None
        answer = produce(cluster, node, records)
        return None if answer.error.name in ("NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE") else answer

    result: broker_pb2.ProduceResponse.PartitionResponse = wait_until(once, 30, what="a produce to the leader")
    return result


def init_producer_id(cluster: LocalCluster, node: int) -> tuple[int, int]:
    """As a client does it: COORDINATOR_NOT_AVAILABLE (no id block yet) is retried."""

    def once() -> tuple[int, int] | None:
        r = stub(cluster, node).InitProducerId(broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1))
        if r.error.name == "COORDINATOR_NOT_AVAILABLE":
            return None
        assert r.error.code == 0, r.error
        return r.producer_id, r.producer_epoch

    result: tuple[int, int] = wait_until(once, 30, what="a producer id")
    return result


def values(cluster: LocalCluster) -> list[bytes]:
    with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([(TOPIC, 0)])
        end = c.end_offsets([(TOPIC, 0)])[(TOPIC, 0)]
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while c.position((TOPIC, 0)) < end and time.monotonic() < deadline:
            out.extend(r.value for r in c.poll(200))
        return out


def test_producer_ids_are_unique_across_brokers(cluster: LocalCluster) -> None:
    ids = [init_producer_id(cluster, n)[0] for n in cluster.nodes for _ in range(3)]
    assert len(set(ids)) == len(ids) and all(i >= 0 for i in ids)


def test_retries_are_written_once_even_after_the_leader_is_killed(cluster: LocalCluster) -> None:
    node = wait_until(lambda: leader(cluster), 30, what="a leader")
    pid, epoch = init_producer_id(cluster, node)
    first = produce(cluster, node, batch(pid, epoch, 0))
    assert first.error.code == 0
    again = produce(cluster, node, batch(pid, epoch, 0))  # the answer was "lost": the producer retries
    assert again.error.code == 0 and again.base_offset == first.base_offset
    gap = produce(cluster, node, batch(pid, epoch, 7))
    assert gap.error.name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    second = produce(cluster, node, batch(pid, epoch, 2))
    assert second.error.code == 0 and second.base_offset == first.base_offset + 2
    other, _e = init_producer_id(cluster, node)
    assert produce(cluster, node, batch(other, 1, 0, tag="x")).error.code == 0  # a bumped epoch starts at 0
    fenced = produce(cluster, node, batch(other, 0, 2, tag="x"))  # the older epoch is fenced
    assert fenced.error.name == "INVALID_PRODUCER_EPOCH"
    restart = produce(cluster, node, batch(other, 2, 3, tag="x"))  # a new epoch must start at 0
    assert restart.error.name == "OUT_OF_ORDER_SEQUENCE_NUMBER"

    cluster.kill(node)  # kill -9: a follower in the ISR takes over with the producers it replicated
    try:
        new = wait_until(lambda: (n := leader(cluster)) != node and n, 30, what="a new leader")
        retry = wait_until(
            lambda: (r := produce(cluster, new, batch(pid, epoch, 2))).error.code == 0 and r, 30, what="the retry"
        )
        assert retry.base_offset == second.base_offset  # recognised by the new leader
        third = produce(cluster, new, batch(pid, epoch, 4))
        assert third.error.code == 0 and third.base_offset > second.base_offset
    finally:
        cluster.start_node(node)
        cluster.wait_unfenced_brokers(3)
    counts = Counter(v for v in values(cluster) if v.startswith(b"r"))
    assert counts == Counter({f"r{i}".encode(): 1 for i in range(6)})


def test_the_producer_state_survives_a_restart_of_every_broker(cluster: LocalCluster) -> None:
    node = wait_until(lambda: leader(cluster), 30, what="a leader")
    pid, epoch = init_producer_id(cluster, node)
    written = produce(cluster, node, batch(pid, epoch, 0, tag="s"))
    assert written.error.code == 0
    for n in list(cluster.nodes):
        cluster.restart_node(n, clean=n % 2 == 0)  # clean stops write the snapshot; the others replay
    cluster.wait_unfenced_brokers(3)

    def retried() -> tuple[int, broker_pb2.ProduceResponse.PartitionResponse] | None:
        # the leader is asked each time: after every broker restarted, leadership may still move
        # (a broker that asked first can name an older leader than the one elected last)
        n = leader(cluster)
        if n is None:
            return None
        r = produce(cluster, n, batch(pid, epoch, 0, tag="s"))
        return (n, r) if r.error.code == 0 else None

    new, retry = wait_until(retried, 30, what="retry")
    assert retry.base_offset == written.base_offset
    described = stub(cluster, new).DescribeProducers(
        broker_pb2.DescribeProducersRequest(
            topics=[broker_pb2.DescribeProducersRequest.Topic(name=TOPIC, partition_indexes=[0])]
        )
    )
    producers = {p.producer_id: p for p in described.topics[0].partitions[0].active_producers}
    assert producers[pid].last_sequence == 1 and producers[pid].producer_epoch == epoch


def test_the_client_is_idempotent_by_default_and_writes_in_order(cluster: LocalCluster) -> None:
    with Admin(cluster.bootstrap_servers) as admin:
        admin.create_topics([NewTopic("ordered", num_partitions=2, replication_factor=3)])
    with Producer(cluster.bootstrap_servers, linger_ms=1, batch_size=200) as p:
        futures = [p.send("ordered", f"o{i}".encode(), partition=i % 2) for i in range(400)]
        p.flush(60)
        metas = [f.result() for f in futures]
    for part in (0, 1):
        offsets = [m.offset for i, m in enumerate(metas) if i % 2 == part]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    with Consumer(cluster.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([("ordered", 0), ("ordered", 1)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 400 and time.monotonic() < deadline:
            got.extend(r.value for r in c.poll(200))
    assert sorted(got) == sorted(f"o{i}".encode() for i in range(400))
    leader_node = wait_until(lambda: leader(cluster, "ordered"), 30, what="a leader")
    described = stub(cluster, leader_node).DescribeProducers(
        broker_pb2.DescribeProducersRequest(
            topics=[broker_pb2.DescribeProducersRequest.Topic(name="ordered", partition_indexes=[0])]
        )
    )
    assert described.topics[0].partitions[0].active_producers  # the client wrote with a producer id


def test_describe_producers_command(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from kraftlog.cli.__main__ import main

    node = wait_until(lambda: leader(cluster), 30, what="a leader")
    pid, epoch = init_producer_id(cluster, node)
    assert produce_on_leader(cluster, batch(pid, epoch, 0, n=3, tag="d")).error.code == 0
    capsys.readouterr()
    args = ["transactions", "describe-producers", "--topic", TOPIC, "--partition", "0"]
    boot = ["--bootstrap-server", cluster.bootstrap_servers]
    assert main([*args, *boot, "--output", "json"]) == 0
    producers = {p["producer_id"]: p for p in json.loads(capsys.readouterr().out)["producers"]}
    assert producers[pid]["last_sequence"] == 2 and producers[pid]["current_transaction_start_offset"] == -1
    assert main([*args, *boot]) == 0
    assert "ProducerId" in capsys.readouterr().out
    assert main(["transactions", "describe-producers", "--topic", "nope", "--partition", "0", *boot]) == 1
