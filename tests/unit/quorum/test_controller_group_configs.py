"""Config resources of type GROUP (issue 25): Kafka 4.0's group configs set and described through the
controller, kept as ConfigRecords of resource type GROUP, validated within the broker's
``group.consumer.*`` bounds."""

from __future__ import annotations

import pytest

from kraftlog.common.config import ConfigError, group_configs
from kraftlog.metadata_log._records import ConfigRecord, ConfigResourceType
from tests.unit.quorum.test_controller import DELETE, SET, cluster, entries

GROUP = ConfigResourceType.GROUP


def test_group_configs_are_stored_as_group_config_records_and_described() -> None:
    h = cluster(1)
    records, resp = h.alter_configs((GROUP, "g1", [("consumer.session.timeout.ms", SET, "50000")]))
    assert [r.error.name for r in resp.results] == ["NONE"]
    assert records == [ConfigRecord(GROUP, "g1", "consumer.session.timeout.ms", "50000")]
    e = entries(h.describe_configs(GROUP, "g1"))
    assert e == {
        "consumer.heartbeat.interval.ms": ("5000", "DEFAULT_CONFIG", True),
        "consumer.session.timeout.ms": ("50000", "GROUP_CONFIG", False),
        # share groups' keys (issue 27): Kafka's defaults, the lock duration the broker's
        "share.auto.offset.reset": ("latest", "DEFAULT_CONFIG", True),
        "share.isolation.level": ("read_uncommitted", "DEFAULT_CONFIG", True),
        "share.record.lock.duration.ms": ("30000", "DEFAULT_CONFIG", True),
        # KIP-1191's dead-letter topic (issue 27): none by default, headers only
        "errors.deadletterqueue.topic.name": ("", "DEFAULT_CONFIG", True),
        "errors.deadletterqueue.copy.record.enable": ("false", "DEFAULT_CONFIG", True),
    }
    assert entries(h.describe_configs(GROUP, "other"))["consumer.session.timeout.ms"] == (
        "45000",
        "DEFAULT_CONFIG",
        True,
    )
    records, _ = h.alter_configs((GROUP, "g1", [("consumer.session.timeout.ms", DELETE, "")]))
    assert records == [ConfigRecord(GROUP, "g1", "consumer.session.timeout.ms", None)]


@pytest.mark.parametrize(
    "ops",
    [
        [("consumer.session.timeout.ms", SET, "44999")],  # below group.consumer.min.session.timeout.ms
        [("consumer.session.timeout.ms", SET, "60001")],  # above the max
        [("consumer.heartbeat.interval.ms", SET, "4999")],
        [("consumer.heartbeat.interval.ms", SET, "15001")],
        [("consumer.heartbeat.interval.ms", SET, "soon")],
        [("consumer.session.timeout.ms", SET, "50000"), ("consumer.heartbeat.interval.ms", SET, "60000")],
        [("share.session.timeout.ms", SET, "50000")],  # no share groups yet: unknown
    ],
)
def test_bad_group_configs_are_invalid_config_and_write_nothing(ops: list[tuple[str, int, str]]) -> None:
    h = cluster(1)
    records, resp = h.alter_configs((GROUP, "g", ops))
    assert resp.results[0].error.name == "INVALID_CONFIG" and records == []


def test_the_bounds_are_the_brokers_and_a_group_needs_a_name() -> None:
    h = cluster(1, {"group.consumer.min.session.timeout.ms": 1000, "group.consumer.min.heartbeat.interval.ms": 100})
    _, resp = h.alter_configs(
        (GROUP, "g", [("consumer.session.timeout.ms", SET, "2000"), ("consumer.heartbeat.interval.ms", SET, "500")])
    )
    assert resp.results[0].error.name == "NONE"
    _, resp = h.alter_configs((GROUP, "", [("consumer.session.timeout.ms", SET, "50000")]))
    assert resp.results[0].error.name == "INVALID_REQUEST"
    assert h.describe_configs(GROUP, "").error.name == "INVALID_REQUEST"


def test_group_configs_effective_values() -> None:
    broker = {
        "group.consumer.session.timeout.ms": 45_000,
        "group.consumer.min.session.timeout.ms": 45_000,
        "group.consumer.max.session.timeout.ms": 60_000,
        "group.consumer.heartbeat.interval.ms": 5_000,
        "group.consumer.min.heartbeat.interval.ms": 5_000,
        "group.consumer.max.heartbeat.interval.ms": 15_000,
    }
    assert group_configs({}, broker.__getitem__) == {
        "consumer.session.timeout.ms": 45_000,
        "consumer.heartbeat.interval.ms": 5_000,
    }
    assert (
        group_configs({"consumer.heartbeat.interval.ms": "7000"}, broker.__getitem__)["consumer.heartbeat.interval.ms"]
        == 7000
    )
    with pytest.raises(ConfigError, match="Unknown group config name"):
        group_configs({"nope": "1"}, broker.__getitem__)


def test_share_group_configs_are_validated_as_kafka_does() -> None:
    h = cluster(1)
    for key, value in (
        ("share.auto.offset.reset", "soon"),
        ("share.isolation.level", "serializable"),
        ("share.record.lock.duration.ms", "10000"),  # below group.share.min.record.lock.duration.ms
    ):
        records, resp = h.alter_configs((GROUP, "g1", [(key, SET, value)]))
        assert records == [] and resp.results[0].error.name == "INVALID_CONFIG", key
    records, resp = h.alter_configs(
        (
            GROUP,
            "g1",
            [("share.auto.offset.reset", SET, "by_duration:PT1H30M"), ("share.isolation.level", SET, "read_committed")],
        )
    )
    assert [r.error.name for r in resp.results] == ["NONE"] and len(records) == 2
