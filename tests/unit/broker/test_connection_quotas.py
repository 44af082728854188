"""Connection bookkeeping of the Kafka listeners (issue 24): Kafka's ConnectionQuotas counts and
limits, each connection's handshake and idle deadlines, the limits read from a node config, the
shared slot a listener waits for, and the gRPC interceptor's refusal before reading a message."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from kraftlog.broker.kafka._connection_quotas import (
    ConnectionLimits,
    ConnectionQuotas,
    ConnectionState,
    check_interval_ms,
)
from kraftlog.broker.kafka._kafka_accept import ConnectionLimiter, _normal_ip
from kraftlog.common._config_def import ConfigError
from kraftlog.common.config import NodeConfig
from kraftlog.common.config._config_schema_connections import parse_ip_overrides
from kraftlog.common.security import SESSION_METADATA, ListenerSecurity, SaslSessions
from kraftlog.node._grpc_security import SecurityInterceptor

_BROKER = {
    "node.id": 1,
    "process.roles": "broker",
    "controller.quorum.voters": "0@127.0.0.1:9093",
    "listeners": "BROKER://:9091,PLAINTEXT://:9092,SASL_PLAINTEXT://:9094",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
}

# ------------------------------------------------------------------ ConnectionQuotas


def test_an_address_over_its_limit_is_refused_and_not_counted() -> None:
    quotas = ConnectionQuotas(max_per_ip=2, per_ip_overrides={"10.0.0.9": 0, "10.0.0.5": 3})
    assert quotas.admit("PLAINTEXT", "10.0.0.1") and quotas.admit("PLAINTEXT", "10.0.0.1")
    assert not quotas.admit("PLAINTEXT", "10.0.0.1")  # Kafka: count >= max refuses
    assert quotas.count("10.0.0.1") == 2 and quotas.total == 2
    assert not quotas.admit("PLAINTEXT", "10.0.0.9")  # an override of 0 bans the address
    assert all(quotas.admit("PLAINTEXT", "10.0.0.5") for _ in range(3))  # an override above the default
    assert not quotas.admit("PLAINTEXT", "10.0.0.5")
    quotas.release("PLAINTEXT", "10.0.0.1")
    assert quotas.count("10.0.0.1") == 1 and quotas.admit("PLAINTEXT", "10.0.0.1")


def test_the_broker_and_listener_limits_close_the_slot_until_a_release() -> None:
    quotas = ConnectionQuotas(max_connections=3, listener_max={"SASL_SSL": 1})
    assert quotas.slot_available("SASL_SSL") and quotas.admit("SASL_SSL", "a")
    assert not quotas.slot_available("SASL_SSL")  # its own limit
    assert quotas.slot_available("PLAINTEXT")
    assert quotas.admit("PLAINTEXT", "b") and quotas.admit("PLAINTEXT", "c")
    assert not quotas.slot_available("PLAINTEXT")  # the broker's, over every listener
    quotas.release("SASL_SSL", "a")
    assert quotas.slot_available("PLAINTEXT") and quotas.slot_available("SASL_SSL")
    assert quotas.listener_count("PLAINTEXT") == 2 and quotas.total == 2


def test_releasing_what_was_not_admitted_is_a_bug() -> None:
    with pytest.raises(ValueError, match="no connection from 10.1.1.1"):
        ConnectionQuotas().release("PLAINTEXT", "10.1.1.1")


# ------------------------------------------------------------------ deadlines


def test_an_unauthenticated_connection_closes_at_its_deadline_whatever_it_sends() -> None:
    state = ConnectionState(1_000, authenticated=False)
    state.request_started(5_000)
    state.request_done(5_500)
    assert state.expiry(10_999, idle_ms=60_000, handshake_ms=10_000) is None
    assert state.expiry(11_000, idle_ms=60_000, handshake_ms=10_000) == "handshake"
    state.authenticated = True
    assert state.expiry(11_000, idle_ms=60_000, handshake_ms=10_000) is None


def test_idleness_counts_from_the_last_traffic_in_or_out() -> None:
    state = ConnectionState(0, authenticated=True)
    state.request_started(1_000)
    assert state.expiry(5_999, idle_ms=5_000, handshake_ms=1) is None
    # as Kafka's selector: an answer that does not go out for that long is idleness too
    assert state.expiry(6_000, idle_ms=5_000, handshake_ms=1) == "idle"
    state.request_done(100_000)
    assert state.expiry(104_999, idle_ms=5_000, handshake_ms=1) is None
    assert state.expiry(105_000, idle_ms=5_000, handshake_ms=1) == "idle"
    assert state.expiry(10**9, idle_ms=-1, handshake_ms=1) is None  # -1: never


def test_the_reaper_looks_often_enough_for_the_shorter_bound() -> None:
    assert check_interval_ms(600_000, 10_000) == 1000
    assert check_interval_ms(2_000, 10_000) == 200
    assert check_interval_ms(-1, 50) == 10
    assert check_interval_ms(-1, 100_000) == 1000


# ------------------------------------------------------------------ config


def test_connection_keys_have_kafkas_defaults() -> None:
    cfg = NodeConfig(_BROKER)
    assert cfg["max.connections"] == cfg["max.connections.per.ip"] == 2**31 - 1
    assert cfg["connections.max.idle.ms"] == 600_000
    assert cfg["sasl.server.max.receive.size"] == 524_288
    assert cfg["socket.listen.backlog.size"] == 50
    assert ConnectionLimits.from_config(cfg, "listener.name.sasl_plaintext.") == ConnectionLimits()


def test_listener_prefixed_limits_win_for_their_listener() -> None:
    cfg = NodeConfig(
        {
            **_BROKER,
            "listener.name.sasl_plaintext.sasl.server.max.receive.size": 4096,
            "listener.name.sasl_plaintext.max.connections": 7,
            "max.connections.per.ip.overrides": "127.0.0.2:2, [::1]:5",
            "connections.max.idle.ms": 1500,
        }
    )
    assert ConnectionLimits.from_config(cfg, "listener.name.sasl_plaintext.").pre_auth_max_bytes == 4096
    assert ConnectionLimits.from_config(cfg, "listener.name.plaintext.").idle_ms == 1500
    limiter = ConnectionLimiter.from_config(cfg, ["PLAINTEXT", "SASL_PLAINTEXT"], resolve=lambda host: host)
    assert limiter.quotas.limit_for("127.0.0.2") == 2 and limiter.quotas.limit_for("::1") == 5
    assert all(limiter.quotas.admit("SASL_PLAINTEXT", f"10.0.0.{i}") for i in range(7))
    assert not limiter.quotas.slot_available("SASL_PLAINTEXT") and limiter.quotas.slot_available("PLAINTEXT")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max.connections", -1),
        ("max.connections.per.ip", -5),
        ("max.connections.per.ip.overrides", "127.0.0.1"),
        ("max.connections.per.ip.overrides", "host:many"),
        ("connections.max.idle.ms", -2),
        ("connections.handshake.timeout.ms", 0),
        ("sasl.server.max.receive.size", 0),
        ("listener.name.sasl_plaintext.max.connections", -1),
        ("grpc.max.concurrent.streams", 0),
    ],
)
def test_bad_connection_limits_fail_at_start_naming_the_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as err:
        NodeConfig({**_BROKER, key: value})
    assert err.value.key == key


def test_an_override_host_that_does_not_resolve_fails_at_start_naming_the_key() -> None:
    def resolve(host: str) -> str:
        raise OSError("Name or service not known")

    cfg = NodeConfig({**_BROKER, "max.connections.per.ip.overrides": "nohost.invalid:3"})
    with pytest.raises(ConfigError, match="nohost.invalid") as err:
        ConnectionLimiter.from_config(cfg, ["PLAINTEXT"], resolve=resolve)
    assert err.value.key == "max.connections.per.ip.overrides"


def test_ip_overrides_parse_hosts_and_addresses() -> None:
    assert parse_ip_overrides("hostName:100,127.0.0.1:200") == {"hostName": 100, "127.0.0.1": 200}
    assert parse_ip_overrides("") == {} and parse_ip_overrides(None) == {}
    assert parse_ip_overrides(["::1:3"]) == {"::1": 3}
    with pytest.raises(ValueError, match="not host:count"):
        parse_ip_overrides(":3")


def test_a_dual_stack_peer_is_counted_as_its_ipv4_address() -> None:
    assert _normal_ip("::ffff:127.0.0.2") == "127.0.0.2"
    assert _normal_ip("::1") == "::1" and _normal_ip("10.0.0.1") == "10.0.0.1"
    assert _normal_ip("0:0::1") == "::1"  # one text per address, whichever way it was written


def test_ipv6_overrides_resolve_at_start() -> None:
    """An IPv6 host in max.connections.per.ip.overrides is an address like any other (it failed
    at start with gethostbyname, which knows IPv4 only)."""
    cfg = NodeConfig.from_mapping(
        {
            "node.id": 1,
            "process.roles": "broker",
            "listeners": "PLAINTEXT://127.0.0.1:9092",
            "controller.quorum.voters": "9@127.0.0.1:9999",
            "log.dirs": "/tmp/x",
            "max.connections.per.ip.overrides": "[0:0::1]:5,127.0.0.1:3",
        }
    )
    limiter = ConnectionLimiter.from_config(cfg, ["PLAINTEXT"])
    assert limiter.quotas._overrides == {"::1": 5, "127.0.0.1": 3}


# ------------------------------------------------------------------ waiting for a slot


def test_a_listener_waits_for_a_slot_until_any_listener_releases_one() -> None:
    async def scenario() -> list[str]:
        limiter = ConnectionLimiter(ConnectionQuotas(max_connections=1))
        assert limiter.admit("A", "10.0.0.1")
        order: list[str] = []

        async def accept(listener: str) -> None:
            await limiter.wait_for_slot(listener)
            order.append(listener)

        waiting = asyncio.ensure_future(accept("B"))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done()
        order.append("released")
        limiter.release("A", "10.0.0.1")
        await asyncio.wait_for(waiting, 1.0)
        return order

    assert asyncio.run(scenario()) == ["released", "B"]


# ------------------------------------------------------------------ gRPC: refused before reading


def _interceptor(client_certificates: bool) -> tuple[SecurityInterceptor, SaslSessions]:
    security = ListenerSecurity("BROKER", "SASL_PLAINTEXT", None, ("PLAIN",))
    sessions = SaslSessions(security, lambda mechanism, user: None, token_factory=lambda: "tok-1")
    interceptor = SecurityInterceptor(
        listener="BROKER",
        security_protocol="SASL_PLAINTEXT",
        authorize_fn=lambda *a: True,
        sasl=sessions,
        client_certificates=client_certificates,
    )
    return interceptor, sessions


def test_a_call_that_cannot_have_a_session_is_refused_before_its_message() -> None:
    interceptor, sessions = _interceptor(client_certificates=False)
    produce = "/kraftlog.v1.BrokerService/Produce"
    assert "needs a SASL session" in str(interceptor._refusal_before_reading(produce, ()))
    assert interceptor._refusal_before_reading(produce, ((SESSION_METADATA, "forged"),)) is not None
    # the exchange itself is read (from its metadata); grpc's own services are not exempt: a health
    # check without a session is answered unread (`_unread_overall_health`), reflection refused
    assert interceptor._refusal_before_reading("/kraftlog.v1.SaslService/SaslAuthenticate", ()) is None
    assert interceptor._refusal_before_reading("/grpc.health.v1.Health/Check", ()) is not None
    assert interceptor._refusal_before_reading("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", ())
    sessions._sessions["tok-1"] = object()  # type: ignore[assignment]  # a session exists
    assert sessions.known("tok-1")
    assert interceptor._refusal_before_reading(produce, ((SESSION_METADATA, "tok-1"),)) is None


def test_a_listener_that_takes_certificates_leaves_tokenless_calls_to_the_session_check() -> None:
    interceptor, _ = _interceptor(client_certificates=True)
    assert interceptor._refusal_before_reading("/kraftlog.v1.BrokerService/Produce", ()) is None
    unsecured = SecurityInterceptor(listener="P", security_protocol="PLAINTEXT", authorize_fn=lambda *a: True)
    assert unsecured._refusal_before_reading("/kraftlog.v1.BrokerService/Produce", ()) is None


def test_the_refusal_answers_unauthenticated_without_reading_the_request() -> None:
    from kraftlog.node._grpc_security import _unread_refusal

    handler = _unread_refusal("SASL_AUTHENTICATION_FAILED: no session")
    assert handler.request_streaming and handler.request_deserializer is None

    class Context:
        aborted: tuple[object, str] | None = None

        async def abort(self, code: object, details: str) -> None:
            self.aborted = (code, details)

    class Untouched:
        def __aiter__(self) -> Untouched:
            raise AssertionError("the request was read")

    context = Context()
    asyncio.run(handler.stream_unary(Untouched(), context))
    assert context.aborted == (grpc.StatusCode.UNAUTHENTICATED, "SASL_AUTHENTICATION_FAILED: no session")


# ------------------------------------------------------------------ the reaper


class _Transport:
    """What the reaper asks of a socket's transport; `abort` marks it closing, as asyncio's does."""

    def __init__(self) -> None:
        self.aborted = 0

    def is_closing(self) -> bool:
        return self.aborted > 0

    def abort(self) -> None:
        self.aborted += 1


def test_the_reaper_closes_expired_connections_a_batch_at_a_time() -> None:
    """1,000 connections that came together expire together: `reap` closes at most a batch and
    says more are due; a connection aborted by an earlier batch is not aborted (or counted) again
    while it waits to be lost; one not yet due is left alone."""
    from kraftlog.broker.kafka._kafka_accept import REAP_BATCH, Connection, KafkaAcceptor
    from kraftlog.common import ManualClock

    async def never(*_: object) -> None:
        return None

    clock = ManualClock()
    limiter = ConnectionLimiter(ConnectionQuotas())
    acceptor = KafkaAcceptor(
        "SSL",
        ssl_context=None,
        sasl=False,
        limiter=limiter,
        serve=never,
        idle_ms=600_000,
        handshake_ms=10_000,
        backlog=50,
        clock=clock,
    )
    now_ms = acceptor.now_ms()
    stale = [Connection("10.0.0.1", 40_000 + i, ConnectionState(now_ms, authenticated=False)) for i in range(150)]
    fresh = Connection("10.0.0.2", 1, ConnectionState(now_ms + 9_000, authenticated=False))
    for conn in [*stale, fresh]:
        conn.transport = _Transport()  # type: ignore[assignment]
        acceptor.connections.add(conn)
    later = now_ms + 10_000
    assert acceptor.reap(later, max_closes=REAP_BATCH) is True
    assert sum(c.transport.aborted for c in stale) == REAP_BATCH  # type: ignore[union-attr]
    assert acceptor.reap(later, max_closes=REAP_BATCH) is True
    assert acceptor.reap(later, max_closes=REAP_BATCH) is False
    assert [c.transport.aborted for c in stale] == [1] * 150  # type: ignore[union-attr]
    assert fresh.transport.aborted == 0  # type: ignore[union-attr]
    closed = limiter.metrics.closed.labels("SSL", "handshake_timeout")._value.get()
    assert closed == 150


def test_a_health_check_without_a_session_is_answered_the_overall_status_unread() -> None:
    """Check and Watch become request-streaming handlers that never read the request and ask the
    real servicer for the empty service name (the node's overall status), whatever was named."""
    from grpc_health.v1 import health, health_pb2

    from kraftlog.node._grpc_security import _unread_overall_health

    servicer = health.aio.HealthServicer()
    asked: list[str] = []

    async def check(request: health_pb2.HealthCheckRequest, context: object) -> health_pb2.HealthCheckResponse:
        asked.append(request.service)
        return await servicer.Check(request, context)

    async def scenario() -> health_pb2.HealthCheckResponse:
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        unary = grpc.unary_unary_rpc_method_handler(check)
        handler = _unread_overall_health(unary)
        assert handler.request_streaming and handler.request_deserializer is None

        async def never_read() -> AsyncIterator[object]:
            raise AssertionError("the request was read")
            yield  # pragma: no cover

        response: health_pb2.HealthCheckResponse = await handler.stream_unary(never_read(), object())
        return response

    assert asyncio.run(scenario()).status == health_pb2.HealthCheckResponse.SERVING
    assert asked == [""]
