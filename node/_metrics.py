"""The node's Prometheus endpoint (``metrics.port``) and the per-RPC request metrics of its gRPC servers.

These are node-level pieces, like the health and reflection services `node._runtime` adds to every
server: one HTTP endpoint per process serves one `CollectorRegistry` that every role of the node
registers into (a combined node shows broker and controller metrics together), and one interceptor
per gRPC server times each RPC and counts the Kafka errors in its answers.

- A registry per node, never prometheus_client's global one: tests run several nodes in one process.
- The endpoint (`node._metrics_endpoint`: TLS, authentication, topic labels) is a threaded HTTP
  server. A scrape therefore runs on its own thread, which is why the role collectors only read
  immutable or copied state.
- Request metrics cover the unary methods of kraftlog's services (``kraftlog.v1.*``); streams
  (FetchMetadata) have no meaningful latency, and health/reflection are not kraftlog's.
- Errors are counted as kraftlog answers carry them: each ``kraftlog.v1.Error`` with a non-zero code
  anywhere in a response (top-level, per topic, per partition) adds one under its Kafka error name;
  an exception out of a handler adds one under its Kafka name or UNKNOWN_SERVER_ERROR. Which fields
  hold errors is worked out once per response type from the descriptors, so a response costs a walk
  over its error fields only.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import structlog
from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

from kraftlog.proto import errors_pb2

__all__ = ["RpcMetricsInterceptor", "new_node_registry", "response_errors"]

_log = structlog.get_logger(__name__)

_ERROR_TYPE = errors_pb2.Error.DESCRIPTOR.full_name
_SERVICE_PREFIX = "/kraftlog.v1."
# Kafka's request latencies span sub-millisecond metadata calls to long-polled fetches (max.wait.ms)
# and acks=all produces waiting for followers, up to request timeouts of 30 s.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# (field name, repeated, sub-plan; None when the field itself is an Error)
_Plan = tuple[tuple[str, bool, "_Plan | None"], ...]
_plans: dict[Any, _Plan] = {}


def new_node_registry() -> CollectorRegistry:
    """A node's registry, with the process, Python platform and GC collectors a Python service
    exposes (CPU, memory, open fds, GC pauses: what the JVM collectors are to Kafka)."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


def _error_plan(descriptor: Any, depth: int = 0) -> _Plan:
    """The paths from a message type to every Error inside it (descriptors only, no instances)."""
    if depth > 8:
        return ()
    plan: list[tuple[str, bool, _Plan | None]] = []
    for field in descriptor.fields:
        sub_type = field.message_type
        if sub_type is None or sub_type.GetOptions().map_entry:
            continue
        if sub_type.full_name == _ERROR_TYPE:
            plan.append((field.name, field.is_repeated, None))
            continue
        sub = _error_plan(sub_type, depth + 1)
        if sub:
            plan.append((field.name, field.is_repeated, sub))
    return tuple(plan)


def _collect(message: Any, plan: _Plan, out: list[str]) -> None:
    for name, repeated, sub in plan:
        value = getattr(message, name)
        if sub is None:
            for err in value if repeated else (value,):
                if err.code:
                    out.append(err.name or f"ERROR_{err.code}")
        else:
            for item in value if repeated else (value,):
                _collect(item, sub, out)


def response_errors(response: Any) -> list[str]:
    """Kafka error names of every non-NONE ``kraftlog.v1.Error`` in ``response``."""
    descriptor = getattr(response, "DESCRIPTOR", None)
    if descriptor is None:
        return []
    plan = _plans.get(descriptor)
    if plan is None:
        plan = _plans[descriptor] = _error_plan(descriptor)
    out: list[str] = []
    if plan:
        _collect(response, plan, out)
    return out


class RpcMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Latency histogram and error counter per unary kraftlog RPC of one gRPC server.

    ``role`` names the metrics (``kraftlog_broker_request_*``, ``kraftlog_controller_request_*``),
    so a combined node keeps its two servers apart, as Kafka keeps broker and controller request
    metrics apart. Wrapped handlers are cached per method, so an RPC pays one dict lookup here
    besides the measurement itself.
    """

    def __init__(self, registry: CollectorRegistry, role: str) -> None:
        self.latency = Histogram(
            f"kraftlog_{role}_request_duration_seconds",
            f"Time the {role} spent answering a request, by RPC method (Kafka's RequestMetrics TotalTimeMs; "
            "long polls include their wait).",
            ["method"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.errors = Counter(
            f"kraftlog_{role}_request_errors",
            f"Errors in the {role}'s answers, by RPC method and Kafka error name (Kafka's RequestMetrics "
            "ErrorsPerSec, without NONE).",
            ["method", "error"],
            registry=registry,
        )
        self._wrapped: dict[str, tuple[Any, Any]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        path = handler_call_details.method
        cached = self._wrapped.get(path)
        if cached is not None and cached[0] is handler:
            return cached[1]
        if not path.startswith(_SERVICE_PREFIX):
            return handler
        wrapped = grpc.unary_unary_rpc_method_handler(
            self.wrap(path.rsplit("/", 1)[-1], handler.unary_unary),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
        self._wrapped[path] = (handler, wrapped)
        return wrapped

    def wrap(self, method: str, behavior: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        """``behavior`` (a unary handler) measured and its errors counted under ``method``."""
        observe = self.latency.labels(method).observe
        errors = self.errors

        async def measured(request: Any, context: Any) -> Any:
            start = time.perf_counter()
            try:
                response = behavior(request, context)
                if inspect.isawaitable(response):
                    response = await response
            except asyncio.CancelledError:  # the caller went away: timed, not an error of ours
                observe(time.perf_counter() - start)
                raise
            except Exception as exc:
                observe(time.perf_counter() - start)
                name = getattr(exc, "error_name", None)
                errors.labels(method, name if isinstance(name, str) else "UNKNOWN_SERVER_ERROR").inc()
                raise
            observe(time.perf_counter() - start)
            for name in response_errors(response):
                errors.labels(method, name).inc()
            return response

        return measured
