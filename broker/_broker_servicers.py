"""The broker's own gRPC services: BrokerService (produce, fetch, offsets, metadata, producer ids,
markers) over the broker's replica manager and quotas, the Diagnostics echo (the benchmarks'
baseline), and AdminService forwarded to the active controller (KIP-590). Wired by
`kraftlog.broker._server.BrokerServer.add_to_server`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from kraftlog.broker.quota import throttle_grpc_fetch, throttle_grpc_produce
from kraftlog.common.security import AclOperation, current_request
from kraftlog.proto import admin_pb2, admin_pb2_grpc, broker_pb2_grpc, diagnostics_pb2, diagnostics_pb2_grpc

__all__ = ["BrokerCore", "BrokerServicer", "DiagnosticsServicer", "forwarding_admin_service", "maybe_await"]


async def maybe_await(value: Any) -> Any:
    """The value of a replica-manager call that answers at once or later (a coroutine/future)."""
    if asyncio.iscoroutine(value) or isinstance(value, asyncio.Future):
        return await value
    return value


class BrokerCore(Protocol):
    """What BrokerService needs of the broker (`BrokerServer`). Read at each call: the replica
    manager exists only once the broker has started."""

    replicas: Any
    quotas: Any

    async def metadata(self, req: Any) -> Any: ...

    async def init_producer_id(self, req: Any) -> Any: ...


class BrokerServicer(broker_pb2_grpc.BrokerServiceServicer):
    """BrokerService over the broker's replica manager, quota managers, Metadata and InitProducerId."""

    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker

    async def Produce(self, request: Any, context: Any) -> Any:
        response = await self.broker.replicas.produce(request)
        caller = current_request()  # the interceptor read the client id from the call's metadata
        return await throttle_grpc_produce(self.broker.quotas, request, response, caller.principal, caller.client_id)

    async def Fetch(self, request: Any, context: Any) -> Any:
        response = await self.broker.replicas.fetch(request)
        caller = current_request()
        return await throttle_grpc_fetch(self.broker.quotas, request, response, caller.principal, caller.client_id)

    async def ListOffsets(self, request: Any, context: Any) -> Any:
        return await maybe_await(self.broker.replicas.list_offsets(request))

    async def OffsetForLeaderEpoch(self, request: Any, context: Any) -> Any:
        return await maybe_await(self.broker.replicas.offset_for_leader_epoch(request))

    async def Metadata(self, request: Any, context: Any) -> Any:
        return await self.broker.metadata(request)

    async def DeleteRecords(self, request: Any, context: Any) -> Any:
        return await maybe_await(self.broker.replicas.delete_records(request))

    async def InitProducerId(self, request: Any, context: Any) -> Any:
        return await self.broker.init_producer_id(request)

    async def DescribeProducers(self, request: Any, context: Any) -> Any:
        return self.broker.replicas.describe_producers(request)

    async def WriteTxnMarkers(self, request: Any, context: Any) -> Any:
        return await self.broker.replicas.write_txn_markers(request)


class DiagnosticsServicer(diagnostics_pb2_grpc.DiagnosticsServiceServicer):
    """Echo (the gRPC baseline of the benchmarks): Describe on the cluster, like other diagnostics."""

    async def Echo(self, request: Any, context: Any) -> Any:
        current_request().require_cluster(AclOperation.DESCRIBE)
        return diagnostics_pb2.EchoResponse(payload=request.payload)

    async def EchoStream(self, request_iterator: Any, context: Any) -> Any:
        current_request().require_cluster(AclOperation.DESCRIBE)
        async for req in request_iterator:
            yield diagnostics_pb2.EchoResponse(payload=req.payload)


def forwarding_admin_service(channel: Any) -> admin_pb2_grpc.AdminServiceServicer:
    """AdminService on a broker: every call is forwarded to the active controller (Kafka brokers
    forward admin requests the same way since KIP-590)."""
    methods = admin_pb2.DESCRIPTOR.services_by_name["AdminService"].methods

    def make(name: str) -> Callable[..., Any]:
        async def forward(self: Any, request: Any, context: Any) -> Any:
            # admin writes (CreateTopics of many topics) may take longer than a heartbeat
            ctx = current_request()
            ctx.delegate("the active controller")
            return await channel.call("admin", name, request, timeout_s=30.0, attempt_timeout_s=10.0, on_behalf_of=ctx)

        forward.__name__ = name
        return forward

    cls = type(
        "_ForwardingAdminService", (admin_pb2_grpc.AdminServiceServicer,), {m.name: make(m.name) for m in methods}
    )
    servicer: admin_pb2_grpc.AdminServiceServicer = cls()
    return servicer
