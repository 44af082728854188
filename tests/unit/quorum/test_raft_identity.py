"""Per-node Raft identity (issue 26): the node-key handshake without sockets, key files, and the
config rules that pick a mode."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgpack
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kraftlog.common.config import ConfigError, NodeConfig
from kraftlog.common.errors import (
    CorruptMessageError,
    InconsistentClusterIdError,
    InconsistentVoterSetError,
    SaslAuthenticationFailedError,
    UnsupportedVersionError,
)
from kraftlog.quorum.raft._identity import (
    IdentityError,
    NodeIdentity,
    NodeKeyInitiator,
    NodeKeyResponder,
    generate_identity_key,
    identity_from_config,
    load_identity,
    load_private_key,
    parse_voter_keys,
    public_key_text,
)
from kraftlog.quorum.raft._wire import InitiatorHandshake, ResponderHandshake, derive_auth_key

CLUSTER = "IdentityTestCluster000A"
KEYS = {vid: Ed25519PrivateKey.generate() for vid in (1, 2, 3)}
PUBLIC = {vid: key.public_key() for vid, key in KEYS.items()}


def ident(vid: int, *, key: Ed25519PrivateKey | None = None) -> NodeIdentity:
    return NodeIdentity(node_id=vid, private_key=key or KEYS[vid], voter_keys=PUBLIC)


def run(initiator: NodeKeyInitiator, responder: NodeKeyResponder) -> tuple[Any, Any]:
    challenge, _ = responder.receive(initiator.hello())
    assert challenge is not None
    proof, _ = initiator.receive(challenge)
    assert proof is not None
    confirm, r_session = responder.receive(proof)
    assert confirm is not None
    _, i_session = initiator.receive(confirm)
    return i_session, r_session


def pair(me: int = 3, peer: int = 1, *, key: Ed25519PrivateKey | None = None) -> tuple[Any, Any]:
    return (
        NodeKeyInitiator(identity=ident(me, key=key), cluster_id=CLUSTER, peer_id=peer),
        NodeKeyResponder(identity=ident(peer), cluster_id=CLUSTER, initiators=frozenset({2, 3})),
    )


def test_two_voters_get_matching_sessions() -> None:
    i_session, r_session = run(*pair())
    assert r_session.open(i_session.seal({"type": "kl_keepalive"})) == {"type": "kl_keepalive"}
    assert i_session.open(r_session.seal({"type": "kl_keepalive"})) == {"type": "kl_keepalive"}


def test_sessions_are_fresh_per_connection() -> None:
    first, _ = run(*pair())
    _, second = run(*pair())
    with pytest.raises(CorruptMessageError):
        second.open(first.seal({"type": "kl_keepalive"}))


def test_a_node_holding_another_nodes_key_cannot_claim_a_third_voter() -> None:
    """Node 2's key, claiming voter 3, to voter 1: refused at the proof, naming the claimed id."""
    initiator, responder = pair(me=3, peer=1, key=KEYS[2])
    challenge, _ = responder.receive(initiator.hello())
    proof, _ = initiator.receive(challenge)
    with pytest.raises(SaslAuthenticationFailedError) as err:
        responder.receive(proof)
    assert err.value.context.get("claimed_node_id") == 3


def test_a_responder_with_the_wrong_key_is_not_confirmed() -> None:
    initiator = NodeKeyInitiator(identity=ident(3), cluster_id=CLUSTER, peer_id=1)
    impostor = NodeKeyResponder(identity=ident(1, key=KEYS[2]), cluster_id=CLUSTER, initiators=frozenset({3}))
    challenge, _ = impostor.receive(initiator.hello())
    proof, _ = initiator.receive(challenge)
    confirm, _ = impostor.receive(proof)
    with pytest.raises(SaslAuthenticationFailedError):
        initiator.receive(confirm)


