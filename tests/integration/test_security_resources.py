"""ACLs on groups, transactional ids and the cluster, and transactions of an ordinary principal,
on a real mutual-TLS cluster (issue 17), through gRPC and the Kafka listener."""

from __future__ import annotations

import time

import pytest

from kraftlog.client import NewTopic
from kraftlog.common.records import build_batch
from kraftlog.common.security._acl import AclOperation, AclPermissionType, PatternType, ResourceType
from kraftlog.common.security._tls import TlsSettings
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc, open_channel, security_pb2
from tests.integration._security_helpers import (
    CLUSTER_DENIED,
    GROUP_DENIED,
    TXN_DENIED,
    broker_address,
    kafka_call,
    mtls_cluster,
    tls_of,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    yield from mtls_cluster(tmp_path_factory, "mtls-resources")


# ------------------------------------------------------------------ groups, transactional ids, the cluster


def _acl(
    resource_type: ResourceType, name: str, pattern: str, op: AclOperation, allow: bool
) -> security_pb2.AclBinding:
    return security_pb2.AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=PatternType.PREFIXED if pattern == "prefixed" else PatternType.LITERAL,
        principal="User:CN=carol",
        host="*",
        operation=op,
        permission_type=AclPermissionType.ALLOW if allow else AclPermissionType.DENY,
    )


@pytest.fixture(scope="module")
def carol(cluster: LocalCluster) -> TlsSettings:
    """Carol: Describe on groups g-*, Read too on g-read (literal), denied Read on g-deny (with
    All allowed on it); Write on transactional id tx-allowed (literal) and tx-pre* (prefixed),
    denied on tx-deny; IdempotentWrite on the cluster; no Write on any topic."""
    with cluster.admin() as admin:
        answer = admin.create_acls(
            [
                _acl(ResourceType.GROUP, "g-", "prefixed", AclOperation.DESCRIBE, True),
                _acl(ResourceType.GROUP, "g-read", "literal", AclOperation.READ, True),
                _acl(ResourceType.GROUP, "g-deny", "literal", AclOperation.ALL, True),
                _acl(ResourceType.GROUP, "g-deny", "literal", AclOperation.READ, False),
                _acl(ResourceType.TRANSACTIONAL_ID, "tx-allowed", "literal", AclOperation.WRITE, True),
                _acl(ResourceType.TRANSACTIONAL_ID, "tx-pre", "prefixed", AclOperation.WRITE, True),
                _acl(ResourceType.TRANSACTIONAL_ID, "tx-deny", "literal", AclOperation.ALL, True),
                _acl(ResourceType.TRANSACTIONAL_ID, "tx-deny", "literal", AclOperation.WRITE, False),
                _acl(ResourceType.CLUSTER, "kafka-cluster", "literal", AclOperation.IDEMPOTENT_WRITE, True),
            ]
        )
        assert [r.error.code for r in answer.results] == [0] * 9
    return tls_of(cluster, "carol")


def _grpc_join(cluster: LocalCluster, tls: TlsSettings, group: str) -> int:
    from kraftlog.proto import group_pb2, group_pb2_grpc

    with open_channel(broker_address(cluster), tls=tls) as channel:
        request = group_pb2.JoinGroupRequest(
            group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=1000, protocol_type="consumer"
        )
        request.protocols.add(name="range", metadata=b"")
        return int(group_pb2_grpc.GroupServiceStub(channel).JoinGroup(request, timeout=15).error.code)


