"""Kafka-protocol group requests: FindCoordinator, the classic group protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), committed offsets (OffsetCommit, OffsetFetch, OffsetDelete),
ListGroups, DescribeGroups, DeleteGroups, KIP-848's ConsumerGroupHeartbeat and
ConsumerGroupDescribe and KIP-932's ShareGroupHeartbeat and ShareGroupDescribe, each served by the
broker's one `GroupService` (the object the gRPC servicer calls too). What only this listener
knows is passed as arguments: FindCoordinator names endpoints of the listener the request came
on, and the client's host comes from the connection.
"""

from __future__ import annotations

from typing import Any

from kraftlog.broker.groups import GroupService, JoinRequest, Protocol
from kraftlog.broker.kafka._kafka_server import ConnectionInfo
from kraftlog.broker.kafka._kafka_translate import from_pb, to_pb
from kraftlog.broker.kafka._kafka_wire import NOT_REQUESTED_OPERATIONS, ParsedRequest, ms
from kraftlog.common import errors as kerr
from kraftlog.common import parse_uuid
from kraftlog.common.security import AclOperation, ResourceType, current_request
from kraftlog.proto import group_pb2

__all__ = ["GroupApis"]


def _authorized_operations(request: ParsedRequest, group: dict[str, Any]) -> int:
    """KIP-430: the caller's operations on a described group when the request asks (v3+) and the
    group was described (Kafka leaves the field unset on an error)."""
    if not getattr(request.body, "include_authorized_operations", False) or group.get("error_code"):
        return NOT_REQUESTED_OPERATIONS
    return current_request().authorized_operations(ResourceType.GROUP, group["group_id"])


