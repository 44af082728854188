"""Prometheus metrics of the broker role: Kafka's BrokerTopicMetrics and ReplicaManager gauges.

Two kinds, chosen by cost:

- `BrokerTopicMetrics` holds the counters that the data path bumps (bytes and messages in per topic,
  bytes out per topic, replication bytes, ISR shrinks and expansions). The hot path pays one
  ``inc`` per topic per request, never one per record, and the per-topic children are cached so a
  request does not go through the label lookup (a lock and a tuple build) each time.
- `BrokerStateCollector` computes every gauge when Prometheus scrapes (partition and leader counts,
  under-replicated and under-min-ISR partitions, offline partitions, metadata offset and lag)
  instead of keeping them up to date on every metadata change or ISR update: scrapes are rare,
  changes are not.

Scrapes run on the HTTP server's thread while the event loop changes the state, so the collector
only reads: it copies the partition map (one C-level copy, atomic under the GIL), reads immutable
tuples from each partition, and reads the follower's image, which is immutable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kraftlog.metadata_log import MetadataImage

__all__ = ["BrokerTopicMetrics", "BrokerStateCollector"]

_Children = tuple[Any, Any, Any]  # bytes in, messages in, bytes out children of one topic


class BrokerTopicMetrics:
    """The broker's counters, registered in ``registry`` (a private one when None: a replica
    manager always has somewhere to count, and a node that serves metrics passes its own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.bytes_in = Counter(
            "kraftlog_broker_topic_bytes_in",
            "Bytes appended by producers to partitions this broker leads "
            "(Kafka's BytesInPerSec); replication is counted apart.",
            ["topic"],
            registry=r,
        )
        self.messages_in = Counter(
            "kraftlog_broker_topic_messages_in",
            "Records appended by producers to partitions this broker leads (Kafka's MessagesInPerSec).",
            ["topic"],
            registry=r,
        )
        self.bytes_out = Counter(
            "kraftlog_broker_topic_bytes_out",
            "Record bytes returned to consumers by Fetch (Kafka's BytesOutPerSec); replication is counted apart.",
            ["topic"],
            registry=r,
        )
        self.replication_bytes_in = Counter(
            "kraftlog_broker_replication_bytes_in",
            "Record bytes this broker appended as a follower (Kafka's ReplicationBytesInPerSec).",
            registry=r,
        )
        self.replication_bytes_out = Counter(
            "kraftlog_broker_replication_bytes_out",
            "Record bytes returned to follower fetches (Kafka's ReplicationBytesOutPerSec).",
            registry=r,
        )
        self.isr_shrinks = Counter(
            "kraftlog_broker_isr_shrinks",
            "ISR shrinks this broker proposed as leader and the controller committed (Kafka's IsrShrinksPerSec).",
            registry=r,
        )
        self.isr_expands = Counter(
            "kraftlog_broker_isr_expands",
            "ISR expansions this broker proposed as leader and the controller committed (Kafka's IsrExpandsPerSec).",
            registry=r,
        )
        self._topics: dict[str, _Children] = {}

    def _children(self, topic: str) -> _Children:
        children = self._topics.get(topic)
        if children is None:
            children = (self.bytes_in.labels(topic), self.messages_in.labels(topic), self.bytes_out.labels(topic))
            self._topics[topic] = children
        return children

    # ------------------------------------------------------------------ the data path

    def record_produce(self, topic: str, num_bytes: int, num_records: int) -> None:
        """One produce request's appends to ``topic`` (all its partitions together)."""
        bytes_in, messages_in, _ = self._children(topic)
        bytes_in.inc(num_bytes)
        messages_in.inc(num_records)

    def record_fetch(self, topic: str, num_bytes: int, *, replica: bool) -> None:
        """One fetch answer's record bytes for ``topic``: to a consumer, or to a follower."""
        if replica:
            self.replication_bytes_out.inc(num_bytes)
        else:
            self._children(topic)[2].inc(num_bytes)

    def record_replication_in(self, num_bytes: int) -> None:
        self.replication_bytes_in.inc(num_bytes)

    def record_isr_change(self, old_isr: tuple[int, ...], new_isr: tuple[int, ...]) -> None:
        """A committed ISR change of a partition this broker leads (one proposal: shrink or expand)."""
        old, new = set(old_isr), set(new_isr)
        if old - new:
            self.isr_shrinks.inc()
        if new - old:
            self.isr_expands.inc()

    def remove_topic(self, topic: str) -> None:
        """Drop a deleted topic's series, as Kafka removes its topic metrics (a re-created topic of
        the same name starts again from zero, which Prometheus reads as a counter reset)."""
        if self._topics.pop(topic, None) is None:
            return
        for counter in (self.bytes_in, self.messages_in, self.bytes_out):
            try:
                counter.remove(topic)
            except KeyError:
                pass


