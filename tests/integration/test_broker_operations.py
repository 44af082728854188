"""Operations on a real cluster (3 combined nodes + 1 broker-only node): topic deletion removes the
files everywhere, partition expansion is served at once, a reassignment to a new broker copies the
data and the new replica joins the ISR, and a rolling restart with SIGTERM fails no acks=all write."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kraftlog.client import Consumer, NewTopic, Producer
from kraftlog.deploy._cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

OVERRIDES = {
    "broker.session.timeout.ms": 4000,
    "broker.heartbeat.interval.ms": 500,
    "replica.lag.time.max.ms": 4000,
    "controller.quorum.election.timeout.ms": 1000,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("ops") / "c", controllers=3, brokers=1, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=60)
    try:
        with c.admin(request_timeout_ms=20_000) as admin:
            wait_until(
                lambda: sum(not b.fenced for b in admin.describe_cluster().brokers) == 4,
                40,
                what="four unfenced brokers",
            )
        yield c
    finally:
        c.stop()


def _partition_dirs(cluster: LocalCluster, topic: str) -> list[Path]:
    return [p for n in cluster.nodes.values() for p in (Path(n.dir) / "data").glob(f"{topic}-*")]


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 30) -> list:
    consumer = Consumer(bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([(topic, p) for p in range(partitions)])
        got: list = []
        deadline = time.monotonic() + timeout_s
        while len(got) < expected and time.monotonic() < deadline:
            got += consumer.poll(500)
        return got
    finally:
        consumer.close()


def test_delete_topic_removes_files_on_every_broker(cluster: LocalCluster) -> None:
    with cluster.admin(request_timeout_ms=20_000) as admin:
        assert admin.create_topics([NewTopic("doomed", 4, 3)]).topics[0].error.code == 0
        with Producer(cluster.bootstrap_servers, acks="all") as producer:
            for i in range(40):
                producer.send("doomed", f"v{i}".encode(), partition=i % 4)
            producer.flush(30)
        wait_until(lambda: len(_partition_dirs(cluster, "doomed")) == 12, 20, what="12 replica dirs")
        assert admin.delete_topics(["doomed"]).topics[0].error.code == 0
    wait_until(lambda: not _partition_dirs(cluster, "doomed"), 30, what="replica dirs removed everywhere")


def test_partition_expansion_is_served_at_once(cluster: LocalCluster) -> None:
    with cluster.admin(request_timeout_ms=20_000) as admin:
        assert admin.create_topics([NewTopic("growing", 2, 3)]).topics[0].error.code == 0
        assert admin.create_partitions({"growing": 5}).results[0].error.code == 0
    with Producer(cluster.bootstrap_servers, acks="all") as producer:
        futures = [producer.send("growing", b"x", partition=p) for p in range(5)]
        producer.flush(30)
        assert sorted(f.result(30).partition for f in futures) == [0, 1, 2, 3, 4]


def test_reassignment_to_a_new_broker_copies_data(cluster: LocalCluster) -> None:
    new_broker = 101
    with cluster.admin(request_timeout_ms=20_000) as admin:
        assert admin.create_topics([NewTopic("moving", assignments={0: [1, 2, 3]})]).topics[0].error.code == 0
        with Producer(cluster.bootstrap_servers, acks="all") as producer:
            for i in range(500):
                producer.send("moving", f"r{i}".encode() * 20, partition=0)
            producer.flush(30)
        resp = admin.alter_partition_reassignments({("moving", 0): [new_broker, 2, 3]})
        assert all(r.error.code == 0 for r in resp.results), resp
        wait_until(
            lambda: list(admin.describe_topics(["moving"]).topics[0].partitions[0].replicas) == [new_broker, 2, 3],
            60,
            what="the reassignment to complete",
        )
        part = admin.describe_topics(["moving"]).topics[0].partitions[0]
        assert new_broker in part.isr
    # the new replica holds the data: its directory has the records
    new_dir = Path(cluster.nodes[new_broker].dir) / "data" / "moving-0"
    assert new_dir.is_dir() and sum(f.stat().st_size for f in new_dir.glob("*.log")) > 500 * 40
    wait_until(
        lambda: not (Path(cluster.nodes[1].dir) / "data" / "moving-0").exists(),
        30,
        what="the removed replica's files to go",
    )


def test_rolling_restart_fails_no_acks_all_write(cluster: LocalCluster) -> None:
    with cluster.admin(request_timeout_ms=20_000) as admin:
        created = admin.create_topics([NewTopic("rolling", 3, 3, configs={"min.insync.replicas": "2"})])
        assert created.topics[0].error.code == 0
    stop = threading.Event()
    acked: list[bytes] = []
    failed: list[BaseException] = []

    def produce() -> None:
        with Producer(
            cluster.bootstrap_servers,
            acks="all",
            retries=2**31 - 1,
            delivery_timeout_ms=60_000,
            max_in_flight_requests_per_connection=1,
        ) as producer:
            i = 0
            while not stop.is_set():
                value = f"m{i}".encode()
                try:
                    producer.send("rolling", value, key=str(i % 7).encode()).result(60)
                    acked.append(value)
                except BaseException as err:  # any failed acks=all write fails the test
                    failed.append(err)
                i += 1

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    wait_until(lambda: len(acked) >= 50, 30, what="production to start")
    for nid in sorted(cluster.nodes):
        cluster.stop_node(nid)  # SIGTERM: controlled shutdown
        cluster.start_node(nid)
        with cluster.admin(request_timeout_ms=20_000) as admin:
            wait_until(
                lambda: all(not b.fenced for b in admin.describe_cluster().brokers),
                60,
                what=f"broker {nid} back and unfenced",
            )
            wait_until(
                lambda: all(len(p.isr) == 3 for p in admin.describe_topics(["rolling"]).topics[0].partitions),
                60,
                what="full ISRs before the next restart",
            )
    stop.set()
    t.join(90)
    assert not failed, f"{len(failed)} acks=all writes failed during the rolling restart: {failed[:3]}"
    got = _consume_all(cluster.bootstrap_servers, "rolling", 3, len(acked))
    values = {r.value for r in got}
    lost = [v for v in acked if v not in values]
    assert not lost, f"{len(lost)} acknowledged records lost"
