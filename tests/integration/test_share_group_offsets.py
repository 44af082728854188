"""Share groups' offsets changed from outside (issue 27), on a real node with librdkafka's
ShareConsumer and AdminClient and kio's codec: AlterShareGroupOffsets (91) moves an empty group's
share-partition start offsets (NON_EMPTY_GROUP while it has members) and a consumer then gets the
records again; DeleteShareGroupOffsets (92) removes a topic's share-partition state and the group's
record of it; DeleteGroups of a share group removes its state in ``__share_group_state`` too (as
Kafka's deleteShareGroups), not only the group's records. ``kraftlog share-groups --reset-offsets |
--delete-offsets | --delete`` do the same over gRPC."""

from __future__ import annotations

import json
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient

from kraftlog.cli.__main__ import main
from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until

from ._security_helpers import kafka_call
from .test_share_fetch import consumer, produce, start_offsets

OVERRIDES = {
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
}
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("shareoff") / "c", controllers=1, combined=True, overrides=OVERRIDES)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics(
                [
                    NewTopic(n, num_partitions=2, replication_factor=1)
                    for n in ("altered", "deleted", "dropped", "viacli")
                ]
            )
        yield c
    finally:
        c.stop()


def consume_all(cluster: LocalCluster, group: str, topic: str, n: int, produced: int = 0) -> list[bytes]:
    """A ShareConsumer of ``group`` gets ``n`` records of ``topic`` (``produced`` of them produced
    once the group's share partitions are initialized), accepts them and leaves."""
    c = consumer(cluster, group, f"{group}-c")
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        if produced:
            wait_until(lambda: not c.poll(0.2) and min(start_offsets(cluster, group, topic)) >= 0, 30)
            produce(cluster, topic, produced)
        wait_until(lambda: got.extend(m.value() for m in c.poll(0.2) if m.error() is None) or len(got) >= n, 30)
        c.commit_sync(10)
    finally:
        c.close()
    return got


def alter(cluster: LocalCluster, group: str, topic: str, offsets: dict[int, int]) -> Any:
    parts = tuple({"partition_index": p, "start_offset": o} for p, o in sorted(offsets.items()))
    values = {"group_id": group, "topics": ({"topic_name": topic, "partitions": parts},)}
    return kafka_call(cluster, None, 91, 0, values)


def delete_offsets(cluster: LocalCluster, group: str, topic: str) -> Any:
    return kafka_call(cluster, None, 92, 0, {"group_id": group, "topics": ({"topic_name": topic},)})


def initialized(cluster: LocalCluster, group: str) -> dict[str, list[int]]:
    """DescribeShareGroupOffsets with null topics: the partitions the group has state for."""
    answer: Any = kafka_call(cluster, None, 90, 1, {"groups": ({"group_id": group, "topics": None},)})
    (g,) = answer.groups
    return {t.topic_name: sorted(p.partition_index for p in t.partitions) for t in g.topics}


def lags(cluster: LocalCluster, group: str, topic: str) -> list[int]:
    """DescribeShareGroupOffsets v1's lag of the topic's partitions 0 and 1 (Kafka 4.2's)."""
    topics = ({"topic_name": topic, "partitions": (0, 1)},)
    answer: Any = kafka_call(cluster, None, 90, 1, {"groups": ({"group_id": group, "topics": topics},)})
    return [p.lag for p in answer.groups[0].topics[0].partitions]


def test_alter_share_group_offsets_redelivers_from_the_new_start(cluster: LocalCluster) -> None:
    """An empty group's start offsets moved back to 0: a new consumer gets every record again;
    while a member is in the group the alter is refused with NON_EMPTY_GROUP."""
    c = consumer(cluster, "g-alter", "starter")
    try:
        c.subscribe(["altered"])
        wait_until(lambda: not c.poll(0.2) and min(start_offsets(cluster, "g-alter", "altered")) >= 0, 30)
        assert alter(cluster, "g-alter", "altered", {0: 0, 1: 0}).error_code == NON_EMPTY_GROUP
    finally:
        c.close()
    values = produce(cluster, "altered", 6)
    assert sorted(consume_all(cluster, "g-alter", "altered", 6)) == sorted(values)
    wait_until(lambda: start_offsets(cluster, "g-alter", "altered") == [3, 3], 15, what="accepted")

    def altered() -> bool:
        answer: Any = alter(cluster, "g-alter", "altered", {0: 0, 1: 1})
        if answer.error_code == NON_EMPTY_GROUP:  # the consumer's leave not yet applied
            return False
        assert answer.error_code == 0, answer
        assert [(p.partition_index, p.error_code) for p in answer.responses[0].partitions] == [(0, 0), (1, 0)]
        return True

    assert lags(cluster, "g-alter", "altered") == [0, 0]  # everything accepted
    wait_until(altered, 15, what="alter")
    assert start_offsets(cluster, "g-alter", "altered") == [0, 1]
    assert lags(cluster, "g-alter", "altered") == [3, 2]  # log end - start offset - delivered
    again = consume_all(cluster, "g-alter", "altered", 5)
    assert sorted(again) == sorted(v for i, v in enumerate(values) if i != 1)  # offset 0 of partition 1 skipped
    bad: Any = alter(cluster, "g-alter", "nosuchtopic", {0: 0})
    assert bad.error_code == 0 and bad.responses[0].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert alter(cluster, "no-such-group", "altered", {0: 0}).error_code == GROUP_ID_NOT_FOUND