def _grpc_init_producer(cluster: LocalCluster, tls: TlsSettings, transactional_id: str | None) -> int:
    request = broker_pb2.InitProducerIdRequest(transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    if transactional_id is not None:
        request.transactional_id = transactional_id
    with open_channel(broker_address(cluster), tls=tls) as channel:
        return int(broker_pb2_grpc.BrokerServiceStub(channel).InitProducerId(request, timeout=15).error.code)


def _kafka_join(cluster: LocalCluster, tls: TlsSettings, group: str) -> int:
    values = {
        "group_id": group,
        "session_timeout": 10000,
        "rebalance_timeout": 1000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    return int(kafka_call(cluster, tls, 11, 9, values).error_code)


def _kafka_init_producer(cluster: LocalCluster, tls: TlsSettings, transactional_id: str | None) -> int:
    values = {
        "transactional_id": transactional_id,
        "transaction_timeout": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    return int(kafka_call(cluster, tls, 22, 5, values).error_code)


@pytest.mark.parametrize("protocol", ["grpc", "kafka"])
def test_group_transactional_id_and_cluster_acls(cluster: LocalCluster, carol: TlsSettings, protocol: str) -> None:
    join = _grpc_join if protocol == "grpc" else _kafka_join
    init = _grpc_init_producer if protocol == "grpc" else _kafka_init_producer
    # refused, or not refused for lack of rights (a join may still answer MEMBER_ID_REQUIRED, a
    # transactional InitProducerId COORDINATOR_NOT_AVAILABLE while the coordinator loads)
    cases = [
        (lambda: join(cluster, carol, "g-read"), GROUP_DENIED, False),
        (lambda: join(cluster, carol, "g-deny"), GROUP_DENIED, True),  # DENY wins over All
        (lambda: join(cluster, carol, "other-group"), GROUP_DENIED, True),  # no ACL found
        (lambda: init(cluster, carol, "tx-allowed"), TXN_DENIED, False),
        (lambda: init(cluster, carol, "tx-prefixed-1"), TXN_DENIED, False),
        (lambda: init(cluster, carol, "tx-deny"), TXN_DENIED, True),
        (lambda: init(cluster, carol, "tx-none"), TXN_DENIED, True),
        (lambda: init(cluster, carol, None), CLUSTER_DENIED, False),  # IdempotentWrite on the cluster
        (lambda: init(cluster, tls_of(cluster, "dave"), None), CLUSTER_DENIED, True),  # dave: nothing
    ]
    for number, (call, denial, refused) in enumerate(cases):
        wait_until(
            lambda call=call, denial=denial, refused=refused: (call() == denial) == refused,
            20.0,
            what=f"{protocol} case {number} to be {'refused' if refused else 'allowed'}",
        )


def test_an_ordinary_principal_commits_a_transaction(cluster: LocalCluster) -> None:
    """The transaction's markers are written by the coordinator as the broker, not with the
    rights of the client whose EndTxn started them (they need ClusterAction)."""
    from kraftlog.client import Consumer, Producer

    def allow(resource_type: ResourceType, name: str, op: AclOperation) -> security_pb2.AclBinding:
        return security_pb2.AclBinding(
            resource_type=resource_type,
            resource_name=name,
            pattern_type=PatternType.LITERAL,
            principal="User:CN=erin",
            host="*",
            operation=op,
            permission_type=AclPermissionType.ALLOW,
        )

    with cluster.admin() as admin:
        assert admin.create_topics([NewTopic("erin-t", 1, 1)]).topics[0].error.code == 0
        bindings = [
            allow(ResourceType.TOPIC, "erin-t", AclOperation.WRITE),
            allow(ResourceType.TOPIC, "erin-t", AclOperation.READ),
            allow(ResourceType.TRANSACTIONAL_ID, "tx-erin", AclOperation.WRITE),
        ]
        assert [r.error.code for r in admin.create_acls(bindings).results] == [0, 0, 0]
    erin = cluster.client_certificate("erin")

    def commit_one() -> bool:
        producer = Producer(cluster.bootstrap_servers, transactional_id="tx-erin", **erin)
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("erin-t", b"committed by erin")
            producer.commit_transaction()
            return True
        finally:
            producer.close()

    wait_until(commit_one, 60.0, what="erin's transaction to commit")
    consumer = Consumer(cluster.bootstrap_servers, isolation_level="read_committed", **erin)
    try:
        consumer.assign([("erin-t", 0)])
        consumer.seek_to_beginning()
        values: list[bytes] = []

        def read() -> bool:
            values.extend(r.value for r in consumer.poll(timeout_ms=500))
            return bool(values)

        wait_until(read, 30.0, what="the committed record, read_committed")
        assert values[0] == b"committed by erin"
    finally:
        consumer.close()


def test_transactional_batches_need_a_transactional_id_the_caller_may_write(cluster: LocalCluster) -> None:
    """Write on the topic is not enough for transactional batches (Kafka's rule): without a
    transactional id they would open a transaction no coordinator knows, holding the LSO back."""
    topic = "frank-t"
    with cluster.admin() as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1)]).topics[0].error.code == 0
        write = security_pb2.AclBinding(
            resource_type=ResourceType.TOPIC,
            resource_name=topic,
            pattern_type=PatternType.LITERAL,
            principal="User:CN=frank",
            host="*",
            operation=AclOperation.WRITE,
            permission_type=AclPermissionType.ALLOW,
        )
        assert admin.create_acls([write]).results[0].error.code == 0
    frank = tls_of(cluster, "frank")
    batch = build_batch(
        [(b"k", b"v")],
        timestamp_ms=int(time.time() * 1000),
        producer_id=4242,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    P = broker_pb2.ProduceRequest
    for transactional_id in ("", "tx-not-hers"):
        request = P(
            acks=-1,
            timeout_ms=5000,
            transactional_id=transactional_id,
            topics=[P.TopicData(name=topic, partitions=[P.PartitionData(index=0, records=batch)])],
        )
        with open_channel(broker_address(cluster), tls=frank) as channel:
            answer = broker_pb2_grpc.BrokerServiceStub(channel).Produce(request, timeout=10)
        assert answer.topics[0].partitions[0].error.code == TXN_DENIED, transactional_id
    plain = build_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))
    ok = P(
        acks=-1, timeout_ms=5000, topics=[P.TopicData(name=topic, partitions=[P.PartitionData(index=0, records=plain)])]
    )
    wait_until(lambda: _produce_code(cluster, frank, ok) == 0, 15.0, what="frank's plain batch (his Write) to be taken")


