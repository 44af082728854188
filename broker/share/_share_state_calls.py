"""The share coordinator's APIs as calls between brokers (proto/share.proto): `ShareStateService`
serves them on the broker that leads a ``__share_group_state`` partition (ClusterAction on the
cluster, as Kafka's KafkaApis asks of InitializeShareGroupState ... ReadShareGroupStateSummary),
and the conversions between the protobuf messages and the shard's request and answer values.

The API of a call is named by the RPC (one of `STATE_APIS`); each partition of a request is
answered in the request's order.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeAlias

from kraftlog.broker.share._share_coordinator_shell import ShareCoordinator, StateRequest
from kraftlog.broker.share._share_shard_types import (
    DeleteStateRequest,
    InitializeStateRequest,
    ReadStateRequest,
    ReadStateSummaryRequest,
    ShareStateResult,
    WriteStateRequest,
)
from kraftlog.broker.share._share_types import StateBatch
from kraftlog.common import errors as kerr
from kraftlog.common.security import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType, current_request
from kraftlog.proto import errors_pb2, share_pb2

__all__ = [
    "STATE_APIS",
    "ShareStateService",
    "request_from_pb",
    "request_to_pb",
    "result_from_pb",
    "result_to_pb",
]

#: the share coordinator's APIs, by the name of their RPC
STATE_APIS = (
    "InitializeShareGroupState",
    "ReadShareGroupState",
    "WriteShareGroupState",
    "DeleteShareGroupState",
    "ReadShareGroupStateSummary",
)

AnyStateRequest: TypeAlias = StateRequest | ReadStateSummaryRequest


def request_to_pb(req: AnyStateRequest) -> Any:
    """One partition of a request, for the wire (the fields its API does not take left at their
    defaults)."""
    out = share_pb2.SharePartitionState(group_id=req.group_id, topic_id=req.topic_id, partition=req.partition)
    if isinstance(req, InitializeStateRequest):
        out.state_epoch, out.start_offset = req.state_epoch, req.start_offset
    elif isinstance(req, ReadStateRequest | ReadStateSummaryRequest):
        out.leader_epoch = req.leader_epoch
    elif isinstance(req, WriteStateRequest):
        out.state_epoch, out.leader_epoch, out.start_offset = req.state_epoch, req.leader_epoch, req.start_offset
        out.delivery_complete_count = req.delivery_complete_count
        out.state_batches.extend(share_pb2.ShareStateBatch(**b._asdict()) for b in req.state_batches)
    return out


def request_from_pb(api: str, p: Any) -> AnyStateRequest:
    """The shard's request of API ``api`` for one partition of a request."""
    if api == "InitializeShareGroupState":
        return InitializeStateRequest(p.group_id, p.topic_id, p.partition, p.state_epoch, p.start_offset)
    if api == "ReadShareGroupState":
        return ReadStateRequest(p.group_id, p.topic_id, p.partition, p.leader_epoch)
    if api == "WriteShareGroupState":
        batches = tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
        )
        return WriteStateRequest(
            p.group_id,
            p.topic_id,
            p.partition,
            p.state_epoch,
            p.leader_epoch,
            p.start_offset,
            batches,
            p.delivery_complete_count,
        )
    if api == "DeleteShareGroupState":
        return DeleteStateRequest(p.group_id, p.topic_id, p.partition)
    if api == "ReadShareGroupStateSummary":
        return ReadStateSummaryRequest(p.group_id, p.topic_id, p.partition, p.leader_epoch)
    raise kerr.InvalidRequestError(f"not a share coordinator API: {api}")


def _error_pb(error: type[kerr.KafkaError] | None, message: str) -> Any:
    if error is None:
        return errors_pb2.Error(code=0, name="NONE")
    return errors_pb2.Error(code=error.error_code, name=error.error_name, message=message)


def result_to_pb(r: ShareStateResult) -> Any:
    return share_pb2.ShareStateResult(
        topic_id=r.topic_id,
        partition=r.partition,
        error=_error_pb(r.error, r.message),
        state_epoch=r.state_epoch,
        leader_epoch=r.leader_epoch,
        start_offset=r.start_offset,
        delivery_complete_count=r.delivery_complete_count,
        state_batches=[share_pb2.ShareStateBatch(**b._asdict()) for b in r.state_batches],
    )


def result_from_pb(p: Any) -> ShareStateResult:
    error = None if p.error.code == 0 else kerr.error_for_code(p.error.code)
    return ShareStateResult(
        p.topic_id,
        p.partition,
        error,
        p.error.message,
        p.state_epoch,
        p.leader_epoch,
        p.start_offset,
        p.delivery_complete_count,
        tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches),
    )


class ShareStateService:
    """The share coordinator's APIs on this broker's shards (see the module docstring)."""

    def __init__(self, coordinator: ShareCoordinator) -> None:
        self.coordinator = coordinator

    async def call(self, api: str, request: Any) -> Any:
        """Serve ``api`` for every partition of ``request`` (a ShareStateRequest)."""
        if not current_request().authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            denied = kerr.ClusterAuthorizationFailedError
            return share_pb2.ShareStateResponse(
                results=[
                    result_to_pb(ShareStateResult(p.topic_id, p.partition, denied, denied.error_name))
                    for p in request.partitions
                ]
            )
        results = await asyncio.gather(*(self.one(request_from_pb(api, p)) for p in request.partitions))
        return share_pb2.ShareStateResponse(results=[result_to_pb(r) for r in results])

    async def one(self, req: AnyStateRequest) -> ShareStateResult:
        """One partition's call on this broker's shard."""
        if isinstance(req, ReadStateSummaryRequest):
            return self.coordinator.read_summary(req)
        return await self.coordinator.handle(req)
