"""What the security integration tests share: a mutual-TLS cluster with ACLs, client identities,
and one Kafka-protocol request over TLS."""

from __future__ import annotations

import io
import socket
import struct

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kraftlog.broker.kafka._kafka_wire import build
from kraftlog.common.security._tls import TlsSettings, client_context
from kraftlog.deploy._cluster import LocalCluster

TOPIC_DENIED = 29  # TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = 30
CLUSTER_DENIED = 31
TXN_DENIED = 53


def mtls_cluster(tmp_path_factory: pytest.TempPathFactory, name: str):  # a generator fixture's body
    """One controller and one broker, mutual TLS on every listener, Kafka's StandardAuthorizer."""
    c = LocalCluster(tmp_path_factory.mktemp(name), controllers=1, brokers=1, security="mtls")
    c.start(timeout_s=90)
    try:
        c.wait_unfenced_brokers(1, timeout_s=60)
        yield c
    finally:
        c.stop()


def tls_of(cluster: LocalCluster, name: str) -> TlsSettings:
    """The TLS settings of a client with a certificate ``CN=<name>`` (``admin``: a super user)."""
    security = cluster.client_certificate(name) if name != "admin" else cluster.client_security()
    return TlsSettings(
        keystore_certificate_chain=open(security["ssl_certfile"]).read(),
        keystore_key=open(security["ssl_keyfile"]).read(),
        truststore_location=security["ssl_cafile"],
    )


def broker_address(cluster: LocalCluster) -> str:
    return cluster.bootstrap_servers.split(",")[0]


def controller_address(cluster: LocalCluster) -> str:
    return cluster.controller_addresses[0]


def kafka_exchange(
    cluster: LocalCluster,
    tls: TlsSettings | None,
    api_key: int,
    version: int,
    values: dict,
    *,
    labelled: int | None = None,
) -> bytes:
    """One Kafka-protocol request of ``version`` on a fresh connection to the broker's Kafka
    listener, over TLS unless ``tls`` is None (its header saying ``labelled`` when given: a version
    kio has no schema for); the answer's frame, header included."""
    request_type = load_request_schema(api_key, version)
    header = build(
        request_type.__header_schema__,
        {
            "request_api_key": api_key,
            "request_api_version": version if labelled is None else labelled,
            "correlation_id": 7,
            "client_id": "security-test",
        },
    )
    out = io.BytesIO()
    entity_writer(request_type.__header_schema__)(out, header)
    entity_writer(request_type)(out, build(request_type, values))
    buf = out.getvalue()
    host, port = cluster.kafka_bootstrap_servers.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        sock = client_context(tls).wrap_socket(raw, server_hostname=host) if tls is not None else raw
        with sock:
            sock.sendall(struct.pack(">i", len(buf)) + buf)
            size = struct.unpack(">i", recv(sock, 4))[0]
            return recv(sock, size)


def read_answer(frame: bytes, api_key: int, version: int) -> object:
    """The answer of ``frame`` decoded as ``api_key``'s response at ``version``."""
    response_type = load_response_schema(api_key, version)
    _header, offset = entity_reader(response_type.__header_schema__)(frame, 0)
    body, _ = entity_reader(response_type)(frame, offset)
    return body


def kafka_call(cluster: LocalCluster, tls: TlsSettings | None, api_key: int, version: int, values: dict) -> object:
    """One Kafka-protocol request to the broker's Kafka listener, over TLS unless ``tls`` is None;
    the decoded answer."""
    return read_answer(kafka_exchange(cluster, tls, api_key, version, values), api_key, version)


def recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data
