"""ShareGroupHeartbeat and ShareGroupDescribe are authorized as Kafka's KafkaApis: READ on the group
and DESCRIBE on every subscribed topic for a heartbeat, DESCRIBE on each group for a describe,
before any shard is reached (issue 27)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from kraftlog.broker.coordinator import ShardUnavailable
from kraftlog.broker.groups._group_service_share import ShareGroupService
from kraftlog.common import errors as kerr
from kraftlog.common.security import ANONYMOUS, AclOperation, RequestContext, ResourceType, Session, request_scope
from kraftlog.proto import group_pb2


class _Calls(ShareGroupService):
    """The share calls over a coordinator that has no shard here (NOT_COORDINATOR)."""

    def __init__(self) -> None:
        self.reached: list[str] = []

        def shard(group_id: str) -> Any:
            self.reached.append(group_id)
            raise ShardUnavailable(kerr.NotCoordinatorError)

        async def parked(_shard: Any, _call: Any) -> Any:
            raise AssertionError("no shard is reached")

        coordinator: Any = None
        # an image with share.version 1 (share groups on) and nothing else
        image: Any = SimpleNamespace(features=SimpleNamespace(levels={"share.version": 1}))
        super().__init__(coordinator, lambda: image, lambda: 0, shard, parked)  # type: ignore[arg-type]


def _run(call: Any, denied: set[tuple[AclOperation, ResourceType, str]]) -> Any:
    def authorize(_session: Session, op: AclOperation, kind: ResourceType, name: str | None) -> bool:
        return (op, kind, name) not in denied

    ctx = RequestContext(Session(ANONYMOUS, "127.0.0.1"), api="ShareGroupHeartbeat", authorize_fn=authorize)

    async def scoped() -> Any:
        with request_scope(ctx):
            return await call

    return asyncio.run(scoped())


def _heartbeat(topics: list[str]) -> Any:
    req = group_pb2.ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0)
    req.subscribed_topic_names.names.extend(topics)
    return req


def test_a_heartbeat_needs_read_on_the_group_and_describe_on_its_topics() -> None:
    calls = _Calls()
    denied_group = {(AclOperation.READ, ResourceType.GROUP, "g")}
    answer = _run(calls.ShareGroupHeartbeat(_heartbeat(["a"]), client_host="/h"), denied_group)
    assert answer.error.code == kerr.GroupAuthorizationFailedError.error_code
    denied_topic = {(AclOperation.DESCRIBE, ResourceType.TOPIC, "b")}
    answer = _run(calls.ShareGroupHeartbeat(_heartbeat(["a", "b"]), client_host="/h"), denied_topic)
    assert answer.error.code == kerr.TopicAuthorizationFailedError.error_code
    assert calls.reached == []
    answer = _run(calls.ShareGroupHeartbeat(_heartbeat(["a"]), client_host="/h"), denied_topic)
    assert answer.error.code == kerr.NotCoordinatorError.error_code and calls.reached == ["g"]


def test_describe_needs_describe_on_each_group() -> None:
    calls = _Calls()
    request = group_pb2.ShareGroupDescribeRequest(group_ids=["g", "h"])
    answer = _run(calls.ShareGroupDescribe(request), {(AclOperation.DESCRIBE, ResourceType.GROUP, "g")})
    assert [(g.group_id, g.error.code) for g in answer.groups] == [
        ("g", kerr.GroupAuthorizationFailedError.error_code),
        ("h", kerr.NotCoordinatorError.error_code),
    ]
    assert calls.reached == ["h"]


def test_describe_share_group_offsets_asks_the_share_coordinator_for_each_partition() -> None:
    from types import SimpleNamespace

    from kraftlog.broker.share import ShareStateResult

    tid = "7a0b5f3e-8c65-4c43-9b1e-3f9d2a6f4e01"
    groups = {"g": SimpleNamespace(initialized={tid: ("t", {0, 1})})}
    shard = SimpleNamespace(share=SimpleNamespace(live=groups.get))
    topics = {"t": SimpleNamespace(topic_id=tid), "hidden": SimpleNamespace(topic_id="x")}
    image = SimpleNamespace(
        topics=SimpleNamespace(get_by_name=topics.get), features=SimpleNamespace(levels={"share.version": 1})
    )
    asked: list[tuple[str, str, int]] = []

    async def summary(req: Any) -> Any:
        asked.append((req.group_id, req.topic_id, req.partition))
        if req.partition == 1:
            return ShareStateResult(req.topic_id, 1, kerr.CoordinatorLoadInProgressError, "loading")
        return ShareStateResult(req.topic_id, req.partition, start_offset=40, leader_epoch=3)

    calls = ShareGroupService(None, lambda: image, lambda: 0, lambda _g: shard, None)  # type: ignore[arg-type]
    calls.state_summary = summary
    R = group_pb2.DescribeShareGroupOffsetsRequest
    request = R(
        groups=[
            R.Group(group_id="g", all_topics=True),
            R.Group(group_id="g", topics=[R.Topic(topic_name=n, partitions=[0]) for n in ("t", "gone", "hidden")]),
            R.Group(group_id="not-share", all_topics=True),
            R.Group(group_id="denied", all_topics=True),
        ]
    )
    denied = {
        (AclOperation.DESCRIBE, ResourceType.GROUP, "denied"),
        (AclOperation.DESCRIBE, ResourceType.TOPIC, "hidden"),
    }
    answer = _run(calls.DescribeShareGroupOffsets(request), denied)

    def parts(g: Any) -> list[tuple[str, int, int, int, int]]:
        return [
            (t.topic_name, p.partition, p.start_offset, p.leader_epoch, p.error.code)
            for t in g.topics
            for p in t.partitions
        ]

    every, named, not_share, refused = answer.groups
    assert parts(every) == [("t", 0, 40, 3, 0), ("t", 1, -1, -1, kerr.CoordinatorLoadInProgressError.error_code)]
    assert parts(named) == [
        ("t", 0, 40, 3, 0),
        ("gone", 0, -1, -1, kerr.UnknownTopicOrPartitionError.error_code),
        ("hidden", 0, -1, -1, kerr.TopicAuthorizationFailedError.error_code),
    ]
    assert not_share.error.code == kerr.GroupIdNotFoundError.error_code
    assert refused.error.code == kerr.GroupAuthorizationFailedError.error_code
    assert asked == [("g", tid, 0), ("g", tid, 1), ("g", tid, 0)]  # nothing asked for refused topics
