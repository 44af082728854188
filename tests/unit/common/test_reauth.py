"""Re-authentication rules of SASL sessions (KIP-368, `common.security._reauth`), on a manual clock;
the gRPC side (`SaslSessions` lifetimes, the client's `SessionToken`) and the per-mechanism keys."""

from __future__ import annotations

import itertools
import random

import pytest

from kraftlog.common import ManualClock
from kraftlog.common import errors as kerr
from kraftlog.common.config import ConfigError, NodeConfig
from kraftlog.common.security import MIN_REAUTH_INTERVAL_MS, SessionExpiry, session_lifetime_ms
from kraftlog.common.security._acl import ScramMechanism
from kraftlog.common.security._listener_security import ListenerSecurity
from kraftlog.common.security._sasl_sessions import SaslSessions
from kraftlog.common.security._scram import ScramClient, scram_credential
from kraftlog.proto._channels import REAUTH_AT_FRACTION, SessionToken


def test_the_lifetime_is_the_smaller_of_the_setting_and_the_credential() -> None:
    assert session_lifetime_ms(0, None, 1_000) is None  # Kafka's default: no limit
    assert session_lifetime_ms(3_000, None, 1_000) == 3_000
    assert session_lifetime_ms(0, 5_000, 1_000) == 4_000  # a token's own expiry bounds it
    assert session_lifetime_ms(3_000, 2_000, 1_000) == 1_000
    assert session_lifetime_ms(3_000, 500, 1_000) == 0  # already expired: zeroIfNegative


def test_a_session_expires_after_its_lifetime_and_not_before() -> None:
    clock = ManualClock()
    expiry = SessionExpiry(3_000, clock)
    assert expiry.authenticated("User:alice", "SCRAM-SHA-512") == 3_000
    clock.advance(3_000)
    assert not expiry.expired()  # Kafka: expired once now - expiry > 0
    clock.advance(1)
    assert expiry.expired()


def test_without_a_setting_sessions_never_expire_and_a_second_handshake_is_refused() -> None:
    clock = ManualClock()
    expiry = SessionExpiry(0, clock)
    assert expiry.authenticated("User:alice", "PLAIN") == 0
    clock.advance(10**9)
    assert not expiry.expired()
    assert not expiry.begin()  # no re-authentication: the handshake is an illegal state


def test_a_reauthentication_renews_the_lifetime_and_is_counted() -> None:
    clock = ManualClock()
    expiry = SessionExpiry(3_000, clock)
    expiry.authenticated("User:alice", "SCRAM-SHA-512")
    clock.advance(2_700)
    assert expiry.begin() and expiry.reauthenticating
    clock.advance(40)
    assert expiry.latency_ms() == 40
    assert expiry.authenticated("User:alice", "SCRAM-SHA-512") == 3_000
    assert not expiry.reauthenticating and expiry.reauthentications == 1
    clock.advance(2_900)
    assert not expiry.expired()  # 5,640 ms after the first login: the renewed lifetime counts
    clock.advance(200)
    assert expiry.expired()
    assert expiry.begin()  # an expired session may still re-authenticate (Kafka checks SaslHandshake first)


def test_at_most_one_reauthentication_a_second() -> None:
    clock = ManualClock()
    expiry = SessionExpiry(3_000, clock)
    expiry.authenticated("User:alice", "SCRAM-SHA-512")
    assert expiry.begin()
    expiry.authenticated("User:alice", "SCRAM-SHA-512")
    clock.advance(MIN_REAUTH_INTERVAL_MS - 1)
    assert not expiry.begin()
    clock.advance(1)
    assert expiry.begin()


def test_another_principal_fails_the_reauthentication() -> None:
    clock = ManualClock()
    expiry = SessionExpiry(3_000, clock)
    expiry.authenticated("User:alice", "SCRAM-SHA-512")
    assert expiry.begin()
    with pytest.raises(kerr.SaslAuthenticationFailedError, match="from User.alice: User.bob"):
        expiry.authenticated("User:bob", "SCRAM-SHA-512")
    assert expiry.failures == 1 and expiry.reauthentications == 0 and expiry.principal == "User:alice"


def test_another_mechanism_fails_the_reauthentication() -> None:
    expiry = SessionExpiry(3_000, ManualClock())
    expiry.authenticated("User:alice", "SCRAM-SHA-512")
    expiry.check_mechanism("SCRAM-SHA-256")  # outside a re-authentication: nothing to say
    assert expiry.bad_mechanism is None
    assert expiry.begin()
    expiry.check_mechanism("SCRAM-SHA-256")
    assert expiry.bad_mechanism is not None and "'SCRAM-SHA-512'" in expiry.bad_mechanism
    expiry.failed()
    assert expiry.failures == 1 and not expiry.reauthenticating


