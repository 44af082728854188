"""One request driver: find the node, call it, follow its hint, back off, give up at the deadline.

Kafka's ``AdminApiDriver`` in small. Every request a client (or a broker's controller channel)
sends to "the node in charge" — the active controller, a group or transaction coordinator, a
partition leader — runs the same loop: pick the node, call it with a per-attempt timeout, and
read the answer as one of three outcomes:

- `Done`: the node answered for good (success, or an error retrying cannot mend); stop.
- `Redirect`: the node is not the one (NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR).
  A ``hint`` naming the right node is followed at once, without back-off; no hint (or a hint
  already followed since the last back-off, so two nodes pointing at each other cannot spin)
  means back off and ask another node.
- `Retry`: the node could not be called or answered with a retriable error; forget it, back off.

Back-off is the one retry policy (`RetryPolicy`, KIP-580's exponential back-off with jitter from
`backoff_ms`), and every wait is cut short by the deadline. When the deadline passes the driver
gives up with the last response a `Redirect` or `Retry` carried (callers return it, errors and
all), else raises the last error, else `RequestTimedOutError`.

The core, `RequestDriver`, does no I/O and reads no clock: callers pass ``now`` and it answers
with the next step (`Call`, `Wait` or `GiveUp`). `drive` (blocking) and `drive_async` (asyncio)
are the two shells that run it with an injected clock and sleep; `Route` is the state shared by
the requests of one client (the candidate nodes and the one that last answered as in charge).
Randomness (the candidates' order, the jitter) comes from an injected `random.Random`.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kraftlog.common import errors as kerr
from kraftlog.common._backoff import backoff_ms
from kraftlog.common._clock import SYSTEM_CLOCK

__all__ = [
    "Call",
    "Done",
    "GiveUp",
    "Outcome",
    "Redirect",
    "RequestDriver",
    "Retry",
    "RetryPolicy",
    "Route",
    "Wait",
    "drive",
    "drive_async",
    "retry_until",
    "wait_until",
]

#: A clock in seconds that only goes forward (the one clock's ``monotonic_s`` unless a test passes its own).
MonotonicSeconds = Callable[[], float]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The one retry policy: Kafka's ``retry.backoff.ms`` / ``retry.backoff.max.ms`` (KIP-580)
    and a per-attempt timeout, so one node that never answers (paused, partitioned) cannot eat
    the whole deadline."""

    backoff_ms: float = 100.0
    backoff_max_ms: float = 1000.0
    attempt_timeout_ms: float = 5000.0
    #: the least time the first attempt is given, even when the deadline is closer
    min_attempt_timeout_ms: float = 100.0

    def delay_s(self, retry: int, rng: random.Random) -> float:
        """The wait before retry number ``retry`` (0 for the first), in seconds."""
        return backoff_ms(retry, base_ms=self.backoff_ms, max_ms=self.backoff_max_ms, rng=rng) / 1000.0


# ---------------------------------------------------------------------------------------------
# Outcomes (what the caller read in an answer) and steps (what the driver wants done next)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Done:
    """The answer is final: the driver returns ``value``."""

    value: Any


@dataclass(frozen=True, slots=True)
class Redirect:
    """The node called is not in charge; ``hint`` names the node that is ("" when unknown).
    ``value`` (the response) is what the driver returns if the deadline passes first."""

    hint: str = ""
    value: Any = None


@dataclass(frozen=True, slots=True)
class Retry:
    """A retriable failure: ``reason`` for logs and the timeout message; ``error`` is raised and
    ``value`` returned if the deadline passes first (``value`` wins when both are set)."""

    reason: str = ""
    error: BaseException | None = None
    value: Any = None


Outcome = Done | Redirect | Retry


@dataclass(frozen=True, slots=True)
class Call:
    """Call ``address`` ("" when the caller finds the node itself) within ``timeout_s``."""

    address: str
    timeout_s: float


