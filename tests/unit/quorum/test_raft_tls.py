"""`quorum.raft._raft_tls`: TLS over memory BIOs and the certificate's node id (issue 26)."""

from __future__ import annotations

import ssl

import pytest

from kraftlog.deploy._certs import IssuedCertificate, make_ca, make_certificate
from kraftlog.quorum.raft._raft_tls import RaftTls, TlsLayer, certificate_node_ids, node_certificate_name


def _tls(issued: IssuedCertificate) -> RaftTls:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for context in (server, client):
        context.load_cert_chain(issued.certificate_path, issued.key_path)
        context.load_verify_locations(issued.ca_path)
    return RaftTls(server=server, client=client)


def _pump(client: TlsLayer, server: TlsLayer) -> tuple[bytes, bytes]:
    """Move ciphertext both ways until quiet; (plaintext the client got, plaintext the server got)."""
    got_client, got_server = b"", b""
    for _ in range(10):
        to_server, to_client = client.outgoing(), server.outgoing()
        if not to_server and not to_client:
            break
        if to_server:
            got_server += server.feed(to_server)
        if to_client:
            got_client += client.feed(to_client)
    return got_client, got_server


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, IssuedCertificate]:
    base = tmp_path_factory.mktemp("raft-tls")
    ca = make_ca(base / "ca")
    foreign = make_ca(base / "foreign", "foreign")
    return {
        "node-1": make_certificate(ca, base / "ca", "node-1", ["127.0.0.1"]),
        "node-2": make_certificate(ca, base / "ca", "node-2", ["127.0.0.1"]),
        "foreign-2": make_certificate(foreign, base / "foreign", "node-2", ["127.0.0.1"]),
    }


def test_certificate_node_ids_reads_cn_and_dns_names() -> None:
    cert = {
        "subject": ((("commonName", "node-7"),), (("organizationName", "node-9"),)),
        "subjectAltName": (("DNS", "node-12"), ("DNS", "broker-3"), ("IP Address", "127.0.0.1")),
    }
    assert certificate_node_ids(cert) == {7, 12}
    assert node_certificate_name(7) == "node-7"


@pytest.mark.parametrize("name", ["node-", "node-x1", "node-01", "node--1", "nodes-1", "admin"])
def test_certificate_node_ids_ignores_other_names(name: str) -> None:
    assert certificate_node_ids({"subject": ((("commonName", name),),)}) == frozenset()


def test_two_nodes_of_one_ca_talk_and_see_each_others_id(certs: dict[str, IssuedCertificate]) -> None:
    client = _tls(certs["node-2"]).layer(server_side=False)
    server = _tls(certs["node-1"]).layer(server_side=True)
    client.write(b"hello before the handshake")  # held until TLS is up
    client.start()
    got_client, got_server = _pump(client, server)
    assert client.established and server.established
    assert got_server == b"hello before the handshake"
    server.write(b"reply")
    got_client, _ = _pump(client, server)
    assert got_client == b"reply"
    assert server.peer_node_ids() == {2}
    assert client.peer_node_ids() == {1}


def test_a_foreign_ca_fails_the_handshake(certs: dict[str, IssuedCertificate]) -> None:
    client = _tls(certs["foreign-2"]).layer(server_side=False)
    client._obj.context.verify_mode = ssl.CERT_NONE  # the attacker does not check the server
    server = _tls(certs["node-1"]).layer(server_side=True)
    client.start()
    with pytest.raises(ssl.SSLError):
        _pump(client, server)
    assert server.peer_node_ids() == frozenset()


def test_no_peer_ids_before_the_handshake(certs: dict[str, IssuedCertificate]) -> None:
    layer = _tls(certs["node-1"]).layer(server_side=True)
    assert not layer.established and layer.peer_node_ids() == frozenset()
    assert layer.feed(b"") == b""
