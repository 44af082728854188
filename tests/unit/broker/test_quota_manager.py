"""The broker's quota arithmetic with a manual clock (issue 24): Kafka's sampled rate windows,
throttle = (rate - quota) / quota * window, the request-percentage cap, KIP-599's token bucket."""

from __future__ import annotations

import pytest

from kraftlog.broker.quota import (
    ControllerMutationQuotaManager,
    QuotaManagers,
    SampledRate,
    TokenBucket,
    throttle_time_ms,
)
from kraftlog.common import ManualClock
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import ClientQuotaRecord, MetadataDelta, MetadataImage


def _quotas(*records: ClientQuotaRecord):  # type: ignore[no-untyped-def]
    delta = MetadataDelta(MetadataImage.EMPTY)
    for r in records:
        delta.replay(r)
    return delta.apply().quotas


def test_rate_averages_over_at_least_window_num_minus_one_windows() -> None:
    clock = ManualClock()
    rate = SampledRate(11, 1000)
    rate.record(10_000, clock.monotonic_ms())
    # a first burst is spread over 10 full windows, not the instant it took
    assert rate.window_size_ms(clock.monotonic_ms()) == 10_000
    assert rate.measure(clock.monotonic_ms()) == pytest.approx(1000.0)
    clock.advance(15_000)
    rate.record(1, clock.monotonic_ms())
    # 11 windows later the first sample is forgotten
    assert rate.measure(clock.monotonic_ms()) == pytest.approx(0.1)


def test_rate_of_a_steady_flow_converges_to_it() -> None:
    clock = ManualClock()
    rate = SampledRate(11, 1000)
    for _ in range(300):  # 30 s of 100 bytes every 100 ms: 1000 bytes/s
        rate.record(100, clock.monotonic_ms())
        clock.advance(100)
    assert rate.measure(clock.monotonic_ms()) == pytest.approx(1000.0, rel=0.1)


def test_throttle_time_is_kafkas_formula() -> None:
    clock = ManualClock()
    rate = SampledRate(11, 1000)
    rate.record(20_000, clock.monotonic_ms())  # 2000/s over a 10 s window
    # (2000 - 1000) / 1000 * 10 000 ms
    assert throttle_time_ms(rate, 1000.0, clock.monotonic_ms()) == 10_000
    assert throttle_time_ms(rate, 2500.0, clock.monotonic_ms()) == 0


@pytest.mark.parametrize(
    ("window_num", "batch_bytes", "duration_ms"),
    [(11, 16_384, 60_000), (2, 16_384, 20_000), (2, 262_144, 20_000), (2, 1_000_000, 20_000)],
)
def test_a_client_that_waits_its_throttles_out_holds_the_quota(
    window_num: int, batch_bytes: int, duration_ms: int
) -> None:
    """What the librdkafka test checks, in arithmetic: send, wait the throttle, repeat."""
    clock = ManualClock()
    quota = 1_000_000.0
    image = _quotas(ClientQuotaRecord(entity=(("client-id", "p"),), key="producer_byte_rate", value=quota))
    managers = QuotaManagers(lambda: image, window_num=window_num)
    start = clock.monotonic_ms()
    sent = 0
    while clock.monotonic_ms() - start < duration_ms:
        sent += batch_bytes
        throttle = managers.produce.record("u", "p", batch_bytes, clock.monotonic_ms())
        clock.advance(max(throttle, 5))  # a fast client: 5 ms a request when not throttled
    achieved = sent / ((clock.monotonic_ms() - start) / 1000)
    assert achieved == pytest.approx(quota, rel=0.1)


