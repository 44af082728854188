"""Share groups across brokers (issue 27): on a three-broker cluster the share state of a
partition is kept by the leader of its ``__share_group_state`` partition, which need not lead the
data partition; the partition leader reaches it over gRPC (ShareCoordinatorService). Three
confluent-kafka ShareConsumers receive every record of a three-partition topic exactly once.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from kraftlog.broker.share import share_state_partition
from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import share_pb2, share_pb2_grpc

from ._security_helpers import kafka_call

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

STATE_PARTITIONS = 3
OVERRIDES = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 500,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 3,
    "share.coordinator.state.topic.num.partitions": STATE_PARTITIONS,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
}


def leaders(cluster: LocalCluster, *names: str) -> dict[str, tuple[Any, dict[int, int]]]:
    values = {
        "topics": tuple({"name": n, "topic_id": None} for n in names),
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    answer: Any = kafka_call(cluster, None, 3, 12, values)
    return {t.name: (t.topic_id, {p.partition_index: p.leader_id for p in t.partitions}) for t in answer.topics}


def start_offset(cluster: LocalCluster, group: str, topic_id: str, partition: int) -> int:
    """The share start offset of (group, topic, partition), asked of every broker's share
    coordinator over gRPC (only the state partition's leader answers without an error); -2 when
    none answers."""
    request = share_pb2.ShareStateRequest(
        partitions=[
            share_pb2.SharePartitionState(group_id=group, topic_id=topic_id, partition=partition, leader_epoch=-1)
        ]
    )
    for node in cluster.nodes.values():
        with grpc.insecure_channel(f"127.0.0.1:{node.broker_port}") as channel:
            try:
                answer = share_pb2_grpc.ShareCoordinatorServiceStub(channel).ReadShareGroupStateSummary(
                    request, timeout=5
                )
            except grpc.RpcError:
                continue
        (result,) = answer.results
        if result.error.code == 0:
            return int(result.start_offset)
    return -2


def test_share_consumers_on_three_brokers_receive_every_record_once(tmp_path) -> None:
    cluster = LocalCluster(tmp_path / "c", controllers=3, combined=True, overrides=OVERRIDES)
    cluster.start(timeout_s=90)
    consumers: list[Any] = []
    try:
        cluster.wait_unfenced_brokers()
        with cluster.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic("spread", num_partitions=3, replication_factor=1)])

        def spread_led() -> bool:
            led = leaders(cluster, "spread")["spread"][1]
            return len(led) == 3 and min(led.values()) >= 0

        wait_until(spread_led, 20, what="spread's leaders")
        # one consumer creates __share_group_state (the group's first initialization)
        first = confluent_kafka.ShareConsumer(
            {"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": "warm", "log_level": 3}
        )
        first.subscribe(["spread"])

        def state_topic_led() -> bool:
            first.poll(0.2)
            _id, led = leaders(cluster, "__share_group_state")["__share_group_state"]
            return len(led) == STATE_PARTITIONS and all(x >= 0 for x in led.values())

        wait_until(state_topic_led, 40, what="__share_group_state created and led")
        first.close()
        spread_id, spread_leaders = leaders(cluster, "spread")["spread"]
        _sid, state_leaders = leaders(cluster, "__share_group_state")["__share_group_state"]
        # a group some of whose partitions keep their state on another broker than their leader
        crossing = [
            g
            for g in (f"g{i}" for i in range(50))
            if any(
                state_leaders[share_state_partition(g, str(spread_id), p, STATE_PARTITIONS)] != spread_leaders[p]
                for p in range(3)
            )
        ]
        group = crossing[0]
        consumers = [
            confluent_kafka.ShareConsumer(
                {"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": group, "log_level": 3}
            )
            for _ in range(3)
        ]
        for c in consumers:
            c.subscribe(["spread"])

        def started() -> bool:
            for c in consumers:
                assert not [m for m in c.poll(0.2) if m.error() is None]
            return all(start_offset(cluster, group, str(spread_id), p) >= 0 for p in range(3))

        # each partition's start offset settles (latest) at its first fetch: produce after that
        wait_until(started, 40, what="the share partitions started")
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "linger.ms": 5})
        values = [f"r{i}".encode() for i in range(90)]
        for i, v in enumerate(values):
            producer.produce("spread", v, partition=i % 3)
        assert producer.flush(20) == 0
        seen: dict[bytes, int] = {}

        def all_seen() -> bool:
            for c in consumers:
                for m in c.poll(0.2):
                    if m.error() is None:
                        seen[m.value()] = seen.get(m.value(), 0) + 1
            return len(seen) == len(values)

        wait_until(all_seen, 60, what="every record")
        assert set(seen) == set(values) and set(seen.values()) == {1}
    finally:
        for c in consumers:
            c.close()
        cluster.stop()
