"""The controller Raft transport: pysyncobj's ``Transport`` API over kraftlog's own TCP connections.

pysyncobj's ``TCPTransport`` pickles every message and trusts the first one to say who is talking;
this replaces it (and its ``TcpConnection``/``TcpServer``) while pysyncobj keeps doing Raft. Frame
format, handshake and message shapes are `quorum.raft._wire`'s (read its docstring first); this module
runs them on non-blocking sockets registered with pysyncobj's own poller, so everything here runs
on pysyncobj's tick thread, like the rest of the node.

Connections
-----------
* Membership: the voters are ``controller.quorum.voters`` (or the formatted set) at start; a voter
  change (`quorum.raft._membership`) adds or drops one through ``addNode``/``dropNode``, with the
  public key it carried. pysyncobj's rule decides who
  dials: the voter with the greater ``host:port`` dials the other, at most every
  ``connectionRetryTime``. So each pair has one connection, and an incoming connection is accepted
  only from a voter that dials this node (anything else is refused before a reply).
* An incoming connection reaches pysyncobj (``onNodeConnected`` and messages) only after the
  handshake authenticated it as a voter of this cluster. Until then it is *pending*: at most
  ``max_unauthenticated`` pending connections exist (accepting one more closes the oldest), each
  must finish the handshake within ``handshake_timeout_s``, and may not announce a frame above 512
  bytes. (What is left to an attacker who can reach the port: opening connections faster than a
  voter's two round trips, which delays a voter's reconnection -- never its established link.)
* An authenticated connection that receives nothing for ``connectionTimeout`` is closed (voters
  send each other keepalives four times per timeout); a newer authenticated connection of the same
  voter replaces an older one; a malformed or unauthentic frame closes the connection (the voter
  reconnects). A peer that stops reading is dropped once ``MAX_PENDING_WRITE_BYTES`` are queued.
* Observers (issue 26, KIP-853; a dynamic quorum in ``node-key`` mode): as Kafka lets any replica
  of the cluster fetch as an observer, a voter admits a controller that is not in the voter set
  and not known in advance -- its handshake proves it holds the key it offers, for this cluster
  id, under a node id no voter holds -- and sends it the log (never a vote). The admission is
  bounded: at most ``max_observers`` observers are tracked (`MAX_OBSERVERS` by default); one more
  is refused (``observer_limit``) unless it is a node id already tracked, whose newer connection
  replaces the older. Its key only matters once an AddRaftVoter names its (id, directory id).
* A voter restarted on another listener (UpdateRaftVoter) binds its new endpoint while the others
  still dial the old one until its update commits; the dialling rule (by endpoint) may then
  disagree for that pair for a moment: the update reaches the leader over gRPC, not Raft.
* The listening socket binds the host of this node's own voter entry (not 0.0.0.0) with a real
  backlog; accepted connections are drained in bursts.

Memory is bounded: pending connections hold at most one handshake frame each; authenticated ones
(one per other voter) at most ``MAX_FRAME_BYTES`` read and ``MAX_PENDING_WRITE_BYTES`` queued.

Every refusal is logged as ``raft_peer_refused`` with the peer's ``ip:port``, a ``reason`` and, when
a frame was at fault, the Kafka ``error`` name; the lines are rate-limited (a token bucket, with a
``suppressed`` count) so a flood cannot fill the disk.
"""

from __future__ import annotations

import dataclasses
import errno
import socket
import threading
from typing import Any, ClassVar, Final

import structlog
from pysyncobj.monotonic import monotonic as _monotonic
from pysyncobj.node import TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import set_keepalive
from pysyncobj.transport import Transport, TransportNotReadyError

from kraftlog.quorum.raft._identity import (
    NodeIdentity,
    NodeKeyInitiator,
    NodeKeyResponder,
    ObserverPeer,
    parse_public_key,
    public_key_text,
)
from kraftlog.quorum.raft._raft_connection import (
    CONNECTING,
    ESTABLISHED,
    HANDSHAKE,
    MAX_PENDING_WRITE_BYTES,
    Handshake,
    RaftConnection,
    RefusalLog,
)
from kraftlog.quorum.raft._transport_settings import MAX_OBSERVERS, ObserverNode, TransportSettings
from kraftlog.quorum.raft._wire import InitiatorHandshake, ResponderHandshake

# pysyncobj.win_inet_pton (imported by pysyncobj.tcp_connection) replaces socket.inet_ntop on every
# platform with a Windows-only version that raises; nothing in a controller may see that one.
if getattr(socket.inet_ntop, "__module__", None) == "pysyncobj.win_inet_pton":
    import _socket

    socket.inet_ntop = _socket.inet_ntop

__all__ = [
    "MAX_OBSERVERS",
    "MAX_PENDING_WRITE_BYTES",
    "ObserverNode",
    "RaftTransport",
    "RefusalLog",
    "TransportSettings",
    "raft_transport_class",
]

