"""`Admin` over a `MockTransport`: NOT_CONTROLLER hints, unreachable controllers, the deadline.

No server and no sleep: the transport answers from a function and the clock moves only when the
admin client backs off.
"""

from __future__ import annotations

import random
from typing import Any

import grpc
import pytest

from kraftlog.client import Admin, NewTopic
from kraftlog.client._transport import MockTransport, rpc_error
from kraftlog.common import errors as kerr
from kraftlog.proto import admin_pb2, controller_pb2, errors_pb2

NOT_CONTROLLER = kerr.NotControllerError.error_code


class FakeClock:
    def __init__(self) -> None:
        self.now = 50.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def not_controller(leader: str = "") -> admin_pb2.DescribeClusterResponse:
    return admin_pb2.DescribeClusterResponse(
        error=errors_pb2.Error(code=NOT_CONTROLLER, name="NOT_CONTROLLER"),
        controller=controller_pb2.ControllerHint(leader_id=3 if leader else -1, leader_address=leader),
    )


def make_admin(handler: Any, clock: FakeClock, **kwargs: Any) -> tuple[Admin, MockTransport]:
    transport = MockTransport(handler)
    admin = Admin(
        kwargs.pop("servers", "c1:9093,c2:9093"),
        transport=transport,
        clock=clock,
        sleep=clock.sleep,
        rng=random.Random(5),
        **kwargs,
    )
    return admin, transport


def test_follows_the_not_controller_hint_and_remembers_the_controller() -> None:
    clock = FakeClock()

    def handler(address: str, method: str, request: Any) -> Any:
        assert method == "AdminService/DescribeCluster"
        if address == "c3:9093":
            return admin_pb2.DescribeClusterResponse(cluster_id="k1", controller_id=3)
        return not_controller("c3:9093")

    admin, transport = make_admin(handler, clock)
    assert admin.describe_cluster().cluster_id == "k1"
    first = [address for address, _, _ in transport.calls]
    assert first[-1] == "c3:9093" and len(first) == 2 and clock.slept == []
    admin.describe_cluster()
    assert [address for address, _, _ in transport.calls][2:] == ["c3:9093"]  # straight to it
    admin.close()
    assert transport.opened.count("c3:9093") == 1


def test_not_controller_in_a_per_item_error_is_followed_too() -> None:
    clock = FakeClock()

    def handler(address: str, method: str, request: Any) -> Any:
        if address == "c2:9093":
            return admin_pb2.CreateTopicsResponse(topics=[admin_pb2.CreateTopicsResponse.Result(name="t")])
        error = errors_pb2.Error(code=NOT_CONTROLLER, name="NOT_CONTROLLER")
        return admin_pb2.CreateTopicsResponse(
            topics=[admin_pb2.CreateTopicsResponse.Result(name="t", error=error)],
            controller=controller_pb2.ControllerHint(leader_id=2, leader_address="c2:9093"),
        )

    admin, transport = make_admin(handler, clock, servers="c1:9093")
    response = admin.create_topics([NewTopic("t", 1, 1)])
    assert response.topics[0].error.code == 0
    assert transport.calls[-1][0] == "c2:9093"


def test_unreachable_controller_backs_off_and_moves_to_another() -> None:
    clock = FakeClock()

    def handler(address: str, method: str, request: Any) -> Any:
        if address == "c1:9093":
            raise rpc_error(grpc.StatusCode.UNAVAILABLE)
        return admin_pb2.DescribeClusterResponse(cluster_id="k1")

    admin, transport = make_admin(handler, clock, retry_backoff_ms=100, retry_backoff_max_ms=1000)
    assert admin.describe_cluster().cluster_id == "k1"
    addresses = [address for address, _, _ in transport.calls]
    assert addresses[-1] == "c2:9093"
    assert len(clock.slept) == addresses.count("c1:9093")  # one back-off per failure, none after success
    assert all(0.08 <= s <= 0.24 for s in clock.slept)


def test_no_controller_elected_returns_the_last_answer_at_the_deadline() -> None:
    clock = FakeClock()
    admin, transport = make_admin(lambda a, m, r: not_controller(), clock, request_timeout_ms=3000)
    response = admin.describe_cluster()
    assert response.error.code == NOT_CONTROLLER  # errors and all, as before
    assert clock.now == pytest.approx(53.0)  # gave up exactly at the deadline
    assert len(transport.calls) >= 3 and sum(clock.slept) == pytest.approx(3.0)


def test_nobody_reachable_raises_request_timed_out_naming_the_error() -> None:
    clock = FakeClock()

    def handler(address: str, method: str, request: Any) -> Any:
        raise rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED)

    admin, _ = make_admin(handler, clock)
    with pytest.raises(kerr.RequestTimedOutError, match="within 2000 ms.*DEADLINE_EXCEEDED"):
        admin.call("DescribeCluster", admin_pb2.DescribeClusterRequest(), timeout_ms=2000)
    assert clock.now == pytest.approx(52.0)


def test_wait_for_polls_with_the_injected_clock() -> None:
    clock = FakeClock()
    answers = iter(["", "", "k1"])
    admin, _ = make_admin(
        lambda a, m, r: admin_pb2.DescribeClusterResponse(cluster_id=next(answers, "k1")), clock, servers="c1:9093"
    )
    assert admin.wait_for(lambda adm: adm.describe_cluster().cluster_id == "k1", timeout_s=5.0, interval_s=0.5)
    assert clock.slept == [0.5, 0.5]
    assert not admin.wait_for(lambda adm: False, timeout_s=1.0, interval_s=0.5)
