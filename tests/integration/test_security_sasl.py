"""SASL on a real cluster whose listeners are all SASL_SSL (issue 17): Kafka clients and kcat with
SCRAM, refused passwords and replayed exchanges, nothing before authentication, gRPC callers with
SaslService sessions, SCRAM principals under ACLs."""

from __future__ import annotations

import io
import socket
import ssl
import struct

import grpc
import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kraftlog.broker.kafka._kafka_wire import build
from kraftlog.client import NewTopic
from kraftlog.common.security._tls import TlsSettings
from kraftlog.deploy._cluster import LocalCluster, wait_until
from kraftlog.proto import broker_pb2, broker_pb2_grpc, open_channel, security_pb2
from tests.integration._security_helpers import (
    CLUSTER_DENIED,
    controller_address,
    recv,
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
    frame = recv(sock, struct.unpack(">i", recv(sock, 4))[0])
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
    from kraftlog.common.security._acl import ScramMechanism
    from kraftlog.common.security._scram import ScramClient

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
    with Admin(controller_address(scram_cluster), **alice, sasl_plain_password="alice-secret") as admin:
        assert admin.describe_quorum().error.code == CLUSTER_DENIED  # logged in as User:alice, no ACL
    with Admin(
        controller_address(scram_cluster), request_timeout_ms=3000, **alice, sasl_plain_password="wrong"
    ) as admin:
        with pytest.raises(kerr.SaslAuthenticationFailedError):
            admin.describe_quorum()
