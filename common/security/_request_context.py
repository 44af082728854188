"""Who is asking, and whether the request was authorized: the one request context both protocols set.

Both listeners (gRPC, through the node's server interceptor; Kafka's wire protocol, through the
broker's dispatcher) authenticate the caller into a `Session` and run the request's handler inside
`request_scope`, which sets a `RequestContext` in a context variable. The handler asks its
authorization questions through the context (`RequestContext.authorize` and friends); each answer is
recorded. After the handler, the listener checks `RequestContext.decided`: a handler that reached its
end without a single authorization decision is a bug (a request nobody checked), and the listener
fails the request closed instead of answering it.

The context knows nothing of ACLs: it asks an `AuthorizeFn` the listener gives it (the node's
authorizer over its latest metadata image, or "allow" when no authorizer is configured), so this
module stays in the ground floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from kraftlog.common import errors as kerr
from kraftlog.common.security._acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, supported_operations

T = TypeVar("T")

__all__ = [
    "ANONYMOUS",
    "spawn",
    "CLIENT_ID_METADATA",
    "FORWARDED_HOST",
    "FORWARDED_PERMISSIVE_QUOTA",
    "FORWARDED_PRINCIPAL",
    "metadata_value",
    "INTERNAL_SESSION",
    "denied_error",
    "forwarding_metadata",
    "AuthorizeFn",
    "RequestContext",
    "Session",
    "current_request",
    "request_scope",
]

#: the principal of a caller that did not authenticate (PLAINTEXT, TLS without a client certificate)
ANONYMOUS: Final = "User:ANONYMOUS"

#: (session, operation, resource type, resource name) -> allowed; a resource name of None asks
#: "on any resource of the type" (Kafka's authorizeByResourceType)
AuthorizeFn = Callable[["Session", AclOperation, ResourceType, "str | None"], bool]

_DENIED_ERRORS: Final[dict[ResourceType, type[kerr.KafkaError]]] = {
    ResourceType.TOPIC: kerr.TopicAuthorizationFailedError,
    ResourceType.GROUP: kerr.GroupAuthorizationFailedError,
    ResourceType.CLUSTER: kerr.ClusterAuthorizationFailedError,
    ResourceType.TRANSACTIONAL_ID: kerr.TransactionalIdAuthorizationFailedError,
}


@dataclass(frozen=True, slots=True)
class Session:
    """An authenticated connection: its principal (``User:alice``, ``User:CN=broker1,O=kraftlog``,
    `ANONYMOUS`), the client's address, and the listener and protocol it came in on."""

    principal: str
    client_host: str
    listener: str = ""
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None


def _allow_all(session: Session, operation: AclOperation, resource_type: ResourceType, name: str | None) -> bool:
    return True