def test_a_replayed_proof_fails_on_a_new_connection() -> None:
    initiator, responder = pair()
    challenge, _ = responder.receive(initiator.hello())
    proof, _ = initiator.receive(challenge)
    _, fresh = pair()
    fresh.receive(initiator.hello())  # the same hello replayed, a new challenge
    with pytest.raises(SaslAuthenticationFailedError):
        fresh.receive(proof)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"cluster": "AnotherCluster00000000A"}, InconsistentClusterIdError),
        ({"to": 2}, InconsistentVoterSetError),
        ({"from": 1}, InconsistentVoterSetError),  # a voter that does not dial node 1
        ({"from": 9}, InconsistentVoterSetError),
        ({"kx": b"\x00" * 31}, CorruptMessageError),
        ({"kx": b"\x00" * 32}, CorruptMessageError),  # a low-order point: no shared secret
        ({"v": 1}, UnsupportedVersionError),
    ],
)
def test_bad_hellos_are_refused(fields: dict[str, Any], error: type[Exception]) -> None:
    initiator, responder = pair()
    hello = msgpack.unpackb(initiator.hello(), raw=False)
    hello.update(fields)
    with pytest.raises(error):
        responder.receive(msgpack.packb(hello, use_bin_type=True))


def test_the_two_modes_refuse_each_other_at_the_hello_naming_the_mode_key() -> None:
    key = derive_auth_key("pw", CLUSTER, iterations=10)
    password_hello = InitiatorHandshake(auth_key=key, cluster_id=CLUSTER, node_id=3, peer_id=1).hello()
    with pytest.raises(UnsupportedVersionError, match="controller.quorum.raft.authentication"):
        pair()[1].receive(password_hello)
    password_responder = ResponderHandshake(auth_key=key, cluster_id=CLUSTER, node_id=1, initiators=frozenset({3}))
    with pytest.raises(UnsupportedVersionError, match="controller.quorum.raft.authentication"):
        password_responder.receive(pair()[0].hello())


def test_handshake_frames_fit_the_unauthenticated_limit() -> None:
    initiator, responder = pair()
    hello = initiator.hello()
    challenge, _ = responder.receive(hello)
    proof, _ = initiator.receive(challenge)
    confirm, _ = responder.receive(proof)
    assert max(len(hello), len(challenge), len(proof), len(confirm)) < 512


# ------------------------------------------------------------------ keys and config


def test_a_generated_key_is_0600_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    public = generate_identity_key(path)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert public_key_text(load_private_key(path, config_key="k")) == public
    with pytest.raises(FileExistsError):
        generate_identity_key(path)


def test_a_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.pem"
    generate_identity_key(path)
    os.chmod(path, 0o644)
    with pytest.raises(IdentityError, match="chmod 600") as err:
        load_private_key(path, config_key="controller.quorum.raft.identity.key.file")
    assert err.value.key == "controller.quorum.raft.identity.key.file"


@pytest.mark.parametrize("bad", [["1@abc"], ["x@" + public_key_text(PUBLIC[1])], ["1" + public_key_text(PUBLIC[1])]])
def test_bad_voter_keys_are_refused(bad: list[str]) -> None:
    with pytest.raises(ValueError):
        parse_voter_keys(bad)


def _node(tmp_path: Path, only_own_key: bool = False, **overrides: Any) -> tuple[NodeConfig, list[str]]:
    entries = []
    for vid in (1, 2, 3):
        path = tmp_path / f"n{vid}.key"
        entries.append(f"{vid}@{generate_identity_key(path)}")
    values: dict[str, Any] = {
        "node.id": 1,
        "process.roles": "controller",
        "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097",
        "log.dirs": str(tmp_path / "data"),
        "metadata.log.dir": str(tmp_path),
        "controller.quorum.raft.voter.keys": entries[0] if only_own_key else ",".join(entries),
        "controller.quorum.raft.identity.key.file": str(tmp_path / "n1.key"),
    }
    values.update(overrides)
    return NodeConfig({k: v for k, v in values.items() if v is not None}), entries


