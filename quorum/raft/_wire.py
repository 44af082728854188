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

Messages
--------
pysyncobj's messages are dicts with string keys; kraftlog sends only the kinds in
``_VALIDATORS`` (``append_entries`` only in its plain-entries and snapshot-chunk forms -- never the
pickled ``transmission`` form) plus its own keepalive. Decoding checks the exact key set and the
type of every value (ints are non-negative 64-bit, never bool); log entries become ``(command:
bytes, index, term)`` tuples whose command is a NO_OP or a kraftlog command of bounded size; a
snapshot chunk becomes ``(bytes, bool, bool)``. So pysyncobj's handlers never see a type they would
crash on.

Commands
--------
pysyncobj's ``@replicated`` pickles ``(funcID, args)`` into each log entry and unpickles it at
apply. kraftlog does not use it: a metadata batch is the REGULAR command ``msgpack([1, epoch,
timestamp_ms, [record bytes, ...]])`` (``encode_append_command``) and `_RaftNode` decodes it with
``decode_command``; a command of any other shape is refused, never unpickled.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
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
from kraftlog.quorum.raft._membership import decode_voter_change, is_voter_change
from kraftlog.quorum.raft._prevote import PRE_VOTE, PRE_VOTE_RESPONSE, TERM_AHEAD, TRANSFER_FLAG

__all__ = [
    "COMMAND_NO_OP",
    "COMMAND_REGULAR",
    "FrameReader",
    "HEADER",
    "InitiatorHandshake",
    "KEEPALIVE",
    "VOTER_REPORT",
    "MAX_COMMAND_BYTES",
    "MAX_FRAME_BYTES",
    "MAX_HANDSHAKE_FRAME_BYTES",
    "PROTOCOL_VERSION",
    "ResponderHandshake",
    "Session",
    "decode_command",
    "decode_message",
    "derive_auth_key",
    "encode_append_command",
    "encode_message",
    "frame",
    "split_append_entries",
]

PROTOCOL_VERSION: Final = 1
PROTOCOL_NAME: Final = "kraftlog-raft"
#: Largest metadata batch (one command), Kafka's KRaft limit for one batch (8 MiB).
MAX_COMMAND_BYTES: Final = 8 << 20
#: Largest frame once authenticated (module docstring: two maximal commands plus overhead).
MAX_FRAME_BYTES: Final = 2 * MAX_COMMAND_BYTES + (1 << 20)
#: Largest frame before authentication: the biggest handshake body is ~140 bytes.
MAX_HANDSHAKE_FRAME_BYTES: Final = 512
HEADER: Final = struct.Struct(">I")
NONCE_BYTES: Final = 32
KDF_ITERATIONS: Final = 100_000
MAX_CLUSTER_ID_CHARS: Final = 64
_MAX_U64: Final = (1 << 64) - 1
_MAX_NODE_ID: Final = (1 << 31) - 1

#: pysyncobj's command type bytes (``_COMMAND_TYPE``): the first byte of every log entry.
COMMAND_REGULAR: Final = 0
COMMAND_NO_OP: Final = 1
_ALLOWED_ENTRY_TYPES: Final = frozenset({COMMAND_REGULAR, COMMAND_NO_OP})
_OP_APPEND: Final = 1

#: kraftlog's keepalive message type (pysyncobj's dispatcher ignores types it does not know).
KEEPALIVE: Final = "kl_keepalive"
#: a voter's report to its peers (issue 26): ``{"dir": directory id or nil, "kraft_max": int}``
VOTER_REPORT: Final = "kl_voter_report"

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


# --------------------------------------------------------------------------------------- msgpack


