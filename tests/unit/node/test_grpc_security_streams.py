"""A streaming RPC's request context across yields (issue 25): a stream the client dropped while
suspended at a ``yield`` is closed by the event loop's async-generator finalizer, in another task
and context; the interceptor must not reset a context-variable token there (on main it logged
"Task exception was never retrieved ... was created in a different Context" at stop and on a
controller change)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import grpc

from kraftlog.common.security import current_request
from kraftlog.node._grpc_security import SecurityInterceptor


class _Context:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def auth_context(self) -> dict[str, Any]:
        return {}

    async def abort(self, code: Any, details: str) -> None:
        raise AssertionError(f"aborted: {code} {details}")


def _allow(*_args: Any) -> bool:
    return True


def _wrapped_stream(seen: list[str]) -> Any:
    async def behavior(request: Any, context: Any) -> Any:
        for i in range(3):
            ctx = current_request()
            ctx.public("test stream")
            seen.append(ctx.api)
            yield i

    interceptor = SecurityInterceptor(listener="PLAINTEXT", security_protocol="PLAINTEXT", authorize_fn=_allow)
    handler = grpc.unary_stream_rpc_method_handler(behavior)
    return interceptor._wrap("/kraftlog.v1.BrokerService/Watch", handler).unary_stream


def test_a_dropped_stream_closed_by_the_loops_finalizer_logs_no_task_exception() -> None:
    errors: list[dict[str, Any]] = []
    seen: list[str] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, c: errors.append(c))
        checked = _wrapped_stream(seen)

        async def rpc_task() -> None:  # grpc's task of one call: takes one item, then drops the stream
            stream = checked(None, _Context())
            assert await stream.__anext__() == 0
            del stream

        await asyncio.get_running_loop().create_task(rpc_task())
        gc.collect()
        for _ in range(10):  # let the finalizer's aclose task run (bounded)
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert seen == ["Watch"]  # the handler saw its request while computing the item
    assert [str(e.get("exception")) for e in errors] == []


def test_the_request_context_is_current_while_each_item_is_computed_and_not_after() -> None:
    seen: list[str] = []

    async def scenario() -> list[int]:
        checked = _wrapped_stream(seen)
        out = []
        async for item in checked(None, _Context()):
            out.append(item)
            assert current_request().api == "internal"  # not the request's context between items
        return out

    assert asyncio.run(scenario()) == [0, 1, 2]
    assert seen == ["Watch", "Watch", "Watch"]
