"""Per-node Raft identity (issue 26): each controller authenticates on the Raft port as itself.

Why: with the shared ``controller.quorum.raft.password`` every controller held the one secret that
let anyone pose as *any* voter. Here each voter has its own Ed25519 key pair; its private key never
leaves its host (a 0600 PEM file, ``controller.quorum.raft.identity.key.file``) and every controller
is configured with every voter's *public* key (``controller.quorum.raft.voter.keys``,
``id@<base64 raw key>,...``). A node's secret therefore lets no one pose as another voter: a
signature made with node 2's key never verifies against voter 1's public key. A directory id field
is reserved for the dynamic quorum (KIP-853), which binds a voter to ``(id, directory id)``.

Handshake (protocol version 2, ``node-key`` mode)
-------------------------------------------------
Same framing, roles and ordering rules as version 1 (`quorum.raft._wire`), with signatures instead
of a shared-key MAC and an ephemeral X25519 exchange for the session keys (forward secrecy)::

    I -> R  HELLO      {"proto", "v": 2, "cluster", "from": I, "to": R, "nonce": 32 B, "kx": 32 B}
    R -> I  CHALLENGE  {"v": 2, "nonce": 32 B, "kx": 32 B}
    I -> R  PROOF      {"sig": Ed25519(sk_I, "kraftlog-raft/2 initiator" | T)}
    R -> I  CONFIRM    {"sig": Ed25519(sk_R, "kraftlog-raft/2 responder" | T)}

with ``T = msgpack([2, cluster id, I, R, nonce_I, nonce_R, kx_I, kx_R])``. R checks the hello
(version, cluster, ``to``, that ``from`` is a voter that dials R) before answering, verifies the
proof with *I's* public key before confirming, and I verifies the confirmation with *R's* public
key before using the session. The session keys are ``HMAC(X25519(kx), "kraftlog-raft/2 key i2r"
| T)`` and ``... r2i``: only the two holders of the ephemeral secrets know them, and the
signatures bind both ephemeral keys to the two identities. A node of the other mode is refused at
its hello (UNSUPPORTED_VERSION naming ``controller.quorum.raft.authentication``).

Observers (issue 26, KIP-853): a controller that is not a voter yet adds ``"obs": {"key": its raw
public key, "dir": its directory id}`` to its hello. A voter whose quorum admits observers accepts
it when the id is not a voter's, and verifies the proof with the offered key (`ObserverPeer`: the
key the leader later puts into the change that adds it). An id that *is* a voter in the
responder's log (the change adding it is not in the joiner's own log yet) is accepted as that voter
only with that voter's key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgpack
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from kraftlog.common.errors import (
    CorruptMessageError,
    InconsistentClusterIdError,
    InconsistentVoterSetError,
    SaslAuthenticationFailedError,
    UnsupportedVersionError,
)
from kraftlog.quorum.raft._wire import MAX_CLUSTER_ID_CHARS, NONCE_BYTES, PROTOCOL_NAME, Session

__all__ = [
    "AUTH_MODES",
    "AUTH_NODE_KEY",
    "AUTH_PASSWORD",
    "DEFAULT_KEY_FILE",
    "NODE_KEY_PROTOCOL_VERSION",
    "IdentityError",
    "NodeIdentity",
    "NodeKeyInitiator",
    "NodeKeyResponder",
    "generate_identity_key",
    "identity_from_config",
    "key_file_of",
    "load_identity",
    "load_private_key",
    "parse_public_key",
    "parse_voter_keys",
    "ObserverPeer",
    "public_key_text",
]

AUTH_NODE_KEY: Final = "node-key"
AUTH_PASSWORD: Final = "password"
AUTH_MODES: Final = (AUTH_NODE_KEY, AUTH_PASSWORD)
NODE_KEY_PROTOCOL_VERSION: Final = 2
_MODE_KEY: Final = "controller.quorum.raft.authentication"
_LABEL: Final = b"kraftlog-raft/2 "
_KEY_BYTES: Final = 32
_SIG_BYTES: Final = 64
_MAX_NODE_ID: Final = (1 << 31) - 1


class IdentityError(ValueError):
    """A key file or a voter key list is unusable; ``key`` names the config key at fault."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


