"""SASL on the Kafka listener: SaslHandshake (v0-1) and SaslAuthenticate (v0-2), Kafka's sequence.

On a SASL_PLAINTEXT or SASL_SSL listener a connection is unauthenticated until it completes a SASL
exchange: before that only ApiVersions, SaslHandshake and SaslAuthenticate are served and any other
request closes the connection (Kafka's ILLEGAL_SASL_STATE). SaslHandshake names one of the
listener's ``sasl.enabled.mechanisms``; SaslAuthenticate carries the mechanism's messages (after
a v0 handshake, size-prefixed raw tokens do, without a request header):
SCRAM-SHA-256/512 checked against the ``UserScramCredentialRecord``s of the broker's metadata image
(`common.security._scram.ScramServer`), PLAIN against the listener's JAAS ``user_<name>`` entries (only over
TLS). A completed exchange makes the session ``User:<name>``; a failed one is answered
SASL_AUTHENTICATION_FAILED and the connection is closed after the answer, as Kafka does. Sessions
are not re-authenticated (``connections.max.reauth.ms`` 0, session lifetime 0).
"""

from __future__ import annotations

from typing import Any, Final

import structlog

from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_wire import ParsedRequest
from kraftlog.common import errors as kerr
from kraftlog.common.security import ScramLookup, current_request, sasl_server, sasl_session, sasl_step

__all__ = ["SASL_APIS", "SaslApis"]

#: what an unauthenticated connection on a SASL listener may send: ApiVersions and the exchange
SASL_APIS: Final = frozenset({17, 18, 36})
_log = structlog.get_logger(__name__)


class SaslApis:
    """SaslHandshake and SaslAuthenticate for `KafkaApis`. ``scram_credential(mechanism, user)``
    looks a SCRAM credential up in the broker's current metadata image."""

    def __init__(self, node_id: int, scram_credential: ScramLookup) -> None:
        self._node_id = node_id
        self._scram_credential = scram_credential

    async def sasl_handshake(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        current_request().public("the SASL handshake is how a client authenticates")
        mechanism = request.body.mechanism
        security = conn.security
        offered = list(security.sasl_mechanisms) if security is not None else []
        if security is None or not security.uses_sasl or conn.authenticated or conn.sasl is not None:
            conn.close_after_answer = True
            return {"error_code": kerr.IllegalSaslStateError.error_code, "mechanisms": offered}
        if mechanism not in offered:
            conn.close_after_answer = True
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
        return {"error_code": 0, "error_message": None, "auth_bytes": challenge, "session_lifetime": 0}

    def sasl_token(self, conn: ConnectionInfo, token: bytes) -> bytes:
        """One step of the connection's SASL exchange (a SaslAuthenticate's bytes, or a raw token
        after SaslHandshake v0): the server's answer; the session becomes ``User:<name>`` when
        the exchange completes. A failure raises with Kafka's message (the reason is logged)."""
        server = conn.sasl
        assert server is not None
        try:
            challenge = sasl_step(server, token)
        except (kerr.SaslAuthenticationFailedError, kerr.IllegalSaslStateError) as err:
            conn.sasl = None
            _log.info(
                "sasl_authentication_failed",
                node_id=self._node_id,
                listener=conn.listener_name,
                peer=conn.peer,
                mechanism=server.mechanism_name,
                reason=str(err.__cause__),
            )
            raise
        if server.complete:
            old = conn.session
            conn.session = sasl_session(server, old.client_host, old.listener, old.security_protocol)
            conn.authenticated = True
            conn.sasl = None
            conn.sasl_raw_tokens = False
        return challenge


def _answer(error: type[kerr.KafkaError], message: str) -> dict[str, Any]:
    return {"error_code": error.error_code, "error_message": message, "auth_bytes": b"", "session_lifetime": 0}
