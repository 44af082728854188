"""Per quota entity gauges (Kafka's ``Produce``/``Fetch``/``Request`` quota metrics, tagged by user
and client-id), computed at scrape time from the quota managers' sensors.

- ``kraftlog_quota_byte_rate{quota_type, user, client_id}``: bytes per second over the quota
  window (Kafka's ``byte-rate``); for ``Request`` the percentage of one second spent (``request-time``).
- ``kraftlog_quota_throttle_time_ms{...}``: average throttle time given over the window
  (Kafka's ``throttle-time``).
- ``kraftlog_quota_limit{...}``: the quota that applies to the entity.

Only clients under a quota are tracked; tags a quota does not split by are ``""``, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kraftlog.broker.quota._quota_manager import QuotaManagers

__all__ = ["QuotaCollector"]

_LABELS = ["quota_type", "user", "client_id"]


class QuotaCollector(Collector):
    """The quota gauges of one broker; ``now_ms`` is the clock the managers record with."""

    def __init__(self, managers: QuotaManagers, now_ms: Callable[[], int]) -> None:
        self._managers = managers
        self._now_ms = now_ms

    def collect(self) -> Iterator[Metric]:
        rate = GaugeMetricFamily(
            "kraftlog_quota_byte_rate",
            "Rate of a quota entity over the quota window: bytes/s (Produce, Fetch), % of a second (Request).",
            labels=_LABELS,
        )
        throttle = GaugeMetricFamily(
            "kraftlog_quota_throttle_time_ms",
            "Average throttle time given to a quota entity over the quota window (Kafka's throttle-time).",
            labels=_LABELS,
        )
        limit = GaugeMetricFamily("kraftlog_quota_limit", "The quota that applies to the entity.", labels=_LABELS)
        for s in self._managers.samples(self._now_ms()):
            labels = [s.quota_type, s.user, s.client_id]
            rate.add_metric(labels, s.rate)
            throttle.add_metric(labels, s.throttle_time_ms)
            limit.add_metric(labels, s.quota)
        yield rate
        yield throttle
        yield limit
