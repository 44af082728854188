"""Share groups deliver records (KIP-932, issue 27): confluent-kafka 2.16's ``ShareConsumer``
(librdkafka, a client nobody here wrote) fetches through ShareFetch (78) and acknowledges through
ShareFetch and ShareAcknowledge (79) on a real ``kraftlog`` node, whose share partitions keep
their state with the share coordinator on ``__share_group_state``.

On main ShareFetch is not served: a ShareConsumer joins its group but never receives a record.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until

from ._security_helpers import kafka_call

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

LOCK_MS = 2000
OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": LOCK_MS,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("sharefetch") / "c", controllers=1, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics(
                [
                    NewTopic(n, num_partitions=2, replication_factor=1)
                    for n in ("work", "again", "killed", "txn", "viagrpc")
                ]
            )
        yield c
    finally:
        c.stop()


def consumer(cluster: LocalCluster, group: str, name: str, **conf: Any) -> Any:
    c = confluent_kafka.ShareConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": group,
            "client.id": name,
            "log_level": 3,
            **conf,
        }
    )
    return c


def set_group_configs(cluster: LocalCluster, group: str, configs: dict[str, str]) -> None:
    """SET the share group's own configs (IncrementalAlterConfigs on the GROUP resource, with
    confluent-kafka's AdminClient), in the order given."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    resource = ConfigResource(ResourceType.GROUP, group)
    for name, value in configs.items():
        resource.add_incremental_config(ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET))
    admin.incremental_alter_configs([resource])[resource].result(30)


def produce(cluster: LocalCluster, topic: str, n: int) -> list[bytes]:
    p = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "linger.ms": 5})
    values = [f"{topic}-{i}".encode() for i in range(n)]
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % 2)
    assert p.flush(20) == 0
    return values


