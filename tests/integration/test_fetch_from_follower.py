"""Fetch from the closest replica (KIP-392, issue 25: librdkafka's 0101), driven by librdkafka.

Three brokers in racks r1, r2, r3 with ``replica.selector.class`` Kafka's RackAwareReplicaSelector;
a topic led by the r1 broker and replicated to the other two. A confluent-kafka consumer with
``client.rack=r2`` is sent by the leader to the r2 follower (``preferred_read_replica``) and reads
every record there (librdkafka's statistics name the broker that holds the partition's fetch state
and count the Fetch requests per broker); what it reads is exactly the records the producer had
acknowledged (acks=all), in offset order, while more are produced meanwhile: a follower never
serves past its high watermark.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kraftlog.deploy._cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

RACKS = {1: "r1", 101: "r2", 102: "r3"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(
        tmp_path_factory.mktemp("ffr") / "c",
        controllers=1,
        brokers=2,
        combined=True,
        overrides={"broker.heartbeat.interval.ms": 500, "replica.selector.class": SELECTOR},
        node_overrides={node: {"broker.rack": rack} for node, rack in RACKS.items()},
    )
    c.start(timeout_s=120)
    try:
        c.wait_unfenced_brokers(count=3, timeout_s=90)
        yield c
    finally:
        c.stop()


def _produce(producer: Any, topic: str, values: list[bytes], acked: list[tuple[int, bytes]]) -> None:
    errors: list[object] = []

    def on_delivery(err: object, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append((msg.offset(), msg.value()))

    for v in values:
        producer.produce(topic, value=v, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    deadline = time.monotonic() + 30
    while producer.flush(1.0) and time.monotonic() < deadline:
        pass
    assert not errors and len(producer) == 0


def test_a_racked_consumer_reads_every_acknowledged_record_from_its_rack_follower(cluster: LocalCluster) -> None:
    bootstrap = cluster.kafka_bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    racks = {n.id: n.rack for n in admin.describe_cluster(request_timeout=20).result(timeout=30).nodes}
    assert racks == RACKS  # broker.rack reaches the registration and the answers' rack
    topic = "ffr-r2"
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 101, 102]])])[topic].result(
        timeout=30
    )
    wait_until(
        lambda: (
            (md := admin.list_topics(topic, timeout=10).topics.get(topic)) is not None
            and md.error is None
            and 0 in md.partitions
            and md.partitions[0].leader == 1
            and sorted(md.partitions[0].isrs) == [1, 101, 102]
        ),
        30,
        what="topic led by the r1 broker with a full ISR",
    )
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked: list[tuple[int, bytes]] = []
    _produce(producer, topic, [f"a{i}".encode() for i in range(150)], acked)

    stats: list[dict[str, Any]] = []
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ffr-group",
            "client.rack": "r2",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": lambda s: stats.append(json.loads(s)),
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    read: list[tuple[int, bytes]] = []
    try:
        deadline = time.monotonic() + 60
        produced_more = False
        while time.monotonic() < deadline and (not produced_more or len(read) < len(acked)):
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                read.append((msg.offset(), msg.value()))
            if not produced_more and len(read) >= 50:  # more records while the consumer reads
                _produce(producer, topic, [f"b{i}".encode() for i in range(150)], acked)
                produced_more = True
        end = time.monotonic() + 2
        while time.monotonic() < end:  # the statistics of the whole run
            consumer.poll(0.2)
    finally:
        consumer.close()

    assert read == sorted(acked), (len(read), len(acked))  # every acknowledged record, once, in order
    last = stats[-1]
    fetches = {b["nodeid"]: b["req"].get("Fetch", 0) for b in last["brokers"].values() if b["nodeid"] >= 0}
    holder = [b["nodeid"] for b in last["brokers"].values() if f"{topic}-0" in b.get("toppars", {})]
    print(f"fetch requests per broker: {fetches}; the partition is fetched through broker {holder}")
    assert holder == [101], holder  # the r2 follower, not the r1 leader
    assert fetches.get(101, 0) >= 5 and fetches.get(101, 0) > fetches.get(1, 0), fetches


def _consume_all(bootstrap: str, topic: str, rack: str, expected: int, **conf: Any) -> tuple[list[bytes], list[int]]:
    """Values read from the start (until ``expected`` values or 30 s), and the brokers holding the
    partition's fetch state at the end (librdkafka's statistics)."""
    stats: list[dict[str, Any]] = []
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ffr-{rack}",
            "client.rack": rack,
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": lambda s: stats.append(json.loads(s)),
            "fetch.wait.max.ms": 100,
            **conf,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(values) < expected:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.append(msg.value())
        seen = len(stats)
        end = time.monotonic() + 5
        while time.monotonic() < end and len(stats) < seen + 2:  # statistics after the last read
            assert consumer.poll(0.2) is None
    finally:
        consumer.close()
    holder = [b["nodeid"] for b in stats[-1]["brokers"].values() if f"{topic}-0" in b.get("toppars", {})]
    return values, holder


def test_a_read_committed_consumer_reads_only_committed_records_from_its_rack_follower(cluster: LocalCluster) -> None:
    bootstrap = cluster.kafka_bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "ffr-txn"
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 101, 102]])])[topic].result(
        timeout=30
    )
    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "ffr-txn"})
    producer.init_transactions(30)
    committed: list[bytes] = []
    for n, commit in enumerate((True, False, True)):
        producer.begin_transaction()
        values = [f"t{n}-{i}".encode() for i in range(10)]
        for v in values:
            producer.produce(topic, value=v, partition=0)
        if commit:
            producer.commit_transaction(30)
            committed += values
        else:
            producer.flush(30)
            producer.abort_transaction(30)
    values, holder = _consume_all(bootstrap, topic, "r3", len(committed), **{"isolation.level": "read_committed"})
    print(f"read_committed from broker {holder}: {len(values)} records")
    assert values == committed and holder == [102], (len(values), holder)
