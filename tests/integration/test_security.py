"""Security of a real mutual-TLS cluster with Kafka's StandardAuthorizer (issue 17), on both
protocols: who may connect, who may register as a broker, and an ACL matrix (Write, Read, Describe
x allow / deny / none x literal / prefixed) through gRPC and through the Kafka listener."""

from __future__ import annotations

import io
import itertools
import socket
import ssl
import struct
import time

import grpc
import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kraftlog.broker._kafka_wire import build
from kraftlog.client import NewTopic
from kraftlog.common._acl import AclOperation, AclPermissionType, PatternType, ResourceType
from kraftlog.common._tls import TlsSettings, client_context
from kraftlog.common.records import build_batch
from kraftlog.deploy._certs import make_ca, make_certificate
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc, open_channel, security_pb2

TOPIC_DENIED = 29  # TOPIC_AUTHORIZATION_FAILED
CLUSTER_DENIED = 31


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    c = LocalCluster(tmp_path_factory.mktemp("mtls"), controllers=1, brokers=1, security="mtls")
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers(1, timeout_s=60)
        yield c
    finally:
        c.stop()


def _tls(cluster: LocalCluster, name: str) -> TlsSettings:
    security = cluster.client_certificate(name) if name != "admin" else cluster.client_security()
    return TlsSettings(
        keystore_certificate_chain=open(security["ssl_certfile"]).read(),
        keystore_key=open(security["ssl_keyfile"]).read(),
        truststore_location=security["ssl_cafile"],
    )


def _broker(cluster: LocalCluster) -> str:
    return cluster.bootstrap_servers.split(",")[0]


def _controller(cluster: LocalCluster) -> str:
    return cluster.controller_addresses[0]


# ------------------------------------------------------------------ who may connect


