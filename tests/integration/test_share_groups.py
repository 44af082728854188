"""Share groups (KIP-932) on a real ``kraftlog`` node (issue 27): confluent-kafka 2.16's
``ShareConsumer`` (librdkafka, a client nobody here wrote) joins a share group and its heartbeats
get an assignment; three members on a one-partition topic all hold the partition; ListGroups (v5,
types filter) shows the group as ``share``; and hand-made ShareGroupHeartbeats (kio's codec) see
Kafka's fencing, leave and one-type-per-group answers.

On main, ShareGroupHeartbeat (76) is not served: the ShareConsumers never join (no group exists
after 20 s). Records are fetched in test_share_fetch.py; the share coordinator's state
(83-87) is checked here.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until

from ._security_helpers import kafka_call

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")
pytest.importorskip("confluent_kafka.admin")

OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
    "share.coordinator.state.topic.num.partitions": 2,
}
ERR_GROUP_ID_NOT_FOUND, ERR_FENCED, ERR_UNKNOWN_MEMBER, ERR_INCONSISTENT = 69, 110, 25, 23


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("share") / "c", controllers=1, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics(
                [
                    NewTopic("queue", num_partitions=1, replication_factor=1),
                    NewTopic("raw", num_partitions=2, replication_factor=1),
                ]
            )
        yield c
    finally:
        c.stop()


def describe(cluster: LocalCluster, group: str) -> Any:
    answer: Any = kafka_call(cluster, None, 77, 1, {"group_ids": [group], "include_authorized_operations": False})
    return answer.groups[0]


def heartbeat(cluster: LocalCluster, group: str, member: str, epoch: int, topics: list[str] | None = None) -> Any:
    values = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "rack_id": None,
        "subscribed_topic_names": topics,
    }
    return kafka_call(cluster, None, 76, 1, values)


def wait_assigned(cluster: LocalCluster, group: str, member: str, epoch: int, timeout_s: float, what: str) -> Any:
    """Heartbeat as a real member does, each at the epoch of the answer before (an answer may raise
    the epoch before the partitions come: their share state is initialized after the join), until
    an answer carries partitions; that answer."""
    latest = {"epoch": epoch}

    def assigned() -> Any:
        answer = heartbeat(cluster, group, member, latest["epoch"])
        assert answer.error_code == 0, answer  # fenced here would be the test's bug, or the coordinator's
        latest["epoch"] = answer.member_epoch
        return answer if answer.assignment and answer.assignment.topic_partitions else None

    return wait_until(assigned, timeout_s, what=what)


def test_share_consumers_join_and_all_three_hold_the_one_partition(cluster: LocalCluster) -> None:
    consumers = [
        confluent_kafka.ShareConsumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap_servers,
                "group.id": "sq",
                "client.id": f"share-{i}",
                "log_level": 3,
            }
        )
        for i in range(3)
    ]
    started = time.monotonic()
    try:
        for consumer in consumers:
            consumer.subscribe(["queue"])
        consumers[0].poll(0.1)

        def all_hold_it() -> bool:
            group = describe(cluster, "sq")
            if group.error_code or len(group.members) != 3:
                return False
            return all(m.member_epoch == group.group_epoch for m in group.members) and all(
                [(tp.topic_name, tuple(tp.partitions)) for tp in m.assignment.topic_partitions] == [("queue", (0,))]
                for m in group.members
            )

        wait_until(all_hold_it, 30, what="three share consumers each holding queue-0 at the group epoch")
        joined_s = time.monotonic() - started
        print(f"three ShareConsumers held queue-0 after {joined_s:.2f} s")
        group = describe(cluster, "sq")
        assert group.group_state == "Stable" and group.assignor_name == "simple"
        assert {m.client_id for m in group.members} == {"share-0", "share-1", "share-2"}
        assert group.assignment_epoch == group.group_epoch

        # ListGroups v5: the share type, and its filter
        listed: Any = kafka_call(cluster, None, 16, 5, {"states_filter": (), "types_filter": ("share",)})
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
            ("sq", "share", "Stable", "share")
        ]
        others: Any = kafka_call(cluster, None, 16, 5, {"states_filter": (), "types_filter": ("consumer", "classic")})
        assert "sq" not in [g.group_id for g in others.groups]
        # DescribeGroups (classic) does not describe a share group, as Kafka's answer before v6
        classic: Any = kafka_call(cluster, None, 15, 5, {"groups": ("sq",), "include_authorized_operations": False})
        assert classic.groups[0].group_state == "Dead" and not classic.groups[0].members
    finally:
        for consumer in consumers:
            consumer.close()
    # close() leaves the group (epoch -1): it is empty at once, not after the session timeout
    wait_until(lambda: describe(cluster, "sq").group_state == "Empty", 5, what="the share group empty after close")
    # an empty share group is deleted as Kafka deletes one (DeleteGroups)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    admin.delete_consumer_groups(["sq"], request_timeout=10)["sq"].result(timeout=15)
    assert describe(cluster, "sq").error_code == ERR_GROUP_ID_NOT_FOUND


def test_hand_made_heartbeats_see_kafkas_epochs_fencing_and_group_types(cluster: LocalCluster) -> None:
    first = heartbeat(cluster, "raw-g", "member-a", 0, ["raw"])
    assert first.error_code == 0 and first.member_id == "member-a" and first.member_epoch >= 1
    assert first.heartbeat_interval.total_seconds() == pytest.approx(0.3)

    # the partitions' share state is initialized after the join; a later heartbeat gets them
    got = wait_assigned(cluster, "raw-g", "member-a", first.member_epoch, 10, "member-a assigned raw's partitions")
    assert sorted(got.assignment.topic_partitions[0].partitions) == [0, 1]
    epoch = got.member_epoch

    assert heartbeat(cluster, "raw-g", "member-a", epoch + 1).error_code == ERR_FENCED
    assert heartbeat(cluster, "raw-g", "nobody", epoch).error_code == ERR_UNKNOWN_MEMBER
    assert heartbeat(cluster, "no-such-group", "member-a", 3).error_code == ERR_GROUP_ID_NOT_FOUND
    assert heartbeat(cluster, "raw-g", "", 0, ["raw"]).error_code == 42  # INVALID_REQUEST: MemberId can't be empty

    # one group id, one group type: a classic join is INCONSISTENT_GROUP_PROTOCOL, a consumer-protocol
    # heartbeat GROUP_ID_NOT_FOUND, and a share heartbeat to a consumer group GROUP_ID_NOT_FOUND
    join: Any = kafka_call(
        cluster,
        None,
        11,
        5,
        {
            "group_id": "raw-g",
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": ({"name": "range", "metadata": b""},),
        },
    )
    assert join.error_code == ERR_INCONSISTENT
    consumer_hb: Any = kafka_call(
        cluster,
        None,
        68,
        0,
        {
            "group_id": "raw-g",
            "member_id": "",
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 10_000,
            "subscribed_topic_names": ("raw",),
            "server_assignor": None,
            "topic_partitions": (),
        },
    )
    assert consumer_hb.error_code == ERR_GROUP_ID_NOT_FOUND

    left = heartbeat(cluster, "raw-g", "member-a", -1)
    assert left.error_code == 0 and left.member_epoch == -1
    assert describe(cluster, "raw-g").group_state == "Empty"


def topic_id(cluster: LocalCluster, name: str) -> Any:
    values = {
        "topics": ({"name": name, "topic_id": None},),
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    answer: Any = kafka_call(cluster, None, 3, 12, values)
    return answer.topics[0].topic_id


def read_state(cluster: LocalCluster, group: str, topic: Any, partition: int) -> Any:
    values = {
        "group_id": group,
        "topics": ({"topic_id": topic, "partitions": ({"partition": partition, "leader_epoch": -1},)},),
    }
    answer: Any = kafka_call(cluster, None, 84, 0, values)
    return answer.results[0].partitions[0]


def test_the_share_coordinator_keeps_the_initialized_state_in_share_group_state(cluster: LocalCluster) -> None:
    """The group coordinator initializes a share group's partitions through the share coordinator
    (InitializeShareGroupState), which creates ``__share_group_state`` and writes a snapshot at the
    group epoch; ReadShareGroupState (84) and WriteShareGroupState (85) on the Kafka listener see and
    change it."""
    joined = heartbeat(cluster, "state-g", "member-s", 0, ["raw"])

    wait_assigned(cluster, "state-g", "member-s", joined.member_epoch, 15, "member-s assigned raw's partitions")
    epoch = describe(cluster, "state-g").group_epoch
    raw = topic_id(cluster, "raw")
    for partition in (0, 1):
        state = read_state(cluster, "state-g", raw, partition)
        # initialized at the group epoch of the heartbeat that asked for it (a later one took the partitions)
        assert (state.error_code, state.start_offset, state.state_batches) == (0, -1, ())
        assert 1 <= state.state_epoch <= epoch
    batch = {"first_offset": 5, "last_offset": 7, "delivery_state": 0, "delivery_count": 1}
    write = {
        "topic_id": raw,
        "partitions": (
            {
                "partition": 1,
                "state_epoch": state.state_epoch,
                "leader_epoch": 0,
                "start_offset": 5,
                "state_batches": (batch,),
            },
        ),
    }
    written: Any = kafka_call(cluster, None, 85, 0, {"group_id": "state-g", "topics": (write,)})
    assert written.results[0].partitions[0].error_code == 0
    state = read_state(cluster, "state-g", raw, 1)
    assert state.start_offset == 5
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches] == [
        (5, 7, 0, 1)
    ]
    # a partition nobody initialized is refused, as Kafka's coordinator refuses it
    assert read_state(cluster, "nobody-g", raw, 0).error_code == 42  # INVALID_REQUEST
    heartbeat(cluster, "state-g", "member-s", -1)


def test_a_share_group_is_loaded_back_from_consumer_offsets_after_a_restart(cluster: LocalCluster) -> None:
    """Runs last: it restarts the node. The group's records are replayed when the coordinator loads
    ``__consumer_offsets`` again: the member, its epoch and its partitions are back, and it carries on
    heartbeating at its epoch (its session started afresh)."""
    joined = heartbeat(cluster, "kept", "member-k", 0, ["raw"])

    epoch = wait_assigned(cluster, "kept", "member-k", joined.member_epoch, 10, "member-k assigned").member_epoch
    before = describe(cluster, "kept")
    (node_id,) = cluster.nodes
    cluster.stop_node(node_id)
    cluster.start_node(node_id)
    cluster.wait_unfenced_brokers()
    after = wait_until(
        lambda: (g := describe(cluster, "kept")).error_code == 0 and g, 30, what="the share group loaded again"
    )
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert [(m.member_id, m.member_epoch, m.assignment) for m in after.members] == [
        (m.member_id, m.member_epoch, m.assignment) for m in before.members
    ]
    again = heartbeat(cluster, "kept", "member-k", epoch)
    assert again.error_code == 0 and again.member_epoch == epoch
    # the share coordinator loaded __share_group_state again: the state written before is there
    state = wait_until(
        lambda: (s := read_state(cluster, "state-g", topic_id(cluster, "raw"), 1)).error_code == 0 and s,
        30,
        what="the share state loaded again",
    )
    assert (state.start_offset, len(state.state_batches)) == (5, 1)