def _produce_code(cluster: LocalCluster, tls: TlsSettings, request: broker_pb2.ProduceRequest) -> int:
    with open_channel(broker_address(cluster), tls=tls) as channel:
        return int(
            broker_pb2_grpc.BrokerServiceStub(channel).Produce(request, timeout=10).topics[0].partitions[0].error.code
        )


# ------------------------------------------------------------------ KIP-430 authorized operations (issue 25)


def test_authorized_operations_come_from_the_acls(cluster: LocalCluster) -> None:
    """librdkafka's describe_cluster / describe_topics / describe_consumer_groups with
    include_authorized_operations, as Dave: Read on topic ops-t (Describe implied), Describe and
    Alter on the cluster, Describe on group ops-g. On main every answer was 'not computed'."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    def dave(resource_type: ResourceType, name: str, op: AclOperation) -> security_pb2.AclBinding:
        binding = _acl(resource_type, name, "literal", op, True)
        binding.principal = "User:CN=dave"
        return binding

    with cluster.admin() as admin:
        admin.create_topics([NewTopic("ops-t", num_partitions=1, replication_factor=1)])
        answer = admin.create_acls(
            [
                dave(ResourceType.TOPIC, "ops-t", AclOperation.READ),
                dave(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE),
                dave(ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER),
                dave(ResourceType.GROUP, "ops-g", AclOperation.DESCRIBE),
            ]
        )
        assert [r.error.code for r in answer.results] == [0] * 4
    security = cluster.client_certificate("dave")
    client = AdminClient(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "security.protocol": "SSL",
            "ssl.ca.location": security["ssl_cafile"],
            "ssl.certificate.location": security["ssl_certfile"],
            "ssl.key.location": security["ssl_keyfile"],
        }
    )

    def names(ops) -> set[str]:
        return {op.name for op in ops or ()}

    def settled() -> bool:  # the broker's image has the ACLs
        d = client.describe_cluster(include_authorized_operations=True, request_timeout=10).result(timeout=20)
        return names(d.authorized_operations) == {"DESCRIBE", "ALTER"}

    wait_until(settled, 30, what="Dave's cluster operations")
    topic = client.describe_topics(ck.TopicCollection(["ops-t"]), include_authorized_operations=True)["ops-t"]
    assert names(topic.result(timeout=20).authorized_operations) == {"READ", "DESCRIBE"}
    group = client.describe_consumer_groups(["ops-g"], include_authorized_operations=True)["ops-g"]
    assert names(group.result(timeout=20).authorized_operations) == {"DESCRIBE"}
