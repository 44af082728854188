"""A consumer of the KIP-848 protocol against the real coordinator core (issue 14; no sockets): the
client's `ConsumerProtocolMembership` heartbeats into a `GroupShard` whose writes commit at once.
A lost answer is recovered by a full heartbeat; a fenced member gives its partitions up (listener
told they were lost) before it rejoins; a member never holds a partition another one was given."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from kraftlog.broker.groups._group_consumer_types import HeartbeatRequest
from kraftlog.broker.groups._group_shard import GroupShard, GroupShardConfig
from kraftlog.broker.groups._group_shard_types import ShardOutcome
from kraftlog.client import Consumer, RebalanceListener
from kraftlog.client._metadata import TopicPartition
from kraftlog.client.consumer._consumer_membership import ConsumerProtocolMembership
from kraftlog.common import errors as kerr
from kraftlog.proto import errors_pb2, group_pb2

TOPIC_ID = "33333333-3333-4333-8333-333333333333"


class Coordinator:
    """The group core behind a scripted GroupService; ``lose`` drops the next answers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.shard = GroupShard(0, GroupShardConfig(), random.Random(1), 0)
        self.lose = 0
        self.lose_for = ""  # only answers to this member id are lost
        self.calls: list[Any] = []

    def heartbeat(self, r: Any) -> Any:
        req = HeartbeatRequest(
            r.group_id,
            r.member_id,
            r.member_epoch,
            instance_id=r.instance_id if r.HasField("instance_id") else None,
            rebalance_timeout_ms=r.rebalance_timeout_ms if r.HasField("rebalance_timeout_ms") else -1,
            subscribed_topic_names=tuple(r.subscribed_topic_names.names)
            if r.HasField("subscribed_topic_names")
            else None,
            owned=tuple((t.topic_id, tuple(sorted(t.partitions))) for t in r.topic_partitions.topics)
            if r.HasField("topic_partitions")
            else None,
        )
        answers: dict[object, Any] = {}
        with self.lock:
            self.calls.append(r)
            self.absorb(self.shard.consumer_heartbeat(req, "t", self.now, {"t": (TOPIC_ID, 4)}.get), answers)
            lost = self.lose > 0 and r.member_id == self.lose_for and r.member_epoch > 0
            if lost:
                self.lose -= 1
        if lost:
            raise kerr.CoordinatorNotAvailableError("the answer was lost")
        a = answers["t"]
        out = group_pb2.ConsumerGroupHeartbeatResponse(
            error=errors_pb2.Error(
                code=a.error.error_code if a.error else 0, name=a.error.error_name if a.error else ""
            ),
            member_id=a.member_id,
            member_epoch=a.member_epoch,
            heartbeat_interval_ms=50,
        )
        if a.assignment is not None:
            out.assignment.SetInParent()
            for t, ps in a.assignment:
                out.assignment.topics.add(topic_id=t, partitions=ps)
        return out

    def absorb(self, out: ShardOutcome, answers: dict[object, Any]) -> None:
        for token, response in out.responses:
            answers[token] = response
        if out.records:
            assert out.then is not None
            self.absorb(out.then(None, self.now), answers)

    def owners(self) -> dict[int, list[str]]:
        group = self.shard.consumer_groups["g"]
        out: dict[int, list[str]] = {}
        for m in group.members.values():
            for _t, ps in (*m.assigned, *m.pending_revocation):
                for p in ps:
                    out.setdefault(p, []).append(m.member_id)
        return out


class _Stub:
    def __init__(self, c: Coordinator) -> None:
        self.c = c

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(request: Any, timeout: float | None = None) -> Any:
            if name == "FindCoordinator":
                return group_pb2.FindCoordinatorResponse(
                    coordinators=[group_pb2.FindCoordinatorResponse.Coordinator(key="g", host="h", port=1)]
                )
            if name == "ConsumerGroupHeartbeat":
                return self.c.heartbeat(request)
            if name == "OffsetFetch":
                return group_pb2.OffsetFetchResponse()
            raise AssertionError(name)

        return call


