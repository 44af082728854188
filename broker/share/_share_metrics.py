"""Share groups' lag metrics on the share-partition leaders (issue 27), beside the consumer groups'
``kraftlog_consumer_group_lag`` (`broker.groups.GroupLag`): a share group has no committed offset,
so its figures are the records of each share partition as the partition's leader holds them.

Per share partition led here (labels ``group``, ``topic``, ``partition``):
``kraftlog_share_group_records_available`` (records the group may still deliver: available in the
in-flight window, and every record past it up to the high watermark), ``..._records_acquired``
(held by a member now, Kafka's in-flight acquired records), ``..._records_archived_total`` (archived
by REJECT or by the delivery count limit since the partition was loaded here) and
``kraftlog_share_group_lag`` (KIP-1226's lag: high watermark minus the start offset minus the
records of the window acknowledged or archived). Per group, ``kraftlog_share_group_dlq_records_total``
and ``..._dlq_failed_total``: records written to, or that could not be written to, the group's
dead-letter topic (KIP-1191) by this broker. Computed when scraped, from memory only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from kraftlog.broker.share._share_partition_manager import SharePartitionManager

__all__ = ["ShareGroupMetrics"]

_LABELS = ["group", "topic", "partition"]


class ShareGroupMetrics:
    """The Prometheus collector of a broker's share partitions (see the module docstring)."""

    def __init__(self, manager: SharePartitionManager) -> None:
        self._manager = manager

    def collect(self) -> Iterator[Metric]:
        available = GaugeMetricFamily(
            "kraftlog_share_group_records_available",
            "Records a share group may still deliver from a partition (available in flight, and past the window up "
            "to the high watermark), on the partition's leader.",
            labels=_LABELS,
        )
        acquired = GaugeMetricFamily(
            "kraftlog_share_group_records_acquired",
            "Records of a partition acquired by a share group's members now, on the partition's leader.",
            labels=_LABELS,
        )
        archived = CounterMetricFamily(
            "kraftlog_share_group_records_archived",
            "Records of a partition a share group archived by REJECT or the delivery count limit, since loaded here.",
            labels=_LABELS,
        )
        lag = GaugeMetricFamily(
            "kraftlog_share_group_lag",
            "High watermark minus the share-partition start offset minus the records delivered in flight (KIP-1226).",
            labels=_LABELS,
        )
        for s in self._manager.share_partition_stats():
            labels = [s.group_id, s.topic, str(s.partition)]
            available.add_metric(labels, s.available)
            acquired.add_metric(labels, s.acquired)
            archived.add_metric(labels, s.archived_total)
            lag.add_metric(labels, s.lag)
        yield available
        yield acquired
        yield archived
        yield lag
        writer = self._manager.dead_letters
        written = CounterMetricFamily(
            "kraftlog_share_group_dlq_records",
            "Records this broker wrote to a share group's dead-letter topic (KIP-1191).",
            labels=["group"],
        )
        failed = CounterMetricFamily(
            "kraftlog_share_group_dlq_failed",
            "Archived records of a share group this broker could not write to its dead-letter topic.",
            labels=["group"],
        )
        if writer is not None:
            for group, n in sorted(writer.written.items()):
                written.add_metric([group], n)
            for group, n in sorted(writer.failed.items()):
                failed.add_metric([group], n)
        yield written
        yield failed

    def describe(self) -> Iterator[Any]:
        return iter(())