# ------------------------------------------------------------------ configuration

_BROKER = {
    "process.roles": "broker",
    "node.id": 1,
    "controller.quorum.voters": "0@127.0.0.1:9093",
    "listeners": "BROKER://127.0.0.1:9092",
    "listener.security.protocol.map": "BROKER:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "BROKER",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
    "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="n" password="p";',
}


def _security(**extra: object) -> ListenerSecurity:
    return ListenerSecurity.from_config(NodeConfig({**_BROKER, **extra}), "BROKER")


def test_the_setting_per_listener_and_mechanism_wins_over_the_nodes() -> None:
    assert _security().reauth_ms("SCRAM-SHA-512") == 0
    assert _security(**{"connections.max.reauth.ms": 60_000}).reauth_ms("SCRAM-SHA-256") == 60_000
    security = _security(
        **{
            "connections.max.reauth.ms": 60_000,
            "listener.name.broker.connections.max.reauth.ms": 30_000,
            "listener.name.broker.scram-sha-512.connections.max.reauth.ms": 10_000,
        }
    )
    assert security.reauth_ms("SCRAM-SHA-256") == 30_000
    assert security.reauth_ms("SCRAM-SHA-512") == 10_000


def test_a_bad_value_is_refused_with_the_key_named() -> None:
    with pytest.raises(ConfigError, match="connections.max.reauth.ms"):
        NodeConfig({**_BROKER, "connections.max.reauth.ms": "soon"})
    with pytest.raises(ConfigError, match="listener.name.broker.scram-sha-512.connections.max.reauth.ms"):
        NodeConfig({**_BROKER, "listener.name.broker.scram-sha-512.connections.max.reauth.ms": "soon"})


# ------------------------------------------------------------------ gRPC sessions

_CREDENTIAL = scram_credential(ScramMechanism.SCRAM_SHA_512, "alice-secret", b"salt" * 4, 4096)


def _login(sessions: SaslSessions, host: str = "10.0.0.1") -> str:
    error, exchange = sessions.handshake("SCRAM-SHA-512", host)
    assert error is None
    client = ScramClient(ScramMechanism.SCRAM_SHA_512, "alice", "alice-secret")
    server_first, _ = sessions.authenticate(exchange, client.first_message(), host)
    _final, token = sessions.authenticate(exchange, client.final_message(server_first), host)
    assert token is not None
    return token


def test_grpc_sessions_live_connections_max_reauth_ms_and_say_so() -> None:
    now = [1000.0]
    tokens = (f"t{i}" for i in itertools.count())
    security = ListenerSecurity("BROKER", "SASL_SSL", None, ("SCRAM-SHA-512",), max_reauth_ms={"SCRAM-SHA-512": 3_000})
    sessions = SaslSessions(
        security,
        lambda m, u: _CREDENTIAL if u == "alice" else None,
        clock=lambda: now[0],
        token_factory=lambda: next(tokens),
    )
    token = _login(sessions)
    assert sessions.lifetime_ms(token) == 3_000
    now[0] += 2.9
    assert sessions.session(token, "10.0.0.1") is not None  # in use, still within its lifetime
    now[0] += 0.2
    assert sessions.session(token, "10.0.0.1") is None  # used all along, yet expired
    plain = SaslSessions(
        ListenerSecurity("BROKER", "SASL_SSL", None, ("SCRAM-SHA-512",)),
        lambda m, u: _CREDENTIAL,
        clock=lambda: now[0],
        token_factory=lambda: next(tokens),
    )
    other = _login(plain)
    assert plain.lifetime_ms(other) == 0
    now[0] += 3.1
    assert plain.session(other, "10.0.0.1") is not None


def test_a_client_logs_in_again_between_85_and_95_percent_of_the_lifetime() -> None:
    clock = ManualClock()
    rng = random.Random(7)
    token = SessionToken(clock, rng)
    assert token.needs_login()
    token.set("t1", 0)
    clock.advance(10**9)
    assert not token.needs_login()  # no lifetime: only a refusal makes it log in again
    assert token.needs_login(stale="t1") and not token.needs_login(stale="t0")
    for _ in range(50):
        token.set("t2", 10_000)
        assert token.refresh_at_ms is not None
        due_in_ms = token.refresh_at_ms - clock.monotonic_ms()
        assert REAUTH_AT_FRACTION[0] * 10_000 <= due_in_ms <= REAUTH_AT_FRACTION[1] * 10_000
        clock.advance(due_in_ms - 1)
        assert not token.needs_login()
        clock.advance(1)
        assert token.needs_login()