def test_a_plaintext_client_on_a_tls_port_is_refused(cluster: LocalCluster) -> None:
    with grpc.insecure_channel(_broker(cluster)) as channel:
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
        with open_channel(_broker(cluster), tls=settings) as channel:
            with pytest.raises(grpc.RpcError) as err:
                broker_pb2_grpc.BrokerServiceStub(channel).Metadata(broker_pb2.MetadataRequest(), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _kafka_call(cluster, settings, 18, 3, {"client_software_name": "t", "client_software_version": "1"})


def test_a_broker_without_the_right_credentials_cannot_register(cluster: LocalCluster) -> None:
    intruder = _tls(cluster, "intruder")  # a certificate of the cluster's CA, but not a super user
    request = controller_pb2.RegisterBrokerRequest(broker_id=777, cluster_id=cluster.cluster_id, incarnation_id="x")
    with open_channel(_controller(cluster), tls=intruder) as channel:
        response = controller_pb2_grpc.ControllerServiceStub(channel).RegisterBroker(request, timeout=10)
    assert response.error.code == CLUSTER_DENIED
    with open_channel(_controller(cluster), tls=TlsSettings(truststore_location=str(cluster.tls_dir / "ca.crt"))) as ch:
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
    return _tls(cluster, "alice")


def _refused(code: int) -> int:
    """An admin answer as the matrix reads it: refused (29), or allowed (0) whatever else it says
    (an allowed create or delete that already happened answers TOPIC_ALREADY_EXISTS, ...)."""
    return TOPIC_DENIED if code == TOPIC_DENIED else 0


def _grpc_admin_outcome(cluster: LocalCluster, tls: TlsSettings, op: AclOperation, topic: str) -> int:
    """An admin request through the broker, which forwards it on behalf of the caller (KIP-590)."""
    from kraftlog.client import Admin

    with Admin(_broker(cluster), request_timeout_ms=10_000, security_protocol="SSL", tls=tls) as admin:
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
    with open_channel(_broker(cluster), tls=tls) as channel:
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


def _kafka_call(cluster: LocalCluster, tls: TlsSettings, api_key: int, version: int, values: dict) -> object:
    """One Kafka-protocol request over TLS to the broker's Kafka listener; the decoded answer."""
    request_type = load_request_schema(api_key, version)
    response_type = load_response_schema(api_key, version)
    header = build(
        request_type.__header_schema__,
        {"request_api_key": api_key, "request_api_version": version, "correlation_id": 7, "client_id": "security-test"},
    )
    out = io.BytesIO()
    entity_writer(request_type.__header_schema__)(out, header)
    entity_writer(request_type)(out, build(request_type, values))
    buf = out.getvalue()
    host, port = cluster.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
    context = client_context(tls)
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as sock,
    ):
        sock.sendall(struct.pack(">i", len(buf)) + buf)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        frame = _recv(sock, size)
    _header, offset = entity_reader(response_type.__header_schema__)(frame, 0)
    body, _ = entity_reader(response_type)(frame, offset)
    return body


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _kafka_admin_outcome(cluster: LocalCluster, tls: TlsSettings, op: AclOperation, topic: str) -> int:
    if op is AclOperation.CREATE:
        new = {"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        answer = _kafka_call(cluster, tls, 19, 7, {"topics": [new], "timeout": 10000, "validate_only": False})
        return _refused(int(answer.topics[0].error_code))
    if op is AclOperation.DELETE:
        answer = _kafka_call(cluster, tls, 20, 6, {"topics": [{"name": topic}], "timeout": 10000})
        return _refused(int(answer.responses[0].error_code))
    if op is AclOperation.ALTER:
        grow = {"name": topic, "count": 2, "assignments": None}
        answer = _kafka_call(cluster, tls, 37, 3, {"topics": [grow], "timeout": 10000, "validate_only": False})
        return _refused(int(answer.results[0].error_code))
    if op is AclOperation.DESCRIBE_CONFIGS:
        resource = {"resource_type": 2, "resource_name": topic, "configuration_keys": None}
        answer = _kafka_call(cluster, tls, 32, 4, {"resources": [resource]})
        return _refused(int(answer.results[0].error_code))
    setting = {"name": "retention.ms", "config_operation": 0, "value": "3600000"}
    resource = {"resource_type": 2, "resource_name": topic, "configs": [setting]}
    answer = _kafka_call(cluster, tls, 44, 1, {"resources": [resource], "validate_only": False})
    return _refused(int(answer.responses[0].error_code))


def _kafka_outcome(cluster: LocalCluster, tls: TlsSettings, op: AclOperation, topic: str) -> int:
    if op in _ADMIN_OPS:
        return _kafka_admin_outcome(cluster, tls, op, topic)
    if op is AclOperation.WRITE:
        batch = build_batch([(b"k", b"v")], timestamp_ms=int(time.time() * 1000))
        answer = _kafka_call(
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
        answer = _kafka_call(
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
    answer = _kafka_call(
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
    with open_channel(_broker(cluster), tls=matrix) as channel:
        answer = broker_pb2_grpc.BrokerServiceStub(channel).Metadata(
            broker_pb2.MetadataRequest(all_topics=True), timeout=10
        )
    shown = {t.name for t in answer.topics}
    assert _topic(AclOperation.READ, "allow", "literal") in shown  # Read implies Describe
    assert _topic(AclOperation.WRITE, "none", "literal") not in shown
    assert _topic(AclOperation.DESCRIBE, "deny", "prefixed") not in shown
    named = _kafka_call(
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
    with Admin(_controller(cluster), **security) as admin:
        answer = admin.create_acls([_binding("x-t", "literal", AclOperation.READ, True)])
        assert answer.error.code == CLUSTER_DENIED
        assert admin.describe_quorum().error.code == CLUSTER_DENIED
        assert admin.describe_cluster().error.code == 0  # any principal may, as in Kafka


# ------------------------------------------------------------------ every RPC is authorized

_NO_DECISION = "without_authorization_decision"


def _grpc_methods() -> list[tuple[str, object, str]]:
    """(port kind, method descriptor, full path) of every method of every service the nodes serve."""
    from grpc_health.v1 import health_pb2

    from kraftlog.proto import admin_pb2, controller_pb2, diagnostics_pb2, group_pb2, txn_pb2

    out = []
    for module, service, ports in (
        (broker_pb2, "BrokerService", ("broker",)),
        (group_pb2, "GroupService", ("broker",)),
        (txn_pb2, "TxnService", ("broker",)),
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

    nobody = _tls(cluster, "nobody")  # authenticated, no ACL: everything but public calls is refused
    methods = _grpc_methods()
    assert len(methods) > 50
    for port, method, path in methods:
        address = _broker(cluster) if port == "broker" else _controller(cluster)
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
    nobody = _tls(cluster, "nobody")
    versions = _kafka_call(cluster, nobody, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
    served = {int(k.api_key): int(k.max_version) for k in versions.api_keys}
    assert len(served) > 40
    answered = 0
    for api_key, version in sorted(served.items()):
        if api_key == 0:  # Produce with acks=0 has no answer: ask with acks=1
            values: dict = {"acks": 1, "timeout": 1000, "topic_data": []}
        else:
            values = {}
        try:
            _kafka_call(cluster, nobody, api_key, version, values)
            answered += 1
        except (ConnectionError, OSError):
            pass  # a request refused as malformed closes its connection: not what is checked here
    assert answered > 35
    for spec in cluster.nodes.values():
        assert _NO_DECISION not in spec.log_path.read_text(), (
            f"node {spec.node_id} answered a request nobody authorized"
        )


# ------------------------------------------------------------------ SASL/SCRAM on the Kafka listener


@pytest.fixture(scope="module")
def scram_cluster(tmp_path_factory: pytest.TempPathFactory):
    """One combined node: gRPC listeners on mTLS, the Kafka listener on SASL_SSL with SCRAM."""
    c = LocalCluster(tmp_path_factory.mktemp("scram"), controllers=1, combined=True, security="scram")
    c.start(timeout_s=90)  # creates the admin SCRAM user
    try:
        c.wait_unfenced_brokers(1, timeout_s=60)
        with c.admin() as admin:
            assert admin.create_topics([NewTopic("scram-t", 1, 1)]).topics[0].error.code == 0
            answer = admin.alter_user_scram_credentials(
                [("alice", 1, "alice-secret", 4096), ("alice", 2, "alice-secret", 8192)]
            )
            assert [r.error.code for r in answer.results] == [0]
        yield c
    finally:
        c.stop()


def _sasl_socket(cluster: LocalCluster) -> ssl.SSLSocket:
    host, port = cluster.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(cluster.tls_dir / "ca.crt"))
    return context.wrap_socket(socket.create_connection((host, int(port)), timeout=10), server_hostname=host)


def _call_on(sock: ssl.SSLSocket, api_key: int, version: int, values: dict) -> object:
    request_type, response_type = load_request_schema(api_key, version), load_response_schema(api_key, version)
    header = {"request_api_key": api_key, "request_api_version": version, "correlation_id": 3, "client_id": "t"}
    out = io.BytesIO()
    entity_writer(request_type.__header_schema__)(out, build(request_type.__header_schema__, header))
    entity_writer(request_type)(out, build(request_type, values))
    sock.sendall(struct.pack(">i", len(out.getvalue())) + out.getvalue())
    frame = _recv(sock, struct.unpack(">i", _recv(sock, 4))[0])
    _header, offset = entity_reader(response_type.__header_schema__)(frame, 0)
    return entity_reader(response_type)(frame, offset)[0]


def test_kafka_clients_authenticate_with_scram(scram_cluster: LocalCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        security = {**scram_cluster.kafka_client_security(), "sasl_mechanism": mechanism}
        producer = KafkaProducer(bootstrap_servers=scram_cluster.kafka_bootstrap_servers, acks="all", **security)
        producer.send("scram-t", b"via " + mechanism.encode()).get(timeout=30)
        producer.close()
    consumer = KafkaConsumer(
        "scram-t",
        bootstrap_servers=scram_cluster.kafka_bootstrap_servers,
        auto_offset_reset="earliest",
        **scram_cluster.kafka_client_security(),
    )
    values: list[bytes] = []
    try:

        def read_two() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
            return len(values) >= 2

        wait_until(read_two, 30.0, what="both records back over SASL_SSL")
    finally:
        consumer.close()
    assert values[:2] == [b"via SCRAM-SHA-256", b"via SCRAM-SHA-512"]  # fetched through TLS (no sendfile)


def test_a_wrong_password_and_a_replayed_exchange_are_refused(scram_cluster: LocalCluster) -> None:
    from kraftlog.common._acl import ScramMechanism
    from kraftlog.common._scram import ScramClient

    wrong = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "not-her-secret")
    with _sasl_socket(scram_cluster) as sock:
        assert int(_call_on(sock, 17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code) == 0
        first = _call_on(sock, 36, 2, {"auth_bytes": wrong.first_message()})
        answer = _call_on(sock, 36, 2, {"auth_bytes": wrong.final_message(first.auth_bytes)})
        assert int(answer.error_code) == 58  # SASL_AUTHENTICATION_FAILED
        with pytest.raises(ConnectionError):
            _call_on(sock, 3, 12, {"topics": None})  # and the connection is closed after the answer
    right = ScramClient(ScramMechanism.SCRAM_SHA_256, "alice", "alice-secret")
    with _sasl_socket(scram_cluster) as sock:
        _call_on(sock, 17, 1, {"mechanism": "SCRAM-SHA-256"})
        client_first = right.first_message()
        server_first = _call_on(sock, 36, 2, {"auth_bytes": client_first}).auth_bytes
        client_final = right.final_message(server_first)
        done = _call_on(sock, 36, 2, {"auth_bytes": client_final})
        assert int(done.error_code) == 0
        right.verify(done.auth_bytes)  # the server proved it knows alice's credential
    with _sasl_socket(scram_cluster) as sock:  # an eavesdropper replays both messages
        _call_on(sock, 17, 1, {"mechanism": "SCRAM-SHA-256"})
        _call_on(sock, 36, 2, {"auth_bytes": client_first})
        assert int(_call_on(sock, 36, 2, {"auth_bytes": client_final}).error_code) == 58


def test_nothing_but_the_exchange_is_served_before_authentication(scram_cluster: LocalCluster) -> None:
    with _sasl_socket(scram_cluster) as sock:
        versions = _call_on(sock, 18, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert {17, 36} <= {int(k.api_key) for k in versions.api_keys}
        with pytest.raises(ConnectionError):
            _call_on(sock, 3, 12, {"topics": None})


def test_a_scram_principal_is_authorized_by_acls(scram_cluster: LocalCluster) -> None:
    from kafka import KafkaConsumer

    alice = scram_cluster.kafka_client_security(user="alice", password="alice-secret")
    consumer = KafkaConsumer(bootstrap_servers=scram_cluster.kafka_bootstrap_servers, **alice)
    try:
        assert "scram-t" not in consumer.topics()  # User:alice has no ACL: the topic looks absent
    finally:
        consumer.close()
    with scram_cluster.admin() as admin:
        admin.create_acls(
            [
                security_pb2.AclBinding(
                    resource_type=2,
                    resource_name="scram-t",
                    pattern_type=3,
                    principal="User:alice",
                    host="*",
                    operation=3,
                    permission_type=3,
                )
            ]
        )
    consumer = KafkaConsumer(bootstrap_servers=scram_cluster.kafka_bootstrap_servers, **alice)
    try:
        wait_until(lambda: "scram-t" in consumer.topics(), 15.0, what="alice to see scram-t once she may read it")
    finally:
        consumer.close()


def test_grpc_callers_log_in_over_sasl_and_carry_a_session(scram_cluster: LocalCluster) -> None:
    """Every listener of a scram cluster is SASL_SSL: gRPC callers log in over SaslService (the
    nodes themselves with PLAIN), and a call without a session is refused."""
    from kraftlog.client import Admin
    from kraftlog.common import errors as kerr

    ca = TlsSettings(truststore_location=str(scram_cluster.tls_dir / "ca.crt"))
    with open_channel(scram_cluster.bootstrap_servers.split(",")[0], tls=ca) as channel:
        with pytest.raises(grpc.RpcError) as err:
            broker_pb2_grpc.BrokerServiceStub(channel).Metadata(broker_pb2.MetadataRequest(), timeout=5)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    alice = {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(scram_cluster.tls_dir / "ca.crt"),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
    }
    with Admin(_controller(scram_cluster), **alice, sasl_plain_password="alice-secret") as admin:
        assert admin.describe_quorum().error.code == CLUSTER_DENIED  # logged in as User:alice, no ACL
    with Admin(_controller(scram_cluster), request_timeout_ms=3000, **alice, sasl_plain_password="wrong") as admin:
        with pytest.raises(kerr.SaslAuthenticationFailedError):
            admin.describe_quorum()


# ------------------------------------------------------------------ groups, transactional ids, the cluster

GROUP_DENIED, TXN_DENIED = 30, 53


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
    return _tls(cluster, "carol")


def _grpc_join(cluster: LocalCluster, tls: TlsSettings, group: str) -> int:
    from kraftlog.proto import group_pb2, group_pb2_grpc

    with open_channel(_broker(cluster), tls=tls) as channel:
        request = group_pb2.JoinGroupRequest(
            group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=1000, protocol_type="consumer"
        )
        request.protocols.add(name="range", metadata=b"")
        return int(group_pb2_grpc.GroupServiceStub(channel).JoinGroup(request, timeout=15).error.code)


def _grpc_init_producer(cluster: LocalCluster, tls: TlsSettings, transactional_id: str | None) -> int:
    request = broker_pb2.InitProducerIdRequest(transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    if transactional_id is not None:
        request.transactional_id = transactional_id
    with open_channel(_broker(cluster), tls=tls) as channel:
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
    return int(_kafka_call(cluster, tls, 11, 9, values).error_code)


def _kafka_init_producer(cluster: LocalCluster, tls: TlsSettings, transactional_id: str | None) -> int:
    values = {
        "transactional_id": transactional_id,
        "transaction_timeout": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    return int(_kafka_call(cluster, tls, 22, 5, values).error_code)


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
        (lambda: init(cluster, _tls(cluster, "dave"), None), CLUSTER_DENIED, True),  # dave: nothing
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


def test_transactional_batches_need_a_transactional_id_the_caller_may_write(
    cluster: LocalCluster, matrix: TlsSettings
) -> None:
    """Write on the topic is not enough for transactional batches (Kafka's rule): without a
    transactional id they would open a transaction no coordinator knows, holding the LSO back."""
    topic = _topic(AclOperation.WRITE, "allow", "literal")  # alice may write it
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
        with open_channel(_broker(cluster), tls=matrix) as channel:
            answer = broker_pb2_grpc.BrokerServiceStub(channel).Produce(request, timeout=10)
        assert answer.topics[0].partitions[0].error.code == TXN_DENIED, transactional_id
