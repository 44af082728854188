"""``SaslService`` (proto/security.proto): SASL over gRPC on a node's SASL_PLAINTEXT / SASL_SSL
gRPC listeners, over the pure `common.security._sasl_sessions.SaslSessions`. On a listener without SASL both
calls answer ILLEGAL_SASL_STATE.

The exchange is taken from the call's metadata (``kraftlog-sasl-mechanism``,
``kraftlog-sasl-exchange``, ``kraftlog-sasl-auth-bin``), never from its message body: grpc python
has one receive limit per server (``grpc.max.message.bytes``, Produce-sized) and reads a message
whole once a handler asks for it, so a stranger's 64 MiB SaslAuthenticate would be held before
anything could refuse it (+210 MiB node RSS; three of 90 MiB at once: +812 MiB). The handlers are
registered request-streaming and never advance their request iterator, so no body is received
beyond HTTP/2's flow-control window; metadata is bounded by grpc's header limit, and the SASL
message by ``sasl.server.max.receive.size`` (Kafka's cap before authentication). A call without
the metadata (a body-carrying client) is refused, unread, with an error naming both."""

from __future__ import annotations

from typing import Any, Final, NoReturn

import grpc

from kraftlog.common import errors as kerr
from kraftlog.common.security import (
    SASL_AUTH_METADATA,
    SASL_EXCHANGE_METADATA,
    SASL_MECHANISM_METADATA,
    SaslSessions,
)
from kraftlog.node._grpc_security import peer_host
from kraftlog.proto import errors_pb2, security_pb2

__all__ = ["SASL_SERVICE", "SaslServicer", "add_sasl_service"]

SASL_SERVICE: Final = "kraftlog.v1.SaslService"
#: what a listener without SASL tells a caller of SaslService
_NO_SASL: Final = "this listener does not use SASL"


def _error(err: type[kerr.KafkaError] | None, message: str = "") -> errors_pb2.Error:
    if err is None:
        return errors_pb2.Error(code=0, name="NONE")
    return errors_pb2.Error(code=err.error_code, name=err.error_name, message=message)


def _metadata(context: Any) -> dict[str, Any]:
    return {k: v for k, v in context.invocation_metadata() or ()}


class SaslServicer:
    """Both methods take ``(request_iterator, context)``, never advance the iterator, and answer
    from the call metadata (see the module docstring); ``max_receive_bytes`` is the listener's
    ``sasl.server.max.receive.size``."""

    def __init__(self, sessions: SaslSessions | None) -> None:
        self.sessions = sessions
        self.max_receive_bytes = sessions.security.sasl_max_receive_bytes if sessions is not None else 0

    async def _refuse_without(self, context: Any, method: str, needed: tuple[str, ...]) -> NoReturn:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{kerr.IllegalSaslStateError.error_name}: {SASL_SERVICE}/{method} takes the SASL exchange from "
            f"call metadata ({', '.join(needed)}; a SASL message at most sasl.server.max.receive.size="
            f"{self.max_receive_bytes} bytes), never from a message body, which was not read",
        )
        raise AssertionError("context.abort raises")  # for type checkers

    async def SaslHandshake(self, request_iterator: Any, context: Any) -> Any:
        R = security_pb2.SaslHandshakeResponse
        if self.sessions is None:
            return R(error=_error(kerr.IllegalSaslStateError, _NO_SASL))
        mechanism = _metadata(context).get(SASL_MECHANISM_METADATA)
        if not isinstance(mechanism, str):
            await self._refuse_without(context, "SaslHandshake", (SASL_MECHANISM_METADATA,))
        offered = list(self.sessions.security.sasl_mechanisms)
        err, exchange_id = self.sessions.handshake(mechanism, peer_host(context.peer()))
        message = f"{mechanism} is not offered here (offered: {', '.join(offered)})" if err else ""
        return R(error=_error(err, message), mechanisms=offered, exchange_id=exchange_id)

    async def SaslAuthenticate(self, request_iterator: Any, context: Any) -> Any:
        R = security_pb2.SaslAuthenticateResponse
        if self.sessions is None:
            return R(error=_error(kerr.IllegalSaslStateError, _NO_SASL))
        metadata = _metadata(context)
        exchange_id, auth_bytes = metadata.get(SASL_EXCHANGE_METADATA), metadata.get(SASL_AUTH_METADATA)
        if not isinstance(exchange_id, str) or not isinstance(auth_bytes, bytes):
            await self._refuse_without(context, "SaslAuthenticate", (SASL_EXCHANGE_METADATA, SASL_AUTH_METADATA))
        if len(auth_bytes) > self.max_receive_bytes:
            # Kafka closes such a connection (InvalidReceiveException); a channel has no connection to close
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{kerr.SaslAuthenticationFailedError.error_name}: a SASL message of {len(auth_bytes)} bytes is "
                f"over sasl.server.max.receive.size={self.max_receive_bytes}",
            )
            raise AssertionError("context.abort raises")  # for type checkers
        try:
            challenge, session = self.sessions.authenticate(exchange_id, auth_bytes, peer_host(context.peer()))
        except (kerr.SaslAuthenticationFailedError, kerr.IllegalSaslStateError) as err:
            return R(error=_error(type(err), str(err)))
        lifetime_ms = self.sessions.lifetime_ms(session) if session else 0
        return R(error=_error(None), auth_bytes=challenge, session=session or "", session_lifetime_ms=lifetime_ms)


def add_sasl_service(server: Any, sessions: SaslSessions | None) -> None:
    """Serve ``SaslService`` on ``server``: its methods registered request-streaming (a unary
    caller cannot tell), so grpc hands them an iterator they never advance and reads no body."""
    servicer = SaslServicer(sessions)
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "SaslHandshake": grpc.stream_unary_rpc_method_handler(
            servicer.SaslHandshake,
            request_deserializer=security_pb2.SaslHandshakeRequest.FromString,
            response_serializer=security_pb2.SaslHandshakeResponse.SerializeToString,
        ),
        "SaslAuthenticate": grpc.stream_unary_rpc_method_handler(
            servicer.SaslAuthenticate,
            request_deserializer=security_pb2.SaslAuthenticateRequest.FromString,
            response_serializer=security_pb2.SaslAuthenticateResponse.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SASL_SERVICE, handlers),))
