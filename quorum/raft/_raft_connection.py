"""One Raft connection of `quorum.raft._transport`: frames in and out, the handshake, then the session.

A `RaftConnection` owns one non-blocking socket registered with pysyncobj's poller and runs on
pysyncobj's tick thread. Ordering rules: it reads no more than the current frame may hold until the
handshake is done (so an unauthenticated peer never makes it buffer more than one 512-byte frame);
after the handshake it opens each frame in order (the session's counters reject anything injected,
replayed or reordered) and hands the message to its owner before reading the next; it sends a
handshake reply before reporting the session, so the peer always sees the confirmation before any
Raft message. Whatever the peer did wrong ends in `RaftConnection.refuse`: one rate-limited
``raft_peer_refused`` line with the peer's address, then the socket is closed.
"""

from __future__ import annotations

import errno
import socket
import ssl
from collections.abc import Callable
from typing import Any, Final, Protocol

from pysyncobj.monotonic import monotonic as _monotonic
from pysyncobj.node import TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE, Poller

from kraftlog.common.errors import CorruptMessageError, KafkaError
from kraftlog.quorum.raft._identity import NodeKeyInitiator, NodeKeyResponder, ObserverPeer
from kraftlog.quorum.raft._raft_messages import encode_message, split_append_entries
from kraftlog.quorum.raft._raft_tls import RaftTls, TlsLayer
from kraftlog.quorum.raft._wire import (
    MAX_FRAME_BYTES,
    MAX_HANDSHAKE_FRAME_BYTES,
    FrameReader,
    InitiatorHandshake,
    ResponderHandshake,
    Session,
    frame,
)

__all__ = [
    "CLOSED",
    "CONNECTING",
    "ESTABLISHED",
    "HANDSHAKE",
    "MAX_PENDING_WRITE_BYTES",
    "ConnectionOwner",
    "RaftConnection",
    "RefusalLog",
]

#: Queued outgoing bytes after which a peer that does not read is dropped.
MAX_PENDING_WRITE_BYTES: Final = 4 * MAX_FRAME_BYTES
_READ_CHUNK: Final = 256 * 1024
_READ_BUDGET: Final = 4 << 20  # bytes read from one connection per poll event (fairness)
_AEAD_OVERHEAD: Final = 16
_RW: Final = POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.WRITE | POLL_EVENT_TYPE.ERROR
_R: Final = POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR


class ConnectionOwner(Protocol):
    """What a connection needs from its transport (`quorum.raft._transport.RaftTransport`)."""

    poller: Poller
    log: Any
    refusals: RefusalLog
    #: TLS on the Raft port (issue 26), else None (the per-node key alone)
    tls: RaftTls | None

    def on_connection_established(self, conn: RaftConnection) -> None: ...

    def on_connection_message(self, conn: RaftConnection, message: dict[str, Any]) -> None: ...

    def on_connection_closed(self, conn: RaftConnection, was: str) -> None: ...

    def on_dial_handshake_failed(self, conn: RaftConnection, reason: str) -> None: ...


class RefusalLog:
    """Rate-limited ``raft_peer_refused`` lines: ``rate`` per second, bursts of ``burst``."""

    def __init__(
        self, log: Any, *, clock: Callable[[], float] = _monotonic, rate: float = 20.0, burst: float = 100.0
    ) -> None:
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


#: ``reason`` of a refusal caused by what the peer sent, by Kafka error name.
_REASONS: Final = {
    "MESSAGE_TOO_LARGE": "oversized_frame",
    "CORRUPT_MESSAGE": "malformed_frame",
    "INCONSISTENT_CLUSTER_ID": "wrong_cluster",
    "INCONSISTENT_VOTER_SET": "not_a_dialling_voter",
    "SASL_AUTHENTICATION_FAILED": "authentication_failed",
    "UNSUPPORTED_VERSION": "unsupported_version",
}

#: the shared-password handshake (protocol 1) or the per-node-key one (protocol 2), either side
Handshake = InitiatorHandshake | ResponderHandshake | NodeKeyInitiator | NodeKeyResponder

CONNECTING: Final = "connecting"
HANDSHAKE: Final = "handshake"
ESTABLISHED: Final = "established"
CLOSED: Final = "closed"


