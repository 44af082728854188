"""Brokers replicating for real: three combined controller+broker processes on 127.0.0.1.

A plain sequential producer (one record per request, acks=all, retried against the current leader)
records what was acknowledged; afterwards everything is read back from the leader and checked:
nothing acknowledged is lost, and acknowledged records appear in the order they were acknowledged.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import grpc
import pytest

from kraftlog import storage
from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc

pytestmark = pytest.mark.integration

OVERRIDES = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 3000,
    "controller.quorum.election.timeout.ms": 1000,
}


class Client:
    """Just enough of a client: metadata from any broker, produce/fetch to the leader."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.channels: dict[str, grpc.Channel] = {}

    def stub(self, node_id: int) -> broker_pb2_grpc.BrokerServiceStub:
        addr = f"127.0.0.1:{self.cluster.nodes[node_id].broker_port}"
        if addr not in self.channels:
            self.channels[addr] = grpc.insecure_channel(addr)
        return broker_pb2_grpc.BrokerServiceStub(self.channels[addr])

    def leader(self, topic: str, partition: int) -> int | None:
        for nid in self.cluster.nodes:
            if not self.cluster.is_running(nid):
                continue
            try:
                md = self.stub(nid).Metadata(broker_pb2.MetadataRequest(topics=[topic]), timeout=2)
            except grpc.RpcError:
                continue
            for t in md.topics:
                for p in t.partitions:
                    if p.partition_index == partition and p.leader_id >= 0 and self.cluster.is_running(p.leader_id):
                        return p.leader_id
        return None

    def produce(self, topic: str, partition: int, value: bytes, *, acks: int = -1, timeout_s: float = 20):
        """Retry until acknowledged; returns (offset, attempts)."""
        deadline = time.monotonic() + timeout_s
        batch = storage.build_batch([(None, value)], timestamp_ms=int(time.time() * 1000))
        attempts = 0
        while time.monotonic() < deadline:
            leader = self.leader(topic, partition)
            if leader is None:
                time.sleep(0.05)
                continue
            attempts += 1
            try:
                r = self.stub(leader).Produce(
                    broker_pb2.ProduceRequest(
                        acks=acks,
                        timeout_ms=3000,
                        topics=[
                            broker_pb2.ProduceRequest.TopicData(
                                name=topic,
                                partitions=[broker_pb2.ProduceRequest.PartitionData(index=partition, records=batch)],
                            )
                        ],
                    ),
                    timeout=5,
                )
            except grpc.RpcError:
                time.sleep(0.05)
                continue
            p = r.topics[0].partitions[0]
            if p.error.code == 0:
                return p.base_offset, attempts
            time.sleep(0.05)
        raise TimeoutError(f"record {value!r} not acknowledged within {timeout_s}s")

    def read_all(self, topic: str, partition: int) -> list[tuple[int, bytes]]:
        leader = wait_until(lambda: self.leader(topic, partition), 20, what="a leader to read from")
        out: list[tuple[int, bytes]] = []
        offset = 0
        while True:
            f = self.stub(leader).Fetch(
                broker_pb2.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=50,
                    min_bytes=0,
                    max_bytes=4 << 20,
                    topics=[
                        broker_pb2.FetchRequest.FetchTopic(
                            topic=topic,
                            partitions=[
                                broker_pb2.FetchRequest.FetchPartition(
                                    partition=partition,
                                    current_leader_epoch=-1,
                                    fetch_offset=offset,
                                    last_fetched_epoch=-1,
                                    log_start_offset=-1,
                                    partition_max_bytes=4 << 20,
                                )
                            ],
                        )
                    ],
                ),
                timeout=10,
            )
            p = f.responses[0].partitions[0]
            assert p.error.code == 0, p.error
            got = [
                (r.offset, r.value)
                for _pos, b in storage.iter_batches(p.records)
                for r in b.records()
                if r.offset >= offset
            ]
            if not got:
                return out
            out += got
            offset = got[-1][0] + 1

    def close(self) -> None:
        for ch in self.channels.values():
            ch.close()


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
            resp = admin.create_topics([NewTopic("events", 1, 3, configs={"min.insync.replicas": "2"})])
            assert resp.topics[0].error.code == 0, resp
        yield c
    finally:
        c.stop()


