"""What the parts of the replica manager share, each as an object that owns its state.

`PartitionRegistry` holds the replicas this broker hosts, where each follower fetches from, and the
metadata image they were last reconciled with; it answers "which partition serves this request,
and if none, which error (with which leader hint)". `ReplicaPurgatories` holds the three
purgatories of parked requests and turns partition events into checks of them (it is the
`PartitionListener` every `Partition` reports to).

The metadata applier (`broker.replica._replica_metadata`) is the only writer of the registry; the request
handler (`broker.replica._replica_requests`) and the delayed operations read it. All of them run on the
broker's event loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kraftlog.broker.replica._metrics import BrokerTopicMetrics
from kraftlog.broker.replica._partition import Partition, TopicPartition, error_pb, error_pb_from_exception
from kraftlog.broker.replica._partition_types import PartitionRead
from kraftlog.broker.replica._purgatory import DelayedOperations
from kraftlog.broker.replica._replica_changes import FollowTarget
from kraftlog.broker.replica._replica_selector import ReplicaSelector, find_preferred_read_replica
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import broker_pb2, errors_pb2

__all__ = ["PartitionRegistry", "ReplicaPurgatories"]


class PartitionRegistry:
    """The hosted partitions, the follow targets, and the image they follow. ``client_listener``
    names the endpoint leader hints carry (None: a broker's first endpoint)."""

    def __init__(self, node_id: int, client_listener: str | None, log: Any) -> None:
        self.node_id = node_id
        self.client_listener = client_listener
        self.image = MetadataImage.EMPTY
        self.partitions: dict[TopicPartition, Partition] = {}
        self.follow_targets: dict[TopicPartition, FollowTarget] = {}
        #: replicas whose log dir went offline (Kafka's HostedPartition.Offline), with their topic
        #: ids: no longer served, and metadata changes leave them alone until the next start
        self.offline: dict[TopicPartition, str] = {}
        self._log = log

    def get(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def add(self, part: Partition) -> None:
        """A replica this broker now hosts."""
        self.partitions[part.tp] = part

    def remove(self, tp: TopicPartition) -> Partition | None:
        """A replica this broker no longer hosts (and no longer fetches for); the one removed."""
        self.follow_targets.pop(tp, None)
        return self.partitions.pop(tp, None)

    def set_follow_target(self, tp: TopicPartition, target: FollowTarget | None) -> None:
        """Where the follower of ``tp`` fetches from; None: nowhere (it leads, or has no leader)."""
        if target is None:
            self.follow_targets.pop(tp, None)
        else:
            self.follow_targets[tp] = target

    def leader_hint(self, topic: str, pid: int) -> tuple[int, int] | None:
        """``(leader, leader epoch)`` of a partition in the image, None when it has no such one."""
        t = self.image.topics.get_by_name(topic)
        reg = None if t is None else t.partition(pid)
        if reg is None:
            return None
        return reg.leader, reg.leader_epoch

    def preferred_read(
        self,
        part: Partition,
        selector: ReplicaSelector,
        client_rack: str,
        fetch: broker_pb2.FetchRequest.FetchPartition,
        now_ms: int,
    ) -> PartitionRead | None:
        """KIP-392 on the leader: when ``selector`` sends a consumer at ``fetch.fetch_offset`` to
        a follower, the answer naming it (``preferred_read_replica``, no records, this log's
        offsets), after the request's leader epoch is checked (FENCED_LEADER_EPOCH /
        UNKNOWN_LEADER_EPOCH raised, as Kafka's offset snapshot does); None: read here. Followers
        that are fenced or have no client endpoint are never named (Kafka's replica endpoints)."""
        if not part.is_leader:
            return None
        fetch_offset = fetch.fetch_offset

        def client_endpoint(broker_id: int) -> bool:
            reg = self.image.cluster.broker(broker_id)
            if reg is None or reg.fenced:
                return False
            return bool(reg.endpoint(self.client_listener) if self.client_listener else reg.endpoints)

        def rack_of(broker_id: int) -> str | None:
            reg = self.image.cluster.broker(broker_id)
            return None if reg is None else reg.rack

        log = part.log
        chosen = find_preferred_read_replica(
            selector,
            client_rack=client_rack,
            leader_id=self.node_id,
            leader_log_end_offset=log.log_end_offset,
            candidates=part.read_replica_candidates(fetch_offset, now_ms),
            rack_of=rack_of,
            has_endpoint=client_endpoint,
        )
        if chosen is None:
            return None
        part.check_leader_epoch(fetch.current_leader_epoch, require_leader=False)
        return PartitionRead(
            b"",
            log.high_watermark,
            log.log_start_offset,
            log.log_end_offset,
            last_stable_offset=log.last_stable_offset,
            preferred_read_replica=chosen,
        )

    def node_endpoints(self, broker_ids: Iterable[int]) -> list[broker_pb2.NodeEndpoint]:
        """The endpoints of the brokers a request's leader hints name (on the client listener)."""
        out = []
        for b in sorted(set(broker_ids)):
            reg = self.image.cluster.broker(b)
            if reg is None or not reg.endpoints:
                continue
            ep = (reg.endpoint(self.client_listener) if self.client_listener else None) or reg.endpoints[0]
            out.append(broker_pb2.NodeEndpoint(node_id=b, host=ep.host, port=ep.port, rack=reg.rack or ""))
        return out

    def error(self, exc: BaseException | type[kerr.KafkaError], what: str) -> errors_pb2.Error:
        """A partition's error for an answer; an exception that is no Kafka error is logged."""
        if isinstance(exc, type):
            return error_pb(exc, exc.__doc__.strip().splitlines()[0] if exc.__doc__ else "")
        if getattr(exc, "error_code", None) is None:
            self._log.error("unexpected_error", what=what, error=repr(exc), exc_info=exc)
        return error_pb_from_exception(exc)

    def _lookup_error(self, topic: str, pid: int) -> kerr.KafkaError:
        if (topic, pid) in self.offline:
            return kerr.KafkaStorageError(f"the log dir of {topic}-{pid} on broker {self.node_id} is offline")
        hint = self.leader_hint(topic, pid)
        if hint is None:
            return kerr.UnknownTopicOrPartitionError(f"this server does not host {topic}-{pid}")
        return kerr.NotLeaderOrFollowerError(
            f"broker {self.node_id} is not the leader of {topic}-{pid}", leader_id=hint[0], leader_epoch=hint[1]
        )

    def leader_partition(self, topic: str, pid: int) -> Partition:
        """The partition if this broker leads it; else raises the error a client should see."""
        part = self.partitions.get((topic, pid))
        if part is not None and part.is_leader:
            return part
        raise self._lookup_error(topic, pid)

    def hosted_partition(self, topic: str, pid: int) -> Partition:
        """The partition if this broker hosts a replica of it; else raises the error."""
        part = self.partitions.get((topic, pid))
        if part is None:
            raise self._lookup_error(topic, pid)
        return part


class ReplicaPurgatories:
    """The produce (acks=all), fetch (long polls) and delete-records purgatories, keyed by
    ``(topic, partition)``, and the partition events that complete what waits in them."""

    def __init__(self, metrics: BrokerTopicMetrics) -> None:
        self.metrics = metrics
        self.produce = DelayedOperations("produce")
        self.fetch = DelayedOperations("fetch")
        self.delete_records = DelayedOperations("delete_records")

    def on_high_watermark_advanced(self, tp: TopicPartition) -> None:
        self.produce.check_and_complete(tp)
        self.fetch.check_and_complete(tp)

    def on_records_appended(self, tp: TopicPartition) -> None:
        self.fetch.check_and_complete(tp)

    def on_replica_state_changed(self, tp: TopicPartition) -> None:
        self.delete_records.check_and_complete(tp)

    def on_isr_committed(self, tp: TopicPartition, old_isr: tuple[int, ...], new_isr: tuple[int, ...]) -> None:
        self.metrics.record_isr_change(old_isr, new_isr)

    def check_all(self, tp: TopicPartition) -> None:
        """A leadership change or a removal: every parked request of ``tp`` looks again."""
        self.produce.check_and_complete(tp)
        self.fetch.check_and_complete(tp)
        self.delete_records.check_and_complete(tp)

    def shutdown(self) -> None:
        """Answer every parked produce and delete-records request, then stop all three."""
        for purgatory in (self.produce, self.delete_records):
            for key in list(purgatory._watchers):
                purgatory.check_and_complete(key)
            purgatory.shutdown()
        self.fetch.shutdown()
