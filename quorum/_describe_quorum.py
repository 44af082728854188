"""DescribeQuorum (Kafka API key 55) on the controllers' gRPC admin service: the Raft layer's view
(`quorum.raft.MetadataQuorum.status`) in Kafka's shape.

As Kafka's leader answers it (``LeaderState.describeQuorum``): every voter and every observer as a
``ReplicaState`` -- replica id, directory id (KIP-853), log end offset, last fetch and last caught-up
times (-1 when unknown) -- and an endpoint for each voter only (Kafka's ``Nodes`` lists voters'
listeners; an observer's is not known to the quorum). Observers are the controllers outside the
voter set that replicate from this leader (issue 26: formatted with ``--no-initial-controllers``,
not added yet); brokers read the metadata log over FetchMetadata, not as Raft replicas, so they are
not listed. Only the leader knows its followers' and observers' progress: the service answers on
the active controller.
"""

from __future__ import annotations

from typing import Any

import kraftlog.quorum.controller as ctl
from kraftlog.proto import admin_pb2

__all__ = ["describe_quorum"]


def _replica(status: Any, directory_id: str, endpoint: tuple[str, int] | None) -> Any:
    return admin_pb2.DescribeQuorumResponse.Replica(
        replica_id=status.voter_id,
        log_end_offset=status.log_end_offset,
        last_fetch_timestamp_ms=status.last_fetch_timestamp_ms,
        last_caught_up_timestamp_ms=status.last_caught_up_timestamp_ms,
        replica_directory_id=directory_id,
        endpoint=f"{endpoint[0]}:{endpoint[1]}" if endpoint is not None else "",
    )


def describe_quorum(server: Any) -> admin_pb2.DescribeQuorumResponse:
    """The DescribeQuorumResponse of ``server`` (a `quorum.ControllerServer` with a running quorum)."""
    quorum = server.quorum
    status = quorum.status()
    endpoints = server.voter_endpoints()
    directories = dict(server.voter_directory_ids)
    if server.kraft_version >= 1 and hasattr(quorum, "voters"):
        directories.update({vid: v.directory_id for vid, v in quorum.voters().items() if v.directory_id})
    voters = [_replica(v, directories.get(v.voter_id, ""), endpoints.get(v.voter_id)) for v in status.voters]
    observers = [_replica(o, getattr(o, "directory_id", None) or "", None) for o in getattr(status, "observers", ())]
    return admin_pb2.DescribeQuorumResponse(
        error=ctl.error_pb(),
        leader_id=status.leader_id if status.leader_id is not None else -1,
        leader_epoch=status.epoch,
        high_watermark=status.committed_offset,
        voters=voters,
        observers=observers,
        controller=server.hint(),
        kraft_version=server.kraft_version,
    )
