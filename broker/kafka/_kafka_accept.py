"""How a Kafka listener accepts connections: its own accept loop under the broker's connection
quotas, TLS with small buffers until a connection authenticates, and a reaper that closes
connections past their handshake deadline or idle for ``connections.max.idle.ms``.

Why not ``asyncio.start_server``: it accepts whatever the kernel queued, and with ``ssl=`` gives
every connection, before it has sent a byte, asyncio's TLS protocol with a 256 KiB read buffer
(1,000 silent connections to a TLS port: +298 MiB). Here:

- the accept loop asks `ConnectionLimiter` for a slot before each accept (Kafka's acceptor
  blocks the same way over ``max.connections``: the kernel holds the newcomers in the listen
  backlog), and closes a connection over its address's limit right after accepting it;
- a TLS connection has no TLS state until its first byte arrives (`_AwaitingClientHello`), then
  `LeanTlsProtocol`, asyncio's TLS protocol with a 4 KiB read buffer, grown
  to asyncio's 256 KiB once the connection authenticates (TLS done, and SASL on a SASL listener),
  when throughput matters more than the cost of an idle stranger; the stream reader's high-water
  mark (how much it buffers before it stops reading the socket) is likewise small until then;
- the reaper runs every `check_interval_ms` and aborts the connections `ConnectionState.expiry`
  names. A connection's quota is released when its transport is lost, whatever closed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
from asyncio import sslproto
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge

from kraftlog.broker.kafka._connection_quotas import ConnectionQuotas, ConnectionState, check_interval_ms
from kraftlog.common import SYSTEM_CLOCK, Clock
from kraftlog.common.config import ConfigError

__all__ = ["Connection", "ConnectionLimiter", "ConnectionMetrics", "KafkaAcceptor", "LeanTlsProtocol"]

#: read buffer of a TLS connection until it authenticates (a ClientHello, SASL frames: small)
PRE_AUTH_TLS_READ_BYTES: Final = 4 * 1024
#: asyncio's own TLS read buffer, for authenticated connections
TLS_READ_BYTES: Final = 256 * 1024
#: the stream reader's limit (it stops reading the socket at twice this) before authentication
PRE_AUTH_READER_LIMIT: Final = 64 * 1024
#: and after (what asyncio.start_server was given before)
READER_LIMIT: Final = 1 << 20


class LeanTlsProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a small read buffer until `grow` (asyncio allocates and zeroes
    ``max_size`` bytes per connection in its constructor, and grows to ``max_size`` on a read).
    ``on_lost`` runs when the socket's transport is lost, handshake done or not."""

    max_size = PRE_AUTH_TLS_READ_BYTES

    def __init__(self, *args: Any, on_lost: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_lost = on_lost

    def grow(self) -> None:
        # the next read allocates the larger buffer (asyncio reads the attribute per read)
        self.max_size = TLS_READ_BYTES  # type: ignore[misc]

    def connection_lost(self, exc: BaseException | None) -> None:
        try:
            super().connection_lost(exc)
        finally:
            self._on_lost()


class _AwaitingClientHello(asyncio.Protocol):
    """A TLS connection before its first byte: no TLS state at all yet (OpenSSL's per-connection
    state costs about 45 KiB once a server-side handshake starts). The first bytes swap in the
    TLS protocol ``make_tls`` builds and feed it what arrived."""

    def __init__(self, make_tls: Callable[[], LeanTlsProtocol], on_lost: Callable[[], None]) -> None:
        self._make_tls = make_tls
        self._on_lost = on_lost
        self._transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        tls = self._make_tls()
        self._transport.set_protocol(tls)
        tls.connection_made(self._transport)
        view = memoryview(data)
        while view:
            buffer = tls.get_buffer(len(view))
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            tls.buffer_updated(n)
            view = view[n:]

    def eof_received(self) -> bool:
        return False  # the transport closes

    def connection_lost(self, exc: BaseException | None) -> None:
        self._on_lost()


class _TrackedStreamProtocol(asyncio.StreamReaderProtocol):
    """A plaintext connection's protocol, with ``on_lost`` as `LeanTlsProtocol` has it."""

    def __init__(self, *args: Any, on_lost: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_lost = on_lost

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            super().connection_lost(exc)
        finally:
            self._on_lost()


class ConnectionMetrics:
    """Open connections per listener and connections the node closed, by reason (Kafka's
    connection-count and connection-close-total)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        r = registry if registry is not None else CollectorRegistry()
        self.open = Gauge(
            "kraftlog_kafka_connections", "Open connections of a Kafka listener.", ["listener"], registry=r
        )
        self.closed = Counter(
            "kraftlog_kafka_connections_closed",
            "Connections a Kafka listener closed for a limit: max_connections_per_ip (at accept), "
            "handshake_timeout, idle, pre_auth_frame_too_large, session_expired (a SASL session past "
            "connections.max.reauth.ms: Kafka's expired-connections-killed-count).",
            ["listener", "reason"],
            registry=r,
        )
        self.reauthentications = Counter(
            "kraftlog_kafka_reauthentications",
            "SASL re-authentications on established connections (KIP-368), by result: success or failed "
            "(Kafka's successful-reauthentication-total and failed-reauthentication-total).",
            ["listener", "result"],
            registry=r,
        )
        self.accept_blocked = Counter(
            "kraftlog_kafka_accept_blocked",
            "Times a Kafka listener stopped accepting because max.connections was reached.",
            ["listener"],
            registry=r,
        )


class ConnectionLimiter:
    """The broker's `ConnectionQuotas`, shared by its Kafka listeners, with waiting for a slot."""

    def __init__(self, quotas: ConnectionQuotas, metrics: ConnectionMetrics | None = None) -> None:
        self.quotas = quotas
        self.metrics = metrics or ConnectionMetrics(None)
        self._waiters: set[asyncio.Future[None]] = set()

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        listeners: list[str],
        metrics: ConnectionMetrics | None = None,
        resolve: Callable[[str], str] | None = None,
    ) -> ConnectionLimiter:
        """The limits of ``config`` for ``listeners``; host names of the overrides are resolved now,
        as Kafka does at start."""
        from kraftlog.common.config import parse_ip_overrides
        from kraftlog.common.security import listener_prefix

        resolve = resolve or _resolve_host
        overrides = {}
        key = "max.connections.per.ip.overrides"
        for host, count in parse_ip_overrides(config[key]).items():
            try:
                overrides[_normal_ip(resolve(host))] = count
            except OSError as err:
                raise ConfigError(f"'{key}' names {host!r}, which does not resolve: {err}", key=key) from err
        listener_max = {}
        for name in listeners:
            key = listener_prefix(name) + "max.connections"
            if key in config:
                listener_max[name] = int(config[key])
        quotas = ConnectionQuotas(
            max_connections=config["max.connections"],
            max_per_ip=config["max.connections.per.ip"],
            per_ip_overrides=overrides,
            listener_max=listener_max,
        )
        return cls(quotas, metrics)

    async def wait_for_slot(self, listener: str) -> None:
        blocked = False
        while not self.quotas.slot_available(listener):
            if not blocked:
                blocked = True
                self.metrics.accept_blocked.labels(listener).inc()
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.add(waiter)
            try:
                await waiter
            finally:
                self._waiters.discard(waiter)

    def admit(self, listener: str, ip: str) -> bool:
        if not self.quotas.admit(listener, ip):
            self.metrics.closed.labels(listener, "max_connections_per_ip").inc()
            return False
        self.metrics.open.labels(listener).set(self.quotas.listener_count(listener))
        return True

    def release(self, listener: str, ip: str) -> None:
        self.quotas.release(listener, ip)
        self.metrics.open.labels(listener).set(self.quotas.listener_count(listener))
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)


