"""AlterShareGroupOffsets and DeleteShareGroupOffsets (issue 27): only an empty share group's
offsets change (NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND), the group's record then counts the altered
partitions initialized and forgets the deleted topics (surviving a reload); the service authorizes
as Kafka (READ / DELETE on the group, READ on the topics), initializes each partition at the next
state epoch, deletes each initialized partition's state, and deletes a share group's state before
the group (DeleteGroups)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from test_group_service_share import _Calls, _run
from test_group_share import T1, T2, Driver, joined

from kraftlog.broker.groups._group_service_share import ShareGroupService
from kraftlog.broker.share import DeleteStateRequest, InitializeStateRequest, ShareStateResult
from kraftlog.common import errors as kerr
from kraftlog.common.security import AclOperation, ResourceType
from kraftlog.proto import group_pb2


def test_only_an_empty_share_group_has_its_offsets_changed_and_the_record_survives_a_reload() -> None:
    d = Driver()
    joined(d, ["a"], ("q", "r"))
    assert d.shard.share.offsets_alterable("g")[0] is kerr.NonEmptyGroupError
    assert d.shard.share.offsets_alterable("nope")[0] is kerr.GroupIdNotFoundError
    error, _out = d.shard.share.offsets_changed("g", {}, {T2}, object())
    assert error is kerr.NonEmptyGroupError
    d.beat("a", -1)
    assert d.shard.share.offsets_alterable("g") == (None, "")
    token = object()
    error, out = d.shard.share.offsets_changed("g", {T1: ("q", {0})}, {T2}, token)
    assert error is None
    d.absorb(out)
    assert token in d.answers and d.answers.pop(token) is None
    assert d.shard.share.groups["g"].initialized == {T1: ("q", {0})}
    assert d.reloaded().share.groups["g"].initialized == {T1: ("q", {0})}
    # nothing to change: answered at once, nothing written
    token = object()
    error, out = d.shard.share.offsets_changed("g", {}, set(), token)
    assert error is None and not out.records and out.responses == [(token, None)]


class _Shard:
    """A shard with one empty share group holding topic t's partitions 0 and 1."""

    def __init__(self, tid: str) -> None:
        group = SimpleNamespace(initialized={tid: ("t", {0, 1})}, initializing={}, members={})
        self.changes: list[tuple[Any, set[str]]] = []
        self.share = SimpleNamespace(
            live=lambda g: group if g == "g" else None,
            offsets_alterable=lambda g: (None, "") if g == "g" else (kerr.GroupIdNotFoundError, "no"),
            offsets_changed=self._changed,
        )
        self.tokens: list[Any] = []

    def _changed(self, group_id: str, initialized: Any, forgotten: set[str], token: Any) -> Any:
        self.changes.append((initialized, forgotten))
        self.tokens.append(token)
        return None, "out"


def _service(tid: str, calls: list[Any]) -> tuple[ShareGroupService, _Shard]:
    shard = _Shard(tid)
    topics = {"t": SimpleNamespace(topic_id=tid, partitions={0: None, 1: None})}
    image = SimpleNamespace(
        topics=SimpleNamespace(get_by_name=topics.get), features=SimpleNamespace(levels={"share.version": 1})
    )

    def run(_shard: Any, _fn: Any) -> None:
        shard.tokens[-1].set_result(None)

    coordinator = SimpleNamespace(run=run)
    service = ShareGroupService(coordinator, lambda: image, lambda: 0, lambda _g: shard, None)  # type: ignore[arg-type]
    forgotten: list[str] = []

    async def state(req: Any) -> Any:
        calls.append(req)
        return ShareStateResult(req.topic_id, req.partition, state_epoch=4)

    async def forget(group_id: str) -> None:
        forgotten.append(group_id)

    service.share_state = state
    service.forget_held = forget
    return service, shard