def topic_id(cluster: LocalCluster, name: str) -> Any:
    values = {
        "topics": ({"name": name, "topic_id": None},),
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    answer: Any = kafka_call(cluster, None, 3, 12, values)
    return answer.topics[0].topic_id


def start_offsets(cluster: LocalCluster, group: str, topic: str) -> list[int]:
    tid = topic_id(cluster, topic)
    out = []
    for partition in (0, 1):
        values = {
            "group_id": group,
            "topics": ({"topic_id": tid, "partitions": ({"partition": partition, "leader_epoch": -1},)},),
        }
        answer: Any = kafka_call(cluster, None, 84, 0, values)
        part = answer.results[0].partitions[0]
        out.append(part.start_offset if part.error_code == 0 else -2)
    return out


def started(cluster: LocalCluster, consumers: list[Any], group: str, topic: str) -> None:
    """Poll until every partition's share start offset is settled (``latest`` resolved at the first fetch)."""

    def settled() -> bool:
        for c in consumers:
            assert not [m for m in c.poll(0.2) if m.error() is None]
        return all(o >= 0 for o in start_offsets(cluster, group, topic))

    wait_until(settled, 30, what=f"the share partitions of {topic} started")


def test_three_share_consumers_receive_every_record_exactly_once(cluster: LocalCluster) -> None:
    consumers = [consumer(cluster, "g-work", f"w{i}") for i in range(3)]
    try:
        for c in consumers:
            c.subscribe(["work"])
        started(cluster, consumers, "g-work", "work")
        values = produce(cluster, "work", 300)
        seen: dict[bytes, list[int]] = {}
        counts = [0, 0, 0]
        began = time.monotonic()

        def all_seen() -> bool:
            for i, c in enumerate(consumers):
                for m in c.poll(0.2):
                    if m.error() is None:
                        seen.setdefault(m.value(), []).append(i)
                        counts[i] += 1
                        assert m.delivery_count() == 1
            return len(seen) == len(values)

        wait_until(all_seen, 60, what="every record received")
        print(f"300 records through 3 share consumers in {time.monotonic() - began:.2f} s, per consumer {counts}")
        assert set(seen) == set(values)
        assert all(len(who) == 1 for who in seen.values()), [v for v, who in seen.items() if len(who) > 1]
        # no redelivery after the implicit acknowledgements: a few more polls receive nothing
        for _ in range(3):
            for c in consumers:
                again = [
                    (m.value(), m.delivery_count(), m.partition(), m.offset()) for m in c.poll(0.3) if m.error() is None
                ]
                assert not again
    finally:
        for c in consumers:
            c.close()


def test_a_released_record_comes_back_with_delivery_count_two(cluster: LocalCluster) -> None:
    c = consumer(cluster, "g-again", "r0", **{"share.acknowledgement.mode": "explicit"})
    try:
        c.subscribe(["again"])

        def settled() -> bool:
            assert not [m for m in c.poll(0.2) if m.error() is None]
            return all(o >= 0 for o in start_offsets(cluster, "g-again", "again"))

        wait_until(settled, 30, what="the share partitions of again started")
        (value,) = produce(cluster, "again", 1)
        got: list[Any] = []
        wait_until(lambda: got.extend(m for m in c.poll(0.2) if m.error() is None) or got, 20, what="the record")
        assert [(m.value(), m.delivery_count()) for m in got] == [(value, 1)]
        c.acknowledge(got[0], confluent_kafka.AcknowledgeType.RELEASE)
        c.commit_sync(10)
        again: list[Any] = []
        wait_until(lambda: again.extend(m for m in c.poll(0.2) if m.error() is None) or again, 20, what="redelivery")
        assert [(m.value(), m.offset(), m.delivery_count()) for m in again] == [(value, got[0].offset(), 2)]
        c.acknowledge(again[0], confluent_kafka.AcknowledgeType.ACCEPT)
        c.commit_sync(10)
    finally:
        c.close()


HOLDER = r"""
import sys, time
import confluent_kafka
c = confluent_kafka.ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": "g-killed", "client.id": "holder",
                                   "share.acknowledgement.mode": "explicit", "log_level": 3})
c.subscribe(["killed"])
held = []
while not held:
    held = [m for m in c.poll(0.5) if m.error() is None]
print(" ".join(f"{m.partition()}:{m.offset()}:{m.delivery_count()}" for m in held), flush=True)
time.sleep(600)
"""


def test_the_records_of_a_killed_consumer_come_back_after_the_lock_duration(cluster: LocalCluster) -> None:
    """A consumer SIGKILLed with records acquired never acknowledges them: once their lock
    (``group.share.record.lock.duration.ms``, 2 s here) ends they are delivered again, with delivery
    count 2, to the consumer that remains."""
    holder: subprocess.Popen[str] | None = None
    survivor: Any = None
    try:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, cluster.kafka_bootstrap_servers], stdout=subprocess.PIPE, text=True
        )
        wait_until(
            lambda: all(o >= 0 for o in start_offsets(cluster, "g-killed", "killed")), 30, what="the holder fetching"
        )
        values = produce(cluster, "killed", 20)
        assert holder.stdout is not None
        line = holder.stdout.readline().split()  # the holder prints once it holds records (bounded by the test timeout)
        held = {(int(p), int(o)) for p, o, _count in (x.split(":") for x in line)}
        assert held and all(x.endswith(":1") for x in line)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        survivor = consumer(cluster, "g-killed", "survivor", **{"share.acknowledgement.mode": "explicit"})
        survivor.subscribe(["killed"])
        killed_at = time.monotonic()
        seen: dict[tuple[int, int], int] = {}

        def all_seen() -> bool:
            for m in survivor.poll(0.2):
                if m.error() is None:
                    seen[(m.partition(), m.offset())] = m.delivery_count()
                    survivor.acknowledge(m, confluent_kafka.AcknowledgeType.ACCEPT)
            survivor.commit_async()
            return len(seen) == len(values)

        wait_until(all_seen, 40, what="every record, the killed consumer's again")
        back_s = time.monotonic() - killed_at
        print(f"{len(held)} records of the killed consumer back after {back_s:.2f} s (lock {LOCK_MS} ms)")
        assert {k: v for k, v in seen.items() if k in held} == dict.fromkeys(held, 2)
        # records the holder had fetched but not yet handed to its application were locked too
        assert all(v in (1, 2) for k, v in seen.items() if k not in held)
        assert back_s >= LOCK_MS / 1000 * 0.5
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
        if survivor is not None:
            survivor.close()