@dataclass(frozen=True, slots=True)
class Wait:
    """Sleep ``delay_s`` seconds, then ask for the next step."""

    delay_s: float


@dataclass(frozen=True, slots=True)
class GiveUp:
    """The deadline passed: return ``value`` if not None, else raise ``error`` if not None, else
    time out (``reason`` says what failed last)."""

    value: Any
    error: BaseException | None
    reason: str


Step = Call | Wait | GiveUp


@dataclass(slots=True)
class Route:
    """Which nodes may be in charge, and the one that last answered as in charge (shared by every
    request of one client, so the second request goes straight to the active controller)."""

    candidates: list[str]
    leader: str | None = None

    def learn(self, address: str) -> None:
        """``address`` is in charge (it answered, or a node named it)."""
        self.leader = address
        if address not in self.candidates:
            self.candidates.append(address)

    def forget(self, address: str) -> None:
        """``address`` is not (or no longer) reachable as the node in charge."""
        if self.leader == address:
            self.leader = None


@dataclass(slots=True)
class RequestDriver:
    """The state machine of one request (see the module docstring). Ordering rule: the caller
    asks `next_step`, performs it, and for a `Call` reports the outcome with `record` before
    asking again."""

    deadline: float
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    route: Route | None = None
    rng: random.Random = field(default_factory=random.Random)
    retries: int = field(default=0, init=False)  # back-offs so far
    attempts: int = field(default=0, init=False)  # calls made so far
    _order: list[str] = field(default_factory=list, init=False)  # unknown nodes, in the order tried
    _followed: set[str] = field(default_factory=set, init=False)  # hints followed since the last back-off
    _pending: Wait | None = field(default=None, init=False)
    _last_value: Any = field(default=None, init=False)
    _last_error: BaseException | None = field(default=None, init=False)
    _last_reason: str = field(default="", init=False)

    def __post_init__(self) -> None:
        if self.route is not None:
            if not self.route.candidates:
                raise ValueError("no nodes to call")
            self._order = list(self.route.candidates)
            self.rng.shuffle(self._order)

    def next_step(self, now: float) -> Step:
        """What to do at ``now``: call a node, wait, or give up."""
        remaining = self.deadline - now
        if self._pending is not None:
            wait, self._pending = self._pending, None
            if remaining > 0:
                return Wait(min(wait.delay_s, remaining))
        if self.attempts > 0 and remaining <= 0:
            return GiveUp(self._last_value, self._last_error, self._last_reason)
        floor_s = self.policy.min_attempt_timeout_ms / 1000.0
        timeout_s = min(self.policy.attempt_timeout_ms / 1000.0, max(remaining, floor_s))
        return Call(self._address(), timeout_s)

    def record(self, address: str, outcome: Outcome) -> Any:
        """Take the outcome of the call to ``address``; returns the final value for `Done`
        (the caller stops), else None (the caller asks for the next step)."""
        self.attempts += 1
        route = self.route
        if isinstance(outcome, Done):
            if route is not None and address:
                route.learn(address)
            return outcome.value
        if isinstance(outcome, Redirect):
            self._last_value = outcome.value if outcome.value is not None else self._last_value
            self._last_reason = f"{address or 'node'} is not in charge" + (
                f" (named {outcome.hint})" if outcome.hint else ""
            )
            if outcome.hint and outcome.hint != address and outcome.hint not in self._followed:
                self._followed.add(outcome.hint)
                if route is not None:
                    route.learn(outcome.hint)
                    if outcome.hint not in self._order:
                        self._order.append(outcome.hint)
                return None  # follow at once
            if route is not None and address:
                route.forget(address)
        else:
            if outcome.value is not None:
                self._last_value = outcome.value
            if outcome.error is not None:
                self._last_error = outcome.error
            self._last_reason = f"{address}: {outcome.reason}" if address else outcome.reason
            if route is not None and address:
                route.forget(address)
        self._pending = Wait(self.policy.delay_s(self.retries, self.rng))
        self.retries += 1
        self._followed.clear()
        return None

    def _address(self) -> str:
        if self.route is None:
            return ""
        if self.route.leader is not None:
            return self.route.leader
        return self._order[self.retries % len(self._order)]


