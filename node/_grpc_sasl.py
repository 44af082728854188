"""``SaslService`` (proto/security.proto): SASL over gRPC on a node's SASL_PLAINTEXT / SASL_SSL
gRPC listeners, over the pure `common.security._sasl_sessions.SaslSessions`. On a listener without SASL both
calls answer ILLEGAL_SASL_STATE."""

from __future__ import annotations

from typing import Any

from kraftlog.common import errors as kerr
from kraftlog.common.security import SaslSessions
from kraftlog.node._grpc_security import peer_host
from kraftlog.proto import errors_pb2, security_pb2, security_pb2_grpc

__all__ = ["SaslServicer"]


def _error(err: type[kerr.KafkaError] | None, message: str = "") -> errors_pb2.Error:
    if err is None:
        return errors_pb2.Error(code=0, name="NONE")
    return errors_pb2.Error(code=err.error_code, name=err.error_name, message=message)


class SaslServicer(security_pb2_grpc.SaslServiceServicer):
    def __init__(self, sessions: SaslSessions | None) -> None:
        self.sessions = sessions

    async def SaslHandshake(self, request: Any, context: Any) -> Any:
        R = security_pb2.SaslHandshakeResponse
        if self.sessions is None:
            return R(error=_error(kerr.IllegalSaslStateError, "this listener does not use SASL"))
        offered = list(self.sessions.security.sasl_mechanisms)
        err, exchange_id = self.sessions.handshake(request.mechanism, peer_host(context.peer()))
        message = f"{request.mechanism} is not offered here (offered: {', '.join(offered)})" if err else ""
        return R(error=_error(err, message), mechanisms=offered, exchange_id=exchange_id)

    async def SaslAuthenticate(self, request: Any, context: Any) -> Any:
        R = security_pb2.SaslAuthenticateResponse
        if self.sessions is None:
            return R(error=_error(kerr.IllegalSaslStateError, "this listener does not use SASL"))
        try:
            challenge, session = self.sessions.authenticate(
                request.exchange_id, bytes(request.auth_bytes), peer_host(context.peer())
            )
        except (kerr.SaslAuthenticationFailedError, kerr.IllegalSaslStateError) as err:
            return R(error=_error(type(err), str(err)))
        lifetime_ms = self.sessions.lifetime_ms(session) if session else 0
        return R(error=_error(None), auth_bytes=challenge, session=session or "", session_lifetime_ms=lifetime_ms)
