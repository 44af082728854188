"""``GroupService``: the group coordinator's requests (the calls of proto/group.proto), translated to
and from the `GroupShard` calls. FindCoordinator creates ``__consumer_offsets`` on first use.

One service object per broker, called by both front ends: the gRPC listener through the thin
`GroupServicer` (broker/_coordinator_servicers.py) and the Kafka listener's group handlers
(broker/_kafka_groups.py). It knows no transport: what a front end knows of its connection (the
listener FindCoordinator must name, the client's host) comes as arguments. Every call authorizes
through the current request context (`common.security._request_context`), which both listeners set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kraftlog.broker.coordinator import TXN_TOPIC, ShardUnavailable, coordinator_error
from kraftlog.broker.groups._group_classic_types import JoinRequest, JoinResponse, SyncRequest, SyncResponse
from kraftlog.broker.groups._group_consumer_types import HeartbeatRequest, HeartbeatResponse
from kraftlog.broker.groups._group_coordinator import OFFSETS_TOPIC, GroupCoordinator
from kraftlog.broker.groups._group_service_share import ShareGroupService
from kraftlog.broker.groups._group_shard import GroupShard, OffsetCommitRequest, OffsetCommitResponse, ShardOutcome
from kraftlog.broker.groups._group_shard_txn import TxnOffsetCommitRequest
from kraftlog.broker.groups._group_wire import assignment_in, assignment_out, heartbeat_answer
from kraftlog.broker.replica import error_pb
from kraftlog.common import coordinator_partition
from kraftlog.common import errors as kerr
from kraftlog.common.security import (
    CLUSTER_RESOURCE_NAME,
    AclOperation,
    RequestContext,
    ResourceType,
    current_request,
)
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import group_pb2

__all__ = ["GroupService"]

Error = type[kerr.KafkaError] | None

_READ, _DESCRIBE, _DELETE, _WRITE = AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.WRITE
_GROUP_DENIED = kerr.GroupAuthorizationFailedError
_TOPIC_DENIED = kerr.TopicAuthorizationFailedError


def _may(operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    """One authorization decision of the current request (both listeners set it)."""
    return current_request().authorize(operation, resource_type, name)


def _topics_may(operation: AclOperation, names: list[str]) -> set[str]:
    return current_request().authorized(operation, ResourceType.TOPIC, names)


def _describable_by(ctx: RequestContext) -> Callable[[frozenset[str]], frozenset[str]]:
    """The topics of a set that ``ctx``'s principal may Describe; bound to the request itself, as
    the group shard may run the heartbeat in another task."""

    def describable(topics: frozenset[str]) -> frozenset[str]:
        return frozenset(ctx.authorized(_DESCRIBE, ResourceType.TOPIC, sorted(topics))) if topics else topics

    return describable


class GroupService:
    """The service; ``image`` gives the broker's current metadata image. Share groups' calls
    (KIP-932) are its `ShareGroupService`, ``share``."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        image: Callable[[], MetadataImage],
        clock_ms: Callable[[], int],
        txn: Any = None,
    ) -> None:
        self.c = coordinator
        self.image = image
        self.clock_ms = clock_ms
        self.txn = txn  # the transaction coordinator (FindCoordinator key_type 1), when there is one
        self.share = ShareGroupService(coordinator, image, clock_ms, self._shard, self._parked)

    # ------------------------------------------------------------------ helpers

    def _shard(self, group_id: str) -> GroupShard:
        return self.c.shard_for(group_id, self.image())

    async def _parked(self, shard: GroupShard, call: Callable[[object], ShardOutcome]) -> Any:
        """Run a call whose answer may come later (parked under a future as its token)."""
        token: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.c.run(shard, lambda: call(token))
        return await token

    # ------------------------------------------------------------------ RPCs

    async def FindCoordinator(self, request: Any, *, listener: str, any_endpoint: bool) -> Any:
        """Key type 0: a group's coordinator (``__consumer_offsets``); 1: a transactional id's
        (``__transaction_state``). The topic is created at its first lookup, as Kafka does.

        The answer names the coordinator's endpoint on ``listener`` (the one the request came
        on). ``any_endpoint``: a broker without that listener is named by its first endpoint (the
        gRPC listener may have another name); the Kafka listener must name an endpoint of its own
        protocol, so it turns this off."""
        R = group_pb2.FindCoordinatorResponse
        if request.key_type not in (0, 1) or (request.key_type == 1 and self.txn is None):
            current_request().refused_early(f"key type {request.key_type}")
            return R(
                coordinators=[
                    R.Coordinator(key=k, error=error_pb(kerr.InvalidRequestError, f"key type {request.key_type}"))
                    for k in request.keys
                ]
            )
        name = OFFSETS_TOPIC if request.key_type == 0 else TXN_TOPIC
        # Describe on the group (key type 0) or the transactional id (1), per key
        resource = ResourceType.GROUP if request.key_type == 0 else ResourceType.TRANSACTIONAL_ID
        denied_error = _GROUP_DENIED if request.key_type == 0 else kerr.TransactionalIdAuthorizationFailedError
        allowed = current_request().authorized(_DESCRIBE, resource, [k for k in request.keys if k])
        image = self.image()
        if image.topics.get_by_name(name) is None:
            if request.key_type == 0:
                await self.c.ensure_offsets_topic(image)
            else:
                await self.txn.ensure_topic()
        topic = image.topics.get_by_name(name)
        out = []
        for key in request.keys:
            if not key:
                out.append(R.Coordinator(key=key, error=error_pb(kerr.InvalidRequestError, "empty key")))
                continue
            if key not in allowed:
                out.append(R.Coordinator(key=key, error=error_pb(denied_error, f"not authorized for {key!r}")))
                continue
            if topic is None:
                out.append(R.Coordinator(key=key, error=error_pb(kerr.CoordinatorNotAvailableError, "being created")))
                continue
            p = topic.partitions.get(coordinator_partition(key, len(topic.partitions)))
            leader = p.leader if p is not None else -1
            reg = image.cluster.broker(leader) if leader >= 0 else None
            ep = None if reg is None or reg.fenced else reg.endpoint(listener)
            if ep is None and reg is not None and not reg.fenced and any_endpoint:
                ep = (reg.endpoints or [None])[0]  # a gRPC listener of another name
            if ep is None:
                out.append(R.Coordinator(key=key, error=error_pb(kerr.CoordinatorNotAvailableError, "no leader")))
                continue
            out.append(R.Coordinator(key=key, node_id=leader, host=ep.host, port=ep.port, error=error_pb(None)))
        return R(coordinators=out)

    async def join(self, req: JoinRequest) -> Any:
        """JoinGroup as both listeners serve it (the Kafka one sets the per-version flags)."""
        if not _may(_READ, ResourceType.GROUP, req.group_id):
            return group_pb2.JoinGroupResponse(error=error_pb(_GROUP_DENIED), member_id=req.member_id)
        try:
            shard = self._shard(req.group_id)
            response: JoinResponse = await self._parked(shard, lambda t: shard.join(req, t, self.clock_ms()))
        except ShardUnavailable as err:
            return group_pb2.JoinGroupResponse(error=error_pb(err.error), member_id=req.member_id)
        return group_pb2.JoinGroupResponse(
            error=error_pb(response.error),
            generation_id=response.generation_id,
            protocol_type=response.protocol_type or "",
            protocol_name=response.protocol_name or "",
            leader=response.leader,
            skip_assignment=response.skip_assignment,
            member_id=response.member_id,
            members=[
                group_pb2.JoinGroupResponse.Member(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
                )
                for m in response.members
            ],
        )

    async def SyncGroup(self, request: Any) -> Any:
        req = SyncRequest(
            request.group_id,
            request.member_id,
            request.generation_id,
            group_instance_id=request.group_instance_id if request.HasField("group_instance_id") else None,
            protocol_type=request.protocol_type if request.HasField("protocol_type") else None,
            protocol_name=request.protocol_name if request.HasField("protocol_name") else None,
            assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
        )
        if not _may(_READ, ResourceType.GROUP, request.group_id):
            return group_pb2.SyncGroupResponse(error=error_pb(_GROUP_DENIED))
        try:
            shard = self._shard(request.group_id)
            response: SyncResponse = await self._parked(shard, lambda t: shard.sync(req, t, self.clock_ms()))
        except ShardUnavailable as err:
            return group_pb2.SyncGroupResponse(error=error_pb(err.error))
        return group_pb2.SyncGroupResponse(
            error=error_pb(response.error),
            protocol_type=response.protocol_type or "",
            protocol_name=response.protocol_name or "",
            assignment=response.assignment,
        )

    async def Heartbeat(self, request: Any) -> Any:
        if not _may(_READ, ResourceType.GROUP, request.group_id):
            return group_pb2.HeartbeatResponse(error=error_pb(_GROUP_DENIED))
        try:
            shard = self._shard(request.group_id)
        except ShardUnavailable as err:
            return group_pb2.HeartbeatResponse(error=error_pb(err.error))
        instance = request.group_instance_id if request.HasField("group_instance_id") else None
        error, out = shard.heartbeat(
            request.group_id, request.member_id, instance, request.generation_id, self.clock_ms()
        )
        if out.responses or out.records:
            try:
                self.c.run(shard, lambda: out)
            except ShardUnavailable:
                pass  # the partition moved away meanwhile: what the timers set off is moot
        return group_pb2.HeartbeatResponse(error=error_pb(error))

    async def LeaveGroup(self, request: Any) -> Any:
        if not _may(_READ, ResourceType.GROUP, request.group_id):
            return group_pb2.LeaveGroupResponse(error=error_pb(_GROUP_DENIED))
        try:
            shard = self._shard(request.group_id)
        except ShardUnavailable as err:
            return group_pb2.LeaveGroupResponse(error=error_pb(err.error))
        members = [
            (m.member_id, m.group_instance_id if m.HasField("group_instance_id") else None) for m in request.members
        ]
        error, results, out = shard.leave(request.group_id, members, self.clock_ms())
        try:
            self.c.run(shard, lambda: out)
        except ShardUnavailable as err:
            return group_pb2.LeaveGroupResponse(error=error_pb(err.error))
        return group_pb2.LeaveGroupResponse(
            error=error_pb(error),
            members=[
                group_pb2.LeaveGroupResponse.Member(member_id=m, group_instance_id=i, error=error_pb(e))
                for m, i, e in results
            ],
        )

    async def OffsetCommit(self, request: Any) -> Any:
        R = group_pb2.OffsetCommitResponse
        req = OffsetCommitRequest(
            request.group_id,
            tuple(
                (t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                for t in request.topics
                for p in t.partitions
            ),
            request.member_id,
            request.group_instance_id if request.HasField("group_instance_id") else None,
            request.generation_id,
        )
        results = await self._commit(req, request.group_id, None)
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, error in results:
            by_topic.setdefault(topic, []).append(R.Partition(partition_index=partition, error=error_pb(error)))
        return R(topics=[R.Topic(name=t, partitions=ps) for t, ps in by_topic.items()])

    async def _commit(
        self, req: Any, group_id: str, transactional_id: str | None
    ) -> tuple[tuple[str, int, Error], ...]:
        """An offset commit (plain or transactional) after Kafka's checks: Write on the
        transactional id, Read on the group (each failing every partition), then Read on each
        topic (failing that topic's partitions), then the topic's existence in the metadata image
        (UNKNOWN_TOPIC_OR_PARTITION per partition; a plain commit checks each partition too, a
        transactional one only the topic, as Kafka's KafkaApis does); the rest are committed."""
        denied: Error = None
        if transactional_id is not None and not _may(_WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            denied = kerr.TransactionalIdAuthorizationFailedError
        elif not _may(_READ, ResourceType.GROUP, group_id):
            denied = _GROUP_DENIED
        if denied is not None:
            return tuple((topic, p, denied) for topic, p, *_rest in req.offsets)
        readable = _topics_may(_READ, [o[0] for o in req.offsets])
        refused: tuple[tuple[str, int, Error], ...] = tuple(
            (o[0], o[1], _TOPIC_DENIED) for o in req.offsets if o[0] not in readable
        )
        allowed = [o for o in req.offsets if o[0] in readable]
        unknown = _unknown_partitions(self.image(), allowed, partitions=transactional_id is None)
        refused += tuple((o[0], o[1], kerr.UnknownTopicOrPartitionError) for o in unknown)
        if refused:
            req = replace(req, offsets=tuple(o for o in allowed if o not in unknown))
            if not req.offsets:
                return refused
        try:
            shard = self._shard(group_id)
            commit = shard.commit_offsets if transactional_id is None else shard.txn_commit_offsets
            response: OffsetCommitResponse = await self._parked(shard, lambda t: commit(req, t, self.clock_ms()))
            results = tuple(response.partitions)
        except ShardUnavailable as err:
            results = tuple((topic, p, err.error) for topic, p, *_rest in req.offsets)
        return results + refused

    async def OffsetFetch(self, request: Any) -> Any:
        R = group_pb2.OffsetFetchResponse
        if not _may(_DESCRIBE, ResourceType.GROUP, request.group_id):
            return R(error=error_pb(_GROUP_DENIED))
        try:
            shard = self._shard(request.group_id)
        except ShardUnavailable as err:
            return R(error=error_pb(err.error))
        wanted = None if request.all_topics else [(t.name, p) for t in request.topics for p in t.partition_indexes]
        # Describe on each topic: named ones the caller may not see answer TOPIC_AUTHORIZATION_FAILED,
        # unnamed ones (all topics) are left out
        refused: list[tuple[str, int]] = []
        if wanted is not None:
            describable = _topics_may(_DESCRIBE, [t for t, _p in wanted])
            refused = [(t, p) for t, p in wanted if t not in describable]
            wanted = [(t, p) for t, p in wanted if t in describable]
        # with require_stable, a partition whose offset an open transaction may still change
        # answers UNSTABLE_OFFSET_COMMIT (retriable) on its own, as Kafka's OffsetMetadataManager
        # does; the gRPC answer also says so for the group (the Kafka listener clears that one,
        # which Kafka's clients do not retry)
        unstable = shard.unstable_partitions(request.group_id) if request.require_stable else set()
        group_error = (
            error_pb(kerr.UnstableOffsetCommitError, "offsets of an open transaction are pending")
            if request.require_stable and shard.unstable(request.group_id, wanted)
            else None
        )
        error, offsets = shard.fetch_offsets(request.group_id, wanted) if wanted != [] else (None, [])
        if request.all_topics:
            describable = _topics_may(_DESCRIBE, [o.topic for o in offsets])
            offsets = [o for o in offsets if o.topic in describable]
        by_topic: dict[str, list[Any]] = {}
        for topic, partition in refused:
            by_topic.setdefault(topic, []).append(
                R.Partition(
                    partition_index=partition,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    error=error_pb(_TOPIC_DENIED),
                )
            )
        for o in offsets:
            if (o.topic, o.partition) in unstable:
                by_topic.setdefault(o.topic, []).append(
                    R.Partition(
                        partition_index=o.partition,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        error=error_pb(kerr.UnstableOffsetCommitError),
                    )
                )
                continue
            by_topic.setdefault(o.topic, []).append(
                R.Partition(
                    partition_index=o.partition,
                    committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch,
                    metadata=o.metadata,
                    error=error_pb(None),
                )
            )
        topics = [R.Topic(name=t, partitions=ps) for t, ps in by_topic.items()]
        if error is None and group_error is not None:
            return R(error=group_error, topics=topics)
        return R(error=error_pb(error), topics=topics)

    async def ListGroups(self, request: Any) -> Any:
        R = group_pb2.ListGroupsResponse
        states = set(request.states_filter) or None
        types = set(request.types_filter) or None
        groups = [g for shard in self.c.shards() for g in shard.list_groups(states, types)]
        # Describe on the cluster lists every group, else those the caller may describe
        ctx = current_request()
        if not ctx.authorize(_DESCRIBE, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME):
            allowed = ctx.authorized(_DESCRIBE, ResourceType.GROUP, [g.group_id for g in groups])
            groups = [g for g in groups if g.group_id in allowed]
        return R(
            error=error_pb(None),
            groups=[
                R.Group(
                    group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type
                )
                for g in groups
            ],
        )

    async def DescribeGroups(self, request: Any) -> Any:
        R = group_pb2.DescribeGroupsResponse
        out = []
        describable = current_request().authorized(_DESCRIBE, ResourceType.GROUP, list(request.groups))
        for group_id in request.groups:
            if group_id not in describable:
                out.append(R.Group(error=error_pb(_GROUP_DENIED), group_id=group_id))
                continue
            try:
                d = self._shard(group_id).describe_group(group_id)
            except ShardUnavailable as err:
                out.append(R.Group(error=error_pb(err.error), group_id=group_id))
                continue
            out.append(
                R.Group(
                    error=error_pb(None),
                    group_id=group_id,
                    group_state=d.state,
                    protocol_type=d.protocol_type,
                    protocol_data=d.protocol,
                    members=[
                        R.Member(
                            member_id=m[0],
                            group_instance_id=m[1],
                            client_id=m[2],
                            client_host=m[3],
                            member_metadata=m[4],
                            member_assignment=m[5],
                        )
                        for m in d.members
                    ],
                )
            )
        return R(groups=out)

    async def DeleteGroups(self, request: Any) -> Any:
        R = group_pb2.DeleteGroupsResponse
        results = []
        deletable = current_request().authorized(_DELETE, ResourceType.GROUP, list(request.groups))
        for group_id in request.groups:
            if group_id not in deletable:
                results.append(R.Result(group_id=group_id, error=error_pb(_GROUP_DENIED)))
                continue
            try:
                # a share group's partitions' state goes first (Kafka's deleteShareGroups)
                error = await self.share.delete_group_state(group_id)
                if error is not None:
                    results.append(R.Result(group_id=group_id, error=error_pb(error)))
                    continue
                shard = self._shard(group_id)
                token: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
                error, out = shard.delete_group(group_id, token, self.clock_ms())
                if error is None:
                    self.c.run(shard, lambda out=out: out)  # type: ignore[misc]
                    answered = await token
                    error = coordinator_error(answered[0][1]) if answered and answered[0][1] else None
            except ShardUnavailable as err:
                error = err.error
            results.append(R.Result(group_id=group_id, error=error_pb(error)))
        return R(results=results)

    async def OffsetDelete(self, request: Any) -> Any:
        R = group_pb2.OffsetDeleteResponse
        partitions = [(t.name, p) for t in request.topics for p in t.partition_indexes]
        if not _may(_DELETE, ResourceType.GROUP, request.group_id):
            return R(error=error_pb(_GROUP_DENIED))
        readable = _topics_may(_READ, [t for t, _p in partitions])
        refused = [(t, p) for t, p in partitions if t not in readable]
        partitions = [(t, p) for t, p in partitions if t in readable]
        subscribed: list[tuple[str, int]] = []
        try:
            shard = self._shard(request.group_id)
            token: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            error, subscribed, out = shard.delete_offsets(request.group_id, partitions, token, self.clock_ms())
            if error is None:
                self.c.run(shard, lambda: out)
                answered = await token
                error = coordinator_error(answered[0][1]) if answered and answered[0][1] else None
        except ShardUnavailable as err:
            error = err.error
        by_topic: dict[str, list[Any]] = {}
        if error is None:
            for topic, p in partitions:
                refusal = kerr.GroupSubscribedToTopicError if (topic, p) in subscribed else None
                by_topic.setdefault(topic, []).append(R.Partition(partition_index=p, error=error_pb(refusal)))
            for topic, p in refused:
                by_topic.setdefault(topic, []).append(R.Partition(partition_index=p, error=error_pb(_TOPIC_DENIED)))
        return R(error=error_pb(error), topics=[R.Topic(name=t, partitions=ps) for t, ps in by_topic.items()])

    async def TxnOffsetCommit(self, request: Any) -> Any:
        R = group_pb2.TxnOffsetCommitResponse
        req = TxnOffsetCommitRequest(
            request.group_id,
            request.producer_id,
            request.producer_epoch,
            tuple(
                (t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                for t in request.topics
                for p in t.partitions
            ),
            request.member_id,
            request.group_instance_id if request.HasField("group_instance_id") else None,
            request.generation_id,
        )
        results = await self._commit(req, request.group_id, request.transactional_id)
        P = group_pb2.OffsetCommitResponse
        by_topic: dict[str, list[Any]] = {}
        for topic, partition, error in results:
            by_topic.setdefault(topic, []).append(P.Partition(partition_index=partition, error=error_pb(error)))
        return R(topics=[P.Topic(name=t, partitions=ps) for t, ps in by_topic.items()])

    async def ConsumerGroupHeartbeat(self, request: Any, *, client_host: str) -> Any:
        """KIP-848's heartbeat; ``client_host`` is Kafka's form of the client's address
        (``/127.0.0.1``, see `client_host_of`)."""
        R = group_pb2.ConsumerGroupHeartbeatResponse
        if "consumer" not in self.c.config["group.coordinator.rebalance.protocols"]:
            refused = error_pb(kerr.UnsupportedVersionError, "the consumer group protocol is not enabled")
            return R(error=refused, member_id=request.member_id, member_epoch=request.member_epoch)
        req = HeartbeatRequest(
            request.group_id,
            request.member_id,
            request.member_epoch,
            instance_id=request.instance_id if request.HasField("instance_id") else None,
            rack_id=request.rack_id if request.HasField("rack_id") else None,
            rebalance_timeout_ms=request.rebalance_timeout_ms if request.HasField("rebalance_timeout_ms") else -1,
            subscribed_topic_names=(
                tuple(request.subscribed_topic_names.names) if request.HasField("subscribed_topic_names") else None
            ),
            subscribed_topic_regex=request.subscribed_topic_regex
            if request.HasField("subscribed_topic_regex")
            else None,
            server_assignor=request.server_assignor if request.HasField("server_assignor") else None,
            owned=assignment_in(request.topic_partitions) if request.HasField("topic_partitions") else None,
            client_id=request.client_id,
            client_host=client_host,
            describable=_describable_by(current_request()),
        )
        if not _may(_READ, ResourceType.GROUP, request.group_id):
            return R(error=error_pb(_GROUP_DENIED), member_id=request.member_id, member_epoch=request.member_epoch)
        names = list(req.subscribed_topic_names or ())
        hidden = sorted(set(names) - _topics_may(_DESCRIBE, names))
        if hidden:
            denied = error_pb(_TOPIC_DENIED, f"not authorized to describe the subscribed topics {hidden}")
            return R(error=denied, member_id=request.member_id, member_epoch=request.member_epoch)
        try:
            shard = self._shard(request.group_id)
            image = self.image()
            lookup, all_names = self.c.topic_lookup(image), self.c.topic_names(image)
            settings = self.c.consumer_group_config(image, request.group_id)
            response: HeartbeatResponse = await self._parked(
                shard, lambda t: shard.consumer_heartbeat(req, t, self.clock_ms(), lookup, all_names, settings)
            )
        except ShardUnavailable as err:
            return R(error=error_pb(err.error), member_id=request.member_id, member_epoch=request.member_epoch)
        return heartbeat_answer(R, response)

    async def ConsumerGroupDescribe(self, request: Any) -> Any:
        R = group_pb2.ConsumerGroupDescribeResponse
        image = self.image()
        out = []
        describable = current_request().authorized(_DESCRIBE, ResourceType.GROUP, list(request.group_ids))
        for group_id in request.group_ids:
            if group_id not in describable:
                out.append(R.Group(error=error_pb(_GROUP_DENIED), group_id=group_id))
                continue
            try:
                d = self._shard(group_id).describe_consumer_group(group_id)
            except ShardUnavailable as err:
                out.append(R.Group(error=error_pb(err.error), group_id=group_id))
                continue
            if d.error is not None:
                out.append(R.Group(error=error_pb(d.error, f"{group_id} is not a consumer group"), group_id=group_id))
                continue
            out.append(
                R.Group(
                    error=error_pb(None),
                    group_id=group_id,
                    group_state=d.state,
                    group_epoch=d.group_epoch,
                    assignment_epoch=d.assignment_epoch,
                    assignor_name=d.assignor_name,
                    members=[
                        R.Member(
                            member_id=m.member_id,
                            instance_id=m.instance_id,
                            rack_id=m.rack_id,
                            member_epoch=m.member_epoch,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            subscribed_topic_names=m.subscribed_topic_names,
                            subscribed_topic_regex=m.subscribed_topic_regex,
                            assignment=assignment_out(m.assignment, image),
                            target_assignment=assignment_out(m.target_assignment, image),
                        )
                        for m in d.members
                    ],
                )
            )
        return R(groups=out)


def _unknown_partitions(image: MetadataImage, offsets: Any, *, partitions: bool) -> list[Any]:
    """The offsets (tuples of topic name, partition, ...) whose topic the image does not know,
    or, with ``partitions``, whose partition it does not know either."""
    out = []
    for o in offsets:
        topic = image.topics.get_by_name(o[0])
        if topic is None or (partitions and o[1] not in topic.partitions):
            out.append(o)
    return out
