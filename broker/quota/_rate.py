"""The windowed measures Kafka's quotas are built on, as in its metrics library.

`SampledRate` is Kafka's ``Rate`` over a ``SampledStat``: ``window_num`` samples of
``window_size_ms`` each (``quota.window.num`` x ``quota.window.size.seconds``, 11 x 1 s by
default); a value is added to the current sample, a new sample starts once the current one is
``window_size_ms`` old (the oldest of ``window_num + 1`` is then reused), and samples with no
value within the whole window are forgotten. The rate is the sum of the live samples over the
elapsed window, which counts at least ``window_num - 1`` full windows, so a client's first burst
is averaged over ~10 s instead of the few milliseconds it took.

`throttle_time_ms` is Kafka's QuotaUtils.throttleTime: to bring an observed rate O back to the
quota T over a window W, the client waits X = (O - T) / T * W.

`TokenBucket` is KIP-599's bucket for the controller mutation quota: a burst of
``quota * window_num * window_size_s`` tokens, refilled at ``quota`` per second; recording takes
tokens, possibly below zero.

All take the time as an argument (milliseconds of a monotonic clock): no clock of their own.
"""

from __future__ import annotations

__all__ = ["SampledRate", "TokenBucket", "throttle_time_ms"]


class SampledRate:
    """A rate per second over ``window_num`` samples of ``window_size_ms`` each (one more sample is
    kept, as Kafka keeps one, so that a sample still overlapping the window is not lost)."""

    __slots__ = ("_window_num", "_window_size_ms", "_starts", "_last_events", "_values", "_current")

    def __init__(self, window_num: int, window_size_ms: int) -> None:
        if window_num < 1 or window_size_ms < 1:
            raise ValueError("a rate needs at least one sample of at least 1 ms")
        self._window_num = window_num
        self._window_size_ms = window_size_ms
        self._starts: list[int] = []  # start of each sample (a ring of window_num + 1 once full)
        self._last_events: list[int] = []  # time of each sample's last value
        self._values: list[float] = []
        self._current = -1

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` to the current sample, starting a new one when it is old."""
        if self._current < 0 or now_ms - self._starts[self._current] >= self._window_size_ms:
            self._advance(now_ms)
        self._values[self._current] += value
        self._last_events[self._current] = now_ms

    def unrecord(self, value: float, now_ms: int) -> None:
        """Take back a value recorded in the current sample (Kafka unrecords a throttled fetch's
        size: the answer it was recorded for is sent empty)."""
        if self._current >= 0:
            self._values[self._current] -= value

    def _advance(self, now_ms: int) -> None:
        if len(self._starts) < self._window_num + 1:
            self._starts.append(now_ms)
            self._last_events.append(now_ms)
            self._values.append(0.0)
            self._current = len(self._starts) - 1
        else:
            self._current = (self._current + 1) % (self._window_num + 1)
            self._reset(self._current, now_ms)

    def _reset(self, i: int, now_ms: int) -> None:
        self._starts[i] = now_ms
        self._last_events[i] = now_ms
        self._values[i] = 0.0

    def _purge(self, now_ms: int) -> None:
        """Forget samples with no value within the whole window (Kafka's purgeObsoleteSamples:
        a sample overlapping the window is kept even if it started before it)."""
        expire_age_ms = self._window_num * self._window_size_ms
        for i, last_event in enumerate(self._last_events):
            if now_ms - last_event >= expire_age_ms:
                self._reset(i, now_ms)

    def total(self, now_ms: int) -> float:
        """The sum of the live samples (what an average divides)."""
        self._purge(now_ms)
        return sum(self._values)

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate divides by: since the oldest live sample began, and at least
        ``window_num - 1`` full windows (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min(self._starts) if self._starts else now_ms
        elapsed = now_ms - oldest
        full_windows = elapsed // self._window_size_ms
        min_full_windows = self._window_num - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self._window_size_ms
        return max(elapsed, 1)

    def measure(self, now_ms: int) -> float:
        """Units per second at ``now_ms``."""
        window_ms = self.window_size_ms(now_ms)
        return sum(self._values) / (window_ms / 1000.0)


def throttle_time_ms(rate: SampledRate, quota: float, now_ms: int) -> int:
    """How long a client over ``quota`` must wait so that its rate comes back to it, 0 within it
    (Kafka's QuotaUtils.throttleTime, rounded as Math.round)."""
    observed = rate.measure(now_ms)
    if observed <= quota:
        return 0
    if quota <= 0:  # our controller refuses it, but a replayed record is not checked again: a whole window
        return rate.window_size_ms(now_ms)
    return int((observed - quota) / quota * rate.window_size_ms(now_ms) + 0.5)


class TokenBucket:
    """KIP-599's token bucket: ``quota`` tokens per second, a burst of ``quota`` times the whole
    window; `record` may take the bucket below zero, and `throttle_time_ms` is the time to refill
    to zero."""

    __slots__ = ("_tokens", "_last_ms", "_window_num", "_window_size_ms")

    def __init__(self, window_num: int, window_size_ms: int) -> None:
        self._window_num = window_num
        self._window_size_ms = window_size_ms
        self._tokens: float | None = None  # full on first use: the quota is known only then
        self._last_ms = 0

    def _refill(self, quota: float, now_ms: int) -> float:
        burst = quota * self._window_num * self._window_size_ms / 1000.0
        if self._tokens is None:
            self._tokens = burst
        else:
            elapsed_ms = max(0, now_ms - self._last_ms)
            self._tokens = min(burst, self._tokens + quota * elapsed_ms / 1000.0)
        self._last_ms = now_ms
        return self._tokens

    def tokens(self, quota: float, now_ms: int) -> float:
        return self._refill(quota, now_ms)

    def record(self, value: float, quota: float, now_ms: int) -> None:
        self._tokens = self._refill(quota, now_ms) - value

    def throttle_time_ms(self, quota: float, now_ms: int) -> int:
        tokens = self._refill(quota, now_ms)
        if tokens >= 0:
            return 0
        if quota <= 0:  # never refills (a replayed record our controller would refuse): the whole window
            return self._window_num * self._window_size_ms
        return int(-tokens / quota * 1000.0 + 0.5)

    def full(self, quota: float, now_ms: int) -> bool:
        """Whether the bucket holds its whole burst: forgetting it then loses nothing, as a new bucket
        starts full."""
        return self._refill(quota, now_ms) >= quota * self._window_num * self._window_size_ms / 1000.0
