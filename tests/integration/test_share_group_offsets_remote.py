"""A share group's offsets reset while its share partitions live on another broker (issue 27).

Two brokers; the topic's partition 0 is led by broker 101, partition 1 by broker 102, so one of
them is not the group coordinator's broker whichever broker that is. A consumer (librdkafka's
ShareConsumer) accepts every record and leaves; ``kraftlog share-groups --reset-offsets
--to-earliest --execute`` moves the start offsets back to 0; a new consumer must get every record
again. Before ForgetShareGroup, the leader that was not the coordinator kept its copy of the share
partition (every record acknowledged) and never handed its records out again."""

from __future__ import annotations

import pytest

from kraftlog.cli.__main__ import main
from kraftlog.client import NewTopic
from kraftlog.deploy._cluster import LocalCluster, wait_until

from .test_share_fetch import produce, set_group_configs
from .test_share_group_offsets import consume_all

pytestmark = pytest.mark.integration

OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
}
TOPIC = "remote-reset"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("shareoffremote") / "c", controllers=1, brokers=2, overrides=OVERRIDES)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers(count=2)
        with c.admin(request_timeout_ms=20_000) as admin:
            created = admin.create_topics([NewTopic(TOPIC, assignments={0: [101], 1: [102]})])
            assert all(t.error.code == 0 for t in created.topics), created
        yield c
    finally:
        c.stop()


def test_a_reset_reaches_the_share_partitions_on_every_broker(cluster: LocalCluster) -> None:
    set_group_configs(cluster, "g-remote-reset", {"share.auto.offset.reset": "earliest"})
    values = produce(cluster, TOPIC, 6)
    assert sorted(consume_all(cluster, "g-remote-reset", TOPIC, 6)) == sorted(values)
    boot = ["--bootstrap-server", cluster.bootstrap_servers, "--output", "json"]
    reset = [
        "share-groups",
        "--reset-offsets",
        "--group",
        "g-remote-reset",
        "--topic",
        TOPIC,
        "--to-earliest",
        "--execute",
        *boot,
    ]
    wait_until(lambda: main(reset) == 0, 15, what="reset (the consumer's leave applied)")
    again = consume_all(cluster, "g-remote-reset", TOPIC, 6)
    assert sorted(again) == sorted(values)
