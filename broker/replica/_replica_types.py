"""What the replica manager waits on: the delayed produce, fetch and delete-records operations of
its purgatories, and what a fetch hands out (see `broker.replica._replica_manager`; the results of
applying a metadata delta are in `_replica_changes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from kraftlog.broker.replica._partition import Partition, PartitionRead, TopicPartition
from kraftlog.broker.replica._purgatory import DelayedOperation
from kraftlog.common import SYSTEM_CLOCK
from kraftlog.common import errors as kerr
from kraftlog.proto import broker_pb2

if TYPE_CHECKING:
    from kraftlog.broker.replica._replica_registry import PartitionRegistry

_log = structlog.get_logger(__name__)


_LONG_MAX = 2**63 - 1


LEADER_HINT_CODES = frozenset({kerr.NotLeaderOrFollowerError.error_code, kerr.FencedLeaderEpochError.error_code})


def _wall_clock_ms() -> int:
    return SYSTEM_CLOCK.wall_ms()


@dataclass(slots=True)
class _ProduceStatus:
    tp: TopicPartition
    partition: Partition
    required_offset: int
    leader_epoch: int
    # where the caller puts the answer (a produce's, or a WriteTxnMarkers partition's)
    response: broker_pb2.ProduceResponse.PartitionResponse | broker_pb2.WriteTxnMarkersResponse.Partition
    pending: bool = True
    error: type[kerr.KafkaError] | None = None


class DelayedProduce(DelayedOperation):
    """acks=all: done when, for every partition, the HW passed the batch or an error is known
    (no longer leader of the append's epoch, ISR below min.insync after the append); on timeout
    the pending partitions get REQUEST_TIMED_OUT."""

    def __init__(self, delay_ms: int, statuses: list[_ProduceStatus], registry: PartitionRegistry) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self._registry = registry

    def try_complete(self) -> bool:
        pending = False
        for st in self.statuses:
            if not st.pending:
                continue
            err: type[kerr.KafkaError] | None
            part = self._registry.get(st.tp)
            if part is not st.partition:
                done, err = True, kerr.NotLeaderOrFollowerError
            else:
                done, err = part.check_enough_replicas_reach_offset(st.required_offset, st.leader_epoch)
            if done:
                st.pending = False
                st.error = err
            else:
                pending = True
        if pending:
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for st in self.statuses:
            if st.pending:
                st.pending = False
                st.error = kerr.RequestTimedOutError


class DelayedFetch(DelayedOperation):
    """A long poll: done when the readable bytes reach ``min_bytes``, or when a partition's
    situation changed so that the answer is an error (leadership, epoch, offset out of range);
    on timeout it answers with what there is."""

    def __init__(
        self,
        delay_ms: int,
        req: broker_pb2.FetchRequest,
        registry: PartitionRegistry,
        parts: dict[TopicPartition, Partition],
    ) -> None:
        super().__init__(delay_ms)
        self.req = req
        self._registry = registry
        self._parts = parts

    def try_complete(self) -> bool:
        req = self.req
        is_replica = req.replica_id >= 0
        only_leader = is_replica or not req.fetch_from_follower  # a follower serves consumers too (KIP-392)
        min_bytes = req.min_bytes
        accumulated = 0
        for t in req.topics:
            for p in t.partitions:
                tp = (t.topic, p.partition)
                part = self._registry.get(tp)
                if part is None or part is not self._parts.get(tp) or (only_leader and not part.is_leader):
                    return self.force_complete()
                if 0 <= p.current_leader_epoch != part.leader_epoch:
                    return self.force_complete()
                log = part.log
                if p.fetch_offset < log.log_start_offset or p.fetch_offset > log.log_end_offset:
                    return self.force_complete()
                if is_replica:
                    end = log.log_end_offset
                else:  # read_committed waits for the last stable offset, as Kafka's DelayedFetch
                    end = log.last_stable_offset if req.isolation_level == 1 else log.high_watermark
                if p.fetch_offset >= end:
                    continue
                if min_bytes <= 1:
                    return self.force_complete()
                pmax = p.partition_max_bytes if p.partition_max_bytes > 0 else min_bytes
                try:
                    info = log.read(p.fetch_offset, pmax, max_offset=None if is_replica else end, min_one_message=True)
                except Exception:
                    return self.force_complete()
                accumulated += len(info.records)
                if accumulated >= min_bytes:
                    return self.force_complete()
        return False


@dataclass(slots=True)
class _DeleteStatus:
    tp: TopicPartition
    partition: Partition
    required_offset: int
    response: broker_pb2.DeleteRecordsResponse.Partition
    pending: bool = True
    error: type[kerr.KafkaError] | None = None


class DelayedDeleteRecords(DelayedOperation):
    """DeleteRecords: done when the low watermark (min log start offset over the leader and the
    ISR followers that reported one) reached the requested offset, for every partition."""

    def __init__(self, delay_ms: int, statuses: list[_DeleteStatus], registry: PartitionRegistry) -> None:
        super().__init__(delay_ms)
        self.statuses = statuses
        self._registry = registry

    def try_complete(self) -> bool:
        pending = False
        for st in self.statuses:
            if not st.pending:
                continue
            part = self._registry.get(st.tp)
            if part is not st.partition or not part.is_leader:
                st.pending, st.error = False, kerr.NotLeaderOrFollowerError
                continue
            low = part.low_watermark()
            st.response.low_watermark = low
            if low >= st.required_offset:
                st.pending = False
            else:
                pending = True
        if pending:
            return False
        return self.force_complete()

    def on_expiration(self) -> None:
        for st in self.statuses:
            if st.pending:
                st.pending, st.error = False, kerr.RequestTimedOutError


@dataclass(slots=True)
class FetchResult:
    topic: str
    partition: int
    read: PartitionRead | None = None
    error: BaseException | None = None
    part: Partition | None = None