def test_the_first_window_allows_a_burst_of_window_num_minus_one_windows() -> None:
    """Kafka's Rate divides by at least (window_num - 1) windows: a new client may send ten
    seconds' worth at once before its first throttle (with the default 11 x 1 s)."""
    clock = ManualClock()
    image = _quotas(ClientQuotaRecord(entity=(("client-id", "p"),), key="producer_byte_rate", value=1000))
    managers = QuotaManagers(lambda: image)
    assert managers.produce.record("u", "p", 10_000, clock.monotonic_ms()) == 0
    assert managers.produce.record("u", "p", 1_000, clock.monotonic_ms()) == 1_000


def test_managers_throttle_per_resolved_entity_and_record_metrics() -> None:
    clock = ManualClock()
    image = _quotas(ClientQuotaRecord(entity=(("user", "alice"),), key="producer_byte_rate", value=1000))
    managers = QuotaManagers(lambda: image)
    now = clock.monotonic_ms()
    assert managers.produce.record("bob", "x", 1_000_000, now) == 0  # no quota for bob
    assert managers.produce.record("alice", "a", 5_000, now) == 0  # 500/s
    # another client of alice shares her user-level rate: 15 000 bytes in total, 1500/s
    throttle = managers.produce.record("alice", "b", 10_000, now)
    assert throttle == 5_000
    managers.produce.record_throttle("alice", "b", throttle, now)
    (sample,) = list(managers.samples(now))
    assert (sample.quota_type, sample.user, sample.client_id) == ("Produce", "alice", "")
    assert sample.rate == pytest.approx(1500.0)
    assert sample.throttle_time_ms == pytest.approx(5000.0)
    assert sample.quota == 1000.0


def test_request_percentage_throttle_is_capped_at_one_window() -> None:
    clock = ManualClock()
    image = _quotas(ClientQuotaRecord(entity=(("client-id", None),), key="request_percentage", value=1.0))
    managers = QuotaManagers(lambda: image)
    # 5 s of handling time: 50 % of a 10 s window, against a 1 % quota
    assert managers.record_request_time("u", "c", 5_000_000_000, clock.monotonic_ms()) == 1000


def test_token_bucket_allows_a_burst_then_throttles() -> None:
    clock = ManualClock()
    bucket = TokenBucket(11, 1000)
    quota = 2.0  # mutations per second: a burst of 22
    assert bucket.tokens(quota, clock.monotonic_ms()) == pytest.approx(22.0)
    bucket.record(30, quota, clock.monotonic_ms())
    assert bucket.throttle_time_ms(quota, clock.monotonic_ms()) == 4000  # 8 tokens short at 2/s
    clock.advance(4000)
    assert bucket.throttle_time_ms(quota, clock.monotonic_ms()) == 0


def test_a_non_positive_quota_from_replay_throttles_a_window_and_does_not_divide_by_zero() -> None:
    """Our controller refuses quotas <= 0, but a replayed record is not checked again (review, issue 24)."""
    clock = ManualClock()
    rate = SampledRate(11, 1000)
    rate.record(100, clock.monotonic_ms())
    assert throttle_time_ms(rate, 0.0, clock.monotonic_ms()) == rate.window_size_ms(clock.monotonic_ms())
    bucket = TokenBucket(11, 1000)
    bucket.record(1, 0.0, clock.monotonic_ms())
    assert bucket.throttle_time_ms(0.0, clock.monotonic_ms()) == 11_000
    image = _quotas(ClientQuotaRecord(entity=(("client-id", None),), key="producer_byte_rate", value=0.0))
    assert QuotaManagers(lambda: image).produce.record("u", "c", 10, clock.monotonic_ms()) > 0