class RaftConnection:
    """One TCP connection: frames in and out, the handshake, then the session."""

    def __init__(
        self,
        owner: ConnectionOwner,
        sock: socket.socket,
        peer: str,
        *,
        handshake: Handshake,
        node: TCPNode | None,
        state: str,
        deadline: float,
        now: float,
    ) -> None:
        self.owner = owner
        self.sock: socket.socket | None = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.handshake: Handshake | None = handshake
        self.incoming = isinstance(handshake, (ResponderHandshake, NodeKeyResponder))
        self.session: Session | None = None
        self.node = node
        self.voter_id: int | None = None
        #: an authenticated observer (issue 26): (node id, directory id, public key text); None for a voter
        self.observer: ObserverPeer | None = None
        self.state = state
        self.reader = FrameReader(MAX_HANDSHAKE_FRAME_BYTES)
        self.deadline = deadline  # of the handshake
        self.last_recv = now
        self._out = bytearray()
        self._out_pos = 0
        self._want_write = state == CONNECTING
        #: the TLS layer under the frames when the Raft port runs TLS (`quorum.raft._raft_tls`)
        self.tls: TlsLayer | None = owner.tls.layer(server_side=self.incoming) if owner.tls is not None else None
        owner.poller.subscribe(self.fd, self.on_event, _RW if self._want_write else _R)

    # -------------------------------------------------------------- events

    def on_event(self, fd: int, event: int) -> None:
        if self.state == CLOSED or fd != self.fd:
            return
        if self.state == CONNECTING:
            if event & (POLL_EVENT_TYPE.WRITE | POLL_EVENT_TYPE.ERROR):
                self._on_connected()
            return
        if event & (POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR):
            self._read(event)
        if self.state != CLOSED and event & POLL_EVENT_TYPE.WRITE:
            self._flush()

    def _on_connected(self) -> None:
        assert self.sock is not None and isinstance(self.handshake, (InitiatorHandshake, NodeKeyInitiator))
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self.close("connect_failed", detail=errno.errorcode.get(err, str(err)))
            return
        self.state = HANDSHAKE
        if self.tls is not None:
            self.tls.start()  # the hello below waits in the layer until TLS is up
        self.send_raw(frame(self.handshake.hello()))

    def _read(self, event: int) -> None:
        sock = self.sock
        assert sock is not None
        budget = _READ_BUDGET
        while budget > 0 and self.state != CLOSED:
            size = (
                _READ_CHUNK
                if self.state == ESTABLISHED
                else 4096
                if self.tls is not None
                else min(self.reader.wanted(), 4096)
            )
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
            if self.tls is not None:
                data = self._open_tls(data)
                if self.state == CLOSED:
                    return
            try:
                bodies = self.reader.feed(data)
            except KafkaError as err:
                self.refuse(err)
                return
            for body in bodies:
                self._on_frame(body)
                if self.state == CLOSED:
                    return

    def _on_frame(self, body: bytes) -> None:
        if self.state == ESTABLISHED:
            self._on_message(body)
            return
        assert self.handshake is not None
        try:
            reply, session = self.handshake.receive(body)
        except KafkaError as err:
            self.refuse(err)
            return
        if session is not None:
            if isinstance(self.handshake, (ResponderHandshake, NodeKeyResponder)):
                self.voter_id = self.handshake.peer_id
            if isinstance(self.handshake, NodeKeyResponder):
                self.observer = self.handshake.observer
            # with TLS, the certificate must name whom the handshake authenticated -- checked before
            # the confirmation goes out, so an impostor never sees one
            if not self._certificate_names_peer():
                return
        if reply is not None:
            self.send_raw(frame(reply))
        if session is not None and self.state != CLOSED:
            self.session = session
            self.handshake = None
            self.state = ESTABLISHED
            self.reader.limit = MAX_FRAME_BYTES
            self.owner.on_connection_established(self)

    def _on_message(self, body: bytes) -> None:
        assert self.session is not None
        try:
            message = self.session.open(body)
        except KafkaError as err:
            self.refuse(err)
            return
        try:
            self.owner.on_connection_message(self, message)
        except Exception:  # a pysyncobj bug on a well-formed message: contain it to this link
            self.owner.log.exception("raft_message_handler_failed", voter=self.voter_id, kind=message.get("type"))
            self.close("handler_failed", level="warning")

    def _open_tls(self, data: bytes) -> bytes:
        """Ciphertext in, plaintext out; a failed TLS handshake (a foreign CA, no certificate) is a
        refusal. Handshake replies the layer produced are sent at once."""
        assert self.tls is not None
        try:
            plain = self.tls.feed(data)
        except ssl.SSLError as err:
            self.refuse(None, "tls_handshake_failed", detail=err.reason or type(err).__name__)
            return b""
        self._flush_tls()
        return plain

    def _certificate_names_peer(self) -> bool:
        """With TLS, the verified certificate must name the node the Raft handshake authenticated
        (``node-<id>``): a controller's own certificate cannot carry another voter's identity."""
        if self.tls is None:
            return True
        peer_id = self.observer.node_id if self.observer is not None else self.voter_id
        names = self.tls.peer_node_ids()
        if peer_id is not None and peer_id in names:
            return True
        self.refuse(
            None,
            "certificate_identity",
            detail=f"certificate names node {sorted(names) or 'none'}, handshake authenticated {peer_id}",
        )
        return False

    def _flush_tls(self) -> None:
        assert self.tls is not None
        data = self.tls.outgoing()
        if data:
            self._queue(data)

    # -------------------------------------------------------------- output

    def send_message(self, message: dict[str, Any]) -> bool:
        """Seal and queue one pysyncobj message (split if too large); False if it cannot go."""
        assert self.session is not None
        try:
            plain = encode_message(message)
        except CorruptMessageError as err:
            self.owner.log.error("raft_message_not_encodable", peer=self.peer, voter=self.voter_id, error=str(err))
            return False
        if len(plain) + _AEAD_OVERHEAD > MAX_FRAME_BYTES:
            parts = split_append_entries(message)
            if parts is None:
                self.owner.log.error(
                    "raft_message_too_large",
                    peer=self.peer,
                    voter=self.voter_id,
                    kind=message.get("type"),
                    bytes=len(plain),
                )
                return False
            return all(self.send_message(part) for part in parts)
        self.send_raw(frame(self.session.seal_bytes(plain)))
        return self.state == ESTABLISHED

    def send_raw(self, data: bytes) -> None:
        if self.state == CLOSED:
            return
        if self.tls is not None:
            self.tls.write(data)
            data = self.tls.outgoing()
        self._queue(data)

    def _queue(self, data: bytes) -> None:
        if self.state == CLOSED:
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
                    with view[self._out_pos :] as chunk:
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
            del self._out[: self._out_pos]
            self._out_pos = 0
        want = bool(self._out)
        if want != self._want_write:
            self._want_write = want
            self.owner.poller.subscribe(self.fd, self.on_event, _RW if want else _R)

    # -------------------------------------------------------------- teardown

    def refuse(self, err: KafkaError | None, reason: str | None = None, *, detail: str | None = None) -> None:
        """Close because of what the peer sent (or failed to send); logged with its address."""
        if reason is None:
            reason = _REASONS.get(err.error_name, "bad_frame") if err is not None else "refused"
        fields: dict[str, Any] = {
            "peer": self.peer,
            "reason": reason,
            "phase": self.state,
            "direction": "in" if self.incoming else "out",
        }
        if err is not None:
            fields["error"] = err.error_name
            fields["detail"] = err.message
            claimed = err.context.get("claimed_node_id")
            if claimed is not None:
                fields["claimed_node_id"] = claimed
        elif detail is not None:
            fields["detail"] = detail
        if self.voter_id is not None:
            fields["voter"] = self.voter_id
        self.owner.refusals(**fields)
        self.close(fields["reason"], logged=True)

    def close(self, reason: str, *, detail: str | None = None, level: str = "debug", logged: bool = False) -> None:
        """Close the socket, then tell the owner (which tells pysyncobj if the link was up).

        Logged at ``level`` (``debug`` means: only when an authenticated link goes down) unless the
        caller already logged it; a dialled handshake that ends without a refusal of ours is reported
        to the owner, which warns once per voter.
        """
        if self.state == CLOSED:
            return
        was = self.state
        self.state = CLOSED
        sock, self.sock = self.sock, None
        self.owner.poller.unsubscribe(self.fd)
        if sock is not None:
            sock.close()
        self._out = bytearray()
        self._out_pos = 0
        if not self.incoming and was == HANDSHAKE and not logged and reason != "shutdown":
            self.owner.on_dial_handshake_failed(self, reason)
        elif not logged and (was == ESTABLISHED or level != "debug"):
            getattr(self.owner.log, "info" if level == "debug" else level)(
                "raft_connection_closed", peer=self.peer, voter=self.voter_id, reason=reason, detail=detail, phase=was
            )
        self.owner.on_connection_closed(self, was)
