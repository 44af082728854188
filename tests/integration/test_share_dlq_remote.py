"""A share group's dead-letter topic led by another broker (KIP-1191, issue 27): the share-partition
leader (broker 101) writes a REJECTed record's DLQ copy with an acks=all Produce to the broker that
leads the DLQ partition (102), not into a local log. The record appears there once, with Kafka's
``__dlq.errors.*`` headers and, with ``errors.deadletterqueue.copy.record.enable``, the original
value; the rejected record is archived (not delivered again)."""

from __future__ import annotations

from typing import Any

import pytest

from kraftlog.client import AcknowledgeType, NewTopic, Producer, ShareConsumer
from kraftlog.deploy._cluster import LocalCluster, wait_until

from .test_share_dlq import REJECT_MSG, dlq_records
from .test_share_fetch import set_group_configs

pytestmark = pytest.mark.integration

pytest.importorskip("confluent_kafka")

OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
}
GROUP = "g-remote"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("sharedlqremote") / "c", controllers=1, brokers=2, overrides=OVERRIDES)
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers(count=2)  # both: each topic is pinned to one of them
        with c.admin(request_timeout_ms=20_000) as admin:
            created = admin.create_topics(
                [
                    NewTopic("src", assignments={0: [101], 1: [101]}),
                    NewTopic(
                        "dlq.remote",
                        assignments={0: [102], 1: [102]},
                        configs={"errors.deadletterqueue.group.enable": "true"},
                    ),
                ]
            )
            assert all(t.error.code == 0 for t in created.topics), created
        yield c
    finally:
        c.stop()


def test_a_rejected_record_is_dead_lettered_into_a_partition_another_broker_leads(cluster: LocalCluster) -> None:
    set_group_configs(
        cluster,
        GROUP,
        {
            "share.auto.offset.reset": "earliest",
            "errors.deadletterqueue.topic.name": "dlq.remote",
            "errors.deadletterqueue.copy.record.enable": "true",
        },
    )
    with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
        for i in range(4):
            p.send("src", f"v{i}".encode(), key=f"k{i}".encode(), partition=i % 2)
        p.flush()

    c = ShareConsumer(
        cluster.bootstrap_servers, group_id=GROUP, fetch_max_wait_ms=200, share_acknowledgement_mode="explicit"
    )
    try:
        c.subscribe(["src"])
        got: list[Any] = []
        wait_until(lambda: got.extend(c.poll(200)) or len(got) >= 4, 30, what="the four records")
        rejected = next(r for r in got if r.value == b"v1")
        for r in got:
            c.acknowledge(r, AcknowledgeType.REJECT if r is rejected else AcknowledgeType.ACCEPT)
        results = c.commit_sync()
        assert results and all(e is None for e in results.values()), results
        records = dlq_records(cluster, "dlq.remote", 1)
        assert c.poll(500) == []  # archived: never delivered again
    finally:
        c.close()
    assert records == [
        {
            "__dlq.errors.topic": "src",
            "__dlq.errors.partition": "1",
            "__dlq.errors.offset": str(rejected.offset),
            "__dlq.errors.group": GROUP,
            "__dlq.errors.delivery.count": "1",
            "__dlq.errors.message": REJECT_MSG,
            "dlq.partition": "1",  # source partition 1 % 2 DLQ partitions
            "dlq.value": "v1",  # copy.record.enable: the original value
        }
    ]