def _identity(cfg: NodeConfig) -> NodeIdentity | None:
    return identity_from_config(cfg, node_id=1, voters=[1, 2, 3], metadata_log_dir=cfg.metadata_log_dir)


def test_node_key_mode_loads_this_nodes_identity(tmp_path: Path) -> None:
    cfg, _ = _node(tmp_path)
    identity = _identity(cfg)
    assert identity is not None and identity.node_id == 1 and set(identity.voter_keys) == {1, 2, 3}
    assert identity.directory_id is None  # reserved for KIP-853


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"controller.quorum.raft.voter.keys": None}, "controller.quorum.raft.voter.keys"),
        ({"controller.quorum.raft.identity.key.file": "n2.key"}, "controller.quorum.raft.identity.key.file"),
        ({"controller.quorum.raft.identity.key.file": "missing.key"}, "controller.quorum.raft.identity.key.file"),
        (
            {"controller.quorum.raft.authentication": "password", "controller.quorum.raft.password": "pw"},
            "controller.quorum.raft.voter.keys",
        ),
        (
            {
                "controller.quorum.raft.authentication": "password",
                "controller.quorum.raft.voter.keys": None,
                "controller.quorum.raft.identity.key.file": None,
            },
            "controller.quorum.raft.password",
        ),
    ],
)
def test_refused_combinations_name_the_key(tmp_path: Path, overrides: dict[str, Any], key: str) -> None:
    fixed = {k: (str(tmp_path / v) if k.endswith("key.file") and v is not None else v) for k, v in overrides.items()}
    cfg, _ = _node(tmp_path, **fixed)
    with pytest.raises(ConfigError) as err:
        _identity(cfg)
    assert err.value.key == key


def test_a_key_list_missing_a_voter_is_refused(tmp_path: Path) -> None:
    _, entries = _node(tmp_path)
    with pytest.raises(IdentityError, match=r"lacks the public key of voter\(s\) \[3\]"):
        load_identity(node_id=1, voters=[1, 2, 3], key_file=tmp_path / "n1.key", voter_keys=entries[:2])


def test_the_committed_voter_set_supplies_the_keys_the_config_lacks(tmp_path: Path) -> None:
    """Issue 26: a voter added at run time restarts with only its own key configured; the keys of
    the others come from the committed voter set it kept, and win over a stale configured key."""
    _, entries = _node(tmp_path)
    own = entries[0]
    committed = {2: entries[1].split("@", 1)[1], 3: entries[2].split("@", 1)[1]}
    with pytest.raises(IdentityError, match=r"lacks the public key of voter\(s\) \[2, 3\]"):
        load_identity(node_id=1, voters=[1, 2, 3], key_file=tmp_path / "n1.key", voter_keys=[own])
    identity = load_identity(
        node_id=1, voters=[1, 2, 3], key_file=tmp_path / "n1.key", voter_keys=[own], committed_keys=committed
    )
    assert {vid: public_key_text(k) for vid, k in identity.voter_keys.items()} == {
        1: own.split("@", 1)[1],
        **committed,
    }
    stale = f"2@{generate_identity_key(tmp_path / 'old2.key')}"
    identity = load_identity(
        node_id=1, voters=[1, 2, 3], key_file=tmp_path / "n1.key", voter_keys=[own, stale], committed_keys=committed
    )
    assert public_key_text(identity.voter_keys[2]) == committed[2]
    (tmp_path / "cfg").mkdir()
    cfg, others = _node(tmp_path / "cfg", only_own_key=True)
    kept = {vid: entry.split("@", 1)[1] for vid, entry in ((2, others[1]), (3, others[2]))}
    dynamic = identity_from_config(
        cfg, node_id=1, voters=[1, 2, 3], metadata_log_dir=cfg.metadata_log_dir, dynamic=True, committed_keys=kept
    )
    assert dynamic is not None and set(dynamic.voter_keys) == {1, 2, 3}
    with pytest.raises(ConfigError):  # a static quorum: the configuration is the only source of keys
        identity_from_config(
            cfg, node_id=1, voters=[1, 2, 3], metadata_log_dir=cfg.metadata_log_dir, committed_keys=kept
        )


