"""The share-group calls of `GroupService` (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe and
DescribeShareGroupOffsets, translated to and from the `GroupShard` calls, authorized as Kafka's
KafkaApis does (READ on the group and DESCRIBE on the subscribed topics for a heartbeat; DESCRIBE
on each group, and on the topics of its members' assignments, for a describe; DESCRIBE on the
group and on each topic for the offsets). `GroupService` holds one (``.share``) and hands it the
coordinator, the metadata image, the clock, and its calls that reach a group's shard; the broker
sets ``state_summary``, its way to the share coordinator's ReadShareGroupStateSummary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kraftlog.broker.coordinator import ShardUnavailable
from kraftlog.broker.groups._group_coordinator import GroupCoordinator
from kraftlog.broker.groups._group_shard import GroupShard, ShardOutcome
from kraftlog.broker.groups._group_share_types import ShareHeartbeatRequest, ShareHeartbeatResponse
from kraftlog.broker.groups._group_wire import assignment_out, heartbeat_answer
from kraftlog.broker.replica import error_pb
from kraftlog.broker.share import ReadStateSummaryRequest, ShareStateResult
from kraftlog.common import errors as kerr
from kraftlog.common.security import AclOperation, ResourceType, current_request
from kraftlog.metadata_log import MetadataImage
from kraftlog.proto import group_pb2

__all__ = ["ShareGroupService", "StateSummary"]

#: the share coordinator's ReadShareGroupStateSummary of one share partition, wherever it runs
StateSummary = Callable[[ReadStateSummaryRequest], Awaitable[ShareStateResult]]


async def _no_coordinator(req: ReadStateSummaryRequest) -> ShareStateResult:
    """The summary of a broker without a share coordinator: none to ask."""
    return ShareStateResult(req.topic_id, req.partition, kerr.CoordinatorNotAvailableError, "no share coordinator")


class ShareGroupService:
    """ShareGroupHeartbeat and ShareGroupDescribe (see the module docstring). ``shard`` finds a
    group's shard and ``parked`` runs a shard call whose answer may come later: `GroupService`'s
    own, so that both kinds of groups reach their shards the one way."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        image: Callable[[], MetadataImage],
        clock_ms: Callable[[], int],
        shard: Callable[[str], GroupShard],
        parked: Callable[[GroupShard, Callable[[object], ShardOutcome]], Awaitable[Any]],
    ) -> None:
        self.c = coordinator
        self.image = image
        self.clock_ms = clock_ms
        self._shard = shard
        self._parked = parked
        self.state_summary: StateSummary = _no_coordinator

    async def ShareGroupHeartbeat(self, request: Any, *, client_host: str) -> Any:
        """KIP-932's heartbeat; ``client_host`` is Kafka's form of the client's address."""
        R = group_pb2.ShareGroupHeartbeatResponse
        ctx = current_request()
        names = list(request.subscribed_topic_names.names) if request.HasField("subscribed_topic_names") else None
        req = ShareHeartbeatRequest(
            request.group_id,
            request.member_id,
            request.member_epoch,
            rack_id=request.rack_id if request.HasField("rack_id") else None,
            subscribed_topic_names=tuple(names) if names is not None else None,
            client_id=request.client_id,
            client_host=client_host,
        )
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
            return R(error=error_pb(kerr.GroupAuthorizationFailedError))
        if names:
            hidden = sorted(set(names) - ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names))
            if hidden:
                return R(error=error_pb(kerr.TopicAuthorizationFailedError))
        try:
            shard = self._shard(request.group_id)
            lookup = self.c.topic_lookup(self.image())
            response: ShareHeartbeatResponse = await self._parked(
                shard, lambda t: shard.share_heartbeat(req, t, self.clock_ms(), lookup)
            )
        except ShardUnavailable as err:
            return R(error=error_pb(err.error))
        return heartbeat_answer(R, response)

    async def ShareGroupDescribe(self, request: Any) -> Any:
        R = group_pb2.ShareGroupDescribeResponse
        image = self.image()
        ctx = current_request()
        describable = ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, list(request.group_ids))
        out = []
        for group_id in request.group_ids:
            if group_id not in describable:
                out.append(R.Group(error=error_pb(kerr.GroupAuthorizationFailedError), group_id=group_id))
                continue
            try:
                d = self._shard(group_id).describe_share_group(group_id)
            except ShardUnavailable as err:
                out.append(R.Group(error=error_pb(err.error), group_id=group_id))
                continue
            if d.error is not None:
                out.append(R.Group(error=error_pb(d.error, d.message), group_id=group_id))
                continue
            members = [
                R.Member(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_topic_names,
                    assignment=_named(assignment_out(m.assignment, image)),
                )
                for m in d.members
            ]
            # Kafka: a group whose assignments name a topic the caller may not Describe is refused
            topics = {t.topic_name for m in members for t in m.assignment.topics}
            if topics - ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, sorted(topics)):
                refused = "The group has described topic(s) that the client is not authorized to describe."
                out.append(R.Group(error=error_pb(kerr.TopicAuthorizationFailedError, refused), group_id=group_id))
                continue
            out.append(
                R.Group(
                    error=error_pb(None),
                    group_id=group_id,
                    group_state=d.state,
                    group_epoch=d.group_epoch,
                    assignment_epoch=d.assignment_epoch,
                    assignor_name=d.assignor_name,
                    members=members,
                )
            )
        return R(groups=out)

    async def DescribeShareGroupOffsets(self, request: Any) -> Any:
        """Kafka's DescribeShareGroupOffsets: each share partition's start offset and leader epoch
        from the share coordinator's summary (``all_topics``: every partition the group has
        initialized). A group this coordinator does not hold as a share group is
        GROUP_ID_NOT_FOUND; an unknown topic's partitions UNKNOWN_TOPIC_OR_PARTITION, a topic the
        caller may not Describe TOPIC_AUTHORIZATION_FAILED. The lag is -1 (not computed)."""
        R = group_pb2.DescribeShareGroupOffsetsResponse
        image = self.image()
        ctx = current_request()
        describable = ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, [g.group_id for g in request.groups])
        out = []
        for g in request.groups:
            if g.group_id not in describable:
                out.append(R.Group(group_id=g.group_id, error=error_pb(kerr.GroupAuthorizationFailedError)))
                continue
            try:
                group = self._shard(g.group_id).share.live(g.group_id)
            except ShardUnavailable as err:
                out.append(R.Group(group_id=g.group_id, error=error_pb(err.error)))
                continue
            if group is None:
                missing = kerr.GroupIdNotFoundError, f"Group {g.group_id} is not a share group."
                out.append(R.Group(group_id=g.group_id, error=error_pb(*missing)))
                continue
            wanted: list[tuple[str, str, list[int]]] = []  # (name, topic id or "", partitions)
            if g.all_topics:
                wanted = [(name, tid, sorted(ps)) for tid, (name, ps) in sorted(group.initialized.items())]
            for t in g.topics:
                topic = image.topics.get_by_name(t.topic_name)
                wanted.append((t.topic_name, "" if topic is None else str(topic.topic_id), list(t.partitions)))
            readable = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, sorted({n for n, _t, _p in wanted}))
            topics = [
                await self._topic_offsets(g.group_id, name, tid, ps, name in readable) for name, tid, ps in wanted
            ]
            out.append(R.Group(group_id=g.group_id, error=error_pb(None), topics=topics))
        return R(groups=out)

    async def _topic_offsets(
        self, group_id: str, name: str, topic_id: str, partitions: list[int], readable: bool
    ) -> Any:
        R = group_pb2.DescribeShareGroupOffsetsResponse
        if not topic_id or not readable:
            error = kerr.UnknownTopicOrPartitionError if not topic_id else kerr.TopicAuthorizationFailedError
            parts = [
                R.Partition(partition=p, start_offset=-1, leader_epoch=-1, lag=-1, error=error_pb(error))
                for p in partitions
            ]
            return R.Topic(topic_name=name, topic_id=topic_id, partitions=parts)
        results = await asyncio.gather(
            *(self.state_summary(ReadStateSummaryRequest(group_id, topic_id, p)) for p in partitions)
        )
        parts = [
            R.Partition(
                partition=p,
                start_offset=r.start_offset if r.error is None else -1,
                leader_epoch=r.leader_epoch if r.error is None else -1,
                lag=-1,
                error=error_pb(r.error, r.message) if r.error is not None else error_pb(None),
            )
            for p, r in zip(partitions, results, strict=True)
        ]
        return R.Topic(topic_name=name, topic_id=topic_id, partitions=parts)


def _named(assignment: Any) -> Any:
    """The assignment without topics the image no longer has (Kafka describes only known topics)."""
    return group_pb2.TopicAssignment(topics=[t for t in assignment.topics if t.topic_name])
