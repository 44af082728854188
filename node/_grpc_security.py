"""Authentication and the authorization check of every gRPC call a node serves.

`SecurityInterceptor` wraps every method of a node's gRPC server (kraftlog's services, health,
reflection). For each call it:

1. authenticates the caller into a `Session`: the principal of its client certificate on a TLS
   listener with mutual TLS (``User:<subject>`` after ``ssl.principal.mapping.rules``), else
   ``User:ANONYMOUS``; a broker forwarding a client's admin request (KIP-590) names that client
   in the call metadata, which is believed only when the broker itself may ClusterAction;
   On a SASL listener a call that cannot have a session (no session token, or one no session
   has, and no client certificate possible) is refused before its request message is read:
   grpc reads a message whole before the handler runs, so a stranger's 90 MiB Produce would
   otherwise be held (three at once: +500 MiB) only to be refused. The refusal is a
   request-streaming handler that never asks for the message. The SASL exchange itself
   (``SaslService``, node/_grpc_sasl.py) never reads a message body either: it travels in the
   call metadata;
2. runs the handler inside a `RequestContext` (`kraftlog.common.security._request_context`), through which
   the handler asks its authorization questions;
3. fails the call closed (INTERNAL, logged as ``rpc_without_authorization_decision``) when the
   handler reached its end without a single decision: a method nobody authorized is a bug, never
   an open door. Authorization errors a handler raises become PERMISSION_DENIED with the Kafka
   error's name in the details.

Health checks and reflection need no authorization (systemd, load balancers and grpcurl ask them
before any credentials exist), and say so. On a SASL listener a caller without a session gets the
node's overall health without its request being read, and no reflection (`_unread_overall_health`).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import grpc
import structlog

from kraftlog.common import errors as kerr
from kraftlog.common.security import (
    ANONYMOUS,
    CLIENT_ID_METADATA,
    CLUSTER_RESOURCE_NAME,
    FORWARDED_HOST,
    FORWARDED_PERMISSIVE_QUOTA,
    FORWARDED_PRINCIPAL,
    SESSION_METADATA,
    AclOperation,
    AuthorizeFn,
    ListenerSecurity,
    RequestContext,
    ResourceType,
    SaslSessions,
    Session,
    metadata_value,
    principal_from_certificate,
    request_scope,
)

__all__ = ["PUBLIC_SERVICES", "SecurityInterceptor", "interceptor", "peer_host"]

_log = structlog.get_logger(__name__)

#: services whose calls need no authorization, and why
PUBLIC_SERVICES: Final[dict[str, str]] = {
    "grpc.health.v1.Health": "health checks are asked by supervisors before any credentials exist",
    "grpc.reflection.v1alpha.ServerReflection": "reflection describes the services, not the data",
    "grpc.reflection.v1.ServerReflection": "reflection describes the services, not the data",
    "kraftlog.v1.SaslService": "the SASL exchange is how a caller authenticates",
}

_AUTHORIZATION_ERRORS = (
    kerr.TopicAuthorizationFailedError,
    kerr.GroupAuthorizationFailedError,
    kerr.ClusterAuthorizationFailedError,
    kerr.TransactionalIdAuthorizationFailedError,
)

PrincipalOf = Callable[[bytes], str]


def peer_host(peer: str) -> str:
    """The client's address of a gRPC peer string (``ipv4:10.0.0.5:51234``, ``ipv6:[::1]:5``)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    return rest or peer


def interceptor(
    security: ListenerSecurity, authorize_fn: AuthorizeFn, sasl: SaslSessions | None = None
) -> SecurityInterceptor:
    """The interceptor of a gRPC listener secured as ``security`` (``sasl``: its SASL sessions)."""
    principal_of = None
    if security.tls is not None:
        mapper = security.tls.principal_mapper

        def principal_of(certificate: bytes) -> str:
            return principal_from_certificate(certificate, mapper)

    return SecurityInterceptor(
        listener=security.name,
        security_protocol=security.protocol,
        authorize_fn=authorize_fn,
        principal_of=principal_of,
        sasl=sasl,
        client_certificates=security.tls is not None and security.tls.client_auth != "none",
    )


