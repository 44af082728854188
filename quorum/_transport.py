"""The controller Raft transport: pysyncobj's ``Transport`` API over kraftlog's own TCP connections.

pysyncobj's ``TCPTransport`` pickles every message and trusts the first one to say who is talking;
this replaces it (and its ``TcpConnection``/``TcpServer``) while pysyncobj keeps doing Raft. Frame
format, handshake and message shapes are `quorum._wire`'s (read its docstring first); this module
runs them on non-blocking sockets registered with pysyncobj's own poller, so everything here runs
on pysyncobj's tick thread, like the rest of the node.

Connections
-----------
* Static membership: the voters are ``controller.quorum.voters``. pysyncobj's rule decides who
  dials: the voter with the greater ``host:port`` dials the other, at most every
  ``connectionRetryTime``. So each pair has one connection, and an incoming connection is accepted
  only from a voter that dials this node (anything else is refused before a reply).
* An incoming connection reaches pysyncobj (``onNodeConnected`` and messages) only after the
  handshake authenticated it as a voter of this cluster. Until then it is *pending*: at most
  ``max_unauthenticated`` pending connections exist (more are closed at accept), each must finish
  the handshake within ``handshake_timeout_s``, and may not announce a frame above 512 bytes.
* An authenticated connection that receives nothing for ``connectionTimeout`` is closed (voters
  send each other keepalives four times per timeout); a newer authenticated connection of the same
  voter replaces an older one; a malformed or unauthentic frame closes the connection (the voter
  reconnects). A peer that stops reading is dropped once ``MAX_PENDING_WRITE_BYTES`` are queued.
* The listening socket binds the host of this node's own voter entry (not 0.0.0.0) with a real
  backlog; accepted connections are drained in bursts.

Memory is bounded: pending connections hold at most one handshake frame each; authenticated ones
(one per other voter) at most ``MAX_FRAME_BYTES`` read and ``MAX_PENDING_WRITE_BYTES`` queued.

Every refusal is logged as ``raft_peer_refused`` with the peer's ``ip:port``, a ``reason`` and, when
a frame was at fault, the Kafka ``error`` name; the lines are rate-limited (a token bucket, with a
``suppressed`` count) so a flood cannot fill the disk.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import structlog
from pysyncobj.monotonic import monotonic as _monotonic
from pysyncobj.node import TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import set_keepalive
from pysyncobj.transport import Transport, TransportNotReadyError

from proto.errors import CorruptMessageError, KafkaError
from quorum._wire import (
    MAX_FRAME_BYTES,
    MAX_HANDSHAKE_FRAME_BYTES,
    FrameReader,
    InitiatorHandshake,
    ResponderHandshake,
    Session,
    encode_message,
    frame,
    split_append_entries,
)

__all__ = ["MAX_PENDING_WRITE_BYTES", "RaftTransport", "RefusalLog", "TransportSettings", "raft_transport_class"]

_log = structlog.get_logger(__name__)

#: Queued outgoing bytes after which a peer that does not read is dropped.
MAX_PENDING_WRITE_BYTES: Final = 4 * MAX_FRAME_BYTES
_READ_CHUNK: Final = 256 * 1024
_READ_BUDGET: Final = 4 << 20          # bytes read from one connection per poll event (fairness)
_ACCEPT_BURST: Final = 64              # connections accepted per poll event
_AEAD_OVERHEAD: Final = 16
_RW: Final = POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.WRITE | POLL_EVENT_TYPE.ERROR
_R: Final = POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR


@dataclass(frozen=True, slots=True)
class TransportSettings:
    """What the transport needs beyond pysyncobj's conf (`MetadataQuorum` builds it)."""

    node_id: int
    #: voter id -> Raft ``host:port``, this node included
    voters: Mapping[int, str]
    cluster_id: str
    auth_key: bytes
    bind_host: str
    handshake_timeout_s: float = 2.0
    max_unauthenticated: int = 32
    backlog: int = 256


def raft_transport_class(settings: TransportSettings) -> type[RaftTransport]:
    """A `RaftTransport` subclass bound to ``settings`` (pysyncobj constructs transports itself)."""

    class BoundRaftTransport(RaftTransport):
        SETTINGS = settings

    return BoundRaftTransport


