"""Share groups' delivery keys and the share coordinator's keys (KIP-932, issue 27): Kafka's names,
defaults and bounds; a bad value stops the node at start, naming the key."""

from __future__ import annotations

import pytest

from kraftlog.common.config import ConfigError, NodeConfig

BASE = {
    "node.id": 1,
    "process.roles": "broker,controller",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "log.dirs": "/tmp/kraftlog-share-config-test",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
}


def test_kafkas_defaults() -> None:
    c = NodeConfig(BASE)
    assert {
        k: c[k]
        for k in (
            "group.share.record.lock.duration.ms",
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
            "group.share.delivery.count.limit",
            "group.share.partition.max.record.locks",
            "group.share.max.share.sessions",
            "share.coordinator.state.topic.num.partitions",
            "share.coordinator.state.topic.replication.factor",
            "share.coordinator.state.topic.min.isr",
            "share.coordinator.state.topic.segment.bytes",
            "share.coordinator.snapshot.update.records.per.snapshot",
            "share.coordinator.write.timeout.ms",
            "share.coordinator.load.buffer.size",
        )
    } == {
        "group.share.record.lock.duration.ms": 30_000,
        "group.share.min.record.lock.duration.ms": 15_000,
        "group.share.max.record.lock.duration.ms": 60_000,
        "group.share.delivery.count.limit": 5,
        "group.share.partition.max.record.locks": 2000,
        "group.share.max.share.sessions": 2000,
        "share.coordinator.state.topic.num.partitions": 50,
        "share.coordinator.state.topic.replication.factor": 3,
        "share.coordinator.state.topic.min.isr": 2,
        "share.coordinator.state.topic.segment.bytes": 104_857_600,
        "share.coordinator.snapshot.update.records.per.snapshot": 500,
        "share.coordinator.write.timeout.ms": 5000,
        "share.coordinator.load.buffer.size": 5_242_880,
    }


def test_a_short_lock_within_lowered_bounds_is_taken() -> None:
    c = NodeConfig(
        {**BASE, "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": "1500"}
    )
    assert c["group.share.record.lock.duration.ms"] == 1500


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"group.share.record.lock.duration.ms": "999"}, "group.share.record.lock.duration.ms"),
        ({"group.share.record.lock.duration.ms": "10000"}, "group.share.record.lock.duration.ms"),  # below min
        ({"group.share.record.lock.duration.ms": "3600000"}, "group.share.max.record.lock.duration.ms"),  # above max
        ({"group.share.delivery.count.limit": "1"}, "group.share.delivery.count.limit"),
        ({"group.share.delivery.count.limit": "11"}, "group.share.delivery.count.limit"),
        ({"group.share.partition.max.record.locks": "99"}, "group.share.partition.max.record.locks"),
        ({"share.coordinator.state.topic.num.partitions": "0"}, "share.coordinator.state.topic.num.partitions"),
        (
            {"share.coordinator.snapshot.update.records.per.snapshot": "501"},
            "share.coordinator.snapshot.update.records.per.snapshot",
        ),
        ({"share.coordinator.write.timeout.ms": "soon"}, "share.coordinator.write.timeout.ms"),
    ],
)
def test_bad_values_stop_the_node_naming_the_key(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        NodeConfig({**BASE, **settings})
    assert raised.value.key == key and key in str(raised.value)
