"""Connection limits of a node's listeners (Kafka's SocketServer and ConnectionQuotas keys, plus the
handshake deadline kraftlog adds), and the parser of ``max.connections.per.ip.overrides``.

Kafka's meaning, which `kraftlog.broker.kafka` follows on the Kafka-protocol listeners: over
``max.connections`` (the broker, across its listeners) or a listener's
``listener.name.<l>.max.connections`` the acceptor waits until a connection closes; over
``max.connections.per.ip`` (or the address's override) the new connection is closed at once.
How much of this a gRPC listener can do is said in docs/security.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftlog.common._config_def import INT_MAX, LONG_MAX, ConfigDef, ConfigType, Custom, Range

__all__ = ["define_connection_keys", "parse_ip_overrides"]

_I, _L, _S = ConfigType.INT, ConfigType.LONG, ConfigType.STRING


def parse_ip_overrides(value: str | Sequence[str] | None) -> dict[str, int]:
    """``host:count,host:count`` -> {host: count}. Hosts are names or addresses (IPv6 in
    brackets or bare: the count is after the last colon); a bad entry raises ValueError."""
    if value is None:
        return {}
    items = value.split(",") if isinstance(value, str) else list(value)
    out: dict[str, int] = {}
    for raw in items:
        entry = raw.strip()
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{entry!r} is not host:count")
        number = int(count)
        if number > INT_MAX:
            raise ValueError(f"{entry!r}: {number} is above {INT_MAX}")
        out[host] = number
    return out


def define_connection_keys(defs: ConfigDef) -> None:
    """Add the connection-limit keys, with Kafka's names, types and defaults, to the node schema."""
    (
        defs.define(
            "max.connections",
            _I,
            INT_MAX,
            Range(0),
            "Most connections the broker's Kafka listeners hold together; over it the acceptor waits "
            "for one to close. listener.name.<l>.max.connections bounds one listener (on a gRPC listener: "
            "grpc.max_allowed_incoming_connections).",
        )
        .define(
            "max.connections.per.ip",
            _I,
            INT_MAX,
            Range(0),
            "Most connections from one address on the Kafka listeners; a new one over it is closed at once.",
        )
        .define(
            "max.connections.per.ip.overrides",
            _S,
            "",
            Custom(parse_ip_overrides, "a comma-separated list of host:count"),
            "Per-address (or host name) exceptions to max.connections.per.ip, e.g. hostName:100,127.0.0.1:200.",
        )
        .define(
            "connections.max.idle.ms",
            _L,
            600_000,
            Range(-1, LONG_MAX),
            "A connection without traffic (a request read, an answer sent) for this long is closed; "
            "-1: never (gRPC listeners: grpc.max_connection_idle_ms).",
        )
        .define(
            "connections.handshake.timeout.ms",
            _I,
            10_000,
            Range(1),
            "kraftlog: a connection that has not finished its TLS handshake, and on a SASL listener its "
            "SASL authentication, within this time is closed (Kafka leaves it to connections.max.idle.ms; "
            "gRPC listeners: grpc.server_handshake_timeout_ms, TLS and HTTP/2 settings only).",
            kraftlog_only=True,
        )
        .define(
            "sasl.server.max.receive.size",
            _I,
            524_288,
            Range(1),
            "Largest request a SASL listener reads before and during SASL authentication; a larger one "
            "announced closes the connection unread.",
        )
        .define(
            "grpc.max.concurrent.streams",
            _I,
            100,
            Range(1),
            "kraftlog: calls one client connection may have in progress on a gRPC listener "
            "(grpc.max_concurrent_streams); more wait in the client.",
            kraftlog_only=True,
        )
        .define(
            "socket.listen.backlog.size",
            _I,
            50,
            Range(1),
            "Pending connections the kernel queues for a Kafka listener (also while max.connections holds accept).",
        )
    )
