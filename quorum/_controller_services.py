"""The controller's gRPC services (ControllerService, AdminService) over `ControllerServer`, and the
small pieces the server's modules share (see `quorum._server`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import grpc
import structlog

import kraftlog.quorum.controller as ctl
from kraftlog.common import SYSTEM_CLOCK
from kraftlog.common import errors as kerr
from kraftlog.common.security import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    ResourceType,
    current_request,
)
from kraftlog.metadata_log import ZkTreeScope, zk_tree_nodes
from kraftlog.proto import (
    admin_pb2,
    admin_pb2_grpc,
    controller_pb2,
    controller_pb2_grpc,
    errors_pb2,
    quotas_pb2,
    security_pb2,
)
from kraftlog.quorum._kraft_upgrade import upgrade_kraft_version
from kraftlog.quorum.controller import authorize_cluster, authorize_items

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from kraftlog.metadata_log import MetadataImage, MetadataProvenance


class ControllerCore(Protocol):
    """What the services need of the controller they serve (`quorum.ControllerServer` is it).

    A protocol rather than the server's class, so that the services and the server do not import
    each other: the server builds the services, the services only call back through this face.
    """

    node_id: int
    provenance: MetadataProvenance
    image: MetadataImage
    heartbeats: ctl.BrokerHeartbeats
    mutation_quotas: ctl.MutationQuotas | None

    def context(self) -> ctl.ControllerContext: ...

    async def run_write(
        self, handler: Callable[..., tuple[list[Any], Any]], request: Any, response_type: type, *extra: Any
    ) -> Any: ...

    async def run_read(self, fn: Callable[[], Any], response_type: type, request: Any = None) -> Any: ...

    def describe_quorum(self) -> admin_pb2.DescribeQuorumResponse: ...

    async def add_raft_voter(self, request: admin_pb2.AddRaftVoterRequest) -> admin_pb2.AddRaftVoterResponse: ...

    async def remove_raft_voter(
        self, request: admin_pb2.RemoveRaftVoterRequest
    ) -> admin_pb2.RemoveRaftVoterResponse: ...

    async def update_raft_voter(
        self, request: admin_pb2.UpdateRaftVoterRequest
    ) -> admin_pb2.UpdateRaftVoterResponse: ...

    def stream_metadata(
        self, request: controller_pb2.FetchMetadataRequest
    ) -> AsyncIterator[controller_pb2.MetadataBatch]: ...

    def take_snapshot(self) -> Path | None: ...


_TAIL_ENTRIES = 50_000  # committed entries kept in memory for FetchMetadata


_STREAM_BATCH = 2_000  # entries per MetadataBatch


_KEEPALIVE_S = 1.0


_FENCE_CHECK_S = 0.25


_GROUP_COMMIT_MAX = 500  # requests folded into one proposal


_STOP_TASKS_S = 5.0  # cancelled tasks get this long to finish at stop


_log = structlog.get_logger(__name__)


def raft_address(host: str, port: int, offset: int) -> tuple[str, int]:
    """The pysyncobj transport of a voter listens next to its gRPC port."""
    return host, port + offset


def _wall_ms() -> int:
    return SYSTEM_CLOCK.wall_ms()


class MetadataReplayFailure(Exception):
    """A committed metadata record that this controller cannot replay: the node must stop.

    The message names the offset, the record type and the reason; it is what the node's last log
    line and its exit status report.
    """

    def __init__(self, offset: int, record_type: str, reason: str) -> None:
        super().__init__(f"cannot replay the committed metadata record at offset {offset} ({record_type}): {reason}")
        self.offset = offset
        self.record_type = record_type
        self.reason = reason


class _AppliedWatch:
    """Wakes coroutines waiting for the image to move. Lock-free on purpose: waiters hold nothing
    while they wait, so a cancelled waiter (stream closed, shutdown) can never keep another from
    waking up or the stop path from finishing."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def advance(self) -> None:
        event, self._event = self._event, asyncio.Event()
        event.set()

    async def wait(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """True once ``predicate()`` holds, False when ``timeout_s`` passed first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            event = self._event
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                return predicate()
        return True


def _with_error(
    response: Any, err: type[kerr.KafkaError], message: str, hint: controller_pb2.ControllerHint, request: Any = None
) -> Any:
    """Put ``err`` wherever the response type carries errors — the top-level error, or one result
    per item of the request for responses that only have per-item errors — plus the hint."""
    e = errors_pb2.Error(code=err.error_code, name=err.error_name, message=message)
    fields = response.DESCRIPTOR.fields_by_name
    if "error" in fields:
        response.error.CopyFrom(e)
    if "controller" in fields:
        response.controller.CopyFrom(hint)
    if request is None:
        return response
    if isinstance(response, admin_pb2.CreateTopicsResponse):
        response.topics.extend(response.Result(name=t.name, error=e) for t in request.topics)
    elif isinstance(response, admin_pb2.DeleteTopicsResponse):
        response.topics.extend(
            [response.Result(name=n, error=e) for n in request.names]
            + [response.Result(topic_id=i, error=e) for i in request.topic_ids]
        )
    elif isinstance(response, admin_pb2.CreatePartitionsResponse):
        response.results.extend(response.Result(name=t.name, error=e) for t in request.topics)
    elif isinstance(response, admin_pb2.IncrementalAlterConfigsResponse):
        response.results.extend(response.Result(resource=r.resource, error=e) for r in request.resources)
    elif isinstance(response, admin_pb2.DescribeConfigsResponse):
        response.results.extend(response.Result(resource=r.resource, error=e) for r in request.resources)
    elif isinstance(response, admin_pb2.DescribeTopicsResponse):
        response.topics.extend(response.Topic(name=n, error=e) for n in request.names)
    elif isinstance(response, admin_pb2.UpdateFeaturesResponse):
        response.results.extend(response.Result(feature=u.feature, error=e) for u in request.updates)
    return response


def _refused(response_type: type, err: type[kerr.KafkaError], request: Any = None) -> Any:
    """The answer to a request the caller may not make at all."""
    return _with_error(response_type(), err, "not authorized", controller_pb2.ControllerHint(), request)


class _ControllerService(controller_pb2_grpc.ControllerServiceServicer):
    """The brokers' side of the quorum: every call needs ClusterAction on the cluster, which a
    broker's principal has (a super user, or an ACL), so nobody else can register as a broker,
    heartbeat for one, change an ISR or read the metadata log."""

    def __init__(self, server: ControllerCore) -> None:
        self.s = server

    async def RegisterBroker(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.CLUSTER_ACTION):
            return _refused(controller_pb2.RegisterBrokerResponse, err)
        return await self.s.run_write(
            ctl.register_broker, request, controller_pb2.RegisterBrokerResponse, self.s.heartbeats
        )

    async def BrokerHeartbeat(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.CLUSTER_ACTION):
            return _refused(controller_pb2.BrokerHeartbeatResponse, err)
        return await self.s.run_write(
            ctl.broker_heartbeat, request, controller_pb2.BrokerHeartbeatResponse, self.s.heartbeats
        )

    async def AlterPartition(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.CLUSTER_ACTION):
            return _refused(controller_pb2.AlterPartitionResponse, err)
        return await self.s.run_write(ctl.alter_partition, request, controller_pb2.AlterPartitionResponse)

    async def AllocateProducerIds(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.CLUSTER_ACTION):
            return _refused(controller_pb2.AllocateProducerIdsResponse, err)
        return await self.s.run_write(ctl.allocate_producer_ids, request, controller_pb2.AllocateProducerIdsResponse)

    async def FetchMetadata(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.CLUSTER_ACTION):
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{err.error_name}: ClusterAction on the cluster")
        async for batch in self.s.stream_metadata(request):
            yield batch


class _AdminService(admin_pb2_grpc.AdminServiceServicer):
    """Admin requests, authorized with Kafka's rules (`_admin_authz`) before the handler runs."""

    def __init__(self, server: ControllerCore) -> None:
        self.s = server

    async def _items(self, handler: Any, request: Any, response_type: type) -> Any:
        """A write whose items (topics, config resources) are authorized one by one."""
        return await authorize_items(
            self.s.image,
            request,
            response_type,
            lambda allowed: self.s.run_write(handler, allowed, response_type),
            _with_error,
        )

    def _mutation_quota(self) -> ctl.PartitionChangeQuota:
        """The KIP-599 quota of the caller's client (its client id and strictness as the security
        interceptor read them: a forwarding broker names its client's)."""
        quotas = self.s.mutation_quotas
        if quotas is None:
            return ctl.NO_PARTITION_CHANGE_QUOTA
        caller = current_request()
        return quotas.for_request(caller.principal, caller.client_id, strict=caller.strict_quota)

    async def _mutation(self, handler: Any, request: Any, response_type: type) -> Any:
        """A topic creation, deletion or growth: the handler applies the client's mutation quota
        topic by topic (Kafka's applyPartitionChangeQuota), and the answer says how long to wait."""
        quota = self._mutation_quota()

        def decide(image: Any, req: Any, ctx: ctl.ControllerContext, *extra: Any) -> Any:
            ctx.partition_change_quota = quota
            return handler(image, req, ctx, *extra)

        decide.__name__ = handler.__name__
        response = await self._items(decide, request, response_type)
        response.throttle_time_ms = quota.throttle_time_ms()
        return response

    async def CreateTopics(self, request: Any, context: Any) -> Any:
        return await self._mutation(ctl.create_topics, request, admin_pb2.CreateTopicsResponse)

    async def DeleteTopics(self, request: Any, context: Any) -> Any:
        return await self._mutation(ctl.delete_topics, request, admin_pb2.DeleteTopicsResponse)

    async def CreatePartitions(self, request: Any, context: Any) -> Any:
        return await self._mutation(ctl.create_partitions, request, admin_pb2.CreatePartitionsResponse)

    async def ElectLeaders(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER):
            return _refused(admin_pb2.ElectLeadersResponse, err, request)
        return await self.s.run_write(ctl.elect_leaders, request, admin_pb2.ElectLeadersResponse)

    async def AlterPartitionReassignments(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER):
            return _refused(admin_pb2.AlterPartitionReassignmentsResponse, err, request)
        return await self.s.run_write(
            ctl.alter_partition_reassignments, request, admin_pb2.AlterPartitionReassignmentsResponse
        )

    async def ListPartitionReassignments(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.DESCRIBE):
            return _refused(admin_pb2.ListPartitionReassignmentsResponse, err, request)
        return await self.s.run_read(
            lambda: ctl.list_partition_reassignments(self.s.image, request, self.s.context())[1],
            admin_pb2.ListPartitionReassignmentsResponse,
        )

    async def DescribeConfigs(self, request: Any, context: Any) -> Any:
        async def run(allowed: Any) -> Any:
            return await self.s.run_read(
                lambda: ctl.describe_configs(self.s.image, allowed, self.s.context())[1],
                admin_pb2.DescribeConfigsResponse,
                allowed,
            )

        return await authorize_items(self.s.image, request, admin_pb2.DescribeConfigsResponse, run, _with_error)

    async def IncrementalAlterConfigs(self, request: Any, context: Any) -> Any:
        return await self._items(ctl.incremental_alter_configs, request, admin_pb2.IncrementalAlterConfigsResponse)

    async def DescribeCluster(self, request: Any, context: Any) -> Any:
        current_request().public("DescribeCluster answers any authenticated principal, as Kafka's")
        return await self.s.run_read(
            lambda: ctl.describe_cluster(self.s.image, self.s.context(), self.s.node_id, provenance=self.s.provenance),
            admin_pb2.DescribeClusterResponse,
        )

    async def DescribeFeatures(self, request: Any, context: Any) -> Any:
        current_request().public("the finalized features are ApiVersions', which answers anyone")
        return await self.s.run_read(
            lambda: ctl.describe_features(self.s.image, self.s.context()), admin_pb2.DescribeFeaturesResponse
        )

    async def UpdateFeatures(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER):
            return _refused(admin_pb2.UpdateFeaturesResponse, err, request)
        checked = await self.s.run_write(ctl.update_features, request, admin_pb2.UpdateFeaturesResponse)
        # kraft.version is the quorum's: its upgrade is a Raft entry, appended once the checks passed
        return await upgrade_kraft_version(self.s, request, checked)

    async def DescribeQuorum(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.DESCRIBE):
            return _refused(admin_pb2.DescribeQuorumResponse, err)
        return await self.s.run_read(self.s.describe_quorum, admin_pb2.DescribeQuorumResponse)

    async def AddRaftVoter(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER):
            return _refused(admin_pb2.AddRaftVoterResponse, err)
        return await self.s.add_raft_voter(request)

    async def RemoveRaftVoter(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER):
            return _refused(admin_pb2.RemoveRaftVoterResponse, err)
        return await self.s.remove_raft_voter(request)

    async def UpdateRaftVoter(self, request: Any, context: Any) -> Any:
        # Kafka: CLUSTER_ACTION on the cluster (a controller's own request)
        if err := authorize_cluster(AclOperation.CLUSTER_ACTION):
            return _refused(admin_pb2.UpdateRaftVoterResponse, err)
        return await self.s.update_raft_voter(request)

    async def CreateMetadataSnapshot(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER):
            return _refused(admin_pb2.CreateMetadataSnapshotResponse, err)
        path = self.s.take_snapshot()
        image = self.s.image
        return admin_pb2.CreateMetadataSnapshotResponse(
            error=ctl.error_pb(),
            node_id=self.s.node_id,
            snapshot_offset=image.offset if path else -1,
            snapshot_epoch=image.epoch if path else -1,
            path=str(path) if path else "",
        )

    async def DescribeMetadataTree(self, request: Any, context: Any) -> Any:
        """The committed image as the ZooKeeper tree, drawn by the builder the offline tree uses.

        Authorized node by node, as the APIs that show the same things are: topics by Describe
        (and their config nodes by DescribeConfigs) on each, ACLs, SCRAM users, reassignments and
        the producer id block by Describe on the cluster, broker configs and quotas by
        DescribeConfigs on it; brokers, the cluster id and the controller show to any principal,
        as DescribeCluster answers. What is left out is named in ``omitted``."""
        ctx = current_request()
        ctx.public("the tree's public nodes are DescribeCluster's; the others are authorized node by node")

        def build() -> admin_pb2.DescribeMetadataTreeResponse:
            image, provenance = self.s.image, self.s.provenance
            names = sorted(image.topics.by_name)
            described = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
            configs = ctx.authorized(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, names)
            scope = ZkTreeScope(
                topics=None if len(described) == len(names) else frozenset(described),
                topic_configs=None if len(configs) == len(names) else frozenset(configs),
                cluster=ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME),
                cluster_configs=ctx.authorize(
                    AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME
                ),
            )
            nodes = zk_tree_nodes(image, provenance, cluster_id=self.s.context().cluster_id or None, scope=scope)
            R = admin_pb2.DescribeMetadataTreeResponse
            return R(
                error=ctl.error_pb(),
                offset=image.offset,
                epoch=image.epoch,
                timestamp_ms=image.timestamp_ms,
                nodes=[R.Node(path=path, data_json=json.dumps(data, separators=(",", ":"))) for path, data in nodes],
                omitted=scope.omitted(),
            )

        return await self.s.run_read(build, admin_pb2.DescribeMetadataTreeResponse)

    # ------------------------------------------------------------------ ACLs and SCRAM credentials

    async def CreateAcls(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER):
            return _refused(security_pb2.CreateAclsResponse, err)
        return await self.s.run_write(ctl.create_acls, request, security_pb2.CreateAclsResponse)

    async def DescribeAcls(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.DESCRIBE):
            return _refused(security_pb2.DescribeAclsResponse, err)
        return await self.s.run_read(
            lambda: ctl.describe_acls(self.s.image, request), security_pb2.DescribeAclsResponse
        )

    async def DeleteAcls(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER):
            return _refused(security_pb2.DeleteAclsResponse, err)
        return await self.s.run_write(ctl.delete_acls, request, security_pb2.DeleteAclsResponse)

    async def DescribeUserScramCredentials(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.DESCRIBE):
            return _refused(security_pb2.DescribeUserScramCredentialsResponse, err)
        return await self.s.run_read(
            lambda: ctl.describe_user_scram_credentials(self.s.image, request),
            security_pb2.DescribeUserScramCredentialsResponse,
        )

    async def AlterUserScramCredentials(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER):
            return _refused(security_pb2.AlterUserScramCredentialsResponse, err)
        return await self.s.run_write(
            ctl.alter_user_scram_credentials, request, security_pb2.AlterUserScramCredentialsResponse
        )

    # ------------------------------------------------------------------ client quotas (KIP-546)

    async def DescribeClientQuotas(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
            return _refused(quotas_pb2.DescribeClientQuotasResponse, err)
        return await self.s.run_read(
            lambda: ctl.describe_client_quotas(self.s.image, request), quotas_pb2.DescribeClientQuotasResponse
        )

    async def AlterClientQuotas(self, request: Any, context: Any) -> Any:
        if err := authorize_cluster(AclOperation.ALTER_CONFIGS):
            return _refused(quotas_pb2.AlterClientQuotasResponse, err)
        return await self.s.run_write(ctl.alter_client_quotas, request, quotas_pb2.AlterClientQuotasResponse)

    async def DescribeTopics(self, request: Any, context: Any) -> Any:
        async def run(allowed: Any) -> Any:
            response = await self.s.run_read(
                lambda: ctl.describe_topics(self.s.image, allowed, self.s.provenance),
                admin_pb2.DescribeTopicsResponse,
                allowed,
            )
            if not request.names:  # all topics: those the caller may describe
                names = [t.name for t in response.topics]
                shown = current_request().authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
                kept = [t for t in response.topics if t.name in shown]
                del response.topics[:]
                response.topics.extend(kept)
            return response

        return await authorize_items(self.s.image, request, admin_pb2.DescribeTopicsResponse, run, _with_error)