def test_delete_share_group_offsets_forgets_the_topic(cluster: LocalCluster) -> None:
    """DeleteShareGroupOffsets: the topic's share-partition state is gone from the share
    coordinator and the group no longer counts it initialized."""
    consume_all(cluster, "g-delete", "deleted", 4, produced=4)
    assert initialized(cluster, "g-delete") == {"deleted": [0, 1]}

    def deleted() -> bool:
        answer: Any = delete_offsets(cluster, "g-delete", "deleted")
        if answer.error_code == NON_EMPTY_GROUP:
            return False
        assert answer.error_code == 0 and answer.responses[0].error_code == 0, answer
        return True

    wait_until(deleted, 15, what="delete offsets")
    assert initialized(cluster, "g-delete") == {}
    assert max(start_offsets(cluster, "g-delete", "deleted")) < 0  # no state left
    assert delete_offsets(cluster, "no-such-group", "deleted").error_code == GROUP_ID_NOT_FOUND


def test_delete_groups_removes_the_share_group_state(cluster: LocalCluster) -> None:
    """DeleteGroups of an empty share group (librdkafka's AdminClient) removes the share
    partitions' state in __share_group_state, not only the group's records."""
    consume_all(cluster, "g-drop", "dropped", 4, produced=4)
    wait_until(lambda: start_offsets(cluster, "g-drop", "dropped") == [2, 2], 15, what="accepted")
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})

    def dropped() -> bool:
        try:
            admin.delete_consumer_groups(["g-drop"], request_timeout=10)["g-drop"].result(15)
        except confluent_kafka.KafkaException as err:
            if err.args[0].code() == confluent_kafka.KafkaError.NON_EMPTY_GROUP:
                return False
            raise
        return True

    wait_until(dropped, 15, what="delete group")
    assert max(start_offsets(cluster, "g-drop", "dropped")) < 0, start_offsets(cluster, "g-drop", "dropped")


def test_the_share_groups_command_resets_deletes_offsets_and_deletes(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """kafka-share-groups' --reset-offsets (dry run, then --execute) moves the start offsets back
    and a consumer gets the records again; --delete-offsets and --delete leave no state."""
    values = consume_all(cluster, "g-cli", "viacli", 4, produced=4)
    wait_until(lambda: start_offsets(cluster, "g-cli", "viacli") == [2, 2], 15, what="accepted")
    boot = ["--bootstrap-server", cluster.bootstrap_servers, "--output", "json"]
    reset = ["share-groups", "--reset-offsets", "--group", "g-cli", "--topic", "viacli", "--to-earliest", *boot]
    capsys.readouterr()
    assert main(reset) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["executed"] is False and [o["new_offset"] for o in plan["offsets"]] == [0, 0]
    assert start_offsets(cluster, "g-cli", "viacli") == [2, 2]  # a dry run changes nothing
    wait_until(lambda: main([*reset, "--execute"]) == 0, 15, what="reset (the consumer's leave applied)")
    assert start_offsets(cluster, "g-cli", "viacli") == [0, 0]
    assert sorted(consume_all(cluster, "g-cli", "viacli", 4)) == sorted(values)
    capsys.readouterr()
    delete_offsets_cmd = ["share-groups", "--delete-offsets", "--group", "g-cli", "--topic", "viacli", *boot]
    wait_until(lambda: main(delete_offsets_cmd) == 0, 15, what="delete offsets")
    assert initialized(cluster, "g-cli") == {} and max(start_offsets(cluster, "g-cli", "viacli")) < 0
    assert main(["share-groups", "--delete", "--group", "g-cli", *boot]) == 0
    assert main(["share-groups", "--describe", "--group", "g-cli", *boot]) == 1  # GROUP_ID_NOT_FOUND
