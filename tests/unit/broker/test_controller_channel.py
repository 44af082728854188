"""The brokers' controller channel runs the one request driver: hints, unreachable controllers,
the deadline — with stubs in place of gRPC and a clock that moves only when the channel sleeps."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import grpc
import pytest

from kraftlog.broker._controller_channel import ControllerChannel
from kraftlog.common import errors as kerr
from kraftlog.proto import controller_pb2, errors_pb2

NOT_CONTROLLER = kerr.NotControllerError.error_code


class FakeClock:
    def __init__(self) -> None:
        self.now = 10.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class FakeStub:
    def __init__(self, address: str, answer: Any, calls: list[str]) -> None:
        self._address = address
        self._answer = answer
        self._calls = calls

    async def BrokerHeartbeat(self, request: Any, *, timeout: float, metadata: Any) -> Any:
        self._calls.append(self._address)
        result = self._answer(self._address)
        if isinstance(result, BaseException):
            raise result
        return result


def unavailable() -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "down")


def not_controller(leader: str = "") -> controller_pb2.BrokerHeartbeatResponse:
    return controller_pb2.BrokerHeartbeatResponse(
        error=errors_pb2.Error(code=NOT_CONTROLLER, name="NOT_CONTROLLER"),
        controller=controller_pb2.ControllerHint(leader_address=leader),
    )


def run(answer: Any, *, controllers: list[str], timeout_s: float = 5.0, calls_twice: bool = False) -> Any:
    clock = FakeClock()
    calls: list[str] = []

    async def main() -> Any:
        channel = ControllerChannel(controllers, clock=clock, sleep=clock.sleep, rng=random.Random(4))
        channel.controller_stub = lambda address: FakeStub(address, answer, calls)  # type: ignore[assignment]
        try:
            results = [await channel.call("controller", "BrokerHeartbeat", None, timeout_s=timeout_s)]
            if calls_twice:
                results.append(await channel.call("controller", "BrokerHeartbeat", None, timeout_s=timeout_s))
            return results
        finally:
            await channel.close()

    return asyncio.run(main()), calls, clock


def test_follows_not_controller_to_the_named_controller_and_stays_there() -> None:
    def answer(address: str) -> Any:
        return controller_pb2.BrokerHeartbeatResponse(is_caught_up=True) if address == "c3" else not_controller("c3")

    results, calls, clock = run(answer, controllers=["c1", "c2", "c3"], calls_twice=True)
    assert all(r.is_caught_up for r in results)
    assert calls[-2:] == ["c3", "c3"] and calls.count("c3") == 2 and len(calls) <= 3
    assert clock.slept == []


def test_unreachable_controller_backs_off_and_the_next_one_is_tried() -> None:
    def answer(address: str) -> Any:
        return unavailable() if address == "c1" else controller_pb2.BrokerHeartbeatResponse(is_fenced=True)

    (result,), calls, clock = run(answer, controllers=["c1", "c2"])
    assert result.is_fenced and calls[-1] == "c2"
    assert len(clock.slept) == calls.count("c1")
    assert all(s <= 1.2 for s in clock.slept)  # capped at 1 s (+ jitter)


def test_no_active_controller_returns_the_last_not_controller_at_the_deadline() -> None:
    (result,), calls, clock = run(lambda address: not_controller(), controllers=["c1", "c2"], timeout_s=2.0)
    assert result.error.code == NOT_CONTROLLER
    assert clock.now == pytest.approx(12.0) and len(calls) >= 2


def test_nobody_reachable_raises_request_timed_out() -> None:
    with pytest.raises(kerr.RequestTimedOutError, match="no controller reachable"):
        run(lambda address: unavailable(), controllers=["c1"], timeout_s=1.0)
