"""SASL on the Kafka listener: SaslHandshake (v0-1) and SaslAuthenticate (v0-2), Kafka's sequence.

On a SASL_PLAINTEXT or SASL_SSL listener a connection is unauthenticated until it completes a SASL
exchange: before that only ApiVersions, SaslHandshake and SaslAuthenticate are served and any other
request closes the connection (Kafka's ILLEGAL_SASL_STATE). SaslHandshake names one of the
listener's ``sasl.enabled.mechanisms``; SaslAuthenticate carries the mechanism's messages (after
a v0 handshake, size-prefixed raw tokens do, without a request header):
SCRAM-SHA-256/512 checked against the ``UserScramCredentialRecord``s of the broker's metadata image
(`common.security._scram.ScramServer`), PLAIN against the listener's JAAS ``user_<name>`` entries (only over
TLS). A completed exchange makes the session ``User:<name>``; a failed one is answered
SASL_AUTHENTICATION_FAILED and the connection is closed after the answer, as Kafka does.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` (per listener and mechanism) the
session gets a lifetime, answered as SaslAuthenticate's ``session_lifetime`` (v1+); the listener
closes a connection whose session expired at its next request other than SaslHandshake; a
SaslHandshake on the authenticated connection begins a re-authentication (same mechanism, same
principal, else it fails and the connection is closed after the answer), during which only the
exchange is served. The rules live in `common.security.SessionExpiry` (the one clock injected).
"""

from __future__ import annotations

from typing import Any, Final

import structlog

from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest
from kraftlog.common import SYSTEM_CLOCK, Clock
from kraftlog.common import errors as kerr
from kraftlog.common.security import (
    ScramLookup,
    SessionExpiry,
    current_request,
    sasl_server,
    sasl_session,
    sasl_step,
)

__all__ = ["SASL_APIS", "SaslApis"]

#: what an unauthenticated connection on a SASL listener may send: ApiVersions and the exchange
SASL_APIS: Final = frozenset({17, 18, 36})
_log = structlog.get_logger(__name__)


class SaslApis:
    """SaslHandshake and SaslAuthenticate for `KafkaApis`. ``scram_credential(mechanism, user)``
    looks a SCRAM credential up in the broker's current metadata image; ``clock`` times the
    sessions' lifetimes."""

    def __init__(self, node_id: int, scram_credential: ScramLookup, clock: Clock = SYSTEM_CLOCK) -> None:
        self._node_id = node_id
        self._scram_credential = scram_credential
        self._clock = clock

    async def sasl_handshake(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        current_request().public("the SASL handshake is how a client authenticates")
        mechanism = request.body.mechanism
        security = conn.security
        offered = list(security.sasl_mechanisms) if security is not None else []
        reauth = conn.reauth
        if conn.authenticated and conn.sasl is None and reauth is not None and reauth.begin():
            conn.authenticated = False  # re-authenticating: nothing but the exchange until it completes
            reauth.check_mechanism(mechanism)
        if security is None or not security.uses_sasl or conn.authenticated or conn.sasl is not None:
            conn.close_after_answer = True
            return {"error_code": kerr.IllegalSaslStateError.error_code, "mechanisms": offered}
        if mechanism not in offered:
            conn.close_after_answer = True
            if reauth is not None:
                reauth.failed()
            return {"error_code": kerr.UnsupportedSaslMechanismError.error_code, "mechanisms": offered}
        conn.sasl = sasl_server(security, mechanism, self._scram_credential)
        # v0 (librdkafka checks that it is served): the exchange follows as raw size-prefixed tokens
        conn.sasl_raw_tokens = request.api_version == 0
        return {"error_code": 0, "mechanisms": offered}

    async def sasl_authenticate(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        current_request().public("SaslAuthenticate carries the SASL exchange itself")
        if conn.sasl is None or conn.authenticated or conn.sasl_raw_tokens:
            conn.close_after_answer = True
            return _answer(kerr.IllegalSaslStateError, "SaslAuthenticate before a SaslHandshake v1")
        try:
            challenge = self.sasl_token(conn, bytes(request.body.auth_bytes))
        except (kerr.SaslAuthenticationFailedError, kerr.IllegalSaslStateError) as err:
            conn.close_after_answer = True
            return _answer(type(err), str(err))
        lifetime_ms = conn.reauth.lifetime_ms if conn.authenticated and conn.reauth is not None else 0
        return {"error_code": 0, "error_message": None, "auth_bytes": challenge, "session_lifetime": lifetime_ms}

    def sasl_token(self, conn: ConnectionInfo, token: bytes) -> bytes:
        """One step of the connection's SASL exchange (a SaslAuthenticate's bytes, or a raw token
        after SaslHandshake v0): the server's answer; the session becomes ``User:<name>`` when
        the exchange completes. A failure raises with Kafka's message (the reason is logged)."""
        server = conn.sasl
        assert server is not None
        reauth = conn.reauth
        reauthenticating = reauth is not None and reauth.reauthenticating
        try:
            if reauth is not None and reauth.bad_mechanism is not None:
                raise kerr.SaslAuthenticationFailedError(reauth.bad_mechanism)
            challenge = sasl_step(server, token)
            if server.complete:
                old = conn.session
                session = sasl_session(server, old.client_host, old.listener, old.security_protocol)
                if reauth is None:
                    security = conn.security
                    max_reauth_ms = security.reauth_ms(server.mechanism_name) if security is not None else 0
                    reauth = conn.reauth = SessionExpiry(max_reauth_ms, self._clock)
                latency_ms = reauth.latency_ms()
                reauth.authenticated(session.principal, server.mechanism_name)  # raises on a new principal
        except (kerr.SaslAuthenticationFailedError, kerr.IllegalSaslStateError) as err:
            conn.sasl = None
            if reauth is not None:
                reauth.failed()
            _log.info(
                "sasl_authentication_failed",
                node_id=self._node_id,
                listener=conn.listener_name,
                peer=conn.peer,
                mechanism=server.mechanism_name,
                reauthentication=reauth is not None,
                reason=str(err.__cause__ or err),
            )
            if reauthenticating and str(err).startswith("Authentication failed during authentication"):
                # Kafka's message names the re-authentication (authenticationOrReauthenticationText)
                message = str(err).replace("during authentication", "during re-authentication", 1)
                raise type(err)(message) from err.__cause__
            raise
        if server.complete:
            conn.session = session
            conn.authenticated = True
            conn.sasl = None
            conn.sasl_raw_tokens = False
            if latency_ms is not None:
                _log.info(
                    "sasl_reauthenticated",
                    node_id=self._node_id,
                    listener=conn.listener_name,
                    peer=conn.peer,
                    principal=session.principal,
                    latency_ms=latency_ms,
                    session_lifetime_ms=reauth.lifetime_ms,
                )
        return challenge


def _answer(error: type[kerr.KafkaError], message: str) -> dict[str, Any]:
    return {"error_code": error.error_code, "error_message": message, "auth_bytes": b"", "session_lifetime": 0}
