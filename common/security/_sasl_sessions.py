"""SASL over gRPC, server side: exchanges and the sessions they yield (pure; the node's SaslService
and its interceptor are the I/O shell).

A gRPC channel has no connection a SASL exchange could be bound to, so the exchange is made once
per channel over ``SaslService`` (SaslHandshake names the mechanism and opens an exchange,
SaslAuthenticate carries its messages) and ends with a random session token the channel then sends
as call metadata. Tokens are bound to the client's host (a token seen from another address is
refused, as a Kafka session cannot move to another connection), expire after ``idle_s`` unused,
and are never logged. A session ends after ``max_lifetime_s`` even in use, and at once when its
user's SCRAM credential is removed or replaced (the channel then logs in again). With
``connections.max.reauth.ms`` (KIP-368, per listener and mechanism as on the Kafka listener) a
session lives at most that long: its lifetime is answered with the session token, the client logs
in again before it ends (a new token; the old one is refused once expired, UNAUTHENTICATED). Exchanges that do
not finish within ``exchange_timeout_s`` are dropped; a host has at most ``pending_per_host`` of them
(its oldest goes first, so one flooding host cannot push out the others' logins) and both tables are
bounded, so unauthenticated callers cannot grow them without limit.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kraftlog.common import errors as kerr
from kraftlog.common._clock import SYSTEM_CLOCK
from kraftlog.common.security._acl import ScramMechanism
from kraftlog.common.security._listener_security import ListenerSecurity
from kraftlog.common.security._reauth import session_lifetime_ms
from kraftlog.common.security._request_context import Session
from kraftlog.common.security._sasl_plain import PlainServer
from kraftlog.common.security._scram import ScramCredential, ScramServer

__all__ = [
    "SASL_AUTH_METADATA",
    "SASL_EXCHANGE_METADATA",
    "SASL_MECHANISM_METADATA",
    "SESSION_METADATA",
    "SaslSessions",
    "sasl_server",
    "sasl_step",
    "sasl_session",
]

#: the call metadata key carrying a channel's session token
SESSION_METADATA: Final = "kraftlog-sasl-session"
#: the SASL exchange travels in SaslService's call metadata, never in its message bodies: grpc reads
#: a message whole (up to the server's one size limit) before a handler could refuse it, while
#: metadata is bounded by grpc's header limit; SaslHandshake names the mechanism, SaslAuthenticate
#: the exchange and its SASL message (binary: a ``-bin`` key, base64 on the wire)
SASL_MECHANISM_METADATA: Final = "kraftlog-sasl-mechanism"
SASL_EXCHANGE_METADATA: Final = "kraftlog-sasl-exchange"
SASL_AUTH_METADATA: Final = "kraftlog-sasl-auth-bin"

ScramLookup = Callable[[ScramMechanism, str], "ScramCredential | None"]


def sasl_server(security: ListenerSecurity, mechanism: str, lookup: ScramLookup) -> ScramServer | PlainServer:
    """The server side of one exchange of ``mechanism`` on a listener (both protocols): PLAIN
    against the listener's JAAS users, SCRAM against ``lookup`` (the metadata image's credentials)."""
    if mechanism == "PLAIN":
        return PlainServer(security.verify_plain)
    scram = ScramMechanism.from_name(mechanism)
    return ScramServer(scram, lambda user: lookup(scram, user), fake_salt_key=security.scram_unknown_user_key)


def sasl_step(server: ScramServer | PlainServer, token: bytes) -> bytes:
    """One message of an exchange: the server's answer. A failure raises the same error type
    with Kafka's message, which names the mechanism only (the reason stays in ``__cause__``)."""
    try:
        challenge: bytes = server.evaluate(token)
    except (kerr.SaslAuthenticationFailedError, kerr.IllegalSaslStateError) as err:
        raise type(err)(
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {server.mechanism_name}"
        ) from err
    return challenge


def sasl_session(server: ScramServer | PlainServer, client_host: str, listener: str, protocol: str) -> Session:
    """The session a completed exchange authenticates: ``User:<name>``."""
    assert server.complete and server.username is not None
    return Session(f"User:{server.username}", client_host, listener, protocol, server.mechanism_name)


@dataclass
class _Exchange:
    server: ScramServer | PlainServer
    host: str
    started_s: float


@dataclass
class _Session:
    session: Session
    created_s: float
    last_used_s: float
    credential: ScramCredential | None  # the SCRAM credential it logged in with (checked on use)
    lifetime_ms: int = 0  # connections.max.reauth.ms of its mechanism (0: max_lifetime_s only)


