"""Dead-letter topics of share groups (KIP-1191, issue 27) on a real ``kraftlog`` node: a share
group names its DLQ topic with the GROUP config ``errors.deadletterqueue.topic.name`` (set with
confluent-kafka's IncrementalAlterConfigs); a record REJECTed by confluent-kafka's ShareConsumer
(librdkafka) or by ours, or released at the delivery count limit, appears in that topic once,
with Kafka's ``__dlq.errors.*`` headers naming group, topic, partition, offset, delivery count
and reason; a missing DLQ topic is created when the broker allows it.

On main the group config is refused (INVALID_CONFIG: unknown group config name) and no record
ever reaches a DLQ topic. The share groups' lag metrics (records available, acquired, archived per
share partition) are scraped from the node's Prometheus endpoint after the records are settled.
"""

from __future__ import annotations

from typing import Any

import pytest

from kraftlog.client import AcknowledgeType, NewTopic, Producer, ShareConsumer
from kraftlog.deploy._cluster import LocalCluster, wait_until

from .test_metrics import plan_with_metrics, scrape, total
from .test_share_fetch import set_group_configs

pytestmark = pytest.mark.integration

confluent_kafka = pytest.importorskip("confluent_kafka")

OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "group.share.min.session.timeout.ms": 1000,
    "group.share.session.timeout.ms": 6000,
    "group.share.min.heartbeat.interval.ms": 100,
    "group.share.heartbeat.interval.ms": 300,
    "group.share.min.record.lock.duration.ms": 1000,
    "group.share.record.lock.duration.ms": 2000,
    "group.share.delivery.count.limit": 2,
    "errors.deadletterqueue.auto.create.topics.enable": True,
}
REJECT_MSG = "Offset rejected by client."
LIMIT_MSG = "Offset delivery count exceeded the threshold."


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("sharedlq") / "c", controllers=1, combined=True, overrides=OVERRIDES)
    c.metrics_ports = plan_with_metrics(c)  # type: ignore[attr-defined]
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers()
        with c.admin(request_timeout_ms=20_000) as admin:
            admin.create_topics([NewTopic(n, num_partitions=2, replication_factor=1) for n in ("lib", "ours")])
            admin.create_topics(
                [
                    NewTopic(
                        "dlq.lib",
                        num_partitions=2,
                        replication_factor=1,
                        configs={"errors.deadletterqueue.group.enable": "true"},
                    )
                ]
            )
        yield c
    finally:
        c.stop()


def group_configs(cluster: LocalCluster, group: str, dlq_topic: str) -> None:
    """The group starts at the earliest offset and names its DLQ topic (GROUP configs)."""
    set_group_configs(
        cluster, group, {"share.auto.offset.reset": "earliest", "errors.deadletterqueue.topic.name": dlq_topic}
    )


def produce(cluster: LocalCluster, topic: str, n: int) -> list[bytes]:
    with Producer(cluster.bootstrap_servers, linger_ms=0) as p:
        values = [f"{topic}-{i}".encode() for i in range(n)]
        for i, v in enumerate(values):
            p.send(topic, v, partition=i % 2)
        p.flush()
    return values


def dlq_records(cluster: LocalCluster, topic: str, at_least: int) -> list[dict[str, str]]:
    """The headers of every record of ``topic`` (read from the start of each partition), polled
    until there are ``at_least``, then a little longer to see that no more come."""
    c = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": f"reader-{topic}", "log_level": 3}
    )
    out: list[dict[str, str]] = []
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in (0, 1)])

        def read() -> bool:
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    h = {k: (v or b"").decode() for k, v in (m.headers() or [])}
                    h["dlq.partition"] = str(m.partition())
                    h["dlq.value"] = (m.value() or b"").decode()
                    out.append(h)
            return len(out) >= at_least

        wait_until(read, 30, what=f"{at_least} records in {topic}")
        for _ in range(3):  # nothing written twice: no more arrive
            read()
    finally:
        c.close()
    return out


def expected(
    group: str, topic: str, partition: int, offset: int, count: int, message: str, dlq_partitions: int = 2
) -> dict[str, str]:
    return {
        "__dlq.errors.topic": topic,
        "__dlq.errors.partition": str(partition),
        "__dlq.errors.offset": str(offset),
        "__dlq.errors.group": group,
        "__dlq.errors.delivery.count": str(count),
        "__dlq.errors.message": message,
        "dlq.partition": str(partition % dlq_partitions),  # source partition % DLQ partitions
        "dlq.value": "",  # errors.deadletterqueue.copy.record.enable is off: headers only
    }


