"""The controller mutation quota (KIP-599) in the controller's handlers, as Kafka's controller applies
it (`applyPartitionChangeQuota`): topic by topic, once a change is valid, in request order; a topic
met while the client's bucket is below zero is refused with THROTTLING_QUOTA_EXCEEDED and creates
nothing, the topics before it stand (review, issue 24: the broker refused or allowed whole requests,
and requests reaching the controllers over gRPC were never limited)."""

from __future__ import annotations

import kraftlog.quorum.controller as ctl
from kraftlog.common import errors as kerr
from kraftlog.metadata_log import TopicRecord
from kraftlog.proto import admin_pb2
from tests.unit.quorum.test_controller import Harness, create_request


class _Bucket:
    """A strict quota with ``tokens`` left: Kafka's rule, a change may take it below zero and the
    next one is refused."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.applied: list[int] = []

    def apply(self, partitions: int) -> None:
        if self.tokens < 0:
            raise kerr.ThrottlingQuotaExceededError(f"{-self.tokens} tokens short")
        self.tokens -= partitions
        self.applied.append(partitions)

    def throttle_time_ms(self) -> int:
        return max(0, -self.tokens) * 1000


def _with(h: Harness, quota: _Bucket) -> ctl.ControllerContext:
    ctx = h.ctx()
    ctx.partition_change_quota = quota
    return ctx


def test_create_topics_refuses_the_topics_after_the_bucket_went_below_zero() -> None:
    h = Harness()
    h.start_brokers([1, 2])
    quota = _Bucket(5)
    request = create_request(
        ("taken", 2, 1, None, None),
        ("invalid", 0, 1, None, None),  # not valid: costs nothing
        ("below-zero", 6, 1, None, None),  # 3 left: allowed, the bucket ends at -3
        ("refused", 1, 1, None, None),
        ("refused-too", 1, 1, None, None),
    )
    records, resp = ctl.create_topics(h.image, request, _with(h, quota))
    errors = [(t.name, t.error.name) for t in resp.topics]
    assert errors == [
        ("taken", "NONE"),
        ("invalid", "INVALID_PARTITIONS"),
        ("below-zero", "NONE"),
        ("refused", "THROTTLING_QUOTA_EXCEEDED"),
        ("refused-too", "THROTTLING_QUOTA_EXCEEDED"),
    ]
    assert quota.applied == [2, 6]
    assert sorted(r.name for r in records if isinstance(r, TopicRecord)) == ["below-zero", "taken"]


def test_delete_topics_and_create_partitions_apply_the_quota_per_topic() -> None:
    h = Harness()
    h.start_brokers([1, 2])
    for name in ("a", "b", "c"):
        h.create(name, 4, 1)
    quota = _Bucket(5)
    grow = admin_pb2.CreatePartitionsRequest(
        topics=[admin_pb2.CreatePartitionsRequest.Topic(name=n, count=8) for n in ("a", "b")]
    )
    _, resp = ctl.create_partitions(h.image, grow, _with(h, quota))
    assert [(r.name, r.error.name) for r in resp.results] == [("a", "NONE"), ("b", "NONE")]
    assert quota.applied == [4, 4] and quota.tokens == -3  # the second growth was met at 1 left
    records, resp = ctl.delete_topics(h.image, admin_pb2.DeleteTopicsRequest(names=["c", "a"]), _with(h, quota))
    assert [(t.name, t.error.name) for t in resp.topics] == [
        ("c", "THROTTLING_QUOTA_EXCEEDED"),
        ("a", "THROTTLING_QUOTA_EXCEEDED"),
    ]
    assert records == []
    quota.tokens = 4
    records, resp = ctl.delete_topics(h.image, admin_pb2.DeleteTopicsRequest(names=["c", "a"]), _with(h, quota))
    assert [(t.name, t.error.name) for t in resp.topics] == [("c", "NONE"), ("a", "NONE")]
    assert len(records) == 2 and quota.applied[-2:] == [4, 4]


def test_without_a_quota_nothing_is_limited() -> None:
    h = Harness()
    h.start_brokers([1])
    _, resp = ctl.create_topics(h.image, create_request(("big", 500, 1, None, None)), h.ctx())
    assert resp.topics[0].error.name == "NONE"
