"""Per-node Raft identity against impostors, on a real 3-controller cluster (issue 26).

The cluster runs the default ``controller.quorum.raft.authentication=node-key``: each controller has
its own Ed25519 key (0600 file) and knows every voter's public key. The attacker here holds node
``holder``'s secret (its key file) -- what the shared password used to be -- and claims another
voter's identity: it must be refused at its proof, logged with its address and the claimed id,
and the quorum keeps its leader and epoch. A peer of the password mode is refused at its hello,
naming the mode key. Helpers are `test_raft_hostile_peers`'s.
"""

from __future__ import annotations

import stat
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from kraftlog.deploy._cluster import LocalCluster

from ._fake_brokers import FakeBrokers
from .test_raft_hostile_peers import (
    assert_quorum_intact,
    connect,
    frame,
    peer_of,
    quorum_state,
    raft_address,
    read_frame,
    read_until_closed,
    refusal_of,
)

pytestmark = pytest.mark.integration

OVERRIDES = {"controller.quorum.election.timeout.ms": 1000, "broker.session.timeout.ms": 9000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path_factory.mktemp("identity") / "cluster", controllers=3, overrides=OVERRIDES)
    c.start(timeout_s=60)
    brokers = FakeBrokers(c.controller_addresses, str(c.cluster_id), [1001, 1002, 1003]).start()
    try:
        with c.admin(request_timeout_ms=15_000) as admin:
            brokers.wait_unfenced(admin)
        yield c
    finally:
        brokers.stop()
        c.stop()


def _identity_of(cluster: LocalCluster, holder: int, *, claim: int) -> object:
    """What an attacker holding ``holder``'s key file can build: its key, claiming voter ``claim``."""
    from kraftlog.quorum.raft._identity import NodeIdentity, load_private_key, parse_voter_keys

    config = tomllib.loads(Path(cluster.nodes[holder].config_path).read_text(encoding="utf-8"))
    entries = config["controller.quorum.raft.voter.keys"]
    key = load_private_key(cluster.raft_key_file(holder), config_key="test")
    return NodeIdentity(node_id=claim, private_key=key, voter_keys=parse_voter_keys(entries))


def _dial(cluster: LocalCluster, target: int, identity: object) -> tuple[object, bytes | None, bytes | None]:
    """Run the node-key initiator against ``target``; (socket, challenge, confirmation or None)."""
    from kraftlog.quorum.raft._identity import NodeKeyInitiator

    hs = NodeKeyInitiator(identity=identity, cluster_id=str(cluster.cluster_id), peer_id=target)  # type: ignore[arg-type]
    sock = connect(cluster, target)
    sock.sendall(frame(hs.hello()))
    challenge = read_frame(sock)
    if challenge is None:
        return sock, None, None
    proof, _ = hs.receive(challenge)
    assert proof is not None
    try:
        sock.sendall(frame(proof))
    except (BrokenPipeError, ConnectionResetError):
        return sock, challenge, None
    return sock, challenge, read_frame(sock)


def test_each_controller_holds_its_own_private_key(cluster: LocalCluster) -> None:
    publics = set()
    for nid in cluster.nodes:
        path = cluster.raft_key_file(nid)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        publics.add(path.read_bytes())
    assert len(publics) == len(cluster.nodes), "two controllers share a key"


def test_an_impostor_with_another_nodes_key_is_refused(cluster: LocalCluster) -> None:
    """The issue: holding node 2's secret, claim voter 1. With the shared password this was a voter."""
    before = quorum_state(cluster)
    target = min(cluster.nodes, key=lambda n: raft_address(cluster, n))  # dialled by both others
    dialers = [n for n in cluster.nodes if n != target]
    for holder in dialers:
        claim = next(n for n in dialers if n != holder)
        sock, challenge, confirm = _dial(cluster, target, _identity_of(cluster, holder, claim=claim))
        peer = peer_of(sock)
        read_until_closed(sock, 10)
        sock.close()
        assert challenge is not None, "a well-formed hello from a dialling voter id gets a challenge"
        assert confirm is None, f"node {target} confirmed an impostor holding node {holder}'s key as voter {claim}"
        event = refusal_of(cluster, target, peer)
        assert (event["error"], event.get("claimed_node_id")) == ("SASL_AUTHENTICATION_FAILED", claim), event
    assert_quorum_intact(cluster, before)


def test_a_voters_own_key_is_accepted(cluster: LocalCluster) -> None:
    """The control: the same attacker code with the key that *is* the claimed voter's gets a session
    (then it hangs up; the real voter reconnects)."""
    before = quorum_state(cluster)
    target = min(cluster.nodes, key=lambda n: raft_address(cluster, n))
    holder = next(n for n in cluster.nodes if n != target and n != before[0]) if len(cluster.nodes) > 2 else None
    assert holder is not None
    sock, challenge, confirm = _dial(cluster, target, _identity_of(cluster, holder, claim=holder))
    sock.close()
    assert challenge is not None and confirm is not None
    assert_quorum_intact(cluster, before)


def test_a_peer_of_the_password_mode_is_refused_at_its_hello(cluster: LocalCluster) -> None:
    from kraftlog.quorum.raft._wire import InitiatorHandshake, derive_auth_key

    before = quorum_state(cluster)
    target = min(cluster.nodes, key=lambda n: raft_address(cluster, n))
    claim = next(n for n in cluster.nodes if n != target)
    key = derive_auth_key(str(cluster.password), str(cluster.cluster_id))
    hs = InitiatorHandshake(auth_key=key, cluster_id=str(cluster.cluster_id), node_id=claim, peer_id=target)
    sock = connect(cluster, target)
    peer = peer_of(sock)
    sock.sendall(frame(hs.hello()))
    assert read_frame(sock) is None, "a password-mode hello must get no challenge"
    sock.close()
    event = refusal_of(cluster, target, peer)
    assert event["error"] == "UNSUPPORTED_VERSION" and "controller.quorum.raft.authentication" in event["detail"]
    assert_quorum_intact(cluster, before)
