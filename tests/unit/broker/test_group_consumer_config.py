"""A consumer group's own configs (config resource GROUP, issue 25) applied by the coordinator: the
heartbeat interval it answers and the session it keeps are the group's, else the broker's."""

from __future__ import annotations

from kraftlog.broker.groups._group_consumer_types import ConsumerGroupConfig, HeartbeatRequest, HeartbeatResponse
from kraftlog.broker.groups._group_coordinator import GroupCoordinator
from kraftlog.common.config import NodeConfig
from kraftlog.metadata_log._records import ConfigRecord, ConfigResourceType, LogEntry
from kraftlog.metadata_log.image import MetadataDelta, MetadataImage
from tests.unit.broker.test_group_consumer import Driver


def _join(d: Driver, group_config: ConsumerGroupConfig | None) -> HeartbeatResponse:
    token = object()
    req = HeartbeatRequest("g", "", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=("orders",), owned=())
    d.absorb(d.shard.consumer_heartbeat(req, token, d.now, d.topics.get, group_config=group_config))
    answer = d.answers.pop(token)
    assert isinstance(answer, HeartbeatResponse) and answer.error is None
    return answer


def test_the_groups_own_session_and_heartbeat_interval_apply() -> None:
    d = Driver()
    own = ConsumerGroupConfig(session_timeout_ms=50_000, heartbeat_interval_ms=7_000)
    joined = _join(d, own)
    assert joined.heartbeat_interval_ms == 7_000
    group = d.shard.consumer_groups["g"]
    assert group.session_deadlines[joined.member_id] == d.now + 50_000
    assert group.config.assignors == ConsumerGroupConfig().assignors  # the broker's assignors stay
    d.advance(49_000)
    assert joined.member_id in group.members  # the broker's 45 s session would have ended it
    d.advance(2_000)
    assert joined.member_id not in group.members


def _coordinator(settings: dict[str, object]) -> GroupCoordinator:
    config = NodeConfig.from_mapping(
        {
            "node.id": 1,
            "process.roles": "broker",
            "controller.quorum.voters": "9@127.0.0.1:9999",
            "log.dirs": "/nonexistent",
            **settings,
        }
    )

    async def create(_partitions: int, _rf: int, _configs: dict[str, str]) -> None:
        return None

    return GroupCoordinator(1, config, replicas=lambda: None, create_offsets_topic=create)


def _image(*records: ConfigRecord) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for offset, record in enumerate(records, 1):
        delta.replay(LogEntry(offset, 1, 0, record))
    return delta.apply()


def test_the_coordinator_reads_a_groups_config_from_the_image() -> None:
    c = _coordinator({"group.consumer.heartbeat.interval.ms": 4_000})
    group = ConfigResourceType.GROUP
    image = _image(
        ConfigRecord(group, "g", "consumer.heartbeat.interval.ms", "6000"),
        ConfigRecord(group, "bad", "consumer.session.timeout.ms", "1"),  # bounds since narrowed: ignored
    )
    assert c.consumer_group_config(image, "g").heartbeat_interval_ms == 6_000
    assert c.consumer_group_config(image, "g").session_timeout_ms == 45_000
    assert c.consumer_group_config(image, "other").heartbeat_interval_ms == 4_000
    assert c.consumer_group_config(image, "bad") == c.consumer_group_config(image, "other")
