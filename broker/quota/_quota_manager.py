"""The broker's client quota managers (Kafka's ClientQuotaManager, ClientRequestQuotaManager and
ControllerMutationQuotaManager), enforcing the quotas of the broker's metadata image.

A request is recorded first and judged after, as Kafka does: the request that crosses the quota
is served, and the client pays with a throttle time computed from how far its rate went over
(`throttle_time_ms`). The caller answers with that ``throttle_time_ms`` and mutes the connection
for that long (no request of it is read until then).

Rates are kept per quota entity as Kafka's DefaultQuotaCallback tags them (`QuotaResolution`):
clients that share a user-level quota share one rate. A client with no quota is not tracked.
Sensors unused for an hour are dropped (Kafka's inactive sensor expiry), so client ids that come
and go do not pile up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kraftlog.broker.quota._rate import SampledRate, TokenBucket, throttle_time_ms
from kraftlog.common import SYSTEM_CLOCK, Clock
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import ClientQuotasImage

__all__ = [
    "ClientQuotaManager",
    "ControllerMutationQuotaManager",
    "QuotaManagers",
    "QuotaSample",
    "quota_user",
]

_SENSOR_EXPIRY_MS = 3_600_000
_NANOS_PER_PERCENT_SECOND = 1e7  # 1 % of one second: Kafka's nanosToPercentagePerSecond


def quota_user(principal: str) -> str:
    """The user a principal's quotas are looked up under: its name (``User:alice`` -> ``alice``),
    as Kafka keys user quotas by the principal's name."""
    return principal.split(":", 1)[1] if ":" in principal else principal


@dataclass(frozen=True, slots=True)
class QuotaSample:
    """One quota entity's figures at a scrape: what the metrics endpoint shows."""

    quota_type: str
    user: str
    client_id: str
    quota: float
    rate: float
    throttle_time_ms: float


class _Sensor:
    __slots__ = ("rate", "throttle_sum", "throttle_count", "quota", "last_used_ms")

    def __init__(self, window_num: int, window_size_ms: int) -> None:
        self.rate = SampledRate(window_num, window_size_ms)
        self.throttle_sum = SampledRate(window_num, window_size_ms)
        self.throttle_count = SampledRate(window_num, window_size_ms)
        self.quota = 0.0
        self.last_used_ms = 0