@dataclass(slots=True)
class RequestContext:
    """One request being handled: its session, the authorizer to ask, and what was decided;
    ``client_id`` names the client for quotas, and ``strict_quota`` is False for the request
    versions KIP-599 throttles after the fact instead of refusing (CreateTopics before v6, ...)."""

    session: Session
    api: str
    authorize_fn: AuthorizeFn = _allow_all
    decisions: list[tuple[AclOperation, ResourceType, str | None, bool]] = field(default_factory=list)
    public_reason: str | None = None
    client_id: str = ""
    strict_quota: bool = True
    #: CPU time spent on this request by worker threads (produce validation), which the event loop
    #: thread's own clock does not see; counted into the request's time for request_percentage
    offloaded_cpu_ns: int = 0

    @property
    def principal(self) -> str:
        return self.session.principal

    @property
    def decided(self) -> bool:
        """Whether the handler made at least one authorization decision (or declared none needed)."""
        return bool(self.decisions) or self.public_reason is not None

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """May the caller do ``operation`` on the resource? Recorded."""
        allowed = self.authorize_fn(self.session, operation, resource_type, name)
        self.decisions.append((operation, resource_type, name, allowed))
        return allowed

    def authorize_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the caller do ``operation`` on some resource of the type (Kafka's
        authorizeByResourceType, e.g. an idempotent producer with Write on any topic)? Recorded."""
        allowed = self.authorize_fn(self.session, operation, resource_type, None)
        self.decisions.append((operation, resource_type, None, allowed))
        return allowed

    def authorized(self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]) -> set[str]:
        """The names among ``names`` the caller may do ``operation`` on (each decision recorded;
        an empty ``names`` still counts as a decision, so an empty request is not flagged)."""
        allowed = {name for name in dict.fromkeys(names) if self.authorize(operation, resource_type, name)}
        if not self.decisions:
            self.decisions.append((operation, resource_type, None, True))
        return allowed

    def authorized_operations(self, resource_type: ResourceType, name: str, *, needs_describe: bool = False) -> int:
        """KIP-430's bit field (bit ``1 << code``) of the operations Kafka lists for the resource
        type that the caller may do on the resource: from the ACLs with an authorizer, every one
        without (``authorize_fn`` then allows all). Asked, not recorded: these are no request's
        decisions and a denial here refuses nothing (Kafka does not log them either).
        ``needs_describe``: 0 unless the caller may describe it (the cluster's, as Kafka answers)."""
        if needs_describe and not self.authorize_fn(self.session, AclOperation.DESCRIBE, resource_type, name):
            return 0
        bits = 0
        for operation in supported_operations(resource_type):
            if self.authorize_fn(self.session, operation, resource_type, name):
                bits |= 1 << int(operation)
        return bits

    def require(self, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
        """Raise the resource type's *_AUTHORIZATION_FAILED error unless the caller may do it."""
        if not self.authorize(operation, resource_type, name):
            raise denied_error(
                resource_type, f"{self.principal} may not {operation.name} {resource_type.name} {name!r}"
            )

    def require_cluster(self, operation: AclOperation) -> None:
        """`require` on the cluster resource (``kafka-cluster``)."""
        self.require(operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)

    def delegate(self, to: str) -> None:
        """Declare that ``to`` authorizes this request (a broker forwarding an admin request to
        the controller, which authorizes the forwarded principal); counts as the decision."""
        self.public_reason = f"authorized by {to}"

    def refused_early(self, reason: str) -> None:
        """Declare that the request is refused before it touches any resource (a malformed or
        unsupported request, an expired fetch session); counts as the decision."""
        self.public_reason = f"refused before any resource was touched: {reason}"

    def public(self, reason: str) -> None:
        """Declare that this request needs no authorization (ApiVersions, a SASL exchange, health),
        saying why; counts as the decision."""
        self.public_reason = reason


def denied_error(resource_type: ResourceType, message: str) -> kerr.KafkaError:
    """The Kafka error of a refusal on a resource of ``resource_type``."""
    return _DENIED_ERRORS.get(resource_type, kerr.ClusterAuthorizationFailedError)(message)


_CURRENT: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar("kraftlog_request", default=None)

#: the session of code that runs outside any request (a node's own background work, unit tests of
#: handlers): it allows everything and is not checked for decisions
INTERNAL_SESSION: Final = Session(principal="User:kraftlog-internal", client_host="", listener="")
_INTERNAL = INTERNAL_SESSION

#: gRPC metadata keys a broker forwarding a client's admin request names the client with (KIP-590's
#: envelope, as call metadata)
FORWARDED_PRINCIPAL: Final = "kraftlog-forwarded-principal"
FORWARDED_HOST: Final = "kraftlog-forwarded-host"
#: set on a forwarded request of a version KIP-599 does not refuse (its quota throttles afterwards)
FORWARDED_PERMISSIVE_QUOTA: Final = "kraftlog-forwarded-permissive-quota"
#: the gRPC call metadata key naming the client (Kafka's client.id), for quotas; a forwarding broker
#: sets it to its client's
CLIENT_ID_METADATA: Final = "kraftlog-client-id"


def forwarding_metadata(ctx: RequestContext) -> tuple[tuple[str, str], ...] | None:
    """The call metadata naming ``ctx``'s client to the controller; None for the node's own work."""
    session = ctx.session
    if session is INTERNAL_SESSION:
        return None
    metadata = [(FORWARDED_PRINCIPAL, session.principal), (FORWARDED_HOST, session.client_host)]
    if ctx.client_id:
        metadata.append((CLIENT_ID_METADATA, ctx.client_id))
    if not ctx.strict_quota:
        metadata.append((FORWARDED_PERMISSIVE_QUOTA, "1"))
    return tuple(metadata)


def metadata_value(context: Any, key: str) -> str | None:
    """The value of ``key`` in a gRPC call's metadata, None when absent (or the context has none:
    in-process calls)."""
    try:
        metadata = context.invocation_metadata() or ()
    except Exception:
        return None
    for k, value in metadata:
        if k == key:
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return None


def current_request() -> RequestContext:
    """The request being handled by this task; outside a request, a fresh context that allows
    everything (the node's own work: coordinators loading, the controller's own decisions)."""
    ctx = _CURRENT.get()
    if ctx is None:
        return RequestContext(_INTERNAL, api="internal")
    return ctx


def spawn(coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """Start ``coro`` as a task of the node itself, not of the request being handled.

    asyncio copies the current context into a new task, so a coordinator's appender or marker
    writer started while a client's request runs would otherwise act with that client's rights
    (and its decisions would land on that request). Work that outlives its request starts here,
    in an empty context (`current_request` is then the node's own)."""
    return asyncio.get_running_loop().create_task(coro, name=name, context=contextvars.Context())


@contextlib.contextmanager
def request_scope(ctx: RequestContext) -> Iterator[RequestContext]:
    """Run a request's handler with ``ctx`` as the current request (this task and its children)."""
    token = _CURRENT.set(ctx)
    try:
        yield ctx
    finally:
        _CURRENT.reset(token)
