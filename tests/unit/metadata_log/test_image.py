"""Tests of `metadata_log.image`: immutable images, the delta, replay semantics and snapshots.

Replay is the only place metadata changes, so every record type is pinned here, together with the
guarantees other layers build on: impossible changes raise and leave the delta untouched, untouched
parts of an image are shared (``is``), replay is deterministic, and ``to_records`` rebuilds the same
image (checked with hypothesis over random record sequences).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest
from _hypothesis_budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraftlog.metadata_log._records import (
    NO_LEADER,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    FencingChange,
    LeaderRecoveryState,
    LogEntry,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode_entry,
    encode_entry,
)
from kraftlog.metadata_log.image import (
    BrokerRegistration,
    ConfigurationsImage,
    FeaturesImage,
    MetadataDelta,
    MetadataImage,
    MetadataReplayError,
    PartitionRegistration,
    ProducerIdsImage,
    TopicIdPartition,
    TopicImage,
    TopicsImage,
)

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER


def register(
    broker_id: int, epoch: int = 10, *, fenced: bool = False, rack: str | None = None, shutdown: bool = False
) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=f"inc-{broker_id}-{epoch}",
        broker_epoch=epoch,
        endpoints=(BrokerEndpoint("PLAINTEXT", f"host{broker_id}", 9092),),
        rack=rack,
        fenced=fenced,
        in_controlled_shutdown=shutdown,
        log_dirs=(f"/data/{broker_id}",),
    )


def partition(
    topic_id: str,
    pid: int,
    replicas: tuple[int, ...],
    leader: int | None = None,
    isr: tuple[int, ...] | None = None,
    **kw: object,
) -> PartitionRecord:
    return PartitionRecord(
        partition_id=pid,
        topic_id=topic_id,
        replicas=replicas,
        isr=replicas if isr is None else isr,
        leader=replicas[0] if leader is None else leader,
        **kw,
    )


def cluster_records() -> list[MetadataRecord]:
    """Three unfenced brokers; topic "orders" (2 partitions) and "logs" (1), one topic config."""
    return [
        FeatureLevelRecord("metadata.version", 7),
        register(1),
        register(2),
        register(3),
        TopicRecord("orders", "id-orders"),
        partition("id-orders", 0, (1, 2, 3)),
        partition("id-orders", 1, (2, 3, 1)),
        TopicRecord("logs", "id-logs"),
        partition("id-logs", 0, (3, 1)),
        ConfigRecord(TOPIC, "orders", "retention.ms", "1000"),
        ConfigRecord(BROKER, "", "log.retention.hours", "24"),
    ]


def image_of(records: list[MetadataRecord]) -> MetadataImage:
    return MetadataImage.from_records(records)


def replay_all(image: MetadataImage, *records: MetadataRecord | LogEntry) -> MetadataImage:
    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r)
    return delta.apply()


@pytest.fixture
def base() -> MetadataImage:
    return image_of(cluster_records())


# ---- empty image, immutability


def test_empty_image() -> None:
    empty = MetadataImage.EMPTY
    assert (empty.offset, empty.epoch, empty.timestamp_ms) == (-1, -1, -1)
    assert empty.is_empty and empty.to_records() == []
    assert empty.producer_ids.next_producer_id == 0
    assert empty.topics.partition_count == 0 and len(empty.cluster) == 0
    assert MetadataDelta(empty).apply() == empty


def test_images_are_immutable(base: MetadataImage) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.offset = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.topics.get_by_name("orders").name = "x"
    with pytest.raises(TypeError):
        base.topics.by_name["x"] = base.topics.by_name["orders"]
    with pytest.raises(TypeError):
        base.cluster.brokers[9] = base.cluster.brokers[1]
    with pytest.raises(TypeError):
        base.configs.topic_config("orders")["x"] = "y"
    with pytest.raises(TypeError):
        base.topics.by_id["id-orders"].partitions[5] = None


def test_hand_built_images_copy_plain_dicts() -> None:
    parts = {0: PartitionRegistration((1,), (1,), 1)}
    topic = TopicImage("t", "id-t", parts)
    parts[1] = PartitionRegistration((2,), (2,), 2)
    assert isinstance(topic.partitions, MappingProxyType) and list(topic.partitions) == [0]
    configs = ConfigurationsImage({(TOPIC, "t"): {"a": "1"}})
    assert isinstance(configs.topic_config("t"), MappingProxyType)
    assert TopicsImage.of([topic]).get_by_name("t") is topic


# ---- brokers


def test_register_broker(base: MetadataImage) -> None:
    reg = base.cluster.broker(1)
    assert reg == BrokerRegistration(
        1, "inc-1-10", 10, (BrokerEndpoint("PLAINTEXT", "host1", 9092),), None, False, False, ("/data/1",)
    )
    assert reg.endpoint("PLAINTEXT") == BrokerEndpoint("PLAINTEXT", "host1", 9092)
    assert reg.endpoint("SSL") is None
    assert base.cluster.unfenced_broker_ids() == [1, 2, 3]
    assert base.cluster.broker(9) is None
    # re-registration replaces the whole registration, flags included
    img = replay_all(base, register(1, epoch=20, fenced=True, rack="r1"))
    new = img.cluster.broker(1)
    assert (new.broker_epoch, new.incarnation_id, new.fenced, new.rack) == (20, "inc-1-20", True, "r1")
    assert img.cluster.unfenced_broker_ids() == [2, 3] and img.cluster.fenced_broker_ids() == [1]


def test_register_defaults_to_fenced_and_list_fields_become_tuples() -> None:
    img = replay_all(
        MetadataImage.EMPTY, RegisterBrokerRecord(4, "x", 1, endpoints=[BrokerEndpoint("A", "h", 1)], log_dirs=["/d"])
    )
    reg = img.cluster.broker(4)
    assert reg.fenced and not img.cluster.is_unfenced(4)
    assert reg.endpoints == (BrokerEndpoint("A", "h", 1),) and reg.log_dirs == ("/d",)


def test_unregister_broker(base: MetadataImage) -> None:
    img = replay_all(base, UnregisterBrokerRecord(2, 10))
    assert img.cluster.broker(2) is None and img.cluster.broker_ids() == [1, 3]
    with pytest.raises(MetadataReplayError, match="epoch"):
        replay_all(base, UnregisterBrokerRecord(2, 9))
    with pytest.raises(MetadataReplayError, match="not registered"):
        replay_all(base, UnregisterBrokerRecord(7, 10))
    with pytest.raises(MetadataReplayError):
        replay_all(base, UnregisterBrokerRecord(2, 10), UnregisterBrokerRecord(2, 10))


def test_fence_and_unfence(base: MetadataImage) -> None:
    img = replay_all(base, FenceBrokerRecord(1, 10))
    assert img.cluster.broker(1).fenced and img.cluster.unfenced_broker_ids() == [2, 3]
    img = replay_all(img, UnfenceBrokerRecord(1, 10))
    assert not img.cluster.broker(1).fenced
    for stale in (FenceBrokerRecord(1, 9), UnfenceBrokerRecord(1, 11), FenceBrokerRecord(8, 10)):
        with pytest.raises(MetadataReplayError):
            replay_all(base, stale)
    # a fence decided against an old registration cannot touch the new one
    with pytest.raises(MetadataReplayError, match="epoch 10"):
        replay_all(base, register(1, epoch=30), FenceBrokerRecord(1, 10))


def test_broker_registration_change(base: MetadataImage) -> None:
    img = replay_all(base, BrokerRegistrationChangeRecord(1, 10, fenced=FencingChange.FENCE))
    assert img.cluster.broker(1).fenced
    img = replay_all(img, BrokerRegistrationChangeRecord(1, 10, fenced=FencingChange.NONE))
    assert img.cluster.broker(1).fenced
    img = replay_all(img, BrokerRegistrationChangeRecord(1, 10, fenced=FencingChange.UNFENCE))
    assert not img.cluster.broker(1).fenced
    img = replay_all(img, BrokerRegistrationChangeRecord(1, 10, in_controlled_shutdown=1))
    reg = img.cluster.broker(1)
    assert reg.in_controlled_shutdown and not reg.fenced
    img = replay_all(img, BrokerRegistrationChangeRecord(1, 10, fenced=FencingChange.FENCE))
    assert img.cluster.broker(1).in_controlled_shutdown  # unchanged when not named
    for bad in (
        BrokerRegistrationChangeRecord(1, 10, fenced=2),
        BrokerRegistrationChangeRecord(1, 10, in_controlled_shutdown=5),
        BrokerRegistrationChangeRecord(1, 11, fenced=FencingChange.FENCE),
    ):
        with pytest.raises(MetadataReplayError):
            replay_all(base, bad)


# ---- topics and partitions


def test_topic_and_partition_records(base: MetadataImage) -> None:
    orders = base.topics.get_by_name("orders")
    assert orders is base.topics.get_by_id("id-orders")
    assert (orders.name, orders.topic_id, orders.partition_count) == ("orders", "id-orders", 2)
    p1 = base.topics.partition("id-orders", 1)
    assert p1 == PartitionRegistration((2, 3, 1), (2, 3, 1), 2, 0, 0)
    assert p1.has_leader and not p1.is_reassigning
    assert base.topics.partition("id-orders", 5) is None
    assert base.topics.partition("nope", 0) is None
    assert base.topics.get_by_name("nope") is None
    assert base.topics.partition_count == 3 and base.topics.topic_count == 2 == len(base.topics)


def test_partition_record_replaces_whole_partition(base: MetadataImage) -> None:
    img = replay_all(base, partition("id-orders", 0, (3, 2), leader=2, isr=(2,), leader_epoch=7, partition_epoch=9))
    assert img.topics.partition("id-orders", 0) == PartitionRegistration((3, 2), (2,), 2, 7, 9)


@pytest.mark.parametrize(
    "bad",
    [
        partition("id-orders", 4, (1, 1)),  # duplicate replica
        partition("id-orders", 4, (), leader=-1),  # no replica
        partition("id-orders", 4, (1, 2), leader=3),  # leader not a replica
        partition("id-orders", 4, (1, 2), isr=(1, 3)),  # isr not a subset
        partition("id-orders", 4, (1, 2), isr=(1, 1)),  # duplicate isr
        partition("id-orders", 4, (1, 2), adding_replicas=(3,)),  # adding not a replica
        partition("id-orders", 4, (1, 2), adding_replicas=(2,), removing_replicas=(2,)),
        partition("id-orders", 4, (1, 2), leader_recovery_state=5),
        partition("id-orders", -1, (1, 2)),
        partition("id-unknown", 0, (1, 2)),
    ],
)
def test_impossible_partition_records_raise(base: MetadataImage, bad: PartitionRecord) -> None:
    with pytest.raises(MetadataReplayError):
        replay_all(base, bad)


def test_partition_change_is_partial(base: MetadataImage) -> None:
    before = base.topics.partition("id-orders", 0)
    img = replay_all(base, PartitionChangeRecord(0, "id-orders", isr=(1, 2)))
    p = img.topics.partition("id-orders", 0)
    assert p == dataclasses.replace(before, isr=(1, 2), partition_epoch=1)
    assert p.leader_epoch == before.leader_epoch  # no leader named: leader epoch kept

    img = replay_all(img, PartitionChangeRecord(0, "id-orders", leader=2))
    p = img.topics.partition("id-orders", 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (2, 1, 2, (1, 2))

    img = replay_all(img, PartitionChangeRecord(0, "id-orders", leader=2))  # same leader: still bumps
    assert img.topics.partition("id-orders", 0).leader_epoch == 2

    img = replay_all(img, PartitionChangeRecord(0, "id-orders", leader=NO_LEADER, isr=()))
    p = img.topics.partition("id-orders", 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.has_leader) == (-1, 3, 4, False)
    assert p.isr == () and p.replicas == (1, 2, 3)

    img = replay_all(
        img,
        PartitionChangeRecord(0, "id-orders", leader=3, isr=(3,), leader_recovery_state=LeaderRecoveryState.RECOVERING),
    )
    p = img.topics.partition("id-orders", 0)
    assert (p.leader, p.leader_recovery_state) == (3, LeaderRecoveryState.RECOVERING)
    img = replay_all(img, PartitionChangeRecord(0, "id-orders", isr=(3, 1)))
    assert img.topics.partition("id-orders", 0).leader_recovery_state == LeaderRecoveryState.RECOVERING


def test_partition_change_reassignment(base: MetadataImage) -> None:
    # move orders-1 from [2,3,1] to [2,3,4]: add 4, remove 1, then complete
    img = replay_all(base, register(4))
    img = replay_all(
        img, PartitionChangeRecord(1, "id-orders", replicas=(2, 3, 1, 4), adding_replicas=(4,), removing_replicas=(1,))
    )
    p = img.topics.partition("id-orders", 1)
    assert p.is_reassigning and p.replicas == (2, 3, 1, 4) and p.isr == (2, 3, 1)
    img = replay_all(
        img,
        PartitionChangeRecord(
            1, "id-orders", replicas=(2, 3, 4), isr=(2, 3, 4), adding_replicas=(), removing_replicas=()
        ),
    )
    p = img.topics.partition("id-orders", 1)
    assert not p.is_reassigning and p.replicas == (2, 3, 4) and p.partition_epoch == 2
    assert p.leader_epoch == 0
    # shrinking replicas without clearing removing_replicas is impossible
    mid = replay_all(
        base,
        register(4),
        PartitionChangeRecord(1, "id-orders", replicas=(2, 3, 1, 4), adding_replicas=(4,), removing_replicas=(1,)),
    )
    with pytest.raises(MetadataReplayError):
        replay_all(mid, PartitionChangeRecord(1, "id-orders", replicas=(2, 3, 4), isr=(2, 3)))


def test_partition_change_errors(base: MetadataImage) -> None:
    for bad in (
        PartitionChangeRecord(0, "id-unknown", isr=(1,)),
        PartitionChangeRecord(7, "id-orders", isr=(1,)),
        PartitionChangeRecord(0, "id-orders", leader=9),
        PartitionChangeRecord(0, "id-orders", isr=(1, 9)),
    ):
        with pytest.raises(MetadataReplayError):
            replay_all(base, bad)
    with pytest.raises(MetadataReplayError, match="unknown topic"):
        replay_all(base, RemoveTopicRecord("id-logs"), PartitionChangeRecord(0, "id-logs", isr=(1,)))


def test_partition_change_within_one_delta_on_a_new_topic() -> None:
    img = replay_all(
        MetadataImage.EMPTY,
        register(1),
        register(2),
        TopicRecord("t", "id-t"),
        partition("id-t", 0, (1, 2)),
        PartitionChangeRecord(0, "id-t", leader=2),
        PartitionChangeRecord(0, "id-t", isr=(2,)),
    )
    assert img.topics.partition("id-t", 0) == PartitionRegistration((1, 2), (2,), 2, 1, 2)


def test_topic_name_and_id_must_be_free(base: MetadataImage) -> None:
    with pytest.raises(MetadataReplayError, match="taken"):
        replay_all(base, TopicRecord("orders", "id-other"))
    with pytest.raises(MetadataReplayError, match="already exists"):
        replay_all(base, TopicRecord("other", "id-orders"))
    with pytest.raises(MetadataReplayError, match="taken"):
        replay_all(base, TopicRecord("new", "id-1"), TopicRecord("new", "id-2"))


def test_remove_topic_deletes_topic_and_its_configs(base: MetadataImage) -> None:
    img = replay_all(base, RemoveTopicRecord("id-orders"))
    assert img.topics.get_by_name("orders") is None and img.topics.get_by_id("id-orders") is None
    assert img.topics.partition_count == 1
    assert img.configs.topic_config("orders") == {} and (TOPIC, "orders") not in img.configs.resources
    assert img.configs.broker_config("") == {"log.retention.hours": "24"}
    with pytest.raises(MetadataReplayError, match="unknown topic"):
        replay_all(base, RemoveTopicRecord("id-unknown"))
    with pytest.raises(MetadataReplayError):
        replay_all(base, RemoveTopicRecord("id-orders"), RemoveTopicRecord("id-orders"))


def test_topic_recreated_under_same_name_in_one_delta(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    for r in (
        RemoveTopicRecord("id-orders"),
        TopicRecord("orders", "id-orders-2"),
        partition("id-orders-2", 0, (3,)),
        ConfigRecord(TOPIC, "orders", "cleanup.policy", "compact"),
    ):
        delta.replay(r)
    img = delta.apply()
    orders = img.topics.get_by_name("orders")
    assert orders.topic_id == "id-orders-2" and list(orders.partitions) == [0]
    assert img.topics.get_by_id("id-orders") is None
    assert img.configs.topic_config("orders") == {"cleanup.policy": "compact"}  # old config gone
    assert set(delta.deleted_topics) == {"id-orders"}
    assert delta.deleted_topics["id-orders"] is base.topics.get_by_id("id-orders")
    assert delta.changed_topic_ids == delta.created_topic_ids == {"id-orders-2"}
    assert delta.changed_partitions == {"id-orders-2": {0}}


def test_topic_recreated_across_deltas(base: MetadataImage) -> None:
    img = replay_all(base, RemoveTopicRecord("id-logs"))
    img = replay_all(img, TopicRecord("logs", "id-logs-2"), partition("id-logs-2", 0, (1,)))
    assert img.topics.get_by_name("logs").topic_id == "id-logs-2"
    assert img.topics.get_by_name("logs") is img.topics.get_by_id("id-logs-2")


def test_topic_created_and_deleted_in_one_delta_leaves_no_trace(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    for r in (
        TopicRecord("tmp", "id-tmp"),
        partition("id-tmp", 0, (1,)),
        ConfigRecord(TOPIC, "tmp", "a", "1"),
        RemoveTopicRecord("id-tmp"),
    ):
        delta.replay(r)
    assert delta.deleted_topics == {} and delta.changed_topic_ids == set()
    assert delta.changed_partitions == {}
    img = delta.apply()
    assert img.topics is base.topics and img.same_content(base)


def test_deleted_base_topic_id_may_be_reused(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    for r in (
        RemoveTopicRecord("id-logs"),
        TopicRecord("logs2", "id-logs"),
        partition("id-logs", 0, (2,)),
        RemoveTopicRecord("id-logs"),
    ):
        delta.replay(r)
    assert delta.deleted_topics["id-logs"] is base.topics.get_by_id("id-logs")
    img = delta.apply()
    assert img.topics.get_by_id("id-logs") is None and img.topics.get_by_name("logs2") is None


# ---- configs, producer ids, features, no-op


def test_config_set_overwrite_delete(base: MetadataImage) -> None:
    img = replay_all(
        base,
        ConfigRecord(TOPIC, "orders", "retention.ms", "2000"),
        ConfigRecord(TOPIC, "orders", "segment.bytes", "1024"),
    )
    assert img.configs.topic_config("orders") == {"retention.ms": "2000", "segment.bytes": "1024"}
    img = replay_all(img, ConfigRecord(TOPIC, "orders", "retention.ms", None))
    assert img.configs.topic_config("orders") == {"segment.bytes": "1024"}
    img = replay_all(img, ConfigRecord(TOPIC, "orders", "segment.bytes", None))
    assert (TOPIC, "orders") not in img.configs.resources  # empty map removed
    assert img.configs.topic_config("orders") == {}
    # deleting a key that is not set changes nothing (and shares the configs image)
    same = replay_all(base, ConfigRecord(TOPIC, "logs", "x", None))
    assert same.configs is base.configs
    img = replay_all(base, ConfigRecord(BROKER, "1", "log.cleaner.threads", "2"))
    assert img.configs.broker_config(1) == {"log.cleaner.threads": "2"}
    assert img.configs.config(BROKER, "1") is img.configs.broker_config("1")


def test_producer_ids(base: MetadataImage) -> None:
    img = replay_all(base, ProducerIdsRecord(1, 10, 1000))
    assert img.producer_ids == ProducerIdsImage(1000)
    img = replay_all(img, ProducerIdsRecord(2, 10, 2000), ProducerIdsRecord(2, 10, 2000))
    assert img.producer_ids.next_producer_id == 2000
    with pytest.raises(MetadataReplayError, match="goes back"):
        replay_all(img, ProducerIdsRecord(1, 10, 1999))


def test_feature_levels(base: MetadataImage) -> None:
    img = replay_all(base, FeatureLevelRecord("kraft.version", 1), FeatureLevelRecord("metadata.version", 8))
    assert img.features == FeaturesImage({"kraft.version": 1, "metadata.version": 8})
    img = replay_all(img, FeatureLevelRecord("kraft.version", 0))
    assert dict(img.features.levels) == {"metadata.version": 8}
    assert img.features.level("kraft.version") == 0
    with pytest.raises(MetadataReplayError):
        replay_all(img, FeatureLevelRecord("x", -1))


def test_no_op_changes_only_provenance(base: MetadataImage) -> None:
    img = replay_all(base, LogEntry(5, 2, 1234, NoOpRecord()))
    assert (img.offset, img.epoch, img.timestamp_ms) == (5, 2, 1234)
    for part in ("features", "cluster", "topics", "configs", "producer_ids"):
        assert getattr(img, part) is getattr(base, part)
    assert img.same_content(base) and img != base


# ---- provenance, dispatch, atomicity


def test_entries_advance_provenance_and_must_increase() -> None:
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(LogEntry(0, 1, 100, register(1)))
    delta.replay(LogEntry(1, 1, 101, NoOpRecord()))
    delta.replay(FeatureLevelRecord("f", 1))  # a bare record leaves provenance alone
    assert (delta.offset, delta.epoch, delta.timestamp_ms) == (1, 1, 101)
    with pytest.raises(MetadataReplayError, match="does not follow"):
        delta.replay(LogEntry(1, 1, 102, NoOpRecord()))
    with pytest.raises(MetadataReplayError, match="epoch"):
        delta.replay(LogEntry(2, 0, 102, NoOpRecord()))
    delta.replay(LogEntry(7, 3, 90, NoOpRecord()))  # gaps allowed; the clock may go back
    img = delta.apply()
    assert (img.offset, img.epoch, img.timestamp_ms) == (7, 3, 90)
    # a later delta continues from the image's provenance
    with pytest.raises(MetadataReplayError):
        MetadataDelta(img).replay(LogEntry(7, 3, 0, NoOpRecord()))


def test_failed_entry_does_not_advance_provenance() -> None:
    delta = MetadataDelta(MetadataImage.EMPTY)
    with pytest.raises(MetadataReplayError):
        delta.replay(LogEntry(0, 1, 1, UnregisterBrokerRecord(1, 1)))
    assert delta.offset == -1
    delta.replay(LogEntry(0, 1, 1, NoOpRecord()))
    assert delta.offset == 0


def test_unknown_record_type_raises() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class MysteryRecord(MetadataRecord):
        TYPE_ID = 99
        x: int = 0

    delta = MetadataDelta(MetadataImage.EMPTY)
    with pytest.raises(MetadataReplayError, match="unknown record type MysteryRecord"):
        delta.replay(MysteryRecord())
    with pytest.raises(MetadataReplayError):
        delta.replay(LogEntry(0, 0, 0, MysteryRecord()))
    with pytest.raises(MetadataReplayError):
        delta.replay({"type": 2})
    assert issubclass(MetadataReplayError, ValueError)


def test_failed_replay_leaves_the_delta_unchanged(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    delta.replay(PartitionChangeRecord(0, "id-orders", isr=(1, 2)))
    before = delta.apply()
    for bad in (
        PartitionChangeRecord(1, "id-orders", leader=9),
        PartitionRecord(0, "id-logs", (1, 1), (1,), 1),
        TopicRecord("logs", "id-x"),
        FenceBrokerRecord(1, 3),
        ProducerIdsRecord(1, 1, -5),
    ):
        with pytest.raises(MetadataReplayError):
            delta.replay(bad)
    assert delta.changed_topic_ids == {"id-orders"} and delta.changed_broker_ids == set()
    after = delta.apply()
    assert after == before
    assert after.topics.get_by_id("id-logs") is base.topics.get_by_id("id-logs")


# ---- sharing and change sets


def test_apply_shares_untouched_parts(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    delta.replay(LogEntry(20, 1, 5, PartitionChangeRecord(1, "id-orders", isr=(2, 3))))
    delta.replay(LogEntry(21, 1, 6, FenceBrokerRecord(3, 10)))
    delta.replay(LogEntry(22, 1, 7, ConfigRecord(BROKER, "2", "k", "v")))
    img = delta.apply()
    # untouched sub-images are the same objects
    assert img.features is base.features and img.producer_ids is base.producer_ids
    # untouched brokers, topics, partitions and config maps are the same objects
    assert img.cluster.broker(1) is base.cluster.broker(1)
    assert img.cluster.broker(2) is base.cluster.broker(2)
    assert img.cluster.broker(3) is not base.cluster.broker(3)
    assert img.topics.get_by_id("id-logs") is base.topics.get_by_id("id-logs")
    assert img.topics.get_by_name("logs") is base.topics.get_by_name("logs")
    assert img.topics.get_by_id("id-orders") is not base.topics.get_by_id("id-orders")
    assert img.topics.partition("id-orders", 0) is base.topics.partition("id-orders", 0)
    assert img.topics.partition("id-orders", 1) is not base.topics.partition("id-orders", 1)
    assert img.configs.topic_config("orders") is base.configs.topic_config("orders")
    assert img.configs.broker_config("") is base.configs.broker_config("")
    # the old image did not change
    assert base == image_of(cluster_records())
    assert base.topics.partition("id-orders", 1).isr == (2, 3, 1)


def test_apply_twice_and_replay_after_apply_do_not_leak(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    delta.replay(ConfigRecord(TOPIC, "logs", "a", "1"))
    delta.replay(partition("id-logs", 1, (1,)))
    first = delta.apply()
    delta.replay(ConfigRecord(TOPIC, "logs", "b", "2"))
    delta.replay(partition("id-logs", 2, (2,)))
    delta.replay(register(5))
    second = delta.apply()
    assert first.configs.topic_config("logs") == {"a": "1"}
    assert list(first.topics.get_by_id("id-logs").partitions) == [0, 1]
    assert first.cluster.broker(5) is None
    assert second.configs.topic_config("logs") == {"a": "1", "b": "2"}
    assert sorted(second.topics.get_by_id("id-logs").partitions) == [0, 1, 2]


def test_change_sets_for_brokers(base: MetadataImage) -> None:
    delta = MetadataDelta(base)
    assert (delta.changed_topic_ids, delta.deleted_topics, delta.changed_partitions, delta.changed_broker_ids) == (
        set(),
        {},
        {},
        set(),
    )
    for r in (
        PartitionChangeRecord(0, "id-orders", leader=2),
        PartitionChangeRecord(0, "id-orders", isr=(2, 3)),
        TopicRecord("new", "id-new"),
        partition("id-new", 0, (1,)),
        partition("id-new", 1, (2,)),
        RemoveTopicRecord("id-logs"),
        FenceBrokerRecord(1, 10),
        register(6),
        UnregisterBrokerRecord(2, 10),
        ConfigRecord(TOPIC, "new", "a", "b"),
        FeatureLevelRecord("f", 1),
        ProducerIdsRecord(1, 10, 5000),
    ):
        delta.replay(r)
    assert delta.changed_topic_ids == {"id-orders", "id-new"}
    assert delta.created_topic_ids == {"id-new"}
    assert delta.changed_partitions == {"id-orders": {0}, "id-new": {0, 1}}
    assert dict(delta.deleted_topics) == {"id-logs": base.topics.get_by_id("id-logs")}
    assert delta.changed_broker_ids == {1, 2, 6}
    assert delta.changed_config_resources == {(TOPIC, "new")}  # "logs" had no config to delete
    assert delta.changed_features == {"f"} and delta.producer_ids_changed
    assert delta.image is base
    # the sets are copies: mutating them does not change the delta
    delta.changed_topic_ids.add("zzz")
    delta.changed_partitions["id-new"].add(9)
    assert delta.changed_topic_ids == {"id-orders", "id-new"}
    assert delta.changed_partitions["id-new"] == {0, 1}


# ---- queries


def test_queries(base: MetadataImage) -> None:
    img = replay_all(base, PartitionChangeRecord(1, "id-orders", leader=3), FenceBrokerRecord(2, 10))
    assert img.topics.partitions_led_by(3) == [
        TopicIdPartition("id-logs", "logs", 0),
        TopicIdPartition("id-orders", "orders", 1),
    ]
    assert img.topics.partitions_led_by(1) == [TopicIdPartition("id-orders", "orders", 0)]
    assert img.topics.partitions_led_by(2) == []
    assert img.topics.partitions_with_replica(2) == [
        TopicIdPartition("id-orders", "orders", 0),
        TopicIdPartition("id-orders", "orders", 1),
    ]
    assert img.topics.partitions_with_replica(9) == []
    p = img.topics.partition("id-orders", 0)
    assert p.offline_replicas(img.cluster) == (2,)
    assert p.offline_replicas(img.cluster.brokers) == (2,)
    gone = replay_all(img, UnregisterBrokerRecord(3, 10))
    assert p.offline_replicas(gone.cluster) == (2, 3)
    assert img.cluster.unfenced_broker_ids() == [1, 3]
    assert img.configs.topic_config("orders") == {"retention.ms": "1000"}
    assert img.configs.topic_config("logs") == {}


def test_partition_to_record_round_trip() -> None:
    reg = PartitionRegistration((1, 2, 3, 4), (1, 2), 2, 5, 8, (3,), (4,), 1)
    rec = reg.to_record("id-x", 3)
    assert rec == PartitionRecord(3, "id-x", (1, 2, 3, 4), (1, 2), 2, 5, 8, (3,), (4,), 1)
    assert PartitionRegistration.from_record(rec) == reg
    assert reg.is_reassigning


# ---- snapshots: to_records / from_records


def test_to_records_order(base: MetadataImage) -> None:
    img = replay_all(
        base,
        FeatureLevelRecord("a.feature", 2),
        ProducerIdsRecord(1, 10, 3000),
        ConfigRecord(TOPIC, "logs", "z", "1"),
        ConfigRecord(TOPIC, "logs", "a", "2"),
    )
    recs = img.to_records()
    kinds = [type(r).__name__ for r in recs]
    assert kinds == [
        "FeatureLevelRecord",
        "FeatureLevelRecord",
        "RegisterBrokerRecord",
        "RegisterBrokerRecord",
        "RegisterBrokerRecord",
        "ProducerIdsRecord",
        "TopicRecord",
        "PartitionRecord",  # logs
        "TopicRecord",
        "PartitionRecord",
        "PartitionRecord",  # orders
        "ConfigRecord",
        "ConfigRecord",
        "ConfigRecord",
        "ConfigRecord",
    ]
    assert [r.name for r in recs[:2]] == ["a.feature", "metadata.version"]
    assert [r.broker_id for r in recs[2:5]] == [1, 2, 3]
    assert recs[5] == ProducerIdsRecord(-1, -1, 3000)
    assert [(r.name if isinstance(r, TopicRecord) else r.partition_id) for r in recs[6:11]] == [
        "logs",
        0,
        "orders",
        0,
        1,
    ]
    assert [(r.resource_type, r.resource_name, r.name) for r in recs[11:]] == [
        (TOPIC, "logs", "a"),
        (TOPIC, "logs", "z"),
        (TOPIC, "orders", "retention.ms"),
        (BROKER, "", "log.retention.hours"),
    ]


def test_to_records_carries_broker_flags_and_epochs(base: MetadataImage) -> None:
    img = replay_all(
        base,
        BrokerRegistrationChangeRecord(2, 10, fenced=1, in_controlled_shutdown=1),
        PartitionChangeRecord(0, "id-orders", leader=3),
    )
    again = MetadataImage.from_records(img.to_records(), img.offset, img.epoch, img.timestamp_ms)
    assert again == img
    assert again.cluster.broker(2).fenced and again.cluster.broker(2).in_controlled_shutdown
    assert again.topics.partition("id-orders", 0).leader_epoch == 1


def test_from_records_sets_provenance_and_survives_the_wire(base: MetadataImage) -> None:
    entries = [LogEntry(i, 1, 1000 + i, r) for i, r in enumerate(cluster_records())]
    decoded = [decode_entry(encode_entry(e)) for e in entries]
    from_log = replay_all(MetadataImage.EMPTY, *decoded)
    assert (from_log.offset, from_log.epoch, from_log.timestamp_ms) == (10, 1, 1010)
    assert from_log.same_content(base)
    snap = MetadataImage.from_records(from_log.to_records(), 10, 1, 1010)
    assert snap == from_log
    assert base.with_provenance(10, 1, 1010) == from_log


# ---- hypothesis: random record sequences

_BROKERS = st.integers(0, 3)
_EPOCHS = st.integers(0, 2)
_TOPIC_IDS = st.sampled_from(["id-a", "id-b", "id-c", "id-d"])
_NAMES = st.sampled_from(["a", "b", "c"])
_PIDS = st.integers(0, 2)
_REPLICAS = st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True).map(tuple)
_OPT_SUBSET = st.none() | st.lists(st.integers(0, 3), max_size=3, unique=True).map(tuple)


@st.composite
def _partition_records(draw: st.DrawFn) -> PartitionRecord:
    replicas = draw(_REPLICAS)
    isr = tuple(draw(st.lists(st.sampled_from(replicas), unique=True)))
    return PartitionRecord(
        draw(_PIDS),
        draw(_TOPIC_IDS),
        replicas,
        isr,
        draw(st.sampled_from((-1,) + replicas)),
        draw(st.integers(0, 5)),
        draw(st.integers(0, 5)),
        leader_recovery_state=draw(st.sampled_from((0, 1))),
    )


_RECORDS = st.one_of(
    st.builds(
        RegisterBrokerRecord,
        _BROKERS,
        st.sampled_from(["x", "y"]),
        _EPOCHS,
        st.sampled_from([(), (BrokerEndpoint("PLAINTEXT", "h", 1),)]),
        st.sampled_from([None, "r1", "r2"]),
        st.booleans(),
        st.booleans(),
        st.sampled_from([(), ("/d",)]),
    ),
    st.builds(UnregisterBrokerRecord, _BROKERS, _EPOCHS),
    st.builds(FenceBrokerRecord, _BROKERS, _EPOCHS),
    st.builds(UnfenceBrokerRecord, _BROKERS, _EPOCHS),
    st.builds(BrokerRegistrationChangeRecord, _BROKERS, _EPOCHS, st.sampled_from([-1, 0, 1]), st.sampled_from([0, 1])),
    st.builds(TopicRecord, _NAMES, _TOPIC_IDS),
    _partition_records(),
    st.builds(
        PartitionChangeRecord,
        _PIDS,
        _TOPIC_IDS,
        _OPT_SUBSET,
        st.sampled_from([-2, -2, -1, 0, 1, 2, 3]),
        _OPT_SUBSET,
        st.none() | st.just(()),
        st.none() | st.just(()),
        st.sampled_from([-1, -1, 0, 1]),
    ),
    st.builds(RemoveTopicRecord, _TOPIC_IDS),
    st.builds(
        ConfigRecord,
        st.sampled_from([TOPIC, BROKER]),
        st.sampled_from(["a", "b", "", "1"]),
        st.sampled_from(["k1", "k2"]),
        st.sampled_from([None, "v1", "v2"]),
    ),
    st.builds(ProducerIdsRecord, _BROKERS, _EPOCHS, st.integers(0, 3000)),
    st.builds(FeatureLevelRecord, st.sampled_from(["f1", "f2"]), st.integers(0, 3)),
    st.just(NoOpRecord()),
)


@st.composite
def _targeted_record(draw: st.DrawFn, image: MetadataImage) -> MetadataRecord:
    """A record aimed at what ``image`` holds (existing brokers at their epoch, existing
    partitions), so that long sequences reach deep states instead of being mostly rejected."""
    brokers = sorted(image.cluster.brokers.values(), key=lambda b: b.broker_id)
    parts = [
        (t.topic_id, pid, reg)
        for t in sorted(image.topics.by_id.values(), key=lambda t: t.name)
        for pid, reg in sorted(t.partitions.items())
    ]
    topics = sorted(image.topics.by_id)
    kinds = ["random", "topic"]
    if brokers:
        kinds.append("broker")
    if topics:
        kinds += ["partition", "partition", "remove"]
    if parts:
        kinds += ["change", "change", "change"]
    kind = draw(st.sampled_from(kinds))
    if kind == "broker":
        b = draw(st.sampled_from(brokers))
        return draw(
            st.sampled_from(
                [
                    FenceBrokerRecord(b.broker_id, b.broker_epoch),
                    UnfenceBrokerRecord(b.broker_id, b.broker_epoch),
                    UnregisterBrokerRecord(b.broker_id, b.broker_epoch),
                    BrokerRegistrationChangeRecord(
                        b.broker_id, b.broker_epoch, draw(st.sampled_from([-1, 0, 1])), draw(st.sampled_from([0, 1]))
                    ),
                ]
            )
        )
    if kind == "topic":
        return TopicRecord(draw(_NAMES), f"id-{draw(st.integers(0, 30))}")
    if kind == "partition":
        record = draw(_partition_records())
        return dataclasses.replace(record, topic_id=draw(st.sampled_from(topics)))
    if kind == "remove":
        return RemoveTopicRecord(draw(st.sampled_from(topics)))
    if kind == "change":
        topic_id, pid, reg = draw(st.sampled_from(parts))
        replicas = reg.replicas
        adding: tuple[int, ...] | None = None
        removing: tuple[int, ...] | None = None
        if draw(st.booleans()):  # start or finish a reassignment
            extra = tuple(b for b in range(4) if b not in replicas)[:1]
            if extra and not reg.is_reassigning:
                replicas, adding, removing = replicas + extra, extra, replicas[:1]
            else:
                replicas, adding, removing = (tuple(r for r in replicas if r not in reg.removing_replicas), (), ())
        in_set = [r for r in replicas]
        isr = draw(st.none() | st.lists(st.sampled_from(in_set), unique=True).map(tuple))
        leader = draw(st.sampled_from([-2, -2, -1] + in_set))
        return PartitionChangeRecord(
            pid,
            topic_id,
            isr=isr,
            leader=leader,
            replicas=None if adding is None else replicas,
            adding_replicas=adding,
            removing_replicas=removing,
            leader_recovery_state=draw(st.sampled_from([-1, -1, 0, 1])),
        )
    return draw(_RECORDS)


@st.composite
def _record_sequences(draw: st.DrawFn, max_size: int = 40) -> list[MetadataRecord]:
    """Record sequences built against the state they produce (rejected records stay in)."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    out: list[MetadataRecord] = []
    for _ in range(draw(st.integers(0, max_size))):
        record = draw(_targeted_record(delta.apply()))
        try:
            delta.replay(record)
        except MetadataReplayError:
            pass
        out.append(record)
    return out