def _check(acked: list[bytes], read: list[tuple[int, bytes]]) -> None:
    values = [v for _o, v in read]
    missing = [v for v in acked if v not in set(values)]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    first_seen = {}
    for i, v in enumerate(values):
        first_seen.setdefault(v, i)
    positions = [first_seen[v] for v in acked]
    assert positions == sorted(positions), "acknowledged records are out of order"


def test_kill_leader_under_acks_all_loses_nothing(cluster: LocalCluster) -> None:
    client = Client(cluster)
    try:
        acked: list[bytes] = []
        for i in range(100):
            client.produce("events", 0, f"before-{i}".encode())
            acked.append(f"before-{i}".encode())
        leader = client.leader("events", 0)
        assert leader is not None
        cluster.kill(leader)
        killed = time.monotonic()
        first_ack_after = None
        for i in range(100):
            client.produce("events", 0, f"after-{i}".encode())
            acked.append(f"after-{i}".encode())
            if first_ack_after is None:
                first_ack_after = time.monotonic() - killed
        cluster.start_node(leader)
        _check(acked, client.read_all("events", 0))
        assert first_ack_after is not None and first_ack_after < 15
    finally:
        client.close()


def test_zombie_leader_acknowledges_nothing_after_new_election(cluster: LocalCluster) -> None:
    """SIGSTOP the leader longer than the session timeout: the controller fences it and elects
    another; after SIGCONT the zombie's pending and new acks=all writes fail, it truncates its
    divergent suffix and rejoins the ISR."""
    client = Client(cluster)
    try:
        for i in range(20):
            client.produce("events", 0, f"v{i}".encode())
        zombie = client.leader("events", 0)
        assert zombie is not None
        cluster.pause(zombie)
        with cluster.admin(request_timeout_ms=20_000) as admin:
            wait_until(
                lambda: (lambda p: p.leader_id not in (-1, zombie))(
                    admin.describe_topics(["events"]).topics[0].partitions[0]
                ),
                20,
                what="a new leader",
            )
        for i in range(20):
            client.produce("events", 0, f"w{i}".encode())
        cluster.resume(zombie)
        # the resumed zombie must not acknowledge an acks=all write
        stale = client.stub(zombie).Produce(
            broker_pb2.ProduceRequest(
                acks=-1,
                timeout_ms=2000,
                topics=[
                    broker_pb2.ProduceRequest.TopicData(
                        name="events",
                        partitions=[
                            broker_pb2.ProduceRequest.PartitionData(
                                index=0,
                                records=storage.build_batch([(None, b"zombie")], timestamp_ms=int(time.time() * 1000)),
                            )
                        ],
                    )
                ],
            ),
            timeout=10,
        )
        assert stale.topics[0].partitions[0].error.code != 0
        with cluster.admin(request_timeout_ms=20_000) as admin:
            wait_until(
                lambda: zombie in admin.describe_topics(["events"]).topics[0].partitions[0].isr,
                30,
                what="the zombie to rejoin the ISR",
            )
        values = [v for _o, v in client.read_all("events", 0)]
        assert b"zombie" not in values
        _check(
            [f"v{i}".encode() for i in range(20)] + [f"w{i}".encode() for i in range(20)], client.read_all("events", 0)
        )
    finally:
        cluster.signal(zombie, signal.SIGCONT)
        client.close()