class GroupApis:
    """Group requests for `KafkaApis`, over the broker's `GroupService`."""

    def __init__(self, service: GroupService) -> None:
        self.service = service

    async def find_coordinator(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """v0-3 ask for one key and are answered at the top level; v4+ batch keys (KIP-699)."""
        body = request.body
        batched = request.api_version >= 4
        keys = list(body.coordinator_keys) if batched else [body.key]
        pb = group_pb2.FindCoordinatorRequest(key_type=getattr(body, "key_type", 0), keys=keys)
        resp = await self.service.FindCoordinator(pb, listener=conn.listener_name, any_endpoint=False)
        coordinators = [from_pb(c) for c in resp.coordinators]
        if batched:
            return {"throttle_time": 0, "coordinators": coordinators}
        answer = coordinators[0]
        answer["throttle_time"] = 0
        if answer["error_code"]:
            answer.update(node_id=-1, host="", port=-1)
        return answer

    async def join_group(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        version = request.api_version
        session_timeout_ms = ms(body.session_timeout)
        rebalance = getattr(body, "rebalance_timeout", None)
        req = JoinRequest(
            body.group_id,
            body.member_id,
            body.protocol_type,
            tuple(Protocol(p.name, p.metadata) for p in body.protocols),
            session_timeout_ms,
            ms(rebalance) if rebalance is not None else session_timeout_ms,
            group_instance_id=getattr(body, "group_instance_id", None),
            client_id=request.client_id or "",
            client_host=f"/{conn.peer.rsplit(':', 1)[0]}",
            requires_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
        )
        answer = from_pb(await self.service.join(req))
        answer["throttle_time"] = 0
        if not answer["protocol_name"] and version < 7:
            answer["protocol_name"] = ""
        elif not answer["protocol_name"]:
            answer["protocol_name"] = None
        answer["protocol_type"] = answer["protocol_type"] or None
        return answer

    async def sync_group(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = to_pb(request.body, group_pb2.SyncGroupRequest)
        answer = from_pb(await self.service.SyncGroup(pb))
        answer["throttle_time"] = 0
        answer["protocol_type"] = answer["protocol_type"] or None
        answer["protocol_name"] = answer["protocol_name"] or None
        return answer

    async def heartbeat(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = to_pb(request.body, group_pb2.HeartbeatRequest)
        answer = from_pb(await self.service.Heartbeat(pb))
        answer["throttle_time"] = 0
        return answer

    async def leave_group(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """v0-2 leave one member (``member_id``); v3+ a batch (KIP-345)."""
        body = request.body
        if request.api_version < 3:
            pb = group_pb2.LeaveGroupRequest(
                group_id=body.group_id, members=[group_pb2.LeaveGroupRequest.Member(member_id=body.member_id)]
            )
        else:
            pb = to_pb(body, group_pb2.LeaveGroupRequest)
        resp = await self.service.LeaveGroup(pb)
        answer = from_pb(resp)
        if request.api_version < 3 and not answer["error_code"] and resp.members:
            answer["error_code"] = resp.members[0].error.code  # the one member's own answer
        answer["throttle_time"] = 0
        return answer

    async def offset_commit(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """v2-4 carry a retention time; kraftlog keeps committed offsets by
        ``offsets.retention.minutes`` only, so a commit that asks for its own retention is refused
        (INVALID_REQUEST on each partition) rather than kept for another time than asked."""
        retention = ms(getattr(request.body, "retention_time", None))
        if retention != -1:
            current_request().refused_early("a retention time per commit is not kept")
            return {
                "throttle_time": 0,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": p.partition_index, "error_code": kerr.InvalidRequestError.error_code}
                            for p in t.partitions
                        ],
                    }
                    for t in request.body.topics
                ],
            }
        pb = to_pb(request.body, group_pb2.OffsetCommitRequest, {"generation_id": "generation_id_or_member_epoch"})
        if request.api_version < 6:  # no leader epoch in these versions: unknown
            for t in pb.topics:
                for p in t.partitions:
                    p.committed_leader_epoch = -1
        answer = from_pb(await self.service.OffsetCommit(pb))
        answer["throttle_time"] = 0
        return answer

    async def offset_fetch(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """v1-7 fetch one group's offsets (topics null: all); v8+ several groups (KIP-709)."""
        body = request.body
        service = self.service
        require_stable = bool(getattr(body, "require_stable", False))

        async def one(group_id: str, topics: Any) -> dict[str, Any]:
            pb = group_pb2.OffsetFetchRequest(group_id=group_id, require_stable=require_stable)
            if topics is None:
                pb.all_topics = True
            else:
                for t in topics:
                    pb.topics.add(name=t.name, partition_indexes=list(t.partition_indexes))
            answer = from_pb(await service.OffsetFetch(pb))
            if answer["error_code"] == kerr.UnstableOffsetCommitError.error_code:
                # Kafka answers it per partition only (there librdkafka retries it): the service's
                # group-level note of it is for its gRPC clients
                answer["error_code"] = 0
                if "error_message" in answer:
                    answer["error_message"] = None
            return answer

        if request.api_version >= 8:
            # each group is authorized by the service; a request naming none decides here
            current_request().authorized(AclOperation.DESCRIBE, ResourceType.GROUP, [g.group_id for g in body.groups])
            groups = []
            for g in body.groups:
                answer = await one(g.group_id, g.topics)
                answer["group_id"] = g.group_id
                groups.append(answer)
            return {"throttle_time": 0, "groups": groups}
        answer = await one(body.group_id, body.topics)
        answer["throttle_time"] = 0
        return answer

    async def offset_delete(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = group_pb2.OffsetDeleteRequest(group_id=body.group_id)
        for t in body.topics:
            pb.topics.add(name=t.name, partition_indexes=[p.partition_index for p in t.partitions])
        answer = from_pb(await self.service.OffsetDelete(pb))
        answer["throttle_time"] = 0
        return answer

    async def list_groups(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = to_pb(request.body, group_pb2.ListGroupsRequest)
        answer = from_pb(await self.service.ListGroups(pb))
        answer["throttle_time"] = 0
        return answer

    async def describe_groups(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = group_pb2.DescribeGroupsRequest(groups=list(request.body.groups))
        answer = from_pb(await self.service.DescribeGroups(pb))
        for g in answer["groups"]:
            g["authorized_operations"] = _authorized_operations(request, g)
            for m in g["members"]:
                m["group_instance_id"] = m["group_instance_id"] or None
        answer["throttle_time"] = 0
        return answer

    async def delete_groups(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = group_pb2.DeleteGroupsRequest(groups=list(request.body.groups_names))
        answer = from_pb(await self.service.DeleteGroups(pb))
        answer["throttle_time"] = 0
        return answer

    # ------------------------------------------------------------------ KIP-848

    async def consumer_group_heartbeat(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            client_id=request.client_id or "",
        )
        for name in ("instance_id", "rack_id", "server_assignor", "subscribed_topic_regex"):
            value = getattr(body, name, None)
            if value is not None:
                setattr(pb, name, value)  # an empty regex clears the member's (librdkafka sends one)
        rebalance = getattr(body, "rebalance_timeout", None)
        if rebalance is not None:
            pb.rebalance_timeout_ms = ms(rebalance)
        if body.subscribed_topic_names is not None:
            pb.subscribed_topic_names.names.extend(body.subscribed_topic_names)
        if body.topic_partitions is not None:
            pb.topic_partitions.SetInParent()
            for tp in body.topic_partitions:
                pb.topic_partitions.topics.add(topic_id=str(tp.topic_id), partitions=list(tp.partitions))
        client_host = "/" + conn.peer.rsplit(":", 1)[0].strip("[]")
        resp = await self.service.ConsumerGroupHeartbeat(pb, client_host=client_host)
        answer = from_pb(resp)
        answer["throttle_time"] = 0
        answer["member_id"] = resp.member_id or None
        answer["assignment"] = (
            {"topic_partitions": [_topic_partitions(t) for t in resp.assignment.topics]}
            if resp.HasField("assignment")
            else None
        )
        return answer

    async def consumer_group_describe(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = group_pb2.ConsumerGroupDescribeRequest(group_ids=list(request.body.group_ids))
        answer = from_pb(await self.service.ConsumerGroupDescribe(pb))
        for g in answer["groups"]:
            g["authorized_operations"] = _authorized_operations(request, g)
            for m in g["members"]:
                for key in ("assignment", "target_assignment"):
                    topics = (m[key] or {}).get("topics", [])
                    m[key] = {"topic_partitions": [_topic_partitions(t, with_name=True) for t in topics]}
        answer["throttle_time"] = 0
        return answer

    # ------------------------------------------------------------------ KIP-932

    async def share_group_heartbeat(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        body = request.body
        pb = group_pb2.ShareGroupHeartbeatRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            client_id=request.client_id or "",
        )
        if body.rack_id is not None:
            pb.rack_id = body.rack_id
        if body.subscribed_topic_names is not None:
            pb.subscribed_topic_names.SetInParent()
            pb.subscribed_topic_names.names.extend(body.subscribed_topic_names)
        client_host = "/" + conn.peer.rsplit(":", 1)[0].strip("[]")
        resp = await self.service.share.ShareGroupHeartbeat(pb, client_host=client_host)
        answer = from_pb(resp)
        answer["throttle_time"] = 0
        answer["member_id"] = resp.member_id or None
        answer["assignment"] = (
            {"topic_partitions": [_topic_partitions(t) for t in resp.assignment.topics]}
            if resp.HasField("assignment")
            else None
        )
        return answer

    async def share_group_describe(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        pb = group_pb2.ShareGroupDescribeRequest(group_ids=list(request.body.group_ids))
        answer = from_pb(await self.service.share.ShareGroupDescribe(pb))
        for g in answer["groups"]:
            g["authorized_operations"] = _authorized_operations(request, g)
            for m in g["members"]:
                topics = (m["assignment"] or {}).get("topics", [])
                m["assignment"] = {"topic_partitions": [_topic_partitions(t, with_name=True) for t in topics]}
        answer["throttle_time"] = 0
        return answer

    async def describe_share_group_offsets(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """DescribeShareGroupOffsets (90, v0-1; v1 adds the lag)."""
        pb = group_pb2.DescribeShareGroupOffsetsRequest()
        for g in request.body.groups:
            group = pb.groups.add(group_id=g.group_id, all_topics=g.topics is None)
            for t in g.topics or ():
                group.topics.add(topic_name=t.topic_name, partitions=list(t.partitions))
        answer = await self.service.share.DescribeShareGroupOffsets(pb)
        groups = []
        for g in answer.groups:
            topics = [
                {
                    "topic_name": t.topic_name,
                    "topic_id": parse_uuid(t.topic_id) if t.topic_id else None,
                    "partitions": [
                        {
                            "partition_index": p.partition,
                            "start_offset": p.start_offset,
                            "leader_epoch": p.leader_epoch,
                            "lag": p.lag,
                            "error_code": p.error.code,
                            "error_message": p.error.message or None if p.error.code else None,
                        }
                        for p in t.partitions
                    ],
                }
                for t in g.topics
            ]
            groups.append(
                {
                    "group_id": g.group_id,
                    "topics": topics,
                    "error_code": g.error.code,
                    "error_message": g.error.message or None if g.error.code else None,
                }
            )
        return {"throttle_time": 0, "groups": groups}

    async def alter_share_group_offsets(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """AlterShareGroupOffsets (91, v0)."""
        b = request.body
        pb = group_pb2.AlterShareGroupOffsetsRequest(group_id=b.group_id)
        for t in b.topics:
            topic = pb.topics.add(topic_name=t.topic_name)
            for p in t.partitions:
                topic.partitions.add(partition=p.partition_index, start_offset=p.start_offset)
        answer = await self.service.share.AlterShareGroupOffsets(pb)
        responses = [
            {
                "topic_name": t.topic_name,
                "topic_id": parse_uuid(t.topic_id) if t.topic_id else None,
                "partitions": [
                    {"partition_index": p.partition, "error_code": p.error.code, "error_message": _message(p.error)}
                    for p in t.partitions
                ],
            }
            for t in answer.topics
        ]
        top = {"error_code": answer.error.code, "error_message": _message(answer.error)}
        return {"throttle_time": 0, **top, "responses": responses}

    async def delete_share_group_offsets(self, request: ParsedRequest, conn: ConnectionInfo) -> dict[str, Any]:
        """DeleteShareGroupOffsets (92, v0)."""
        b = request.body
        pb = group_pb2.DeleteShareGroupOffsetsRequest(group_id=b.group_id, topic_names=[t.topic_name for t in b.topics])
        answer = await self.service.share.DeleteShareGroupOffsets(pb)
        responses = [
            {
                "topic_name": t.topic_name,
                "topic_id": parse_uuid(t.topic_id) if t.topic_id else None,
                "error_code": t.error.code,
                "error_message": _message(t.error),
            }
            for t in answer.topics
        ]
        top = {"error_code": answer.error.code, "error_message": _message(answer.error)}
        return {"throttle_time": 0, **top, "responses": responses}


def _message(error: Any) -> str | None:
    """Kafka's error message of an error_pb: null without an error."""
    return (error.message or None) if error.code else None


def _topic_partitions(t: Any, *, with_name: bool = False) -> dict[str, Any]:
    """A topic's partitions of an assignment (a protobuf message or its `from_pb` description)."""
    fields: dict[str, Any] = t if isinstance(t, dict) else {k: getattr(t, k) for k in ("topic_id", "partitions")}
    out = {"topic_id": fields["topic_id"], "partitions": list(fields["partitions"])}
    if with_name:
        out["topic_name"] = fields.get("topic_name", "")
    return out
