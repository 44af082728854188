"""Security of a real mutual-TLS cluster with Kafka's StandardAuthorizer (issue 17), on both
protocols: who may connect, who may register as a broker, an ACL matrix (every topic operation x
allow / deny / none x literal / prefixed) through gRPC and through the Kafka listener, and every
RPC of both protocols reaching an authorization decision."""

from __future__ import annotations

import itertools
import socket
import ssl
import struct
import time

import grpc
import pytest

from kraftlog.client import NewTopic
from kraftlog.common.records import build_batch
from kraftlog.common.security._acl import AclOperation, AclPermissionType, PatternType, ResourceType
from kraftlog.common.security._tls import TlsSettings
from kraftlog.deploy._certs import make_ca, make_certificate
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc, open_channel, security_pb2
from tests.integration._security_helpers import (
    CLUSTER_DENIED,
    TOPIC_DENIED,
    broker_address,
    controller_address,
    kafka_call,
    mtls_cluster,
    tls_of,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    yield from mtls_cluster(tmp_path_factory, "mtls")


# ------------------------------------------------------------------ who may connect


def test_a_plaintext_client_on_a_tls_port_is_refused(cluster: LocalCluster) -> None:
    with grpc.insecure_channel(broker_address(cluster)) as channel:
        with pytest.raises(grpc.RpcError) as err:
            broker_pb2_grpc.BrokerServiceStub(channel).Metadata(broker_pb2.MetadataRequest(), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    host, port = cluster.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(struct.pack(">ihhih", 10, 18, 0, 1, -1))  # ApiVersions v0, in the clear
        sock.settimeout(10)
        try:
            answer = sock.recv(64)
        except ConnectionError:
            answer = b""
        assert answer == b""  # the TLS server never answers a plaintext request: it closes


def test_an_untrusted_certificate_and_no_certificate_are_refused(cluster: LocalCluster, tmp_path) -> None:
    rogue_ca = make_ca(tmp_path / "rogue")
    rogue = make_certificate(rogue_ca, tmp_path / "rogue", "admin", client=True)  # even named admin
    untrusted = TlsSettings(
        keystore_certificate_chain=rogue.certificate_path.read_text(),
        keystore_key=rogue.key_path.read_text(),
        truststore_location=str(cluster.tls_dir / "ca.crt"),
    )
    anonymous = TlsSettings(truststore_location=str(cluster.tls_dir / "ca.crt"))
    for settings in (untrusted, anonymous):
        with open_channel(broker_address(cluster), tls=settings) as channel:
            with pytest.raises(grpc.RpcError) as err:
                broker_pb2_grpc.BrokerServiceStub(channel).Metadata(broker_pb2.MetadataRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises((ssl.SSLError, ConnectionError)):
            kafka_call(cluster, settings, 18, 3, {"client_software_name": "t", "client_software_version": "1"})


def test_a_broker_without_the_right_credentials_cannot_register(cluster: LocalCluster) -> None:
    intruder = tls_of(cluster, "intruder")  # a certificate of the cluster's CA, but not a super user
    request = controller_pb2.RegisterBrokerRequest(broker_id=777, cluster_id=cluster.cluster_id, incarnation_id="x")
    with open_channel(controller_address(cluster), tls=intruder) as channel:
        response = controller_pb2_grpc.ControllerServiceStub(channel).RegisterBroker(request, timeout=10)
    assert response.error.code == CLUSTER_DENIED
    with open_channel(
        controller_address(cluster), tls=TlsSettings(truststore_location=str(cluster.tls_dir / "ca.crt"))
    ) as ch:
        with pytest.raises(grpc.RpcError) as err:
            controller_pb2_grpc.ControllerServiceStub(ch).RegisterBroker(request, timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    with cluster.admin() as admin:
        assert 777 not in [b.broker_id for b in admin.describe_cluster().brokers]


# ------------------------------------------------------------------ the ACL matrix

_DATA_OPS = (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
_ADMIN_OPS = (
    AclOperation.CREATE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
)
_OPS = _DATA_OPS + _ADMIN_OPS
_CASES = list(itertools.product(_OPS, ("allow", "deny", "none"), ("literal", "prefixed")))


def _topic(op: AclOperation, permission: str, pattern: str) -> str:
    return f"m-{op.name.lower()}-{permission}-{pattern}-t"


def _binding(topic: str, pattern: str, op: AclOperation, allow: bool) -> security_pb2.AclBinding:
    prefixed = pattern == "prefixed"
    return security_pb2.AclBinding(
        resource_type=ResourceType.TOPIC,
        resource_name=topic[:-2] if prefixed else topic,
        pattern_type=PatternType.PREFIXED if prefixed else PatternType.LITERAL,
        principal="User:CN=alice",
        host="*",
        operation=op,
        permission_type=AclPermissionType.ALLOW if allow else AclPermissionType.DENY,
    )


@pytest.fixture(scope="module")
def matrix(cluster: LocalCluster) -> TlsSettings:
    """Alice's certificate; a topic per case; ALLOW of the op (allow), ALLOW All + DENY of the op
    (deny, so DENY must win), or nothing (none, and no ACL found is a refusal)."""
    topics = [_topic(*case) for case in _CASES]
    bindings = []
    for (op, permission, pattern), topic in zip(_CASES, topics, strict=True):
        if permission == "allow":
            bindings.append(_binding(topic, pattern, op, True))
        elif permission == "deny":
            bindings += [_binding(topic, pattern, AclOperation.ALL, True), _binding(topic, pattern, op, False)]
    with cluster.admin() as admin:
        existing = [t for (op, _p, _q), t in zip(_CASES, topics, strict=True) if op is not AclOperation.CREATE]
        created = admin.create_topics([NewTopic(t, 1, 1) for t in existing])
        assert [t.error.code for t in created.topics] == [0] * len(existing)
        results = admin.create_acls(bindings)
        assert [r.error.code for r in results.results] == [0] * len(bindings)
    return tls_of(cluster, "alice")


def _refused(code: int) -> int:
    """An admin answer as the matrix reads it: refused (29), or allowed (0) whatever else it says
    (an allowed create or delete that already happened answers TOPIC_ALREADY_EXISTS, ...)."""
    return TOPIC_DENIED if code == TOPIC_DENIED else 0


def _grpc_admin_outcome(cluster: LocalCluster, tls: TlsSettings, op: AclOperation, topic: str) -> int:
    """An admin request through the broker, which forwards it on behalf of the caller (KIP-590)."""
    from kraftlog.client import Admin

    with Admin(broker_address(cluster), request_timeout_ms=10_000, security_protocol="SSL", tls=tls) as admin:
        if op is AclOperation.CREATE:
            return _refused(admin.create_topics([NewTopic(topic, 1, 1)]).topics[0].error.code)
        if op is AclOperation.DELETE:
            return _refused(admin.delete_topics([topic]).topics[0].error.code)
        if op is AclOperation.ALTER:
            return _refused(admin.create_partitions({topic: 2}).results[0].error.code)
        if op is AclOperation.DESCRIBE_CONFIGS:
            return _refused(admin.describe_configs([(2, topic)]).results[0].error.code)
        changes = {(2, topic): [("retention.ms", 0, "3600000")]}
        return _refused(admin.incremental_alter_configs(changes).results[0].error.code)


def _grpc_outcome(cluster: LocalCluster, tls: TlsSettings, op: AclOperation, topic: str) -> int:
    if op in _ADMIN_OPS:
        return _grpc_admin_outcome(cluster, tls, op, topic)
    with open_channel(broker_address(cluster), tls=tls) as channel:
        stub = broker_pb2_grpc.BrokerServiceStub(channel)
        if op is AclOperation.WRITE:
            batch = build_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))
            P = broker_pb2.ProduceRequest
            req = P(
                acks=-1,
                timeout_ms=5000,
                topics=[P.TopicData(name=topic, partitions=[P.PartitionData(index=0, records=batch)])],
            )
            return stub.Produce(req, timeout=10).topics[0].partitions[0].error.code
        if op is AclOperation.READ:
            F = broker_pb2.FetchRequest
            req = F(
                replica_id=-1,
                max_wait_ms=0,
                max_bytes=1 << 20,
                topics=[
                    F.FetchTopic(
                        topic=topic,
                        partitions=[F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)],
                    )
                ],
            )
            return stub.Fetch(req, timeout=10).responses[0].partitions[0].error.code
        L = broker_pb2.ListOffsetsRequest
        req = L(
            replica_id=-1,
            topics=[L.Topic(name=topic, partitions=[L.Partition(partition_index=0, timestamp=-1)])],
        )
        return stub.ListOffsets(req, timeout=10).topics[0].partitions[0].error.code


def _kafka_admin_outcome(cluster: LocalCluster, tls: TlsSettings, op: AclOperation, topic: str) -> int:
    if op is AclOperation.CREATE:
        new = {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        answer = kafka_call(cluster, tls, 19, 7, {"topics": [new], "timeout": 10000, "validate_only": False})
        return _refused(int(answer.topics[0].error_code))
    if op is AclOperation.DELETE:
        answer = kafka_call(cluster, tls, 20, 6, {"topics": [{"name": topic}], "timeout": 10000})
        return _refused(int(answer.responses[0].error_code))
    if op is AclOperation.ALTER:
        grow = {"name": topic, "count": 2, "assignments": None}
        answer = kafka_call(cluster, tls, 37, 3, {"topics": [grow], "timeout": 10000, "validate_only": False})
        return _refused(int(answer.results[0].error_code))
    if op is AclOperation.DESCRIBE_CONFIGS:
        resource = {"resource_type": 2, "resource_name": topic, "configuration_keys": None}
        answer = kafka_call(cluster, tls, 32, 4, {"resources": [resource]})
        return _refused(int(answer.results[0].error_code))
    setting = {"name": "retention.ms", "config_operation": 0, "value": "3600000"}
    resource = {"resource_type": 2, "resource_name": topic, "configs": [setting]}
    answer = kafka_call(cluster, tls, 44, 1, {"resources": [resource], "validate_only": False})
    return _refused(int(answer.responses[0].error_code))


def _kafka_outcome(cluster: LocalCluster, tls: TlsSettings, op: AclOperation, topic: str) -> int:
    if op in _ADMIN_OPS:
        return _kafka_admin_outcome(cluster, tls, op, topic)
    if op is AclOperation.WRITE:
        batch = build_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))
        answer = kafka_call(
            cluster,
            tls,
            0,
            9,
            {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )
        return int(answer.responses[0].partition_responses[0].error_code)
    if op is AclOperation.READ:
        answer = kafka_call(
            cluster,
            tls,
            1,
            12,
            {
                "replica_id": -1,
                "max_wait": 0,
                "min_bytes": 0,
                "max_bytes": 1 << 20,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                    }
                ],
            },
        )
        return int(answer.responses[0].partitions[0].error_code)
    answer = kafka_call(
        cluster,
        tls,
        2,
        7,
        {"replica_id": -1, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
    )
    return int(answer.topics[0].partitions[0].error_code)


@pytest.mark.parametrize("protocol", ["grpc", "kafka"])
def test_the_acl_matrix_holds_on_both_protocols(cluster: LocalCluster, matrix: TlsSettings, protocol: str) -> None:
    outcome = _grpc_outcome if protocol == "grpc" else _kafka_outcome
    for op, permission, pattern in _CASES:
        topic = _topic(op, permission, pattern)
        expected = 0 if permission == "allow" else TOPIC_DENIED
        # the broker learns the ACLs from the metadata log a moment after they are committed
        wait_until(
            lambda: outcome(cluster, matrix, op, topic) == expected,
            15.0,
            what=f"{protocol} {op.name} on {topic} to answer {expected}",
        )


def test_a_topic_alice_may_not_describe_is_absent_from_her_metadata(cluster: LocalCluster, matrix: TlsSettings) -> None:
    with open_channel(broker_address(cluster), tls=matrix) as channel:
        answer = broker_pb2_grpc.BrokerServiceStub(channel).Metadata(
            broker_pb2.MetadataRequest(all_topics=True), timeout=10
        )
    shown = {t.name for t in answer.topics}
    assert _topic(AclOperation.READ, "allow", "literal") in shown  # Read implies Describe
    assert _topic(AclOperation.WRITE, "none", "literal") not in shown
    assert _topic(AclOperation.DESCRIBE, "deny", "prefixed") not in shown
    named = kafka_call(
        cluster,
        matrix,
        3,
        12,
        {"topics": [{"name": _topic(AclOperation.WRITE, "none", "literal")}], "allow_auto_topic_creation": False},
    )
    assert [int(t.error_code) for t in named.topics] == [TOPIC_DENIED]  # whether or not it exists


def test_alice_may_not_manage_acls_or_the_cluster(cluster: LocalCluster, matrix: TlsSettings) -> None:
    from kraftlog.client import Admin

    security = cluster.client_security("alice")
    with Admin(controller_address(cluster), **security) as admin:
        answer = admin.create_acls([_binding("x-t", "literal", AclOperation.READ, True)])
        assert answer.error.code == CLUSTER_DENIED
        assert admin.describe_quorum().error.code == CLUSTER_DENIED
        assert admin.describe_cluster().error.code == 0  # any principal may, as in Kafka


def test_client_quotas_need_the_cluster_config_operations(cluster: LocalCluster, matrix: TlsSettings) -> None:
    """Kafka's ACLs for KIP-546 (issue 24): DescribeConfigs / AlterConfigs on the cluster."""
    from kraftlog.client import Admin

    entry = {
        "entity": [{"entity_type": "user", "entity_name": "alice"}],
        "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
    }
    described = kafka_call(cluster, matrix, 48, 1, {"components": [], "strict": False})
    assert described.error_code == CLUSTER_DENIED and described.entries is None
    altered = kafka_call(cluster, matrix, 49, 1, {"entries": [entry], "validate_only": False})
    assert [int(e.error_code) for e in altered.entries] == [CLUSTER_DENIED]
    with Admin(controller_address(cluster), **cluster.client_security("alice")) as admin:
        assert (
            admin.alter_client_quotas([({"user": "alice"}, {"producer_byte_rate": 1024})]).error.code == CLUSTER_DENIED
        )
    admin_tls = tls_of(cluster, "admin")
    altered = kafka_call(cluster, admin_tls, 49, 1, {"entries": [entry], "validate_only": True})
    assert [int(e.error_code) for e in altered.entries] == [0]
    assert kafka_call(cluster, admin_tls, 48, 1, {"components": [], "strict": False}).error_code == 0


# ------------------------------------------------------------------ every RPC is authorized

_NO_DECISION = "without_authorization_decision"


def _grpc_methods() -> list[tuple[str, object, str]]:
    """(port kind, method descriptor, full path) of every method of every service the nodes serve."""
    from grpc_health.v1 import health_pb2

    from kraftlog.proto import admin_pb2, controller_pb2, diagnostics_pb2, group_pb2, share_pb2, txn_pb2

    out = []
    for module, service, ports in (
        (broker_pb2, "BrokerService", ("broker",)),
        (group_pb2, "GroupService", ("broker",)),
        (txn_pb2, "TxnService", ("broker",)),
        (share_pb2, "ShareCoordinatorService", ("broker",)),
        (share_pb2, "ShareService", ("broker",)),
        (diagnostics_pb2, "DiagnosticsService", ("broker",)),
        (admin_pb2, "AdminService", ("broker", "controller")),
        (controller_pb2, "ControllerService", ("controller",)),
        (health_pb2, "Health", ("broker", "controller")),
    ):
        descriptor = module.DESCRIPTOR.services_by_name[service]
        for method in descriptor.methods:
            for port in ports:
                out.append((port, method, f"/{descriptor.full_name}/{method.name}"))
    return out


def test_every_grpc_method_reaches_an_authorization_decision(cluster: LocalCluster) -> None:
    from google.protobuf import message_factory

    nobody = tls_of(cluster, "nobody")  # authenticated, no ACL: everything but public calls is refused
    methods = _grpc_methods()
    assert len(methods) > 50
    for port, method, path in methods:
        address = broker_address(cluster) if port == "broker" else controller_address(cluster)
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        with open_channel(address, tls=nobody) as channel:
            kwargs = {
                "request_serializer": request_class.SerializeToString,
                "response_deserializer": response_class.FromString,
            }
            try:
                if method.client_streaming:
                    call = (
                        channel.stream_stream(path, **kwargs)
                        if method.server_streaming
                        else channel.stream_unary(path, **kwargs)
                    )
                    result = call(iter([request_class()]), timeout=10)
                else:
                    call = (
                        channel.unary_stream(path, **kwargs)
                        if method.server_streaming
                        else channel.unary_unary(path, **kwargs)
                    )
                    result = call(request_class(), timeout=10)
                if method.server_streaming:
                    result = next(iter(result), None)
            except grpc.RpcError as err:
                assert err.code() != grpc.StatusCode.INTERNAL, f"{path} on the {port}: {err.details()}"
                if path.startswith("/grpc.health.v1.Health/") and err.code() in (
                    grpc.StatusCode.DEADLINE_EXCEEDED,  # Watch streams for as long as it is asked
                    grpc.StatusCode.UNIMPLEMENTED,  # List, in grpcio-health-checking versions without it
                ):
                    continue
                assert err.code() in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT), (
                    path,
                    port,
                    err,
                )
                continue
    for spec in cluster.nodes.values():
        assert _NO_DECISION not in spec.log_path.read_text(), f"node {spec.node_id} answered a call nobody authorized"


def test_every_kafka_api_reaches_an_authorization_decision(cluster: LocalCluster) -> None:
    nobody = tls_of(cluster, "nobody")
    versions = kafka_call(cluster, nobody, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
    served = {int(k.api_key): int(k.max_version) for k in versions.api_keys}
    assert len(served) > 40
    answered = 0
    for api_key, version in sorted(served.items()):
        if api_key == 0:  # Produce with acks=0 has no answer: ask with acks=1
            values: dict = {"acks": 1, "timeout": 1000, "topic_data": []}
        else:
            values = {}
        try:
            kafka_call(cluster, nobody, api_key, version, values)
            answered += 1
        except (ConnectionError, OSError):
            pass  # a request refused as malformed closes its connection: not what is checked here
    assert answered > 35
    for spec in cluster.nodes.values():
        assert _NO_DECISION not in spec.log_path.read_text(), (
            f"node {spec.node_id} answered a request nobody authorized"
        )