_log = structlog.get_logger(__name__)

_ACCEPT_BURST: Final = 64  # connections accepted per poll event
_R: Final = POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR


def raft_transport_class(settings: TransportSettings) -> type[RaftTransport]:
    """A `RaftTransport` subclass bound to ``settings`` (pysyncobj constructs transports itself)."""

    class BoundRaftTransport(RaftTransport):
        SETTINGS = settings

    return BoundRaftTransport


# ------------------------------------------------------------------------------------- transport


class RaftTransport(Transport):
    """pysyncobj ``Transport`` with kraftlog's framing, handshake and limits (module docstring).

    Subclass through `raft_transport_class`; pysyncobj calls every method on its tick thread
    except ``waitReady`` (any thread).
    """

    SETTINGS: ClassVar[TransportSettings]

    def __init__(self, syncObj: Any, selfNode: Any, otherNodes: Any) -> None:
        super().__init__(syncObj, selfNode, otherNodes)
        settings = self.SETTINGS
        if selfNode is None:
            raise ValueError("kraftlog's Raft transport has no read-only nodes")
        self._syncObj = syncObj
        self.poller = syncObj._poller
        self._conf = syncObj.conf
        self._self_node: TCPNode = selfNode
        self.log = _log.bind(node_id=settings.node_id)
        self.refusals = RefusalLog(self.log)
        self.tls = settings.tls
        ids = {address: vid for vid, address in settings.voters.items()}
        #: this node is a voter (an observer until the change adding it is in its log)
        self._is_voter = not settings.observer
        #: observers are admitted (a dynamic quorum); a static one upgraded at run time turns it on
        self._admits_observers = settings.admit_observers
        self._observers: dict[int, ObserverNode] = {}
        self._max_observers = settings.max_observers
        if self._is_voter and ids.get(selfNode.address) != settings.node_id:
            raise ValueError(f"this node's Raft address {selfNode.address} is not voter {settings.node_id}")
        self._nodes: dict[int, TCPNode] = {}
        for node in otherNodes:
            if node.address not in ids:
                raise ValueError(f"Raft peer {node.address} is not in the voter set")
            self._nodes[ids[node.address]] = node
        # pysyncobj's rule: the greater address dials.
        self._dials: set[int] = set()
        self._initiators: frozenset[int] = frozenset()
        self._recompute_roles()
        # voter changes add and remove public keys: this transport's own copy of the identity
        self._identity_keys: dict[int, Any] = {}
        self._identity: NodeIdentity | None = None
        if settings.identity is not None:
            self._identity_keys = dict(settings.identity.voter_keys)
            self._identity = dataclasses.replace(settings.identity, voter_keys=self._identity_keys)
        self._links: dict[TCPNode, RaftConnection] = {}
        self._pending: set[RaftConnection] = set()
        self._last_dial: dict[TCPNode, float] = {}
        self._server: socket.socket | None = None
        self._server_fd: int | None = None
        self._ready = False
        self._bind_attempts = 0
        self._last_bind = 0.0
        self._bind_over = threading.Event()
        self._destroyed = False
        self._handshake_warned: set[int | None] = set()
        syncObj.addOnTickCallback(self._on_tick)

    # -------------------------------------------------------------- readiness (binding)

    @property
    def ready(self) -> bool:
        return self._ready

    def tryGetReady(self) -> None:
        self._maybe_bind()

    def waitReady(self) -> None:
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
            self.log.warning(
                "raft_bind_failed",
                host=self.SETTINGS.bind_host,
                port=self._self_node.port,
                error=str(err),
                attempt=self._bind_attempts,
            )
            if self._conf.maxBindRetries and self._bind_attempts >= self._conf.maxBindRetries:
                self._bind_over.set()
                raise TransportNotReadyError from err
            return
        self._ready = True
        self._bind_over.set()

    def _bind(self) -> None:
        infos = socket.getaddrinfo(
            self.SETTINGS.bind_host, self._self_node.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        # the address the other voters dial: pysyncobj's resolver prefers IPv4
        family, _, _, _, address = next((i for i in infos if i[0] == socket.AF_INET), infos[0])
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
        self.poller.subscribe(self._server_fd, self._on_accept, _R)
        self.log.info(
            "raft_transport_listening",
            address=":".join(str(part) for part in address[:2]),
            backlog=self.SETTINGS.backlog,
            max_unauthenticated=self.SETTINGS.max_unauthenticated,
            handshake_timeout_s=self.SETTINGS.handshake_timeout_s,
        )

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
                self.log.warning("raft_accept_failed", error=str(err))
                return
            peer = f"{addr[0]}:{addr[1]}"
            if len(self._pending) >= self.SETTINGS.max_unauthenticated:
                # Evict the oldest pending connection rather than refuse the newest: an attacker then
                # has to open connections faster than a voter completes its two round trips to keep
                # voters out, instead of merely keeping max_unauthenticated idle sockets open.
                oldest = min(self._pending, key=lambda c: c.deadline)
                oldest.refuse(None, reason="too_many_unauthenticated")
            try:
                self._tune(sock)
            except OSError:
                sock.close()
                continue
            handshake = self._responder()
            now = _monotonic()
            conn = RaftConnection(
                self,
                sock,
                peer,
                handshake=handshake,
                node=None,
                state=HANDSHAKE,
                deadline=now + self.SETTINGS.handshake_timeout_s,
                now=now,
            )
            self._pending.add(conn)

    # -------------------------------------------------------------- handshakes

    def _responder(self) -> Handshake:
        settings = self.SETTINGS
        if self._identity is not None:
            return NodeKeyResponder(
                identity=self._identity,
                cluster_id=settings.cluster_id,
                initiators=self._initiators,
                admit_observer=self._admit_observer if self._admits_observers and self._is_voter else None,
            )
        return ResponderHandshake(
            auth_key=settings.auth_key,
            cluster_id=settings.cluster_id,
            node_id=settings.node_id,
            initiators=self._initiators,
        )

    def _initiator(self, vid: int) -> Handshake:
        settings = self.SETTINGS
        if self._identity is not None:
            return NodeKeyInitiator(
                identity=self._identity, cluster_id=settings.cluster_id, peer_id=vid, observer=not self._is_voter
            )
        return InitiatorHandshake(
            auth_key=settings.auth_key, cluster_id=settings.cluster_id, node_id=settings.node_id, peer_id=vid
        )

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
        conn = RaftConnection(
            self,
            sock,
            f"{ip}:{node.port}",
            handshake=self._initiator(vid),
            node=node,
            state=CONNECTING,
            deadline=now + self.SETTINGS.handshake_timeout_s,
            now=now,
        )
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
            if conn.state in (CONNECTING, HANDSHAKE) and now > conn.deadline:
                conn.close("handshake_timeout")
            elif conn.state == ESTABLISHED and now - conn.last_recv > idle:
                conn.close("idle_timeout")

    # -------------------------------------------------------------- connection callbacks

    def _admit_observer(self, observer: ObserverPeer) -> bool:
        """Observers are admitted while this node is a voter; one that is a voter already is not,
        nor a new one beyond ``max_observers`` (a node id already tracked reconnects)."""
        if not self._is_voter or observer.node_id in self._nodes:
            return False
        if observer.node_id not in self._observers and len(self._observers) >= self._max_observers:
            self.log.warning(
                "raft_observer_refused", observer=observer.node_id, reason="observer_limit", limit=self._max_observers
            )
            return False
        return True

    def admit_observers(self) -> None:
        """Admit observers from now on: the quorum became dynamic (``kraft.version`` 1, issue 26)."""
        if not self._admits_observers:
            self._admits_observers = True
            self.log.info("raft_observers_admitted")

    def set_voter(self, is_voter: bool) -> None:
        """The voter set in force now includes (or no longer includes) this node: switch between
        observer (dial every voter) and voter (pysyncobj's address rule); links are re-made."""
        if is_voter == self._is_voter:
            return
        self._is_voter = is_voter
        self._recompute_roles()
        self.log.info("raft_role_changed", role="voter" if is_voter else "observer")
        for conn in list(self._links.values()):
            conn.close("role_changed")

    def observers(self) -> dict[int, ObserverNode]:
        """The observers connected to this node (pysyncobj's thread)."""
        return dict(self._observers)

    def _on_observer_established(self, conn: RaftConnection, observer: ObserverPeer) -> None:
        old = self._observers.get(observer.node_id)
        if old is not None:
            link = self._links.get(old)
            if link is not None:
                link.close("replaced")
        node = ObserverNode(observer)
        conn.node = node
        self._observers[observer.node_id] = node
        self._links[node] = conn
        self.log.info(
            "raft_observer_authenticated", peer=conn.peer, observer=observer.node_id, directory_id=observer.directory_id
        )
        self._onReadonlyNodeConnected(node)

    def on_connection_established(self, conn: RaftConnection) -> None:
        if conn.node is None and conn.observer is not None:
            self._pending.discard(conn)
            self._on_observer_established(conn, conn.observer)
            return
        if conn.node is None:  # incoming: the handshake named (and authenticated) the voter
            self._pending.discard(conn)
            node = self._nodes.get(conn.voter_id) if conn.voter_id is not None else None
            if node is None:  # the handshake accepts only dialling voters; this one was removed meanwhile
                conn.refuse(None, reason="unknown_voter")
                return
            old = self._links.get(node)
            if old is not None:
                old.close("replaced")
            conn.node = node
            self._links[node] = conn
        self._handshake_warned.discard(conn.voter_id)
        self.log.info(
            "raft_peer_authenticated", peer=conn.peer, voter=conn.voter_id, direction="in" if conn.incoming else "out"
        )
        self._onNodeConnected(conn.node)

    def on_dial_handshake_failed(self, conn: RaftConnection, reason: str) -> None:
        """A voter we dial ended our handshake (it refused us: see its log). Warn once per voter
        until a handshake with it succeeds; we redial every ``connectionRetryTime``."""
        if conn.voter_id is not None and conn.voter_id not in self._handshake_warned:
            self._handshake_warned.add(conn.voter_id)
            self.log.warning(
                "raft_handshake_failed",
                peer=conn.peer,
                voter=conn.voter_id,
                reason=reason,
                hint="the peer refused this node: compare cluster id, voters, "
                "controller.quorum.raft.authentication and its secrets (voter.keys / identity.key.file, or "
                "the password), and read the peer's raft_peer_refused line",
            )

    def on_connection_closed(self, conn: RaftConnection, was: str) -> None:
        self._pending.discard(conn)
        node = conn.node
        if node is not None and self._links.get(node) is conn:
            del self._links[node]
            if isinstance(node, ObserverNode):
                if self._observers.get(node.kl_observer.node_id) is node:
                    del self._observers[node.kl_observer.node_id]
                self._onReadonlyNodeDisconnected(node)
            elif was == ESTABLISHED:
                self._onNodeDisconnected(node)

    def on_connection_message(self, conn: RaftConnection, message: dict[str, Any]) -> None:
        self._onMessageReceived(conn.node, message)

    # -------------------------------------------------------------- pysyncobj API

    def send(self, node: Any, message: Any) -> bool:
        conn = self._links.get(node)
        if conn is None or conn.state != ESTABLISHED:
            return False
        if type(message) is not dict:
            self.log.error("raft_message_not_encodable", voter=conn.voter_id, kind=type(message).__name__)
            return False
        return conn.send_message(message)

    def addNode(self, node: Any) -> None:
        """pysyncobj adds a voter (a voter change appended, or a dump loaded): from now on this node
        dials it or accepts it by pysyncobj's address rule, authenticating it with the public key the
        change carried (``node-key`` mode). Only a `VoterNode` (which carries its `RaftVoter`) joins."""
        voter = getattr(node, "kl_voter", None)
        if voter is None:
            raise ValueError(f"Raft peer {node.address} joins only through a voter change")
        old = self._nodes.get(voter.node_id)
        if old is not None and old.address != node.address:
            self.dropNode(old)
        observer = self._observers.get(voter.node_id)
        if observer is not None and self._links.get(observer) is not None:
            self._links[observer].close("now_a_voter")  # it reconnects as a voter
        self._nodes[voter.node_id] = node
        known = self._identity_keys.get(voter.node_id)
        if known is not None and public_key_text(known) != voter.public_key:
            # the voter was removed and added back with another key (a wiped directory, issue 26): a
            # link authenticated with the old key is not this voter's
            link = self._links.get(node)
            if link is not None:
                link.close("voter_key_changed")
        if self._identity is not None:
            if voter.public_key is None:
                self._identity_keys.pop(voter.node_id, None)
                self.log.warning("raft_voter_without_key", voter=voter.node_id, hint="it cannot be authenticated")
            else:
                try:
                    self._identity_keys[voter.node_id] = parse_public_key(voter.public_key)
                except ValueError as err:
                    self._identity_keys.pop(voter.node_id, None)
                    self.log.warning("raft_voter_key_invalid", voter=voter.node_id, error=str(err))
        self._recompute_roles()
        self.log.info("raft_voter_added", voter=voter.node_id, address=node.address)

    def dropNode(self, node: Any) -> None:
        """pysyncobj removes a voter: close its connection and refuse it from now on."""
        vid = next((v for v, n in self._nodes.items() if n == node), None)
        if vid is None:
            return
        del self._nodes[vid]
        self._identity_keys.pop(vid, None)
        self._recompute_roles()
        conn = self._links.get(node)
        if conn is not None:
            conn.close("voter_removed")
            self._links.pop(node, None)
        self._last_dial.pop(node, None)
        self.log.info("raft_voter_removed", voter=vid, address=node.address)

    def _recompute_roles(self) -> None:
        if not self._is_voter:  # an observer dials every voter and is dialled by none
            self._dials = set(self._nodes)
            self._initiators = frozenset()
            return
        me = self._self_node.address
        self._dials = {vid for vid, node in self._nodes.items() if me > node.address}
        self._initiators = frozenset(vid for vid, node in self._nodes.items() if node.address > me)

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
                self.poller.unsubscribe(self._server_fd)
            self._server.close()
            self._server = None
            self._server_fd = None
        self._bind_over.set()