def test_too_few_in_sync_replicas_refuses_acks_all(cluster: LocalCluster) -> None:
    """A follower stops fetching: it leaves the ISR after replica.lag.time.max.ms; with
    min.insync.replicas=3 an acks=all produce then gets NOT_ENOUGH_REPLICAS and nothing is
    acknowledged; once the follower is back and caught up it rejoins the ISR."""
    client = Client(cluster)
    with cluster.admin(request_timeout_ms=20_000) as admin:
        resp = admin.create_topics([NewTopic("strict", 1, 3, configs={"min.insync.replicas": "3"})])
        assert resp.topics[0].error.code == 0, resp
    try:
        client.produce("strict", 0, b"first")
        leader = client.leader("strict", 0)
        follower = next(n for n in cluster.nodes if n != leader)
        cluster.pause(follower)
        refused_values: list[bytes] = []
        attempt = [0]
        try:
            stub = client.stub(leader)

            def refused() -> bool:
                attempt[0] += 1
                value = f"attempt-{attempt[0]}".encode()
                r = stub.Produce(
                    broker_pb2.ProduceRequest(
                        acks=-1,
                        timeout_ms=1000,
                        topics=[
                            broker_pb2.ProduceRequest.TopicData(
                                name="strict",
                                partitions=[
                                    broker_pb2.ProduceRequest.PartitionData(
                                        index=0,
                                        records=storage.build_batch(
                                            [(None, value)], timestamp_ms=int(time.time() * 1000)
                                        ),
                                    )
                                ],
                            )
                        ],
                    ),
                    timeout=5,
                )
                err = r.topics[0].partitions[0].error
                assert err.code != 0, "acknowledged with a replica out of sync and min.insync.replicas=3"
                if err.name == "NOT_ENOUGH_REPLICAS":
                    refused_values.append(value)
                return err.name == "NOT_ENOUGH_REPLICAS"

            wait_until(refused, 30, interval_s=0.2, what="NOT_ENOUGH_REPLICAS once the ISR shrank")
            with cluster.admin(request_timeout_ms=20_000) as admin:
                isr = admin.describe_topics(["strict"]).topics[0].partitions[0].isr
            assert follower not in isr
        finally:
            cluster.resume(follower)
        with cluster.admin(request_timeout_ms=20_000) as admin:
            wait_until(
                lambda: follower in admin.describe_topics(["strict"]).topics[0].partitions[0].isr,
                30,
                what="the follower to rejoin the ISR",
            )
        values = [v for _o, v in client.read_all("strict", 0)]
        assert values[0] == b"first"
        # refused before the append: never written. (Attempts that timed out while the ISR still
        # held the paused follower were appended and may commit later, as in Kafka.)
        assert not set(refused_values) & set(values), "a NOT_ENOUGH_REPLICAS write became visible"
    finally:
        client.close()


def test_acks0_stream_follows_a_killed_leader(cluster: LocalCluster) -> None:
    """Issue 12: kill -9 the leader under an acks=0 stream. The producer learns from the broken
    connection that the leader moved (Kafka's client refreshes metadata on a disconnect); of the
    records sent from 5 s after the new leader is elected (seen by polling metadata), at least
    95 % arrive."""
    import threading

    from kraftlog.client import Producer

    client = Client(cluster)
    old = wait_until(lambda: client.leader("events", 0), 20, what="a leader")
    sent: list[tuple[float, bytes]] = []
    stop = threading.Event()
    producer = Producer(
        cluster.bootstrap_servers,
        acks=0,
        linger_ms=5,
        request_timeout_ms=3000,
        delivery_timeout_ms=10_000,
        retry_backoff_ms=50,
    )

    def stream() -> None:
        i = 0
        while not stop.is_set():
            value = f"s-{i}".encode()
            producer.send("events", value, partition=0)
            sent.append((time.monotonic(), value))
            i += 1
            stop.wait(0.005)  # a steady stream of about 200 records/s

    thread = threading.Thread(target=stream, name="acks0-stream")
    try:
        thread.start()
        wait_until(lambda: len(sent) > 100, 20, what="the stream to start")
        cluster.kill(old)
        with cluster.admin(request_timeout_ms=20_000) as admin:
            wait_until(
                lambda: (lambda p: p.leader_id not in (-1, old))(
                    admin.describe_topics(["events"]).topics[0].partitions[0]
                ),
                30,
                interval_s=0.05,
                what="a new leader",
            )
        elected = time.monotonic()
        wait_until(lambda: time.monotonic() >= elected + 10, 15, interval_s=0.1, what="the measured window")
    finally:
        stop.set()
        thread.join(10)
        producer.flush(15)
        producer.close(10)
    measured = [v for t, v in sent if t >= elected + 5]
    assert len(measured) > 200, f"the stream was too slow to measure ({len(measured)} records)"
    last = measured[-1]
    try:
        # acks=0 records become readable once the ISR has them (HW): poll until the last one is there
        stored = wait_until(
            lambda: (lambda vs: vs if last in vs else None)({v for _o, v in client.read_all("events", 0)}),
            30,
            interval_s=0.5,
            what="the last record",
        )
    except TimeoutError:
        stored = {v for _o, v in client.read_all("events", 0)}
    arrived = sum(1 for v in measured if v in stored)
    assert arrived >= 0.95 * len(measured), f"only {arrived} of {len(measured)} acks=0 records arrived"
    client.close()