class RefusalLog:
    """Rate-limited ``raft_peer_refused`` lines: ``rate`` per second, bursts of ``burst``."""

    def __init__(self, log: Any, *, clock: Callable[[], float] = _monotonic, rate: float = 20.0,
                 burst: float = 100.0) -> None:
        self._log = log
        self._clock = clock
        self._rate = rate
        self._burst = burst
        self._tokens = burst
        self._at = clock()
        self.suppressed = 0

    def __call__(self, **fields: Any) -> bool:
        """Log one refusal unless over the rate; True when a line was written."""
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1.0:
            self.suppressed += 1
            return False
        self._tokens -= 1.0
        if self.suppressed:
            fields["suppressed"] = self.suppressed
            self.suppressed = 0
        self._log.warning("raft_peer_refused", **fields)
        return True


# ------------------------------------------------------------------------------------- connection

#: ``reason`` of a refusal caused by what the peer sent, by Kafka error name.
_REASONS: Final = {
    "MESSAGE_TOO_LARGE": "oversized_frame",
    "CORRUPT_MESSAGE": "malformed_frame",
    "INCONSISTENT_CLUSTER_ID": "wrong_cluster",
    "INCONSISTENT_VOTER_SET": "not_a_dialling_voter",
    "SASL_AUTHENTICATION_FAILED": "authentication_failed",
    "UNSUPPORTED_VERSION": "unsupported_version",
}

_CONNECTING: Final = "connecting"
_HANDSHAKE: Final = "handshake"
_ESTABLISHED: Final = "established"
_CLOSED: Final = "closed"


