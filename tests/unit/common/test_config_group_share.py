"""Share groups' membership keys (KIP-932, issue 27): Kafka 4.2's names, defaults and checks; a bad
value or a key outside its bounds stops the node at start, naming the key."""

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
    assert [
        c[k]
        for k in (
            "group.share.session.timeout.ms",
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
            "group.share.heartbeat.interval.ms",
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
            "group.share.max.size",
        )
    ] == [45_000, 45_000, 60_000, 5_000, 5_000, 15_000, 200]
    assert c["group.share.assignors"] == ["simple"]


def test_values_within_the_bounds_are_taken() -> None:
    c = NodeConfig(
        {
            **BASE,
            "group.share.min.session.timeout.ms": "1000",
            "group.share.session.timeout.ms": "3000",
            "group.share.min.heartbeat.interval.ms": "100",
            "group.share.heartbeat.interval.ms": "300",
            "group.share.max.size": "1000",
        }
    )
    assert (c["group.share.session.timeout.ms"], c["group.share.heartbeat.interval.ms"]) == (3000, 300)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"group.share.session.timeout.ms": "1000"}, "group.share.session.timeout.ms"),
        ({"group.share.session.timeout.ms": "70000"}, "group.share.session.timeout.ms"),
        ({"group.share.heartbeat.interval.ms": "1000"}, "group.share.heartbeat.interval.ms"),
        ({"group.share.heartbeat.interval.ms": "20000"}, "group.share.heartbeat.interval.ms"),
        ({"group.share.max.heartbeat.interval.ms": "4000"}, "group.share.max.heartbeat.interval.ms"),
        ({"group.share.max.session.timeout.ms": "40000"}, "group.share.max.session.timeout.ms"),
        (
            {
                "group.share.min.session.timeout.ms": "1000",
                "group.share.session.timeout.ms": "5000",
                "group.share.min.heartbeat.interval.ms": "1000",
            },
            "group.share.heartbeat.interval.ms",  # not below the session timeout
        ),
        ({"group.share.max.size": "0"}, "group.share.max.size"),
        ({"group.share.max.size": "1001"}, "group.share.max.size"),
        ({"group.share.assignors": "simple,simple"}, "group.share.assignors"),
        ({"group.share.assignors": "uniform"}, "group.share.assignors"),
        ({"group.share.session.timeout.ms": "soon"}, "group.share.session.timeout.ms"),
    ],
)
def test_bad_values_stop_the_node_naming_the_key(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        NodeConfig({**BASE, **settings})
    assert raised.value.key == key and key in str(raised.value)