# ---------------------------------------------------------------------------------------------
# Shells
# ---------------------------------------------------------------------------------------------


def _give_up(step: GiveUp, what: str) -> Any:
    if step.value is not None:
        return step.value
    if step.error is not None:
        raise step.error
    raise kerr.RequestTimedOutError(f"{what}: gave up at the deadline" + (f" ({step.reason})" if step.reason else ""))


def drive(
    driver: RequestDriver,
    attempt: Callable[[Call], Outcome],
    *,
    what: str = "request",
    clock: MonotonicSeconds = SYSTEM_CLOCK.monotonic_s,
    sleep: Callable[[float], object] = SYSTEM_CLOCK.sleep,
) -> Any:
    """Run ``driver`` to its end, blocking: ``attempt(call)`` performs one call and reads its
    outcome (exceptions it raises end the request). Returns `Done`'s value, or what `GiveUp` says."""
    while True:
        step = driver.next_step(clock())
        if isinstance(step, Wait):
            sleep(step.delay_s)
        elif isinstance(step, GiveUp):
            return _give_up(step, what)
        else:
            outcome = attempt(step)
            if isinstance(outcome, Done):
                return driver.record(step.address, outcome)
            driver.record(step.address, outcome)


async def drive_async(
    driver: RequestDriver,
    attempt: Callable[[Call], Awaitable[Outcome]],
    *,
    what: str = "request",
    clock: MonotonicSeconds = SYSTEM_CLOCK.monotonic_s,
    sleep: Callable[[float], Awaitable[None]] = SYSTEM_CLOCK.sleep_async,
) -> Any:
    """`drive` for asyncio: ``attempt`` and ``sleep`` are awaited."""
    while True:
        step = driver.next_step(clock())
        if isinstance(step, Wait):
            await sleep(step.delay_s)
        elif isinstance(step, GiveUp):
            return _give_up(step, what)
        else:
            outcome = await attempt(step)
            if isinstance(outcome, Done):
                return driver.record(step.address, outcome)
            driver.record(step.address, outcome)


def retry_until(
    attempt: Callable[[float], Outcome],
    *,
    timeout_s: float,
    policy: RetryPolicy | None = None,
    what: str = "request",
    clock: MonotonicSeconds = SYSTEM_CLOCK.monotonic_s,
    sleep: Callable[[float], object] = SYSTEM_CLOCK.sleep,
    rng: random.Random | None = None,
) -> Any:
    """A request whose caller finds the node itself (a coordinator lookup, a cached leader):
    ``attempt(timeout_s)`` makes one try and says `Done`, `Redirect` or `Retry`; retries back
    off by ``policy`` until ``timeout_s`` has passed."""
    driver = RequestDriver(clock() + timeout_s, policy or RetryPolicy(), rng=rng or random.Random())
    return drive(driver, lambda call: attempt(call.timeout_s), what=what, clock=clock, sleep=sleep)


def wait_until(
    predicate: Callable[[], bool],
    *,
    timeout_s: float,
    interval_s: float = 0.1,
    clock: MonotonicSeconds = SYSTEM_CLOCK.monotonic_s,
    sleep: Callable[[float], object] = SYSTEM_CLOCK.sleep,
) -> bool:
    """Poll ``predicate`` every ``interval_s`` until it holds (True) or ``timeout_s`` passes
    (False); the last wait is cut to the deadline, and the predicate is asked once more there."""
    deadline = clock() + timeout_s
    while True:
        if predicate():
            return True
        remaining = deadline - clock()
        if remaining <= 0:
            return False
        sleep(min(interval_s, remaining))
