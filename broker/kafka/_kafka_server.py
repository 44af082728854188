"""The Kafka-protocol listener: a raw TCP server that speaks Kafka's wire protocol.

One asyncio server per listener name, on the broker's event loop beside its gRPC server. Each
connection is served as Kafka's network layer serves it: read one size-prefixed request, answer
it, then read the next, so answers go out in request order (a client pipelines up to its
``max.in.flight`` requests; they wait in the socket). A request larger than
``socket.request.max.bytes`` or a frame that does not decode closes that connection only; an API
or version that is not served is answered with UNSUPPORTED_VERSION and the connection stays open.
Connections are accepted by `_kafka_accept.KafkaAcceptor` under the broker's connection quotas
(``max.connections``, per-address limits, idle and handshake deadlines); on a SASL listener a
request announced larger than ``sasl.server.max.receive.size`` before SASL completes closes the
connection before a byte of it is read, as Kafka does.

Answers are chunks (`_kafka_wire.encode_response`): bytes are written to the transport, file
regions of a zero-copy fetch go out with ``loop.sendfile`` (``os.sendfile``: segment file to
socket in the kernel). With sendfile off (always on TLS listeners), or when a region cannot be
sent so, the region is read and written as bytes (the copy path), `REGION_CHUNK_BYTES` at a time,
each written only once the transport's buffer drained below `WRITE_HIGH_WATER_BYTES`: a peer that
does not read holds its socket buffers plus about one chunk, not a whole fetch answer (issue 24).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from kraftlog.broker.kafka._connection_quotas import ConnectionLimits, ConnectionQuotas
from kraftlog.broker.kafka._kafka_accept import Connection, ConnectionLimiter, KafkaAcceptor
from kraftlog.broker.kafka._kafka_wire import (
    Chunk,
    MalformedRequest,
    ParsedRequest,
    UnsupportedRequest,
    encode_response,
    parse_request,
)
from kraftlog.common import SYSTEM_CLOCK, Clock
from kraftlog.common.security import ANONYMOUS, ListenerSecurity, Session, peer_principal, server_context
from kraftlog.storage import FileRegion

__all__ = ["CLOSE_CONNECTION", "KafkaListener", "ConnectionInfo", "REGION_CHUNK_BYTES", "WRITE_HIGH_WATER_BYTES"]

_SIZE = struct.Struct(">i")

#: bytes of a file region read and written at once on the copy path
REGION_CHUNK_BYTES = 128 * 1024
#: the transport's write buffer above which the copy path waits for the peer (asyncio's default is
#: 64 KiB; the TLS transport's own buffer sits beneath it)
WRITE_HIGH_WATER_BYTES = 128 * 1024


class _Close:
    def __repr__(self) -> str:
        return "CLOSE_CONNECTION"


#: what a dispatch returns for a request that must not be answered but ends its connection
CLOSE_CONNECTION: Any = _Close()


class ConnectionInfo:
    """What a handler may know of the connection its request came on."""

    __slots__ = (
        "listener_name",
        "peer",
        "client_software",
        "session",
        "security",
        "sasl",
        "authenticated",
        "close_after_answer",
        "sasl_raw_tokens",
        "reauth",
        "throttle_ms",
        "produce_budget",
        "on_close",
    )

    def __init__(
        self,
        listener_name: str,
        peer: str,
        session: Session | None = None,
        security: ListenerSecurity | None = None,
    ) -> None:
        self.listener_name = listener_name
        self.peer = peer
        self.client_software: tuple[str, str] | None = None  # KIP-511, from ApiVersions v3+
        host = peer.rsplit(":", 1)[0].strip("[]")
        #: who is connected: User:ANONYMOUS on a PLAINTEXT listener (until SASL, on a SASL one)
        self.session = session or Session(ANONYMOUS, host, listener_name, "PLAINTEXT")
        self.security = security
        self.sasl: Any = None  # the SASL exchange in progress (a ScramServer or PlainServer)
        #: whether the connection may make requests: at once, unless the listener is SASL
        self.authenticated = security is None or not security.uses_sasl
        self.close_after_answer = False  # a failed SASL exchange: answer, then close
        self.sasl_raw_tokens = False  # after SaslHandshake v0 the exchange is raw tokens
        #: the SASL session's lifetime and re-authentication (KIP-368): a `SessionExpiry` once a
        #: SASL exchange completed on this connection
        self.reauth: Any = None
        #: a client quota's throttle (issue 24): once the answer is out, no request of this
        #: connection is read for that long (Kafka mutes the channel)
        self.throttle_ms = 0
        #: what to do when the connection closes, by key (a share session to forget, KIP-932)
        self.on_close: dict[Any, Callable[[], None]] = {}
        #: bytes this connection's produce payloads may hold while validated (a ByteBudget, made
        #: by the first produce)
        self.produce_budget: Any = None


async def _mute(conn: ConnectionInfo) -> None:
    """Hold a throttled connection: read nothing more of it until its throttle time has passed."""
    if conn.throttle_ms > 0:
        throttle_s, conn.throttle_ms = conn.throttle_ms / 1000.0, 0
        await asyncio.sleep(throttle_s)


Dispatch = Callable[[ParsedRequest, ConnectionInfo], Awaitable[Any]]
UnsupportedAnswer = Callable[[UnsupportedRequest], bytes]


class KafkaListener:
    """Serves one Kafka-protocol listener (``name``) on ``host:port`` (port 0: any free port)."""

    def __init__(
        self,
        name: str,
        host: str,
        port: int,
        *,
        supported: Callable[[], dict[int, tuple[int, int]]],
        dispatch: Dispatch,
        unsupported: UnsupportedAnswer,
        max_request_bytes: int,
        sendfile: bool,
        node_id: int,
        security: ListenerSecurity | None = None,
        sasl_token: Callable[[ConnectionInfo, bytes], bytes] | None = None,
        limiter: ConnectionLimiter | None = None,
        limits: ConnectionLimits | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.name = name
        self._sasl_token = sasl_token
        self.host = host
        self.port = port
        self._supported = supported
        self._dispatch = dispatch
        self._unsupported = unsupported
        self._max_request_bytes = max_request_bytes
        self.sendfile = sendfile
        self.security = security or ListenerSecurity(name)
        tls = self.security.tls
        # TLS listeners (SSL, SASL_SSL): the context is built now, so a bad key fails at start
        self._ssl_context = server_context(tls) if tls is not None else None
        self._principal_mapper = tls.principal_mapper if tls is not None else None
        if self._ssl_context is not None:
            # the kernel cannot encrypt (no kTLS here): TLS listeners send fetched batches with
            # the copy path, through OpenSSL
            self.sendfile = False
        self._connections: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._log = structlog.get_logger(__name__).bind(node_id=node_id, listener=name)
        self.limits = limits or ConnectionLimits()
        self._acceptor = KafkaAcceptor(
            name,
            ssl_context=self._ssl_context,
            sasl=self.security.uses_sasl,
            limiter=limiter or ConnectionLimiter(ConnectionQuotas()),
            serve=self._serve,
            idle_ms=self.limits.idle_ms,
            handshake_ms=self.limits.handshake_ms,
            backlog=self.limits.backlog,
            clock=clock,
            log=self._log,
        )

    async def bind(self) -> None:
        """Bind the socket (port 0 gets its real port, which the broker registers) without
        accepting yet: requests are served from `start_serving`, once the broker has caught up
        with the metadata log, as Kafka enables its request processing after the initial
        catch-up. Connections are accepted under the broker's connection quotas
        (`_kafka_accept.KafkaAcceptor`)."""
        self.port = self._acceptor.bind(self.host, self.port)

    async def start_serving(self) -> None:
        if not self._stopping:
            self._acceptor.start()
            self._log.info("kafka_listener_started", address=f"{self.host}:{self.port}")

    async def stop(self) -> None:
        """Stop accepting, end every connection (a request in progress is cancelled, a TLS
        handshake aborted) and wait for them, so none is still serving when the broker closes
        its logs."""
        self._stopping = True
        await self._acceptor.stop()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        self._acceptor.abort_all()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, accepted: Connection) -> None:
        task = asyncio.current_task()
        assert task is not None
        if self._stopping:
            writer.close()
            return
        self._connections.add(task)
        peer = accepted.peer
        log = self._log.bind(peer=peer)
        conn: ConnectionInfo | None = None
        try:
            session = self._session(writer, accepted.ip)
            conn = ConnectionInfo(self.name, peer, session, self.security)
            await self._requests(reader, writer, conn, log, accepted)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        except asyncio.CancelledError:
            pass
        except Exception as err:  # one connection's failure must not reach the server
            log.warning("kafka_connection_failed", error=repr(err))
        finally:
            self._connections.discard(task)
            for action in list(conn.on_close.values()) if conn is not None else ():
                try:
                    action()
                except Exception as err:  # noqa: BLE001 - the connection is gone either way
                    log.warning("kafka_connection_close_action_failed", error=repr(err))
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _session(self, writer: asyncio.StreamWriter, host: str) -> Session:
        """Who connected: the principal of its client certificate on a TLS listener (mutual TLS),
        else User:ANONYMOUS (until a SASL exchange, on SASL listeners)."""
        principal = ANONYMOUS
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is not None and self._principal_mapper is not None:
            principal = peer_principal(ssl_object, self._principal_mapper)
        return Session(principal, host, self.name, self.security.protocol)

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        conn: ConnectionInfo,
        log: Any,
        accepted: Connection,
    ) -> None:
        """Serve the connection's requests in order. Before SASL authentication completes a frame
        may be at most ``sasl.server.max.receive.size``: a larger one announced closes the
        connection before a byte of it is read (Kafka's InvalidReceiveException)."""
        state, acceptor = accepted.state, self._acceptor
        while True:
            state.request_done(acceptor.now_ms())  # the previous request (if any) is answered
            if conn.authenticated and not state.authenticated:  # SASL completed on the last request
                acceptor.authenticated(accepted, reader)
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            state.last_active_ms = acceptor.now_ms()
            limit, key = self._max_request_bytes, "socket.request.max.bytes"
            if not conn.authenticated and self.limits.pre_auth_max_bytes < limit:
                limit, key = self.limits.pre_auth_max_bytes, "sasl.server.max.receive.size"
            if size <= 0 or size > limit:
                log.warning(
                    "kafka_request_refused",
                    reason=f"a request of {size} bytes is outside 1..{key} ({limit}); closing the connection",
                )
                if key != "socket.request.max.bytes":
                    acceptor.closed(accepted, "pre_auth_frame_too_large")
                return
            frame = await reader.readexactly(size)
            state.request_started(acceptor.now_ms())
            if conn.sasl_raw_tokens and self._sasl_token is not None:
                try:  # SaslHandshake v0: this frame is the client's SASL token, the answer ours
                    challenge = self._sasl_token(conn, frame)
                except Exception as err:  # a failed exchange ends the connection, as in Kafka
                    log.info("kafka_connection_closed", reason=f"SASL exchange failed: {err}")
                    return
                writer.write(_SIZE.pack(len(challenge)) + challenge)
                await writer.drain()
                continue
            try:
                request = parse_request(frame, self._supported())
            except UnsupportedRequest as err:
                log.info("kafka_unsupported_version", api_key=err.api_key, api_version=err.api_version)
                writer.write(self._unsupported(err))
                await writer.drain()
                continue
            except MalformedRequest as err:
                log.warning("kafka_malformed_request", error=str(err))
                return
            reauth = conn.reauth
            if reauth is not None and conn.authenticated and request.api_key != 17 and reauth.expired():
                # KIP-368: not re-authenticated in time; closed unanswered, as Kafka's SocketServer
                log.info(
                    "kafka_connection_closed",
                    api_key=request.api_key,
                    reason="the SASL session expired (connections.max.reauth.ms) and was not re-authenticated",
                )
                acceptor.closed(accepted, "session_expired")
                return
            counts = (reauth.reauthentications, reauth.failures) if reauth is not None else (0, 0)
            response = await self._dispatch(request, conn)
            if reauth is not None and request.api_key in (17, 36):  # Kafka's re-authentication counts
                if reauth.reauthentications > counts[0]:
                    acceptor.reauthenticated(accepted, ok=True)
                if reauth.failures > counts[1]:
                    acceptor.reauthenticated(accepted, ok=False)
            if response is None:  # Produce with acks=0 has no answer
                await _mute(conn)
                continue
            if response is CLOSE_CONNECTION:
                log.info("kafka_connection_closed", api_key=request.api_key, reason="the request failed")
                return
            chunks, _total = encode_response(request.correlation_id, response)
            await self._send(writer, chunks)
            if conn.close_after_answer:
                log.info("kafka_connection_closed", api_key=request.api_key, reason="SASL exchange failed")
                return
            await _mute(conn)

    async def _send(self, writer: asyncio.StreamWriter, chunks: list[Chunk]) -> None:
        """Write one answer; regions with sendfile (closed once sent, whatever happens)."""
        loop = asyncio.get_running_loop()
        try:
            for chunk in chunks:
                if isinstance(chunk, bytes):
                    writer.write(chunk)
                    continue
                if not self.sendfile:
                    await _copy_region(writer, chunk)
                    continue
                await writer.drain()
                try:
                    sent = await loop.sendfile(
                        writer.transport,
                        chunk,  # type: ignore[arg-type]  # what it needs of a file: fileno()
                        chunk.position,
                        chunk.size,
                        fallback=False,
                    )
                except asyncio.SendfileNotAvailableError:  # e.g. a file system without sendfile
                    await _copy_region(writer, chunk)
                    continue
                if sent != chunk.size:
                    # the file was cut short under us: the frame's size is already on the wire
                    raise ConnectionError(f"sent {sent} of {chunk.size} bytes of {chunk.path}")
            await writer.drain()
        finally:
            for chunk in chunks:
                if isinstance(chunk, FileRegion):
                    chunk.close()


async def _copy_region(writer: asyncio.StreamWriter, region: FileRegion) -> None:
    """The copy path of one region: read and written `REGION_CHUNK_BYTES` at a time, the next
    piece read only once the transport took the last (``drain``), so memory stays at about one
    piece per connection whatever the fetch's size and however slowly the peer reads."""
    writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER_BYTES)
    await writer.drain()
    for offset in range(0, region.size, REGION_CHUNK_BYTES):
        writer.write(region.read(offset, min(REGION_CHUNK_BYTES, region.size - offset)))
        await writer.drain()
