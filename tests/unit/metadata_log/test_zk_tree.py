"""The ZooKeeper tree builder (`metadata_log.zk_tree_nodes`), the one behind ``kraftlog metadata
tree`` online and offline (issue 25): pure, over images replayed from records here."""

from __future__ import annotations

from typing import Any

from kraftlog.metadata_log import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    LogEntry,
    MetadataDelta,
    MetadataImage,
    MetadataProvenance,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    ZkTreeScope,
    decode_record,
    encode_record,
    zk_tree_nodes,
)

TS = 1_700_000_000_000
ORDERS = "b3JkZXJzLXRvcGljLWlkMQ"
SECRET = "b3RoZXItdG9waWMtaWQtMQ"
RECOVERING = 1  # Kafka's RECOVERING


def _replay(records: list[tuple[int, MetadataRecord]]) -> tuple[MetadataImage, MetadataProvenance]:
    """(epoch, record) pairs as log entries at offsets 0.. and times TS + offset."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    provenance = MetadataProvenance()
    for offset, (epoch, record) in enumerate(records):
        entry = LogEntry(offset, epoch, TS + offset, record)
        delta.replay(entry)
        provenance.observe(entry)
    return delta.apply(), provenance


def _tree(records: list[tuple[int, MetadataRecord]], **kwargs: Any) -> dict[str, Any]:
    image, provenance = _replay(records)
    return dict(zk_tree_nodes(image, provenance, **kwargs))


def _broker(bid: int, *endpoints: BrokerEndpoint, rack: str | None = None) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=bid, incarnation_id=f"inc-{bid}", broker_epoch=10 + bid, endpoints=endpoints, rack=rack, fenced=False
    )


GRPC = BrokerEndpoint("BROKER", "10.0.0.1", 9091, "SSL")


def test_a_broker_node_is_kafkas_v5_with_its_kafka_listeners_by_name() -> None:
    nodes = _tree(
        [
            (1, NoOpRecord(leader_id=3000)),
            (1, FeatureLevelRecord(name="metadata.version", feature_level=20)),
            (1, FeatureLevelRecord(name="transaction.version", feature_level=0)),  # disabled: not shown
            (
                1,
                _broker(
                    1,
                    GRPC,
                    BrokerEndpoint("CLIENT", "kafka-1", 9092, "SASL_SSL"),
                    BrokerEndpoint("INTERNAL", "10.0.0.1", 9093, "PLAINTEXT"),
                    rack="r1",
                ),
            ),
        ]
    )
    assert nodes["/brokers/ids/1"] == {
        "version": 5,
        "host": "10.0.0.1",  # the first PLAINTEXT listener's
        "port": 9093,
        "jmx_port": -1,
        "timestamp": str(TS + 3),  # the time of the entry that registered it
        "endpoints": ["CLIENT://kafka-1:9092", "INTERNAL://10.0.0.1:9093"],  # not the gRPC listener
        "listener_security_protocol_map": {"CLIENT": "SASL_SSL", "INTERNAL": "PLAINTEXT"},
        "rack": "r1",
        "features": {"metadata.version": {"min_version": 20, "max_version": 20}},
        "epoch": 11,
        "fenced": False,
        "in_controlled_shutdown": False,
        "incarnation_id": "inc-1",
    }


def test_a_broker_without_a_plaintext_listener_has_no_host_and_port() -> None:
    nodes = _tree([(1, _broker(2, GRPC, BrokerEndpoint("SSL", "h2", 9093, "SSL")))])
    node = nodes["/brokers/ids/2"]
    assert (node["host"], node["port"]) == (None, -1)
    assert node["endpoints"] == ["SSL://h2:9093"] and node["rack"] is None and node["features"] == {}


def test_the_controller_is_the_writer_of_the_first_noop_of_the_newest_epoch() -> None:
    assert "/controller" not in _tree([(1, NoOpRecord())])  # a log that does not say who wrote it
    nodes = _tree(
        [
            (1, NoOpRecord(leader_id=1)),
            (2, NoOpRecord(leader_id=2)),  # offset 1: controller 2 takes over in epoch 2
            (2, NoOpRecord(leader_id=2)),  # a later barrier of the same epoch does not move the time
            (2, NoOpRecord()),
        ]
    )
    assert nodes["/controller"] == {"version": 2, "brokerid": 2, "timestamp": str(TS + 1), "kraftControllerEpoch": 2}
    assert nodes["/controller_epoch"] == 2


def test_noop_record_names_its_writer_only_when_known() -> None:
    assert NoOpRecord().to_wire() == {"type": NoOpRecord.TYPE_ID, "version": 0}  # as before the field existed
    assert NoOpRecord(leader_id=7).to_wire()["leader_id"] == 7
    decoded = decode_record(encode_record(NoOpRecord(leader_id=7)))
    assert isinstance(decoded, NoOpRecord) and decoded.leader_id == 7
    old = decode_record(encode_record(NoOpRecord()))
    assert isinstance(old, NoOpRecord) and old.leader_id == -1
    assert NoOpRecord(leader_id=7) == NoOpRecord()  # the same no-op to the image: not compared


def _topics() -> list[tuple[int, MetadataRecord]]:
    return [
        (1, TopicRecord(name="orders", topic_id=ORDERS)),
        (1, PartitionRecord(partition_id=0, topic_id=ORDERS, replicas=(1, 2), isr=(1, 2), leader=1)),
        (1, ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000")),
        (2, PartitionChangeRecord(partition_id=0, topic_id=ORDERS, replicas=(1, 2, 3), adding_replicas=(3,))),
        (2, TopicRecord(name="secret", topic_id=SECRET)),
        (
            2,
            PartitionRecord(
                partition_id=0,
                topic_id=SECRET,
                replicas=(1,),
                isr=(1,),
                leader=1,
                leader_recovery_state=RECOVERING,
            ),
        ),
    ]


def test_topic_nodes_and_the_leader_recovery_state_kafka_wrote_only_when_recovering() -> None:
    nodes = _tree(_topics())
    assert nodes["/brokers/topics/orders"] == {
        "version": 3,
        "topic_id": ORDERS,
        "partitions": {"0": [1, 2, 3]},
        "adding_replicas": {"0": [3]},
        "removing_replicas": {},
    }
    assert nodes["/brokers/topics/orders/partitions/0/state"] == {
        "version": 1,
        "controller_epoch": 2,
        "leader": 1,
        "leader_epoch": 0,
        "isr": [1, 2],
        "partition_epoch": 1,
    }
    assert nodes["/brokers/topics/secret/partitions/0/state"]["leader_recovery_state"] == RECOVERING
    assert nodes["/config/topics/orders"] == {"version": 1, "config": {"retention.ms": "1000"}}
    assert nodes["/config/topics/secret"] == {"version": 1, "config": {}}
    assert nodes["/admin/reassign_partitions"]["partitions"][0]["target_replicas"] == [1, 2, 3]


def _cluster_records() -> list[tuple[int, MetadataRecord]]:
    return [
        (1, ConfigRecord(resource_type=4, resource_name="", name="num.io.threads", value="16")),
        (1, ProducerIdsRecord(broker_id=1, broker_epoch=11, next_producer_id=5000)),
        (1, AccessControlEntryRecord("00000000-0000-4000-8000-000000000001", 2, "orders", 3, "User:bob", "*", 3, 3)),
        (1, UserScramCredentialRecord("bob", 1, b"s", b"k", b"v", 4096)),
        (1, ClientQuotaRecord(entity=(("user", "bob"),), key="producer_byte_rate", value=1024.0)),
        (1, ClientQuotaRecord(entity=(("client-id", None),), key="request_percentage", value=12.5)),
    ]


def test_cluster_nodes_acls_scram_users_and_quotas_share_the_users_node() -> None:
    nodes = _tree(_cluster_records(), cluster_id="CID")
    assert nodes["/cluster/id"] == {"version": "1", "id": "CID"}
    assert nodes["/config/brokers/<default>"] == {"version": 1, "config": {"num.io.threads": "16"}}
    assert nodes["/latest_producer_id_block"] == {"version": 1, "next_producer_id": 5000}
    assert nodes["/kafka-acl/Topic/orders"]["acls"] == [
        {"host": "*", "permissionType": "Allow", "operation": "Read", "principal": "User:bob"}
    ]
    # ZooKeeper kept a user's SCRAM credentials and quotas in one config node; no salt or key shows
    assert nodes["/config/users/bob"] == {
        "version": 1,
        "config": {"SCRAM-SHA-256": "iterations=4096", "producer_byte_rate": "1024"},
    }
    assert nodes["/config/clients/<default>"] == {"version": 1, "config": {"request_percentage": "12.5"}}


def test_a_scope_leaves_out_what_the_caller_may_not_describe() -> None:
    later = [(2, record) for _epoch, record in _cluster_records()]
    records = [(1, NoOpRecord(leader_id=1)), (1, _broker(1, GRPC)), *_topics(), *later]
    image, provenance = _replay(records)
    full = dict(zk_tree_nodes(image, provenance, cluster_id="CID"))
    scope = ZkTreeScope(topics=frozenset({"orders"}), topic_configs=frozenset(), cluster=False, cluster_configs=False)
    seen = dict(zk_tree_nodes(image, provenance, cluster_id="CID", scope=scope))
    assert set(seen) == {
        "/brokers/ids/1",
        "/brokers/topics/orders",
        "/brokers/topics/orders/partitions/0/state",
        "/cluster/id",
        "/controller",
        "/controller_epoch",
    }
    assert {p: full[p] for p in seen} == seen  # what shows is as the full tree has it
    assert len(scope.omitted()) == 4 and ZkTreeScope.ALL.omitted() == []
    # Describe on the cluster without DescribeConfigs on it: SCRAM users show, quotas do not
    partial = dict(zk_tree_nodes(image, provenance, scope=ZkTreeScope(cluster_configs=False)))
    assert partial["/config/users/bob"] == {"version": 1, "config": {"SCRAM-SHA-256": "iterations=4096"}}
    assert "/config/clients/<default>" not in partial and "/config/brokers/<default>" not in partial
    assert "/kafka-acl/Topic/orders" in partial and "/admin/reassign_partitions" in partial


def test_the_tree_is_in_path_order_and_a_snapshot_of_the_image_draws_the_same_topics() -> None:
    records = [(1, NoOpRecord(leader_id=1)), (1, _broker(10, GRPC)), (1, _broker(9, GRPC)), *_topics()]
    image, provenance = _replay(records)
    paths = [p for p, _ in zk_tree_nodes(image, provenance)]
    assert paths.index("/brokers/ids/9") < paths.index("/brokers/ids/10")
    assert paths == sorted(paths, key=lambda p: [(0, int(c), "") if c.isdigit() else (1, 0, c) for c in p.split("/")])
    # a snapshot of the image rebuilds the same nodes; the provenance of its records is the
    # snapshot's epoch and time, and it keeps no NoOpRecord, so /controller waits for the next epoch
    again = MetadataImage.from_records(image.to_records(), image.offset, image.epoch, image.timestamp_ms)
    snap_provenance = MetadataProvenance.from_snapshot(image.to_records(), image.epoch, image.timestamp_ms)
    from_snapshot = dict(zk_tree_nodes(again, snap_provenance))
    assert from_snapshot["/brokers/topics/orders"] == dict(zk_tree_nodes(image, provenance))["/brokers/topics/orders"]
    assert "/controller" not in from_snapshot