class SecurityInterceptor(grpc.aio.ServerInterceptor):
    """Authenticates and checks the authorization of every call of one gRPC listener.

    ``principal_of`` maps a client certificate (PEM) to its principal on a TLS listener (None on
    a PLAINTEXT one); ``authorize_fn`` answers the handlers' questions (the node's authorizer over
    its latest metadata image, which allows everything when no authorizer is configured).
    """

    def __init__(
        self,
        *,
        listener: str,
        security_protocol: str,
        authorize_fn: AuthorizeFn,
        principal_of: PrincipalOf | None = None,
        sasl: SaslSessions | None = None,
        client_certificates: bool = False,
    ) -> None:
        self.listener = listener
        self.client_certificates = client_certificates  # a caller may be known by its certificate
        self.sasl = sasl  # on SASL listeners: every call but the exchange needs a session
        self.security_protocol = security_protocol
        self.authorize_fn = authorize_fn
        self.principal_of = principal_of
        self._wrapped: dict[str, tuple[Any, Any]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        path = handler_call_details.method
        refusal = self._refusal_before_reading(path, handler_call_details.invocation_metadata)
        if refusal is not None:
            if path.startswith(_HEALTH_PATH_PREFIX):
                return _unread_overall_health(handler)
            return _unread_refusal(refusal)
        cached = self._wrapped.get(path)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(path, handler)
        self._wrapped[path] = (handler, wrapped)
        return wrapped

    # ------------------------------------------------------------------ sessions

    def _refusal_before_reading(self, path: str, metadata: Any) -> str | None:
        """Why a call on a SASL listener is refused before its message is read (None: read it,
        `session` decides). Only what the metadata alone proves: no session token and no client
        certificate possible, or a token no session has."""
        if self.sasl is None:
            return None
        service = path.lstrip("/").partition("/")[0]
        if service == "kraftlog.v1.SaslService":
            return None
        token = next((str(v) for k, v in metadata or () if k == SESSION_METADATA), None)
        if token is None and self.client_certificates:
            return None  # perhaps a node with its certificate: `session` looks
        if token is not None and self.sasl.known(token):
            return None
        return (
            f"{kerr.SaslAuthenticationFailedError.error_name}: listener {self.listener} needs a SASL session: "
            "authenticate with SaslService first"
        )

    def session(self, context: Any, *, exchange: bool = False, forwardable: bool = False) -> Session:
        """The caller of this call; raises `SaslAuthenticationFailedError` when it did not
        authenticate on a SASL listener (``exchange``: the call is part of the SASL exchange),
        `ClusterAuthorizationFailedError` for a forwarded principal from a caller that may not
        forward."""
        host = peer_host(context.peer())
        principal = ANONYMOUS
        metadata = dict(context.invocation_metadata() or ())
        if self.principal_of is not None:
            auth = context.auth_context() or {}
            certs = auth.get("x509_pem_cert")
            if certs:
                principal = self.principal_of(certs[0])
        session = Session(principal, host, self.listener, self.security_protocol)
        if self.sasl is not None and not exchange:
            # a SASL session, or (kraftlog: SASL_SSL gRPC listeners require client certificates)
            # the verified certificate the nodes themselves authenticate with
            token = metadata.get(SESSION_METADATA)
            found = self.sasl.session(str(token), host) if token else None
            if found is None and (token or principal == ANONYMOUS):
                raise kerr.SaslAuthenticationFailedError(
                    f"listener {self.listener} needs a SASL session: authenticate with SaslService first"
                )
            session = found or session
        forwarded = metadata.get(FORWARDED_PRINCIPAL)
        if forwarded is None:
            return session
        if not forwardable:  # Kafka takes envelopes on the controllers' listener, for admin APIs only
            raise kerr.ClusterAuthorizationFailedError(
                "forwarded requests are taken by the controllers' AdminService only"
            )
        # a broker forwarding its client's request (KIP-590): only a principal with ClusterAction
        # (the brokers) may speak for another one
        if not self.authorize_fn(session, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            raise kerr.ClusterAuthorizationFailedError(f"{principal} may not forward requests for other principals")
        return Session(str(forwarded), str(metadata.get(FORWARDED_HOST, host)), self.listener, self.security_protocol)

    def _context(self, path: str, context: Any) -> RequestContext:
        service, _, method = path.lstrip("/").partition("/")
        public = PUBLIC_SERVICES.get(service)
        session = self.session(
            context,
            exchange=service == "kraftlog.v1.SaslService" or service.startswith("grpc."),
            forwardable=self.listener == "CONTROLLER" and service == "kraftlog.v1.AdminService",
        )
        # a forward's client id is its client's; a forwarding broker (session() let only one
        # forward) says when the client's request version is one KIP-599 does not refuse
        forwarded = metadata_value(context, FORWARDED_PRINCIPAL) is not None
        ctx = RequestContext(
            session,
            api=method or path,
            authorize_fn=self.authorize_fn,
            client_id=metadata_value(context, CLIENT_ID_METADATA) or "",
            strict_quota=not (forwarded and metadata_value(context, FORWARDED_PERMISSIVE_QUOTA) == "1"),
        )
        if public is not None:
            ctx.public(public)
        return ctx

    # ------------------------------------------------------------------ wrapping

    def _wrap(self, path: str, handler: Any) -> Any:
        kw = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(self._unary(path, handler.unary_unary), **kw)
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(self._unary(path, handler.stream_unary), **kw)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(self._streaming(path, handler.unary_stream), **kw)
        return grpc.stream_stream_rpc_method_handler(self._streaming(path, handler.stream_stream), **kw)

    def _unary(self, path: str, behavior: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        async def checked(request: Any, context: Any) -> Any:
            ctx = await self._enter(path, context)
            with request_scope(ctx):
                try:
                    response = behavior(request, context)
                    if inspect.isawaitable(response):
                        response = await response
                except _AUTHORIZATION_ERRORS as err:
                    await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{err.error_name}: {err}")
            await self._check_decided(path, ctx, context)
            return response

        return checked

    def _streaming(self, path: str, behavior: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
        """The request context is current only while the handler's stream computes an item, never
        across a ``yield``: a stream the client dropped (a broker that stops, a controller change)
        is closed by the event loop's async-generator finalizer, in a task and context of its own,
        where resetting a token set in the RPC's task would fail ("created in a different
        Context") and log "Task exception was never retrieved" (issue 25)."""

        async def checked(request: Any, context: Any) -> AsyncIterator[Any]:
            ctx = await self._enter(path, context)
            try:
                with request_scope(ctx):
                    stream = behavior(request, context)
                    if inspect.isawaitable(stream):  # a handler that answers once (returns, not yields)
                        stream = await stream
                if hasattr(stream, "__aiter__"):
                    items = stream.__aiter__()
                    first = True
                    try:
                        while True:
                            with request_scope(ctx):
                                try:
                                    item = await items.__anext__()
                                except StopAsyncIteration:
                                    break
                            if first:
                                await self._check_decided(path, ctx, context)
                                first = False
                            yield item
                    finally:
                        aclose = getattr(items, "aclose", None)
                        if aclose is not None:
                            with request_scope(ctx):  # set and reset in the task that closes it
                                await aclose()
                else:
                    plain = iter(stream or ())
                    while True:
                        with request_scope(ctx):
                            try:
                                item = next(plain)
                            except StopIteration:
                                break
                        await self._check_decided(path, ctx, context)
                        yield item
            except _AUTHORIZATION_ERRORS as err:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{err.error_name}: {err}")
            await self._check_decided(path, ctx, context)

        return checked

    async def _enter(self, path: str, context: Any) -> RequestContext:
        try:
            return self._context(path, context)
        except kerr.KafkaError as err:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"{err.error_name}: {err}")
            raise  # abort raises; this line is for type checkers

    async def _check_decided(self, path: str, ctx: RequestContext, context: Any) -> None:
        if ctx.decided:
            return
        _log.error("rpc_without_authorization_decision", method=path, principal=ctx.principal)
        await context.abort(grpc.StatusCode.INTERNAL, f"{path} reached no authorization decision")


#: the health service's methods: on a SASL listener a caller without a session is answered the
#: node's overall health without its request being read (see `_unread_overall_health`)
_HEALTH_PATH_PREFIX: Final = "/grpc.health.v1.Health/"


def _unread_overall_health(handler: Any) -> Any:
    """Health for a caller without a session on a SASL listener, its request never read.

    Supervisors and load balancers ask ``Check``/``Watch`` before any credentials exist, so they
    cannot be refused; but their request is a message like any other, which grpc would read whole
    (a stranger's 64 MiB service name: +230 MiB). So the request-streaming handler never advances
    its iterator and answers for the empty service name, the node's overall status, whatever
    service was named: a check of one named service needs a session on a SASL listener.
    Reflection, the other public service, is refused there without a session (a tool that has
    authenticated sends its session token)."""
    from grpc_health.v1 import health_pb2

    overall = health_pb2.HealthCheckRequest(service="")
    if handler.unary_unary is not None:  # Check

        async def check(request_iterator: Any, context: Any) -> Any:
            return await handler.unary_unary(overall, context)

        return grpc.stream_unary_rpc_method_handler(check, response_serializer=handler.response_serializer)

    async def watch(request_iterator: Any, context: Any) -> None:
        answers = handler.unary_stream(overall, context)
        if inspect.isasyncgen(answers):
            async for status in answers:
                await context.write(status)
        else:  # grpc's aio servicer writes through the context itself
            await answers

    return grpc.stream_stream_rpc_method_handler(watch, response_serializer=handler.response_serializer)


def _unread_refusal(message: str) -> Any:
    """A handler that answers UNAUTHENTICATED without reading the request: as request-streaming,
    grpc hands it an iterator it never advances, so the message is not received (HTTP/2 flow
    control holds the sender to its window)."""

    async def refuse(request_iterator: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    return grpc.stream_unary_rpc_method_handler(refuse)