class _Pool:
    def __init__(self, c: Coordinator) -> None:
        self.c = c

    def group_stub(self, address: str) -> _Stub:
        return _Stub(self.c)


class _Metadata:
    def candidates(self) -> list[str]:
        return ["h:1"]

    def add_topics(self, topics: Any) -> None:
        return None

    def partitions_for_topic(self, topic: str) -> list[int]:
        return [0, 1, 2, 3]

    def topic_id(self, topic: str) -> str | None:
        return TOPIC_ID if topic == "t" else None

    def topic_name(self, topic_id: str) -> str | None:
        return "t" if topic_id == TOPIC_ID else None

    def request_update(self) -> int:
        return 0

    def close(self) -> None:
        return None


class Recorder(RebalanceListener):
    def __init__(self, coordinator: Coordinator) -> None:
        self.events: list[tuple[str, set[TopicPartition], int]] = []
        self.c = coordinator

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", revoked, len(self.c.calls)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", assigned, len(self.c.calls)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append(("lost", lost, len(self.c.calls)))


def consumer(c: Coordinator, listener: RebalanceListener | None = None) -> Consumer:
    con = Consumer("127.0.0.1:1", group_id="g", group_protocol="consumer", enable_auto_commit=False)
    assert con._group is not None
    con._group.close()
    con._metadata = _Metadata()  # type: ignore[assignment]
    con._group = ConsumerProtocolMembership("g", _Pool(c), _Metadata(), retry_backoff_ms=10)  # type: ignore[arg-type]
    con._fetch_committed = lambda timeout_s: None  # type: ignore[method-assign]
    con.subscribe(["t"], listener=listener)
    return con


def settle(consumers: list[Consumer], what: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "timed out"
        for con in consumers:
            con._maybe_rebalance()
        time.sleep(0.01)


def test_a_lost_answer_is_recovered_by_a_full_heartbeat() -> None:
    c = Coordinator()
    a = consumer(c)
    try:
        settle([a], lambda: len(a.assignment()) == 4)
        c.lose, c.lose_for = 1, a.group_metadata().member_id  # the answer telling a to give two up is lost
        b = consumer(c)
        try:
            settle([a, b], lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2)
            assert all(len(owners) == 1 for owners in c.owners().values())
            assert c.lose == 0  # the answer really was lost
        finally:
            b.close()
    finally:
        a.close()


def test_a_fenced_member_lets_go_before_it_rejoins() -> None:
    c = Coordinator()
    rec = Recorder(c)
    a = consumer(c, rec)
    try:
        settle([a], lambda: len(a.assignment()) == 4)
        member = a.group_metadata().member_id
        with c.lock:  # its session runs out on the coordinator
            c.now += 60_000
            c.absorb(c.shard.poll(c.now), {})
        assert member not in c.shard.consumer_groups["g"].members
        settle([a], lambda: any(e[0] == "lost" for e in rec.events) and len(a.assignment()) == 4)
        lost_at = next(e[2] for e in rec.events if e[0] == "lost")
        rejoin = next(i for i, r in enumerate(c.calls) if i > 0 and r.member_epoch == 0)
        assert rejoin >= lost_at  # the rejoin went out only after the listener heard of the loss
        assert a.group_metadata().generation_id > 0
    finally:
        a.close()


def test_members_never_share_a_partition_while_they_rebalance() -> None:
    c = Coordinator()
    members = [consumer(c) for _ in range(3)]
    try:
        shared: list[dict[int, list[str]]] = []

        def check() -> bool:
            owned = [m.assignment() for m in members]
            held = [tp for o in owned for tp in o]
            if len(held) != len(set(held)):
                shared.append(c.owners())
            return sum(len(o) for o in owned) == 4 and all(len(o) >= 1 for o in owned)

        settle(members, check)
        assert not shared
    finally:
        for m in members:
            m.close()
