"""TLS on the Raft port, each certificate bound to its voter id, on a real 3-controller mTLS cluster (issue 26).

The cluster runs ``--security mtls`` (the CONTROLLER listener is SSL, node certificates
``CN=node-<id>`` from the cluster's own CA) in the explicit shared-password mode: the attacker
holds the password and node ``holder``'s certificate and key -- one compromised controller -- and
claims another voter's id. The password alone would let it in; its certificate names ``holder``, so
it is refused (``certificate_identity``) once the Raft handshake says whom it claims. A certificate
from a foreign CA, even one named ``CN=node-<claim>``, fails the TLS handshake; a plaintext peer
fails it too. The leader and epoch never move. A second cluster in the default node-key mode fails
over its leader over TLS, and a third, dynamic one admits an observer over TLS and makes it a voter.
Helpers are `test_raft_hostile_peers`'s.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftlog.deploy._certs import load_issued, make_ca, make_certificate
from kraftlog.deploy._cluster import LocalCluster, wait_until

from .test_raft_hostile_peers import connect, frame, peer_of, quorum_state, raft_address, read_frame, refusal_of

pytestmark = pytest.mark.integration

PASSWORD = "raft-tls-test-password"
OVERRIDES = {
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.raft.authentication": "password",
    "controller.quorum.raft.password": PASSWORD,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(
        tmp_path_factory.mktemp("raft-tls") / "cluster", controllers=3, security="mtls", overrides=OVERRIDES
    )
    c.start(timeout_s=60)
    try:
        yield c
    finally:
        c.stop()


def _roles(cluster: LocalCluster) -> tuple[int, int, int]:
    """(target, claim, holder): ``claim`` dials ``target`` (the greater Raft address dials), so the
    target expects that id on an incoming connection; ``holder`` is the third node."""
    ids = sorted(cluster.nodes, key=lambda nid: raft_address(cluster, nid))
    return ids[0], ids[-1], ids[1]


def _tls_client(cert: Path, key: Path, ca: Path | None) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    if ca is None:
        context.verify_mode = ssl.CERT_NONE
    else:
        context.load_verify_locations(ca)
    context.load_cert_chain(cert, key)
    return context


def _tls_dial(cluster: LocalCluster, target: int, context: ssl.SSLContext) -> tuple[ssl.SSLSocket | None, str]:
    """A TLS connection to ``target``'s Raft port (None when the node refused the handshake)."""
    raw = connect(cluster, target)
    peer = peer_of(raw)
    try:
        return context.wrap_socket(raw), peer
    except (ssl.SSLError, ConnectionResetError):
        raw.close()
        return None, peer


def _password_handshake(sock: socket.socket, cluster: LocalCluster, target: int, claim: int) -> bytes | None:
    """The password-mode initiator claiming ``claim``; the confirmation frame, or None if closed."""
    from kraftlog.quorum.raft._wire import InitiatorHandshake, derive_auth_key

    hs = InitiatorHandshake(
        auth_key=derive_auth_key(PASSWORD, str(cluster.cluster_id)),
        cluster_id=str(cluster.cluster_id),
        node_id=claim,
        peer_id=target,
    )
    sock.sendall(frame(hs.hello()))
    challenge = read_frame(sock)
    assert challenge is not None, "the node closed before its challenge: the password handshake itself failed"
    proof, _ = hs.receive(challenge)
    assert proof is not None
    try:
        sock.sendall(frame(proof))
        return read_frame(sock)
    except (ssl.SSLError, BrokenPipeError, ConnectionResetError):
        return None


def _intact(cluster: LocalCluster, before: tuple[int, int]) -> None:
    for nid in cluster.nodes:
        assert cluster.is_running(nid), f"controller {nid} died: see {cluster.nodes[nid].log_path}"
    assert quorum_state(cluster) == before, "the attack moved the leader or bumped the epoch"


def test_an_impostor_with_another_nodes_certificate_is_refused(cluster: LocalCluster) -> None:
    target, claim, holder = _roles(cluster)
    before = quorum_state(cluster)
    issued = load_issued(cluster.tls_dir, f"node-{holder}")
    sock, peer = _tls_dial(cluster, target, _tls_client(issued.certificate_path, issued.key_path, issued.ca_path))
    assert sock is not None, "a certificate of the cluster's CA must pass the TLS handshake"
    with sock:
        confirmation = _password_handshake(sock, cluster, target, claim)
    refusal = refusal_of(cluster, target, peer)
    assert refusal["reason"] == "certificate_identity", refusal
    assert f"authenticated {claim}" in refusal["detail"], refusal
    assert confirmation is None or not confirmation, "the impostor got a Raft session"
    _intact(cluster, before)


