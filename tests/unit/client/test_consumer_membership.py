"""A consumer's group membership against a scripted coordinator (issue 14; no sockets): heartbeats
only in a stable generation and only acting on their own generation, lost partitions told as lost
and never committed, the listener seeing the partitions it is told about, fatal errors, leader
epochs, `close`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kraftlog.client import Consumer, RebalanceListener
from kraftlog.client._metadata import TopicPartition
from kraftlog.client.consumer._consumer_group import GroupMembership
from kraftlog.client.consumer._consumer_groups import make_assignors
from kraftlog.client.consumer._consumer_protocol import encode_assignment
from kraftlog.common import errors as kerr
from kraftlog.proto import errors_pb2, group_pb2

TP0 = TopicPartition("t", 0)


def ok(code: int = 0) -> errors_pb2.Error:
    return errors_pb2.Error(code=code, name="", message="")


class Coordinator:
    """A scripted GroupService: ``handlers[rpc](request) -> response``; every call is recorded."""

    def __init__(self, assignment: list[TopicPartition]) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.generation = 0
        self.assignment = assignment
        self.handlers: dict[str, Callable[[Any], Any]] = {
            "FindCoordinator": lambda r: group_pb2.FindCoordinatorResponse(
                coordinators=[
                    group_pb2.FindCoordinatorResponse.Coordinator(key=r.keys[0], host="h", port=1, error=ok())
                ]
            ),
            "JoinGroup": self.join,
            "SyncGroup": lambda r: group_pb2.SyncGroupResponse(
                error=ok(), assignment=encode_assignment(self.assignment)
            ),
            "Heartbeat": lambda r: group_pb2.HeartbeatResponse(error=ok()),
            "LeaveGroup": lambda r: group_pb2.LeaveGroupResponse(error=ok()),
            "OffsetCommit": lambda r: group_pb2.OffsetCommitResponse(
                topics=[
                    group_pb2.OffsetCommitResponse.Topic(
                        name=t.name,
                        partitions=[
                            group_pb2.OffsetCommitResponse.Partition(partition_index=p.partition_index, error=ok())
                            for p in t.partitions
                        ],
                    )
                    for t in r.topics
                ]
            ),
            "OffsetFetch": lambda r: group_pb2.OffsetFetchResponse(error=ok()),
        }

    def join(self, r: Any) -> Any:
        self.generation += 1
        return group_pb2.JoinGroupResponse(
            error=ok(), generation_id=self.generation, protocol_type="consumer", protocol_name="range", leader="x",
            member_id="m1",
        )  # fmt: skip

    def rpcs(self, name: str) -> list[Any]:
        return [r for n, r in self.calls if n == name]


class _Stub:
    def __init__(self, coordinator: Coordinator) -> None:
        self.c = coordinator

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(request: Any, timeout: float | None = None) -> Any:
            self.c.calls.append((name, request))
            return self.c.handlers[name](request)

        return call


class _Pool:
    def __init__(self, coordinator: Coordinator) -> None:
        self.c = coordinator

    def group_stub(self, address: str) -> _Stub:
        return _Stub(self.c)


class _Metadata:
    def candidates(self) -> list[str]:
        return ["h:1"]

    def add_topics(self, topics: Any) -> None:
        return None

    def partitions_for_topic(self, topic: str) -> list[int]:
        return [0]

    def close(self) -> None:
        return None


def consumer(coordinator: Coordinator, **settings: Any) -> Consumer:
    """A real Consumer whose group talks to ``coordinator`` (its own membership closed first)."""
    c = Consumer("127.0.0.1:1", group_id="g", **settings)
    assert c._group is not None
    c._group.close()
    c._metadata = _Metadata()  # type: ignore[assignment]
    c._group = GroupMembership(
        "g",
        _Pool(coordinator),  # type: ignore[arg-type]
        _Metadata(),  # type: ignore[arg-type]
        make_assignors("range"),
        heartbeat_interval_ms=settings.get("heartbeat_interval_ms", 3000),
    )
    return c


def settle(c: Consumer, what: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "timed out"
        c._maybe_rebalance()
        time.sleep(0.01)


class Recorder(RebalanceListener):
    def __init__(self, consumer: Consumer | None = None) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []
        self.consumer = consumer

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls.append(("assigned", assigned))
        if self.consumer is not None and assigned:
            self.consumer.seek(("t", 0), 42)  # the consumer already holds what it is told about

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.calls.append(("lost", lost))


def test_listener_may_seek_in_on_assigned_and_close_revokes() -> None:
    coord = Coordinator([TP0])
    c = consumer(coord, enable_auto_commit=False)
    listener = Recorder(c)
    c.subscribe(["t"], listener=listener)
    settle(c, lambda: TP0 in c.assignment())
    assert c.position(("t", 0)) == 42
    c.close()
    assert listener.calls == [("assigned", {TP0}), ("revoked", {TP0})]
    assert coord.rpcs("LeaveGroup")


def test_partitions_lost_are_told_as_lost_and_never_committed() -> None:
    coord = Coordinator([TP0])
    coord.handlers["OffsetFetch"] = lambda r: group_pb2.OffsetFetchResponse(
        error=ok(),
        topics=[
            group_pb2.OffsetFetchResponse.Topic(
                name="t", partitions=[group_pb2.OffsetFetchResponse.Partition(partition_index=0, committed_offset=5)]
            )
        ],
    )
    c = consumer(coord, enable_auto_commit=True, heartbeat_interval_ms=20)
    listener = Recorder()
    c.subscribe(["t"], listener=listener)
    settle(c, lambda: TP0 in c.assignment())
    coord.handlers["Heartbeat"] = lambda r: group_pb2.HeartbeatResponse(error=ok(kerr.UnknownMemberIdError.error_code))
    settle(c, lambda: ("lost", {TP0}) in listener.calls)
    assert not coord.rpcs("OffsetCommit")  # nothing committed for partitions the member lost
    assert ("revoked", {TP0}) not in listener.calls
    c.close()


def test_close_after_the_member_was_thrown_out_tells_lost_and_commits_nothing() -> None:
    coord = Coordinator([TP0])
    c = consumer(coord, enable_auto_commit=True, heartbeat_interval_ms=20)
    listener = Recorder()
    c.subscribe(["t"], listener=listener)
    settle(c, lambda: TP0 in c.assignment())
    coord.handlers["Heartbeat"] = lambda r: group_pb2.HeartbeatResponse(error=ok(kerr.UnknownMemberIdError.error_code))
    deadline = time.monotonic() + 5
    while c._group is not None and c._group.generation > 0:  # thrown out; no poll tells it yet
        assert time.monotonic() < deadline
        time.sleep(0.01)
    c.close()
    assert listener.calls[-1] == ("lost", {TP0}) and ("revoked", {TP0}) not in listener.calls
    assert not coord.rpcs("OffsetCommit")


def test_heartbeat_answers_about_an_older_generation_change_nothing() -> None:
    coord = Coordinator([TP0])
    gate = threading.Event()
    original_join = coord.join

    def slow_join(r: Any) -> Any:
        gate.wait(2)
        return original_join(r)

    c = consumer(coord, enable_auto_commit=False, heartbeat_interval_ms=20)
    c.subscribe(["t"])
    gate.set()
    settle(c, lambda: TP0 in c.assignment())
    group = c._group
    assert group is not None and group.generation == 1
    # the group rebalances: while this member joins again, heartbeats must not go out, and an
    # answer for generation 1 arriving late must not undo generation 2
    gate.clear()
    coord.handlers["JoinGroup"] = slow_join
    coord.handlers["Heartbeat"] = lambda r: group_pb2.HeartbeatResponse(
        error=ok(kerr.IllegalGenerationError.error_code)
    )
    group.request_rejoin()
    c._maybe_rebalance()
    before = len(coord.rpcs("Heartbeat"))
    time.sleep(0.2)
    assert len(coord.rpcs("Heartbeat")) == before  # no heartbeat while rebalancing
    gate.set()
    coord.handlers["Heartbeat"] = lambda r: group_pb2.HeartbeatResponse(error=ok())
    settle(c, lambda: not group.rebalancing and group.generation == 2)
    time.sleep(0.1)
    assert group.generation == 2 and not group.needs_rejoin
    c.close()


def test_a_fatal_join_error_is_raised_and_the_member_rejoins_next_time() -> None:
    coord = Coordinator([TP0])
    coord.handlers["JoinGroup"] = lambda r: group_pb2.JoinGroupResponse(
        error=ok(kerr.InconsistentGroupProtocolError.error_code)
    )
    c = consumer(coord, enable_auto_commit=False)
    c.subscribe(["t"])
    c._maybe_rebalance()
    with pytest.raises(kerr.InconsistentGroupProtocolError):
        settle(c, lambda: False, timeout_s=5)
    assert c._group is not None and c._group.needs_rejoin
    coord.handlers["JoinGroup"] = coord.join
    settle(c, lambda: TP0 in c.assignment())
    c.close()


def test_fenced_instance_is_fatal_at_the_next_poll() -> None:
    coord = Coordinator([TP0])
    c = consumer(coord, enable_auto_commit=False, heartbeat_interval_ms=20)
    c.subscribe(["t"])
    settle(c, lambda: TP0 in c.assignment())
    coord.handlers["Heartbeat"] = lambda r: group_pb2.HeartbeatResponse(error=ok(kerr.FencedInstanceIdError.error_code))
    with pytest.raises(kerr.FencedInstanceIdError):
        settle(c, lambda: False, timeout_s=5)
    c._group = None  # closing would raise again; the membership is done
    c.close()


def test_commit_keeps_leader_epoch_zero() -> None:
    coord = Coordinator([TP0])
    c = consumer(coord, enable_auto_commit=False)
    c.subscribe(["t"])
    settle(c, lambda: TP0 in c.assignment())
    state = c._assignment[TP0]
    state.seek(10, epoch=0)
    c.commit()
    sent = coord.rpcs("OffsetCommit")[-1]
    assert [(p.committed_offset, p.committed_leader_epoch) for t in sent.topics for p in t.partitions] == [(10, 0)]
    c.close()


def test_commit_during_a_rebalance_is_refused() -> None:
    coord = Coordinator([TP0])
    gate = threading.Event()
    c = consumer(coord, enable_auto_commit=False)
    c.subscribe(["t"])
    settle(c, lambda: TP0 in c.assignment())
    original_join = coord.join
    coord.handlers["JoinGroup"] = lambda r: (gate.wait(2), original_join(r))[1]
    assert c._group is not None
    c._group.request_rejoin()
    c._maybe_rebalance()
    with pytest.raises(kerr.RebalanceInProgressError):
        c.commit({("t", 0): 1})
    gate.set()
    c.close()