def _replay_valid(image: MetadataImage, records: list[MetadataRecord]) -> tuple[MetadataImage, list[MetadataRecord]]:
    """Replay what replays; check that each rejected record left the delta as it was."""
    delta = MetadataDelta(image)
    accepted = []
    for record in records:
        try:
            delta.replay(record)
        except MetadataReplayError:
            continue
        accepted.append(record)
    return delta.apply(), accepted


_SETTINGS = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(_record_sequences())
def test_to_records_round_trip(records: list[MetadataRecord]) -> None:
    image, _accepted = _replay_valid(MetadataImage.EMPTY, records)
    snapshot = image.to_records()
    rebuilt = MetadataImage.from_records(snapshot)
    assert rebuilt == image
    assert rebuilt.to_records() == snapshot  # deterministic order
    # with provenance, through entries
    entries = [LogEntry(i, 3, i, r) for i, r in enumerate(snapshot)]
    stamped = replay_all(MetadataImage.EMPTY, *entries)
    assert stamped.same_content(image)


@_SETTINGS
@given(_record_sequences(), st.lists(st.integers(0, 50), max_size=4))
def test_replay_is_deterministic_and_chunking_does_not_matter(records: list[MetadataRecord], cuts: list[int]) -> None:
    image, accepted = _replay_valid(MetadataImage.EMPTY, records)
    assert replay_all(MetadataImage.EMPTY, *accepted) == image  # same records -> equal image
    # the accepted records, replayed through several deltas, give the same image
    bounds = sorted({0, len(accepted), *[min(c, len(accepted)) for c in cuts]})
    chained = MetadataImage.EMPTY
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        chained = replay_all(chained, *accepted[lo:hi])
    assert chained == image
    # and continuing from a snapshot of the first chunk gives the same image too
    if len(bounds) > 2:
        mid = bounds[1]
        first = replay_all(MetadataImage.EMPTY, *accepted[:mid])
        resumed = replay_all(MetadataImage.from_records(first.to_records()), *accepted[mid:])
        assert resumed == image