class _Conn:
    """One TCP connection: frames in and out, the handshake, then the session."""

    def __init__(self, transport: RaftTransport, sock: socket.socket, peer: str, *,
                 handshake: InitiatorHandshake | ResponderHandshake, node: TCPNode | None, state: str,
                 now: float) -> None:
        self.transport = transport
        self.sock: socket.socket | None = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.handshake: InitiatorHandshake | ResponderHandshake | None = handshake
        self.incoming = isinstance(handshake, ResponderHandshake)
        self.session: Session | None = None
        self.node = node
        self.voter_id: int | None = None
        self.state = state
        self.reader = FrameReader(MAX_HANDSHAKE_FRAME_BYTES)
        self.deadline = now + transport.SETTINGS.handshake_timeout_s
        self.last_recv = now
        self._out = bytearray()
        self._out_pos = 0
        self._want_write = state == _CONNECTING
        transport._poller.subscribe(self.fd, self.on_event, _RW if self._want_write else _R)

    # -------------------------------------------------------------- events

    def on_event(self, fd: int, event: int) -> None:
        if self.state == _CLOSED or fd != self.fd:
            return
        if self.state == _CONNECTING:
            if event & (POLL_EVENT_TYPE.WRITE | POLL_EVENT_TYPE.ERROR):
                self._on_connected()
            return
        if event & (POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR):
            self._read(event)
        if self.state != _CLOSED and event & POLL_EVENT_TYPE.WRITE:
            self._flush()

    def _on_connected(self) -> None:
        assert self.sock is not None and isinstance(self.handshake, InitiatorHandshake)
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self.close("connect_failed", detail=errno.errorcode.get(err, str(err)))
            return
        self.state = _HANDSHAKE
        self.send_raw(frame(self.handshake.hello()))

    def _read(self, event: int) -> None:
        sock = self.sock
        assert sock is not None
        budget = _READ_BUDGET
        while budget > 0 and self.state != _CLOSED:
            size = _READ_CHUNK if self.state == _ESTABLISHED else min(self.reader.wanted(), 4096)
            try:
                data = sock.recv(size)
            except BlockingIOError:
                if event & POLL_EVENT_TYPE.ERROR and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    self.close("socket_error")
                return
            except OSError as err:
                self.close("connection_reset", detail=type(err).__name__)
                return
            if not data:
                self.close("closed_by_peer")
                return
            budget -= len(data)
            self.last_recv = _monotonic()
            try:
                bodies = self.reader.feed(data)
            except KafkaError as err:
                self.refuse(err)
                return
            for body in bodies:
                self._on_frame(body)
                if self.state == _CLOSED:
                    return

    def _on_frame(self, body: bytes) -> None:
        try:
            if self.state == _ESTABLISHED:
                assert self.session is not None
                message = self.session.open(body)
                self.transport._deliver(self, message)
                return
            assert self.handshake is not None
            reply, session = self.handshake.receive(body)
        except KafkaError as err:
            self.refuse(err)
            return
        if reply is not None:
            self.send_raw(frame(reply))
        if session is not None and self.state != _CLOSED:
            self.session = session
            if isinstance(self.handshake, ResponderHandshake):
                self.voter_id = self.handshake.peer_id
            self.handshake = None
            self.state = _ESTABLISHED
            self.reader.limit = MAX_FRAME_BYTES
            self.transport._on_established(self)

    # -------------------------------------------------------------- output

    def send_message(self, message: dict[str, Any]) -> bool:
        """Seal and queue one pysyncobj message (split if too large); False if it cannot go."""
        assert self.session is not None
        try:
            plain = encode_message(message)
        except CorruptMessageError as err:
            self.transport._log.error("raft_message_not_encodable", peer=self.peer, voter=self.voter_id,
                                      error=str(err))
            return False
        if len(plain) + _AEAD_OVERHEAD > MAX_FRAME_BYTES:
            parts = split_append_entries(message)
            if parts is None:
                self.transport._log.error("raft_message_too_large", peer=self.peer, voter=self.voter_id,
                                          kind=message.get("type"), bytes=len(plain))
                return False
            return all(self.send_message(part) for part in parts)
        self.send_raw(frame(self.session.seal_bytes(plain)))
        return self.state == _ESTABLISHED

    def send_raw(self, data: bytes) -> None:
        if self.state == _CLOSED:
            return
        self._out += data
        if len(self._out) - self._out_pos > MAX_PENDING_WRITE_BYTES:
            self.close("peer_not_reading", level="warning")
            return
        self._flush()

    def _flush(self) -> None:
        sock = self.sock
        assert sock is not None
        error: OSError | None = None
        with memoryview(self._out) as view:
            while self._out_pos < len(view):
                try:
                    with view[self._out_pos:] as chunk:
                        sent = sock.send(chunk)
                except BlockingIOError:
                    break
                except OSError as err:
                    error = err
                    break
                if sent <= 0:
                    break
                self._out_pos += sent
        if error is not None:
            self.close("send_failed", detail=type(error).__name__)
            return
        if self._out_pos == len(self._out):
            self._out.clear()
            self._out_pos = 0
        elif self._out_pos > (1 << 20) and self._out_pos * 2 > len(self._out):
            del self._out[:self._out_pos]
            self._out_pos = 0
        want = bool(self._out)
        if want != self._want_write:
            self._want_write = want
            self.transport._poller.subscribe(self.fd, self.on_event, _RW if want else _R)

    # -------------------------------------------------------------- teardown

    def refuse(self, err: KafkaError | None, reason: str | None = None) -> None:
        """Close because of what the peer sent (or failed to send); logged with its address."""
        if reason is None:
            reason = _REASONS.get(err.error_name, "bad_frame") if err is not None else "refused"
        fields: dict[str, Any] = {"peer": self.peer, "reason": reason,
                                  "phase": self.state, "direction": "in" if self.incoming else "out"}
        if err is not None:
            fields["error"] = err.error_name
            fields["detail"] = err.message
            claimed = err.context.get("claimed_node_id")
            if claimed is not None:
                fields["claimed_node_id"] = claimed
        if self.voter_id is not None or self.node is not None:
            fields["voter"] = self.voter_id if self.voter_id is not None else self.transport._id_of(self.node)
        self.transport._refusals(**fields)
        self.close(fields["reason"], logged=True)

    def close(self, reason: str, *, detail: str | None = None, level: str = "debug", logged: bool = False) -> None:
        if self.state == _CLOSED:
            return
        was = self.state
        self.state = _CLOSED
        sock, self.sock = self.sock, None
        self.transport._poller.unsubscribe(self.fd)
        if sock is not None:
            sock.close()
        self._out = bytearray()
        self._out_pos = 0
        if not logged and (was == _ESTABLISHED or level != "debug"):
            getattr(self.transport._log, "info" if level == "debug" else level)(
                "raft_connection_closed", peer=self.peer, voter=self.voter_id if self.voter_id is not None
                else self.transport._id_of(self.node), reason=reason, detail=detail, phase=was)
        self.transport._on_closed(self, was)


# ------------------------------------------------------------------------------------- transport