def test_alter_initializes_each_partition_at_the_next_state_epoch_and_records_it() -> None:
    tid = "7a0b5f3e-8c65-4c43-9b1e-3f9d2a6f4e01"
    calls: list[Any] = []
    service, shard = _service(tid, calls)
    R = group_pb2.AlterShareGroupOffsetsRequest
    request = R(
        group_id="g",
        topics=[
            R.Topic(topic_name="t", partitions=[R.Partition(partition=1, start_offset=7)]),
            R.Topic(topic_name="t", partitions=[R.Partition(partition=5, start_offset=0)]),
            R.Topic(topic_name="gone", partitions=[R.Partition(partition=0, start_offset=0)]),
        ],
    )
    answer = _run(service.AlterShareGroupOffsets(request), set())
    assert answer.error.code == 0
    codes = [(t.topic_name, p.partition, p.error.code) for t in answer.topics for p in t.partitions]
    unknown = kerr.UnknownTopicOrPartitionError.error_code
    assert codes == [("t", 1, 0), ("t", 5, unknown), ("gone", 0, unknown)]
    assert [r for r in calls if isinstance(r, InitializeStateRequest)] == [InitializeStateRequest("g", tid, 1, 5, 7)]
    assert shard.changes == [({tid: ("t", {1})}, set())]
    refused = _run(service.AlterShareGroupOffsets(R(group_id="g")), {(AclOperation.READ, ResourceType.GROUP, "g")})
    assert refused.error.code == kerr.GroupAuthorizationFailedError.error_code
    assert (
        _run(service.AlterShareGroupOffsets(R(group_id="x")), set()).error.code == kerr.GroupIdNotFoundError.error_code
    )


def test_delete_offsets_deletes_each_partitions_state_and_delete_groups_the_groups() -> None:
    tid = "7a0b5f3e-8c65-4c43-9b1e-3f9d2a6f4e01"
    calls: list[Any] = []
    service, shard = _service(tid, calls)
    R = group_pb2.DeleteShareGroupOffsetsRequest
    answer = _run(service.DeleteShareGroupOffsets(R(group_id="g", topic_names=["t", "gone"])), set())
    assert [(t.topic_name, t.error.code) for t in answer.topics] == [
        ("t", 0),
        ("gone", kerr.UnknownTopicOrPartitionError.error_code),
    ]
    assert calls == [DeleteStateRequest("g", tid, 0), DeleteStateRequest("g", tid, 1)]
    assert shard.changes == [({}, {tid})]
    denied = {(AclOperation.DELETE, ResourceType.GROUP, "g")}
    refused = _run(service.DeleteShareGroupOffsets(R(group_id="g", topic_names=["t"])), denied)
    assert refused.error.code == kerr.GroupAuthorizationFailedError.error_code
    calls.clear()
    assert asyncio.run(service.delete_group_state("g")) is None
    assert calls == [DeleteStateRequest("g", tid, 0), DeleteStateRequest("g", tid, 1)]


def test_the_offsets_calls_are_refused_before_any_shard_without_the_group_acl() -> None:
    calls = _Calls()
    alter = group_pb2.AlterShareGroupOffsetsRequest(group_id="g")
    answer = _run(calls.AlterShareGroupOffsets(alter), set())
    assert answer.error.code == kerr.NotCoordinatorError.error_code
    calls.reached.clear()
    answer = _run(calls.AlterShareGroupOffsets(alter), {(AclOperation.READ, ResourceType.GROUP, "g")})
    assert answer.error.code == kerr.GroupAuthorizationFailedError.error_code and not calls.reached


def test_the_described_lag_is_the_log_end_less_the_start_offset_and_the_delivered() -> None:
    tid = "7a0b5f3e-8c65-4c43-9b1e-3f9d2a6f4e01"
    service, _shard = _service(tid, [])
    summaries = {
        0: ShareStateResult(tid, 0, start_offset=40, delivery_complete_count=2),
        1: ShareStateResult(tid, 1, start_offset=40, delivery_complete_count=-1),  # unknown: no lag
        2: ShareStateResult(tid, 2, start_offset=40, delivery_complete_count=0),  # no log end known
        3: ShareStateResult(tid, 3),  # not initialized
    }
    asked: list[Any] = []

    async def summary(req: Any) -> Any:
        return summaries[req.partition]

    async def ends(parts: Any) -> dict[tuple[str, int], int]:
        asked.append(list(parts))
        return {("t", 0): 50, ("t", 3): 9}

    service.state_summary = summary
    service.latest_offsets = ends
    R = group_pb2.DescribeShareGroupOffsetsRequest
    request = R(groups=[R.Group(group_id="g", topics=[R.Topic(topic_name="t", partitions=[0, 1, 2, 3])])])
    answer = _run(service.DescribeShareGroupOffsets(request), set())
    assert [(p.partition, p.lag) for p in answer.groups[0].topics[0].partitions] == [(0, 8), (1, -1), (2, -1), (3, -1)]
    assert asked == [[("t", 0), ("t", 2)]]  # only the partitions whose lag can be computed