def _unpack(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as err:  # msgpack raises several unrelated types for bad input
        raise CorruptMessageError(f"not a msgpack body: {type(err).__name__}") from None


def _uint(value: Any, limit: int = _MAX_U64) -> bool:
    return type(value) is int and 0 <= value <= limit


def _map(value: Any, keys: frozenset[str], what: str) -> dict[str, Any]:
    if type(value) is not dict or frozenset(value) != keys:
        got = sorted(value) if type(value) is dict else type(value).__name__
        raise CorruptMessageError(f"{what}: expected the keys {sorted(keys)}, got {got!r:.120}")
    return value


# --------------------------------------------------------------------------------------- handshake


def _transcript(cluster_id: str, initiator: int, responder: int, nonce_i: bytes, nonce_r: bytes) -> bytes:
    packed: bytes = msgpack.packb(
        [PROTOCOL_VERSION, cluster_id, initiator, responder, nonce_i, nonce_r], use_bin_type=True
    )
    return packed


def _mac(key: bytes, label: bytes, transcript: bytes) -> bytes:
    return hmac.new(key, _LABEL + label + transcript, hashlib.sha256).digest()


def _mac_field(body: bytes, what: str) -> bytes:
    mac = _map(_unpack(body), frozenset({"mac"}), what)["mac"]
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
            msg = _map(_unpack(body), frozenset({"v", "nonce"}), "challenge")
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
            self._check_hello(_unpack(body))
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
        msg = _map(raw, frozenset({"proto", "v", "cluster", "from", "to", "nonce"}), "hello")
        cluster, sender, target, nonce = msg["cluster"], msg["from"], msg["to"], msg["nonce"]
        if type(cluster) is not str or not 0 < len(cluster) <= MAX_CLUSTER_ID_CHARS:
            raise CorruptMessageError("hello: cluster must be a short string")
        if not _uint(sender, _MAX_NODE_ID) or not _uint(target, _MAX_NODE_ID):
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


# --------------------------------------------------------------------------------------- messages


def encode_message(message: dict[str, Any]) -> bytes:
    """msgpack of a pysyncobj message; raises ``CorruptMessageError`` for a type msgpack lacks."""
    try:
        packed: bytes = msgpack.packb(message, use_bin_type=True)
        return packed
    except (TypeError, ValueError, OverflowError) as err:
        raise CorruptMessageError(f"cannot encode a {message.get('type')!r} message: {err}") from None


def _entries(value: Any) -> list[tuple[bytes, int, int]]:
    if type(value) is not list:
        raise CorruptMessageError("append_entries: entries must be a list")
    out = []
    for entry in value:
        if type(entry) is not list or len(entry) != 3:
            raise CorruptMessageError("append_entries: an entry must be [command, index, term]")
        command, index, term = entry
        if type(command) is not bytes or not 0 < len(command) <= MAX_COMMAND_BYTES + 1:
            raise CorruptMessageError("append_entries: an entry's command must be non-empty bytes of bounded size")
        if command[0] not in _ALLOWED_ENTRY_TYPES:
            raise CorruptMessageError(f"append_entries: entry command type {command[0]} is not accepted")
        if not (_uint(index) and _uint(term)):
            raise CorruptMessageError("append_entries: entry index and term must be integers")
        out.append((command, index, term))
    return out


def _append_entries(m: dict[str, Any]) -> None:
    if "serialized" in m:
        _map(m, frozenset({"type", "term", "commit_index", "serialized"}), "append_entries (snapshot)")
        chunk = m["serialized"]
        if chunk is not None:
            if (
                type(chunk) is not list
                or len(chunk) != 3
                or type(chunk[0]) is not bytes
                or type(chunk[1]) is not bool
                or type(chunk[2]) is not bool
            ):
                raise CorruptMessageError("append_entries: a snapshot chunk must be [bytes, first, last]")
            m["serialized"] = (chunk[0], chunk[1], chunk[2])
    else:
        _map(m, frozenset({"type", "term", "commit_index", "entries", "prevLogIdx", "prevLogTerm"}), "append_entries")
        if not (_uint(m["prevLogIdx"]) and _uint(m["prevLogTerm"])):
            raise CorruptMessageError("append_entries: prevLogIdx and prevLogTerm must be integers")
        m["entries"] = _entries(m["entries"])
    if not (_uint(m["term"]) and _uint(m["commit_index"])):
        raise CorruptMessageError("append_entries: term and commit_index must be integers")


def _ints(*keys: str) -> Callable[[dict[str, Any]], None]:
    expected = frozenset({"type", *keys})

    def check(m: dict[str, Any]) -> None:
        _map(m, expected, m["type"])
        if not all(_uint(m[k]) for k in keys):
            raise CorruptMessageError(f"{m['type']}: {', '.join(keys)} must be integers")

    return check


def _next_node_idx(m: dict[str, Any]) -> None:
    _map(m, frozenset({"type", "next_node_idx", "reset", "success"}), "next_node_idx")
    if not _uint(m["next_node_idx"]) or type(m["reset"]) is not bool or type(m["success"]) is not bool:
        raise CorruptMessageError("next_node_idx: an integer index and two booleans expected")


def _apply_command(m: dict[str, Any]) -> None:
    keys = frozenset(m)
    if keys not in (frozenset({"type", "command"}), frozenset({"type", "command", "request_id"})):
        raise CorruptMessageError(f"apply_command: unexpected keys {sorted(keys)!r:.120}")
    command = m["command"]
    if type(command) is not bytes or not 0 < len(command) <= MAX_COMMAND_BYTES + 1 or command[0] != COMMAND_REGULAR:
        raise CorruptMessageError("apply_command: the command must be a kraftlog command")
    if "request_id" in m and not _uint(m["request_id"]):
        raise CorruptMessageError("apply_command: request_id must be an integer")


def _apply_command_response(m: dict[str, Any]) -> None:
    keys = frozenset(m)
    values: tuple[Any, ...]
    if keys == frozenset({"type", "request_id", "error"}):
        values = (m["request_id"], m["error"])
    elif keys == frozenset({"type", "request_id", "log_idx", "log_term"}):
        values = (m["request_id"], m["log_idx"], m["log_term"])
    else:
        raise CorruptMessageError(f"apply_command_response: unexpected keys {sorted(keys)!r:.120}")
    if not all(_uint(v) for v in values):
        raise CorruptMessageError("apply_command_response: integers expected")


def _request_vote(m: dict[str, Any]) -> None:
    # ``kl_transfer`` (optional): the vote request of an election the leader asked for (`quorum.raft._prevote`)
    if TRANSFER_FLAG in m:
        if m[TRANSFER_FLAG] is not True:
            raise CorruptMessageError(f"request_vote: {TRANSFER_FLAG} must be true when present")
        _ints("term", "last_log_index", "last_log_term", TRANSFER_FLAG)({**m, TRANSFER_FLAG: 1})
        return
    _ints("term", "last_log_index", "last_log_term")(m)


def _pre_vote_response(m: dict[str, Any]) -> None:
    _map(m, frozenset({"type", "term", "granted"}), PRE_VOTE_RESPONSE)
    if not _uint(m["term"]) or type(m["granted"]) is not bool:
        raise CorruptMessageError(f"{PRE_VOTE_RESPONSE}: an integer term and a boolean expected")


def _voter_report(m: dict[str, Any]) -> None:
    _map(m, frozenset({"type", "dir", "kraft_max"}), VOTER_REPORT)
    directory = m["dir"]
    if directory is not None and (type(directory) is not str or not 0 < len(directory) <= 64):
        raise CorruptMessageError(f"{VOTER_REPORT}: dir must be a short string or nil")
    if not _uint(m["kraft_max"], 255):
        raise CorruptMessageError(f"{VOTER_REPORT}: kraft_max must be a small integer")


_VALIDATORS: Final[dict[str, Callable[[dict[str, Any]], None]]] = {
    "append_entries": _append_entries,
    "request_vote": _request_vote,
    PRE_VOTE: _ints("term", "last_log_index", "last_log_term"),
    PRE_VOTE_RESPONSE: _pre_vote_response,
    TERM_AHEAD: _ints("term"),
    "response_vote": _ints("term"),
    "timeout_now": _ints("term"),
    "next_node_idx": _next_node_idx,
    "apply_command": _apply_command,
    "apply_command_response": _apply_command_response,
    KEEPALIVE: _ints(),
    VOTER_REPORT: _voter_report,
}


def decode_message(data: bytes) -> dict[str, Any]:
    """msgpack bytes -> a pysyncobj message of a known kind and exact shape, or ``CorruptMessageError``."""
    message = _unpack(data)
    if type(message) is not dict:
        raise CorruptMessageError("a Raft message must be a map")
    kind = message.get("type")
    validator = _VALIDATORS.get(kind) if type(kind) is str else None
    if validator is None:
        raise CorruptMessageError(f"unknown Raft message type {kind!r:.40}")
    validator(message)
    return message


# --------------------------------------------------------------------------------------- commands


@dataclass(frozen=True, slots=True)
class AppendCommand:
    """One metadata batch as the state machine applies it."""

    epoch: int
    timestamp_ms: int
    records: list[bytes]


def encode_append_command(epoch: int, timestamp_ms: int, records: list[bytes]) -> bytes:
    """The REGULAR command payload (without pysyncobj's type byte) for one metadata batch."""
    packed: bytes = msgpack.packb([_OP_APPEND, epoch, timestamp_ms, list(records)], use_bin_type=True)
    return packed


def decode_command(command: bytes) -> AppendCommand | bytes | None:
    """A journal entry's command (type byte included): None for a NO_OP, the command itself for a
    voter change (`quorum.raft._membership` decodes it), else the batch.

    Raises ``CorruptMessageError`` for any other type (pysyncobj's membership and version commands
    are pickles) or shape; the caller refuses the entry.
    """
    if not command:
        raise CorruptMessageError("empty Raft command")
    kind = command[0]
    if kind == COMMAND_NO_OP:
        return None
    if kind != COMMAND_REGULAR:
        raise CorruptMessageError(f"Raft command type {kind} is not a kraftlog command")
    if is_voter_change(command):
        decode_voter_change(command)  # well-formed, or CorruptMessageError (voter changes are rare)
        return command
    value = _unpack(command[1:])
    if type(value) is not list or len(value) != 4 or value[0] != _OP_APPEND or type(value[0]) is not int:
        raise CorruptMessageError("not a kraftlog append command")
    _, epoch, timestamp_ms, records = value
    if type(epoch) is not int or type(timestamp_ms) is not int:
        raise CorruptMessageError("append command: epoch and timestamp_ms must be integers")
    if type(records) is not list or any(type(r) is not bytes for r in records):
        raise CorruptMessageError("append command: records must be a list of bytes")
    return AppendCommand(epoch, timestamp_ms, records)


def split_append_entries(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Two consecutive ``append_entries`` carrying ``message``'s entries, or None if it has fewer
    than two. The second one's ``prevLogIdx``/``prevLogTerm`` name the first one's last entry, so a
    follower applies them exactly as it would the whole (Raft allows any split)."""
    entries = message.get("entries")
    if message.get("type") != "append_entries" or not isinstance(entries, (list, tuple)) or len(entries) < 2:
        return None
    mid = len(entries) // 2
    head = dict(message, entries=list(entries[:mid]))
    tail = dict(message, entries=list(entries[mid:]), prevLogIdx=entries[mid - 1][1], prevLogTerm=entries[mid - 1][2])
    return [head, tail]