def test_confluent_kafkas_reject_and_delivery_limit_land_in_the_dlq_topic_with_their_headers(
    cluster: LocalCluster,
) -> None:
    group_configs(cluster, "g-lib", "dlq.lib")
    values = produce(cluster, "lib", 4)
    c = confluent_kafka.ShareConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": "g-lib",
            "client.id": "lib",
            "share.acknowledgement.mode": "explicit",
            "log_level": 3,
        }
    )
    try:
        c.subscribe(["lib"])
        got: list[Any] = []
        wait_until(lambda: got.extend(m for m in c.poll(0.2) if m.error() is None) or len(got) >= 4, 30, what="records")
        assert sorted(m.value() for m in got) == sorted(values)
        by_value = {m.value(): m for m in got}
        rejected, limited = by_value[values[0]], by_value[values[1]]  # partitions 0 and 1
        for m in got:
            kind = confluent_kafka.AcknowledgeType
            c.acknowledge(m, kind.REJECT if m is rejected else kind.RELEASE if m is limited else kind.ACCEPT)
        c.commit_sync(10)
        again: list[Any] = []
        wait_until(lambda: again.extend(m for m in c.poll(0.2) if m.error() is None) or again, 20, what="redelivery")
        assert [(m.offset(), m.delivery_count()) for m in again] == [(limited.offset(), 2)]
        c.acknowledge(again[0], confluent_kafka.AcknowledgeType.RELEASE)  # at the limit (2): archived
        c.commit_sync(10)
        records = dlq_records(cluster, "dlq.lib", 2)
    finally:
        c.close()
    assert sorted(records, key=lambda h: h["__dlq.errors.partition"]) == [
        expected("g-lib", "lib", 0, rejected.offset(), 1, REJECT_MSG),
        expected("g-lib", "lib", 1, limited.offset(), 2, LIMIT_MSG),
    ]
    # the share groups' lag metrics on the partitions' leader: one record archived per partition, both
    # written to the DLQ, nothing left to deliver or held
    (port,) = cluster.metrics_ports.values()  # type: ignore[attr-defined]
    m = scrape(port)
    for partition in ("0", "1"):
        labels = {"group": "g-lib", "topic": "lib", "partition": partition}
        assert total(m, "kraftlog_share_group_records_archived_total", **labels) == 1
        assert total(m, "kraftlog_share_group_records_acquired", **labels) == 0
        assert total(m, "kraftlog_share_group_records_available", **labels) == 0
        assert total(m, "kraftlog_share_group_lag", **labels) == 0
    assert total(m, "kraftlog_share_group_dlq_records_total", group="g-lib") == 2


def test_our_share_consumers_reject_and_delivery_limit_land_in_an_auto_created_dlq_topic(
    cluster: LocalCluster,
) -> None:
    group_configs(cluster, "g-ours", "dlq.ours")  # no such topic: the broker creates it at the first write
    values = produce(cluster, "ours", 4)
    c = ShareConsumer(
        cluster.bootstrap_servers, group_id="g-ours", fetch_max_wait_ms=200, share_acknowledgement_mode="explicit"
    )
    try:
        c.subscribe(["ours"])
        got: list[Any] = []
        wait_until(lambda: got.extend(c.poll(200)) or len(got) >= 4, 30, what="the records")
        (port,) = cluster.metrics_ports.values()  # type: ignore[attr-defined]
        assert total(scrape(port), "kraftlog_share_group_records_acquired", group="g-ours", topic="ours") == 4
        by_value = {r.value: r for r in got}
        rejected, limited = by_value[values[0]], by_value[values[1]]
        for r in got:
            c.acknowledge(
                r,
                AcknowledgeType.REJECT
                if r is rejected
                else AcknowledgeType.RELEASE
                if r is limited
                else AcknowledgeType.ACCEPT,
            )
        results = c.commit_sync()
        assert results and all(e is None for e in results.values()), results
        again: list[Any] = []
        wait_until(lambda: again.extend(c.poll(200)) or again, 20, what="the released record again")
        assert [(r.offset, r.delivery_count) for r in again] == [(limited.offset, 2)]
        c.acknowledge(again[0], AcknowledgeType.RELEASE)
        assert all(e is None for e in c.commit_sync().values())
        records = dlq_records(cluster, "dlq.ours", 2)
    finally:
        c.close()
    assert sorted(records, key=lambda h: h["__dlq.errors.partition"]) == [
        # created with the broker's num.partitions (1)
        expected("g-ours", "ours", 0, rejected.offset, 1, REJECT_MSG, dlq_partitions=1),
        expected("g-ours", "ours", 1, limited.offset, 2, LIMIT_MSG, dlq_partitions=1),
    ]
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    resource = ConfigResource(ResourceType.TOPIC, "dlq.ours")
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["errors.deadletterqueue.group.enable"].value == "true"  # created to serve as a DLQ