# --------------------------------------------------------------------------------------- keys


def public_key_text(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """The base64 (standard alphabet) of the raw 32-byte public key, as ``voter.keys`` lists it."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode("ascii")


def parse_public_key(text: str) -> Ed25519PublicKey:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{text!r:.60} is not base64") from None
    if len(raw) != _KEY_BYTES:
        raise ValueError(f"an Ed25519 public key is {_KEY_BYTES} bytes, {text!r:.60} decodes to {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def parse_voter_keys(items: Iterable[str]) -> dict[int, Ed25519PublicKey]:
    """``["1@<base64>", ...]`` -> voter id -> public key; raises ``ValueError`` naming the bad item."""
    out: dict[int, Ed25519PublicKey] = {}
    for item in items:
        vid_text, sep, key_text = item.strip().partition("@")
        if not sep or not vid_text.isdigit():
            raise ValueError(f"{item!r:.80} is not id@<base64 Ed25519 public key>")
        vid = int(vid_text)
        if vid in out:
            raise ValueError(f"voter {vid} is listed twice")
        out[vid] = parse_public_key(key_text)
    return out


def generate_identity_key(path: str | os.PathLike[str]) -> str:
    """Write a new Ed25519 private key (PKCS8 PEM, mode 0600 from its first byte) to ``path``;
    returns its public key text. Refuses to overwrite an existing file."""
    from kraftlog.common import write_private_file

    target = Path(path)
    if target.exists():
        raise FileExistsError(f"{target} exists: a node keeps its Raft identity key")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    write_private_file(target, pem)
    return public_key_text(key)


def load_private_key(path: str | os.PathLike[str], *, config_key: str) -> Ed25519PrivateKey:
    """Read this node's key: an unencrypted PKCS8 PEM Ed25519 key readable by its owner only."""
    target = Path(path)
    try:
        st = target.stat()
        data = target.read_bytes()
    except OSError as err:
        raise IdentityError(f"cannot read the Raft identity key {target}: {err.strerror}", key=config_key) from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise IdentityError(
            f"the Raft identity key {target} is readable by others (mode {stat.S_IMODE(st.st_mode):o}); chmod 600 it",
            key=config_key,
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as err:
        raise IdentityError(f"{target} is not an unencrypted PEM private key: {err}", key=config_key) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise IdentityError(f"{target} holds a {type(key).__name__}, not an Ed25519 key", key=config_key)
    return key


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """This controller's Raft identity and every voter's public key (its own included)."""

    node_id: int
    private_key: Ed25519PrivateKey
    voter_keys: Mapping[int, Ed25519PublicKey]
    #: reserved for the dynamic quorum (KIP-853): a voter is (id, directory id)
    directory_id: str | None = None


@dataclass(frozen=True)
class ObserverPeer:
    """A controller that is not a voter yet (KIP-853's observer), as its handshake authenticated it."""

    node_id: int
    directory_id: str | None
    #: `public_key_text`'s form; the key its handshake proof verified with
    public_key: str


def _raw_public(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def load_identity(
    *,
    node_id: int,
    voters: Iterable[int],
    key_file: str | os.PathLike[str],
    voter_keys: Iterable[str],
    key_file_key: str = "controller.quorum.raft.identity.key.file",
    voter_keys_key: str = "controller.quorum.raft.voter.keys",
    allow_other_keys: bool = False,
    committed_keys: Mapping[int, str] | None = None,
) -> NodeIdentity:
    """Load and cross-check: every voter has a public key, and this node's private key is the one
    the others know as this voter's (else the others would refuse it, far from the cause).

    ``committed_keys`` (a dynamic quorum, issue 26): voter id -> public key text of the committed
    voter set this node kept (`quorum.raft.read_voters_file`). They take precedence over the
    configured keys of the same ids: a voter added at run time proved that key to the leader and
    every voter verifies it with that key, so a node restarted with only its own key configured
    still knows the others."""
    try:
        keys = parse_voter_keys(voter_keys)
        keys.update({vid: parse_public_key(text) for vid, text in (committed_keys or {}).items()})
    except ValueError as err:
        raise IdentityError(f"{voter_keys_key}: {err}", key=voter_keys_key) from None
    missing = sorted(set(voters) - set(keys))
    if missing:
        raise IdentityError(f"{voter_keys_key} lacks the public key of voter(s) {missing}", key=voter_keys_key)
    extra = sorted(set(keys) - set(voters))
    if extra and not allow_other_keys:
        raise IdentityError(f"{voter_keys_key} lists {extra}, which are not voters", key=voter_keys_key)
    private = load_private_key(key_file, config_key=key_file_key)
    if public_key_text(private) != public_key_text(keys[node_id]):
        raise IdentityError(
            f"{key_file} is not the key {voter_keys_key} lists for voter {node_id} "
            f"(its public key is {public_key_text(private)})",
            key=key_file_key,
        )
    if allow_other_keys:
        keys = {vid: key for vid, key in keys.items() if vid in set(voters)}
    return NodeIdentity(node_id=node_id, private_key=private, voter_keys=keys)


# --------------------------------------------------------------------------------------- handshake


def _unpack_map(body: bytes, keys: frozenset[str], what: str) -> dict[str, Any]:
    try:
        value = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
    except Exception as err:  # msgpack raises several unrelated types for bad input
        raise CorruptMessageError(f"{what}: not a msgpack body ({type(err).__name__})") from None
    if type(value) is not dict:
        raise CorruptMessageError(f"{what}: a map expected")
    if type(value.get("v")) is int and value["v"] != NODE_KEY_PROTOCOL_VERSION:
        raise UnsupportedVersionError(
            f"peer speaks Raft protocol version {value['v']}, this node {NODE_KEY_PROTOCOL_VERSION}: "
            f"{_MODE_KEY} must be the same on every controller (this one uses {AUTH_NODE_KEY})"
        )
    if frozenset(value) != keys:
        raise CorruptMessageError(f"{what}: expected the keys {sorted(keys)}, got {sorted(value)!r:.120}")
    return value


def _bytes(value: Any, size: int, what: str) -> bytes:
    if type(value) is not bytes or len(value) != size:
        raise CorruptMessageError(f"{what} must be {size} bytes")
    return value


def _transcript(cluster: str, i: int, r: int, nonce_i: bytes, nonce_r: bytes, kx_i: bytes, kx_r: bytes) -> bytes:
    packed: bytes = msgpack.packb(
        [NODE_KEY_PROTOCOL_VERSION, cluster, i, r, nonce_i, nonce_r, kx_i, kx_r], use_bin_type=True
    )
    return packed


def _session(shared: bytes, transcript: bytes, *, initiator: bool) -> Session:
    i2r = hmac.new(shared, _LABEL + b"key i2r" + transcript, hashlib.sha256).digest()
    r2i = hmac.new(shared, _LABEL + b"key r2i" + transcript, hashlib.sha256).digest()
    return Session(send_key=i2r, recv_key=r2i) if initiator else Session(send_key=r2i, recv_key=i2r)


def _verify(key: Ed25519PublicKey, signature: bytes, message: bytes) -> bool:
    try:
        key.verify(signature, message)
    except InvalidSignature:
        return False
    return True


def _exchange(mine: X25519PrivateKey, theirs: bytes) -> bytes:
    try:
        return mine.exchange(X25519PublicKey.from_public_bytes(theirs))
    except ValueError:  # a low-order point: no shared secret
        raise CorruptMessageError("kx is not a usable X25519 public key") from None


def _kx_public(key: X25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


class NodeKeyInitiator:
    """The dialling side (same interface as `quorum.raft._wire.InitiatorHandshake`)."""

    def __init__(
        self,
        *,
        identity: NodeIdentity,
        cluster_id: str,
        peer_id: int,
        nonce: Callable[[int], bytes] = os.urandom,
        observer: bool = False,
    ) -> None:
        self._id = identity
        self._observer = observer
        self._cluster = cluster_id
        self._peer = peer_id
        self._nonce = nonce(NONCE_BYTES)
        self._kx = X25519PrivateKey.generate()
        self._transcript: bytes | None = None
        self._shared: bytes | None = None
        self._done = False

    def hello(self) -> bytes:
        packed: bytes = msgpack.packb(
            {
                "proto": PROTOCOL_NAME,
                "v": NODE_KEY_PROTOCOL_VERSION,
                "cluster": self._cluster,
                "from": self._id.node_id,
                "to": self._peer,
                "nonce": self._nonce,
                "kx": _kx_public(self._kx),
                **(
                    {"obs": {"key": _raw_public(self._id.private_key), "dir": self._id.directory_id}}
                    if self._observer
                    else {}
                ),
            },
            use_bin_type=True,
        )
        return packed

    def receive(self, body: bytes) -> tuple[bytes | None, Session | None]:
        if self._done:
            raise CorruptMessageError("handshake already finished")
        if self._transcript is None:
            msg = _unpack_map(body, frozenset({"v", "nonce", "kx"}), "challenge")
            nonce_r = _bytes(msg["nonce"], NONCE_BYTES, "challenge: nonce")
            kx_r = _bytes(msg["kx"], _KEY_BYTES, "challenge: kx")
            self._shared = _exchange(self._kx, kx_r)
            self._transcript = _transcript(
                self._cluster, self._id.node_id, self._peer, self._nonce, nonce_r, _kx_public(self._kx), kx_r
            )
            signature = self._id.private_key.sign(_LABEL + b"initiator" + self._transcript)
            proof: bytes = msgpack.packb({"sig": signature}, use_bin_type=True)
            return proof, None
        msg = _unpack_map(body, frozenset({"sig"}), "confirm")
        signature = _bytes(msg["sig"], _SIG_BYTES, "confirm: sig")
        peer_key = self._id.voter_keys.get(self._peer)
        if peer_key is None or not _verify(peer_key, signature, _LABEL + b"responder" + self._transcript):
            raise SaslAuthenticationFailedError(f"the peer could not prove it is voter {self._peer}")
        self._done = True
        assert self._shared is not None
        return None, _session(self._shared, self._transcript, initiator=True)


class NodeKeyResponder:
    """The dialled side (same interface as `quorum.raft._wire.ResponderHandshake`)."""

    def __init__(
        self,
        *,
        identity: NodeIdentity,
        cluster_id: str,
        initiators: frozenset[int],
        nonce: Callable[[int], bytes] = os.urandom,
        admit_observer: Callable[[ObserverPeer], bool] | None = None,
    ) -> None:
        self._id = identity
        self._cluster = cluster_id
        self._initiators = initiators
        self._admit_observer = admit_observer
        #: set when the peer is an observer this node admitted (its key proven by the proof)
        self.observer: ObserverPeer | None = None
        self._peer_key: Ed25519PublicKey | None = None
        self._nonce = nonce(NONCE_BYTES)
        self._kx = X25519PrivateKey.generate()
        self._transcript: bytes | None = None
        self._shared: bytes | None = None
        self._done = False
        #: the voter id the peer claimed in its hello (authenticated only once a session exists)
        self.peer_id: int | None = None

    def receive(self, body: bytes) -> tuple[bytes | None, Session | None]:
        if self._done:
            raise CorruptMessageError("handshake already finished")
        if self._transcript is None:
            self._check_hello(body)
            challenge: bytes = msgpack.packb(
                {"v": NODE_KEY_PROTOCOL_VERSION, "nonce": self._nonce, "kx": _kx_public(self._kx)}, use_bin_type=True
            )
            return challenge, None
        msg = _unpack_map(body, frozenset({"sig"}), "proof")
        signature = _bytes(msg["sig"], _SIG_BYTES, "proof: sig")
        assert self.peer_id is not None
        peer_key = self._peer_key if self._peer_key is not None else self._id.voter_keys[self.peer_id]
        if not _verify(peer_key, signature, _LABEL + b"initiator" + self._transcript):
            raise SaslAuthenticationFailedError(
                f"the peer failed to prove it is voter {self.peer_id} (a signature of another key)",
                claimed_node_id=self.peer_id,
            )
        self._done = True
        confirm: bytes = msgpack.packb(
            {"sig": self._id.private_key.sign(_LABEL + b"responder" + self._transcript)}, use_bin_type=True
        )
        assert self._shared is not None
        return confirm, _session(self._shared, self._transcript, initiator=False)

    def _check_hello(self, body: bytes) -> None:
        try:
            raw = msgpack.unpackb(body, raw=False, strict_map_key=True, use_list=True)
        except Exception as err:
            raise CorruptMessageError(f"hello: not a msgpack body ({type(err).__name__})") from None
        if type(raw) is not dict or raw.get("proto") != PROTOCOL_NAME:
            raise CorruptMessageError("not a kraftlog Raft hello")
        keys = frozenset({"proto", "v", "cluster", "from", "to", "nonce", "kx"})
        msg = _unpack_map(body, keys | {"obs"} if "obs" in raw else keys, "hello")
        cluster, sender, target = msg["cluster"], msg["from"], msg["to"]
        if type(cluster) is not str or not 0 < len(cluster) <= MAX_CLUSTER_ID_CHARS:
            raise CorruptMessageError("hello: cluster must be a short string")
        for value in (sender, target):
            if type(value) is not int or not 0 <= value <= _MAX_NODE_ID:
                raise CorruptMessageError("hello: from and to must be node ids")
        nonce_i = _bytes(msg["nonce"], NONCE_BYTES, "hello: nonce")
        kx_i = _bytes(msg["kx"], _KEY_BYTES, "hello: kx")
        if cluster != self._cluster:
            raise InconsistentClusterIdError(f"peer belongs to cluster {cluster!r}", claimed_node_id=sender)
        if target != self._id.node_id:
            raise InconsistentVoterSetError(
                f"peer dialled node {target}, this is node {self._id.node_id}", claimed_node_id=sender
            )
        if "obs" in msg:
            self._check_observer(sender, msg["obs"])
        elif sender not in self._initiators or sender not in self._id.voter_keys:
            raise InconsistentVoterSetError(
                f"node {sender} is not a voter that dials node {self._id.node_id} "
                f"(those are {sorted(self._initiators)})",
                claimed_node_id=sender,
            )
        self.peer_id = sender
        self._shared = _exchange(self._kx, kx_i)
        self._transcript = _transcript(
            self._cluster, sender, self._id.node_id, nonce_i, self._nonce, kx_i, _kx_public(self._kx)
        )

    def _check_observer(self, sender: int, value: Any) -> None:
        """An observer (a controller not yet a voter, KIP-853) offers its public key and directory id;
        the proof that follows must verify with that key, and this node's policy must admit it."""
        if type(value) is not dict or frozenset(value) != {"key", "dir"}:
            raise CorruptMessageError("hello: obs must be a map of key and dir")
        key, directory = value["key"], value["dir"]
        _bytes(key, _KEY_BYTES, "hello: obs key")
        if directory is not None and (type(directory) is not str or not 0 < len(directory) <= 64):
            raise CorruptMessageError("hello: obs dir must be a short string or nil")
        peer_key = Ed25519PublicKey.from_public_bytes(key)
        voter_key = self._id.voter_keys.get(sender)
        if voter_key is not None:
            # A voter that does not know it is one yet (the change adding it is in our log, not in
            # its own): accept it as that voter -- with that voter's key only -- so it gets the entry.
            if public_key_text(voter_key) != public_key_text(peer_key):
                raise InconsistentVoterSetError(
                    f"node {sender} is a voter with another key: it cannot connect as an observer",
                    claimed_node_id=sender,
                )
            self._peer_key = voter_key
            return
        observer = ObserverPeer(node_id=sender, directory_id=directory, public_key=public_key_text(peer_key))
        if self._admit_observer is None or not self._admit_observer(observer):
            raise InconsistentVoterSetError(
                f"node {sender} is not a voter and this node admits no observers", claimed_node_id=sender
            )
        self._peer_key = peer_key
        self.observer = observer


# --------------------------------------------------------------------------------------- config

MODE_KEY: Final = _MODE_KEY
KEY_FILE_KEY: Final = "controller.quorum.raft.identity.key.file"
VOTER_KEYS_KEY: Final = "controller.quorum.raft.voter.keys"
PASSWORD_KEY: Final = "controller.quorum.raft.password"
#: the key file's name in the metadata log dir when ``identity.key.file`` is unset
DEFAULT_KEY_FILE: Final = "raft-identity.key"


def key_file_of(config: Mapping[str, Any], metadata_log_dir: str) -> Path:
    """This node's identity key file: the configured one, else `DEFAULT_KEY_FILE` in the metadata dir."""
    configured = config[KEY_FILE_KEY]
    return Path(configured) if configured else Path(metadata_log_dir) / DEFAULT_KEY_FILE


def identity_from_config(
    config: Mapping[str, Any],
    *,
    node_id: int,
    voters: Iterable[int],
    metadata_log_dir: str,
    dynamic: bool = False,
    committed_keys: Mapping[int, str] | None = None,
) -> NodeIdentity | None:
    """The Raft identity the node config asks for: None in ``password`` mode (then the password is
    required). Contradictory settings fail here, at start, naming the key (``ConfigError``).
    ``committed_keys``: see `load_identity` (a dynamic quorum only)."""
    from kraftlog.common.config import ConfigError

    mode = config[MODE_KEY]
    if mode == AUTH_PASSWORD:
        for key in (VOTER_KEYS_KEY, KEY_FILE_KEY):
            if config[key]:
                raise ConfigError(
                    f"'{key}' is set but '{MODE_KEY}' is {AUTH_PASSWORD}: per-node keys and the shared password "
                    f"do not mix; set {MODE_KEY}={AUTH_NODE_KEY} or remove '{key}'",
                    key=key,
                )
        if config[PASSWORD_KEY] is None:
            raise ConfigError(
                f"'{MODE_KEY}' is {AUTH_PASSWORD} but '{PASSWORD_KEY}' is not set", key=PASSWORD_KEY, value=None
            )
        return None
    if not config[VOTER_KEYS_KEY]:
        raise ConfigError(
            f"'{MODE_KEY}' is {AUTH_NODE_KEY} (the default) but '{VOTER_KEYS_KEY}' is empty: list every voter's "
            f"public key (`kraftlog storage format` prints this node's), or set {MODE_KEY}={AUTH_PASSWORD} to "
            "keep the shared password",
            key=VOTER_KEYS_KEY,
        )
    try:
        return load_identity(
            node_id=node_id,
            voters=voters,
            key_file=key_file_of(config, metadata_log_dir),
            voter_keys=config[VOTER_KEYS_KEY],
            # a dynamic quorum (KIP-853): the config may list controllers that are not voters (yet);
            # the keys of voters added later travel in the voter changes
            allow_other_keys=dynamic,
            committed_keys=committed_keys if dynamic else None,
        )
    except IdentityError as err:
        raise ConfigError(str(err), key=err.key) from None
