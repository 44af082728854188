"""Re-authentication on a Kafka connection (`broker.kafka._kafka_sasl.SaslApis`, KIP-368) on a
manual clock: the lifetime answered, a re-authentication on the same connection, and the refusals
(another principal, another mechanism, too soon, no lifetime)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kraftlog.broker.kafka._kafka_sasl import SaslApis
from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.common import ManualClock
from kraftlog.common import errors as kerr
from kraftlog.common.security._acl import ScramMechanism
from kraftlog.common.security._listener_security import ListenerSecurity
from kraftlog.common.security._scram import ScramClient, scram_credential

_USERS = {
    user: scram_credential(ScramMechanism.SCRAM_SHA_512, f"{user}-secret", user.encode() * 4, 4096)
    for user in ("alice", "bob")
}
_BAD = kerr.SaslAuthenticationFailedError.error_code


def _apis(clock: ManualClock) -> SaslApis:
    return SaslApis(1, lambda mechanism, user: _USERS.get(user), clock)


def _conn(reauth_ms: int = 3_000) -> ConnectionInfo:
    mechanisms = ("SCRAM-SHA-512", "SCRAM-SHA-256")
    security = ListenerSecurity(
        "SASL", "SASL_PLAINTEXT", None, mechanisms, max_reauth_ms=dict.fromkeys(mechanisms, reauth_ms)
    )
    return ConnectionInfo("SASL", "127.0.0.1:5000", security=security)


def _handshake(apis: SaslApis, conn: ConnectionInfo, mechanism: str = "SCRAM-SHA-512") -> int:
    request: Any = SimpleNamespace(api_version=1, body=SimpleNamespace(mechanism=mechanism))
    return int(asyncio.run(apis.sasl_handshake(request, conn))["error_code"])


def _authenticate(apis: SaslApis, conn: ConnectionInfo, token: bytes) -> dict[str, Any]:
    request: Any = SimpleNamespace(api_version=2, body=SimpleNamespace(auth_bytes=token))
    return asyncio.run(apis.sasl_authenticate(request, conn))


def _login(
    apis: SaslApis, conn: ConnectionInfo, user: str = "alice", mechanism: str = "SCRAM-SHA-512"
) -> dict[str, Any]:
    if _handshake(apis, conn, mechanism) != 0:
        return {"error_code": -1}
    client = ScramClient(ScramMechanism.SCRAM_SHA_512, user, f"{user}-secret")
    first = _authenticate(apis, conn, client.first_message())
    if first["error_code"]:
        return first
    return _authenticate(apis, conn, client.final_message(first["auth_bytes"]))


def test_the_lifetime_is_answered_and_the_session_expires() -> None:
    clock = ManualClock()
    apis, conn = _apis(clock), _conn()
    done = _login(apis, conn)
    assert done["error_code"] == 0 and done["session_lifetime"] == 3_000
    assert conn.authenticated and conn.session.principal == "User:alice"
    clock.advance(3_001)
    assert conn.reauth.expired()


def test_a_reauthentication_on_the_connection_renews_the_session() -> None:
    clock = ManualClock()
    apis, conn = _apis(clock), _conn()
    _login(apis, conn)
    clock.advance(2_800)
    assert _handshake(apis, conn) == 0
    assert not conn.authenticated  # only the exchange until it completes
    done = _finish(apis, conn, "alice")
    assert done["error_code"] == 0 and done["session_lifetime"] == 3_000
    assert conn.authenticated and not conn.close_after_answer and conn.reauth.reauthentications == 1
    clock.advance(2_900)
    assert not conn.reauth.expired()


def _finish(apis: SaslApis, conn: ConnectionInfo, user: str) -> dict[str, Any]:
    client = ScramClient(ScramMechanism.SCRAM_SHA_512, user, f"{user}-secret")
    first = _authenticate(apis, conn, client.first_message())
    return _authenticate(apis, conn, client.final_message(first["auth_bytes"]))


def test_another_principal_is_refused_and_the_connection_closed() -> None:
    clock = ManualClock()
    apis, conn = _apis(clock), _conn()
    _login(apis, conn)
    assert _handshake(apis, conn) == 0
    refused = _finish(apis, conn, "bob")
    assert refused["error_code"] == _BAD
    assert "Cannot change principals during re-authentication from User.alice: User.bob" in refused["error_message"]
    assert conn.close_after_answer and conn.session.principal == "User:alice" and conn.reauth.failures == 1


def test_another_mechanism_is_refused_and_the_connection_closed() -> None:
    clock = ManualClock()
    apis, conn = _apis(clock), _conn()
    _login(apis, conn)
    assert _handshake(apis, conn, "SCRAM-SHA-256") == 0  # Kafka answers the handshake, then fails
    refused = _authenticate(apis, conn, b"n,,n=alice,r=abc")
    assert refused["error_code"] == _BAD and "not supported for re-authentication" in refused["error_message"]
    assert conn.close_after_answer and conn.reauth.failures == 1


def test_a_second_handshake_is_illegal_without_a_lifetime_or_within_a_second() -> None:
    clock = ManualClock()
    apis, conn = _apis(clock), _conn(reauth_ms=0)
    assert _login(apis, conn)["session_lifetime"] == 0
    assert _handshake(apis, conn) == kerr.IllegalSaslStateError.error_code and conn.close_after_answer
    apis, conn = _apis(clock), _conn()
    _login(apis, conn)
    assert _handshake(apis, conn) == 0
    _finish(apis, conn, "alice")
    clock.advance(999)
    assert _handshake(apis, conn) == kerr.IllegalSaslStateError.error_code


def test_a_wrong_password_on_reauthentication_says_so_in_kafkas_words() -> None:
    clock = ManualClock()
    apis, conn = _apis(clock), _conn()
    _login(apis, conn)
    assert _handshake(apis, conn) == 0
    client = ScramClient(ScramMechanism.SCRAM_SHA_512, "alice", "wrong")
    first = _authenticate(apis, conn, client.first_message())
    refused = _authenticate(apis, conn, client.final_message(first["auth_bytes"]))
    assert refused["error_code"] == _BAD
    assert refused["error_message"].startswith("Authentication failed during re-authentication due to invalid")
    assert conn.close_after_answer and conn.reauth.failures == 1
