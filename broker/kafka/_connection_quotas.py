"""Connection bookkeeping of the Kafka listeners: how many connections each address, each listener
and the broker hold (Kafka's ConnectionQuotas), and when each connection is due to close (Kafka's
``connections.max.idle.ms``, plus kraftlog's handshake deadline). Pure: no sockets, no clock of its
own; the listener (`_kafka_accept`) passes the time in.

Kafka's rules, kept here:

- ``max.connections`` counts every Kafka listener of the broker together, a listener's own
  ``listener.name.<l>.max.connections`` that listener alone; over either, the acceptor does not
  accept (it waits, the kernel queues the connection in the listen backlog) until one closes.
  kraftlog's inter-broker traffic is gRPC, so no Kafka listener is protected from the broker-wide
  limit the way Kafka's inter-broker listener is.
- ``max.connections.per.ip`` (or the address's entry of ``max.connections.per.ip.overrides``): a
  new connection over it is closed at once and not counted.
- A connection that has not authenticated (finished TLS, and SASL on a SASL listener) within the
  handshake deadline of its opening is closed, whatever it sent meanwhile. Any connection is closed
  after ``connections.max.idle.ms`` without traffic (a request read, an answer sent), as Kafka's
  selector closes it whether a request is in progress or not: an answer its peer does not read
  for that long frees its memory; a negative value turns that off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["ConnectionLimits", "ConnectionQuotas", "ConnectionState", "check_interval_ms"]

_UNLIMITED: Final = 2**31 - 1


@dataclass(frozen=True)
class ConnectionLimits:
    """One Kafka listener's per-connection bounds (the defaults are Kafka's, and kraftlog's
    handshake deadline)."""

    idle_ms: int = 600_000  # connections.max.idle.ms; negative: never
    handshake_ms: int = 10_000  # connections.handshake.timeout.ms
    backlog: int = 50  # socket.listen.backlog.size
    pre_auth_max_bytes: int = 524_288  # sasl.server.max.receive.size (SASL listeners only)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], listener_prefix: str) -> ConnectionLimits:
        """The bounds of the listener whose keys may be prefixed ``listener_prefix``."""
        cap_key = listener_prefix + "sasl.server.max.receive.size"
        return cls(
            idle_ms=int(config["connections.max.idle.ms"]),
            handshake_ms=int(config["connections.handshake.timeout.ms"]),
            backlog=int(config["socket.listen.backlog.size"]),
            pre_auth_max_bytes=int(config[cap_key] if cap_key in config else config["sasl.server.max.receive.size"]),
        )


class ConnectionQuotas:
    """Counts of open connections per address, per listener and in total, against their limits.

    Ordering rule: the acceptor asks `slot_available` before it accepts, then `admit` with the
    peer's address; every admitted connection is `release`d exactly once when it closes.
    """

    def __init__(
        self,
        *,
        max_connections: int = _UNLIMITED,
        max_per_ip: int = _UNLIMITED,
        per_ip_overrides: Mapping[str, int] | None = None,
        listener_max: Mapping[str, int] | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self._overrides = dict(per_ip_overrides or {})
        self._listener_max = dict(listener_max or {})
        self._per_ip: dict[str, int] = {}
        self._per_listener: dict[str, int] = {}
        self.total = 0

    def limit_for(self, ip: str) -> int:
        return self._overrides.get(ip, self.max_per_ip)

    def count(self, ip: str) -> int:
        return self._per_ip.get(ip, 0)

    def listener_count(self, listener: str) -> int:
        return self._per_listener.get(listener, 0)

    def slot_available(self, listener: str) -> bool:
        """Whether ``listener`` may accept a connection now (below its own and the broker's limit)."""
        if self._per_listener.get(listener, 0) >= self._listener_max.get(listener, _UNLIMITED):
            return False
        return self.total < self.max_connections

    def admit(self, listener: str, ip: str) -> bool:
        """Count a connection accepted on ``listener`` from ``ip``; False (not counted) when the
        address already holds its limit, and the connection must be closed."""
        count = self._per_ip.get(ip, 0)
        if count >= self.limit_for(ip):
            return False
        self._per_ip[ip] = count + 1
        self._per_listener[listener] = self._per_listener.get(listener, 0) + 1
        self.total += 1
        return True

    def release(self, listener: str, ip: str) -> None:
        """Uncount a connection `admit` counted."""
        count = self._per_ip.get(ip, 0)
        if count <= 0:
            raise ValueError(f"no connection from {ip} to release")
        if count == 1:
            del self._per_ip[ip]
        else:
            self._per_ip[ip] = count - 1
        self._per_listener[listener] -= 1
        self.total -= 1


class ConnectionState:
    """One connection's clock: when it opened, its last traffic and whether it has authenticated.
    Times are the listener clock's milliseconds."""

    __slots__ = ("opened_ms", "last_active_ms", "authenticated")

    def __init__(self, now_ms: int, *, authenticated: bool) -> None:
        self.opened_ms = now_ms
        self.last_active_ms = now_ms
        self.authenticated = authenticated

    def request_started(self, now_ms: int) -> None:
        """A request was read whole."""
        self.last_active_ms = now_ms

    def request_done(self, now_ms: int) -> None:
        """Its answer went out (or it needs none)."""
        self.last_active_ms = now_ms

    def expiry(self, now_ms: int, *, idle_ms: int, handshake_ms: int) -> str | None:
        """Why the connection must close now (``"handshake"``, ``"idle"``), None if it may stay."""
        if not self.authenticated and now_ms - self.opened_ms >= handshake_ms:
            return "handshake"
        if idle_ms >= 0 and now_ms - self.last_active_ms >= idle_ms:
            return "idle"
        return None


def check_interval_ms(idle_ms: int, handshake_ms: int) -> int:
    """How often a listener looks for expired connections: a tenth of the shorter bound, between
    10 ms and 1 s (a connection outlives its bound by at most that)."""
    bounds: Iterable[int] = [b for b in (idle_ms, handshake_ms) if b >= 0]
    shortest = min(bounds, default=10_000)
    return max(10, min(1000, shortest // 10))
