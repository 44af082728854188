"""The gRPC front ends of the coordinators: `GroupServicer`, `TxnServicer` and
`ShareCoordinatorServicer` adapt gRPC's calling convention (request, context) to the broker's one
`GroupService`, `TxnService` and `ShareStateService`, which the
Kafka listener's handlers call as well. They add nothing but what only gRPC knows: the listener
name FindCoordinator answers with, and the client's address from the call's peer string.
Authorization happens in the services, under the context the node's server interceptor sets.
"""

from __future__ import annotations

from typing import Any

from kraftlog.broker.groups import GroupService, JoinRequest, Protocol, client_host_of
from kraftlog.broker.share import ShareStateService
from kraftlog.broker.txn import TxnService, TxnVerifyClient, txn_offsets_refused, verify_txn_offsets
from kraftlog.common.security import AclOperation, ResourceType, current_request
from kraftlog.proto import group_pb2_grpc, share_pb2_grpc, txn_pb2_grpc

__all__ = ["GroupServicer", "ShareCoordinatorServicer", "TxnServicer"]


def _client_host(context: Any) -> str:
    return client_host_of(str(context.peer()) if context is not None else "")


class GroupServicer(group_pb2_grpc.GroupServiceServicer):
    """GroupService over gRPC; FindCoordinator names endpoints on ``listener`` (or a broker's first
    endpoint, when it has none of that name)."""

    def __init__(self, service: GroupService, listener: str, txn_verify: TxnVerifyClient | None = None) -> None:
        self.service = service
        self.listener = listener
        self.txn_verify = txn_verify  # with transaction.partition.verification.enable

    async def FindCoordinator(self, request: Any, context: Any) -> Any:
        return await self.service.FindCoordinator(request, listener=self.listener, any_endpoint=True)

    async def JoinGroup(self, request: Any, context: Any) -> Any:
        req = JoinRequest(
            request.group_id,
            request.member_id,
            request.protocol_type,
            tuple(Protocol(p.name, p.metadata) for p in request.protocols),
            request.session_timeout_ms,
            request.rebalance_timeout_ms,
            group_instance_id=request.group_instance_id if request.HasField("group_instance_id") else None,
            client_id=request.client_id,
            client_host=_client_host(context),
        )
        return await self.service.join(req)

    async def SyncGroup(self, request: Any, context: Any) -> Any:
        return await self.service.SyncGroup(request)

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        return await self.service.Heartbeat(request)

    async def LeaveGroup(self, request: Any, context: Any) -> Any:
        return await self.service.LeaveGroup(request)

    async def OffsetCommit(self, request: Any, context: Any) -> Any:
        return await self.service.OffsetCommit(request)

    async def OffsetFetch(self, request: Any, context: Any) -> Any:
        return await self.service.OffsetFetch(request)

    async def ListGroups(self, request: Any, context: Any) -> Any:
        return await self.service.ListGroups(request)

    async def DescribeGroups(self, request: Any, context: Any) -> Any:
        return await self.service.DescribeGroups(request)

    async def DeleteGroups(self, request: Any, context: Any) -> Any:
        return await self.service.DeleteGroups(request)

    async def OffsetDelete(self, request: Any, context: Any) -> Any:
        return await self.service.OffsetDelete(request)

    async def ConsumerGroupHeartbeat(self, request: Any, context: Any) -> Any:
        return await self.service.ConsumerGroupHeartbeat(request, client_host=_client_host(context))

    async def ConsumerGroupDescribe(self, request: Any, context: Any) -> Any:
        return await self.service.ConsumerGroupDescribe(request)

    async def TxnOffsetCommit(self, request: Any, context: Any) -> Any:
        """The group's offsets partition must be in the producer's transaction (KIP-890, see
        `verify_txn_offsets`)."""
        if self.txn_verify is not None and current_request().authorize(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        ):  # not authorized: the service refuses it, unasked
            error = await verify_txn_offsets(self.txn_verify, self.service, request, add=False)
            if error is not None:
                return txn_offsets_refused(request, error)
        return await self.service.TxnOffsetCommit(request)

    async def ShareGroupHeartbeat(self, request: Any, context: Any) -> Any:
        return await self.service.share.ShareGroupHeartbeat(request, client_host=_client_host(context))

    async def ShareGroupDescribe(self, request: Any, context: Any) -> Any:
        return await self.service.share.ShareGroupDescribe(request)

    async def DescribeShareGroupOffsets(self, request: Any, context: Any) -> Any:
        return await self.service.share.DescribeShareGroupOffsets(request)

    async def AlterShareGroupOffsets(self, request: Any, context: Any) -> Any:
        return await self.service.share.AlterShareGroupOffsets(request)

    async def DeleteShareGroupOffsets(self, request: Any, context: Any) -> Any:
        return await self.service.share.DeleteShareGroupOffsets(request)


class TxnServicer(txn_pb2_grpc.TxnServiceServicer):
    """TxnService over gRPC."""

    def __init__(self, service: TxnService) -> None:
        self.service = service

    async def AddPartitionsToTxn(self, request: Any, context: Any) -> Any:
        return await self.service.AddPartitionsToTxn(request)

    async def AddOffsetsToTxn(self, request: Any, context: Any) -> Any:
        return await self.service.AddOffsetsToTxn(request)

    async def EndTxn(self, request: Any, context: Any) -> Any:
        return await self.service.EndTxn(request)

    async def ListTransactions(self, request: Any, context: Any) -> Any:
        return await self.service.ListTransactions(request)

    async def DescribeTransactions(self, request: Any, context: Any) -> Any:
        return await self.service.DescribeTransactions(request)


class ShareCoordinatorServicer(share_pb2_grpc.ShareCoordinatorServiceServicer):
    """The share coordinator's APIs (83-87) over gRPC, between brokers."""

    def __init__(self, service: ShareStateService) -> None:
        self.service = service

    async def InitializeShareGroupState(self, request: Any, context: Any) -> Any:
        return await self.service.call("InitializeShareGroupState", request)

    async def ReadShareGroupState(self, request: Any, context: Any) -> Any:
        return await self.service.call("ReadShareGroupState", request)

    async def WriteShareGroupState(self, request: Any, context: Any) -> Any:
        return await self.service.call("WriteShareGroupState", request)

    async def DeleteShareGroupState(self, request: Any, context: Any) -> Any:
        return await self.service.call("DeleteShareGroupState", request)

    async def ReadShareGroupStateSummary(self, request: Any, context: Any) -> Any:
        return await self.service.call("ReadShareGroupStateSummary", request)
