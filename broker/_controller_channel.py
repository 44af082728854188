"""Async calls from a broker to the controller quorum, following NOT_CONTROLLER to the active one.

Brokers know the controllers from ``controller.quorum.voters``. A call goes to the last controller
that answered as active; a NOT_CONTROLLER answer names the active controller, which is tried next;
an unreachable controller moves the call to another one. Retries back off and stop at the
caller's deadline. The loop is the one request driver (`kraftlog.common._request_driver`), which the
client's `Admin` runs too.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

import grpc
import structlog

from kraftlog.common import (
    Call,
    Done,
    Outcome,
    Redirect,
    RequestDriver,
    Retry,
    RetryPolicy,
    Route,
    drive_async,
)
from kraftlog.common import errors as kerr
from kraftlog.common.security import RequestContext, SaslLogin, TlsSettings, forwarding_metadata
from kraftlog.proto import RECONNECT_OPTIONS, admin_pb2_grpc, controller_pb2_grpc, open_aio_channel

__all__ = ["ControllerChannel"]

_NOT_CONTROLLER = kerr.NotControllerError.error_code
_log = structlog.get_logger(__name__)


def _top_error_code(response: Any) -> int:
    fields = response.DESCRIPTOR.fields_by_name
    return response.error.code if "error" in fields and response.HasField("error") else 0


class ControllerChannel:
    """gRPC channels to every controller and the knowledge of which one is active."""

    def __init__(
        self,
        controllers: Sequence[str],
        *,
        retry_backoff_ms: int = 100,
        attempt_timeout_ms: int = 1500,
        options: Sequence[tuple[str, Any]] = (),
        tls: TlsSettings | None = None,
        sasl: SaslLogin | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if not controllers:
            raise ValueError("no controllers configured")
        self.controllers = list(controllers)
        self._options = list(dict([*RECONNECT_OPTIONS, *options]).items())  # the caller's values win
        self._tls = tls  # the controller listener's TLS settings (None: PLAINTEXT)
        self._sasl = sasl  # this node's login on a SASL controller listener
        # opened on first use (gRPC connects on the first call anyway), one per controller
        self._channels: dict[str, grpc.aio.Channel] = {}
        # the controller that last answered as active, shared by every call
        self._route = Route(list(self.controllers))
        # KIP-580 back-off capped at 1 s, so a broker never waits longer than a fraction of its
        # session between controllers. A paused or partitioned controller accepts connections and
        # never answers: one attempt must give up well inside a broker session, so heartbeats move
        # on to another controller.
        self._policy = RetryPolicy(retry_backoff_ms, 1000, attempt_timeout_ms)
        self._rng = rng or random.Random()
        self._clock = clock
        self._sleep = sleep

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()

    def _channel(self, address: str) -> grpc.aio.Channel:
        ch = self._channels.get(address)
        if ch is None:
            ch = open_aio_channel(address, options=self._options, tls=self._tls, sasl=self._sasl)
            self._channels[address] = ch
        return ch

    def controller_stub(self, address: str) -> controller_pb2_grpc.ControllerServiceStub:
        return controller_pb2_grpc.ControllerServiceStub(self._channel(address))

    def admin_stub(self, address: str) -> admin_pb2_grpc.AdminServiceStub:
        return admin_pb2_grpc.AdminServiceStub(self._channel(address))

    async def call(
        self,
        service: str,
        method: str,
        request: Any,
        *,
        timeout_s: float,
        attempt_timeout_s: float | None = None,
        on_behalf_of: RequestContext | None = None,
    ) -> Any:
        """Call ``service.method`` on the active controller; returns its response, or the last
        NOT_CONTROLLER response when no controller became active before the deadline.

        ``on_behalf_of``: the request of the client this forwards (KIP-590); the controller
        authorizes its principal, trusting the broker to name it because the broker itself has
        ClusterAction, and applies its client's controller mutation quota (client id, strictness).
        The node's own work (internal topics) passes None.

        Raises `RequestTimedOutError` when no controller could be reached at all.
        """
        metadata = forwarding_metadata(on_behalf_of) if on_behalf_of is not None else None
        policy = self._policy
        if attempt_timeout_s is not None:
            policy = replace(policy, attempt_timeout_ms=attempt_timeout_s * 1000.0)
        driver = RequestDriver(self._clock() + timeout_s, policy, self._route, self._rng)

        async def attempt(call: Call) -> Outcome:
            address = call.address
            stub = self.controller_stub(address) if service == "controller" else self.admin_stub(address)
            try:
                response = await getattr(stub, method)(request, timeout=call.timeout_s, metadata=metadata)
            except grpc.aio.AioRpcError as err:
                reason = err.code().name
                return Retry(
                    reason, error=kerr.RequestTimedOutError(f"{method}: no controller reachable ({address}: {reason})")
                )
            if _top_error_code(response) != _NOT_CONTROLLER:
                return Done(response)
            fields = response.DESCRIPTOR.fields_by_name
            hint = response.controller.leader_address if "controller" in fields else ""
            return Redirect(hint, response)

        return await drive_async(driver, attempt, what=method, clock=self._clock, sleep=self._sleep)