def test_a_certificate_of_a_foreign_ca_is_refused(cluster: LocalCluster, tmp_path: Path) -> None:
    target, claim, _holder = _roles(cluster)
    before = quorum_state(cluster)
    foreign = make_ca(tmp_path / "foreign", "a foreign CA")
    issued = make_certificate(foreign, tmp_path / "foreign", f"node-{claim}", ["127.0.0.1"])
    sock, peer = _tls_dial(cluster, target, _tls_client(issued.certificate_path, issued.key_path, None))
    if sock is not None:  # TLS 1.3: the client finishes first, the server's refusal follows
        with sock:
            sock.settimeout(5.0)
            try:
                sock.sendall(frame(b"x" * 16))
                answer = sock.recv(16)
            except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
                answer = b""
            assert answer == b"", "the node answered a peer with a foreign CA's certificate"
    refusal = refusal_of(cluster, target, peer)
    assert refusal["reason"] == "tls_handshake_failed", refusal
    _intact(cluster, before)


def test_a_plaintext_peer_is_refused(cluster: LocalCluster) -> None:
    from kraftlog.quorum.raft._wire import InitiatorHandshake, derive_auth_key

    target, claim, _holder = _roles(cluster)
    sock = connect(cluster, target)
    peer = peer_of(sock)
    hs = InitiatorHandshake(
        auth_key=derive_auth_key(PASSWORD, str(cluster.cluster_id)),
        cluster_id=str(cluster.cluster_id),
        node_id=claim,
        peer_id=target,
    )
    with sock:
        sock.sendall(frame(hs.hello()))
        assert read_frame(sock) is None, "a plaintext peer got a challenge from a TLS Raft port"
    assert refusal_of(cluster, target, peer)["reason"] == "tls_handshake_failed"


def test_node_key_controllers_fail_over_over_tls(tmp_path: Path) -> None:
    """The default node-key mode under mTLS: the quorum elects, the port speaks only TLS, and after
    the leader is killed the two others elect a new one over fresh TLS connections."""
    c = LocalCluster(
        tmp_path / "cluster",
        controllers=3,
        security="mtls",
        overrides={"controller.quorum.election.timeout.ms": 1000},
    )
    c.start(timeout_s=60)
    try:
        leader, epoch = quorum_state(c)
        target = next(nid for nid in c.nodes if nid != leader)
        sock = connect(c, target)
        peer = peer_of(sock)
        with sock:
            sock.sendall(frame(b"\x00" * 16))
            assert read_frame(sock) is None
        assert refusal_of(c, target, peer)["reason"] == "tls_handshake_failed"
        c.kill(leader)

        def new_leader() -> tuple[int, int] | None:
            state = quorum_state(c)
            return state if state[0] != leader else None

        new, new_epoch = wait_until(new_leader, 30, interval_s=0.2, what="a new leader after the kill")
        assert new != leader and new_epoch > epoch
    finally:
        c.stop()


def test_an_observer_is_admitted_and_added_as_a_voter_over_tls(tmp_path: Path) -> None:
    """A dynamic quorum under mTLS: controller 2, formatted without initial controllers, reaches the
    standalone voter over a TLS Raft connection with its own ``CN=node-2`` certificate, is admitted
    as an observer, and ``quorum add-controller`` (over the TLS controller listener) makes it a
    voter."""
    from .test_dynamic_quorum import _add_controller, _voters

    c = LocalCluster(
        tmp_path / "cluster",
        controllers=2,
        security="mtls",
        quorum="dynamic",
        initial_controllers=1,
        overrides={"controller.quorum.election.timeout.ms": 1000},
    )
    c.plan()
    try:
        c.start_node(1)
        with c.admin(request_timeout_ms=15_000) as admin:
            wait_until(lambda: admin.describe_quorum().leader_id == 1, 30, what="the standalone leader")
            c.start_node(2)
            wait_until(
                lambda: "raft_observer_authenticated" in Path(c.nodes[1].log_path).read_text(),
                30,
                what="voter 1 to admit observer 2",
            )
            _add_controller(c, 2)
            wait_until(lambda: set(_voters(admin)) == {1, 2}, 30, what="two voters")
        for nid in (1, 2):
            assert "tls_handshake_failed" not in Path(c.nodes[nid].log_path).read_text()
    finally:
        c.stop()