def test_a_read_committed_share_group_starting_earliest_skips_aborted_transactions(cluster: LocalCluster) -> None:
    """The group's own configs (IncrementalAlterConfigs on the GROUP resource, confluent-kafka's
    admin): share.auto.offset.reset=earliest delivers what was produced before the first fetch, and
    share.isolation.level=read_committed never delivers an aborted transaction's records."""
    configs = {"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"}
    set_group_configs(cluster, "g-txn", configs)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": cluster.kafka_bootstrap_servers, "transactional.id": "share-txn", "linger.ms": 5}
    )
    producer.init_transactions(20)
    for commit in (True, False, True):
        producer.begin_transaction()
        for i in range(10):
            producer.produce("txn", f"{'kept' if commit else 'aborted'}-{i}".encode(), partition=i % 2)
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)
    c = consumer(cluster, "g-txn", "t0")
    try:
        c.subscribe(["txn"])
        seen: list[bytes] = []

        def all_committed() -> bool:
            seen.extend(m.value() for m in c.poll(0.2) if m.error() is None)
            return len(seen) >= 20

        wait_until(all_committed, 30, what="the committed records")
        for _ in range(3):
            seen.extend(m.value() for m in c.poll(0.3) if m.error() is None)
        assert sorted(seen) == sorted(f"kept-{i}".encode() for i in range(10) for _ in range(2))
    finally:
        c.close()


def test_share_fetch_and_acknowledge_over_grpc(cluster: LocalCluster) -> None:
    """ShareService on the gRPC listener: the same sessions and share partitions as the Kafka
    listener's (a member joined by a hand-made ShareGroupHeartbeat)."""
    import grpc

    from kraftlog.proto import share_pb2, share_pb2_grpc

    def coordinator_found() -> bool:  # FindCoordinator creates __consumer_offsets, as a client's first step
        answer: Any = kafka_call(cluster, None, 10, 4, {"key_type": 0, "coordinator_keys": ["g-grpc"]})
        return bool(answer.coordinators[0].error_code == 0)

    wait_until(coordinator_found, 20, what="the group coordinator")
    hb = {"group_id": "g-grpc", "member_id": "grpc-m", "member_epoch": 0, "rack_id": None}
    joined: Any = kafka_call(cluster, None, 76, 1, {**hb, "subscribed_topic_names": ["viagrpc"]})

    def assigned() -> bool:
        answer: Any = kafka_call(
            cluster, None, 76, 1, {**hb, "member_epoch": joined.member_epoch, "subscribed_topic_names": None}
        )
        return bool(answer.error_code == 0 and answer.assignment and answer.assignment.topic_partitions)

    wait_until(assigned, 15, what="grpc-m assigned viagrpc")
    tid = str(topic_id(cluster, "viagrpc"))
    (node,) = cluster.nodes.values()
    with grpc.insecure_channel(f"127.0.0.1:{node.broker_port}") as channel:
        stub = share_pb2_grpc.ShareServiceStub(channel)
        topics = [share_pb2.ShareFetchTopic(topic_id=tid, partitions=[{"partition": 0}, {"partition": 1}])]
        base = {"group_id": "g-grpc", "member_id": "grpc-m", "max_records": 100, "max_bytes": 1 << 20}
        opened = stub.ShareFetch(share_pb2.ShareFetchRequest(**base, share_session_epoch=0, topics=topics), timeout=10)
        assert opened.error.code == 0 and opened.acquisition_lock_timeout_ms == LOCK_MS
        produce(cluster, "viagrpc", 4)

        epoch = [1]  # the session's next epoch

        def fetched() -> Any:
            got = stub.ShareFetch(
                share_pb2.ShareFetchRequest(**base, share_session_epoch=epoch[0], max_wait_ms=500), timeout=10
            )
            epoch[0] += 1
            assert got.error.code == 0
            return [
                (p.partition, a.first_offset, a.last_offset, a.delivery_count)
                for t in got.topics
                for p in t.partitions
                for a in p.acquired_records
            ]

        acquired: list[Any] = []
        wait_until(lambda: acquired.extend(fetched()) or len(acquired) >= 2, 15, what="both partitions' records")
        assert sorted(acquired) == [(0, 0, 1, 1), (1, 0, 1, 1)]
        acks = [
            share_pb2.ShareFetchTopic(
                topic_id=tid,
                partitions=[
                    {
                        "partition": p,
                        "acknowledgement_batches": [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}],
                    }
                    for p in (0, 1)
                ],
            )
        ]
        acked = stub.ShareAcknowledge(
            share_pb2.ShareAcknowledgeRequest(
                group_id="g-grpc", member_id="grpc-m", share_session_epoch=epoch[0], topics=acks
            ),
            timeout=10,
        )
        epoch[0] += 1
        assert acked.error.code == 0
        assert [p.error.code for t in acked.topics for p in t.partitions] == [0, 0]
        assert fetched() == []  # accepted: nothing comes back
