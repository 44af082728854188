"""The client's transport seam: what opens a channel to a node, and `MockTransport` for unit tests.

`Producer`, `Consumer` and `Admin` reach the cluster only through channels a `Transport` opens
(``transport.open(address, options)``); the default is `ClientSecurity` (gRPC, TLS and SASL as
configured). `MockTransport` (as httpx's) answers every call with a handler instead of a server,
so the clients' logic runs in unit tests with no process and no socket::

    def handler(address: str, method: str, request):   # method: "AdminService/CreateTopics"
        return admin_pb2.CreateTopicsResponse(...)     # or raise rpc_error(StatusCode.UNAVAILABLE)

    Admin("c1:9093", transport=MockTransport(handler))

Blocking calls run the handler in the caller's thread; ``.future()`` calls run it on one worker
thread of the transport, so their callbacks run outside the caller's locks as gRPC's do.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import grpc

__all__ = ["MockTransport", "Transport", "rpc_error"]

#: ``handler(address, "Service/Method", request) -> response``; raises to fail the call.
Handler = Callable[[str, str, Any], Any]


class Transport(Protocol):
    """Opens channels to nodes (``ClientSecurity`` for gRPC; `MockTransport` in tests)."""

    def open(self, address: str, options: Sequence[tuple[str, Any]]) -> Any:
        """A channel to ``address`` (anything gRPC's generated stubs accept as a channel)."""


class _RpcError(grpc.RpcError):
    """A failed call as gRPC raises it: ``code()`` and ``details()``."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def rpc_error(code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE, details: str = "") -> grpc.RpcError:
    """The error a handler raises to fail a call as an unreachable (or timed-out) node would."""
    return _RpcError(code, details or code.name.lower())


class _Method:
    """A unary-unary method of a `_Channel`: called, or ``.future()``, as gRPC's multicallable."""

    def __init__(self, channel: _Channel, method: str) -> None:
        self._channel = channel
        self._method = method

    def _invoke(self, request: Any) -> Any:
        channel = self._channel
        if channel.closed:
            raise ValueError("Cannot invoke RPC on closed channel!")
        channel.transport.calls.append((channel.address, self._method, request))
        return channel.transport.handler(channel.address, self._method, request)

    def __call__(self, request: Any, timeout: float | None = None, **_: Any) -> Any:
        return self._invoke(request)

    def future(self, request: Any, timeout: float | None = None, **_: Any) -> concurrent.futures.Future[Any]:
        return self._channel.transport.submit(self._invoke, request)


class _Channel:
    def __init__(self, transport: MockTransport, address: str) -> None:
        self.transport = transport
        self.address = address
        self.closed = False

    def unary_unary(self, path: str, *args: Any, **kwargs: Any) -> _Method:
        return _Method(self, path.lstrip("/").removeprefix("kraftlog.v1."))

    def close(self) -> None:
        self.closed = True


class MockTransport:
    """A `Transport` whose calls a function answers (see the module docstring); ``calls`` records
    every ``(address, method, request)`` in order."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.calls: list[tuple[str, str, Any]] = []
        self.opened: list[str] = []
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mock-transport")

    def open(self, address: str, options: Sequence[tuple[str, Any]]) -> _Channel:
        self.opened.append(address)
        return _Channel(self, address)

    def submit(self, fn: Callable[[Any], Any], request: Any) -> concurrent.futures.Future[Any]:
        return self._pool.submit(fn, request)

    def methods(self) -> list[str]:
        """The methods called so far, in order (``"AdminService/CreateTopics"``, ...)."""
        return [method for _, method, _ in self.calls]

    def close(self) -> None:
        """Stop the worker thread (pending ``.future()`` calls finish first)."""
        self._pool.shutdown(wait=True)