def test_controller_mutation_buckets_of_clients_gone_quiet_are_forgotten_once_refilled() -> None:
    """A default client-id quota gives every client id its own bucket: one bucket per id ever seen grew
    without bound (review, issue 24); a bucket is forgotten once full again, so no debt is forgiven."""
    clock = ManualClock()
    image = _quotas(ClientQuotaRecord(entity=(("client-id", None),), key="controller_mutation_rate", value=1.0))
    mutations = ControllerMutationQuotaManager(lambda: image, window_num=11, window_size_ms=1000)
    for i in range(1000):
        mutations.record("u", f"client-{i}", 1, clock.monotonic_ms())
    mutations.record("u", "greedy", 100, clock.monotonic_ms())  # 89 tokens short at 1/s
    assert len(mutations) == 1001
    clock.advance(61_000)
    assert mutations.exhausted_ms("u", "greedy", clock.monotonic_ms()) == 28_000  # still owed: kept
    assert len(mutations) == 1
    clock.advance(60_000)
    assert mutations.exhausted_ms("u", "other", clock.monotonic_ms()) == 0
    assert len(mutations) == 1  # greedy refilled and was forgotten; "other" is new and full


def test_a_strict_request_quota_refuses_once_below_zero_and_a_permissive_one_only_records() -> None:
    """Kafka's Strict/PermissiveControllerMutationQuota: a change that takes the bucket below zero
    is allowed, the next one of a strict request is refused; a permissive one records and throttles."""
    clock = ManualClock()
    image = _quotas(ClientQuotaRecord(entity=(("user", "alice"),), key="controller_mutation_rate", value=1.0))
    manager = ControllerMutationQuotaManager(lambda: image, window_num=11, window_size_ms=1000, clock=clock)
    strict = manager.for_request("User:alice", "app", strict=True)
    strict.apply(20)  # 11 tokens: allowed, 9 short
    assert strict.throttle_time_ms() == 9_000
    with pytest.raises(kerr.ThrottlingQuotaExceededError):
        strict.apply(1)
    manager.for_request("User:alice", "app", strict=False).apply(5)
    assert manager.for_request("User:alice", "app", strict=True).throttle_time_ms() == 14_000
    manager.for_request("User:bob", "app", strict=True).apply(1000)  # no quota for bob
    clock.advance(14_000)
    manager.for_request("User:alice", "app", strict=True).apply(1)  # paid back


def test_a_mutation_resolves_the_clients_quota_once_per_topic() -> None:
    """`RequestMutationQuota.apply` looks the client's bucket up once (it looked it up twice: once
    to decide, once to record), with the same outcome."""
    clock = ManualClock()
    image = _quotas(ClientQuotaRecord(entity=(("user", "alice"),), key="controller_mutation_rate", value=1.0))
    reads = [0]

    def read_image():  # type: ignore[no-untyped-def]
        reads[0] += 1
        return image

    manager = ControllerMutationQuotaManager(read_image, window_num=11, window_size_ms=1000, clock=clock)
    quota = manager.for_request("User:alice", "app", strict=True)
    quota.apply(20)
    assert reads[0] == 1
    with pytest.raises(kerr.ThrottlingQuotaExceededError):
        quota.apply(1)
    assert reads[0] == 2 and quota.throttle_time_ms() == 9_000


def test_quota_types_are_enabled_by_the_keys_some_entity_sets_and_stale_sensors_expire_at_a_scrape() -> None:
    """Kafka's quotasEnabled: a manager measures nothing while no entity sets its key; since then
    nothing calls `record`, a scrape forgets the sensors of a quota removed an hour ago."""
    clock = ManualClock()
    image = _quotas(ClientQuotaRecord(entity=(("user", "alice"),), key="producer_byte_rate", value=1000))
    current = [image]
    managers = QuotaManagers(lambda: current[0], clock=clock)
    assert image.keys == {"producer_byte_rate"}
    assert managers.enabled and managers.produce.enabled
    assert not managers.fetch.enabled and not managers.request.enabled
    managers.produce.record("alice", "app", 5000, clock.monotonic_ms())
    assert [s.user for s in managers.samples(clock.monotonic_ms())] == ["alice"]
    current[0] = _quotas()
    assert not managers.enabled and current[0].keys == frozenset()
    clock.advance(3_600_001 + 60_000)
    assert list(managers.samples(clock.monotonic_ms())) == []
