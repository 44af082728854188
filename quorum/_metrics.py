"""Prometheus metrics of the controller role, all computed when Prometheus scrapes.

Kafka's KRaft controller metrics (ActiveControllerCount, OfflinePartitionsCount, GlobalTopicCount,
GlobalPartitionCount, FencedBrokerCount, ActiveBrokerCount, LastAppliedRecordOffset,
LastCommittedRecordOffset) and its raft-metrics (current-epoch, current-leader, high-watermark).
Every one of them is a function of state the controller keeps anyway (the committed image and the
quorum's view), so nothing is updated on the write path: the collector reads that state when asked.

Every controller reports the image-derived gauges from its own image (standbys replay the same
committed records), so dashboards take ``max`` across controllers, not ``sum``; only
``kraftlog_controller_active_controllers`` is meant to be summed (exactly 1 in a healthy cluster).

Scrapes run on the HTTP server's thread: the image is immutable and the quorum's view is an
immutable snapshot that pysyncobj's thread replaces, so plain reads are consistent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kraftlog.metadata_log import MetadataImage

__all__ = ["ControllerStateCollector", "cluster_counts"]


def cluster_counts(image: MetadataImage) -> dict[str, int]:
    """Topic, partition and broker counts of an image (what a controller reports about the cluster)."""
    registered = len(image.cluster)
    fenced = len(image.cluster.fenced_broker_ids())
    return {
        "topics": image.topics.topic_count,
        "partitions": image.topics.partition_count,
        "offline": image.topics.offline_partition_count,
        "registered": registered,
        "fenced": fenced,
        "active": registered - fenced,
    }


class ControllerStateCollector(Collector):
    """Gauges of one controller. ``server`` is a `ControllerServer` (or anything with its ``image``,
    ``is_active`` and ``quorum`` attributes; ``quorum`` may be None before the node joined)."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self._cached: tuple[MetadataImage, dict[str, int]] | None = None

    def _counts(self, image: MetadataImage) -> dict[str, int]:
        cached = self._cached
        if cached is not None and cached[0] is image:
            return cached[1]
        counts = cluster_counts(image)
        self._cached = (image, counts)
        return counts

    def collect(self) -> Iterator[Metric]:
        server = self._server
        image: MetadataImage = server.image
        quorum = server.quorum
        counts = self._counts(image)
        if quorum is not None:
            epoch, committed = quorum.epoch, quorum.committed_offset
            leader = quorum.leader_id
        else:
            epoch, committed, leader = -1, -1, None
        yield _gauge(
            "kraftlog_controller_active_controllers",
            "1 on the active controller, 0 on the others "
            "(Kafka's ActiveControllerCount): the sum over the quorum is 1 when healthy.",
            1 if server.is_active else 0,
        )
        yield _gauge(
            "kraftlog_controller_offline_partitions",
            "Partitions without a leader (Kafka's OfflinePartitionsCount).",
            counts["offline"],
        )
        yield _gauge(
            "kraftlog_controller_global_topics",
            "Topics in the metadata image (Kafka's GlobalTopicCount).",
            counts["topics"],
        )
        yield _gauge(
            "kraftlog_controller_global_partitions",
            "Partitions in the metadata image (Kafka's GlobalPartitionCount).",
            counts["partitions"],
        )
        yield _gauge(
            "kraftlog_controller_registered_brokers", "Registered brokers, fenced or not.", counts["registered"]
        )
        yield _gauge(
            "kraftlog_controller_fenced_brokers",
            "Registered brokers that are fenced (Kafka's FencedBrokerCount).",
            counts["fenced"],
        )
        yield _gauge(
            "kraftlog_controller_active_brokers",
            "Registered brokers that are unfenced (Kafka's ActiveBrokerCount).",
            counts["active"],
        )
        yield _gauge(
            "kraftlog_controller_last_applied_record_offset",
            "Offset of the last metadata record "
            "replayed into this controller's image (Kafka's LastAppliedRecordOffset).",
            image.offset,
        )
        yield _gauge(
            "kraftlog_controller_last_committed_record_offset",
            "Offset of the last metadata record "
            "the quorum committed, as this controller knows it (Kafka's LastCommittedRecordOffset).",
            committed,
        )
        yield _gauge(
            "kraftlog_raft_current_epoch",
            "The Raft term, which is the controller epoch (Kafka's raft-metrics current-epoch).",
            epoch,
        )
        yield _gauge(
            "kraftlog_raft_current_leader",
            "Node id of the Raft leader as this controller sees it, "
            "-1 when unknown (Kafka's raft-metrics current-leader).",
            -1 if leader is None else leader,
        )
        yield _gauge(
            "kraftlog_raft_high_watermark",
            "First metadata offset not known to be committed "
            "(committed offset + 1; Kafka's raft-metrics high-watermark).",
            committed + 1,
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