def test_password_mode_is_explicit(tmp_path: Path) -> None:
    cfg, _ = _node(
        tmp_path,
        **{
            "controller.quorum.raft.authentication": "password",
            "controller.quorum.raft.password": "pw",
            "controller.quorum.raft.voter.keys": None,
            "controller.quorum.raft.identity.key.file": None,
        },
    )
    assert _identity(cfg) is None


# ------------------------------------------------------------------------- observers (KIP-853)


def observer_pair(
    me: int, *, key: Ed25519PrivateKey, admit: bool = True, voter_keys: dict[int, Any] | None = None
) -> tuple[NodeKeyInitiator, NodeKeyResponder]:
    admitted: list[Any] = []
    responder = NodeKeyResponder(
        identity=NodeIdentity(node_id=1, private_key=KEYS[1], voter_keys=voter_keys or {1: PUBLIC[1]}),
        cluster_id=CLUSTER,
        initiators=frozenset(),
        admit_observer=(lambda o: admitted.append(o) or True) if admit else None,
    )
    initiator = NodeKeyInitiator(
        identity=NodeIdentity(
            node_id=me, private_key=key, voter_keys={1: PUBLIC[1]}, directory_id="DirOfNodeFour000000000"
        ),
        cluster_id=CLUSTER,
        peer_id=1,
        observer=True,
    )
    return initiator, responder


def test_an_observer_is_admitted_with_the_key_its_proof_verified() -> None:
    key = Ed25519PrivateKey.generate()
    initiator, responder = observer_pair(4, key=key)
    i_session, r_session = run(initiator, responder)
    assert r_session.open(i_session.seal({"type": "kl_keepalive"})) == {"type": "kl_keepalive"}
    assert responder.observer is not None
    assert (responder.observer.node_id, responder.observer.directory_id) == (4, "DirOfNodeFour000000000")
    assert responder.observer.public_key == public_key_text(key)


def test_an_observer_is_refused_where_observers_are_not_admitted() -> None:
    initiator, responder = observer_pair(4, key=Ed25519PrivateKey.generate(), admit=False)
    with pytest.raises(InconsistentVoterSetError, match="admits no observers"):
        responder.receive(initiator.hello())


def test_an_observer_cannot_prove_a_key_it_does_not_hold() -> None:
    """The hello offers one key, the proof is signed with another: refused at the proof."""
    initiator, responder = observer_pair(4, key=Ed25519PrivateKey.generate())
    hello = msgpack.unpackb(initiator.hello())
    hello["obs"]["key"] = public_key_bytes(Ed25519PrivateKey.generate())
    challenge, _ = responder.receive(msgpack.packb(hello))
    assert challenge is not None
    with pytest.raises(SaslAuthenticationFailedError):
        responder.receive(initiator.receive(challenge)[0] or b"")


def test_a_voter_that_still_thinks_it_observes_is_accepted_only_with_its_own_key() -> None:
    """The change adding voter 2 is in the responder's log, not yet in 2's: 2 connects as an
    observer and gets the voter link -- but with someone else's key it is refused."""
    keys = {1: PUBLIC[1], 2: PUBLIC[2]}
    initiator, responder = observer_pair(2, key=KEYS[2], voter_keys=keys)
    run(initiator, responder)
    assert responder.observer is None and responder.peer_id == 2, "a voter link, not an observer's"
    impostor, responder = observer_pair(2, key=Ed25519PrivateKey.generate(), voter_keys=keys)
    with pytest.raises(InconsistentVoterSetError, match="another key"):
        responder.receive(impostor.hello())


def public_key_bytes(key: Ed25519PrivateKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