class RaftTransport(Transport):
    """pysyncobj ``Transport`` with kraftlog's framing, handshake and limits (module docstring).

    Subclass through `raft_transport_class`; pysyncobj calls every method on its tick thread
    except ``waitReady`` (any thread).
    """

    SETTINGS: ClassVar[TransportSettings]

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:  # noqa: N803 (pysyncobj's names)
        super().__init__(syncObj, selfNode, otherNodes)
        settings = self.SETTINGS
        if selfNode is None:
            raise ValueError("kraftlog's Raft transport has no read-only nodes")
        self._syncObj = syncObj
        self._poller = syncObj._poller
        self._conf = syncObj.conf
        self._self_node: TCPNode = selfNode
        self._log = _log.bind(node_id=settings.node_id)
        self._refusals = RefusalLog(self._log)
        ids = {address: vid for vid, address in settings.voters.items()}
        if ids.get(selfNode.address) != settings.node_id:
            raise ValueError(f"this node's Raft address {selfNode.address} is not voter {settings.node_id}")
        self._nodes: dict[int, TCPNode] = {}
        for node in otherNodes:
            if node.address not in ids:
                raise ValueError(f"Raft peer {node.address} is not in the voter set")
            self._nodes[ids[node.address]] = node
        self._ids: dict[TCPNode, int] = {node: vid for vid, node in self._nodes.items()}
        # pysyncobj's rule: the greater address dials.
        self._dials = {vid for vid, node in self._nodes.items() if selfNode.address > node.address}
        self._initiators = frozenset(vid for vid, node in self._nodes.items() if node.address > selfNode.address)
        self._links: dict[TCPNode, _Conn] = {}
        self._pending: set[_Conn] = set()
        self._last_dial: dict[TCPNode, float] = {}
        self._server: socket.socket | None = None
        self._server_fd: int | None = None
        self._ready = False
        self._bind_attempts = 0
        self._last_bind = 0.0
        self._bind_over = threading.Event()
        self._destroyed = False
        syncObj.addOnTickCallback(self._on_tick)

    def _id_of(self, node: TCPNode | None) -> int | None:
        return self._ids.get(node) if node is not None else None

    # -------------------------------------------------------------- readiness (binding)

    @property
    def ready(self) -> bool:
        return self._ready

    def tryGetReady(self) -> None:  # noqa: N802 (pysyncobj's API)
        self._maybe_bind()

    def waitReady(self) -> None:  # noqa: N802
        self._bind_over.wait()
        if not self._ready:
            raise TransportNotReadyError

    def _maybe_bind(self) -> None:
        now = _monotonic()
        if self._ready or self._destroyed or now < self._last_bind + self._conf.bindRetryTime:
            return
        self._last_bind = now
        try:
            self._bind()
        except OSError as err:
            self._bind_attempts += 1
            self._log.warning("raft_bind_failed", host=self.SETTINGS.bind_host, port=self._self_node.port,
                              error=str(err), attempt=self._bind_attempts)
            if self._conf.maxBindRetries and self._bind_attempts >= self._conf.maxBindRetries:
                self._bind_over.set()
                raise TransportNotReadyError from err
            return
        self._ready = True
        self._bind_over.set()

    def _bind(self) -> None:
        infos = socket.getaddrinfo(self.SETTINGS.bind_host, self._self_node.port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
        family, _, _, _, address = infos[0]
        server = socket.socket(family, socket.SOCK_STREAM)
        try:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(address)
            server.listen(self.SETTINGS.backlog)
            server.setblocking(False)
        except OSError:
            server.close()
            raise
        self._server = server
        self._server_fd = server.fileno()
        self._poller.subscribe(self._server_fd, self._on_accept, _R)
        self._log.info("raft_transport_listening", address=f"{address[0]}:{address[1]}",
                       backlog=self.SETTINGS.backlog, max_unauthenticated=self.SETTINGS.max_unauthenticated,
                       handshake_timeout_s=self.SETTINGS.handshake_timeout_s)

    # -------------------------------------------------------------- accepting

    def _tune(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._conf.sendBufferSize)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._conf.recvBufferSize)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._conf.tcp_keepalive is not None:
            set_keepalive(sock, *self._conf.tcp_keepalive)

    def _on_accept(self, fd: int, event: int) -> None:
        server = self._server
        if server is None or fd != self._server_fd:
            return
        for _ in range(_ACCEPT_BURST):
            try:
                sock, addr = server.accept()
            except BlockingIOError:
                return
            except OSError as err:  # EMFILE and friends: leave the rest in the backlog for later
                self._log.warning("raft_accept_failed", error=str(err))
                return
            peer = f"{addr[0]}:{addr[1]}"
            if len(self._pending) >= self.SETTINGS.max_unauthenticated:
                sock.close()
                self._refusals(peer=peer, reason="too_many_unauthenticated", phase="accept", direction="in",
                               limit=self.SETTINGS.max_unauthenticated)
                continue
            try:
                self._tune(sock)
            except OSError:
                sock.close()
                continue
            handshake = ResponderHandshake(auth_key=self.SETTINGS.auth_key, cluster_id=self.SETTINGS.cluster_id,
                                           node_id=self.SETTINGS.node_id, initiators=self._initiators)
            conn = _Conn(self, sock, peer, handshake=handshake, node=None, state=_HANDSHAKE, now=_monotonic())
            self._pending.add(conn)

    # -------------------------------------------------------------- dialling

    def _dial(self, vid: int, now: float) -> None:
        node = self._nodes[vid]
        self._last_dial[node] = now
        ip = node.ip
        if ip is None:
            return
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._tune(sock)
            err = sock.connect_ex((ip, node.port))
        except OSError:
            sock.close()
            return
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            sock.close()
            return
        handshake = InitiatorHandshake(auth_key=self.SETTINGS.auth_key, cluster_id=self.SETTINGS.cluster_id,
                                       node_id=self.SETTINGS.node_id, peer_id=vid)
        conn = _Conn(self, sock, f"{ip}:{node.port}", handshake=handshake, node=node, state=_CONNECTING, now=now)
        conn.voter_id = vid
        self._links[node] = conn

    # -------------------------------------------------------------- tick

    def _on_tick(self) -> None:
        if self._destroyed:
            return
        try:
            self._maybe_bind()
        except TransportNotReadyError:
            pass
        now = _monotonic()
        for vid in self._dials:
            node = self._nodes[vid]
            if node not in self._links and now - self._last_dial.get(node, -1e9) >= self._conf.connectionRetryTime:
                self._dial(vid, now)
        for conn in list(self._pending):
            if now > conn.deadline:
                conn.refuse(None, reason="handshake_timeout")
        idle = self._conf.connectionTimeout
        for conn in list(self._links.values()):
            if conn.state in (_CONNECTING, _HANDSHAKE) and now > conn.deadline:
                conn.close("handshake_timeout", level="warning" if conn.state == _HANDSHAKE else "debug")
            elif conn.state == _ESTABLISHED and now - conn.last_recv > idle:
                conn.close("idle_timeout")

    # -------------------------------------------------------------- connection callbacks

    def _on_established(self, conn: _Conn) -> None:
        if conn.node is None:  # incoming: the handshake named (and authenticated) the voter
            self._pending.discard(conn)
            node = self._nodes[conn.voter_id] if conn.voter_id is not None else None
            if node is None:  # unreachable: the handshake accepts only dialling voters
                conn.refuse(None, reason="unknown_voter")
                return
            old = self._links.get(node)
            if old is not None:
                old.close("replaced")
            conn.node = node
            self._links[node] = conn
        self._log.info("raft_peer_authenticated", peer=conn.peer, voter=conn.voter_id,
                       direction="in" if conn.incoming else "out")
        self._onNodeConnected(conn.node)

    def _on_closed(self, conn: _Conn, was: str) -> None:
        self._pending.discard(conn)
        node = conn.node
        if node is not None and self._links.get(node) is conn:
            del self._links[node]
            if was == _ESTABLISHED:
                self._onNodeDisconnected(node)

    def _deliver(self, conn: _Conn, message: dict[str, Any]) -> None:
        self._onMessageReceived(conn.node, message)

    # -------------------------------------------------------------- pysyncobj API

    def send(self, node: Any, message: Any) -> bool:
        conn = self._links.get(node)
        if conn is None or conn.state != _ESTABLISHED:
            return False
        if type(message) is not dict:
            self._log.error("raft_message_not_encodable", voter=conn.voter_id, kind=type(message).__name__)
            return False
        return conn.send_message(message)

    def addNode(self, node: Any) -> None:  # noqa: N802
        raise NotImplementedError("the controller quorum's voter set is static (controller.quorum.voters)")

    def dropNode(self, node: Any) -> None:  # noqa: N802
        raise NotImplementedError("the controller quorum's voter set is static (controller.quorum.voters)")

    def destroy(self) -> None:
        self._destroyed = True
        self.setOnMessageReceivedCallback(None)
        self.setOnNodeConnectedCallback(None)
        self.setOnNodeDisconnectedCallback(None)
        self.setOnReadonlyNodeConnectedCallback(None)
        self.setOnReadonlyNodeDisconnectedCallback(None)
        for conn in list(self._links.values()) + list(self._pending):
            conn.close("shutdown")
        if self._server is not None:
            if self._server_fd is not None:
                self._poller.unsubscribe(self._server_fd)
            self._server.close()
            self._server = None
            self._server_fd = None
        self._bind_over.set()
