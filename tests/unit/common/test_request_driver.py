"""The one request driver (common/_request_driver.py): hints, back-off, deadline, with a fake clock."""

from __future__ import annotations

import asyncio
import random

import pytest

from kraftlog.common import errors as kerr
from kraftlog.common._request_driver import (
    Call,
    Done,
    GiveUp,
    Redirect,
    RequestDriver,
    Retry,
    RetryPolicy,
    Route,
    Wait,
    drive,
    drive_async,
    retry_until,
    wait_until,
)

POLICY = RetryPolicy(backoff_ms=100, backoff_max_ms=1000, attempt_timeout_ms=5000)


class FakeClock:
    """Time that moves only when slept."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


def test_first_call_goes_to_known_leader_and_success_is_remembered() -> None:
    route = Route(["a", "b", "c"], leader="b")
    driver = RequestDriver(10.0, POLICY, route, random.Random(1))
    step = driver.next_step(0.0)
    assert step == Call("b", 5.0)
    assert driver.record("b", Done("ok")) == "ok"
    assert route.leader == "b"


def test_hint_is_followed_at_once_and_learned() -> None:
    route = Route(["a"])
    driver = RequestDriver(10.0, POLICY, route, random.Random(1))
    assert driver.next_step(0.0) == Call("a", 5.0)
    driver.record("a", Redirect("z:1", "not-controller"))
    assert driver.next_step(0.0) == Call("z:1", 5.0)  # no Wait in between
    assert route.leader == "z:1" and "z:1" in route.candidates
    driver.record("z:1", Done(1))
    assert route.leader == "z:1"


def test_two_nodes_naming_each_other_back_off_instead_of_spinning() -> None:
    route = Route(["a", "b"])
    driver = RequestDriver(10.0, POLICY, route, random.Random(0))
    first = driver.next_step(0.0)
    assert isinstance(first, Call)
    other = "b" if first.address == "a" else "a"
    driver.record(first.address, Redirect(other))
    assert driver.next_step(0.0) == Call(other, 5.0)
    driver.record(other, Redirect(first.address))
    assert driver.next_step(0.0) == Call(first.address, 5.0)
    driver.record(first.address, Redirect(other))  # `other` was already followed: back off
    step = driver.next_step(0.0)
    assert isinstance(step, Wait) and step.delay_s > 0


def test_redirect_without_hint_backs_off_and_rotates() -> None:
    route = Route(["a", "b"])
    driver = RequestDriver(10.0, POLICY, route, random.Random(3))
    first = driver.next_step(0.0)
    assert isinstance(first, Call)
    driver.record(first.address, Redirect())
    assert route.leader is None
    wait = driver.next_step(0.0)
    assert isinstance(wait, Wait)
    second = driver.next_step(wait.delay_s)
    assert isinstance(second, Call) and second.address != first.address


def test_back_off_grows_and_is_capped_by_the_policy() -> None:
    rng = random.Random(7)
    policy = RetryPolicy(backoff_ms=100, backoff_max_ms=400, attempt_timeout_ms=1000)
    driver = RequestDriver(1e9, policy, Route(["a"]), rng)
    delays = []
    now = 0.0
    for _ in range(6):
        step = driver.next_step(now)
        assert isinstance(step, Call)
        driver.record(step.address, Retry("UNAVAILABLE"))
        wait = driver.next_step(now)
        assert isinstance(wait, Wait)
        delays.append(wait.delay_s)
        now += wait.delay_s
    assert 0.08 <= delays[0] <= 0.12  # 100 ms +- 20 % jitter
    assert 0.16 <= delays[1] <= 0.24
    assert all(d <= 0.4 * 1.2 for d in delays)
    assert delays[-1] >= 0.4 * 0.8  # reached the cap


def test_wait_and_attempt_timeout_are_cut_by_the_deadline() -> None:
    policy = RetryPolicy(backoff_ms=1000, backoff_max_ms=1000, attempt_timeout_ms=5000)
    driver = RequestDriver(2.0, policy, Route(["a"]), random.Random(1))
    assert driver.next_step(0.0) == Call("a", 2.0)
    driver.record("a", Retry("DEADLINE_EXCEEDED"))
    wait = driver.next_step(1.5)
    assert wait == Wait(0.5)
    assert isinstance(driver.next_step(2.0), GiveUp)


def test_first_attempt_is_made_even_past_the_deadline() -> None:
    driver = RequestDriver(0.0, POLICY, None, random.Random(1))
    step = driver.next_step(5.0)
    assert step == Call("", 0.1)


def test_give_up_returns_last_response_else_raises_last_error() -> None:
    clock = FakeClock()
    driver = RequestDriver(clock() + 1.0, POLICY, Route(["a"]), random.Random(1))
    outcomes = iter([Redirect(value="resp-1"), Retry("UNAVAILABLE")])

    def attempt(call: Call) -> Redirect | Retry:
        return next(outcomes, Retry("UNAVAILABLE"))

    assert drive(driver, attempt, clock=clock, sleep=clock.sleep) == "resp-1"
    assert clock.now == pytest.approx(1001.0)

    driver = RequestDriver(clock() + 1.0, POLICY, Route(["a"]), random.Random(1))
    boom = kerr.CoordinatorNotAvailableError("still loading")
    with pytest.raises(kerr.CoordinatorNotAvailableError):
        drive(driver, lambda call: Retry("x", error=boom), clock=clock, sleep=clock.sleep)

    driver = RequestDriver(clock() + 1.0, POLICY, Route(["a"]), random.Random(1))
    with pytest.raises(kerr.RequestTimedOutError, match="Frob: gave up.*a: UNAVAILABLE"):
        drive(driver, lambda call: Retry("UNAVAILABLE"), what="Frob", clock=clock, sleep=clock.sleep)


def test_drive_follows_hint_to_the_controller_without_sleeping() -> None:
    clock = FakeClock()
    calls: list[str] = []

    def attempt(call: Call) -> Done | Redirect:
        calls.append(call.address)
        return Done("ok") if call.address == "c" else Redirect("c", "not-me")

    route = Route(["a"])
    driver = RequestDriver(clock() + 5.0, POLICY, route, random.Random(1))
    assert drive(driver, attempt, clock=clock, sleep=clock.sleep) == "ok"
    assert calls == ["a", "c"] and clock.slept == [] and route.leader == "c"


def test_drive_async_retries_until_a_node_answers() -> None:
    clock = FakeClock()
    answers = iter([Retry("UNAVAILABLE"), Retry("UNAVAILABLE"), Done(42)])

    async def attempt(call: Call) -> Done | Retry:
        return next(answers)

    driver = RequestDriver(clock() + 30.0, POLICY, Route(["a", "b"]), random.Random(1))
    result = asyncio.run(drive_async(driver, attempt, clock=clock, sleep=clock.async_sleep))
    assert result == 42 and len(clock.slept) == 2 and driver.attempts == 3


def test_retry_until_without_a_route() -> None:
    clock = FakeClock()
    seen: list[float] = []

    def attempt(timeout_s: float) -> Done | Retry:
        seen.append(timeout_s)
        return Done("x") if len(seen) == 3 else Retry("COORDINATOR_LOAD_IN_PROGRESS")

    got = retry_until(attempt, timeout_s=10.0, policy=POLICY, clock=clock, sleep=clock.sleep, rng=random.Random(2))
    assert got == "x" and len(seen) == 3 and seen[0] == 5.0


def test_wait_until_polls_with_a_bound() -> None:
    clock = FakeClock()
    results = iter([False, False, True])
    assert wait_until(lambda: next(results), timeout_s=1.0, interval_s=0.25, clock=clock, sleep=clock.sleep)
    assert clock.slept == [0.25, 0.25]
    assert not wait_until(lambda: False, timeout_s=0.6, interval_s=0.25, clock=clock, sleep=clock.sleep)
    assert sum(clock.slept[2:]) == pytest.approx(0.6)


def test_route_needs_a_node() -> None:
    with pytest.raises(ValueError):
        RequestDriver(1.0, POLICY, Route([]), random.Random(1))