class BrokerStateCollector(Collector):
    """Gauges of one broker, computed at scrape time.

    ``partitions()`` returns the hosted replicas (a snapshot: `ReplicaManager.partitions`, or empty
    before the replica manager exists); ``image()`` the broker's last applied metadata image;
    ``metadata_high_watermark()`` the quorum's last committed offset as the broker knows it, from
    FetchMetadata batches and heartbeat answers (-1 before either).
    """

    def __init__(
        self,
        partitions: Callable[[], dict[Any, Any]],
        image: Callable[[], MetadataImage],
        metadata_high_watermark: Callable[[], int],
    ) -> None:
        self._partitions = partitions
        self._image = image
        self._metadata_hw = metadata_high_watermark
        self._offline: tuple[MetadataImage, int] | None = None

    def _offline_partitions(self, image: MetadataImage) -> int:
        # a big cluster's image changes less often than Prometheus scrapes it: count it once
        cached = self._offline
        if cached is not None and cached[0] is image:
            return cached[1]
        offline = image.topics.offline_partition_count
        self._offline = (image, offline)
        return offline

    def collect(self) -> Iterator[Metric]:
        hosted = leaders = under_replicated = under_min_isr = 0
        for part in list(self._partitions().values()):
            if part.stopped:
                continue
            hosted += 1
            if not part.is_leader:
                continue
            leaders += 1
            isr = part.isr
            if len(isr) < len(part.replicas):
                under_replicated += 1
            if len(isr) < part.min_insync_replicas:
                under_min_isr += 1
        image = self._image()
        offline = self._offline_partitions(image)
        applied = image.offset
        hw = self._metadata_hw()
        yield _gauge(
            "kraftlog_broker_partitions", "Partition replicas hosted on this broker (Kafka's PartitionCount).", hosted
        )
        yield _gauge(
            "kraftlog_broker_leader_partitions", "Partitions this broker leads (Kafka's LeaderCount).", leaders
        )
        yield _gauge(
            "kraftlog_broker_under_replicated_partitions",
            "Partitions this broker leads whose ISR is "
            "smaller than the replica set (Kafka's UnderReplicatedPartitions).",
            under_replicated,
        )
        yield _gauge(
            "kraftlog_broker_under_min_isr_partitions",
            "Partitions this broker leads whose ISR is "
            "smaller than min.insync.replicas (Kafka's UnderMinIsrPartitionCount).",
            under_min_isr,
        )
        yield _gauge(
            "kraftlog_broker_offline_partitions",
            "Partitions without a leader in this broker's "
            "metadata image (the controller's OfflinePartitionsCount as this broker sees it).",
            offline,
        )
        yield _gauge(
            "kraftlog_broker_metadata_last_applied_offset",
            "Offset of the last metadata record this broker applied (-1 before any).",
            applied,
        )
        yield _gauge(
            "kraftlog_broker_metadata_lag",
            "Metadata records committed by the controllers but not "
            "yet applied here: the highest committed offset the broker learned (FetchMetadata "
            "batches, heartbeat answers) minus the last applied offset.",
            max(0, hw - applied) if hw >= 0 else 0,
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