class SaslSessions:
    """The SASL exchanges and sessions of one gRPC listener."""

    def __init__(
        self,
        security: ListenerSecurity,
        scram_lookup: ScramLookup,
        *,
        clock: Callable[[], float] = SYSTEM_CLOCK.monotonic_s,
        token_factory: Callable[[], str] = lambda: secrets.token_urlsafe(32),
        idle_s: float = 600.0,
        max_lifetime_s: float = 3600.0,
        exchange_timeout_s: float = 30.0,
        pending_per_host: int = 16,
        max_sessions: int = 100_000,
    ) -> None:
        self.security = security
        self._lookup = scram_lookup
        self._clock = clock
        self._token = token_factory
        self.idle_s = idle_s
        self.max_lifetime_s = max_lifetime_s
        self.exchange_timeout_s = exchange_timeout_s
        self.pending_per_host = pending_per_host
        self.max_sessions = max_sessions
        self._exchanges: OrderedDict[str, _Exchange] = OrderedDict()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()

    def handshake(self, mechanism: str, host: str) -> tuple[type[kerr.KafkaError] | None, str]:
        """Open an exchange of ``mechanism``: (None, exchange id) or (UNSUPPORTED_SASL_MECHANISM, "")."""
        if mechanism not in self.security.sasl_mechanisms:
            return kerr.UnsupportedSaslMechanismError, ""
        self._expire()
        server = sasl_server(self.security, mechanism, self._lookup)
        mine = [eid for eid, exchange in self._exchanges.items() if exchange.host == host]
        for eid in mine[: max(0, len(mine) - self.pending_per_host + 1)]:
            del self._exchanges[eid]
        exchange_id = self._token()
        self._exchanges[exchange_id] = _Exchange(server, host, self._clock())
        while len(self._exchanges) > self.max_sessions:
            self._exchanges.popitem(last=False)
        return None, exchange_id

    def authenticate(self, exchange_id: str, token: bytes, host: str) -> tuple[bytes, str | None]:
        """One message of an exchange: (the server's answer, the session token once complete).

        A failure raises `SaslAuthenticationFailedError` (Kafka's message; the exchange is gone)
        or `IllegalSaslStateError` (no such exchange, or from another host)."""
        self._expire()
        exchange = self._exchanges.get(exchange_id)
        if exchange is None or exchange.host != host:
            raise kerr.IllegalSaslStateError("no SASL exchange with that id is in progress")
        try:
            challenge = sasl_step(exchange.server, token)
        except (kerr.SaslAuthenticationFailedError, kerr.IllegalSaslStateError):
            del self._exchanges[exchange_id]
            raise
        if not exchange.server.complete:
            return challenge, None
        del self._exchanges[exchange_id]
        session = sasl_session(exchange.server, host, self.security.name, self.security.protocol)
        credential = None
        if isinstance(exchange.server, ScramServer):
            assert exchange.server.username is not None
            credential = self._lookup(
                ScramMechanism.from_name(exchange.server.mechanism_name), exchange.server.username
            )
        session_token = self._token()
        now = self._clock()
        max_reauth_ms = self.security.reauth_ms(exchange.server.mechanism_name)
        lifetime_ms = session_lifetime_ms(max_reauth_ms, None, 0) or 0
        self._sessions[session_token] = _Session(session, now, now, credential, lifetime_ms)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return challenge, session_token

    def lifetime_ms(self, token: str) -> int:
        """The lifetime of the session ``token`` names, as SaslAuthenticate answers it: its
        ``connections.max.reauth.ms`` (0: no re-authentication asked; the session still ends
        after ``max_lifetime_s`` or idle, and the client logs in again when refused)."""
        entry = self._sessions.get(token)
        return entry.lifetime_ms if entry is not None else 0

    def known(self, token: str) -> bool:
        """Whether ``token`` names a session at all (from any host, expired or not): a cheap
        first look before a call's request is read; `session` decides."""
        return token in self._sessions

    def session(self, token: str, host: str) -> Session | None:
        """The session of ``token`` used from ``host`` (None: unknown, expired or elsewhere)."""
        entry = self._sessions.get(token)
        now = self._clock()
        if entry is None or entry.session.client_host != host:
            return None
        if now - entry.last_used_s > self.idle_s or now - entry.created_s > self._lifetime_s(entry):
            del self._sessions[token]
            return None
        if entry.credential is not None:
            mechanism = ScramMechanism.from_name(str(entry.session.sasl_mechanism))
            if self._lookup(mechanism, entry.session.principal.removeprefix("User:")) != entry.credential:
                del self._sessions[token]  # the credential was removed or replaced: log in again
                return None
        entry.last_used_s = now
        self._sessions.move_to_end(token)
        return entry.session

    def _lifetime_s(self, entry: _Session) -> float:
        if entry.lifetime_ms > 0:
            return min(self.max_lifetime_s, entry.lifetime_ms / 1000.0)
        return self.max_lifetime_s

    def _expire(self) -> None:
        now = self._clock()
        while self._exchanges:
            exchange_id, exchange = next(iter(self._exchanges.items()))
            if now - exchange.started_s <= self.exchange_timeout_s:
                break
            del self._exchanges[exchange_id]
        while self._sessions:
            token, entry = next(iter(self._sessions.items()))
            if now - entry.last_used_s <= self.idle_s:
                break
            del self._sessions[token]