class Connection:
    """One accepted connection: its address, its clock, its socket's transport and its protocol."""

    __slots__ = ("ip", "port", "state", "transport", "protocol", "released")

    def __init__(self, ip: str, port: int, state: ConnectionState) -> None:
        self.ip = ip
        self.port = port
        self.state = state
        self.transport: asyncio.Transport | None = None
        self.protocol: Any = None
        self.released = False

    @property
    def peer(self) -> str:
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter, Connection], Awaitable[None]]


class KafkaAcceptor:
    """Accepts the connections of one Kafka listener and closes them when their time is up.

    ``sasl``: the listener authenticates with SASL (a connection is authenticated when the
    listener says so, `authenticated`); otherwise a connection is authenticated once TLS is done
    (at once on PLAINTEXT). ``serve`` runs per connection once TLS is done.
    """

    def __init__(
        self,
        name: str,
        *,
        ssl_context: ssl.SSLContext | None,
        sasl: bool,
        limiter: ConnectionLimiter,
        serve: Serve,
        idle_ms: int,
        handshake_ms: int,
        backlog: int,
        clock: Clock = SYSTEM_CLOCK,
        log: Any = None,
    ) -> None:
        self.name = name
        self._ssl_context = ssl_context
        self._sasl = sasl
        self._limiter = limiter
        self._serve = serve
        self._idle_ms = idle_ms
        self._handshake_ms = handshake_ms
        self._backlog = backlog
        self._clock = clock
        self._log = log or structlog.get_logger(__name__).bind(listener=name)
        self._sock: socket.socket | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._starting: set[asyncio.Task[None]] = set()
        self.connections: set[Connection] = set()

    def now_ms(self) -> int:
        return self._clock.monotonic_ms()

    def bind(self, host: str, port: int) -> int:
        """Bind and listen (nothing is accepted before `start`); the bound port."""
        self._sock = _listening_socket(host, port, self._backlog)
        return int(self._sock.getsockname()[1])

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._accept_loop()), loop.create_task(self._reap_loop())]

    async def stop(self) -> None:
        """Stop accepting (connections accepted but not yet set up are closed) and close the
        socket; the connections are the listener's to end."""
        for task in [*self._tasks, *self._starting]:
            task.cancel()
        for task in [*self._tasks, *self._starting]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def abort_all(self) -> None:
        """Abort every connection (also those still in their TLS handshake)."""
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()

    def authenticated(self, conn: Connection, reader: asyncio.StreamReader) -> None:
        """The connection proved who it is: from now on only idleness closes it, and it gets the
        buffers of a connection that may send large requests."""
        if conn.state.authenticated:
            return
        conn.state.authenticated = True
        # StreamReader has no public setter; its limit is read on every feed
        reader._limit = READER_LIMIT  # type: ignore[attr-defined]
        if isinstance(conn.protocol, LeanTlsProtocol):
            conn.protocol.grow()

    def closed(self, conn: Connection, reason: str) -> None:
        """The listener closes ``conn`` for a limit (counted by reason)."""
        self._limiter.metrics.closed.labels(self.name, reason).inc()

    def reauthenticated(self, conn: Connection, *, ok: bool) -> None:
        """A re-authentication on ``conn`` completed (``ok``) or failed (counted)."""
        self._limiter.metrics.reauthentications.labels(self.name, "success" if ok else "failed").inc()

    # ------------------------------------------------------------------ accept

    async def _accept_loop(self) -> None:
        """Wait for a slot, then take what the kernel queued (up to the backlog) at once, as
        asyncio's own server does: accepting one connection per loop pass lets a burst overflow
        the listen backlog (the kernel then drops SYNs, and clients retry after a second)."""
        loop = asyncio.get_running_loop()
        assert self._sock is not None
        listening = self._sock
        while True:
            await self._limiter.wait_for_slot(self.name)
            try:
                raw, address = await loop.sock_accept(listening)
            except OSError as err:  # EMFILE, ECONNABORTED: keep accepting after a breath
                self._log.warning("kafka_accept_failed", error=repr(err))
                await asyncio.sleep(0.1)
                continue
            self._admit(loop, raw, address)
            for _ in range(self._backlog):
                if not self._limiter.quotas.slot_available(self.name):
                    break
                try:
                    raw, address = listening.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as err:
                    self._log.warning("kafka_accept_failed", error=repr(err))
                    break
                self._admit(loop, raw, address)

    def _admit(self, loop: asyncio.AbstractEventLoop, raw: socket.socket, address: Any) -> None:
        """Count an accepted socket (closing it when its address is over its limit) and start its
        transport in a task of its own."""
        ip, port = _normal_ip(address[0]), int(address[1])
        if not self._limiter.admit(self.name, ip):
            self._log.info(
                "kafka_connection_refused",
                peer=f"{ip}:{port}",
                reason=f"max.connections.per.ip ({self._limiter.quotas.limit_for(ip)}) reached",
            )
            raw.close()
            return
        conn = Connection(ip, port, ConnectionState(self.now_ms(), authenticated=False))
        self.connections.add(conn)
        task = loop.create_task(self._start_transport(loop, conn, raw))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _start_transport(self, loop: asyncio.AbstractEventLoop, conn: Connection, raw: socket.socket) -> None:
        try:
            raw.setblocking(False)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            transport, conn.protocol = await loop.connect_accepted_socket(lambda: self._protocol(conn), raw)
            conn.transport = transport  # a socket transport: it has abort()
        except asyncio.CancelledError:  # the listener stops
            self._abandon(conn, raw)
            raise
        except Exception as err:  # noqa: BLE001  # one connection's failure must not stop accepting
            self._log.info("kafka_connection_failed", peer=conn.peer, error=repr(err))
            self._abandon(conn, raw)

    def _abandon(self, conn: Connection, raw: socket.socket) -> None:
        if conn.transport is not None:
            conn.transport.abort()  # its loss releases the quota
        else:
            raw.close()
            self._release(conn)

    def _protocol(self, conn: Connection) -> asyncio.BaseProtocol:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=PRE_AUTH_READER_LIMIT, loop=loop)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if not self._sasl:  # TLS is done (or there is none): the connection is authenticated
                self.authenticated(conn, reader)
            await self._serve(reader, writer, conn)

        def on_lost() -> None:
            self._release(conn)

        if self._ssl_context is None:
            return _TrackedStreamProtocol(reader, serve, loop=loop, on_lost=on_lost)
        context = self._ssl_context

        def make_tls() -> LeanTlsProtocol:
            app = asyncio.StreamReaderProtocol(reader, serve, loop=loop)
            conn.protocol = LeanTlsProtocol(
                loop,
                app,
                context,
                None,
                server_side=True,
                ssl_handshake_timeout=self._handshake_ms / 1000.0,
                on_lost=on_lost,
            )
            return conn.protocol  # type: ignore[no-any-return]

        return _AwaitingClientHello(make_tls, on_lost)

    def _release(self, conn: Connection) -> None:
        if conn.released:
            return
        conn.released = True
        self.connections.discard(conn)
        self._limiter.release(self.name, conn.ip)

    # ------------------------------------------------------------------ expiry

    async def _reap_loop(self) -> None:
        interval_s = check_interval_ms(self._idle_ms, self._handshake_ms) / 1000.0
        while True:
            await asyncio.sleep(interval_s)
            now_ms = self.now_ms()
            # a thousand connections that came together expire together: close them a batch per
            # loop step, so the other clients' requests are served in between
            while self.reap(now_ms, max_closes=REAP_BATCH):
                await asyncio.sleep(0)

    def reap(self, now_ms: int, *, max_closes: int | None = None) -> bool:
        """Abort the connections whose time is up (their quota is released as they are lost), at
        most ``max_closes`` of them; True when that cut it short (more may be due)."""
        closes = 0
        for conn in list(self.connections):
            reason = conn.state.expiry(now_ms, idle_ms=self._idle_ms, handshake_ms=self._handshake_ms)
            if reason is None or conn.transport is None or conn.transport.is_closing():
                continue  # not due, not set up yet, or aborted by an earlier batch and not yet lost
            if max_closes is not None and closes >= max_closes:
                return True
            self._log.info("kafka_connection_closed", peer=conn.peer, reason=_REASONS[reason])
            self.closed(conn, f"{reason}_timeout" if reason == "handshake" else reason)
            conn.transport.abort()
            closes += 1
        return False


