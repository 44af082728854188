"""The wire form of a Fetch's results (`fetch_response`) and the release of their zero-copy file
regions (`close_regions`): the gRPC Fetch of `ReplicaRequests` answers the first; the Kafka
listener, which writes its own answer, closes regions too.
"""

from __future__ import annotations

from kraftlog.broker.replica._partition import error_pb
from kraftlog.broker.replica._replica_registry import PartitionRegistry
from kraftlog.broker.replica._replica_types import LEADER_HINT_CODES, FetchResult
from kraftlog.proto import broker_pb2

__all__ = ["close_regions", "fetch_response"]


def close_regions(results: list[FetchResult]) -> None:
    """Close the file regions of zero-copy reads (after they were sent, or when they are dropped)."""
    for r in results:
        if r.read is not None and r.read.region is not None:
            r.read.region.close()


def fetch_response(results: list[FetchResult], registry: PartitionRegistry) -> broker_pb2.FetchResponse:
    """The FetchResponse of ``results`` in their order, grouped by topic: a read's records, marks and
    aborted transactions; an error with the partition's offsets where it is still here and, for
    the errors that name a new leader, that leader and its endpoint (KIP-951)."""
    R = broker_pb2.FetchResponse
    resp = R(error=error_pb())
    by_topic: dict[str, broker_pb2.FetchResponse.FetchableTopicResponse] = {}
    hinted: set[int] = set()
    for r in results:
        tr = by_topic.get(r.topic)
        if tr is None:
            tr = resp.responses.add(topic=r.topic)
            by_topic[r.topic] = tr
        pd = tr.partitions.add(partition_index=r.partition, preferred_read_replica=-1)
        if r.read is not None:
            rd = r.read
            pd.preferred_read_replica = rd.preferred_read_replica
            pd.error.CopyFrom(error_pb())
            pd.high_watermark = rd.high_watermark
            pd.last_stable_offset = rd.last_stable_offset if rd.last_stable_offset >= 0 else rd.high_watermark
            pd.log_start_offset = rd.log_start_offset
            pd.records = rd.records
            for pid, first in rd.aborted:
                pd.aborted_transactions.add(producer_id=pid, first_offset=first)
            if rd.diverging_epoch is not None:
                pd.diverging_epoch.CopyFrom(
                    broker_pb2.EpochEndOffset(epoch=rd.diverging_epoch[0], end_offset=rd.diverging_epoch[1])
                )
            continue
        assert r.error is not None
        err = registry.error(r.error, "fetch")
        pd.error.CopyFrom(err)
        if r.part is not None and not r.part.stopped:
            log = r.part.log
            pd.high_watermark = log.high_watermark
            pd.last_stable_offset = log.last_stable_offset
            pd.log_start_offset = log.log_start_offset
        else:
            pd.high_watermark = pd.last_stable_offset = pd.log_start_offset = -1
        if err.code in LEADER_HINT_CODES:
            hint = registry.leader_hint(r.topic, r.partition)
            leader, epoch = hint if hint is not None else (-1, -1)
            pd.current_leader.CopyFrom(broker_pb2.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch))
            if leader >= 0:
                hinted.add(leader)
    if hinted:
        resp.node_endpoints.extend(registry.node_endpoints(hinted))
    return resp
