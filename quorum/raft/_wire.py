"""The controller Raft wire format: frames, handshake, sessions, message and command codecs.

Pure logic, no sockets (`quorum.raft._transport` drives it over TCP; unit tests drive it directly).
Nothing here unpickles: every byte that arrives from a socket -- and every Raft log entry, which
also arrives from a socket -- is msgpack decoded by this module and checked against an explicit
shape before pysyncobj sees it. Anything else is refused with a typed Kafka error.

Frames
------
Every frame is ``u32 length (big endian) | body``. The length is checked against the limit of the
connection's phase *before* anything of the body is buffered: ``MAX_HANDSHAKE_FRAME_BYTES`` (512)
until the peer is authenticated, ``MAX_FRAME_BYTES`` afterwards. ``MAX_FRAME_BYTES`` is derived from
the largest Raft message kraftlog sends: pysyncobj packs entries into one ``append_entries`` until
they reach ``appendEntriesBatchSizeBytes`` (set to ``MAX_COMMAND_BYTES + 1`` so one entry never
takes pysyncobj's pickle-only chunked path), so a message carries less than two maximal commands;
``MAX_FRAME_BYTES`` is that plus 1 MiB for msgpack and AEAD overhead. The transport splits a larger
``append_entries`` (many tiny entries) into consecutive ones.

Handshake (protocol version 1)
------------------------------
The dialling voter is the *initiator* I, the dialled one the *responder* R (pysyncobj's rule: the
voter with the greater ``host:port`` dials). Handshake bodies are msgpack maps::

    I -> R  HELLO      {"proto": "kraftlog-raft", "v": 1, "cluster": id, "from": I, "to": R, "nonce": 32 bytes}
    R -> I  CHALLENGE  {"v": 1, "nonce": 32 bytes}
    I -> R  PROOF      {"mac": HMAC(K, "kraftlog-raft/1 initiator" | T)}
    R -> I  CONFIRM    {"mac": HMAC(K, "kraftlog-raft/1 responder" | T)}

with ``T = msgpack([1, cluster id, I, R, nonce_I, nonce_R])`` and ``K`` the auth key,
``PBKDF2-HMAC-SHA256(password, "kraftlog-raft/1" | cluster id, 100,000 rounds)``. Ordering rules:
R checks the hello (version, cluster id, that ``to`` is R and ``from`` a voter that dials R) before
it answers at all, so a peer of another cluster or with an unknown id learns nothing; I proves
first, so an unauthenticated peer never obtains a MAC to attack offline; R confirms only after
checking the proof, and I accepts the session only after checking the confirmation (mutual).
Each side contributes a fresh random nonce, so a recorded handshake replayed later fails its MAC;
the password itself never travels. HMACs are compared in constant time.

Sessions
--------
After the handshake each direction has its own key, ``HMAC(K, "kraftlog-raft/1 key i2r" | T)``
and ``... r2i``, fresh per connection. Every later frame body is
``ChaCha20-Poly1305(key, nonce = 4 zero bytes | u64 counter, msgpack(message))``: the counter
starts at 0 per direction and increments per frame, so a frame that is injected, replayed, dropped
or reordered fails to open and the connection is dropped. (pysyncobj's own transport encrypted with
the password too; confidentiality is kept.)

The Raft messages and commands these sessions carry: `quorum.raft._raft_messages`.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Callable
from typing import Any, Final

import msgpack
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from kraftlog.common.errors import (
    CorruptMessageError,
    InconsistentClusterIdError,
    InconsistentVoterSetError,
    MessageTooLargeError,
    SaslAuthenticationFailedError,
    UnsupportedVersionError,
)
from kraftlog.quorum.raft._raft_messages import (
    MAX_COMMAND_BYTES,
    checked_map,
    decode_message,
    encode_message,
    is_uint,
    unpack_body,
)

__all__ = [
    "FrameReader",
    "HEADER",
    "InitiatorHandshake",
    "MAX_FRAME_BYTES",
    "MAX_HANDSHAKE_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "ResponderHandshake",
    "Session",
    "derive_auth_key",
    "frame",
]

PROTOCOL_VERSION: Final = 1
PROTOCOL_NAME: Final = "kraftlog-raft"
#: Largest frame once authenticated (module docstring: two maximal commands plus overhead).
MAX_FRAME_BYTES: Final = 2 * MAX_COMMAND_BYTES + (1 << 20)
#: Largest frame before authentication: the biggest handshake body is ~140 bytes.
MAX_HANDSHAKE_FRAME_BYTES: Final = 512
HEADER: Final = struct.Struct(">I")
NONCE_BYTES: Final = 32
KDF_ITERATIONS: Final = 100_000
MAX_CLUSTER_ID_CHARS: Final = 64
_MAX_NODE_ID: Final = (1 << 31) - 1


_LABEL: Final = b"kraftlog-raft/1 "


def frame(body: bytes) -> bytes:
    """``u32 BE length | body``."""
    return HEADER.pack(len(body)) + body


def derive_auth_key(password: str, cluster_id: str, *, iterations: int = KDF_ITERATIONS) -> bytes:
    """The 32-byte handshake key: the password stretched (it may be guessable) and bound to the
    cluster id (the same password in two clusters gives two keys)."""
    salt = _LABEL + cluster_id.encode("utf-8")
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)


# --------------------------------------------------------------------------------------- frames


class FrameReader:
    """Incremental frame parser with a hard, phase-dependent size limit.

    ``feed`` returns complete frame bodies in order. An announced length above ``limit`` raises
    ``MessageTooLargeError`` as soon as the four header bytes are in, before the body is buffered;
    ``wanted()`` says how many bytes the next read may take so the caller never reads (and holds)
    more than the current frame allows.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = bytearray()
        self._need: int | None = None  # body length of the frame being read, once its header is in

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def wanted(self) -> int:
        """Bytes that may be read now without exceeding the current frame (at least 1)."""
        if self._need is None:
            return max(1, HEADER.size - len(self._buf))
        return max(1, HEADER.size + self._need - len(self._buf))

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out: list[bytes] = []
        while True:
            if self._need is None:
                if len(self._buf) < HEADER.size:
                    return out
                (length,) = HEADER.unpack_from(self._buf)
                if length > self.limit:
                    self._buf.clear()
                    raise MessageTooLargeError(f"frame of {length} bytes announced; the limit is {self.limit}")
                self._need = length
            end = HEADER.size + self._need
            if len(self._buf) < end:
                return out
            out.append(bytes(self._buf[HEADER.size : end]))
            del self._buf[:end]
            self._need = None