@_SETTINGS
@given(_record_sequences(30))
def test_rejected_records_leave_no_trace(records: list[MetadataRecord]) -> None:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for record in records:
        before = delta.apply()
        sets = (
            delta.changed_topic_ids,
            dict(delta.deleted_topics),
            delta.changed_partitions,
            delta.changed_broker_ids,
            delta.changed_config_resources,
        )
        try:
            delta.replay(record)
        except MetadataReplayError:
            assert delta.apply() == before
            assert sets == (
                delta.changed_topic_ids,
                dict(delta.deleted_topics),
                delta.changed_partitions,
                delta.changed_broker_ids,
                delta.changed_config_resources,
            )


@_SETTINGS
@given(_record_sequences(30), st.data())
def test_untouched_parts_are_shared(prefix: list[MetadataRecord], data: st.DataObject) -> None:
    base, _ = _replay_valid(MetadataImage.EMPTY, prefix)
    delta = MetadataDelta(base)
    for _ in range(data.draw(st.integers(0, 6))):
        try:
            delta.replay(data.draw(_targeted_record(delta.apply())))
        except MetadataReplayError:
            pass
    img = delta.apply()
    changed_brokers = delta.changed_broker_ids
    for broker_id, reg in base.cluster.brokers.items():
        if broker_id not in changed_brokers:
            assert img.cluster.brokers[broker_id] is reg
    changed_topics = delta.changed_topic_ids | set(delta.deleted_topics)
    for topic_id, topic in base.topics.by_id.items():
        if topic_id not in changed_topics:
            assert img.topics.by_id[topic_id] is topic
    changed_parts = delta.changed_partitions
    for topic_id in delta.changed_topic_ids - delta.created_topic_ids:
        for pid, reg in base.topics.by_id[topic_id].partitions.items():
            if pid not in changed_parts.get(topic_id, set()):
                assert img.topics.by_id[topic_id].partitions[pid] is reg
    changed_resources = delta.changed_config_resources
    for resource, values in base.configs.resources.items():
        if resource not in changed_resources:
            assert img.configs.resources[resource] is values