class ClientQuotaManager:
    """One quota type (``key``: producer_byte_rate, consumer_byte_rate, request_percentage) over
    windows of ``window_num`` x ``window_size_ms``. ``max_throttle_ms`` caps a throttle (Kafka caps
    request-percentage throttles at one window; byte rates are not capped)."""

    def __init__(
        self,
        quota_type: str,
        key: str,
        image: Callable[[], ClientQuotasImage],
        *,
        window_num: int,
        window_size_ms: int,
        max_throttle_ms: int | None = None,
    ) -> None:
        self.quota_type = quota_type
        self.key = key
        self._image = image
        self._window_num = window_num
        self._window_size_ms = window_size_ms
        self._max_throttle_ms = max_throttle_ms
        self._sensors: dict[tuple[str, str], _Sensor] = {}
        self._next_expiry_ms = 0

    @property
    def enabled(self) -> bool:
        """Whether any entity has a quota of this type (Kafka's quotasEnabled): while none has, a
        request need not even be measured (its size, its time) for this manager."""
        return self.key in self._image().keys

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` for the client; the throttle time it earned (0: within its quota)."""
        resolution = self._image().resolve(user, client_id, self.key)
        self._expire(now_ms)
        if resolution is None:
            return 0
        tags = (resolution.user_tag, resolution.client_id_tag)
        sensor = self._sensors.get(tags)
        if sensor is None:
            sensor = self._sensors[tags] = _Sensor(self._window_num, self._window_size_ms)
        sensor.quota = resolution.quota
        sensor.last_used_ms = now_ms
        sensor.rate.record(value, now_ms)
        throttle_ms = throttle_time_ms(sensor.rate, resolution.quota, now_ms)
        if self._max_throttle_ms is not None:
            throttle_ms = min(throttle_ms, self._max_throttle_ms)
        return throttle_ms

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """What the client may take in one quota window's worth of samples (Kafka's
        getMaxValueInQuotaWindow: quota x (window_num - 1) x window size), None without a quota. A
        Fetch asks for no more, so that one answer cannot put its client over the quota by itself
        (it would be answered empty, and the same fetch again and again)."""
        resolution = self._image().resolve(user, client_id, self.key)
        if resolution is None:
            return None
        return resolution.quota * (self._window_num - 1) * self._window_size_ms / 1000.0

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        resolution = self._image().resolve(user, client_id, self.key)
        if resolution is not None:
            sensor = self._sensors.get((resolution.user_tag, resolution.client_id_tag))
            if sensor is not None:
                sensor.rate.unrecord(value, now_ms)

    def record_throttle(self, user: str, client_id: str, throttle_ms: int, now_ms: int) -> None:
        """Count a throttle applied to the client (its throttle-time metric)."""
        resolution = self._image().resolve(user, client_id, self.key)
        if resolution is None:
            return
        sensor = self._sensors.get((resolution.user_tag, resolution.client_id_tag))
        if sensor is not None:
            sensor.throttle_sum.record(throttle_ms, now_ms)
            sensor.throttle_count.record(1, now_ms)

    def _expire(self, now_ms: int) -> None:
        if now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + 60_000
        for tags in [t for t, s in self._sensors.items() if now_ms - s.last_used_ms > _SENSOR_EXPIRY_MS]:
            del self._sensors[tags]

    def samples(self, now_ms: int) -> Iterator[QuotaSample]:
        self._expire(now_ms)  # also here: without a quota of this type nothing records (`enabled`)
        for (user, client_id), sensor in list(self._sensors.items()):
            count = sensor.throttle_count.total(now_ms)
            avg = sensor.throttle_sum.total(now_ms) / count if count else 0.0
            yield QuotaSample(self.quota_type, user, client_id, sensor.quota, sensor.rate.measure(now_ms), avg)


class ControllerMutationQuotaManager:
    """KIP-599: partition mutations (topics created or deleted count their partitions, CreatePartitions
    the partitions added) per second, in a token bucket per quota entity. The active controller
    applies it (`for_request`), topic by topic, as Kafka's controller does; ``clock`` is its
    monotonic clock."""

    def __init__(
        self,
        image: Callable[[], ClientQuotasImage],
        *,
        window_num: int,
        window_size_ms: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.quota_type = "ControllerMutation"
        self.key = "controller_mutation_rate"
        self._image = image
        self._window_num = window_num
        self._window_size_ms = window_size_ms
        self._clock = clock
        self._buckets: dict[tuple[str, str], tuple[TokenBucket, float]] = {}
        self._next_expiry_ms = 0

    def for_request(self, principal: str, client_id: str, *, strict: bool) -> RequestMutationQuota:
        """The quota of one request of ``principal``'s client ``client_id`` (a
        ``quorum.controller.PartitionChangeQuota``)."""
        return RequestMutationQuota(self, quota_user(principal), client_id, strict, self._clock.monotonic_ms())

    def bucket_of(self, user: str, client_id: str, now_ms: int) -> tuple[TokenBucket, float] | None:
        """The client's bucket and quota (None: no quota applies), created full on first use."""
        self._expire(now_ms)
        resolution = self._image().resolve(user, client_id, self.key)
        if resolution is None:
            return None
        tags = (resolution.user_tag, resolution.client_id_tag)
        found = self._buckets.get(tags)
        bucket = TokenBucket(self._window_num, self._window_size_ms) if found is None else found[0]
        self._buckets[tags] = (bucket, resolution.quota)
        return bucket, resolution.quota

    def _expire(self, now_ms: int) -> None:
        """Forget, once a minute, the buckets that refilled to their whole burst (a client id or user
        seen once must not be kept for ever; a full bucket is what a new one starts as, so nothing
        owed is forgiven)."""
        if now_ms < self._next_expiry_ms:
            return
        self._next_expiry_ms = now_ms + 60_000
        for tags in [t for t, (bucket, quota) in self._buckets.items() if bucket.full(quota, now_ms)]:
            del self._buckets[tags]

    def __len__(self) -> int:
        return len(self._buckets)

    def exhausted_ms(self, user: str, client_id: str, now_ms: int) -> int:
        """The throttle time when the bucket is already below zero (a strict request then fails
        with THROTTLING_QUOTA_EXCEEDED before any mutation), else 0."""
        found = self.bucket_of(user, client_id, now_ms)
        return 0 if found is None else found[0].throttle_time_ms(found[1], now_ms)

    def record(self, user: str, client_id: str, mutations: int, now_ms: int) -> int:
        """Take ``mutations`` tokens; the throttle time the client earned."""
        found = self.bucket_of(user, client_id, now_ms)
        if found is None:
            return 0
        bucket, quota = found
        bucket.record(mutations, quota, now_ms)
        return bucket.throttle_time_ms(quota, now_ms)


class RequestMutationQuota:
    """One request's controller mutation quota, as Kafka's Strict/PermissiveControllerMutationQuota:
    `apply` takes a valid change's partitions from the client's bucket; when ``strict`` and the
    bucket is already below zero it raises THROTTLING_QUOTA_EXCEEDED instead (a change that takes
    the bucket below zero is still allowed: it is the next one that waits). `throttle_time_ms` is
    the wait the answer carries. The request's time is read once (``now_ms``)."""

    def __init__(
        self, manager: ControllerMutationQuotaManager, user: str, client_id: str, strict: bool, now_ms: int
    ) -> None:
        self._manager = manager
        self._user = user
        self._client_id = client_id
        self._strict = strict
        self._now_ms = now_ms

    def apply(self, partitions: int) -> None:
        # the client's bucket is resolved once per topic (its quota is looked up in the image)
        found = self._manager.bucket_of(self._user, self._client_id, self._now_ms)
        if found is None:
            return
        bucket, quota = found
        if self._strict and (throttle_ms := bucket.throttle_time_ms(quota, self._now_ms)) > 0:
            raise kerr.ThrottlingQuotaExceededError(
                f"the controller mutation quota of this client is exceeded: retry in {throttle_ms} ms"
            )
        bucket.record(partitions, quota, self._now_ms)

    def throttle_time_ms(self) -> int:
        return self._manager.exhausted_ms(self._user, self._client_id, self._now_ms)


class QuotaManagers:
    """The broker's quota managers (Kafka's QuotaFactory.QuotaManagers), over one metadata image
    getter and the ``quota.window.*`` configs; ``clock`` is the monotonic clock the enforcing front
    ends read (`now_ms`). The controller mutation quota is the active controller's
    (`ControllerMutationQuotaManager`)."""

    def __init__(
        self,
        image: Callable[[], ClientQuotasImage],
        *,
        clock: Clock = SYSTEM_CLOCK,
        window_num: int = 11,
        window_size_s: int = 1,
    ) -> None:
        self.clock = clock
        size_ms = window_size_s * 1000
        self.produce = ClientQuotaManager(
            "Produce", "producer_byte_rate", image, window_num=window_num, window_size_ms=size_ms
        )
        self.fetch = ClientQuotaManager(
            "Fetch", "consumer_byte_rate", image, window_num=window_num, window_size_ms=size_ms
        )
        self.request = ClientQuotaManager(
            "Request",
            "request_percentage",
            image,
            window_num=window_num,
            window_size_ms=size_ms,
            max_throttle_ms=size_ms,
        )

    def now_ms(self) -> int:
        return self.clock.monotonic_ms()

    @property
    def enabled(self) -> bool:
        """Whether any client quota a broker enforces is set: without one, requests skip every
        quota step (no size sums, CPU clock reads or fetch-session journal), as Kafka's managers
        record nothing while no quota of theirs is set."""
        return self.produce.enabled or self.fetch.enabled or self.request.enabled

    def record_request_time(self, user: str, client_id: str, elapsed_ns: int, now_ms: int) -> int:
        """Record the time a request held the broker (as a percentage of one second, Kafka's
        request_percentage unit: 100 is one thread's worth); its throttle time."""
        return self.request.record(user, client_id, elapsed_ns / _NANOS_PER_PERCENT_SECOND, now_ms)

    def samples(self, now_ms: int) -> Iterator[QuotaSample]:
        for manager in (self.produce, self.fetch, self.request):
            yield from manager.samples(now_ms)