# --------------------------------------------------------------------------------------- handshake


def _transcript(cluster_id: str, initiator: int, responder: int, nonce_i: bytes, nonce_r: bytes) -> bytes:
    packed: bytes = msgpack.packb(
        [PROTOCOL_VERSION, cluster_id, initiator, responder, nonce_i, nonce_r], use_bin_type=True
    )
    return packed


def _mac(key: bytes, label: bytes, transcript: bytes) -> bytes:
    return hmac.new(key, _LABEL + label + transcript, hashlib.sha256).digest()


def _mac_field(body: bytes, what: str) -> bytes:
    mac = checked_map(unpack_body(body), frozenset({"mac"}), what)["mac"]
    if type(mac) is not bytes or len(mac) != 32:
        raise CorruptMessageError(f"{what}: mac must be 32 bytes")
    return mac


class InitiatorHandshake:
    """The dialling side: ``hello()``, then ``receive(challenge) -> (proof, None)``, then
    ``receive(confirm) -> (None, Session)``. Raises a ``KafkaError`` on anything unexpected."""

    def __init__(
        self,
        *,
        auth_key: bytes,
        cluster_id: str,
        node_id: Any,
        peer_id: int,
        nonce: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self._key = auth_key
        self._cluster = cluster_id
        self._me = node_id
        self._peer = peer_id
        self._nonce = nonce(NONCE_BYTES)
        self._transcript: bytes | None = None
        self._done = False

    def hello(self) -> bytes:
        packed: bytes = msgpack.packb(
            {
                "proto": PROTOCOL_NAME,
                "v": PROTOCOL_VERSION,
                "cluster": self._cluster,
                "from": self._me,
                "to": self._peer,
                "nonce": self._nonce,
            },
            use_bin_type=True,
        )
        return packed

    def receive(self, body: bytes) -> tuple[bytes | None, Session | None]:
        if self._done:
            raise CorruptMessageError("handshake already finished")
        if self._transcript is None:
            msg = checked_map(unpack_body(body), frozenset({"v", "nonce"}), "challenge")
            if type(msg["v"]) is not int or msg["v"] != PROTOCOL_VERSION:
                raise UnsupportedVersionError(f"peer speaks Raft protocol version {msg['v']!r:.20}")
            if type(msg["nonce"]) is not bytes or len(msg["nonce"]) != NONCE_BYTES:
                raise CorruptMessageError("challenge: nonce must be 32 bytes")
            self._transcript = _transcript(self._cluster, self._me, self._peer, self._nonce, msg["nonce"])
            proof = msgpack.packb({"mac": _mac(self._key, b"initiator", self._transcript)}, use_bin_type=True)
            return proof, None
        mac = _mac_field(body, "confirm")
        if not hmac.compare_digest(mac, _mac(self._key, b"responder", self._transcript)):
            raise SaslAuthenticationFailedError("the peer could not prove it knows the Raft password")
        self._done = True
        return None, Session(
            send_key=_mac(self._key, b"key i2r", self._transcript),
            recv_key=_mac(self._key, b"key r2i", self._transcript),
        )


class ResponderHandshake:
    """The dialled side: ``receive(hello) -> (challenge, None)``, then ``receive(proof) ->
    (confirm, Session)``. ``initiators`` are the voter ids allowed to dial this node."""

    def __init__(
        self,
        *,
        auth_key: bytes,
        cluster_id: str,
        node_id: int,
        initiators: frozenset[int],
        nonce: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self._key = auth_key
        self._cluster = cluster_id
        self._me = node_id
        self._initiators = initiators
        self._nonce = nonce(NONCE_BYTES)
        self._transcript: bytes | None = None
        self._done = False
        #: the voter id the peer claimed in its hello (authenticated only once a session exists)
        self.peer_id: int | None = None

    def receive(self, body: bytes) -> tuple[bytes | None, Session | None]:
        if self._done:
            raise CorruptMessageError("handshake already finished")
        if self._transcript is None:
            self._check_hello(unpack_body(body))
            return msgpack.packb({"v": PROTOCOL_VERSION, "nonce": self._nonce}, use_bin_type=True), None
        mac = _mac_field(body, "proof")
        if not hmac.compare_digest(mac, _mac(self._key, b"initiator", self._transcript)):
            raise SaslAuthenticationFailedError(f"voter {self.peer_id} failed to prove it knows the Raft password")
        self._done = True
        confirm = msgpack.packb({"mac": _mac(self._key, b"responder", self._transcript)}, use_bin_type=True)
        return confirm, Session(
            send_key=_mac(self._key, b"key r2i", self._transcript),
            recv_key=_mac(self._key, b"key i2r", self._transcript),
        )

    def _check_hello(self, raw: Any) -> None:
        if type(raw) is not dict or raw.get("proto") != PROTOCOL_NAME:
            raise CorruptMessageError("not a kraftlog Raft hello")
        if type(raw.get("v")) is not int or raw["v"] != PROTOCOL_VERSION:
            raise UnsupportedVersionError(
                f"peer speaks Raft protocol version {raw.get('v')!r:.20}; this node speaks {PROTOCOL_VERSION} "
                "(controller.quorum.raft.authentication=password: it must be the same on every controller)"
            )
        msg = checked_map(raw, frozenset({"proto", "v", "cluster", "from", "to", "nonce"}), "hello")
        cluster, sender, target, nonce = msg["cluster"], msg["from"], msg["to"], msg["nonce"]
        if type(cluster) is not str or not 0 < len(cluster) <= MAX_CLUSTER_ID_CHARS:
            raise CorruptMessageError("hello: cluster must be a short string")
        if not is_uint(sender, _MAX_NODE_ID) or not is_uint(target, _MAX_NODE_ID):
            raise CorruptMessageError("hello: from and to must be node ids")
        if type(nonce) is not bytes or len(nonce) != NONCE_BYTES:
            raise CorruptMessageError("hello: nonce must be 32 bytes")
        if cluster != self._cluster:
            raise InconsistentClusterIdError(f"peer belongs to cluster {cluster!r}", claimed_node_id=sender)
        if target != self._me:
            raise InconsistentVoterSetError(
                f"peer dialled node {target}, this is node {self._me}", claimed_node_id=sender
            )
        if sender not in self._initiators:
            raise InconsistentVoterSetError(
                f"node {sender} is not a voter that dials node {self._me} (those are {sorted(self._initiators)})",
                claimed_node_id=sender,
            )
        self.peer_id = sender
        self._transcript = _transcript(self._cluster, sender, self._me, nonce, self._nonce)


# --------------------------------------------------------------------------------------- session


class Session:
    """Authenticated encryption of one connection's frames after the handshake (module docstring)."""

    def __init__(self, *, send_key: bytes, recv_key: bytes) -> None:
        self._send = ChaCha20Poly1305(send_key)
        self._recv = ChaCha20Poly1305(recv_key)
        self._send_counter = 0
        self._recv_counter = 0

    @staticmethod
    def _nonce(counter: int) -> bytes:
        return b"\x00\x00\x00\x00" + counter.to_bytes(8, "big")

    def seal(self, message: dict[str, Any]) -> bytes:
        """Frame body for ``message`` (raises ``CorruptMessageError`` if it cannot be encoded)."""
        return self.seal_bytes(encode_message(message))

    def seal_bytes(self, plaintext: bytes) -> bytes:
        body = self._send.encrypt(self._nonce(self._send_counter), plaintext, None)
        self._send_counter += 1
        return body

    def open(self, body: bytes) -> dict[str, Any]:
        """Decrypt, decode and validate one frame body; raises a ``KafkaError`` otherwise."""
        try:
            plaintext = self._recv.decrypt(self._nonce(self._recv_counter), body, None)
        except InvalidTag:
            raise CorruptMessageError("frame failed authentication (tampered, replayed or out of order)") from None
        self._recv_counter += 1
        return decode_message(plaintext)
