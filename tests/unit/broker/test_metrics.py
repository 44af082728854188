"""Prometheus metrics without sockets: the broker's counters on a real ReplicaManager, the broker
and controller gauges computed at scrape time, and the RPC interceptor's latency and error counts.

Values are read back through the registry (``get_sample_value``) and the text exposition
(``generate_latest``), i.e. what a scrape would see. The endpoint itself (sockets) is tested in
tests/integration/test_metrics.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from test_replica_manager import (  # helpers of the ReplicaManager tests (tests/unit is on sys.path)
    TOPIC_ID,
    Clock,
    FakeSender,
    Meta,
    batch,
    broker,
    fetch_req,
    produce_req,
    run,
    settle,
)
from test_replica_manager import setup as rm_setup

from kraftlog.broker.replica._alter_partition import AlterPartitionResult
from kraftlog.broker.replica._metrics import BrokerStateCollector, BrokerTopicMetrics
from kraftlog.common import errors as kerr
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log import (
    FenceBrokerRecord,
    MetadataImage,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kraftlog.node._metrics import RpcMetricsInterceptor, response_errors
from kraftlog.node._metrics_endpoint import metrics_host
from kraftlog.proto import admin_pb2, broker_pb2, errors_pb2
from kraftlog.quorum._metrics import ControllerStateCollector, cluster_counts


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


# ------------------------------------------------------------------------------ broker counters


def test_produce_and_fetch_count_bytes_and_messages_per_topic(tmp_path: Path) -> None:
    async def main() -> None:
        rm, _meta = rm_setup(tmp_path, replicas=(1, 2), partitions=2)
        reg = rm.metrics.registry
        b0, b1 = batch(3, "a"), batch(2, "b")
        resp = await rm.produce(produce_req({0: b0, 1: b1}, acks=1))
        assert all(p.error.code == 0 for t in resp.topics for p in t.partitions)
        assert value(reg, "kraftlog_broker_topic_messages_in_total", topic="t") == 5
        assert value(reg, "kraftlog_broker_topic_bytes_in_total", topic="t") == len(b0) + len(b1)
        # a failed append counts nothing: partition 7 does not exist
        await rm.produce(produce_req({7: batch(4)}, acks=1))
        assert value(reg, "kraftlog_broker_topic_messages_in_total", topic="t") == 5

        # followers fetch (replication out), which also moves the HW so consumers can read
        await rm.fetch(fetch_req({0: 0, 1: 0}, replica_id=2))
        assert value(reg, "kraftlog_broker_replication_bytes_out_total") == len(b0) + len(b1)
        await rm.fetch(fetch_req({0: 3, 1: 2}, replica_id=2))
        assert value(reg, "kraftlog_broker_topic_bytes_out_total", topic="t") == 0  # replication is apart
        await rm.fetch(fetch_req({0: 0}))
        assert value(reg, "kraftlog_broker_topic_bytes_out_total", topic="t") == len(b0)
        await rm.shutdown()

    run(main)


def test_deleted_topic_series_disappear(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = rm_setup(tmp_path)
        await rm.produce(produce_req({0: batch(1)}, acks=1))
        assert b'topic="t"' in generate_latest(rm.metrics.registry)
        meta.commit(RemoveTopicRecord(topic_id=TOPIC_ID))
        assert b'topic="t"' not in generate_latest(rm.metrics.registry)
        await rm.shutdown()

    run(main)


def test_committed_isr_shrink_and_expand_are_counted_on_the_leader(tmp_path: Path) -> None:
    async def main() -> None:
        clock, sender = Clock(), FakeSender()
        rm, meta = rm_setup(tmp_path, replicas=(1, 2), clock=clock, sender=sender)
        reg = rm.metrics.registry
        await rm.produce(produce_req({0: batch(2)}, acks=1))
        rm.run_periodic()  # starts the intervals
        clock.now += 5000
        assert rm.run_periodic()["isr_shrink"] == 1
        *_, new_isr, fut = sender.calls[-1]
        assert new_isr == (1,)
        assert value(reg, "kraftlog_broker_isr_shrinks_total") == 0  # proposed, not committed yet
        fut.set_result(AlterPartitionResult(None, leader_id=1, leader_epoch=0, isr=(1,), partition_epoch=1))
        await settle()
        assert value(reg, "kraftlog_broker_isr_shrinks_total") == 1
        assert value(reg, "kraftlog_broker_isr_expands_total") == 0

        await rm.fetch(fetch_req({0: 2}, replica_id=2, replica_epoch=12))  # caught up: expand
        *_, new_isr, fut = sender.calls[-1]
        assert new_isr == (1, 2)
        fut.set_result(AlterPartitionResult(None, leader_id=1, leader_epoch=0, isr=(1, 2), partition_epoch=2))
        await settle()
        assert value(reg, "kraftlog_broker_isr_expands_total") == 1
        assert value(reg, "kraftlog_broker_isr_shrinks_total") == 1
        await rm.shutdown()

    run(main)


# ------------------------------------------------------------------------------ broker gauges


@dataclass
class FakeFollower:
    image: MetadataImage
    high_watermark: int = -1


def test_broker_gauges_follow_isr_leadership_and_metadata(tmp_path: Path) -> None:
    async def main() -> None:
        rm, meta = rm_setup(tmp_path, replicas=(1, 2, 3), partitions=2, configs={"min.insync.replicas": "2"})
        # a partition led elsewhere, hosted here as a follower, and one not hosted here at all
        meta.commit(
            PartitionRecord(partition_id=2, topic_id=TOPIC_ID, replicas=(2, 1), isr=(2, 1), leader=2),
            PartitionRecord(partition_id=3, topic_id=TOPIC_ID, replicas=(3,), isr=(3,), leader=3),
        )
        follower = FakeFollower(meta.image, high_watermark=meta.image.offset)
        reg = CollectorRegistry()
        reg.register(BrokerStateCollector(rm.partitions, lambda: follower.image, lambda: follower.high_watermark))

        def gauges() -> dict[str, float | None]:
            names = [
                "partitions",
                "leader_partitions",
                "under_replicated_partitions",
                "under_min_isr_partitions",
                "offline_partitions",
                "metadata_lag",
            ]
            return {n: value(reg, f"kraftlog_broker_{n}") for n in names}

        assert gauges() == {
            "partitions": 3,
            "leader_partitions": 2,
            "under_replicated_partitions": 0,
            "under_min_isr_partitions": 0,
            "offline_partitions": 0,
            "metadata_lag": 0,
        }
        assert value(reg, "kraftlog_broker_metadata_last_applied_offset") == meta.image.offset

        # broker 3 drops out of one ISR, then out of the other's down to below min.insync
        meta.commit(
            PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(1, 2)),
            PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, isr=(1,)),
            PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, leader=-1, isr=(3,)),
        )
        follower.image = meta.image
        follower.high_watermark = meta.image.offset + 4  # the controller committed 4 more
        assert gauges() == {
            "partitions": 3,
            "leader_partitions": 2,
            "under_replicated_partitions": 2,
            "under_min_isr_partitions": 1,
            "offline_partitions": 1,
            "metadata_lag": 4,
        }
        await rm.shutdown()

    run(main)


def test_broker_gauges_before_the_replica_manager_exists() -> None:
    reg = CollectorRegistry()
    reg.register(BrokerStateCollector(dict, lambda: MetadataImage.EMPTY, lambda: -1))
    assert value(reg, "kraftlog_broker_partitions") == 0
    assert value(reg, "kraftlog_broker_metadata_last_applied_offset") == -1
    assert value(reg, "kraftlog_broker_metadata_lag") == 0


def test_hot_path_caches_topic_children() -> None:
    m = BrokerTopicMetrics()
    m.record_produce("a", 10, 2)
    first = m._topics["a"]
    m.record_produce("a", 5, 1)
    m.record_fetch("a", 7, replica=False)
    assert m._topics["a"] is first
    assert value(m.registry, "kraftlog_broker_topic_bytes_in_total", topic="a") == 15
    assert value(m.registry, "kraftlog_broker_topic_messages_in_total", topic="a") == 3
    assert value(m.registry, "kraftlog_broker_topic_bytes_out_total", topic="a") == 7
    m.remove_topic("never-seen")  # no error


# ------------------------------------------------------------------------------ controller gauges


class FakeQuorum:
    def __init__(self, epoch: int, committed_offset: int, leader_id: int | None) -> None:
        self.epoch, self.committed_offset, self.leader_id = epoch, committed_offset, leader_id


def controller_image() -> MetadataImage:
    meta = Meta()
    meta.commit(
        broker(1),
        broker(2),
        broker(3),
        TopicRecord(name="t", topic_id=TOPIC_ID),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1, 2), isr=(1, 2), leader=1),
        PartitionRecord(partition_id=1, topic_id=TOPIC_ID, replicas=(3,), isr=(3,), leader=3),
        FenceBrokerRecord(broker_id=3, broker_epoch=13),
        PartitionChangeRecord(partition_id=1, topic_id=TOPIC_ID, leader=-1, isr=(3,)),
    )
    return meta.image


def test_controller_gauges() -> None:
    image = controller_image()
    assert cluster_counts(image) == {
        "topics": 1,
        "partitions": 2,
        "offline": 1,
        "registered": 3,
        "fenced": 1,
        "active": 2,
    }
    server = SimpleNamespace(image=image, is_active=True, quorum=FakeQuorum(7, image.offset, 2))
    reg = CollectorRegistry()
    reg.register(ControllerStateCollector(server))
    expected = {
        "kraftlog_controller_active_controllers": 1,
        "kraftlog_controller_offline_partitions": 1,
        "kraftlog_controller_global_topics": 1,
        "kraftlog_controller_global_partitions": 2,
        "kraftlog_controller_registered_brokers": 3,
        "kraftlog_controller_fenced_brokers": 1,
        "kraftlog_controller_active_brokers": 2,
        "kraftlog_controller_last_applied_record_offset": image.offset,
        "kraftlog_controller_last_committed_record_offset": image.offset,
        "kraftlog_raft_current_epoch": 7,
        "kraftlog_raft_current_leader": 2,
        "kraftlog_raft_high_watermark": image.offset + 1,
    }
    assert {name: value(reg, name) for name in expected} == expected
    server.is_active = False
    server.quorum = None  # not joined yet
    assert value(reg, "kraftlog_controller_active_controllers") == 0
    assert value(reg, "kraftlog_raft_current_epoch") == -1
    assert value(reg, "kraftlog_raft_current_leader") == -1


# ------------------------------------------------------------------------------ request metrics


def err(cls: type[kerr.KafkaError]) -> errors_pb2.Error:
    return errors_pb2.Error(code=cls.error_code, name=cls.error_name)


def test_response_errors_finds_every_nested_error() -> None:
    R = broker_pb2.ProduceResponse
    resp = R(
        error=errors_pb2.Error(code=0, name="NONE"),
        topics=[
            R.TopicResponse(
                name="a",
                partitions=[
                    R.PartitionResponse(index=0, error=err(kerr.NotLeaderOrFollowerError)),
                    R.PartitionResponse(index=1),
                ],
            ),
            R.TopicResponse(
                name="b", partitions=[R.PartitionResponse(index=0, error=err(kerr.NotEnoughReplicasError))]
            ),
        ],
    )
    assert sorted(response_errors(resp)) == ["NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER"]
    top = admin_pb2.DescribeQuorumResponse(error=err(kerr.NotControllerError))
    assert response_errors(top) == ["NOT_CONTROLLER"]
    assert response_errors(broker_pb2.FetchResponse()) == []
    assert response_errors(object()) == []


def test_interceptor_wrapper_times_calls_and_counts_errors() -> None:
    reg = CollectorRegistry()
    interceptor = RpcMetricsInterceptor(reg, "broker")

    async def produce(request: Any, context: Any) -> broker_pb2.ProduceResponse:
        if request == "boom":
            raise kerr.CorruptMessageError("bad batch")
        if request == "bug":
            raise RuntimeError("a bug")
        R = broker_pb2.ProduceResponse
        return R(
            topics=[
                R.TopicResponse(
                    name="t", partitions=[R.PartitionResponse(index=0, error=err(kerr.NotLeaderOrFollowerError))]
                )
            ]
        )

    measured = interceptor.wrap("Produce", produce)

    async def main() -> None:
        await measured("ok", None)
        with pytest.raises(kerr.CorruptMessageError):
            await measured("boom", None)
        with pytest.raises(RuntimeError):
            await measured("bug", None)

    asyncio.run(main())
    assert value(reg, "kraftlog_broker_request_duration_seconds_count", method="Produce") == 3
    for name in ("NOT_LEADER_OR_FOLLOWER", "CORRUPT_MESSAGE", "UNKNOWN_SERVER_ERROR"):
        assert value(reg, "kraftlog_broker_request_errors_total", method="Produce", error=name) == 1, name


def test_interceptor_wraps_only_unary_kraftlog_methods_once() -> None:
    import grpc

    interceptor = RpcMetricsInterceptor(CollectorRegistry(), "controller")

    async def behavior(request: Any, context: Any) -> Any:
        return request

    unary = grpc.unary_unary_rpc_method_handler(behavior)
    stream = grpc.unary_stream_rpc_method_handler(behavior)
    handlers = {
        "/kraftlog.v1.AdminService/DescribeQuorum": unary,
        "/grpc.health.v1.Health/Check": unary,
        "/kraftlog.v1.ControllerService/FetchMetadata": stream,
    }

    async def intercept(method: str) -> Any:
        async def continuation(details: Any) -> Any:
            return handlers.get(details.method)

        return await interceptor.intercept_service(continuation, SimpleNamespace(method=method))

    async def main() -> None:
        wrapped = await intercept("/kraftlog.v1.AdminService/DescribeQuorum")
        assert wrapped is not unary and wrapped.unary_unary is not behavior
        assert await intercept("/kraftlog.v1.AdminService/DescribeQuorum") is wrapped  # cached
        assert await intercept("/grpc.health.v1.Health/Check") is unary
        assert await intercept("/kraftlog.v1.ControllerService/FetchMetadata") is stream
        assert await intercept("/kraftlog.v1.AdminService/Nope") is None

    asyncio.run(main())


# ------------------------------------------------------------------------------ endpoint settings


def test_metrics_bind_to_the_first_listener_host() -> None:
    def cfg(listeners: str) -> NodeConfig:
        return NodeConfig.from_mapping(
            {
                "node.id": 1,
                "process.roles": "broker",
                "listeners": listeners,
                "controller.quorum.voters": "9@127.0.0.1:9999",
                "log.dirs": "/tmp/x",
            }
        )

    assert metrics_host(cfg("BROKER://10.1.2.3:9092,CONTROLLER://10.9.9.9:9093")) == "10.1.2.3"
    assert metrics_host(cfg("PLAINTEXT://:9092")) == "0.0.0.0"
