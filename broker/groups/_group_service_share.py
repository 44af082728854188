"""The share-group calls of `GroupService` (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe and
DescribeShareGroupOffsets, translated to and from the `GroupShard` calls, authorized as Kafka's
KafkaApis does (READ on the group and DESCRIBE on the subscribed topics for a heartbeat; DESCRIBE
on each group, and on the topics of its members' assignments, for a describe; DESCRIBE on the
group and on each topic for the offsets). `GroupService` holds one (``.share``) and hands it the
coordinator, the metadata image, the clock, and its calls that reach a group's shard; the broker
sets ``state_summary``, its way to the share coordinator's ReadShareGroupStateSummary.

Every call is first gated on the ``share.version`` feature (Kafka's
``KafkaApis.isShareGroupProtocolEnabled``, before any authorization): while it is 0 a heartbeat and
Alter/DeleteShareGroupOffsets answer UNSUPPORTED_VERSION, a describe (groups or offsets) answers it
for each group. The image is read on every call, so an UpdateFeatures turns them on or off at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kraftlog.broker.coordinator import ShardUnavailable, coordinator_error
from kraftlog.broker.groups._group_coordinator import GroupCoordinator
from kraftlog.broker.groups._group_lag import LatestOffsets
from kraftlog.broker.groups._group_shard import GroupShard, ShardOutcome
from kraftlog.broker.groups._group_share_types import ShareHeartbeatRequest, ShareHeartbeatResponse
from kraftlog.broker.groups._group_wire import assignment_out, heartbeat_answer
from kraftlog.broker.replica import error_pb
from kraftlog.broker.share import (
    DeleteStateRequest,
    InitializeStateRequest,
    ReadStateSummaryRequest,
    ShareStateResult,
)
from kraftlog.common import errors as kerr
from kraftlog.common.security import AclOperation, ResourceType, current_request
from kraftlog.metadata_log import SHARE_GROUPS_DISABLED, MetadataImage, share_groups_enabled
from kraftlog.proto import group_pb2

__all__ = ["ShareGroupService", "StateSummary", "ShareStateCall"]

#: the share coordinator's ReadShareGroupStateSummary of one share partition, wherever it runs
StateSummary = Callable[[ReadStateSummaryRequest], Awaitable[ShareStateResult]]


#: any of the share coordinator's calls (initialize, delete, summary) of one share partition
ShareStateCall = Callable[[Any], Awaitable[ShareStateResult]]


async def _no_coordinator(req: Any) -> ShareStateResult:
    """The answer of a broker without a share coordinator: none to ask."""
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
        self.share_state: ShareStateCall = _no_coordinator
        #: drops this broker's in-memory share partitions of a group whose offsets changed
        self.forget_held: Callable[[str], Awaitable[object]] = _forget_nothing
        #: the partitions' log ends (high watermarks), for DescribeShareGroupOffsets' lag
        self.latest_offsets: LatestOffsets = _no_ends

    def disabled(self) -> Any:
        """UNSUPPORTED_VERSION (an `error_pb`) while ``share.version`` leaves share groups off,
        else None; a refusal counts as the request's authorization decision (nothing is touched)."""
        if share_groups_enabled(self.image().features.levels):
            return None
        current_request().refused_early(SHARE_GROUPS_DISABLED)
        return error_pb(kerr.UnsupportedVersionError, SHARE_GROUPS_DISABLED)

    async def ShareGroupHeartbeat(self, request: Any, *, client_host: str) -> Any:
        """KIP-932's heartbeat; ``client_host`` is Kafka's form of the client's address."""
        R = group_pb2.ShareGroupHeartbeatResponse
        off = self.disabled()
        if off is not None:
            return R(error=off)
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
        off = self.disabled()
        if off is not None:
            return R(groups=[R.Group(error=off, group_id=g) for g in request.group_ids])
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
        caller may not Describe TOPIC_AUTHORIZATION_FAILED. The lag is Kafka 4.2's (see below)."""
        R = group_pb2.DescribeShareGroupOffsetsResponse
        off = self.disabled()
        if off is not None:
            return R(groups=[R.Group(group_id=g.group_id, error=off) for g in request.groups])
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
        # Kafka 4.2 (KIP-1226): lag = log end - start offset - delivery-complete count, for a
        # partition whose summary has both (-1 otherwise, or when its leader did not answer)
        known = {
            p
            for p, r in zip(partitions, results, strict=True)
            if r.error is None and r.start_offset >= 0 and r.delivery_complete_count >= 0
        }
        ends = await self.latest_offsets([(name, p) for p in sorted(known)]) if known else {}

        def lag(p: int, r: ShareStateResult) -> int:
            end = ends.get((name, p))
            if end is None or p not in known:
                return -1
            return max(0, end - r.start_offset - r.delivery_complete_count)

        parts = [
            R.Partition(
                partition=p,
                start_offset=r.start_offset if r.error is None else -1,
                leader_epoch=r.leader_epoch if r.error is None else -1,
                lag=lag(p, r),
                error=error_pb(r.error, r.message) if r.error is not None else error_pb(None),
            )
            for p, r in zip(partitions, results, strict=True)
        ]
        return R.Topic(topic_name=name, topic_id=topic_id, partitions=parts)

    async def AlterShareGroupOffsets(self, request: Any) -> Any:
        """Kafka's AlterShareGroupOffsets: new start offsets for an empty share group (READ on the
        group and on each topic). Each partition's state is initialized afresh through the share
        coordinator at the next state epoch, so that a leader still holding the old state is
        fenced on its next write; then the group's record counts them initialized."""
        R = group_pb2.AlterShareGroupOffsetsResponse
        off = self.disabled()
        if off is not None:
            return R(error=off)
        ctx = current_request()
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
            return R(error=error_pb(kerr.GroupAuthorizationFailedError))
        refused = self._offsets_refusal(request.group_id)
        if refused is not None:
            return R(error=refused)
        image = self.image()
        readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, [t.topic_name for t in request.topics])
        out: list[Any] = []
        done: dict[str, tuple[str, set[int]]] = {}
        for t in request.topics:
            topic = image.topics.get_by_name(t.topic_name)
            tid = "" if topic is None else str(topic.topic_id)
            parts = []
            for p in t.partitions:
                if topic is None or p.partition not in topic.partitions:
                    error = error_pb(kerr.UnknownTopicOrPartitionError)
                elif t.topic_name not in readable:
                    error = error_pb(kerr.TopicAuthorizationFailedError)
                else:
                    error = await self._initialize_at(request.group_id, tid, p.partition, p.start_offset)
                    if not error.code:
                        done.setdefault(tid, (t.topic_name, set()))[1].add(p.partition)
                parts.append(R.Partition(partition=p.partition, error=error))
            out.append(R.Topic(topic_name=t.topic_name, topic_id=tid, partitions=parts))
        written = await self._offsets_changed(request.group_id, done, set())
        if written is not None:
            return R(error=written)
        return R(error=error_pb(None), topics=out)

    async def _initialize_at(self, group_id: str, topic_id: str, partition: int, start_offset: int) -> Any:
        summary = await self.share_state(ReadStateSummaryRequest(group_id, topic_id, partition))
        if summary.error is not None:
            return error_pb(summary.error, summary.message)
        req = InitializeStateRequest(group_id, topic_id, partition, summary.state_epoch + 1, start_offset)
        result = await self.share_state(req)
        return error_pb(result.error, result.message) if result.error is not None else error_pb(None)

    async def DeleteShareGroupOffsets(self, request: Any) -> Any:
        """Kafka's DeleteShareGroupOffsets: an empty share group forgets topics (DELETE on the
        group, READ on each topic): DeleteShareGroupState for each of the topic's partitions the
        group has state for, then the group's record drops the topic (its partitions are
        initialized afresh, by share.auto.offset.reset, when a member subscribes again)."""
        R = group_pb2.DeleteShareGroupOffsetsResponse
        off = self.disabled()
        if off is not None:
            return R(error=off)
        ctx = current_request()
        if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
            return R(error=error_pb(kerr.GroupAuthorizationFailedError))
        refused = self._offsets_refusal(request.group_id)
        if refused is not None:
            return R(error=refused)
        image = self.image()
        readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, list(request.topic_names))
        out: list[Any] = []
        forgotten: set[str] = set()
        for name in request.topic_names:
            topic = image.topics.get_by_name(name)
            tid = "" if topic is None else str(topic.topic_id)
            if topic is None:
                error = error_pb(kerr.UnknownTopicOrPartitionError)
            elif name not in readable:
                error = error_pb(kerr.TopicAuthorizationFailedError)
            else:
                error = await self._delete_topic_state(request.group_id, tid)
                if not error.code:
                    forgotten.add(tid)
            out.append(R.Topic(topic_name=name, topic_id=tid, error=error))
        written = await self._offsets_changed(request.group_id, {}, forgotten)
        if written is not None:
            return R(error=written)
        return R(error=error_pb(None), topics=out)

    async def _delete_topic_state(self, group_id: str, topic_id: str) -> Any:
        group = self._shard(group_id).share.live(group_id)
        partitions: set[int] = set()
        if group is not None:
            for held in (group.initialized, group.initializing):
                partitions |= held.get(topic_id, ("", set()))[1]
        results = await asyncio.gather(
            *(self.share_state(DeleteStateRequest(group_id, topic_id, p)) for p in sorted(partitions))
        )
        failed = next((r for r in results if r.error is not None), None)
        return error_pb(None) if failed is None else error_pb(failed.error, failed.message)

    async def delete_group_state(self, group_id: str) -> Any:
        """DeleteGroups of an empty share group, first step (Kafka's deleteShareGroups): every
        share partition's state in ``__share_group_state`` is deleted; the error of the first that
        failed (the group is then kept), or None."""
        try:
            group = self._shard(group_id).share.live(group_id)
        except ShardUnavailable:
            return None  # answered by the delete itself
        if group is None or group.members:
            return None
        keys = sorted(
            (t, p) for held in (group.initialized, group.initializing) for t, (_n, ps) in held.items() for p in ps
        )
        results = await asyncio.gather(*(self.share_state(DeleteStateRequest(group_id, t, p)) for t, p in keys))
        await self.forget_held(group_id)
        return next((r.error for r in results if r.error is not None), None)

    def _offsets_refusal(self, group_id: str) -> Any:
        """The top-level error of an Alter/DeleteShareGroupOffsets, or None: the group must be a
        share group without members."""
        try:
            error, message = self._shard(group_id).share.offsets_alterable(group_id)
        except ShardUnavailable as err:
            return error_pb(err.error)
        return None if error is None else error_pb(error, message)

    async def _offsets_changed(self, group_id: str, initialized: Any, forgotten: set[str]) -> Any:
        """Record the change on the group's shard and drop the stale in-memory share partitions."""
        await self.forget_held(group_id)
        if not initialized and not forgotten:
            return None
        try:
            shard = self._shard(group_id)
            token: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            error, out = shard.share.offsets_changed(group_id, initialized, forgotten, token)
            if error is not None:
                return error_pb(error)
            self.c.run(shard, lambda: out)
            written = await token
        except ShardUnavailable as err:
            return error_pb(err.error)
        return None if written is None else error_pb(coordinator_error(written))


async def _forget_nothing(group_id: str) -> None:
    """No share partitions held here."""


async def _no_ends(parts: Any) -> dict[tuple[str, int], int]:
    """No log ends known: every lag unknown."""
    return {}


def _named(assignment: Any) -> Any:
    """The assignment without topics the image no longer has (Kafka describes only known topics)."""
    return group_pb2.TopicAssignment(topics=[t for t in assignment.topics if t.topic_name])
