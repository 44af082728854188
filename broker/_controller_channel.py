"""Async calls from a broker to the controller quorum, following NOT_CONTROLLER to the active one.

Brokers know the controllers from ``controller.quorum.voters``. A call goes to the last controller
that answered as active; a NOT_CONTROLLER answer names the active controller, which is tried next;
an unreachable controller moves the call to another one. Retries back off and stop at the
caller's deadline.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from typing import Any

import grpc
import structlog

from kraftlog.common import backoff_ms
from kraftlog.common import errors as kerr
from kraftlog.common._listener_security import SaslLogin
from kraftlog.common._request_context import Session, forwarding_metadata
from kraftlog.common._tls import TlsSettings
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
    ) -> None:
        if not controllers:
            raise ValueError("no controllers configured")
        self.controllers = list(controllers)
        merged = list(dict([*RECONNECT_OPTIONS, *options]).items())  # the caller's values win
        self._tls = tls  # the controller listener's TLS settings (None: PLAINTEXT)
        self._sasl = sasl  # this node's login on a SASL controller listener
        self._channels = {a: open_aio_channel(a, options=merged, tls=tls, sasl=sasl) for a in self.controllers}
        self._active: str | None = None
        self._retry_backoff_ms = retry_backoff_ms
        # A paused or partitioned controller accepts connections and never answers: one attempt
        # must give up well inside a broker session, so heartbeats move on to another controller.
        self._attempt_timeout_s = attempt_timeout_ms / 1000.0
        self._rng = random.Random()

    async def close(self) -> None:
        for ch in self._channels.values():
            await ch.close()

    def _retry_delay_s(self, attempt: int) -> float:
        """Wait before retry ``attempt`` (1 for the first): KIP-580 back-off capped at 1 s, so a
        broker never waits longer than a fraction of its session between controllers."""
        return backoff_ms(attempt - 1, base_ms=self._retry_backoff_ms, max_ms=1000, rng=self._rng) / 1000.0

    def _channel(self, address: str) -> grpc.aio.Channel:
        ch = self._channels.get(address)
        if ch is None:
            ch = open_aio_channel(address, options=RECONNECT_OPTIONS, tls=self._tls, sasl=self._sasl)
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
        on_behalf_of: Session | None = None,
    ) -> Any:
        """Call ``service.method`` on the active controller; returns its response, or the last
        NOT_CONTROLLER response when no controller became active before the deadline.

        ``on_behalf_of``: the session of the client whose request this forwards (KIP-590); the
        controller authorizes that principal, trusting the broker to name it because the broker
        itself has ClusterAction. The node's own work (internal topics) passes None.

        Raises `RequestTimedOutError` when no controller could be reached at all.
        """
        metadata = forwarding_metadata(on_behalf_of) if on_behalf_of is not None else None
        deadline = time.monotonic() + timeout_s
        order = list(self.controllers)
        self._rng.shuffle(order)
        attempt = 0
        last: Any = None
        last_err: str = ""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            address = self._active or order[attempt % len(order)]
            stub = self.controller_stub(address) if service == "controller" else self.admin_stub(address)
            try:
                per_attempt = attempt_timeout_s or self._attempt_timeout_s
                response = await getattr(stub, method)(request, timeout=min(remaining, per_attempt), metadata=metadata)
            except grpc.aio.AioRpcError as err:
                last_err = f"{address}: {err.code().name}"
                self._active = None
                attempt += 1
                await asyncio.sleep(min(self._retry_delay_s(attempt), max(deadline - time.monotonic(), 0)))
                continue
            if _top_error_code(response) != _NOT_CONTROLLER:
                self._active = address
                return response
            last = response
            hint = response.controller.leader_address if "controller" in response.DESCRIPTOR.fields_by_name else ""
            if hint and hint != address:
                self._active = hint
                continue
            self._active = None
            attempt += 1
            await asyncio.sleep(min(self._retry_delay_s(attempt), max(deadline - time.monotonic(), 0)))
        if last is not None:
            return last
        raise kerr.RequestTimedOutError(f"{method}: no controller reachable ({last_err})")