#: connections the reaper closes per event-loop step
REAP_BATCH: Final = 64

_REASONS: Final = {
    "handshake": "no TLS handshake or SASL authentication within connections.handshake.timeout.ms",
    "idle": "idle for connections.max.idle.ms",
}


def _resolve_host(host: str) -> str:
    """The first address ``host`` (a name, an IPv4 or an IPv6 address, bracketed or not)
    resolves to, in either family (``gethostbyname`` knows IPv4 only)."""
    return str(socket.getaddrinfo(host.strip("[]"), None, type=socket.SOCK_STREAM)[0][4][0])


def _normal_ip(address: str) -> str:
    """An address as the quotas count it: in its canonical text (``0:0::1`` is ``::1``), and
    IPv4-mapped IPv6 (a dual-stack socket) as IPv4."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A listening, non-blocking socket on ``host:port``: every interface when ``host`` is empty
    (dual-stack where the system has it), else the first address ``host`` resolves to, as Kafka
    binds one address per listener."""
    if not host:
        if socket.has_dualstack_ipv6():
            sock = socket.create_server(("", port), family=socket.AF_INET6, backlog=backlog, dualstack_ipv6=True)
        else:
            sock = socket.create_server(("", port), backlog=backlog)
    else:
        family, _type, _proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.create_server(
            address[:2] if family == socket.AF_INET else address, family=family, backlog=backlog
        )
    sock.setblocking(False)
    return sock
