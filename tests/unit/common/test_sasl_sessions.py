"""SASL over gRPC, server side (`common.security._sasl_sessions`): exchanges, sessions, expiry, binding."""

from __future__ import annotations

import itertools

import pytest

from kraftlog.common import errors as kerr
from kraftlog.common.security._acl import ScramMechanism
from kraftlog.common.security._listener_security import ListenerSecurity
from kraftlog.common.security._sasl_sessions import SaslSessions
from kraftlog.common.security._scram import ScramClient, scram_credential

_CREDENTIAL = scram_credential(ScramMechanism.SCRAM_SHA_512, "alice-secret", b"salt" * 4, 4096)
_SECURITY = ListenerSecurity("BROKER", "SASL_SSL", None, ("SCRAM-SHA-512", "PLAIN"), {"bob": "bob-secret"})


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _sessions(clock: _Clock, **kwargs: object) -> SaslSessions:
    tokens = (f"t{i}" for i in itertools.count())

    def lookup(mechanism: ScramMechanism, user: str) -> object:
        return _CREDENTIAL if (mechanism, user) == (ScramMechanism.SCRAM_SHA_512, "alice") else None

    return SaslSessions(_SECURITY, lookup, clock=clock, token_factory=lambda: next(tokens), **kwargs)  # type: ignore[arg-type]


def _scram_login(sessions: SaslSessions, host: str, password: str = "alice-secret") -> str | None:
    error, exchange = sessions.handshake("SCRAM-SHA-512", host)
    assert error is None
    client = ScramClient(ScramMechanism.SCRAM_SHA_512, "alice", password)
    server_first, none = sessions.authenticate(exchange, client.first_message(), host)
    assert none is None
    server_final, token = sessions.authenticate(exchange, client.final_message(server_first), host)
    client.verify(server_final)
    return token


def test_a_completed_exchange_yields_a_session_bound_to_its_host() -> None:
    clock = _Clock()
    sessions = _sessions(clock)
    token = _scram_login(sessions, "10.0.0.1")
    assert token is not None
    session = sessions.session(token, "10.0.0.1")
    assert session is not None and session.principal == "User:alice" and session.sasl_mechanism == "SCRAM-SHA-512"
    assert sessions.session(token, "10.0.0.2") is None  # a token does not move to another host
    assert sessions.session("t999", "10.0.0.1") is None


def test_sessions_expire_when_idle_and_exchanges_when_slow() -> None:
    clock = _Clock()
    sessions = _sessions(clock, idle_s=60.0, exchange_timeout_s=5.0)
    token = _scram_login(sessions, "h")
    assert token is not None
    clock.now += 59
    assert sessions.session(token, "h") is not None  # use keeps it alive
    clock.now += 59
    assert sessions.session(token, "h") is not None
    clock.now += 61
    assert sessions.session(token, "h") is None
    _error, exchange = sessions.handshake("PLAIN", "h")
    clock.now += 6
    with pytest.raises(kerr.IllegalSaslStateError):
        sessions.authenticate(exchange, b"\0bob\0bob-secret", "h")


def test_failures_end_the_exchange_and_name_no_secret() -> None:
    sessions = _sessions(_Clock())
    with pytest.raises(kerr.SaslAuthenticationFailedError) as err:
        _scram_login(sessions, "h", password="wrong")
    assert "wrong" not in str(err.value)
    assert sessions.handshake("GSSAPI", "h") == (kerr.UnsupportedSaslMechanismError, "")
    _error, exchange = sessions.handshake("PLAIN", "h")
    with pytest.raises(kerr.IllegalSaslStateError):
        sessions.authenticate(exchange, b"\0bob\0bob-secret", "elsewhere")  # another host's exchange
    _answer, token = sessions.authenticate(exchange, b"\0bob\0bob-secret", "h")
    assert token is not None and sessions.session(token, "h").principal == "User:bob"  # type: ignore[union-attr]
    with pytest.raises(kerr.IllegalSaslStateError):
        sessions.authenticate(exchange, b"\0bob\0bob-secret", "h")  # a finished exchange is gone


def test_the_tables_are_bounded() -> None:
    sessions = _sessions(_Clock(), max_sessions=3)
    ids = [sessions.handshake("PLAIN", "h")[1] for _ in range(5)]
    with pytest.raises(kerr.IllegalSaslStateError):
        sessions.authenticate(ids[0], b"\0bob\0bob-secret", "h")  # the oldest was dropped
    assert sessions.authenticate(ids[-1], b"\0bob\0bob-secret", "h")[1] is not None


def test_a_session_ends_with_its_lifetime_and_with_its_credential() -> None:
    clock = _Clock()
    credentials = {"alice": _CREDENTIAL}

    def lookup(mechanism: ScramMechanism, user: str) -> object:
        return credentials.get(user)

    sessions = SaslSessions(_SECURITY, lookup, clock=clock, max_lifetime_s=100.0)  # type: ignore[arg-type]
    token = _scram_login(sessions, "h")
    assert token is not None
    for _ in range(3):
        clock.now += 30
        assert sessions.session(token, "h") is not None  # in use, within its lifetime
    clock.now += 30
    assert sessions.session(token, "h") is None  # 120 s after the login: gone however busy
    token = _scram_login(sessions, "h")
    assert token is not None and sessions.session(token, "h") is not None
    credentials["alice"] = scram_credential(ScramMechanism.SCRAM_SHA_512, "new-secret", b"salt" * 4, 4096)
    assert sessions.session(token, "h") is None  # the password changed: the session ends


def test_one_host_cannot_push_out_anothers_pending_logins() -> None:
    sessions = _sessions(_Clock(), pending_per_host=2)
    _error, theirs = sessions.handshake("PLAIN", "honest")
    for _ in range(50):
        sessions.handshake("PLAIN", "flood")
    assert sessions.authenticate(theirs, b"\0bob\0bob-secret", "honest")[1] is not None
